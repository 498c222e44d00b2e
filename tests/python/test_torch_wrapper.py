"""thdpack.torch over real torch.distributed (gloo) processes: every rank's tensors equal the
single-process reference for its coordinates, in both reading modes; and the same pipeline over
mpi4py under mpirun."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import thdpack
import thdpack.torch as tt
from dist_support import megatron_groups, run_processes

HERE = os.path.dirname(__file__)
CONFIG = json.dumps({"mode": "distribution", "type": "lognormal", "min_seq_len": 4,
                     "max_seq_len": 250, "mean_seq_len": 60, "lognormal_sigma": 1.0,
                     "size": 10000, "seed": 3})
FIELDS = ("tokens", "labels", "loss_mask", "position_ids", "padding_mask", "cu_seqlens",
          "cu_seqlens_padded", "sample_ids")


def _case_sample(dataset, index, masked):
    """Sample `index`; with `masked`, every third carries a loss mask (its first third 0), so that
    the step's exchange sends rows instead of tokens alone."""
    sample = dataset.sample(int(index))
    if masked and int(index) % 3 == 0:
        mask = np.ones(len(sample["input_ids"]), dtype=np.float32)
        mask[: len(mask) // 3] = 0
        sample["loss_mask"] = mask
    return sample


def _worker(rank, world, tp, cp, dp, reading, out_dir):
    topology = thdpack.Topology(tp=tp, cp=cp, dp=dp)
    groups = megatron_groups(topology, ("tp", "cp", "dp"))
    packer = tt.ThdPacker(max_seqlen_per_dp_cp_rank=256, tp_group=groups["tp"],
                          cp_group=groups["cp"], dp_group=groups["dp"], reading=reading,
                          model="tiny-gpt")
    dataset = thdpack.mock_dataset(CONFIG)
    per_replica = 12
    checked = 0
    # Step 0: no sample carries a loss mask (tokens alone on the wire); step 1: some do (rows).
    for step_index in range(2):
        masked = step_index == 1

        def sample_of(index):
            return _case_sample(dataset, index, masked)

        ids = thdpack.global_batch_indices(step_index, per_replica * dp, dataset.size)
        d = packer.coordinates["dp"]
        mine = [sample_of(i) for i in ids[d * per_replica:(d + 1) * per_replica]]
        step = packer.step(mine if packer.reads_data else [])
        assert step.result.batch.samples_carry_targets == masked
        reference = thdpack.reference_microbatches(step.result.batch, step.result.plan,
                                                   sample_of, packer.options, rank)
        assert step.num_microbatches == len(reference)
        for got, want in zip(step.microbatches, reference):
            for field in FIELDS:
                assert isinstance(got[field], torch.Tensor)
                expected = torch.from_numpy(np.asarray(getattr(want, field)))
                assert torch.equal(got[field], expected), (rank, field)
            assert got["max_seqlen"] == want.max_seqlen
            checked += 1
        assert step.flops["seqlen_sum"] == step.result.sums["s1_real"]
        assert step.flops["model_tflops"] > 0
        thdpack.verify_step(packer.world, packer.options, step.result,
                            mine if packer.reads_data else [], sample_of)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "checked": checked, "coordinates": packer.coordinates}, f)


@pytest.mark.parametrize("tp,cp,dp,reading", [(2, 1, 2, "megatron"), (1, 2, 2, "all-ranks"),
                                              (2, 1, 2, "all-ranks")])
def test_every_rank_matches_the_reference(tmp_path, tp, cp, dp, reading):
    world = tp * cp * dp
    run_processes(world, _worker, tp, cp, dp, reading, str(tmp_path))
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert all(r["checked"] > 0 for r in reports)
    assert sorted(r["coordinates"]["dp"] for r in reports) == sorted(list(range(dp)) * tp * cp)


def test_wrap_steps_through_an_iterator_until_it_runs_out(tmp_path):
    run_processes(2, _wrap_worker, str(tmp_path))
    counts = [json.loads((tmp_path / f"wrap{r}.json").read_text())["steps"] for r in range(2)]
    assert counts == [3, 3]  # 30 samples per rank, 10 per step


def _wrap_worker(rank, world, out_dir):
    topology = thdpack.Topology(dp=world)
    groups = megatron_groups(topology, ("dp",))
    packer = tt.ThdPacker(max_seqlen_per_dp_cp_rank=256, dp_group=groups["dp"])
    dataset = thdpack.mock_dataset(CONFIG)
    samples = (dataset.sample(i) for i in range(rank * 1000, rank * 1000 + 30))
    steps = sum(1 for _ in packer.wrap(samples, samples_per_step=10))
    with open(os.path.join(out_dir, f"wrap{rank}.json"), "w") as f:
        json.dump({"steps": steps}, f)


@pytest.mark.skipif(not thdpack.HAVE_MPI, reason="built without MPI")
def test_pipeline_over_mpi4py():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    result = subprocess.run(
        ["mpirun", "--oversubscribe", "-np", "4", sys.executable,
         os.path.join(HERE, "mpi4py_pipeline_check.py")],
        capture_output=True, text=True, env=env, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("verified") == 4, result.stdout


def _misuse_worker(rank, world, out_dir):
    topology = thdpack.Topology(tp=1, cp=2, dp=2)
    groups = megatron_groups(topology, ("cp", "dp"))
    outcome = {}
    try:  # CP and DP groups swapped
        tt.ThdPacker(max_seqlen_per_dp_cp_rank=256, cp_group=groups["dp"], dp_group=groups["cp"])
    except thdpack.InvalidArgument as error:
        outcome["swapped"] = str(error)
    packer = tt.ThdPacker(max_seqlen_per_dp_cp_rank=256, tp_group=None, cp_group=groups["cp"],
                          dp_group=groups["dp"])
    dataset = thdpack.mock_dataset(CONFIG)
    d = packer.coordinates["dp"]
    mine = [dataset.sample(i) for i in range(d * 8, d * 8 + 8)]
    if packer.coordinates["cp"] == 1:
        mine = mine[:-1]  # readers of one DP index disagree
    try:
        packer.step(mine)
    except thdpack.InvalidArgument as error:
        outcome["disagree"] = str(error)
    with open(os.path.join(out_dir, f"misuse{rank}.json"), "w") as f:
        json.dump(outcome, f)


def test_misuse_fails_on_every_rank_with_a_clear_error(tmp_path):
    run_processes(4, _misuse_worker, str(tmp_path))
    for r in range(4):
        outcome = json.loads((tmp_path / f"misuse{r}.json").read_text())
        assert "cp group holds world ranks" in outcome["swapped"]
        assert "must hold the same samples" in outcome["disagree"]


def _group_ids_worker(rank, world, out_dir):
    packer = tt.ThdPacker(max_seqlen_per_dp_cp_rank=256)
    dataset = thdpack.mock_dataset(CONFIG)
    outcome = {}
    for name, group_ids in {"bool": [0, True], "float": [0.5, 1.5]}.items():
        try:
            packer.step([dataset.sample(0), dataset.sample(1)], group_ids=group_ids)
        except thdpack.InvalidArgument as error:
            outcome[name] = str(error)
    with open(os.path.join(out_dir, "group_ids.json"), "w") as f:
        json.dump(outcome, f)


def test_step_refuses_group_ids_that_are_not_integers(tmp_path):
    run_processes(1, _group_ids_worker, str(tmp_path))
    outcome = json.loads((tmp_path / "group_ids.json").read_text())
    assert set(outcome) == {"bool", "float"}
    assert all("group_ids" in message for message in outcome.values()), outcome


def test_without_an_initialised_process_group_the_error_says_what_is_missing():
    import torch.distributed as dist

    assert not dist.is_initialized()
    with pytest.raises(thdpack.InvalidArgument, match="needs an initialised torch.distributed"):
        thdpack.torch.ThdPacker(max_seqlen_per_dp_cp_rank=512)


def test_held_steps_stay_intact_while_released_ones_are_reused(tmp_path):
    run_processes(1, _reuse_worker, str(tmp_path))
    reports = [json.loads((tmp_path / "reuse0.json").read_text())]
    assert all(r["intact"] and r["reused"] for r in reports), reports


def _reuse_worker(rank, world, out_dir):
    """A step's arrays go back to the pipeline when the step is released (MicrobatchPool): a step
    whose tensors are held keeps its values through later steps, and a released step's arrays are
    what the next step is built in, micro-batch by micro-batch, even where other allocations could
    have taken that memory (the test fails with the pool off, and with it handing arrays back in
    the wrong order)."""
    packer = tt.ThdPacker(max_seqlen_per_dp_cp_rank=256)
    dataset = thdpack.mock_dataset(CONFIG)

    def step(n):
        return packer.step([dataset.sample(i) for i in range(n * 100 + rank * 10,
                                                             n * 100 + rank * 10 + 10)])

    held = step(0)
    held_tokens = [mb["tokens"] for mb in held.microbatches]
    expected = [t.clone() for t in held_tokens]
    released = step(1)
    released_tokens = [mb["tokens"] for mb in released.microbatches]
    released_addresses = [t.data_ptr() for t in released_tokens]
    sizes = [t.numel() * t.element_size() for t in released_tokens]
    del released, released_tokens
    # Had the step's memory gone back to the allocator, these would take it; in the pool it stays.
    occupiers = [np.ones(n, dtype=np.uint8) for n in sizes for _ in range(4)]
    again = step(1)  # the same samples: each micro-batch built in the same one's arrays
    again_addresses = [mb["tokens"].data_ptr() for mb in again.microbatches]
    later = [step(n) for n in range(2, 5)]  # never in step 0's memory
    intact = all(torch.equal(a, b) for a, b in zip(held_tokens, expected))
    later_addresses = {mb["tokens"].data_ptr() for s in later for mb in s.microbatches}
    held_addresses = {t.data_ptr() for t in held_tokens}
    built_later = later_addresses | set(again_addresses)
    del occupiers
    with open(os.path.join(out_dir, f"reuse{rank}.json"), "w") as f:
        json.dump({"intact": intact and not held_addresses & built_later,
                   "reused": again_addresses == released_addresses}, f)

