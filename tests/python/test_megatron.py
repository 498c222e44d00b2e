"""thdpack.megatron with stand-ins written from Megatron-LM's documented interfaces: a config object
with Megatron's field names, a pg_collection of gloo process groups, data iterators yielding dicts
of 1-D tensors (Megatron's packing path input). Every rank's get_batch tuple is compared with an
independent single-process reference: Megatron's dp_balanced plan over samples dealt as
MegatronPretrainingSampler deals them, packed, padded and zigzag-sliced here."""

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import thdpack
import thdpack.megatron as tm
from dist_support import megatron_groups, run_processes
from megatron_reference import megatron_dp_balanced

CONFIG = json.dumps({"mode": "distribution", "type": "lognormal", "min_seq_len": 3,
                     "max_seq_len": 200, "mean_seq_len": 50, "lognormal_sigma": 1.0,
                     "size": 5000, "seed": 11})
M = 256


def megatron_config(cp=1, scheduler="dp_balanced", vpp=None, group=None, **extra):
    return SimpleNamespace(sequence_packing_scheduler=scheduler, max_seqlen_per_dp_cp_rank=M,
                           context_parallel_size=cp, sequence_parallel=False,
                           virtual_pipeline_model_parallel_size=vpp,
                           microbatch_group_size_per_vp_stage=group,
                           sft_mock_dataset_config_json=CONFIG, **extra)


# ---- the independent reference ------------------------------------------------------------------

def sampler_order(step, per_rank, dp):
    """Dataset indices in DP-rank-major order: rank r holds r, r + dp, ... (one sample per
    micro-batch, MegatronPretrainingSampler)."""
    return [(step * per_rank + j) * dp + r for r in range(dp) for j in range(per_rank)]


def reference_pack(token_lists, divisor, cp, cp_rank):
    """The pack of these samples as Megatron's get_batch returns it on CP rank cp_rank."""
    fields = {k: [] for k in ("tokens", "labels", "loss_mask", "position_ids", "padding_mask")}
    cu, cu_padded = [0], [0]
    for ids in token_lists:
        real = len(ids)
        padded = -(-real // divisor) * divisor
        pads = padded - real
        full = {"tokens": list(ids) + [0] * pads,
                "labels": list(ids[1:]) + [ids[-1]] + [0] * pads,
                "loss_mask": [1.0] * (real - 1) + [0.0] + [0.0] * pads,
                "position_ids": list(range(real)) + [0] * pads,
                "padding_mask": [False] * real + [True] * pads}
        chunk = padded // (2 * cp)
        keep = list(range(padded)) if cp == 1 else \
            list(range(cp_rank * chunk, (cp_rank + 1) * chunk)) + \
            list(range((2 * cp - 1 - cp_rank) * chunk, (2 * cp - cp_rank) * chunk))
        for key in fields:
            fields[key].extend(full[key][j] for j in keep)
        cu.append(cu[-1] + real)
        cu_padded.append(cu_padded[-1] + padded)
    return fields, cu, cu_padded, max(b - a for a, b in zip(cu_padded, cu_padded[1:]))


# ---- the ranks ----------------------------------------------------------------------------------

def _layout_worker(rank, world, tp, cp, dp, pp, vpp, scheduler, steps, out_dir):
    topology = thdpack.Topology(tp=tp, cp=cp, dp=dp, pp=pp, vpp=vpp or 1,
                                vpp_group=2 if vpp else 0)
    groups = megatron_groups(topology, ("tp", "cp", "dp", "pp", "dp_cp"))
    pg = SimpleNamespace(**groups)
    mtp = pp > 1  # multi-token prediction on the last stage
    config = megatron_config(cp=cp, scheduler=scheduler, vpp=vpp, group=2 if vpp else None,
                             mtp_num_layers=1 if mtp else None)
    coords = topology.coordinates(rank)
    reads = coords["tp"] == 0 and coords["pp"] in (0, pp - 1)
    per_rank = 6
    source = tm.mock_data_iterator(config, coords["dp"], dp) if reads else None
    if source is not None and vpp:
        source = [source] * vpp  # Megatron hands one iterator per virtual stage
    dataset = thdpack.mock_dataset(CONFIG)
    divisor = 2 * cp if cp > 1 else 1
    checked = 0
    for step in range(steps):
        it, count, s1, s2 = tm.wrap_data_iterator(source, config, per_rank, pg)
        order = sampler_order(step, per_rank, dp)
        samples = [np.asarray(dataset.sample(i)["input_ids"]) for i in order]
        padded = [-(-len(s) // divisor) * divisor for s in samples]
        assert (s1, s2) == (float(sum(padded)), float(sum(p * p for p in padded)))
        assert isinstance(s1, float)
        if scheduler == "dp_balanced":
            packs = megatron_dp_balanced(padded, M * cp, dp * (2 if vpp else 1))
        else:
            plan = thdpack.schedule(padded, dp=dp, max_seqlen_per_dp_cp_rank=M, cp=cp,
                                    scheduler=scheduler, pp=pp,
                                    microbatch_multiple=2 if vpp else 1)
            packs = [list(plan.pack(p // dp, p % dp)) for p in range(plan.num_packs)]
        assert count == len(packs) // dp
        stages = list(range(vpp)) if vpp else [None]
        iterators = it if vpp else [it]
        assert len(iterators) == len(stages)
        for stage, iterator in zip(stages, iterators):
            for k in range(count):
                first = coords["pp"] == 0 and stage in (None, 0)
                last = coords["pp"] == pp - 1 and stage in (None, (vpp or 1) - 1)
                got = tm.get_batch_on_this_rank_for_sequence_packing(
                    iterator, vpp, mtp and last, stage, pg_collection=pg)
                tokens, labels, loss_mask, attention, positions, params, pad = got
                want, cu, cu_padded, max_seqlen = reference_pack(
                    [samples[i] for i in packs[k * dp + coords["dp"]]], divisor, cp, coords["cp"])
                assert attention is None
                expect = {"tokens": (tokens, first or (mtp and last), torch.int64),
                          "position_ids": (positions, first or (mtp and last), torch.int64),
                          "labels": (labels, last, torch.int64),
                          "loss_mask": (loss_mask, last, torch.float32),
                          "padding_mask": (pad, True, torch.bool)}
                for name, (tensor, present, dtype) in expect.items():
                    if not present:
                        assert tensor is None, (rank, name)
                        continue
                    assert tensor.dtype == dtype and tensor.shape == (1, len(want[name])), (
                        name, tensor.shape, len(want[name]), rank, stage, k, count, step,
                        params.cu_seqlens_q.tolist(), cu)
                    assert tensor[0].tolist() == want[name], (rank, stage, k, name)
                assert params.qkv_format == "thd"
                assert params.cu_seqlens_q.dtype == torch.int32
                assert params.cu_seqlens_q.tolist() == cu == params.cu_seqlens_kv.tolist()
                assert params.cu_seqlens_q_padded.tolist() == cu_padded
                assert params.cu_seqlens_kv_padded.tolist() == cu_padded
                assert params.max_seqlen_q == params.max_seqlen_kv == max_seqlen
                checked += 1
            with pytest.raises(StopIteration):
                next(iterator)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"checked": checked}, f)


@pytest.mark.parametrize("tp,cp,dp,pp,vpp,scheduler", [
    (1, 2, 2, 1, None, "dp_balanced"),   # CP zigzag, DP exchange, dp_cp group
    (2, 1, 1, 2, 2, "dp_balanced"),      # TP peers, PP stages, virtual stages
    (1, 1, 4, 1, None, "balanced"),      # thdpack's workload-aware plan through the same API
])
def test_every_rank_gets_what_megatron_would_give_it(tmp_path, tp, cp, dp, pp, vpp, scheduler):
    world = tp * cp * dp * pp
    run_processes(world, _layout_worker, tp, cp, dp, pp, vpp, scheduler, 2, str(tmp_path))
    checked = [json.loads((tmp_path / f"rank{r}.json").read_text())["checked"]
               for r in range(world)]
    assert all(c > 0 for c in checked)


def _items_worker(rank, world, out_dir):
    """Pre-packed items and lists of dicts give the same micro-batches as single samples."""
    config = megatron_config()
    dataset = thdpack.mock_dataset(CONFIG)
    ids = [torch.as_tensor(dataset.sample(i)["input_ids"]) for i in range(8)]

    def single(t):
        return {"tokens": t, "labels": torch.cat([t[1:], t[-1:]]),
                "loss_mask": torch.cat([torch.ones(len(t) - 1), torch.zeros(1)]),
                "position_ids": torch.arange(len(t))}

    def packed(ts, pad=0):
        # a pre-packed item (Megatron's SFT dataset shape) whose slots carry `pad` extra tokens
        parts = [single(torch.cat([t, torch.zeros(pad, dtype=torch.int64)])) for t in ts]
        item = {k: torch.cat([p[k] for p in parts]).unsqueeze(0) for k in parts[0]}
        lengths = [len(t) + pad for t in ts]
        item["cu_seqlens"] = torch.tensor([0] + list(np.cumsum(lengths)), dtype=torch.int32)
        if pad:
            item["original_seq_len"] = torch.tensor([len(t) for t in ts])
            for p, t in zip(parts, ts):
                p["labels"][len(t) - 1] = t[-1]
            item["labels"] = torch.cat([
                torch.cat([single(t)["labels"], torch.zeros(pad, dtype=torch.int64)]) for t in ts])
            item["loss_mask"] = torch.cat([
                torch.cat([single(t)["loss_mask"], torch.zeros(pad)]) for t in ts])
        return item

    def run(items, count):
        it, n, s1, s2 = tm.wrap_data_iterator(iter(items), config, count)
        return [tm.get_batch_on_this_rank_for_sequence_packing(it) for _ in range(n)], s1, s2

    def same(a, b):
        assert len(a[0]) == len(b[0]) and a[1:] == b[1:]
        for x, y in zip(a[0], b[0]):
            for i in (0, 1, 2, 4, 6):
                assert torch.equal(x[i], y[i])
            assert torch.equal(x[5].cu_seqlens_q, y[5].cu_seqlens_q)
            assert torch.equal(x[5].cu_seqlens_q_padded, y[5].cu_seqlens_q_padded)

    base = run([single(t) for t in ids], 8)
    same(run([[single(t) for t in ids[:3]], [single(t) for t in ids[3:]]], 2), base)
    same(run([packed(ids[:5]), packed(ids[5:])], 2), base)
    same(run([packed(ids[:4], pad=3), packed(ids[4:], pad=3)], 2), base)
    # a leading batch dimension of 1 (default collate) is dropped
    same(run([{k: v.unsqueeze(0) for k, v in single(t).items()} for t in ids], 8), base)

    # errors name what is wrong
    with pytest.raises(thdpack.InvalidArgument, match="lacks labels"):
        run([{"tokens": ids[0], "loss_mask": torch.ones(len(ids[0]))}], 1)
    with pytest.raises(thdpack.InvalidArgument, match="cu_seqlens"):
        bad = packed(ids[:2])
        bad["cu_seqlens"] = torch.tensor([0, 5, 3], dtype=torch.int32)
        run([bad], 1)
    with pytest.raises(thdpack.InvalidArgument, match="max_seqlen_per_dp_cp_rank"):
        tm.wrap_data_iterator(iter([]), SimpleNamespace(sequence_packing_scheduler="dp_balanced"),
                              1)
    with pytest.raises(thdpack.InvalidArgument, match="no_such"):
        tm.wrap_data_iterator(iter([]), megatron_config(scheduler="no_such"), 1)
    with pytest.raises(thdpack.InvalidArgument, match="context_parallel_size is 2"):
        tm.wrap_data_iterator(iter([]), megatron_config(cp=2), 1)
    with pytest.raises(thdpack.InvalidArgument, match="every rank passes the iterator"):
        tm.get_batch_on_this_rank_for_sequence_packing(None)
    with open(os.path.join(out_dir, "items.json"), "w") as f:
        json.dump({"ok": True}, f)


def test_prepacked_items_and_lists_are_cut_into_the_same_samples(tmp_path):
    run_processes(1, _items_worker, str(tmp_path))
    assert json.loads((tmp_path / "items.json").read_text())["ok"]


def _static_worker(rank, world, out_dir):
    """Static shapes and the sequence cap through the adapter: every micro-batch the same shape."""
    topology = thdpack.Topology(tp=1, cp=2, dp=1)
    groups = megatron_groups(topology, ("cp",))
    config = megatron_config(cp=2, thd_max_packed_sequences=3)
    source = tm.mock_data_iterator(config, 0, 1)
    shapes = set()
    for _ in range(2):
        it, n, _, _ = tm.wrap_data_iterator(source, config, 10, cp_group=groups["cp"],
                                            tail_align="capacity", tail_policy="append_dummy_seq",
                                            fixed_cu_seqlens_entries=5)
        for _ in range(n):
            tokens, _, _, _, _, params, pad = tm.get_batch_on_this_rank_for_sequence_packing(it)
            shapes.add((tuple(tokens.shape), tuple(params.cu_seqlens_q.shape)))
            assert params.cu_seqlens_q_padded[-1].item() == M * 2
            sequences = int((params.cu_seqlens_q_padded.diff() > 0).sum())
            assert sequences <= 4  # at most 3 samples plus the dummy sequence
    with open(os.path.join(out_dir, f"static{rank}.json"), "w") as f:
        json.dump({"shapes": sorted(shapes)}, f)


def test_static_shapes_and_sequence_cap_through_the_adapter(tmp_path):
    run_processes(2, _static_worker, str(tmp_path))
    for r in range(2):
        shapes = json.loads((tmp_path / f"static{r}.json").read_text())["shapes"]
        assert shapes == [[[1, M], [5]]]


def _check_megatron_thd_metadata(batch, fields):
    """The metadata conventions of Megatron's THD padding (pad_sequence_for_thd on Megatron-LM's
    dev branch): an appended dummy sequence has as many valid tokens as rows, a static
    cu_seqlens capacity makes max_seqlen the pack's rows, and without one total_tokens is this
    rank's rows."""
    params, pad = batch[5], batch[6]
    cu, padded = params.cu_seqlens_q.tolist(), params.cu_seqlens_q_padded.tolist()
    if "pad_packed_seq_alignment" not in fields:
        assert params.total_tokens is None
        return
    static = "thd_max_packed_sequences" in fields
    # Every sequence with rows has valid tokens: a dummy's rows count as its tokens (thdpack's own
    # convention gives it 0).
    assert all(cu[i + 1] > cu[i] for i in range(len(padded) - 1) if padded[i + 1] > padded[i])
    if static:
        assert params.max_seqlen_q == padded[-1]
    assert params.total_tokens == (None if static else pad.numel())


def _thd_padding_worker(rank, world, out_dir):
    """Megatron dev's THD padding fields in the config give the static shapes the explicit ThdPacker
    options give, and every batch carries pad_between_seqs and the CP partition mode."""
    topology = thdpack.Topology(tp=1, cp=2, dp=1)
    groups = megatron_groups(topology, ("cp",))
    cases = [  # config fields, the explicit options they stand for
        ({"pad_packed_seq_alignment": "max", "thd_max_packed_sequences": 4},
         {"tail_align": "capacity", "fixed_cu_seqlens_entries": 5}),
        ({"pad_packed_seq_alignment": 16, "thd_tail_padding_policy": "extend_last"},
         {"tail_align": "multiple", "tail_multiple": 32, "tail_policy": "extend_last"}),
        ({"pad_packed_seq_alignment": 8, "cuda_graph_impl": "local",
          "thd_max_packed_sequences": 6},
         {"tail_align": "capacity", "fixed_cu_seqlens_entries": 7}),
        ({"thd_max_packed_sequences": 2}, {"max_sequences_per_pack": 2}),
    ]
    results = []
    for fields, options in cases:
        got = []
        for config, extra in ((megatron_config(cp=2, **fields), {}),
                              (megatron_config(cp=2), options)):
            it, n, _, _ = tm.wrap_data_iterator(tm.mock_data_iterator(config, 0, 1), config, 12,
                                                cp_group=groups["cp"], **extra)
            got.append([tm.get_batch_on_this_rank_for_sequence_packing(it, config=config)
                        for _ in range(n)])
        by_config, by_options = got
        assert len(by_config) == len(by_options), fields
        for a, b in zip(by_config, by_options):
            for i in (0, 1, 2, 4, 6):
                assert torch.equal(a[i], b[i]), (fields, i)
            for name in ("cu_seqlens_q", "cu_seqlens_q_padded"):
                assert torch.equal(getattr(a[5], name), getattr(b[5], name)), (fields, name)
            assert a[5].pad_between_seqs is True and a[5].cp_partition_mode == "zigzag"
            _check_megatron_thd_metadata(a, fields)
        results.append({"fields": fields,
                        "cu_entries": sorted({int(b[5].cu_seqlens_q.numel()) for b in by_config}),
                        "rows": sorted({int(b[5].cu_seqlens_q_padded[-1]) for b in by_config})})
    with open(os.path.join(out_dir, f"thd{rank}.json"), "w") as f:
        json.dump(results, f)


def test_megatrons_thd_padding_fields_give_static_shapes(tmp_path):
    run_processes(2, _thd_padding_worker, str(tmp_path))
    for r in range(2):
        first, multiple, graphs, cap = json.loads((tmp_path / f"thd{r}.json").read_text())
        assert first["cu_entries"] == [5] and first["rows"] == [M * 2]
        assert all(rows % 32 == 0 for rows in multiple["rows"]) and len(multiple["rows"]) > 1
        assert graphs["cu_entries"] == [7] and graphs["rows"] == [M * 2]
        assert max(cap["cu_entries"]) <= 3


def test_get_batch_takes_megatron_devs_arguments_in_order():
    import inspect

    # megatron/core/datasets/data_schedule.py on Megatron-LM's dev branch
    dev = ["data_iterator", "vpp_size", "mtp_on_this_rank", "vp_stage", "dynamic_cp",
           "pg_collection", "config"]
    params = inspect.signature(tm.get_batch_on_this_rank_for_sequence_packing).parameters
    positional = [n for n, p in params.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == dev
    assert params["dynamic_cp"].default is False and params["config"].default is None
    with pytest.raises(thdpack.InvalidArgument, match="pass pg_collection= by keyword"):
        tm.get_batch_on_this_rank_for_sequence_packing(iter([{}]), None, False, None,
                                                      SimpleNamespace(pp=None))


def test_packed_seq_params_has_megatrons_fields():
    names = {f.name for f in tm.PackedSeqParams.__dataclass_fields__.values()}
    assert {"qkv_format", "cu_seqlens_q", "cu_seqlens_kv", "cu_seqlens_q_padded",
            "cu_seqlens_kv_padded", "max_seqlen_q", "max_seqlen_kv"} <= names


def test_the_megatron_example_trains(tmp_path):
    """examples/megatron_train.py: Megatron's loop on thdpack, static shapes, loss going down."""
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "megatron_train.py")
    run = subprocess.run([sys.executable, example, "--nproc", "2", "--dp", "1", "--cp", "2",
                          "--steps", "3", "--scheduler", "balanced", "--static-shapes"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    losses = [float(line.split("loss ")[1].split(",")[0])
              for line in run.stdout.splitlines() if line.startswith("step ")]
    assert len(losses) == 3 and losses[-1] < losses[0], run.stdout


def test_megatron_sample_order_in_python():
    got = thdpack.global_batch_indices(1, 8, 100, dp=2, order="megatron")
    assert list(got) == [8, 10, 12, 14, 9, 11, 13, 15]
    assert list(thdpack.global_batch_indices(1, 8, 100)) == list(range(8, 16))
    assert list(thdpack.global_batch_indices(1, 8, 100, dp=2)) == list(range(8, 16))
    dataset = thdpack.mock_dataset(CONFIG)
    batch = thdpack.make_global_batch(dataset, 0, global_batch=6, dp=3, capacity=256,
                                      order="megatron")
    assert list(batch.ids) == sampler_order(0, 2, 3)
    with pytest.raises(thdpack.InvalidArgument, match="'contiguous' or 'megatron'"):
        thdpack.global_batch_indices(0, 8, 100, dp=2, order="interleaved")


@pytest.mark.parametrize("vpp_size", [None, 1])
def test_vp_stage_without_virtual_pipelining_is_ignored_as_megatron_does(monkeypatch, vpp_size):
    import torch.distributed as dist

    from thdpack.megatron import _stage

    for pp_rank in (0, 1, 2):
        monkeypatch.setattr(dist, "get_rank", lambda group, r=pp_rank: r)
        monkeypatch.setattr(dist, "get_world_size", lambda group: 3)
        for vp_stage in (None, 0, 1):
            assert _stage(object(), vpp_size, vp_stage) == (pp_rank == 0, pp_rank == 2)
    monkeypatch.setattr(dist, "get_rank", lambda group: 0)
    assert _stage(object(), 2, 1) == (False, False)
    monkeypatch.setattr(dist, "get_world_size", lambda group: 1)
    assert _stage(object(), 2, 1) == (False, True)


def test_a_scheduler_of_none_is_refused_as_megatron_reads_it_as_packing_off():
    config = SimpleNamespace(sequence_packing_scheduler=None, max_seqlen_per_dp_cp_rank=64)
    groups = {"tp": None, "cp": None, "dp": None, "pp": None}
    with pytest.raises(thdpack.InvalidArgument, match="reads as sequence packing off"):
        tm._packer_settings(config, groups, {})


def test_hugging_face_ignore_labels_beside_a_loss_mask_are_named_once(monkeypatch):
    monkeypatch.setattr(tm, "_warned_ignore_labels", False)
    t = torch.arange(1, 9)
    item = {"tokens": t, "labels": torch.tensor([-100, -100, 4, 5, 6, 7, 8, 9]),
            "loss_mask": torch.ones(8)}
    with pytest.warns(UserWarning, match="2 labels are negative"):
        tm.sub_samples(item, "item 0")
    import warnings as w
    with w.catch_warnings():
        w.simplefilter("error")
        tm.sub_samples(item, "item 1")  # said once
        tm.sub_samples({**item, "labels": t + 1}, "item 2")  # token ids: nothing to say
