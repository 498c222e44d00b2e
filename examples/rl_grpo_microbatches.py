"""GRPO-style driver planning with thdpack.rl: rollouts of 8 responses per prompt, every DP rank's
micro-batches under a token cap, each prompt's responses kept together.

    /usr/bin/python3 examples/rl_grpo_microbatches.py [--dp 4] [--prompts 64] [--cap 16384]

The driver (verl's trainer, NeMo-RL's controller) holds every rollout's length; thdpack returns, for
every DP rank, lists of rollout indices, one list per micro-batch. A prompt whose responses
together exceed one micro-batch is kept on one DP rank in consecutive micro-batches.
"""

import argparse

import numpy as np

from thdpack.rl import dp_microbatches


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dp", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--responses", type=int, default=8)
    ap.add_argument("--cap", type=int, default=16384, help="max_seqlen_per_dp_cp_rank")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    n = args.prompts * args.responses
    lengths = np.clip(rng.lognormal(np.log(1500), 1.0, n), 64, args.cap).astype(np.int64)
    lengths[:args.responses] = args.cap // 2  # prompt 0: long responses, more than one pack
    prompt_of = np.repeat(np.arange(args.prompts), args.responses)

    plan = dp_microbatches(lengths, dp=args.dp, max_seqlen_per_dp_cp_rank=args.cap,
                           group_ids=prompt_of, model="llama3-8b")

    # What every framework needs to rely on, checked.
    assert sorted(i for rank in plan for mb in rank for i in mb) == list(range(n))
    assert len({len(rank) for rank in plan}) == 1
    assert all(lengths[mb].sum() <= args.cap for rank in plan for mb in rank)
    for p in range(args.prompts):
        holders = {(r, k) for r, rank in enumerate(plan) for k, mb in enumerate(rank)
                   if p in set(prompt_of[mb])}
        assert len({r for r, _ in holders}) == 1, f"prompt {p} split across DP ranks"

    quadratic = lambda mb: float((lengths[mb].astype(float) ** 2).sum())  # noqa: E731
    for r, rank in enumerate(plan):
        tokens = sum(int(lengths[mb].sum()) for mb in rank)
        attention = sum(quadratic(mb) for mb in rank)
        print(f"DP rank {r}: {len(rank)} micro-batches, {tokens} tokens, "
              f"sum L^2 {attention / 1e9:.2f}e9")
    print(f"prompt 0 ({int(lengths[:args.responses].sum())} tokens) is on one rank in "
          f"consecutive micro-batches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
