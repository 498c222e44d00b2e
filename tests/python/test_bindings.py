"""The _thdpack bindings: round trips against the core's documented behaviour, numpy views without
copies, keyword arguments, and the mapping of C++ errors to Python exceptions."""

import gc
import json
import threading

import numpy as np
import pytest

import thdpack

from solo_communicator import SoloCommunicator


def test_topology_follows_megatron_order():
    t = thdpack.Topology(tp=2, cp=2, dp=2, pp=2)
    assert t.world_size == 16
    assert t.coordinates(5) == {"tp": 1, "cp": 0, "dp": 1, "pp": 0}
    assert t.rank_of(tp=1, dp=1) == 5
    assert t.group_ranks("dp", 5) == [1, 5]
    assert t.group_ranks("dp_cp", 0) == [0, 2, 4, 6]
    assert len(t.all_groups("tp")) == 8
    with pytest.raises(thdpack.InvalidArgument, match="world size 6"):
        t.check_world_size(6)


def test_dp_balanced_matches_megatron_tail_split():
    # Same case as the C++ unit test: next fit gives [0,1,2,3] [4,5,6,7]; multiple 6 pops 7, 6, 5,
    # then 3 into single packs.
    plan = thdpack.schedule([3] * 8, dp=2, max_seqlen_per_dp_cp_rank=12, scheduler="dp_balanced",
                            microbatch_multiple=3)
    assert plan.num_microbatches == 3
    assert plan.to_list() == [[[0, 1, 2], [4]], [[7], [6]], [[5], [3]]]
    assert list(plan.pack(1, 0)) == [7]


def test_balanced_plan_keeps_the_contracts_and_beats_dp_balanced():
    lengths = thdpack.mock_dataset(thdpack.workload("longtail-32k")["dataset_config"]).lengths(0, 2048)
    cost = thdpack.CostModel.from_model(thdpack.model_preset("llama3-8b"))
    figures = {}
    for name in ("balanced", "dp_balanced"):
        plan = thdpack.schedule(lengths, dp=64, max_seqlen_per_dp_cp_rank=32768, scheduler=name,
                                cost=cost)
        stats = thdpack.evaluate_plan(plan, lengths, max_seqlen_per_dp_cp_rank=32768, cost=cost)
        assert stats["cap_violations"] == 0
        seen = sorted(i for mb in plan.to_list() for pack in mb for i in pack)
        assert seen == list(range(len(lengths)))
        figures[name] = stats["step_ratio"]
    assert figures["balanced"] < 1.02 < figures["dp_balanced"]


def test_pack_fields_and_views_without_copies():
    batch = thdpack.pack([{"input_ids": [5, 6, 7], "id": 42}, [8, 9]], divisor=2)
    assert batch.tokens.tolist() == [5, 6, 7, 0, 8, 9]
    assert batch.labels.tolist() == [6, 7, -100, -100, 9, -100]
    assert batch.loss_mask.tolist() == [1, 1, 0, 0, 1, 0]
    assert batch.position_ids.tolist() == [0, 1, 2, 3, 0, 1]
    assert batch.padding_mask.dtype == np.bool_
    assert batch.padding_mask.tolist() == [False, False, False, True, False, False]
    assert batch.cu_seqlens.tolist() == [0, 3, 5]
    assert batch.cu_seqlens_padded.tolist() == [0, 4, 6]
    assert batch.max_seqlen == 4
    assert batch.sample_ids.tolist() == [42, 1]
    # Two reads of a field see the same memory, and a view keeps the pack alive.
    assert batch.tokens.__array_interface__["data"][0] == batch.tokens.__array_interface__["data"][0]
    tokens = batch.tokens
    del batch
    gc.collect()
    assert tokens.tolist() == [5, 6, 7, 0, 8, 9]


def test_loss_mask_and_labels_conventions():
    masked = thdpack.pack([{"input_ids": [1, 2, 3, 4], "loss_mask": [0, 0, 1, 1]}])
    assert masked.loss_mask.tolist() == [0, 1, 1, 0]  # position j's weight is loss_mask[j + 1]
    labelled = thdpack.pack([{"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}])
    assert labelled.labels.tolist() == [2, 3, -100]


def test_cp_slice_round_trip_and_the_spec_example():
    batch = thdpack.pack([np.arange(1, 9), np.arange(11, 15)])
    ranks = [thdpack.cp_slice(batch, 2, r) for r in range(2)]
    assert thdpack.cp_global_rows(batch.cu_seqlens, batch.cu_seqlens_padded, 2, 0).tolist() == [
        0, 1, 6, 7, 8, 11]
    assert ranks[1].tokens.tolist() == [3, 4, 5, 6, 12, 13]
    assert ranks[0].cu_seqlens.tolist() == batch.cu_seqlens.tolist()  # metadata stays global
    whole = thdpack.cp_unslice(ranks)
    for field in ("tokens", "labels", "loss_mask", "position_ids", "padding_mask"):
        assert np.array_equal(getattr(whole, field), getattr(batch, field)), field


def test_errors_map_to_value_and_runtime_errors():
    with pytest.raises(ValueError, match=r"raise max_seqlen_per_dp_cp_rank \(-M\) or truncate \(oversize=\"truncate\"") as info:
        thdpack.schedule([100, 5000], dp=1, max_seqlen_per_dp_cp_rank=4096)
    assert isinstance(info.value, thdpack.InvalidArgument)
    assert isinstance(info.value, thdpack.Error)
    with pytest.raises(thdpack.InvalidArgument, match="unknown scheduler"):
        thdpack.schedule([1, 2], dp=1, max_seqlen_per_dp_cp_rank=8, scheduler="fastest")
    with pytest.raises(thdpack.InvalidArgument, match="unknown key 'colour'"):
        thdpack.mock_dataset(json.dumps({"mode": "distribution", "type": "uniform",
                                         "min_seq_len": 1, "max_seq_len": 9, "colour": 1}))
    assert issubclass(thdpack.CommError, RuntimeError)
    assert issubclass(thdpack.InternalError, RuntimeError)


def test_jsonl_errors_name_the_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"input_ids": [1, 2]}\n{"input_ids": "oops"}\n')
    with pytest.raises(thdpack.InvalidArgument, match=r"data.jsonl:2"):
        thdpack.load_jsonl_dataset(str(path))


def test_mock_dataset_matches_megatron_defaults():
    dataset = thdpack.mock_dataset(thdpack.default_mock_config(8192))
    lengths = dataset.lengths(0, 100_000)
    assert lengths.min() == 4096 and lengths.max() == 8192
    assert abs((lengths == 4096).mean() - 0.57) < 0.01
    assert abs((lengths == 8192).mean() - 0.21) < 0.01
    sample = dataset.sample(3)
    assert sample["id"] == 3 and len(sample["input_ids"]) == dataset.length(3)


def test_bin_packing_and_bounds():
    lengths = np.array([6, 6, 6, 5, 5, 5])
    assert thdpack.bins_lower_bound_l1(lengths, 10) == 4
    assert thdpack.bins_lower_bound_l2(lengths, 10) == 5
    bins = thdpack.best_fit_decreasing(lengths, 10)
    assert sorted(int(i) for b in bins for i in b) == list(range(6))
    assert all(lengths[b].sum() <= 10 for b in bins)


def test_flat_packs_are_the_same_packs():
    lengths = np.random.default_rng(3).integers(1, 1000, 5000)
    for pack in (thdpack.best_fit_decreasing, thdpack.first_fit_decreasing, thdpack.next_fit):
        bins = pack(lengths, 1000)
        items, offsets = pack(lengths, 1000, flat=True)
        assert items.dtype == np.int64 and offsets.dtype == np.int64
        assert offsets[0] == 0 and offsets[-1] == len(items) == len(lengths)
        assert len(offsets) == len(bins) + 1
        for p, b in enumerate(bins):
            assert np.array_equal(items[offsets[p]:offsets[p + 1]], b)
    result = thdpack.pack_offline(lengths, capacity=1000, seed=5)
    items, offsets = thdpack.pack_offline(lengths, capacity=1000, seed=5, flat=True)["packs"]
    assert [list(items[offsets[p]:offsets[p + 1]]) for p in range(len(offsets) - 1)] == \
        [list(b) for b in result["packs"]]
    # The arrays own their memory: they outlive everything else of the call.
    del result
    assert int(items.sum()) == len(lengths) * (len(lengths) - 1) // 2


def test_long_calls_release_the_gil():
    lengths = np.random.default_rng(0).integers(1, 32768, 200_000)
    results = []

    def work():
        results.append(len(thdpack.best_fit_decreasing(lengths, 32768)))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and results[0] == results[1]


def test_pipeline_over_a_callback_communicator_matches_the_reference():
    dataset = thdpack.mock_dataset(json.dumps({"mode": "distribution", "type": "uniform",
                                               "min_seq_len": 4, "max_seq_len": 60}))
    world = thdpack.CallbackCommunicator(SoloCommunicator())
    options = thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=128)
    # A callback communicator cannot split itself; with one rank every group is the world.
    with pytest.raises(thdpack.CommError, match="cannot split"):
        thdpack.Pipeline(world, options)
    pipeline = thdpack.Pipeline(world, options, dp_group=world, tp_group=world)
    samples = [dataset.sample(i) for i in range(12)]
    step = pipeline.run_step(samples)
    reference = thdpack.reference_microbatches(step.batch, step.plan, dataset.sample, options, 0)
    assert step.num_microbatches == len(reference)
    for got, want in zip(step.microbatches, reference):
        for field in ("tokens", "labels", "loss_mask", "position_ids", "cu_seqlens"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), field
    thdpack.verify_step(world, options, step, samples, dataset.sample)
    assert step.sums["s1_real"] == sum(len(s["input_ids"]) for s in samples)


def test_python_exceptions_in_a_communicator_become_comm_errors():
    class Broken(SoloCommunicator):
        def allgatherv(self, send, counts):
            raise OSError("link down")

    world = thdpack.CallbackCommunicator(Broken())
    options = thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=64)
    with pytest.raises(thdpack.CommError, match="allgatherv failed.*link down"):
        thdpack.Pipeline(world, options, dp_group=world, tp_group=world)


def test_type_stubs_cover_the_module_exactly():
    import ast
    import os

    import thdpack._thdpack as module

    stub_path = os.path.join(os.path.dirname(thdpack.__file__), "_thdpack.pyi")
    tree = ast.parse(open(stub_path).read())
    stubbed = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stubbed.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            stubbed.add(node.target.id)
    helpers = {"IntArray", "SampleLike", "GroupKind", "Packs"}
    public = {n for n in dir(module) if not n.startswith("_") or n == "__version__"}
    assert public - stubbed == set(), "names without stubs"
    assert stubbed - helpers - public == set(), "stubs for names the module lacks"
    assert set(thdpack.__all__) - set(thdpack.PYTHON_DEFINED) <= public


def test_ignore_masked_labels_makes_a_masked_prompt_ignored():
    sample = {"input_ids": [1, 2, 3, 4, 5], "loss_mask": [0, 0, 1, 1, 0]}
    plain = thdpack.pack([sample], divisor=4)
    masked = thdpack.pack([sample], divisor=4, ignore_masked_labels=True)
    assert list(plain.labels[:3]) == [2, 3, 4]  # the prompt position keeps its next token
    assert list(masked.labels) == [-100, 3, 4, -100, -100, -100, -100, -100]
    assert list(masked.loss_mask) == list(plain.loss_mask)
