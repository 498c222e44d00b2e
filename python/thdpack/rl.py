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
other packs. Plain, deterministic Python on top of the C++ scheduler; no communication.
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
    capacity = max_seqlen_per_dp_cp_rank * cp
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
    big = _oversize_groups(padded, groups, capacity)
    if not big:
        plan = _thdpack.schedule(padded, dp=dp, max_seqlen_per_dp_cp_rank=max_seqlen_per_dp_cp_rank,
                                 cp=cp, microbatch_multiple=microbatch_multiple, cost=cost,
                                 samples_per_rank=_even_split(real.size, dp), group_ids=groups)
        return [[[int(i) for i in plan.pack(k, r)] for k in range(plan.num_microbatches)]
                for r in range(dp)]
    return _plan_with_oversize_groups(padded, groups, big, dp, max_seqlen_per_dp_cp_rank, cp,
                                      microbatch_multiple, cost)


def _even_split(n: int, parts: int) -> np.ndarray:
    """Sample counts of `parts` holders (the driver's data has no owner; "balanced" ignores it)."""
    return np.array([n // parts + (1 if r < n % parts else 0) for r in range(parts)], np.int64)


def _oversize_groups(padded, groups, capacity) -> dict:
    """Group id -> positions, for the groups whose padded total exceeds the capacity."""
    if groups is None or groups.size == 0:
        return {}
    unique, inverse = np.unique(groups, return_inverse=True)
    totals = np.bincount(inverse, weights=padded, minlength=unique.size)
    over = np.flatnonzero(totals > capacity)
    return {int(unique[g]): np.flatnonzero(inverse == g) for g in over}


class _Unit:
    """Consecutive packs that stay on one DP rank (one pack for ordinary items). A pack is a list
    of items, an item a list of positions that must stay together (a group that fits, or one
    sample of a group that does not)."""

    __slots__ = ("packs", "cost")

    def __init__(self, packs, cost):
        self.packs = packs
        self.cost = cost


def _plan_with_oversize_groups(padded, groups, big, dp, m, cp, multiple, cost) -> list:
    capacity = m * cp
    sample_cost = np.array([cost.cost(int(length)) for length in padded])
    for positions in big.values():
        if padded[positions].max() > capacity:
            at = int(positions[np.argmax(padded[positions])])
            raise _thdpack.InvalidArgument(
                f"sample {at} has {int(padded[at])} padded tokens but the cap is {capacity} "
                f"(max_seqlen_per_dp_cp_rank x cp); raise the cap or truncate")
    try:
        return _deal_runs_and_rest(padded, groups, big, dp, m, cp, multiple, cost, sample_cost,
                                   top_up=True)
    except _thdpack.InvalidArgument:
        # Filling the runs' room left too few items to split into equal counts; without it
        # there are more, smaller packs.
        return _deal_runs_and_rest(padded, groups, big, dp, m, cp, multiple, cost, sample_cost,
                                   top_up=False)


def _deal_runs_and_rest(padded, groups, big, dp, m, cp, multiple, cost, sample_cost, top_up):
    capacity = m * cp
    runs = []
    for gid in sorted(big):
        positions = big[gid]
        bins = _thdpack.first_fit_decreasing(padded[positions], capacity)
        packs = [[[int(positions[j])] for j in sorted(b)] for b in bins]
        runs.append(_Unit(packs, float(sample_cost[positions].sum())))
    rest = np.setdiff1d(np.arange(padded.size), np.concatenate(list(big.values())))
    if top_up:
        rest = _top_up_runs(runs, rest, padded, groups, sample_cost, capacity)
    singles = []
    if rest.size:
        # The other items packed with the scheduler's own fill on one replica, then dealt out.
        plan = _thdpack.schedule(padded[rest], dp=1, max_seqlen_per_dp_cp_rank=m, cp=cp, cost=cost,
                                 group_ids=None if groups is None else groups[rest])
        for k in range(plan.num_microbatches):
            pack = [int(rest[i]) for i in plan.pack(k, 0)]
            items = {}
            for i in pack:
                items.setdefault(i if groups is None else int(groups[i]), []).append(i)
            singles.append(_Unit([list(items.values())], float(sample_cost[pack].sum())))
    ranks = _deal_units(runs, singles, dp, multiple)
    in_runs = set(int(i) for positions in big.values() for i in positions)
    return [_fill_to(rank_packs, target, sample_cost, in_runs, r)
            for r, (rank_packs, target) in enumerate(ranks)]


def _top_up_runs(runs, rest, padded, groups, sample_cost, capacity) -> np.ndarray:
    """First-fit decreasing of the other items (whole groups, or samples) into the room the runs'
    packs leave; returns the positions still to place."""
    items = {}
    for i in rest:
        items.setdefault(int(i) if groups is None else int(groups[i]), []).append(int(i))
    order = sorted(items.values(), key=lambda item: (-int(padded[item].sum()), item[0]))
    room = [[capacity - int(sum(padded[it].sum() for it in pack)) for pack in u.packs]
            for u in runs]
    placed = set()
    for item in order:
        size = int(padded[item].sum())
        spot = next(((u, p) for u in range(len(runs)) for p in range(len(room[u]))
                     if room[u][p] >= size), None)
        if spot is None:
            continue
        u, p = spot
        runs[u].packs[p].append(item)
        runs[u].cost += float(sample_cost[item].sum())
        room[u][p] -= size
        placed.update(item)
    return np.array([i for i in rest if int(i) not in placed], dtype=np.int64)


def _deal_units(runs, singles, dp, multiple):
    """Count-capped longest-processing-time: runs first, then single packs, each to the cheapest
    DP rank that still has room for it under the common count K (raised until every run fits)."""
    total = sum(len(u.packs) for u in runs) + len(singles)
    k = -(-max(-(-total // dp), max(len(u.packs) for u in runs)) // multiple) * multiple
    order = sorted(runs, key=lambda u: (-len(u.packs), -u.cost))
    singles = sorted(singles, key=lambda u: -u.cost)
    while True:
        load = [0.0] * dp
        count = [0] * dp
        packs = [[] for _ in range(dp)]
        placed = True
        for unit in order + singles:
            room = [r for r in range(dp) if count[r] + len(unit.packs) <= k]
            if not room:
                placed = False
                break
            r = min(room, key=lambda q: (load[q], count[q], q))
            packs[r].extend(unit.packs)
            count[r] += len(unit.packs)
            load[r] += unit.cost
        if placed:
            return [(p, k) for p in packs]
        k += multiple


def _fill_to(packs, target, sample_cost, in_runs, rank):
    """Splits packs until the rank has `target` micro-batches: the last item of the costliest pack
    holding two or more goes to a new pack, right after it when the item is a sample of a run (the
    run stays consecutive), else at the end. Returns each pack's sorted positions."""
    packs = [list(p) for p in packs]
    cost = [sum(float(sample_cost[item].sum()) for item in p) for p in packs]
    while len(packs) < target:
        splittable = [i for i, p in enumerate(packs) if len(p) > 1]
        if not splittable:
            raise _thdpack.InvalidArgument(
                f"DP rank {rank} needs {target} micro-batches but its samples make only "
                f"{len(packs)} (groups stay whole); give more samples or lower dp")
        at = max(splittable, key=lambda i: (cost[i], -i))
        moved = packs[at].pop()
        moved_cost = float(sample_cost[moved].sum())
        cost[at] -= moved_cost
        to = at + 1 if moved[0] in in_runs else len(packs)
        packs.insert(to, [moved])
        cost.insert(to, moved_cost)
    return [sorted(i for item in p for i in item) for p in packs]
