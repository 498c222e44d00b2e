"""A failure on one rank reaches every rank: ThdPacker set-up that fails on one rank (before any
collective), a malformed sample on one rank, and a data set or data iterator that raises on one
rank raise on every rank, well within the process
group's timeout, instead of leaving the peers blocked in new_group or allgatherv."""

import datetime
import json
import os
import tempfile
import time
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import thdpack
import thdpack.megatron as tm
import thdpack.torch as tt
from thdpack.torch_data import PackedSteps

# Far below torch's 30-minute default; a rank left waiting fails the test instead of hanging it.
GROUP_TIMEOUT_S = 30
# Every rank must have raised within this (a timed-out wait would take GROUP_TIMEOUT_S).
BOUND_S = 15


def _entry(rank, world, store, out_dir, case):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    start = time.monotonic()
    outcome = {"rank": rank, "error": None, "type": None}
    try:
        CASES[case](rank, world)
    except Exception as e:  # noqa: BLE001 - the outcome is what the test checks
        outcome.update(error=str(e), type=type(e).__name__)
    outcome["seconds"] = time.monotonic() - start
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(outcome, f)
    dist.destroy_process_group()


def _packer(rank, world, **kwargs):
    dp_groups = [dist.new_group(list(range(world)))]
    return tt.ThdPacker(max_seqlen_per_dp_cp_rank=64, dp_group=dp_groups[0], **kwargs)


def _bad_order_on_one_rank(rank, world):
    _packer(rank, world, order="tp-cp-dp-pp" if rank != world - 1 else "tp-xx-dp-pp")


def _bad_max_seqlen_on_one_rank(rank, world):
    dist.barrier()
    dp = dist.new_group(list(range(world)))
    tt.ThdPacker(max_seqlen_per_dp_cp_rank=64 if rank != 0 else -5, dp_group=dp)


def _sample(i, n=8):
    return {"id": i, "input_ids": list(range(1, n + 1))}


def _malformed_sample_on_one_rank(rank, world):
    packer = _packer(rank, world)
    packer.step([_sample(rank * 10 + j) for j in range(4)])  # a good step first
    bad = {"id": rank * 10 + 100, "input_ids": "not tokens"} if rank == 1 else _sample(rank + 50)
    packer.step([_sample(rank * 10 + 200 + j) for j in range(3)] + [bad])


def _not_a_dict_on_one_rank(rank, world):
    packer = _packer(rank, world)
    samples = [_sample(rank * 10 + j) for j in range(4)]
    if rank == 0:
        samples[2] = 42
    packer.step(samples)


class _Tokens:
    """A map-style dataset whose items raise on rank `failing` from index `first_bad` on."""

    def __init__(self, rank, failing, first_bad):
        self.bad = rank == failing
        self.first_bad = first_bad

    def __len__(self):
        return 60

    def __getitem__(self, i):
        if self.bad and i >= self.first_bad:
            raise OSError(f"cannot read item {i}")
        return list(range(1, 9))


def _dataset_error_on_one_rank(rank, world, prefetch=False):
    packer = _packer(rank, world, private_groups=prefetch)
    steps = PackedSteps(packer, _Tokens(rank, 1, 13), samples_per_step=4, prefetch=prefetch)
    for _ in steps:  # the first step is good; DP rank 1's second chunk raises
        pass


def _megatron_iterator_error_on_one_rank(rank, world):
    config = SimpleNamespace(sequence_packing_scheduler="dp_balanced",
                             max_seqlen_per_dp_cp_rank=64, context_parallel_size=1,
                             sequence_parallel=False, virtual_pipeline_model_parallel_size=None,
                             microbatch_group_size_per_vp_stage=None)

    def items():
        for step in range(2):
            for j in range(4):
                if rank == 2 and step == 1 and j == 2:
                    raise OSError("the data loader's worker died")
                t = torch.arange(1, 9)
                yield {"tokens": t, "labels": torch.cat([t[1:], t[-1:]]),
                       "loss_mask": torch.ones(8), "position_ids": torch.arange(8)}

    source = items()
    try:
        for _ in range(2):
            tm.wrap_data_iterator(source, config, 4)
    finally:
        # The cached packer's groups go now, not at interpreter exit after the process group.
        tm._packers.clear()


def _megatron_iterator_short_on_one_rank(rank, world):
    config = SimpleNamespace(sequence_packing_scheduler="dp_balanced",
                             max_seqlen_per_dp_cp_rank=64, context_parallel_size=1,
                             sequence_parallel=False, virtual_pipeline_model_parallel_size=None,
                             microbatch_group_size_per_vp_stage=None)
    t = torch.arange(1, 9)
    item = {"tokens": t, "labels": torch.cat([t[1:], t[-1:]]), "loss_mask": torch.ones(8),
            "position_ids": torch.arange(8)}
    try:
        tm.wrap_data_iterator(iter([item] * (2 if rank == 1 else 4)), config, 4)
    finally:
        tm._packers.clear()


def _all_good(rank, world):
    packer = _packer(rank, world)
    step = packer.step([_sample(rank * 10 + j) for j in range(4)])
    assert step.num_microbatches >= 1


CASES = {
    "ok": _all_good,
    "bad_order": _bad_order_on_one_rank,
    "bad_max_seqlen": _bad_max_seqlen_on_one_rank,
    "malformed_sample": _malformed_sample_on_one_rank,
    "not_a_dict": _not_a_dict_on_one_rank,
    "dataset_error": _dataset_error_on_one_rank,
    "dataset_error_prefetch": lambda rank, world: _dataset_error_on_one_rank(rank, world, True),
    "megatron_iterator_error": _megatron_iterator_error_on_one_rank,
    "megatron_iterator_short": _megatron_iterator_short_on_one_rank,
}
FAILING_RANK = {"bad_order": 2, "bad_max_seqlen": 0, "malformed_sample": 1, "not_a_dict": 0,
                "dataset_error": 1, "dataset_error_prefetch": 1, "megatron_iterator_error": 2,
                "megatron_iterator_short": 1}
# What the failing rank itself raises: its own error, its own type, the message said once.
FAILING_ERROR = {
    "megatron_iterator_error": ("OSError", "the data loader's worker died"),
    "megatron_iterator_short": ("InvalidArgument",
                                "the data iterator of DP rank 1 ended after 2 of the 4 items"),
    "malformed_sample": ("InvalidArgument", ""),
}


@pytest.mark.parametrize("case", sorted(FAILING_RANK))
def test_a_failure_on_one_rank_raises_on_every_rank(tmp_path, case):
    world = 3
    with tempfile.TemporaryDirectory(prefix="thdpack-gloo-") as tmp:
        mp.spawn(_entry, args=(world, os.path.join(tmp, "store"), str(tmp_path), case),
                 nprocs=world, join=True)
    outcomes = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    failing = FAILING_RANK[case]
    for o in outcomes:
        assert o["error"] is not None, o
        assert o["seconds"] < BOUND_S, o
        if o["rank"] != failing:
            assert o["type"] == "InvalidArgument", o
            assert f"rank {failing}" in o["error"], o
        else:
            assert not o["error"].startswith(f"{o['type']}:"), o  # not "InvalidArgument: ..." again
            if case in FAILING_ERROR:
                kind, text = FAILING_ERROR[case]
                assert o["type"] == kind and text in o["error"], o


def test_every_rank_runs_when_no_rank_fails(tmp_path):
    world = 2
    with tempfile.TemporaryDirectory(prefix="thdpack-gloo-") as tmp:
        mp.spawn(_entry, args=(world, os.path.join(tmp, "store"), str(tmp_path), "ok"),
                 nprocs=world, join=True)
    outcomes = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert [o["error"] for o in outcomes] == [None, None]

