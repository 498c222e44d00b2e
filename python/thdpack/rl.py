"""Driver-side micro-batch planning for RL frameworks (verl, NeMo-RL, OpenRLHF) where a driver
or every rank holds the whole batch: lengths in, each DP rank's micro-batches out.

    from thdpack.rl import dp_microbatches
    plan = dp_microbatches(lengths, dp=4, max_seqlen_per_dp_cp_rank=16384, group_ids=prompt_ids)
    for k, indices in enumerate(plan[rank]):      # micro-batch k of this DP rank
        batch = [rollouts[i] for i in indices]

``plan[r][k]`` lists the input positions of micro-batch ``k`` of DP rank ``r`` in increasing
order. Every DP rank gets the same number of micro-batches (a multiple of
``microbatch_multiple``), every micro-batch holds at most ``max_seqlen_per_dp_cp_rank * cp``
padded tokens, and every position appears exactly once. The plan is thdpack's ``balanced``
scheduler: as few micro-batches as the cap allows, modeled step time balanced across DP ranks.

Group ids (GRPO groups, preference pairs) keep the samples of a group in one micro-batch. A group
larger than one micro-batch is not an error: its samples go to consecutive micro-batches of one DP
rank (first-fit decreasing inside the group; other items fill the room left), so a rank-local
group reduction still sees the whole group. Then the micro-batch count can exceed balanced's
minimum, and the balance is a count-capped longest-processing-time deal of the runs and the
other packs. The ``balanced`` scheduler does all of this in C++ (the pipeline behind
``ThdPacker`` plans the same way); no communication.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import _thdpack


def _cost_model(model, cost):
    if cost is not None:
        return cost
    if model is None:
        return _thdpack.CostModel()
    spec = _thdpack.model_preset(model) if isinstance(model, str) else model
    return _thdpack.CostModel.from_model(spec)


def _integer_dtype(array: np.ndarray) -> bool:
    """Integers only: floats would be truncated and bools read as 0/1."""
    return np.issubdtype(array.dtype, np.integer) and array.dtype != np.bool_


def _as_lengths(lengths) -> np.ndarray:
    out = np.asarray(lengths)
    if out.ndim != 1 or (out.size and not _integer_dtype(out)):
        raise _thdpack.InvalidArgument("lengths must be a 1-D sequence of integers")
    if out.size and out.min() < 1:
        at = int(np.argmin(out))
        raise _thdpack.InvalidArgument(f"lengths[{at}] is {int(out[at])}; every length must be >= 1")
    return out.astype(np.int64)


def dp_microbatches(lengths: Sequence[int], *, dp: int, max_seqlen_per_dp_cp_rank: int,
                    cp: int = 1, group_ids: Optional[Sequence[int]] = None,
                    microbatch_multiple: int = 1, divisor: Optional[int] = None, model=None,
                    cost=None) -> list:
    """Each DP rank's micro-batches as lists of input positions: ``plan[rank][k]``.

    lengths: tokens of each sample (real lengths; each is padded up to ``divisor``, by default
    ``padding_divisor(cp=cp)``, when counted against the cap). group_ids: optional, one per
    sample. model / cost: the cost model balanced across ranks (a preset name such as
    ``"llama3-8b"``, a ``ModelSpec``, or a ``CostModel``; default: tokens). Raises
    ``InvalidArgument`` for a sample longer than the cap or too few samples to give every DP rank
    the same number of non-empty micro-batches.
    """
    real = _as_lengths(lengths)
    if dp < 1 or cp < 1 or microbatch_multiple < 1 or max_seqlen_per_dp_cp_rank < 1:
        raise _thdpack.InvalidArgument(
            "dp, cp, microbatch_multiple and max_seqlen_per_dp_cp_rank must be >= 1")
    d = _thdpack.padding_divisor(cp=cp) if divisor is None else int(divisor)
    padded = (real + d - 1) // d * d
    cost = _cost_model(model, cost)
    groups = None if group_ids is None else np.asarray(group_ids)
    if groups is not None and groups.size and not _integer_dtype(groups):
        raise _thdpack.InvalidArgument(
            f"group_ids must be integers, not {groups.dtype} values")
    if groups is not None:
        groups = groups.astype(np.int64)
    if groups is not None and groups.shape != real.shape:
        raise _thdpack.InvalidArgument(
            f"group_ids has {groups.size} entries for {real.size} lengths")
    plan = _thdpack.schedule(padded, dp=dp, max_seqlen_per_dp_cp_rank=max_seqlen_per_dp_cp_rank,
                             cp=cp, microbatch_multiple=microbatch_multiple, cost=cost,
                             samples_per_rank=_even_split(real.size, dp), group_ids=groups)
    return [[[int(i) for i in plan.pack(k, r)] for k in range(plan.num_microbatches)]
            for r in range(dp)]


def _even_split(n: int, parts: int) -> np.ndarray:
    """Sample counts of `parts` holders (the driver's data has no owner; "balanced" ignores it)."""
    return np.array([n // parts + (1 if r < n % parts else 0) for r in range(parts)], np.int64)
