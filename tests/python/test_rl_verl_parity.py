"""thdpack.rl against the installed verl's seqlen balancing, side by side on the same seeded inputs:
the same signatures, the same Karmarkar-Karp split, the same micro-batch counts (alone and with the
count all-reduced over a gloo DP group), the same fields in every micro-batch, verl's guarantees
(every index once, the token cap, partition counts and sizes) and a largest partition sum never
above verl's."""

import inspect
import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tensordict import TensorDict
from verl import DataProto
from verl.utils import seqlen_balancing as verl_sb

import thdpack
from thdpack import rl

NAMES = ["calculate_workload", "ceildiv", "roundup_divisible", "karmarkar_karp",
         "get_seqlen_balanced_partitions", "get_group_balanced_partitions", "log_seqlen_unbalance",
         "rearrange_micro_batches", "get_reverse_idx", "prepare_dynamic_batch",
         "restore_dynamic_batch"]


@pytest.mark.parametrize("name", NAMES)
def test_same_names_arguments_and_defaults(name):
    ours = inspect.signature(getattr(rl, name)).parameters
    theirs = inspect.signature(getattr(verl_sb, name)).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]


def _values(rng, n):
    kind = int(rng.integers(4))
    if kind == 0:
        return rng.integers(1, 10, n)  # many ties
    if kind == 1:
        return rng.integers(1, 100_000, n)
    if kind == 2:
        return np.clip(rng.lognormal(7, 1.2, n), 1, 1e6).astype(np.int64)
    return np.where(rng.random(n) < 0.9, rng.integers(1, 500, n), rng.integers(5000, 20000, n))


def _partition_case(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.choice([1, 2, 3, 4, 8, 16]))
    n = int(rng.integers(k, 400))
    equal = bool(seed % 2)
    if equal:
        n = max(n // k, 1) * k
    return [int(v) for v in _values(rng, n)], k, equal


@pytest.mark.parametrize("seed", range(200))
def test_karmarkar_karp_is_verls(seed):
    values, k, equal = _partition_case(seed)
    assert rl.karmarkar_karp(values, k, equal) == verl_sb.karmarkar_karp(values, k, equal)


def _largest(values, parts):
    return max(sum(values[i] for i in p) for p in parts)


@pytest.mark.parametrize("seed", range(200))
def test_seqlen_balanced_partitions_keep_verls_guarantees_and_balance_at_least_as_well(seed):
    values, k, equal = _partition_case(seed)
    ours = rl.get_seqlen_balanced_partitions(values, k, equal)
    theirs = verl_sb.get_seqlen_balanced_partitions(values, k, equal)
    assert type(ours) is list and len(ours) == len(theirs) == k
    assert all(type(p) is list and p and p == sorted(p) for p in ours)
    assert sorted(i for p in ours for i in p) == list(range(len(values)))
    if equal:
        assert [len(p) for p in ours] == [len(p) for p in theirs]
    assert _largest(values, ours) <= _largest(values, theirs)


@pytest.mark.parametrize("seed", range(200))
def test_group_balanced_partitions_keep_uids_together_and_balance_at_least_as_well(seed):
    rng = np.random.default_rng(5000 + seed)
    k = int(rng.choice([1, 2, 4, 8]))
    n_groups = k * int(rng.integers(1, 12))
    size = int(rng.choice([1, 2, 4, 8]))
    lengths = [int(v) for v in _values(rng, n_groups * size)]
    uids = [f"uid-{g}" for g in range(n_groups) for _ in range(size)]
    ours = rl.get_group_balanced_partitions(lengths, uids, k)
    theirs = verl_sb.get_group_balanced_partitions(lengths, uids, k)
    assert len(ours) == k and [len(p) for p in ours] == [len(p) for p in theirs]
    assert sorted(i for p in ours for i in p) == list(range(len(lengths)))
    for p in ours:
        assert p == sorted(p)
        assert {uids[i] for i in p}.isdisjoint({uids[i] for q in ours if q is not p for i in q})
    work = [int(verl_sb.calculate_workload(torch.tensor(v))) for v in lengths]
    assert _largest(work, ours) <= _largest(work, theirs)


def _batch(rng, size, width, nested=False):
    lengths = rng.integers(1, width + 1, size)
    mask = torch.tensor(np.arange(width)[None, :] < lengths[:, None], dtype=torch.int64)
    ids = torch.tensor(rng.integers(0, 32000, (size, width)), dtype=torch.int64) * mask
    fields = {"input_ids": ids, "attention_mask": mask,
              "position_ids": torch.cumsum(mask, dim=1) - 1,
              "old_log_probs": torch.tensor(rng.normal(size=(size, width)), dtype=torch.float32)}
    if nested:
        fields["input_ids"] = torch.nested.as_nested_tensor(
            [ids[i, :lengths[i]] for i in range(size)], layout=torch.jagged)
        del fields["attention_mask"]
    return TensorDict(fields, batch_size=[size])


def _rearrange_case(seed):
    rng = np.random.default_rng(9000 + seed)
    force = int(rng.choice([1, 1, 2]))
    size = force * int(rng.integers(1, 40))
    width = int(rng.choice([64, 256, 1024]))
    batch = _batch(rng, size, width)
    cap = int(width * force * rng.choice([1, 1.5, 3, 8]))
    options = {"num_batches_divided_by": [None, 2, 4][seed % 3],
               "min_num_micro_batch": [None, 3][(seed // 3) % 2],
               "use_dynamic_bsz_balance": bool((seed // 6) % 2),
               "same_micro_num_in_dp": bool((seed // 12) % 2),
               "force_group_size": force}
    return batch, cap, options


def _workload(batch, idx):
    lengths = batch["attention_mask"].sum(dim=1).long()
    return int(verl_sb.calculate_workload(lengths[idx]).sum())


def _same_fields(micro, batch, idx):
    assert sorted(micro.keys()) == sorted(batch.keys())
    assert list(micro.batch_size) == [len(idx)]
    for key in batch.keys():
        want = batch[key][torch.tensor(idx)]
        assert micro[key].dtype == want.dtype and micro[key].shape == want.shape
        assert torch.equal(micro[key], want)


@pytest.mark.parametrize("seed", range(200))
def test_rearrange_micro_batches_matches_verls_counts_fields_and_cap(seed):
    batch, cap, options = _rearrange_case(seed)
    try:
        theirs, theirs_idx = verl_sb.rearrange_micro_batches(batch, cap, **options)
    except (AssertionError, ValueError):
        with pytest.raises(thdpack.InvalidArgument):
            rl.rearrange_micro_batches(batch, cap, **options)
        return
    ours, ours_idx = rl.rearrange_micro_batches(batch, cap, **options)
    assert type(ours) is list and type(ours_idx) is list
    assert len(ours) == len(ours_idx) == len(theirs) == len(theirs_idx)
    assert sorted(i for p in ours_idx for i in p) == list(range(batch.batch_size[0]))
    tokens = batch["attention_mask"].sum(dim=1)
    force = options["force_group_size"]
    for micro, idx in zip(ours, ours_idx):
        assert idx and int(tokens[idx].sum()) <= cap
        assert all(idx[j] // force == idx[j - j % force] // force for j in range(len(idx)))
        _same_fields(micro, batch, idx)
    assert max(_workload(batch, p) for p in ours_idx) <= max(_workload(batch, p)
                                                             for p in theirs_idx)
    if options["use_dynamic_bsz_balance"]:  # verl's order: the lightest at both ends
        loads = [_workload(batch, p) for p in ours_idx]
        peak = int(np.argmax(loads))
        assert loads[:peak + 1] == sorted(loads[:peak + 1])


def test_nested_input_ids_as_verl():
    rng = np.random.default_rng(3)
    batch = _batch(rng, 24, 512, nested=True)
    ours, ours_idx = rl.rearrange_micro_batches(batch, 1024)
    theirs, theirs_idx = verl_sb.rearrange_micro_batches(batch, 1024)
    assert len(ours) == len(theirs)
    lengths = batch["input_ids"].offsets().diff()
    for micro, idx in zip(ours, ours_idx):
        assert int(lengths[idx].sum()) <= 1024
        assert micro["input_ids"].is_nested
        got = micro["input_ids"].unbind()
        want = batch["input_ids"].unbind()
        assert all(torch.equal(got[j], want[i]) for j, i in enumerate(idx))


def test_dynamic_batch_round_trip_and_metrics_as_verl():
    rng = np.random.default_rng(4)
    batch = _batch(rng, 16, 128)
    uids = np.array([f"u{i // 4}" for i in range(16)], dtype=object)
    data = DataProto(batch=batch, non_tensor_batch={"uid": uids}, meta_info={"temperature": 1.0})
    ours, idx = rl.prepare_dynamic_batch(data, 300)
    theirs, _ = verl_sb.prepare_dynamic_batch(data, 300)
    assert len(ours) == len(theirs) and all(type(m) is DataProto for m in ours)
    for micro, i in zip(ours, idx):
        assert list(micro.non_tensor_batch["uid"]) == list(data.non_tensor_batch["uid"][i])
        assert micro.meta_info == data.meta_info
    rows = torch.cat([m.batch["old_log_probs"] for m in ours])
    assert torch.equal(rl.restore_dynamic_batch(rows, idx), batch["old_log_probs"])
    assert torch.equal(verl_sb.restore_dynamic_batch(rows, idx), batch["old_log_probs"])
    lengths = [int(v) for v in batch["attention_mask"].sum(dim=1)]
    parts = rl.get_seqlen_balanced_partitions(lengths, 4, True)
    assert rl.log_seqlen_unbalance(lengths, parts, "x") == verl_sb.log_seqlen_unbalance(
        lengths, parts, "x")
    assert rl.get_reverse_idx([2, 0, 1]) == verl_sb.get_reverse_idx([2, 0, 1])


def _dp_worker(rank, world, init_file, seed, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        rng = np.random.default_rng(seed * 100 + rank)
        # Ranks hold different batches: different local counts before the all-reduce.
        batch = _batch(rng, int(rng.integers(12, 40)), 256)
        options = {"num_batches_divided_by": [None, 2][seed % 2],
                   "min_num_micro_batch": [None, 2][(seed // 2) % 2]}
        group = dist.new_group(list(range(world)))
        # verl puts its collective tensors on its platform's device, CUDA even on a machine
        # without one; on gloo they belong on the CPU (thdpack picks the device by the backend).
        verl_sb.get_device_name = lambda: "cpu"
        try:
            theirs = len(verl_sb.rearrange_micro_batches(batch, 400, dp_group=group, **options)[0])
        except ValueError:  # refused on every rank alike (the limits are agreed first)
            theirs = -1
        try:
            ours, idx = rl.rearrange_micro_batches(batch, 400, dp_group=group, **options)
            tokens = batch["attention_mask"].sum(dim=1)
            result = [theirs, len(ours), all(int(tokens[p].sum()) <= 400 for p in idx)]
        except thdpack.InvalidArgument:
            result = [theirs, -1, True]
        np.save(os.path.join(out_dir, f"{rank}.npy"), np.array(result))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world,seed", [(2, 0), (3, 1), (4, 3), (4, 4)])
def test_micro_batch_count_is_all_reduced_over_the_dp_group_as_verl(tmp_path, world, seed):
    mp.start_processes(_dp_worker, args=(world, str(tmp_path / "init"), seed, str(tmp_path)),
                       nprocs=world, start_method="spawn")
    results = [np.load(tmp_path / f"{r}.npy") for r in range(world)]
    assert any(int(r[0]) > 0 for r in results), "the case should plan"
    counts = {int(r[1]) for r in results}
    assert len(counts) == 1, results  # every rank the same count
    assert all(int(r[0]) == int(r[1]) and bool(r[2]) for r in results), results
