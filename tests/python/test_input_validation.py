"""Python inputs are validated, never converted: every bad kind of value, given to every entry
point that accepts samples or token ids, raises thdpack.InvalidArgument (a ValueError) naming the
field, and the same values given correctly pack exactly as they are."""

import json
import math
import re

import numpy as np
import pytest

import thdpack
from solo_communicator import SoloCommunicator

# Token id sequences that must be refused, with what the message names.
BAD_TOKEN_IDS = {
    "float in a list": ([1, 1.9, 3], "must be an integer"),
    "integral float in a list": ([1, 2.0, 3], "must be an integer"),
    "float array": (np.array([1.0, 2.0, 3.0]), "dtype float64"),
    "float32 array": (np.array([1, 2, 3], dtype=np.float32), "dtype float32"),
    "bool in a list": ([1, True, 3], "must be an integer"),
    "numpy bool in a list": ([1, np.bool_(False), 3], "must be an integer"),
    "bool array": (np.array([True, False, True]), "dtype bool"),
    "string in a list": ([1, "2", 3], "must be an integer"),
    "string": ("123", "got '123'"),
    "bytes": (b"123", "got b'123'"),
    "None in a list": ([1, None, 3], "must be an integer"),
    "string array": (np.array(["1", "2"]), "dtype <U1"),
    "object array": (np.array([1, 2**70], dtype=object), "dtype object"),
    "past int64 in a list": ([1, 2**63, 3], "outside int64"),
    "past uint64 in a list": ([1, 2**64 - 100, 3], "outside int64"),
    "far past uint64": ([1, 2**80], "outside int64"),
    "uint64 array past int64": (np.array([1, 2**64 - 100], dtype=np.uint64), "outside int64"),
    "numpy uint64 scalar past int64": ([np.uint64(2**63)], "outside int64"),
    "two dimensions": (np.array([[1, 2], [3, 4]]), "one-dimensional"),
    "complex array": (np.array([1 + 0j]), "dtype complex128"),
}

# Loss masks that must be refused (for a sample of three tokens).
BAD_MASKS = {
    "half": ([0, 0.5, 1], "must be 0 or 1"),
    "minus one": ([0, -1, 1], "must be 0 or 1"),
    "two": (np.array([0, 2, 1]), "must be 0 or 1"),
    "nan": ([0, math.nan, 1], "must be 0 or 1"),
    "nan array": (np.array([0, np.nan, 1]), "got nan"),
    "inf array": (np.array([0, np.inf, 1], dtype=np.float32), "must be 0 or 1"),
    "string": (["0", "1", "1"], "must be 0 or 1"),
    "None": ([0, None, 1], "must be 0 or 1"),
    "empty list": ([], "loss_mask has 0 entries but input_ids has 3"),
    "short": ([0, 1], "loss_mask has 2 entries"),
    "string array": (np.array(["0", "1", "1"]), "dtype <U1"),
}

# Sample dicts whose other fields are wrong.
BAD_SAMPLES = {
    "id None": ({"id": None, "input_ids": [1, 2, 3]}, "'id' must be an integer, got None"),
    "id float": ({"id": 1.5, "input_ids": [1, 2, 3]}, "'id' must be an integer"),
    "id bool": ({"id": True, "input_ids": [1, 2, 3]}, "'id' must be an integer"),
    "id string": ({"id": "7", "input_ids": [1, 2, 3]}, "'id' must be an integer"),
    "id past int64": ({"id": 2**64, "input_ids": [1, 2, 3]}, "outside int64"),
    "labels and loss_mask": ({"id": 0, "input_ids": [1, 2, 3], "labels": [1, 2, 3],
                              "loss_mask": [1, 1, 1]}, "not both"),
    "labels below the ignore id": ({"id": 0, "input_ids": [1, 2, 3], "labels": [-101, 2, 3]},
                                   "labels[0] = -101"),
    "negative label": ({"id": 0, "input_ids": [1, 2, 3], "labels": [1, -1, 3]},
                       "labels[1] = -1"),
    "empty labels": ({"id": 0, "input_ids": [1, 2, 3], "labels": []}, "labels has 0 entries"),
    "float labels": ({"id": 0, "input_ids": [1, 2, 3], "labels": [1, 2.5, 3]},
                     "labels[1] must be an integer"),
    "negative token id": ({"id": 0, "input_ids": [1, -5, 3]}, "input_ids[1] = -5"),
    "empty input_ids": ({"id": 0, "input_ids": []}, "input_ids is empty"),
    "labels_shifted not a bool": ({"id": 0, "input_ids": [1, 2, 3], "labels": [1, 2, 3],
                                   "labels_shifted": 1}, "labels_shifted must be True or False"),
}


def solo_options():
    return thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=64)


def solo_world():
    return thdpack.CallbackCommunicator(SoloCommunicator())


def through_pack(sample):
    thdpack.pack([sample])


def through_run_step(sample):
    world = solo_world()
    pipeline = thdpack.Pipeline(world, solo_options(), dp_group=world, tp_group=world)
    pipeline.run_step([sample])


def through_gather(sample):
    thdpack.gather_global_batch(solo_world(), solo_options(), [sample])


def through_sample_of(sample):
    """A sample returned by the sample_of callback of reference_microbatches."""
    good = {"id": 0, "input_ids": [1, 2, 3]}
    world = solo_world()
    options = solo_options()
    pipeline = thdpack.Pipeline(world, options, dp_group=world, tp_group=world)
    step = pipeline.run_step([good])
    thdpack.reference_microbatches(step.batch, step.plan, lambda i: sample, options, 0)


# Every entry point that takes a sample dict.
SAMPLE_ENTRY_POINTS = {
    "pack": through_pack,
    "Pipeline.run_step": through_run_step,
    "gather_global_batch": through_gather,
    "reference_microbatches sample_of": through_sample_of,
}


@pytest.mark.parametrize("entry", SAMPLE_ENTRY_POINTS)
@pytest.mark.parametrize("kind", BAD_TOKEN_IDS)
def test_bad_token_ids_are_refused_by_every_sample_entry_point(entry, kind):
    ids, needle = BAD_TOKEN_IDS[kind]
    with pytest.raises(thdpack.InvalidArgument, match="input_ids") as raised:
        SAMPLE_ENTRY_POINTS[entry]({"id": 0, "input_ids": ids})
    assert needle in str(raised.value)
    assert len(str(raised.value)) < 300


@pytest.mark.parametrize("entry", SAMPLE_ENTRY_POINTS)
@pytest.mark.parametrize("kind", BAD_MASKS)
def test_bad_loss_masks_are_refused_by_every_sample_entry_point(entry, kind):
    mask, needle = BAD_MASKS[kind]
    with pytest.raises(thdpack.InvalidArgument) as raised:
        SAMPLE_ENTRY_POINTS[entry]({"id": 0, "input_ids": [1, 2, 3], "loss_mask": mask})
    assert needle in str(raised.value) and "loss_mask" in str(raised.value)


@pytest.mark.parametrize("entry", SAMPLE_ENTRY_POINTS)
@pytest.mark.parametrize("kind", BAD_SAMPLES)
def test_bad_sample_fields_are_refused_by_every_sample_entry_point(entry, kind):
    sample, needle = BAD_SAMPLES[kind]
    with pytest.raises(thdpack.InvalidArgument) as raised:
        SAMPLE_ENTRY_POINTS[entry](sample)
    assert needle in str(raised.value)


@pytest.mark.parametrize("kind", BAD_TOKEN_IDS)
def test_bad_token_ids_are_refused_as_bare_sequences_and_by_the_writers(kind, tmp_path):
    ids, needle = BAD_TOKEN_IDS[kind]
    for call in (lambda: thdpack.pack([ids]),
                 lambda: thdpack.IndexedDatasetWriter(str(tmp_path / "w")).add_sequence(ids),
                 lambda: thdpack.pack_offline(ids, capacity=1 << 40)):
        with pytest.raises(thdpack.InvalidArgument) as raised:
            call()
        assert needle in str(raised.value)


@pytest.mark.parametrize("bad_id", [None, 1.5, True, "3", 2**64])
def test_multimodal_samples_refuse_a_bad_id(bad_id):
    with pytest.raises(thdpack.InvalidArgument, match="'id' (must be an integer|= .* outside)"):
        thdpack.pack_language_shard([{"id": bad_id, "input_ids": np.array([1, 2])}])


def test_good_values_of_every_accepted_kind_pack_exactly():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        ids = rng.integers(0, 2**62, n)
        mask = rng.integers(0, 2, n)
        expected = thdpack.pack([{"input_ids": ids.astype(np.int64), "loss_mask": mask}])
        variants = [
            {"input_ids": [int(x) for x in ids], "loss_mask": [bool(m) for m in mask]},
            {"input_ids": tuple(np.int64(x) for x in ids), "loss_mask": [float(m) for m in mask]},
            {"input_ids": ids.astype(np.uint64), "loss_mask": mask.astype(np.float32)},
            {"input_ids": ids, "loss_mask": mask.astype(bool), "id": np.int32(0)},
        ]
        for sample in variants:
            got = thdpack.pack([sample])
            for field in ("tokens", "labels", "loss_mask", "cu_seqlens"):
                assert np.array_equal(getattr(got, field), getattr(expected, field)), field
    small = thdpack.pack([{"input_ids": np.array([1, 2, 3], dtype=np.uint8)}])
    assert list(small.tokens) == [1, 2, 3]


def test_random_bad_values_in_random_positions_are_always_refused():
    rng = np.random.default_rng(1)
    bad_values = [1.5, 2.0, True, False, "3", None, 2**63, -(2**63) - 1, math.nan, [1]]
    for _ in range(200):
        n = int(rng.integers(1, 30))
        ids = [int(x) for x in rng.integers(0, 1000, n)]
        at = int(rng.integers(0, n))
        bad = bad_values[int(rng.integers(0, len(bad_values)))]
        ids[at] = bad
        with pytest.raises(thdpack.InvalidArgument, match=rf"input_ids\[{at}\]"):
            thdpack.pack([{"input_ids": ids}])


def test_writer_calls_after_finish_are_refused(tmp_path):
    writer = thdpack.IndexedDatasetWriter(str(tmp_path / "d"))
    writer.add_sequence([1, 2, 3])
    writer.finish()
    for call in (lambda: writer.add_sequence([4]), writer.end_document, writer.finish):
        with pytest.raises(thdpack.InvalidArgument, match="after finish"):
            call()
    dataset = thdpack.open_indexed_dataset(str(tmp_path / "d"))
    assert len(dataset) == 1 and list(dataset.sample(0)["input_ids"]) == [1, 2, 3]


@pytest.mark.parametrize("sizes", [dict(tp=65536, dp=65536), dict(tp=2**30, cp=2),
                                   dict(tp=46341, cp=46341), dict(dp=1024, pp=1024, cp=4096)])
def test_topology_sizes_whose_product_overflows_are_refused(sizes):
    with pytest.raises(thdpack.InvalidArgument, match="exceeds 2\\^31-1"):
        thdpack.Topology(**sizes)


@pytest.mark.parametrize("sizes,needle", [
    (dict(tp=2**40), "tp = 1099511627776 is past 2^31-1"),
    (dict(dp=2**64), "dp = 18446744073709551616 is outside int64"),
    (dict(cp=2.0), "cp must be an integer, got 2.0"),
    (dict(pp=True), "pp must be an integer, got True"),
    (dict(ep=None), "ep must be an integer, got None"),
    (dict(vpp="2"), "vpp must be an integer, got '2'"),
    (dict(tp=0), "tp must be >= 1, got 0"),
])
def test_topology_sizes_are_integers_within_int(sizes, needle):
    with pytest.raises(thdpack.InvalidArgument) as raised:
        thdpack.Topology(**sizes)
    assert needle in str(raised.value)


def test_cp_unslice_refuses_slices_of_different_packs_with_equal_metadata():
    rng = np.random.default_rng(2)
    for _ in range(30):
        lengths = [int(x) * 4 for x in rng.integers(1, 8, int(rng.integers(1, 5)))]
        cp = int(rng.choice([2, 4]))
        make = lambda: thdpack.pack([{"input_ids": rng.integers(0, 100, n)} for n in lengths],
                                    divisor=2 * cp)
        a, b = make(), make()
        slices = [thdpack.cp_slice(a, cp, r) for r in range(cp)]
        assert np.array_equal(thdpack.cp_unslice(slices).tokens, a.tokens)
        if np.array_equal(a.tokens, b.tokens):
            continue
        other = int(rng.integers(1, cp))  # slice 0 decides which pack is meant
        slices[other] = thdpack.cp_slice(b, cp, other)
        with pytest.raises(thdpack.InvalidArgument, match=f"slice {other} was cut from a different"):
            thdpack.cp_unslice(slices)


class WrongTypes(SoloCommunicator):
    """Returns a value of the wrong type from one collective."""

    def __init__(self, op, value):
        self.op, self.value = op, value

    def allgatherv(self, send, counts):
        return self.value(send) if self.op == "allgatherv" else send

    def allreduce(self, data, op):
        return self.value(data) if self.op == "allreduce" else data


@pytest.mark.parametrize("op,value", [
    ("allgatherv", lambda send: None),
    ("allgatherv", lambda send: list(send)),
    ("allgatherv", lambda send: send.astype(np.int64)),
    ("allgatherv", lambda send: send.astype(np.float32)),
    ("allgatherv", lambda send: "bytes"),
    ("allreduce", lambda data: data.astype(np.float64)),
    ("allreduce", lambda data: data.astype(np.int32)),
    ("allreduce", lambda data: None),
    ("allreduce", lambda data: int(data[0]) if len(data) else 0),
])
def test_a_callback_communicator_returning_the_wrong_type_raises_comm_error(op, value):
    world = thdpack.CallbackCommunicator(WrongTypes(op, value))
    with pytest.raises(thdpack.CommError, match=op):
        pipeline = thdpack.Pipeline(world, solo_options(), dp_group=world, tp_group=world)
        step = pipeline.run_step([{"id": i, "input_ids": [1, 2, 3]} for i in range(4)])
        thdpack.verify_step(world, solo_options(), step,
                            [{"id": i, "input_ids": [1, 2, 3]} for i in range(4)],
                            lambda i: {"id": i, "input_ids": [1, 2, 3]})


@pytest.mark.parametrize("attrs", [{"rank": "0"}, {"size": None}, {"rank": 0.5}])
def test_a_callback_communicator_with_a_wrong_rank_or_size_type_raises_comm_error(attrs):
    impl = SoloCommunicator()
    for key, value in attrs.items():
        setattr(impl, key, value)
    with pytest.raises(thdpack.CommError, match="wrong type"):
        thdpack.CallbackCommunicator(impl)


def test_labels_shifted_survives_a_round_trip_through_a_sample_dict(tmp_path):
    path = tmp_path / "sft.jsonl"
    rows = [{"input_ids": [5, 6, 7, 8], "labels": [6, 7, 8, -100]},
            {"input_ids": [9, 10, 11], "labels": [-100, 11, 12]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for shifted in (True, False):
        dataset = thdpack.load_jsonl_dataset(str(path), labels_shifted=shifted)
        samples = [dataset.sample(i) for i in range(len(dataset))]
        assert all(s["labels_shifted"] is shifted for s in samples)
        once = thdpack.pack(samples)
        again = thdpack.pack([dataset.sample(i) for i in range(len(dataset))])
        assert np.array_equal(once.labels, again.labels)
        if shifted:  # used as they are: position j's target is labels[j]
            assert list(once.labels) == [6, 7, 8, -100, -100, 11, 12]
        else:  # aligned with input_ids: position j's target is labels[j + 1]
            assert list(once.labels) == [7, 8, -100, -100, 11, 12, -100]


# Every entry point that takes lengths or token ids as a bare integer array.
ARRAY_ENTRY_POINTS = {
    "schedule": lambda v: thdpack.schedule(v, dp=1, max_seqlen_per_dp_cp_rank=1 << 40),
    "schedule ids": lambda v: thdpack.schedule([4] * len(v), dp=1, max_seqlen_per_dp_cp_rank=64,
                                               ids=v),
    "best_fit_decreasing": lambda v: thdpack.best_fit_decreasing(v, 1 << 40),
    "first_fit_decreasing": lambda v: thdpack.first_fit_decreasing(v, 1 << 40),
    "next_fit": lambda v: thdpack.next_fit(v, 1 << 40),
    "bins_lower_bound_l1": lambda v: thdpack.bins_lower_bound_l1(v, 1 << 40),
    "bins_lower_bound_l2": lambda v: thdpack.bins_lower_bound_l2(v, 1 << 40),
    "pack_offline": lambda v: thdpack.pack_offline(v, capacity=1 << 40),
    "image_patches": lambda v: thdpack.image_patches(v, thdpack.ReorderCost()),
    "sample_cost": lambda v: thdpack.sample_cost(v, thdpack.ReorderCost()),
    "schedule_dynamic_cp": lambda v: thdpack.schedule_dynamic_cp(
        v, dp=1, cp=1, max_seqlen_per_dp_cp_rank=1 << 40),
    "schedule_dynamic_cp ids": lambda v: thdpack.schedule_dynamic_cp(
        [4] * len(v), dp=1, cp=1, max_seqlen_per_dp_cp_rank=64, ids=v),
    "Pipeline.run_step group_ids": lambda v: through_run_step_group_ids(v),
}


def through_run_step_group_ids(group_ids):
    world = solo_world()
    pipeline = thdpack.Pipeline(world, solo_options(), dp_group=world, tp_group=world)
    pipeline.run_step([{"id": i, "input_ids": [1, 2]} for i in range(len(group_ids))],
                      group_ids=group_ids)


@pytest.mark.parametrize("entry", ARRAY_ENTRY_POINTS)
@pytest.mark.parametrize("kind", ["float in a list", "float array", "bool in a list", "bool array",
                                  "string in a list", "past uint64 in a list",
                                  "uint64 array past int64", "object array"])
def test_bad_integer_arrays_are_refused_by_every_array_entry_point(entry, kind):
    values, needle = BAD_TOKEN_IDS[kind]
    with pytest.raises(thdpack.InvalidArgument) as raised:
        ARRAY_ENTRY_POINTS[entry](values)
    assert needle in str(raised.value)


def _indexed(tmp_path, name="d"):
    writer = thdpack.IndexedDatasetWriter(str(tmp_path / name))
    writer.add_sequence([1, 2, 3])
    writer.finish()
    return writer, str(tmp_path / name)


# Values that were once accepted without a word: each class is refused in one line naming it.
REFUSED_ONCE_ACCEPTED = {
    "duplicate ids in one pack": (
        lambda tmp: thdpack.pack([{"id": 1, "input_ids": [1, 2]}, {"id": 1, "input_ids": [3]}]),
        "sample id 1 appears twice"),
    "negative pack capacity": (lambda tmp: thdpack.pack([[1, 2, 3]], capacity=-1),
                               "capacity must be >= 0"),
    "lengths with start past stop": (
        lambda tmp: thdpack.mock_dataset(thdpack.default_mock_config(128)).lengths(3, 1),
        "0 <= start <= stop"),
    "lengths past the dataset": (
        lambda tmp: thdpack.mock_dataset(thdpack.default_mock_config(128)).lengths(0, 2**40),
        "the dataset's size"),
    "finish twice": (lambda tmp: _indexed(tmp)[0].finish(), "finish after finish()"),
    "negative dataset size": (lambda tmp: thdpack.open_indexed_dataset(_indexed(tmp)[1], size=-1),
                              "size must be >= 0"),
    "negative token id written": (
        lambda tmp: thdpack.IndexedDatasetWriter(str(tmp / "n")).add_sequence([1, -5, 2]),
        "is -5; token ids are >= 0"),
    "float expert indices": (
        lambda tmp: thdpack.moe_dispatch_layout(np.array([[0.5, 1.7]]), 4, 2),
        "topk_idx must hold integers"),
    "number past a double in a mock config": (
        lambda tmp: thdpack.mock_dataset(json.dumps(
            {"mode": "distribution", "type": "lognormal", "min_seq_len": 1, "max_seq_len": 10,
             "mean_seq_len": 5, "lognormal_sigma": 1.0, "size": 10}).replace('"min_seq_len": 1',
                                                                             '"min_seq_len": 1e400')),
        'the value of "min_seq_len" does not fit a double'),
}


@pytest.mark.parametrize("kind", REFUSED_ONCE_ACCEPTED)
def test_values_once_accepted_are_refused_naming_what(kind, tmp_path):
    call, needle = REFUSED_ONCE_ACCEPTED[kind]
    with pytest.raises(thdpack.InvalidArgument, match=re.escape(needle)):
        call(tmp_path)


def test_integer_expert_indices_of_any_width_are_taken():
    for dtype in (np.int32, np.int64, np.uint8):
        tokens_per_rank, _, _ = thdpack.moe_dispatch_layout(np.array([[0, 3]], dtype=dtype), 4, 2)
        assert list(tokens_per_rank) == [1, 1]


def test_pack_offline_group_ids_are_labels_in_any_order():
    # Group ids name groups; their members need not be adjacent nor their ids consecutive: each
    # group is packed whole wherever its members are.
    result = thdpack.pack_offline([3, 4, 5, 2], capacity=9, group_ids=[7, 2, 7, 2])
    packs = [sorted(int(i) for i in p) for p in result["packs"]]
    assert sorted(packs) == [[0, 2], [1, 3]]
