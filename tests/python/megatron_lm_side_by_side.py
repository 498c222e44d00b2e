"""thdpack.megatron beside Megatron-LM's own sequence-packing functions, on CPU.

Runs Megatron-LM's ``wrap_data_iterator`` and ``get_batch_on_this_rank_for_sequence_packing``
(``megatron/core/datasets/data_schedule.py`` of a checkout you give) and thdpack's on the same
data iterators, in the same gloo processes, for seeded layouts (tp, cp, dp, pp) and configs
(``thd_max_packed_sequences``, ``pad_packed_seq_alignment``, ``thd_tail_padding_policy``,
``cuda_graph_impl``, ``mtp_num_layers``), and compares every rank's 7-tuple field by field: the
tensors (dtype, shape, values) and PackedSeqParams' fields.

Megatron-LM is not on PyPI (megatron-core releases lack these functions), so this is not part of
the test suite; run it against a checkout of the branch the adapter follows:

    .venv/bin/python tests/python/megatron_lm_side_by_side.py --megatron-lm ~/Megatron-LM --cases 48

To run on CPU it points ``torch.cuda.current_device`` and ``Tensor.cuda`` at the CPU, and, for
cp > 1, replaces Transformer Engine's ``thd_get_partitioned_indices`` (a CUDA kernel) with the
zigzag split it computes: each sequence in 2·cp chunks, CP rank r keeping chunks r and 2·cp-1-r.
Exits 1 when any field differs or a case fails.
"""

import argparse
import json
import os
import random
import sys
import tempfile
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_support import run_processes  # noqa: E402

LAYOUTS = [(1, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1), (1, 2, 2, 1), (2, 1, 2, 1), (1, 1, 1, 2),
           (1, 2, 1, 2), (2, 2, 1, 1), (1, 1, 4, 1), (1, 2, 2, 2), (2, 1, 2, 2), (1, 4, 1, 1)]
CONFIGS = [{}, {"thd_max_packed_sequences": 3},
           {"pad_packed_seq_alignment": "max", "thd_max_packed_sequences": 4},
           {"pad_packed_seq_alignment": 16},
           {"pad_packed_seq_alignment": 16, "thd_tail_padding_policy": "extend_last"},
           {"pad_packed_seq_alignment": 8, "cuda_graph_impl": "local",
            "thd_max_packed_sequences": 6},
           {"pad_packed_seq_alignment": "max", "thd_tail_padding_policy": "extend_last",
            "thd_max_packed_sequences": 5},
           {"mtp_num_layers": 1}]
PARAMS = ["qkv_format", "cu_seqlens_q", "cu_seqlens_kv", "cu_seqlens_q_padded",
          "cu_seqlens_kv_padded", "max_seqlen_q", "max_seqlen_kv", "local_cp_size",
          "pad_between_seqs", "cp_partition_mode", "total_tokens", "seq_idx"]
TENSORS = ["tokens", "labels", "loss_mask", "attention_mask", "position_ids", None,
           "padding_mask"]


def cases(count: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        tp, cp, dp, pp = LAYOUTS[i % len(LAYOUTS)]
        out.append({"tp": tp, "cp": cp, "dp": dp, "pp": pp, "M": rng.choice([128, 256, 512]),
                    "per_rank": rng.choice([4, 8, 12]), "seed": i,
                    "config": CONFIGS[i % len(CONFIGS)]})
    return out


def items(seed: int, n: int, cp: int, m: int) -> list:
    """One pre-packed sample per item (Megatron's SFT dataset shape), lengths already multiples of
    the CP divisor (Megatron's dataset pads them)."""
    rng = random.Random(seed)
    divisor = 2 * cp if cp > 1 else 1
    out = []
    for _ in range(n):
        length = rng.randint(1, max(1, m * cp // divisor // 3)) * divisor
        g = torch.Generator().manual_seed(rng.randrange(1 << 30))
        tokens = torch.randint(1, 1000, (length,), generator=g)
        out.append({"tokens": tokens, "labels": torch.roll(tokens, -1),
                    "loss_mask": torch.ones(length), "position_ids": torch.arange(length),
                    "cu_seqlens": torch.tensor([0, length], dtype=torch.int32)})
    return out


def zigzag_indices(cu_seqlens, total_tokens, cp_size, cp_rank):
    out = []
    cu = cu_seqlens.tolist()
    for a, b in zip(cu[:-1], cu[1:]):
        chunk = (b - a) // (2 * cp_size)
        out += range(a + cp_rank * chunk, a + (cp_rank + 1) * chunk)
        out += range(a + (2 * cp_size - 1 - cp_rank) * chunk, a + (2 * cp_size - cp_rank) * chunk)
    return torch.tensor(out, dtype=torch.int32)


def differences(k: int, a: tuple, b: tuple) -> list:
    out = []
    for i, name in enumerate(TENSORS):
        x, y = a[i], b[i]
        if name is None or (x is None and y is None):
            continue
        if (x is None) != (y is None) or x.dtype != y.dtype or x.shape != y.shape or \
                not torch.equal(x, y):
            out.append(f"micro-batch {k} {name}")
    for field in PARAMS:
        x, y = getattr(a[5], field, None), getattr(b[5], field, None)
        tensors = isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
        if not (torch.equal(x, y) if tensors else x == y):
            out.append(f"micro-batch {k} packed_seq_params.{field}: {x} vs {y}")
    return out


def worker(rank, world, case, megatron_lm, out_dir):
    sys.path.insert(0, megatron_lm)
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    import megatron.core.datasets.data_schedule as ds
    import megatron.core.datasets.data_schedule_utils as dsu
    from megatron.core import parallel_state as ps

    import thdpack.megatron as tm

    dsu.get_thd_partitioned_indices = zigzag_indices
    tp, cp, dp, pp = case["tp"], case["cp"], case["dp"], case["pp"]
    ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                                 context_parallel_size=cp)
    pg = SimpleNamespace(tp=ps.get_tensor_model_parallel_group(),
                         cp=ps.get_context_parallel_group(), dp=ps.get_data_parallel_group(),
                         pp=ps.get_pipeline_model_parallel_group(),
                         dp_cp=ps.get_data_parallel_group(with_context_parallel=True))
    fields = dict(sequence_packing_scheduler="dp_balanced", max_seqlen_per_dp_cp_rank=case["M"],
                  context_parallel_size=cp, sequence_parallel=False,
                  virtual_pipeline_model_parallel_size=None,
                  microbatch_group_size_per_vp_stage=None, mtp_num_layers=None,
                  cuda_graph_impl="none", cp_partition_mode="zigzag",
                  thd_tail_padding_policy=None, pad_packed_seq_alignment=None,
                  thd_max_packed_sequences=None, pipeline_model_parallel_size=pp,
                  pipeline_model_parallel_layout=None)
    fields.update(case["config"])
    config = SimpleNamespace(**fields)
    reader = ps.get_tensor_model_parallel_rank() == 0
    n = case["per_rank"]
    data = items(case["seed"] * 1000 + ps.get_data_parallel_rank(), n, cp, case["M"])
    theirs = ds.wrap_data_iterator(iter([dict(x) for x in data]) if reader else None, config, n,
                                   pg)
    ours = tm.wrap_data_iterator(iter([dict(x) for x in data]) if reader else None, config, n, pg)
    diffs = [] if theirs[1:] == ours[1:] else [f"wrap_data_iterator: {theirs[1:]} vs {ours[1:]}"]
    for k in range(min(theirs[1], ours[1])):
        a = ds.get_batch_on_this_rank_for_sequence_packing(theirs[0], None, False, None, False,
                                                           pg, config)
        b = tm.get_batch_on_this_rank_for_sequence_packing(ours[0], None, False, None, False,
                                                           pg, config)
        diffs += differences(k, a, b)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(diffs, f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megatron-lm", required=True, help="a Megatron-LM checkout")
    parser.add_argument("--cases", type=int, default=48)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    megatron_lm = os.path.abspath(os.path.expanduser(args.megatron_lm))
    failed = 0
    for case in cases(args.cases, args.seed):
        world = case["tp"] * case["cp"] * case["dp"] * case["pp"]
        with tempfile.TemporaryDirectory() as tmp:
            try:
                run_processes(world, worker, case, megatron_lm, tmp)
                diffs = sum((json.load(open(os.path.join(tmp, f"rank{r}.json")))
                             for r in range(world)), [])
            except Exception as e:  # noqa: BLE001 - reported per case
                diffs = [f"failed: {str(e).strip().splitlines()[-1]}"]
        failed += bool(diffs)
        print(json.dumps(case), "same" if not diffs else f"{len(diffs)} differences: {diffs[:3]}",
              flush=True)
    print(f"{args.cases - failed} of {args.cases} cases the same on every rank and field")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
