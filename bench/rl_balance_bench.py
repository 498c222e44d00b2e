"""thdpack.rl against the installed verl and a longest-first greedy on seeded inputs, one process.

    PYTHONPATH=build/python python bench/rl_balance_bench.py [--seeds 200]

Needs torch, tensordict and verl (the interpreter that runs verl). Three parts:

1. GRPO batches (32 prompts x 8 responses, group id = prompt, dp 8, a 16384-token cap, some groups
   over the cap): the slowest DP rank of thdpack's ``dp_microbatches`` against (a) the
   longest-first greedy over groups (token sums, each group to the lightest rank) and (b) verl's
   group-keeping path (``get_group_balanced_partitions`` over the ranks, then
   ``rearrange_micro_batches`` on each rank, the count the ranks' maximum), both in verl's workload
   ``24576·L + L²``; and the micro-batch counts.
2. ``get_seqlen_balanced_partitions``: the largest partition sum, thdpack / verl.
3. ``rearrange_micro_batches``: the heaviest micro-batch's workload, thdpack / verl, and the counts.

Ratios below 1 are thdpack better. Times are the sum over the seeds, same process, same inputs
(parts 2 and 3: the fastest of --repeats runs of each call).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from tensordict import TensorDict
from verl.utils import seqlen_balancing as verl_sb

import thdpack
from thdpack import rl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from rl_reference import grpo_batch  # noqa: E402  (the GRPO batches of tests/python/test_rl.py)

CAP, DP = 16384, 8
WORKLOAD = thdpack.CostModel(linear=24576.0, quadratic=1.0)  # verl's calculate_workload




def workload(lengths):
    lengths = np.asarray(lengths, dtype=np.float64)
    return 24576.0 * lengths + lengths**2


def greedy_slowest(lengths, groups, dp):
    totals = sorted((int(lengths[groups == g].sum()) for g in np.unique(groups)), reverse=True)
    load = [0] * dp
    for total in totals:
        load[load.index(min(load))] += total
    return max(load)


def verl_grpo(lengths, groups):
    """verl's group-keeping path: ranks by uid groups, then each rank's micro-batches. Returns the
    ranks, the micro-batch count (the ranks' maximum) and the seconds in verl's two calls."""
    uids = [f"uid-{g}" for g in groups]
    start = time.perf_counter()
    ranks = verl_sb.get_group_balanced_partitions(lengths.tolist(), uids, DP)
    seconds = time.perf_counter() - start
    counts = []
    for members in ranks:
        mask = torch.zeros(len(members), int(lengths[members].max()), dtype=torch.int64)
        for row, i in enumerate(members):
            mask[row, :int(lengths[i])] = 1
        batch = TensorDict({"input_ids": mask, "attention_mask": mask}, batch_size=[len(members)])
        start = time.perf_counter()
        micro, _ = verl_sb.rearrange_micro_batches(batch, CAP)
        seconds += time.perf_counter() - start
        counts.append(len(micro))
    return ranks, max(counts), seconds


def grpo_part(seeds):
    vs_greedy, vs_verl, counts, t_ours, t_verl = [], [], [], 0.0, 0.0
    for seed in range(seeds):
        lengths, groups = grpo_batch(seed)
        start = time.perf_counter()
        plan = rl.dp_microbatches(lengths, dp=DP, max_seqlen_per_dp_cp_rank=CAP, group_ids=groups,
                                  cost=WORKLOAD)
        t_ours += time.perf_counter() - start
        ranks, verl_count, seconds = verl_grpo(lengths, groups)
        t_verl += seconds
        token_plan = rl.dp_microbatches(lengths, dp=DP, max_seqlen_per_dp_cp_rank=CAP,
                                        group_ids=groups)
        slowest = max(sum(int(lengths[mb].sum()) for mb in rank) for rank in token_plan)
        vs_greedy.append(slowest / greedy_slowest(lengths, groups, DP))
        ours = max(workload(lengths[[i for mb in rank for i in mb]]).sum() for rank in plan)
        vs_verl.append(ours / max(workload(lengths[r]).sum() for r in ranks))
        counts.append((len(plan[0]), verl_count))
    return {"vs_greedy_tokens": _summary(vs_greedy), "vs_verl_workload": _summary(vs_verl),
            "microbatches_thdpack_median": float(np.median([c[0] for c in counts])),
            "microbatches_verl_median": float(np.median([c[1] for c in counts])),
            "seconds_thdpack": t_ours, "seconds_verl": t_verl}


def _timed(call, repeats):
    """The call's result and its fastest time over `repeats` runs (the machine may be shared)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    return result, best


def partition_part(seeds, repeats):
    ratios, t_ours, t_verl = [], 0.0, 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        k = int(rng.choice([2, 4, 8, 16]))
        n = int(rng.integers(4, 64)) * k
        values = [int(v) for v in workload(np.clip(rng.lognormal(7, 1.2, n), 1, 32768).astype(int))]
        equal = bool(seed % 2)
        ours, seconds = _timed(lambda: rl.get_seqlen_balanced_partitions(values, k, equal),
                               repeats)
        t_ours += seconds
        theirs, seconds = _timed(lambda: verl_sb.get_seqlen_balanced_partitions(values, k, equal),
                                 repeats)
        t_verl += seconds
        ratios.append(max(sum(values[i] for i in p) for p in ours) /
                      max(sum(values[i] for i in p) for p in theirs))
    return {"largest_sum": _summary(ratios), "seconds_thdpack": t_ours, "seconds_verl": t_verl}


def rearrange_part(seeds, repeats):
    ratios, same_count, t_ours, t_verl = [], 0, 0.0, 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        size, width = int(rng.integers(16, 256)), int(rng.choice([1024, 4096, 8192]))
        lengths = np.clip(rng.lognormal(np.log(width / 4), 1.0, size), 1, width).astype(int)
        mask = torch.tensor(np.arange(width)[None, :] < lengths[:, None], dtype=torch.int64)
        batch = TensorDict({"input_ids": mask, "attention_mask": mask}, batch_size=[size])
        cap = int(width * rng.choice([1, 2, 4]))
        (_, ours), seconds = _timed(lambda: rl.rearrange_micro_batches(batch, cap), repeats)
        t_ours += seconds
        (_, theirs), seconds = _timed(lambda: verl_sb.rearrange_micro_batches(batch, cap), repeats)
        t_verl += seconds
        same_count += len(ours) == len(theirs)
        ratios.append(max(workload(lengths[p]).sum() for p in ours) /
                      max(workload(lengths[p]).sum() for p in theirs))
    return {"heaviest_microbatch": _summary(ratios), "same_count": same_count,
            "seconds_thdpack": t_ours, "seconds_verl": t_verl}


def _summary(ratios):
    r = np.asarray(ratios)
    return {"worst": float(r.max()), "median": float(np.median(r)), "best": float(r.min()),
            "better": int((r < 1 - 1e-12).sum()), "worse": int((r > 1 + 1e-12).sum()),
            "inputs": int(r.size)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3,
                    help="parts 2 and 3 time each call this often and keep the fastest")
    ap.add_argument("--out", help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    report = {"grpo": grpo_part(args.seeds),
              "partitions": partition_part(args.seeds, args.repeats),
              "rearrange": rearrange_part(args.seeds, args.repeats)}
    g, p, r = report["grpo"], report["partitions"], report["rearrange"]
    print(f"GRPO 32x8, dp {DP}, cap {CAP}, {args.seeds} seeds (ratio thdpack / other, <1 better):")
    for name, s in (("vs longest-first greedy (tokens)", g["vs_greedy_tokens"]),
                    ("vs verl group partition + rearrange (workload)", g["vs_verl_workload"])):
        print(f"  {name}: worst {s['worst']:.4f}, median {s['median']:.4f}, best {s['best']:.4f}"
              f" ({s['better']} better, {s['worse']} worse)")
    print(f"  micro-batches per rank (median): thdpack {g['microbatches_thdpack_median']:.0f}, "
          f"verl {g['microbatches_verl_median']:.0f}; time thdpack {g['seconds_thdpack']:.2f} s, "
          f"verl {g['seconds_verl']:.2f} s (verl / thdpack "
          f"{g['seconds_verl'] / g['seconds_thdpack']:.1f}x)")
    s = p["largest_sum"]
    print(f"get_seqlen_balanced_partitions: largest sum worst {s['worst']:.4f}, median "
          f"{s['median']:.4f}, best {s['best']:.4f} ({s['better']} better, {s['worse']} worse); "
          f"time verl / thdpack {p['seconds_verl'] / p['seconds_thdpack']:.2f}x")
    s = r["heaviest_microbatch"]
    print(f"rearrange_micro_batches: heaviest micro-batch worst {s['worst']:.4f}, median "
          f"{s['median']:.4f}, best {s['best']:.4f} ({s['better']} better, {s['worse']} worse); "
          f"same count {r['same_count']}/{s['inputs']}; time verl / thdpack "
          f"{r['seconds_verl'] / r['seconds_thdpack']:.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
