"""Multimodal reordering from Python: cost, assignment and in-batch packing on numpy, and the
exchange over gloo processes compared with a single-process reference (synchronous and overlapped,
windows with a short last one, text-only samples and extra fields, errors on every rank)."""

import pickle

import numpy as np
import pytest

import thdpack
from thdpack.comm import TorchCommunicator

from dist_support import run_processes
from solo_communicator import SoloCommunicator

WORKLOAD = thdpack.VisionLanguageWorkload()
WORKLOAD.max_side = 12  # small images keep the test fast
WORKLOAD.pixel_dim = 4
COST = thdpack.vl_cost(WORKLOAD)


def test_cost_counts_placeholders_times_merge_squared():
    cost = thdpack.ReorderCost(vision_weight=2.0, text_weight=0.5, image_token_id=9,
                               spatial_merge_size=2, pad_id=0)
    ids = np.array([5, 9, 9, 9, 7, 0, 0])
    assert thdpack.image_patches(ids, cost) == 12
    assert thdpack.sample_cost(ids, cost) == 2.0 * 12 + 0.5 * 5
    with pytest.raises(thdpack.InvalidArgument, match="negative"):
        thdpack.ReorderCost(vision_weight=-1.0)


def test_groups_and_assignment_properties():
    assert thdpack.canonical_groups([2, 4]) == 4
    assert thdpack.canonical_groups([2, 3]) == 6
    # Vision rank r at dp 2 holds exactly the groups of language ranks 2r and 2r+1 at dp 4.
    for r in range(2):
        begin, end = thdpack.owned_groups(4, 2, r)
        assert (begin, end) == (thdpack.owned_groups(4, 4, 2 * r)[0],
                                thdpack.owned_groups(4, 4, 2 * r + 1)[1])
    assert thdpack.shard_positions(12, 3, 1) == (4, 8)
    rng = np.random.default_rng(5)
    for _ in range(50):
        groups = int(rng.integers(1, 7))
        costs = rng.lognormal(5, 1.5, size=groups * int(rng.integers(1, 9)))
        lpt = thdpack.assign_groups(costs, groups, method="longest_first")
        ours = thdpack.assign_groups(costs, groups)
        for a in (lpt, ours):
            members = np.concatenate(a.members)
            assert sorted(members.tolist()) == list(range(len(costs)))
            assert all(len(m) == len(costs) // groups for m in a.members)
            assert np.allclose(a.group_cost, [costs[m].sum() for m in a.members])
        assert ours.group_cost.max() <= lpt.group_cost.max() + 1e-9
    with pytest.raises(thdpack.InvalidArgument, match="micro-batch size 5 .* 2"):
        thdpack.assign_groups([1.0] * 5, 2)
    with pytest.raises(thdpack.InvalidArgument, match="unknown assignment method"):
        thdpack.assign_groups([1.0] * 4, 2, method="fastest")


def test_pack_language_shard_restarts_positions_and_drops_trailing_pads():
    a = {"id": 7, "input_ids": np.array([3, 4, 5, 0, 0])}
    b = {"id": 8, "input_ids": np.array([6, 7]), "labels": np.array([-100, 7])}
    pack = thdpack.pack_language_shard([a, b], divisor=4)
    assert pack.cu_seqlens.tolist() == [0, 3, 5]
    assert pack.cu_seqlens_padded.tolist() == [0, 4, 8]
    assert pack.position_ids.tolist()[:3] == [0, 1, 2]
    assert pack.position_ids.tolist()[4:6] == [0, 1]
    assert pack.tokens.tolist()[:3] == [3, 4, 5]
    assert pack.labels.tolist()[:4] == [4, 5, -100, -100]
    assert pack.labels.tolist()[4:6] == [7, -100]
    assert pack.sample_ids.tolist() == [7, 8]


def _custom_sample(index):
    """A vision-language sample with an extra uint8 field; every third one is text-only."""
    s = thdpack.vl_sample(WORKLOAD, index)
    if index % 3 == 0:
        s["input_ids"] = s["input_ids"][s["input_ids"] != WORKLOAD.image_token_id]
        s["pixel_values"] = s["pixel_values"][:0]
        s["image_grid_thw"] = s["image_grid_thw"][:0]
    s["flags"] = np.full(index % 5, index % 251, dtype=np.uint8)
    return s


def _expected(microbatch, batch_size, groups, dp, rank, sample_of):
    """Ids this rank holds after reordering micro-batch `microbatch`, from all costs."""
    samples = [sample_of(microbatch * batch_size + p) for p in range(batch_size)]
    costs = [thdpack.sample_cost(s["input_ids"], COST) for s in samples]
    a = thdpack.assign_groups(costs, groups)
    begin, end = thdpack.owned_groups(groups, dp, rank)
    return [samples[p] for g in range(begin, end) for p in a.members[g]]


def _assert_same_samples(got, want):
    assert [s["id"] for s in got] == [s["id"] for s in want]
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w)
        for key in w:
            if key != "id":
                assert g[key].dtype == w[key].dtype and np.array_equal(g[key], w[key]), key


def _exchange_worker(rank, world, use_custom):
    sample_of = _custom_sample if use_custom else (lambda i: thdpack.vl_sample(WORKLOAD, i))
    batch_size, microbatches, window = 4 * world, 5, 2
    group = TorchCommunicator()
    begin, end = thdpack.shard_positions(batch_size, world, rank)
    windows = [[[sample_of(m * batch_size + p) for p in range(begin, end)]
                for m in range(first, min(first + window, microbatches))]
               for first in range(0, microbatches, window)]
    sync = thdpack.ReorderExchange(group, microbatch_size=batch_size, window=window, cost=COST)
    synchronous = [sync.exchange(w) for w in windows]
    overlap = thdpack.ReorderExchange(group, microbatch_size=batch_size, window=window, cost=COST)
    overlap.start(windows[0])
    overlapped = []
    for k in range(len(windows)):
        current = overlap.finish()
        if k + 1 < len(windows):
            overlap.start(windows[k + 1])
            assert overlap.in_flight
        overlapped.append(current)
    assert not overlap.in_flight
    for k, ((mbs, positions, stats), (mbs2, positions2, _)) in enumerate(
            zip(synchronous, overlapped)):
        assert stats["microbatches"] == len(windows[k])
        assert stats["spread_after"] <= stats["spread_before"] + 1e-9
        for j, (got, got2) in enumerate(zip(mbs, mbs2)):
            want = _expected(k * window + j, batch_size, sync.groups, world, rank, sample_of)
            _assert_same_samples(got, want)
            _assert_same_samples(got2, want)
            assert [p + (k * window + j) * batch_size for p in positions[j]] == \
                [s["id"] for s in got]
            assert np.array_equal(positions[j], positions2[j])


@pytest.mark.parametrize("world,use_custom", [(2, False), (4, True)])
def test_exchange_equals_the_single_process_reference(world, use_custom):
    run_processes(world, _exchange_worker, use_custom)


def _bad_sample_worker(rank, world):
    group = TorchCommunicator()
    shard = [thdpack.vl_sample(WORKLOAD, rank * 2 + j) for j in range(2)]
    if rank == world - 1:
        shard[1]["pixel_values"] = shard[1]["pixel_values"][:-1]  # one row short of its images
    exchange = thdpack.ReorderExchange(group, microbatch_size=2 * world, cost=COST)
    with pytest.raises(thdpack.InvalidArgument, match=f"DP rank {world - 1}"):
        exchange.exchange([shard])


def test_a_bad_sample_fails_on_every_rank():
    run_processes(2, _bad_sample_worker)


def _unconvertible_window_worker(rank, world):
    group = TorchCommunicator()
    exchange = thdpack.ReorderExchange(group, microbatch_size=2 * world, cost=COST)
    bad_rank = f"DP rank {world - 1}"

    def window(damage=None):
        shard = [thdpack.vl_sample(WORKLOAD, rank * 2 + j) for j in range(2)]
        if damage is not None and rank == world - 1:
            damage(shard[0])
        return [shard]

    def expect_everywhere(shards, local_error, local_match, peer_match):
        # The failing rank raises its own error; its peers raise instead of waiting for it.
        if rank == world - 1:
            with pytest.raises(local_error, match=local_match):
                exchange.exchange(shards)
        else:
            with pytest.raises(thdpack.InvalidArgument, match=f"{bad_rank}: .*{peer_match}"):
                exchange.exchange(shards)

    # First window, before any schema exists: a field of an unsupported dtype, then input_ids that
    # converts but cannot make a schema (int32).
    expect_everywhere(window(lambda s: s.update(input_ids=s["input_ids"].astype(np.float64))),
                      thdpack.InvalidArgument, "float64", "float64")
    expect_everywhere(window(lambda s: s.update(input_ids=s["input_ids"].astype(np.int32))),
                      thdpack.InvalidArgument, "input_ids", "input_ids")
    (mbs, _, _), = [exchange.exchange(window())]
    assert len(mbs[0]) == 2
    # Once the exchange exists: an id that is not an integer fails the same way, and the next
    # window is normal again.
    expect_everywhere(window(lambda s: s.update(id="seven")),
                      thdpack.InvalidArgument, "'id' must be an integer, got 'seven'",
                      "'id' must be an integer")
    (mbs, _, _), = [exchange.exchange(window())]
    assert len(mbs[0]) == 2


def test_a_window_that_fails_to_convert_fails_on_every_rank():
    run_processes(2, _unconvertible_window_worker)


def test_fields_are_accepted_by_kind_and_size_in_any_byte_order():
    group = thdpack.CallbackCommunicator(SoloCommunicator())
    exchange = thdpack.ReorderExchange(group, microbatch_size=2, cost=COST)
    first, second = thdpack.vl_sample(WORKLOAD, 0), thdpack.vl_sample(WORKLOAD, 1)
    swapped = dict(second, input_ids=second["input_ids"].astype(">i8"),
                   pixel_values=second["pixel_values"].astype(">f4"))
    window = pickle.loads(pickle.dumps([[first, swapped]]))
    (mbs, _, _), = [exchange.exchange(window)]
    got = {s["id"]: s for s in mbs[0]}
    for want in (first, second):
        for key in ("input_ids", "pixel_values", "image_grid_thw"):
            assert got[want["id"]][key].dtype == want[key].dtype
            assert np.array_equal(got[want["id"]][key], want[key]), key
    with pytest.raises(thdpack.InvalidArgument, match="bool"):
        exchange.exchange([[first, dict(second, attention_mask=np.ones(3, dtype=bool))]])


def test_exchange_option_errors():
    group = thdpack.CallbackCommunicator(SoloCommunicator())
    with pytest.raises(thdpack.InvalidArgument, match="window"):
        thdpack.ReorderExchange(group, microbatch_size=4, window=0, cost=COST)
    with pytest.raises(thdpack.InvalidArgument, match="both zero"):
        thdpack.ReorderExchange(group, microbatch_size=4,
                                cost=thdpack.ReorderCost(vision_weight=0.0))
    with pytest.raises(thdpack.InvalidArgument, match="multiple of G"):
        thdpack.ReorderExchange(group, microbatch_size=3, module_dp_sizes=[1, 2], cost=COST)
    with pytest.raises(thdpack.InvalidArgument, match="max_exchange_bytes must be 1 to"):
        thdpack.ReorderExchange(group, microbatch_size=2, cost=COST, max_exchange_bytes=0)
    # One rank permutes locally: the exchange works without any peer.
    exchange = thdpack.ReorderExchange(group, microbatch_size=2, cost=COST)
    shard = [thdpack.vl_sample(WORKLOAD, 0), thdpack.vl_sample(WORKLOAD, 1)]
    (mbs, positions, stats), = [exchange.exchange([shard])]
    assert sorted(s["id"] for s in mbs[0]) == [0, 1] and stats["samples_moved"] == 0
