"""Megatron-LM adapter: Megatron's sequence-packing entry points, served by thdpack's pipeline.

Two calls replace Megatron-LM's own (``megatron.core.datasets.data_schedule``) with the same
arguments and results, so a training script switches by changing an import::

    from thdpack.megatron import (get_batch_on_this_rank_for_sequence_packing,
                                  wrap_data_iterator)

    # once per global batch, on every rank (TP-rank 0 of the first and last stage holds an
    # iterator, the other ranks pass None)
    it, num_microbatches, seqlen_sum, seqlen_squared_sum = wrap_data_iterator(
        data_iterator, config, num_microbatches, pg_collection)
    # in forward_step, once per micro-batch
    (tokens, labels, loss_mask, attention_mask, position_ids, packed_seq_params,
     padding_mask) = get_batch_on_this_rank_for_sequence_packing(
        it, vpp_size=vpp_size, mtp_on_this_rank=False, vp_stage=vp_stage,
        dynamic_cp=config.dynamic_context_parallel, pg_collection=pg_collection, config=config)

The data iterator yields what Megatron's packing path takes: a dict, or a list of dicts, of 1-D
tensors ``tokens``, ``labels`` (already shifted: ``labels[j]`` is position j's target),
``loss_mask``, ``position_ids``; either one sample each (optionally with ``original_seq_len``, the
length before the dataset's padding) or pre-packed samples with ``cu_seqlens`` (cut into their
sub-samples; optionally ``original_seq_len`` with one length per sub-sample). A leading batch
dimension of 1 (the default collate function's) is dropped.

The config is read by Megatron's field names: ``sequence_packing_scheduler`` (any thdpack
scheduler: ``dp_balanced`` reproduces Megatron's plan, ``balanced`` balances compute;
``default_dynamic_cp`` / ``balanced_dynamic_cp`` give every micro-batch CP groups of their own
size over the dp x cp ranks, with ``local_cp_size`` and ``cp_group`` in ``packed_seq_params``),
``max_seqlen_per_dp_cp_rank``, ``context_parallel_size`` (checked against the groups),
``sequence_parallel``, ``virtual_pipeline_model_parallel_size``,
``microbatch_group_size_per_vp_stage``, ``thd_max_packed_sequences`` (a cap on the sequences of
one pack) and ``mtp_num_layers`` (with multi-token prediction the last stage gets tokens too). Static shapes for CUDA graphs and other ``ThdPacker`` options are keyword arguments of
``wrap_data_iterator`` (``tail_align``, ``tail_multiple``, ``tail_policy``,
``fixed_cu_seqlens_entries``, ``model``, ``cp_mode``, ``oversize``).

Groups come from ``pg_collection`` (attributes ``tp``, ``cp``, ``dp``, ``pp``; ``dp_cp`` is only
checked), from keyword arguments ``tp_group``, ``cp_group``, ``dp_group``, ``pp_group``, or from
``megatron.core.parallel_state`` when Megatron is importable. A group of size 1 may be omitted.

Where this differs from Megatron (see docs/megatron.md): every rank gets an iterator (thdpack's
pipeline already delivered each TP rank its rows, so ``get_batch...`` broadcasts nothing and must
be thdpack's); ``cu_seqlens_q``/``kv`` are the real boundaries (Megatron passes the padded ones);
the returned seqlen sums are those of the padded lengths thdpack computes (Megatron's figure).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Iterable, Iterator, Optional

import torch

from . import _thdpack
from .torch import ThdPacker, fail_step_with

_SAMPLE_KEYS = ("tokens", "labels", "loss_mask", "position_ids")
_ID_STRIDE = 1 << 40  # global id = DP rank * stride + position in the rank's step


@dataclasses.dataclass
class PackedSeqParams:
    """The fields of Megatron's ``PackedSeqParams`` that THD attention reads (used when
    ``megatron.core`` is not importable)."""

    qkv_format: Optional[str] = None
    cu_seqlens_q: Optional[torch.Tensor] = None
    cu_seqlens_kv: Optional[torch.Tensor] = None
    cu_seqlens_q_padded: Optional[torch.Tensor] = None
    cu_seqlens_kv_padded: Optional[torch.Tensor] = None
    max_seqlen_q: Optional[int] = None
    max_seqlen_kv: Optional[int] = None
    local_cp_size: Optional[int] = None
    cp_group: Any = None
    total_tokens: Optional[int] = None
    pad_between_seqs: Optional[bool] = None
    cp_partition_mode: str = "zigzag"


def packed_seq_params_class():
    """Megatron's ``PackedSeqParams`` when ``megatron.core`` is importable, else thdpack's."""
    try:
        from megatron.core.packed_seq_params import PackedSeqParams as megatron_class
    except ImportError:
        return PackedSeqParams
    return megatron_class


# ---- groups -------------------------------------------------------------------------------------

def _groups(pg_collection, explicit: dict) -> dict:
    """tp, cp, dp, pp (None where the size is 1 and nothing was given), and dp_cp if known."""
    out = {}
    for kind in ("tp", "cp", "dp", "pp", "dp_cp"):
        group = explicit.get(f"{kind}_group")
        if group is None and pg_collection is not None:
            group = getattr(pg_collection, kind, None)
        out[kind] = group
    if pg_collection is None and all(out[k] is None for k in ("tp", "cp", "dp", "pp")):
        try:
            from megatron.core import parallel_state as ps
        except ImportError:
            ps = None
        if ps is not None and ps.model_parallel_is_initialized():
            out = {"tp": ps.get_tensor_model_parallel_group(),
                   "cp": ps.get_context_parallel_group(),
                   "dp": ps.get_data_parallel_group(),
                   "pp": ps.get_pipeline_model_parallel_group(),
                   "dp_cp": ps.get_data_parallel_group(with_context_parallel=True)}
    return out


def _rank_and_size(group) -> tuple:
    import torch.distributed as dist

    if group is None:
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


# ---- configuration ------------------------------------------------------------------------------

def _field(config, name: str, default=None):
    value = getattr(config, name, default)
    return default if value is None else value


def _packer_settings(config, groups: dict, options: dict) -> dict:
    """ThdPacker keyword arguments from Megatron's config fields and the extra options."""
    names = list(_thdpack.scheduler_names())
    scheduler = getattr(config, "sequence_packing_scheduler", "dp_balanced")
    if scheduler is None:
        raise _thdpack.InvalidArgument(
            "config.sequence_packing_scheduler is None, which Megatron-LM reads as sequence "
            f"packing off; set it to one of {', '.join(names)} to pack")
    scheduler = str(scheduler).lower()
    if scheduler not in names:
        raise _thdpack.InvalidArgument(
            f"config.sequence_packing_scheduler is '{scheduler}'; thdpack has "
            f"{', '.join(names)}")
    cap = _field(config, "max_seqlen_per_dp_cp_rank")
    if cap is None:
        raise _thdpack.InvalidArgument(
            "config.max_seqlen_per_dp_cp_rank is not set; sequence packing needs the token "
            "budget of one micro-batch per DP x CP rank")
    cp = _rank_and_size(groups["cp"])[1]
    want_cp = int(_field(config, "context_parallel_size", cp))
    if want_cp != cp:
        raise _thdpack.InvalidArgument(
            f"config.context_parallel_size is {want_cp} but the context-parallel group has {cp} "
            "ranks; pass pg_collection (or cp_group) with the CP group")
    if groups["dp_cp"] is not None:
        dp = _rank_and_size(groups["dp"])[1]
        dp_cp = _rank_and_size(groups["dp_cp"])[1]
        if dp_cp != dp * cp:
            raise _thdpack.InvalidArgument(
                f"the dp_cp group has {dp_cp} ranks but dp x cp is {dp} x {cp}")
    vpp = int(_field(config, "virtual_pipeline_model_parallel_size", 1))
    settings = dict(max_seqlen_per_dp_cp_rank=int(cap), scheduler=scheduler,
                    sequence_parallel=bool(_field(config, "sequence_parallel", False)),
                    vpp=vpp, reading="megatron",
                    tokens_on_last_stage=int(_field(config, "mtp_num_layers", 0)) > 0)
    if vpp > 1:
        settings["vpp_group"] = int(_field(config, "microbatch_group_size_per_vp_stage", 0))
    mode = _field(config, "cp_partition_mode")
    if mode is not None:
        settings["cp_mode"] = str(mode)
    min_cp = _field(config, "min_dynamic_context_parallel_size")
    if min_cp is not None and scheduler.endswith("dynamic_cp"):
        settings["min_cp"] = int(min_cp)
    settings.update(_thd_padding_settings(config, cp))
    settings.update(options)
    return settings


def _thd_padding_settings(config, cp: int) -> dict:
    """Megatron's THD padding fields as ThdPacker's static-shape options.

    ``pad_packed_seq_alignment`` "max" (or CUDA graphs, ``cuda_graph_impl`` other than "none")
    pads every pack to ``max_seqlen_per_dp_cp_rank`` rows per CP rank; an integer N pads each CP
    rank's rows to a multiple of N, that is the pack's rows to a multiple of N·cp.
    ``thd_tail_padding_policy`` places the tail. ``thd_max_packed_sequences`` is then the static
    ``cu_seqlens`` capacity (that many + 1 entries, a dummy tail sequence included); without an
    alignment it only caps the sequences of a pack, as Megatron's scheduler does."""
    alignment = _field(config, "pad_packed_seq_alignment")
    max_sequences = int(_field(config, "thd_max_packed_sequences", 0))
    if alignment is None:
        return {"max_sequences_per_pack": max_sequences} if max_sequences else {}
    graphs = str(_field(config, "cuda_graph_impl", "none")) != "none"
    if graphs or alignment == "max":
        out = {"tail_align": "capacity"}
    else:
        if isinstance(alignment, bool) or int(alignment) < 1:
            raise _thdpack.InvalidArgument(
                f"config.pad_packed_seq_alignment is {alignment!r}; Megatron takes 'max' or a "
                "positive integer")
        out = {"tail_align": "multiple", "tail_multiple": int(alignment) * cp}
    out["tail_policy"] = str(_field(config, "thd_tail_padding_policy", "append_dummy_seq"))
    if max_sequences:
        out["fixed_cu_seqlens_entries"] = max_sequences + 1
    return out


_packers: dict = {}


def _packer(config, groups: dict, options: dict) -> tuple:
    """(ThdPacker, its settings): one packer per (groups, settings), built on first use (a
    collective over the world)."""
    settings = _packer_settings(config, groups, options)
    kinds = ("tp", "cp", "dp", "pp")
    key = (tuple(id(groups[k]) for k in kinds),
           tuple(sorted((k, repr(v)) for k, v in settings.items())))
    entry = _packers.get(key)
    if entry is None:
        device = {}
        if torch.cuda.is_available() and "device" not in settings:
            device["device"] = torch.device("cuda", torch.cuda.current_device())
        packer = ThdPacker(tp_group=groups["tp"], cp_group=groups["cp"], dp_group=groups["dp"],
                           pp_group=groups["pp"], **settings, **device)
        # The groups are kept with the packer so that their ids (the key) cannot be reused.
        entry = _packers[key] = (tuple(groups[k] for k in kinds), packer)
    return entry[1], settings


def release_packers() -> None:
    """Drops the packers ``wrap_data_iterator`` built, with the process groups they hold. Call it
    before ``torch.distributed.destroy_process_group()``: groups left for the interpreter's exit can
    be destroyed there on a gloo thread, which aborts the process."""
    import gc

    _packers.clear()
    ThdPacker._singleton_groups = (None, [])
    gc.collect()


# ---- samples ------------------------------------------------------------------------------------

def _flat(value) -> torch.Tensor:
    tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    if tensor.dim() == 2:
        if tensor.shape[0] != 1:
            raise _thdpack.InvalidArgument(
                f"a sample field has shape {tuple(tensor.shape)}; give 1-D tensors (or a leading "
                "batch dimension of 1)")
        tensor = tensor[0]
    return tensor.detach().cpu()


def _lengths(value, count: int, where: str) -> list:
    lengths = _flat(value).reshape(-1).tolist()
    if len(lengths) != count:
        raise _thdpack.InvalidArgument(
            f"{where}: original_seq_len has {len(lengths)} entries for {count} sub-samples")
    return [int(x) for x in lengths]


def _warn_on_ignore_labels_with_weight(fields: dict, where: str) -> None:
    """Hugging Face's -100 labels beside a loss mask that weighs those positions: Megatron's loss
    reads the mask, not -100; thdpack gives such positions weight 0 (a -100 label has no target).
    Said once per process, naming the first item, since the data usually has it throughout."""
    global _warned_ignore_labels
    if _warned_ignore_labels:
        return
    clash = (fields["labels"] < 0) & (fields["loss_mask"] != 0)
    if bool(clash.any()):
        _warned_ignore_labels = True
        warnings.warn(
            f"{where}: {int(clash.sum())} labels are negative (Hugging Face's -100?) where "
            "loss_mask is not 0; thdpack gives those positions weight 0 (a negative label has no "
            "target), while Megatron's loss would read the mask. Give labels as token ids and "
            "mark ignored positions in loss_mask only (this warning is shown once)",
            stacklevel=4)


_warned_ignore_labels = False


def sub_samples(item: dict, where: str = "sample") -> list:
    """The samples of one data-iterator item as thdpack sample dicts (without ids): the item
    itself, or its sub-samples when it carries ``cu_seqlens``; each cut to ``original_seq_len``
    when given."""
    if not isinstance(item, dict):
        raise _thdpack.InvalidArgument(
            f"{where} is a {type(item).__name__}; the data iterator must yield dicts (or lists of "
            "dicts) of 1-D tensors")
    missing = [k for k in ("tokens", "labels", "loss_mask") if k not in item]
    if missing:
        raise _thdpack.InvalidArgument(
            f"{where} lacks {', '.join(missing)}; it has {', '.join(sorted(item))}")
    fields = {k: _flat(item[k]) for k in _SAMPLE_KEYS if k in item}
    total = fields["tokens"].numel()
    for key, tensor in fields.items():
        if tensor.numel() != total:
            raise _thdpack.InvalidArgument(
                f"{where}: {key} has {tensor.numel()} entries but tokens has {total}")
    if "cu_seqlens" in item:
        cu = [int(x) for x in _flat(item["cu_seqlens"]).tolist()]
        if not cu or cu[0] != 0 or cu[-1] > total or any(b < a for a, b in zip(cu, cu[1:])):
            raise _thdpack.InvalidArgument(
                f"{where}: cu_seqlens {cu} must start at 0, not decrease and end within the "
                f"{total} tokens")
        bounds = [(a, b) for a, b in zip(cu, cu[1:])]
    else:
        bounds = [(0, total)]
    _warn_on_ignore_labels_with_weight(fields, where)
    if "original_seq_len" in item:
        kept = _lengths(item["original_seq_len"], len(bounds), where)
    else:
        kept = [b - a for a, b in bounds]
    out = []
    for (a, b), real in zip(bounds, kept):
        if real > b - a or real < 0:
            raise _thdpack.InvalidArgument(
                f"{where}: original_seq_len {real} is outside [0, {b - a}]")
        if real == 0:
            continue  # an empty slot of a pre-packed sample (Megatron skips it too)
        out.append({"input_ids": fields["tokens"][a:a + real].numpy(),
                    "labels": fields["labels"][a:a + real].numpy(),
                    "loss_mask": fields["loss_mask"][a:a + real].to(torch.float32).numpy(),
                    "labels_shifted": True})
    return out


def _pull(data_iterator, num_microbatches: int, dp_rank: int) -> list:
    samples = []
    for index in range(num_microbatches):
        try:
            item = next(data_iterator)
        except StopIteration:
            raise _thdpack.InvalidArgument(
                f"the data iterator of DP rank {dp_rank} ended after {index} of the "
                f"{num_microbatches} items this step needs (one per micro-batch)") from None
        items = item if isinstance(item, list) else [item]
        for j, one in enumerate(items):
            samples.extend(sub_samples(one, f"item {index}" + (f"[{j}]" if len(items) > 1 else "")))
    for position, sample in enumerate(samples):
        sample["id"] = dp_rank * _ID_STRIDE + position
    return samples


# ---- Megatron's entry points --------------------------------------------------------------------

def wrap_data_iterator(data_iterator, config, num_microbatches: int, pg_collection=None, *,
                       tp_group=None, cp_group=None, dp_group=None, pp_group=None,
                       **packer_options):
    """Megatron's ``wrap_data_iterator``: collective over the world, once per global batch.

    Pulls ``num_microbatches`` items from ``data_iterator`` on TP-rank 0 of the first and last
    pipeline stage (``None`` elsewhere; a list of one iterator per virtual stage with virtual
    pipelining, of which the first stage uses the first and the last stage the last), schedules
    the global batch and moves every sample to its DP replica, CP-sliced.

    Returns ``(iterator, num_microbatches, seqlen_sum, seqlen_squared_sum)``: the iterator (a list
    of one per virtual stage with virtual pipelining) yields this rank's micro-batches as dicts of
    tensors (tokens, labels, loss_mask, position_ids, padding_mask, cu_seqlens, cu_seqlens_padded,
    sample_ids) and ``max_seqlen``; the sums are floats over the padded lengths of the global
    batch, identical on every rank. ``packer_options`` go to ``ThdPacker``.
    """
    groups = _groups(pg_collection, {"tp_group": tp_group, "cp_group": cp_group,
                                     "dp_group": dp_group, "pp_group": pp_group})
    packer, settings = _packer(config, groups, packer_options)
    vpp = packer.options.topology.vpp
    if isinstance(data_iterator, (list, tuple)):
        if len(data_iterator) != vpp:
            raise _thdpack.InvalidArgument(
                f"got {len(data_iterator)} data iterators for {vpp} virtual stages")
        pp_rank = packer.coordinates["pp"]
        data_iterator = data_iterator[0] if pp_rank == 0 else data_iterator[-1]
    samples = []
    if packer.reads_data:
        try:
            if data_iterator is None:
                raise _thdpack.InvalidArgument(
                    f"rank {packer.coordinates} reads data (TP rank 0 of the first or last stage) "
                    "but was given no data iterator")
            samples = _pull(data_iterator, num_microbatches, packer.coordinates["dp"])
        except Exception as e:  # noqa: BLE001 - the peers wait in this step: tell them
            fail_step_with(packer.pipeline, e)
    step = packer.step(samples)
    flops = step.flops
    sums = (float(flops["seqlen_sum_padded"]), float(flops["seqlen_squared_sum_padded"]))
    dynamic = step.result.dynamic_cp
    # The mode the rows were sliced with and the static shapes (explicit options win over the
    # config's), which get_batch needs to write the metadata as Megatron writes it.
    mode = str(settings.get("cp_mode", _field(config, "cp_partition_mode", "zigzag")))
    tail = None
    if settings.get("tail_align", "none") != "none":
        tail = (settings.get("tail_policy", "append_dummy_seq") == "append_dummy_seq",
                int(settings.get("fixed_cu_seqlens_entries", 0)) > 0)

    def stage(v):
        views = step.virtual_stage(v)
        for view in views:
            view["cp_partition_mode"] = mode
            view["thd_tail"] = tail
        if dynamic:  # what Megatron's dynamic-CP batches carry, plus the group's members
            for view, group in zip(views, step.cp_groups):
                view["local_cp_size"] = group["local_cp_size"]
                view["cp_group_ranks"] = list(group["member_ranks"])
        return iter(views)

    iterator: Any = [stage(v) for v in range(vpp)] if vpp > 1 else stage(0)
    return iterator, step.num_microbatches, sums[0], sums[1]


def _stage(pp_group, vpp_size, vp_stage) -> tuple:
    """(first, last) stage as Megatron decides it: vp_stage counts only with virtual pipelining
    (vpp_size > 1); without it the PP rank alone decides."""
    pp_rank, pp_size = _rank_and_size(pp_group)
    virtual = vp_stage is not None and vpp_size is not None and vpp_size > 1
    first = pp_rank == 0 and (not virtual or vp_stage == 0)
    last = pp_rank == pp_size - 1 and (not virtual or vp_stage == vpp_size - 1)
    return first, last


def _dynamic_cp_group(ranks: list, cp_group_of):
    """The process group of a dynamic-CP micro-batch's CP group (global ranks ``ranks``)."""
    if cp_group_of is not None:
        return cp_group_of(tuple(ranks))
    try:
        from megatron.core import parallel_state as ps
    except ImportError:
        return None
    if not (hasattr(ps, "get_dynamic_data_context_parallel_groups")
            and ps.model_parallel_is_initialized()):
        return None
    import torch.distributed as dist

    group = ps.get_dynamic_data_context_parallel_groups(group_size=len(ranks))
    held = list(dist.get_process_group_ranks(group))
    if held != list(ranks):
        raise _thdpack.InvalidArgument(
            f"this micro-batch's CP group is ranks {list(ranks)}, but Megatron's dynamic CP group "
            f"of {len(ranks)} ranks here holds {held} (Megatron keeps only groups aligned to "
            "their size); pass cp_group_of to map the members to a process group")
    return group


def _megatron_thd_metadata(batch: dict, local_rows: int) -> tuple:
    """(cu_seqlens, max_seqlen, total_tokens) as Megatron's THD padding writes them for a packed
    micro-batch with static shapes: the appended dummy sequence's rows count as its valid tokens
    too (thdpack gives it real length 0); with a static cu_seqlens capacity max_seqlen is the
    pack's rows, and without one total_tokens is this rank's row count."""
    cu = batch["cu_seqlens"].to(torch.int32)
    max_seqlen = int(batch["max_seqlen"])
    tail = batch.get("thd_tail")
    if tail is None:
        return cu, max_seqlen, None
    dummy, static_cu = tail
    padded = batch["cu_seqlens_padded"]
    n = int(batch["sample_ids"].numel())
    if dummy and padded.numel() > n + 1 and int(padded[n + 1]) > int(padded[n]):
        cu = cu.clone()
        cu[n + 1:] += (padded[n + 1] - padded[n]).to(cu.dtype)
    if static_cu:
        return cu, int(padded[-1]), None
    return cu, max_seqlen, local_rows


def get_batch_on_this_rank_for_sequence_packing(data_iterator, vpp_size: Optional[int] = None,
                                                mtp_on_this_rank: bool = False,
                                                vp_stage: Optional[int] = None,
                                                dynamic_cp: bool = False, pg_collection=None,
                                                config=None, *, pp_group=None,
                                                cp_group_of=None):
    """Megatron's ``get_batch_on_this_rank_for_sequence_packing`` over an iterator from
    ``wrap_data_iterator`` (on every rank; no communication).

    Returns ``(tokens, labels, loss_mask, None, position_ids, packed_seq_params, padding_mask)``:
    per-row tensors of shape ``[1, T_local]`` (this rank's CP slice); tokens and position ids on
    the first stage (and with ``mtp_on_this_rank``), labels and loss mask on the last, ``None``
    elsewhere (the last stage gets tokens for ``mtp_on_this_rank`` when ``config.mtp_num_layers``
    was set); the padding mask (bool) everywhere. Padding rows hold 0 in tokens, labels,
    loss mask and position ids. ``packed_seq_params`` is Megatron's ``PackedSeqParams`` (or the
    field-compatible class here) with ``qkv_format="thd"``, the pack's real ``cu_seqlens_q/kv``,
    padded ``cu_seqlens_q_padded/kv_padded`` (int32) and ``max_seqlen_q/kv``. The stage comes
    from the pipeline group (``pg_collection.pp``, ``pp_group`` or Megatron's parallel state), or,
    without one, from the fields the micro-batch carries.

    With a dynamic-CP scheduler (``default_dynamic_cp``, ``balanced_dynamic_cp``) the rows are
    this rank's zigzag slice over the micro-batch's own CP group, and ``packed_seq_params`` also
    carries ``local_cp_size`` (the group's size) and ``cp_group``, as Megatron's dynamic-CP path
    sets them: ``cp_group_of(member_ranks)`` when given (a tuple of global ranks in group order),
    else Megatron's ``parallel_state.get_dynamic_data_context_parallel_groups(group_size=...)``
    when Megatron is initialised (checked to hold exactly the members), else ``None``.
    """
    if data_iterator is None:
        raise _thdpack.InvalidArgument(
            "no data iterator: with thdpack every rank passes the iterator wrap_data_iterator "
            "returned (TP peers got their rows from the pipeline, nothing is broadcast here)")
    if dynamic_cp not in (True, False, None):  # a flag (numpy's bools too), not a group
        raise _thdpack.InvalidArgument(
            f"dynamic_cp is a {type(dynamic_cp).__name__}, not a flag: Megatron-LM's signature is "
            "(data_iterator, vpp_size, mtp_on_this_rank, vp_stage, dynamic_cp, pg_collection, "
            "config); pass pg_collection= by keyword")
    if pp_group is None and pg_collection is not None:
        pp_group = getattr(pg_collection, "pp", None)
    if pp_group is None and pg_collection is None:
        pp_group = _groups(None, {}).get("pp")
    batch = next(data_iterator)
    pad = batch["padding_mask"].to(torch.bool)
    if pp_group is not None:
        first, last = _stage(pp_group, vpp_size, vp_stage)
    else:
        # No pipeline group known: the stage is what the micro-batch carries (the pipeline gives
        # tokens to the first stage and labels to the last).
        first, last = batch["tokens"].numel() > 0, batch["labels"].numel() > 0

    def rows(name, wanted):
        if not wanted:
            return None
        tensor = batch[name]
        if tensor.numel() != pad.numel():
            raise _thdpack.InvalidArgument(
                f"this stage needs {name} but the micro-batch does not carry it: thdpack's "
                "pipeline delivers tokens and position ids to the first stage and labels and loss "
                "mask to the last")
        return tensor.masked_fill(pad, 0).view(1, -1)

    tokens = rows("tokens", first or mtp_on_this_rank)
    position_ids = rows("position_ids", first or mtp_on_this_rank)
    labels = rows("labels", last)
    loss_mask = rows("loss_mask", last)
    cu, max_seqlen, total_tokens = _megatron_thd_metadata(batch, pad.numel())
    cu_padded = batch["cu_seqlens_padded"].to(torch.int32)
    if dynamic_cp and "local_cp_size" not in batch:
        raise _thdpack.InvalidArgument(
            "dynamic_cp=True but the micro-batch has no local_cp_size: its scheduler is a fixed-CP "
            "one; set config.sequence_packing_scheduler to a dynamic-CP scheduler or pass "
            "dynamic_cp=False")
    params = packed_seq_params_class()(
        qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, cu_seqlens_q_padded=cu_padded,
        cu_seqlens_kv_padded=cu_padded, max_seqlen_q=max_seqlen, max_seqlen_kv=max_seqlen,
        total_tokens=total_tokens)
    # Megatron sets both on every packed batch: rows between sequences may be padding, and the
    # slicing mode TE's THD attention must use.
    mode = batch.get("cp_partition_mode", _field(config, "cp_partition_mode", "zigzag"))
    for name, value in (("pad_between_seqs", True), ("cp_partition_mode", str(mode))):
        if hasattr(params, name):
            setattr(params, name, value)
    if "local_cp_size" in batch:
        # thdpack's rows are sliced for the micro-batch's own group whatever dynamic_cp says, so
        # the group is always named (Megatron reads it only with dynamic_cp).
        params.local_cp_size = int(batch["local_cp_size"])
        params.cp_group = _dynamic_cp_group(batch["cp_group_ranks"], cp_group_of)
    return tokens, labels, loss_mask, None, position_ids, params, pad.view(1, -1)


# ---- mock data in Megatron's sample order -------------------------------------------------------

def mock_data_iterator(config, dp_rank: int, dp_size: int, seq_length: int = 0,
                       start: int = 0) -> Iterator[dict]:
    """Items as Megatron's packing path takes them, from thdpack's mock dataset
    (``config.sft_mock_dataset_config_json``, or Megatron's default mock for ``seq_length``), in
    the order ``MegatronPretrainingSampler`` deals them with one sample per micro-batch: DP rank r
    gets dataset samples r, r + dp, r + 2·dp, ... from ``start`` on. Labels are shifted (token
    j + 1 of the sample, the end-of-document token's target is itself with loss mask 0)."""
    spec = _field(config, "sft_mock_dataset_config_json")
    if spec is None:
        if seq_length < 1:
            raise _thdpack.InvalidArgument(
                "config.sft_mock_dataset_config_json is not set; give it or seq_length")
        spec = _thdpack.default_mock_config(seq_length)
    dataset = _thdpack.mock_dataset(spec)
    index = start + dp_rank
    while True:
        sample = dataset.sample(index % dataset.size)
        ids = torch.as_tensor(sample["input_ids"], dtype=torch.int64)
        labels = torch.cat([ids[1:], ids[-1:]])
        loss_mask = torch.ones(ids.numel(), dtype=torch.float32)
        loss_mask[-1] = 0.0
        yield {"tokens": ids, "labels": labels, "loss_mask": loss_mask,
               "position_ids": torch.arange(ids.numel(), dtype=torch.int64)}
        index += dp_size

