"""thdpack.torch_data.PackedSteps over gloo processes: a restart from state_dict() resumes at the
exact sample (with and without prefetch, across an epoch boundary), the last partial global batch
is packed unless drop_last, DistributedSampler's padding repeats are trained once, a DP-only world
needs no dp_group, a dataset smaller than one global batch still gives a step, and group ids keep
a group in one micro-batch."""

import json
import os
import warnings

import numpy as np
import pytest
from torch.utils.data.distributed import DistributedSampler

import thdpack
from dist_support import run_processes
from thdpack.torch import ThdPacker
from thdpack.torch_data import PackedSteps

CONFIG = json.dumps({"mode": "distribution", "type": "lognormal", "min_seq_len": 4,
                     "max_seq_len": 200, "mean_seq_len": 50, "lognormal_sigma": 1.0,
                     "size": 1000, "seed": 5})


class Items:
    """A map-style dataset of the first `size` mock samples, as tokenizer-like dicts."""

    def __init__(self, size):
        self.mock = thdpack.mock_dataset(CONFIG)
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        sample = self.mock.sample(int(i))
        return {"input_ids": sample["input_ids"][None, :],
                "attention_mask": np.ones((1, sample["input_ids"].size))}


def record(step):
    """What a step gave this rank: the global batch's ids, this rank's dataset indices and a
    digest of its tokens."""
    tokens = np.concatenate([mb["tokens"].numpy() for mb in step.microbatches])
    return {"ids": sorted(int(i) for i in step.result.batch.ids),
            "indices": sorted(step.dataset_indices.values()),
            "read_pairs": sorted([int(k), int(v)] for k, v in step.dataset_indices.items()),
            "held_pairs": sorted([int(i), int(d)] for b, mb in zip(
                step.result.microbatches, step.microbatch_dataset_indices)
                for i, d in zip(b.sample_ids, mb)),
            "tokens": int(tokens.sum()), "rows": int(tokens.size)}


def run(loader, steps=None, state=None):
    if state is not None:
        loader.load_state_dict(state)
    out, iterator = [], iter(loader)
    for step in iterator:
        out.append(record(step))
        if steps is not None and len(out) == steps:
            break
    saved = loader.state_dict()
    iterator.close()
    return out, saved


def _worker(rank, world, out_dir):
    results = {}
    dataset = Items(100)

    def loader(prefetch=False, drop_last=False, size=None, per_step=8):
        data = dataset if size is None else Items(size)
        packer = ThdPacker(max_seqlen_per_dp_cp_rank=512, private_groups=prefetch)
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=1)
        return PackedSteps(packer, data, samples_per_step=per_step, sampler=sampler,
                           drop_last=drop_last, prefetch=prefetch)

    whole = loader()
    results["whole"] = run(whole)[0] + run(whole)[0]  # epochs 0 and 1
    for prefetch in (False, True):
        first = loader(prefetch)
        head = run(first)[0]
        part, state = run(first, steps=3)
        second = loader(prefetch)
        results[f"resumed_{prefetch}"] = head + part + run(second, state=state)[0]
        results[f"state_{prefetch}"] = state
    # torchdata's StatefulDataLoader around the steps: its state carries theirs, and a new loader
    # given it resumes the stream.
    from torchdata.stateful_dataloader import StatefulDataLoader

    def stateful_run(wrapped, steps=None, state=None):
        if state is not None:
            wrapped.load_state_dict(state)
        out = []
        for step in wrapped:
            out.append(record(step))
            if steps is not None and len(out) == steps:
                break
        return out, wrapped.state_dict()

    first = StatefulDataLoader(loader(), batch_size=None, num_workers=0)
    head = stateful_run(first)[0]
    part, state = stateful_run(first, steps=3)
    second = StatefulDataLoader(loader(), batch_size=None, num_workers=0)
    results["resumed_stateful"] = head + part + stateful_run(second, state=state)[0]
    results["drop_last"] = run(loader(drop_last=True))[0]
    results["padded"] = run(loader(size=15, per_step=4))[0]
    results["tiny"] = run(loader(size=5))[0]

    # Group ids through ThdPacker.step: pairs stay in one micro-batch.
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=512)
    mine = [dict(dataset.mock.sample(i), group_id=i // 2)
            for i in range(rank * 40, rank * 40 + 40)]
    step = packer.step(mine)
    results["groups"] = [[int(i) for i in mb["sample_ids"]] for mb in step.microbatches]
    # A group larger than one micro-batch (every fourth sample of both readers, about 1000
    # tokens against 512): on one DP rank, over consecutive micro-batches.
    big = [dict(dataset.mock.sample(i), group_id=0 if i % 4 == 0 else i)
           for i in range(rank * 40, rank * 40 + 40)]
    step = packer.step(big)
    results["big_group"] = [[int(i) for i in mb["sample_ids"]] for mb in step.microbatches]
    results["big_lengths"] = [len(s["input_ids"]) for s in big]
    with open(os.path.join(out_dir, f"data{rank}.json"), "w") as f:
        json.dump(results, f)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    run_processes(2, _worker, str(out))
    return [json.loads((out / f"data{r}.json").read_text()) for r in range(2)]


def test_resume_gives_the_uninterrupted_stream(results):
    for rank in results:
        assert len(rank["whole"]) == 14  # 50 samples per rank per epoch, 8 per step: 7 steps
        assert rank["resumed_False"] == rank["whole"]
        assert rank["resumed_True"] == rank["whole"]
        assert rank["resumed_stateful"] == rank["whole"]
        assert rank["state_True"] == rank["state_False"]
        assert rank["state_True"]["epoch"] == 1 and rank["state_True"]["consumed"] == 24


def test_every_sample_once_per_epoch_and_the_tail_is_packed(results):
    for epoch in range(2):
        steps = [s for r in results for s in r["whole"][7 * epoch:7 * epoch + 7]]
        assert sorted(i for s in steps for i in s["indices"]) == list(range(100))
    assert [len(s["ids"]) for s in results[0]["whole"][:7]] == [16] * 6 + [4]
    assert [len(s["ids"]) for s in results[0]["drop_last"]] == [16] * 6


def test_every_rank_names_the_dataset_index_of_every_sample_in_its_microbatches(results):
    # Samples move between DP ranks: each rank's micro-batches name the dataset indices of what
    # they hold, wherever it was read, and over the ranks each index read appears exactly once.
    for case in ("whole", "drop_last", "padded", "tiny"):
        for step in range(len(results[0][case])):
            read = sorted(p for r in results for p in r[case][step]["read_pairs"])
            held = sorted(p for r in results for p in r[case][step]["held_pairs"])
            assert held == read and read, (case, step)  # (sample id, dataset index) pairs


def test_distributed_sampler_padding_is_trained_once(results):
    # 15 samples over 2 ranks: the sampler repeats one index to make 8 per rank; it is skipped.
    indices = sorted(i for r in results for s in r["padded"] for i in s["indices"])
    assert indices == list(range(15))
    assert [len(s["ids"]) for s in results[0]["padded"]] == [8, 7]


def test_a_group_larger_than_a_micro_batch_stays_on_one_rank_through_thd_packer(results):
    assert sum(length for r in results for i, length in enumerate(r["big_lengths"])
               if i % 4 == 0) > 512
    seen = sorted(i for r in results for mb in r["big_group"] for i in mb)
    assert seen == list(range(80))
    holders = [r for r, rank in enumerate(results)
               if any(i % 4 == 0 for mb in rank["big_group"] for i in mb)]
    assert len(holders) == 1
    steps = [k for k, mb in enumerate(results[holders[0]]["big_group"])
             if any(i % 4 == 0 for i in mb)]
    assert len(steps) >= 2 and steps == list(range(steps[0], steps[0] + len(steps)))


def test_a_dataset_smaller_than_one_global_batch_gives_a_step(results):
    assert [len(s["ids"]) for s in results[0]["tiny"]] == [5]


def test_group_ids_keep_pairs_together(results):
    packs = [pack for r in results for pack in r["groups"]]
    assert sorted(i for p in packs for i in p) == list(range(80))
    for pack in packs:
        assert all(i ^ 1 in pack for i in pack)


def _megatron_worker(rank, world, out_dir):
    # tp 2 x dp 2 in Megatron order; only the TP groups are given: the DP group comes from the
    # topology. TP rank 1 does not read and follows the readers' decisions.
    import torch.distributed as dist

    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=512, tp_group=tp_groups[rank // 2],
                       private_groups=True)
    data = Items(39)
    sampler = DistributedSampler(data, num_replicas=2, rank=packer.coordinates["dp"],
                                 shuffle=False)
    steps = PackedSteps(packer, data, samples_per_step=6, sampler=sampler, prefetch=True)
    out = {"reads": packer.reads_data, "coordinates": packer.coordinates,
           "steps": [record(step) for step in steps],
           "tokens": [[mb["tokens"].tolist() for mb in step.microbatches] for step in
                      PackedSteps(packer, data, samples_per_step=6, sampler=sampler)]}
    with open(os.path.join(out_dir, f"megatron{rank}.json"), "w") as f:
        json.dump(out, f)


def test_megatron_reading_with_a_dp_group_built_from_the_topology(tmp_path):
    run_processes(4, _megatron_worker, str(tmp_path))
    ranks = [json.loads((tmp_path / f"megatron{r}.json").read_text()) for r in range(4)]
    assert [r["reads"] for r in ranks] == [True, False, True, False]
    assert [r["coordinates"]["dp"] for r in ranks] == [0, 0, 1, 1]
    assert len({len(r["steps"]) for r in ranks}) == 1 and len(ranks[0]["steps"]) == 4
    assert ranks[0]["tokens"] == ranks[1]["tokens"] and ranks[2]["tokens"] == ranks[3]["tokens"]
    indices = sorted(i for r in (ranks[0], ranks[2]) for s in r["steps"] for i in s["indices"])
    assert indices == list(range(39))


def _refusal_worker(rank, world, out_dir):
    outcome = {}
    data = Items(20)
    shared = ThdPacker(max_seqlen_per_dp_cp_rank=512)
    try:
        PackedSteps(shared, data, samples_per_step=4, prefetch=True)
    except thdpack.InvalidArgument as error:
        outcome["prefetch"] = str(error)
    outcome["prefetch_private"] = len(list(PackedSteps(
        ThdPacker(max_seqlen_per_dp_cp_rank=512, private_groups=True), data, samples_per_step=4,
        prefetch=True)))
    for replicas, rank in ((2, 0), (2, 1)):
        try:
            PackedSteps(ThdPacker(max_seqlen_per_dp_cp_rank=512), data, samples_per_step=4,
                        sampler=DistributedSampler(data, num_replicas=replicas, rank=rank))
        except thdpack.InvalidArgument as error:
            outcome[f"sampler_{replicas}_{rank}"] = str(error)
    vpp = ThdPacker(max_seqlen_per_dp_cp_rank=512, vpp=2, vpp_group=4)
    try:
        PackedSteps(vpp, data, samples_per_step=3)
    except thdpack.InvalidArgument as error:
        outcome["multiple"] = str(error)
    outcome["multiple_steps"] = len(list(PackedSteps(vpp, data, samples_per_step=4)))
    with open(os.path.join(out_dir, "refusals.json"), "w") as f:
        json.dump(outcome, f)


def test_prefetch_without_private_groups_and_too_few_samples_per_step_are_refused(tmp_path):
    run_processes(1, _refusal_worker, str(tmp_path))
    outcome = json.loads((tmp_path / "refusals.json").read_text())
    assert "private_groups=True" in outcome.get("prefetch", "")
    assert outcome["prefetch_private"] == 5
    assert "samples_per_step=3" in outcome.get("multiple", "")
    assert outcome["multiple_steps"] == 5
    assert "num_replicas=2 with rank=0 but the packer's DP size is 1" in outcome["sampler_2_0"]
    assert "num_replicas=2 with rank=1" in outcome["sampler_2_1"]


def test_the_prefetch_thread_runs_on_the_callers_cuda_device(monkeypatch):
    import threading

    import torch

    from thdpack import torch_data

    calls = []

    def source():
        calls.append(("item", threading.current_thread().name))
        yield 1

    prefetcher = torch_data._Prefetcher(
        source(), device=3, set_device=lambda d: calls.append((d, threading.current_thread().name)))
    assert list(prefetcher) == [1]
    prefetcher.close()
    assert calls == [(3, "thdpack-prefetch"), ("item", "thdpack-prefetch")]
    # The device captured is the caller's current one, and none without CUDA in use.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 5)
    assert torch_data._caller_cuda_device() == 5
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert torch_data._caller_cuda_device() is None


def _length_worker(rank, world, out_dir):
    # len() must equal the steps iteration yields, over ragged tails that leave some ranks short,
    # a last step too small to give every DP rank a micro-batch, drop_last, and both samplers.
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=512)
    mismatches, cases = [], 0
    for size in (1, 2, 4, 5, 7, 10, 17, 31):
        for per_step in (1, 2, 3, 5):
            for drop_last in (False, True):
                for use_sampler in (False, True):
                    data = Items(size)
                    sampler = DistributedSampler(data, num_replicas=world, rank=rank,
                                                 shuffle=False) if use_sampler else None
                    loader = PackedSteps(packer, data, samples_per_step=per_step,
                                         sampler=sampler, drop_last=drop_last)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the dropped-tail warning
                        yielded = sum(1 for _ in loader)
                    cases += 1
                    if len(loader) != yielded:
                        mismatches.append((size, per_step, drop_last, use_sampler, len(loader),
                                           yielded))
    # The dropped tail is named: 7 samples over 3 ranks, 2 per step, leave dataset index 6 on rank 0.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(PackedSteps(packer, Items(7), samples_per_step=2))
    dropped = [str(w.message) for w in caught if "dropped" in str(w.message)]
    with open(os.path.join(out_dir, f"len{rank}.json"), "w") as f:
        json.dump({"cases": cases, "mismatches": mismatches, "dropped": dropped}, f)


def test_len_is_the_number_of_steps_an_epoch_yields(tmp_path):
    run_processes(3, _length_worker, str(tmp_path))
    for rank in range(3):
        outcome = json.loads((tmp_path / f"len{rank}.json").read_text())
        assert outcome["cases"] == 128 and outcome["mismatches"] == [], outcome
        want = "DP rank 0 drops dataset indices [6]" if rank == 0 else "they are dropped"
        assert len(outcome["dropped"]) == 1 and want in outcome["dropped"][0], outcome["dropped"]
