"""An independent Python planner for groups larger than one micro-batch, against which the C++
"balanced" scheduler's plans are checked (every group on one DP rank, and no worse balance).

plan_with_oversize_groups(padded, groups, big, dp, m, cp, multiple, cost) -> plan[rank][k], lists
of input positions; big maps each oversize group id to its positions (oversize_groups()). The
scheduler's own packing of the other items comes from thdpack.schedule with dp=1.
"""

import numpy as np

from thdpack import _thdpack


def oversize_groups(padded, groups, capacity) -> dict:
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


def plan_with_oversize_groups(padded, groups, big, dp, m, cp, multiple, cost) -> list:
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


def grpo_batch(seed, prompts=32, responses=8):
    """GRPO rollouts: `prompts` x `responses`, group id = prompt index; some prompts have long
    responses (up to 6000-9000 tokens), so their groups need several 16384-token micro-batches."""
    rng = np.random.default_rng(seed)
    long_share = rng.uniform(0.05, 0.6)
    top = int(rng.choice([6000, 8000, 8192, 9000]))
    low = rng.choice([64, 256, 1024])
    is_long = rng.random(prompts) < long_share
    highest = np.where(is_long, top, rng.integers(low + 1, 3000, prompts))
    lengths = rng.integers(16, np.repeat(highest, responses) + 1)
    return lengths, np.repeat(np.arange(prompts), responses)
