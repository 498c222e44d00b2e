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

Group ids (GRPO groups, preference pairs; integers or any hashable ids such as verl's ``uid``
strings) keep the samples of a group in one micro-batch. A group larger than one micro-batch is not
an error: its samples go to consecutive micro-batches of one DP rank (first-fit decreasing inside
the group; other items fill the room left), so a rank-local group reduction still sees the whole
group. Then the micro-batch count can exceed balanced's minimum; the plan is the cheapest of a
count-capped deal of the runs and packs and a deal of whole groups (longest-first or differencing,
repaired so every rank can make the common count, then refined), so the slowest rank is never
slower than a longest-first greedy over the groups wherever that greedy's deal can be planned. The
``balanced`` scheduler does all of this in C++ (the pipeline behind ``ThdPacker`` plans the same
way); no communication.

The module also carries verl's sequence-length balancing name for name (see the section below and
docs/frameworks.md): ``rearrange_micro_batches``, ``get_seqlen_balanced_partitions`` and their
helpers, with verl's arguments, return types and micro-batch counts, and balance never worse.
"""

from __future__ import annotations

import heapq
from itertools import chain
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


def _group_index(group_ids, n: int) -> np.ndarray:
    """Group ids as int64: integers as given; strings or other hashable ids (verl's ``uid``)
    numbered by first appearance. Floats and bools are refused (a rounding or a 0/1 would merge
    groups silently)."""
    array = np.asarray(group_ids) if not isinstance(group_ids, np.ndarray) else group_ids
    if array.ndim == 1 and array.size and _integer_dtype(array):
        out = array.astype(np.int64)
    elif array.size and array.dtype.kind in "fcb":
        raise _thdpack.InvalidArgument(f"group_ids must be integers, not {array.dtype} values")
    else:
        index = {}
        for g in group_ids:
            if isinstance(g, (float, bool, np.floating, np.bool_)):
                raise _thdpack.InvalidArgument(
                    f"group_ids must be integers or hashable ids, not {type(g).__name__} values")
            try:
                index.setdefault(g, len(index))
            except TypeError:
                raise _thdpack.InvalidArgument(
                    f"group_ids must be hashable, not {type(g).__name__}") from None
        out = np.array([index[g] for g in group_ids], dtype=np.int64)
    if out.shape != (n,):
        raise _thdpack.InvalidArgument(f"group_ids has {out.size} entries for {n} lengths")
    return out


def dp_microbatches(lengths: Sequence[int], *, dp: int, max_seqlen_per_dp_cp_rank: int,
                    cp: int = 1, group_ids: Optional[Sequence] = None,
                    microbatch_multiple: int = 1, divisor: Optional[int] = None, model=None,
                    cost=None, min_num_micro_batch: Optional[int] = None,
                    equal_samples_per_rank: bool = False) -> list:
    """Each DP rank's micro-batches as lists of input positions: ``plan[rank][k]``.

    lengths: tokens of each sample (real lengths; each is padded up to ``divisor``, by default
    ``padding_divisor(cp=cp)``, when counted against the cap). group_ids: optional, one per
    sample: integers, or any hashable ids such as verl's ``uid`` strings. model / cost: the cost
    model balanced across ranks (a preset name such as ``"llama3-8b"``, a ``ModelSpec``, or a
    ``CostModel``; default: tokens). min_num_micro_batch: at least this many micro-batches per
    rank (verl's option, for pipeline parallelism). equal_samples_per_rank: every rank gets
    ``len(lengths) / dp`` samples (what verl's ``DataProto.chunk`` needs); groups are then dealt
    by count. Raises ``InvalidArgument`` for a sample longer than the cap, too few samples to give
    every DP rank the same number of non-empty micro-batches, or equal counts that whole groups
    cannot make.
    """
    real = _as_lengths(lengths)
    if dp < 1 or cp < 1 or microbatch_multiple < 1 or max_seqlen_per_dp_cp_rank < 1:
        raise _thdpack.InvalidArgument(
            "dp, cp, microbatch_multiple and max_seqlen_per_dp_cp_rank must be >= 1")
    if min_num_micro_batch is not None and min_num_micro_batch < 1:
        raise _thdpack.InvalidArgument("min_num_micro_batch must be >= 1")
    d = _thdpack.padding_divisor(cp=cp) if divisor is None else int(divisor)
    padded = (real + d - 1) // d * d
    cost = _cost_model(model, cost)
    groups = None if group_ids is None else _group_index(group_ids, real.size)
    options = dict(max_seqlen_per_dp_cp_rank=max_seqlen_per_dp_cp_rank, cp=cp, cost=cost)
    if equal_samples_per_rank:
        least = max(min_num_micro_batch or 1, 1)
        plan = _equal_sample_plan(padded, groups, dp, cost, options,
                                  lambda k: -(-max(k, least) // microbatch_multiple)
                                  * microbatch_multiple)
    else:
        scheduled = _thdpack.schedule(padded, dp=dp, microbatch_multiple=microbatch_multiple,
                                      samples_per_rank=_even_split(real.size, dp),
                                      group_ids=groups, **options)
        plan = [[[int(i) for i in scheduled.pack(k, r)]
                 for k in range(scheduled.num_microbatches)] for r in range(dp)]
    target = max(len(rank) for rank in plan)
    if min_num_micro_batch is not None:
        target = max(target, min_num_micro_batch)
    target = -(-target // microbatch_multiple) * microbatch_multiple
    if any(len(rank) != target for rank in plan):
        runs = _oversize(padded, groups, max_seqlen_per_dp_cp_rank * cp)
        costs = [cost.cost(int(length)) for length in padded.tolist()]
        in_run = [False] * len(costs) if groups is None else [int(g) in runs
                                                              for g in groups.tolist()]
        plan = [_split_to(rank, target, groups, runs, costs, in_run, r)
                for r, rank in enumerate(plan)]
    return plan


def _oversize(padded, groups, capacity) -> set:
    """Group ids whose padded total exceeds the capacity (their samples may share no pack)."""
    if groups is None:
        return set()
    totals = {}
    for g, length in zip(groups.tolist(), padded.tolist()):
        totals[g] = totals.get(g, 0) + length
    return {g for g, total in totals.items() if total > capacity}


def _equal_group_split(padded, groups, dp, cost):
    """Whole groups (or samples) and an equal-count balanced split of them over the ranks: every
    rank gets n / dp samples (groups must all have the same size, as GRPO's n responses)."""
    n = padded.size
    if n % dp:
        raise _thdpack.InvalidArgument(
            f"equal_samples_per_rank needs the {n} samples to divide by dp={dp}")
    members = ([[i] for i in range(n)] if groups is None else
               [list(m) for m in _members_by_group(groups)])
    sizes = {len(m) for m in members}
    if len(sizes) != 1 or len(members) % dp:
        raise _thdpack.InvalidArgument(
            f"equal_samples_per_rank needs groups of one size and a group count divisible by "
            f"dp={dp} (got {len(members)} groups of sizes {sorted(sizes)})")
    costs = [sum(cost.cost(int(padded[i])) for i in m) for m in members]
    # Integer-valued costs keep the differencing exact; the scale keeps their ratios.
    scale = 1e6 / max(max(costs), 1e-300)
    return members, get_seqlen_balanced_partitions([round(c * scale) for c in costs], dp, True)


def _equal_sample_plan(padded, groups, dp, cost, options, target_of):
    """Each rank's packs for the equal-count split; where a rank has fewer samples and whole
    groups than the common count (target_of(most packs)) needs, groups of it or of a rank that
    sets the count are swapped with another rank's (counts stay equal) while that lowers the
    shortfall, until none is left."""
    members, parts = _equal_group_split(padded, groups, dp, cost)
    capacity = options["max_seqlen_per_dp_cp_rank"] * options["cp"]
    atoms = [len(m) if padded[m].sum() > capacity else 1 for m in members]
    load = [sum(cost.cost(int(padded[i])) for i in m) for m in members]

    def packs(part):
        return _rank_packs(padded, groups, sorted(i for g in part for i in members[g]), options)

    def shortfall(plans):
        """Micro-batches the ranks lack, then how many ranks set the count (fewer: closer to a
        lower count)."""
        most = max(len(p) for p in plans)
        k = target_of(most)
        return (sum(max(0, k - sum(atoms[g] for g in part)) for part in parts),
                sum(len(p) == most for p in plans))

    plans = [packs(p) for p in parts]
    missing = shortfall(plans)
    while missing[0]:
        k = target_of(max(len(p) for p in plans))
        best = None  # (shortfall, heavier rank's load), r, a, q, b, plans of r and q
        most = max(len(p) for p in plans)
        # Ranks short of the count, and those whose packs set it, swap with any other rank.
        involved = [r for r in range(dp)
                    if sum(atoms[g] for g in parts[r]) < k or len(plans[r]) == most]
        for r in involved:
            for q in (q for q in range(dp) if q != r):
                for a in list(parts[r]):
                    for b in list(parts[q]):
                        parts[r][parts[r].index(a)], parts[q][parts[q].index(b)] = b, a
                        trial = list(plans)
                        trial[r], trial[q] = packs(parts[r]), packs(parts[q])
                        score = (shortfall(trial), max(sum(load[g] for g in parts[x])
                                                       for x in (r, q)))
                        parts[r][parts[r].index(b)], parts[q][parts[q].index(a)] = a, b
                        if score[0] < missing and (best is None or score < best[0]):
                            best = (score, r, a, q, b, trial)
        if best is None:
            break
        (missing, _), r, a, q, b, plans = best
        parts[r][parts[r].index(a)], parts[q][parts[q].index(b)] = b, a
    return plans


def _members_by_group(groups):
    index = {}
    for i, g in enumerate(groups.tolist()):
        index.setdefault(g, []).append(i)
    return index.values()


def _rank_packs(padded, groups, members, options) -> list:
    """One rank's micro-batches (input positions) from the balanced scheduler on one replica."""
    members = np.asarray(members, dtype=np.int64)
    sub = None if groups is None else groups[members]
    plan = _thdpack.schedule(padded[members], dp=1, group_ids=sub, **options)
    return [[int(members[i]) for i in plan.pack(k, 0)] for k in range(plan.num_microbatches)]


def _split_to(packs, target, groups, runs, costs, in_run, rank) -> list:
    """Splits a rank's packs until it has `target`, as the C++ schedulers do: the last item (a
    whole group that fits, or one sample of a larger group) of the costliest pack holding two or
    more goes to a new pack, right after it for a larger group's sample (its micro-batches stay
    consecutive), else at the end. costs, in_run: per input position."""
    def items_of(pack):
        items = {}
        for i in pack:
            g = i if groups is None else int(groups[i])
            items.setdefault((g, i) if g in runs else g, []).append(i)
        # Whole groups last, so they split off first: a larger group's sample leaves only a pack
        # of its own group's samples, and the run stays consecutive.
        return sorted(items.values(), key=lambda item: int(groups is None or
                                                            int(groups[item[0]]) not in runs))

    split = _thdpack._split_item_packs_to([items_of(p) for p in packs], target, costs, in_run)
    if len(split) < target:
        raise _thdpack.InvalidArgument(
            f"DP rank {rank} needs {target} micro-batches but its samples make only "
            f"{len(split)} (groups stay whole); give more samples or lower dp")
    return split


def _even_split(n: int, parts: int) -> np.ndarray:
    """Sample counts of `parts` holders (the driver's data has no owner; "balanced" ignores it)."""
    return np.array([n // parts + (1 if r < n % parts else 0) for r in range(parts)], np.int64)


# ---------------------------------------------------------------------------------------------
# verl's sequence-length balancing (verl/utils/seqlen_balancing.py), name for name: swap
#     from verl.utils.seqlen_balancing import rearrange_micro_batches
# for
#     from thdpack.rl import rearrange_micro_batches
# Same arguments, defaults, return types and micro-batch counts (and the same collectives over
# dp_group); the partitions start from the same Karmarkar-Karp split and are then refined by moves
# and swaps, so the largest partition sum is never above verl's and often below. Bad input raises
# InvalidArgument (a ValueError) where verl asserts.
# ---------------------------------------------------------------------------------------------


def calculate_workload(seqlen_list):
    """verl's attention-aware workload of a sequence length: ``24576·L + L²`` (elementwise)."""
    return 24576 * seqlen_list + seqlen_list**2


def ceildiv(a: int, b: int) -> int:
    return -(a // -b)


def roundup_divisible(a: int, b: int) -> int:
    return (a + b - 1) // b * b


def get_reverse_idx(idx_map):
    """The inverse permutation: ``out[idx_map[i]] = i``."""
    out = list(idx_map)
    for i, j in enumerate(idx_map):
        out[j] = i
    return out


class _State:
    """A differencing state: k parts, largest first (by sum, then item count, then items, so ties
    resolve the same way every time), each a sum and its (index, value) items. The heap pops the
    state with the largest spread first (ties: the one whose largest part is largest)."""

    __slots__ = ("sums", "items", "spread")

    def __init__(self, sums, items):
        order = sorted(range(len(sums)), key=lambda q: (sums[q], len(items[q]), items[q]),
                       reverse=True)
        self.sums = [sums[q] for q in order]
        self.items = [items[q] for q in order]
        self.spread = self.sums[0] - self.sums[-1]

    def head(self):
        return (self.sums[0], len(self.items[0]), self.items[0])

    def __lt__(self, other):
        if self.spread != other.spread:
            return self.spread > other.spread
        return self.head() > other.head()

    def merged(self, other):
        """Largest part with the other's smallest, and so on: the difference shrinks."""
        return _State([a + b for a, b in zip(self.sums, reversed(other.sums))],
                      [a + b for a, b in zip(self.items, reversed(other.items))])


def karmarkar_karp(seqlen_list, k_partitions: int, equal_size: bool):
    """The largest-differencing (Karmarkar-Karp) k-way split verl uses, unsorted partitions. With
    equal_size, the values are first dealt k at a time (smallest first) so every part gets
    len / k of them."""
    ordered = sorted((v, i) for i, v in enumerate(seqlen_list))
    empty = [0] * (k_partitions - 1)
    heap = []
    if equal_size:
        if len(ordered) % k_partitions:
            raise _thdpack.InvalidArgument(
                f"equal_size needs the {len(ordered)} values to divide into {k_partitions} parts")
        for at in range(0, len(ordered), k_partitions):
            chunk = ordered[at:at + k_partitions]
            heapq.heappush(heap, _State([v for v, _ in chunk], [[(i, v)] for v, i in chunk]))
    else:
        # Pushed one by one (not heapified): equal states then pop in the same order as verl's.
        for v, i in ordered:
            heapq.heappush(heap, _State([v] + empty, [[(i, v)]] + [[] for _ in empty]))
    while len(heap) > 1:
        first = heapq.heappop(heap)
        heapq.heappush(heap, first.merged(heapq.heappop(heap)))
    return [[i for i, _ in part] for part in heap[0].items]


# Past this many (item of the largest part) x (other item) pairs, only moves are tried: swaps
# would need that much memory per step (verl's batches stay far below it).
_MAX_SWAP_PAIRS = 4_000_000


def _lowest(top, ok):
    """The flat position of the lowest `top` where `ok` (the first on ties), or None."""
    if not ok.any():
        return None
    return int(np.argmin(np.where(ok, top, np.inf)))


def _best_change(values, tokens, where, sums, used, s, movable, cap):
    """The move (an item of the largest part s to another part) or swap (with an item of another
    part) that leaves the two parts' larger sum lowest, below sums[s]; None if none does. Moves
    only where `movable` (sizes may change and s keeps an item); token sums stay <= cap."""
    mine, other = np.flatnonzero(where == s), np.flatnonzero(where != s)
    best = None  # (new larger sum, target part, item of s, item of the target or None)
    if movable:
        targets = np.array([r for r in range(sums.size) if r != s], dtype=np.int64)
        gain = values[mine][:, None]
        top = np.maximum(sums[s] - gain, sums[targets][None, :] + gain)
        at = _lowest(top, (top < sums[s]) & (used[targets][None, :] + tokens[mine][:, None] <= cap))
        if at is not None:
            a, b = divmod(at, targets.size)
            best = (top[a, b], int(targets[b]), int(mine[a]), None)
    if mine.size * other.size <= _MAX_SWAP_PAIRS:
        part = where[other]
        delta = values[mine][:, None] - values[other][None, :]
        top = np.maximum(sums[s] - delta, sums[part][None, :] + delta)
        shift = tokens[mine][:, None] - tokens[other][None, :]
        ok = (top < sums[s]) & (used[part][None, :] + shift <= cap) & (used[s] - shift <= cap)
        at = _lowest(top, ok)
        if at is not None:
            a, b = divmod(at, other.size)
            if best is None or top[a, b] < best[0]:
                best = (top[a, b], int(part[b]), int(mine[a]), int(other[b]))
    return best


def _refine(values, parts, equal_size, tokens=None, cap=None):
    """Moves and swaps out of the largest part while they lower it (never raising another part
    above it): the largest sum only falls. With tokens and cap, no part's token sum exceeds cap.
    Returns the parts, each increasing."""
    values = np.asarray(values, dtype=np.float64)
    tokens = np.zeros(values.size, np.int64) if tokens is None else np.asarray(tokens, np.int64)
    cap = np.inf if cap is None else cap
    where = np.empty(values.size, np.int64)
    for q, p in enumerate(parts):
        where[p] = q
    k = len(parts)
    sums = np.bincount(where, weights=values, minlength=k)
    used = np.bincount(where, weights=tokens, minlength=k)
    count = np.bincount(where, minlength=k)
    for _ in range(4 * values.size + 16):
        s = int(np.argmax(sums))
        change = _best_change(values, tokens, where, sums, used, s,
                              not equal_size and count[s] > 1, cap)
        if change is None:
            break
        _, r, i, j = change
        where[i] = r
        if j is not None:
            where[j] = s
        sums = np.bincount(where, weights=values, minlength=k)
        used = np.bincount(where, weights=tokens, minlength=k)
        count = np.bincount(where, minlength=k)
    return [[int(i) for i in np.flatnonzero(where == q)] for q in range(k)]


def get_seqlen_balanced_partitions(seqlen_list, k_partitions: int, equal_size: bool):
    """verl's function: k_partitions lists of indices (each sorted, none empty, every index once,
    len / k each with equal_size) with balanced sums. Karmarkar-Karp as verl, then refined: the
    largest sum is never above verl's."""
    values = [int(v) for v in seqlen_list]
    if len(values) < k_partitions:
        raise _thdpack.InvalidArgument(
            f"number of items:[{len(values)}] < k_partitions:[{k_partitions}]")
    return _refine(values, karmarkar_karp(values, k_partitions, equal_size), equal_size)


def get_group_balanced_partitions(seqlen_list, uid_list, k_partitions: int):
    """verl's function: k lists of sample indices (sorted), samples with the same uid together
    (runs of equal consecutive uids form a group, as verl reads them), the groups split
    equal-count by their summed workload."""
    if len(seqlen_list) != len(uid_list):
        raise _thdpack.InvalidArgument("seqlen_list and uid_list must have same length")
    groups = []
    for i, uid in enumerate(uid_list):
        if not groups or uid != groups[-1][0]:
            groups.append((uid, []))
        groups[-1][1].append(i)
    if len(groups) < k_partitions:
        raise _thdpack.InvalidArgument(
            f"Number of uid groups ({len(groups)}) must be >= k_partitions ({k_partitions}); "
            f"reduce world_size or increase batch_size")
    workloads = [sum(int(calculate_workload(int(seqlen_list[i]))) for i in members)
                 for _, members in groups]
    parts = get_seqlen_balanced_partitions(workloads, k_partitions, equal_size=True)
    return [sorted(i for g in part for i in groups[g][1]) for part in parts]


def log_seqlen_unbalance(seqlen_list, partitions, prefix):
    """verl's metrics: the per-chunk token sums before (equal consecutive chunks) and after the
    partition."""
    size = len(seqlen_list) // len(partitions)
    before = [sum(seqlen_list[at:at + size]) for at in range(0, len(seqlen_list), size)]
    after = [sum(seqlen_list[i] for i in part) for part in partitions]
    return {
        f"{prefix}/min": min(before),
        f"{prefix}/max": max(before),
        f"{prefix}/minmax_diff": max(before) - min(before),
        f"{prefix}/balanced_min": min(after),
        f"{prefix}/balanced_max": max(after),
        f"{prefix}/mean": sum(before) / len(partitions),
    }


def _collective_device(group):
    """Where a collective's tensor must live: the current GPU for NCCL, else the CPU."""
    import torch
    import torch.distributed as dist
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_reduce(values, op, group):
    import torch
    import torch.distributed as dist
    tensor = torch.tensor(values, dtype=torch.long, device=_collective_device(group))
    dist.all_reduce(tensor, op=op, group=group)
    return [int(v) for v in tensor.cpu().tolist()]


def _effective_lengths(batch):
    """Each sample's tokens (attention-mask sums, or nested offsets) and the longest padded row."""
    input_ids = batch["input_ids"]
    if input_ids.is_nested:
        lengths = input_ids.offsets().diff()
        return lengths.long(), int(lengths.max())
    return batch["attention_mask"].sum(dim=1).long(), int(batch["attention_mask"].shape[-1])


def _index_select(batch, indices):
    """Rows `indices` of a TensorDict (nested tensors re-nested, as verl's selection does)."""
    import torch
    index = torch.tensor(indices, dtype=torch.long)
    if not any(isinstance(v, torch.Tensor) and v.is_nested for v in batch.values()):
        return batch[index]
    fields = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.is_nested:
            rows = value.unbind()
            fields[key] = torch.nested.as_nested_tensor([rows[i] for i in indices],
                                                         layout=torch.jagged)
        else:
            fields[key] = value[index]
    return type(batch)(fields, batch_size=[len(indices)])


def _micro_batch_partitions(workloads, tokens, count, max_token_len, step, min_groups, sync,
                            dp_group):
    """verl's count search: Karmarkar-Karp at `count`, raised by `step` until every part is within
    max_token_len on every rank; then the parts refined under the cap. Same collectives as verl."""
    import torch.distributed as dist
    while True:
        if count > min_groups:
            raise _thdpack.InvalidArgument(
                f"cannot keep every micro-batch within max_token_len={max_token_len}: it needs "
                f"{count} non-empty micro-batches but a rank has only {min_groups} groups")
        parts = karmarkar_karp(workloads, count, equal_size=False)
        within = all(sum(tokens[i] for i in p) <= max_token_len for p in parts)
        if sync:
            within = bool(_all_reduce([int(within)], dist.ReduceOp.MIN, dp_group)[0])
        if within:
            return _refine(workloads, parts, False, tokens, max_token_len)
        count += step


def _balance_order(parts, workload_of):
    """verl's dynamic-bsz order: by workload descending (ties: first index), then the lighter
    micro-batches at both ends (the pipeline's warm-up and cool-down)."""
    parts = sorted(parts, key=lambda p: (workload_of(p), p[0] if p else 0), reverse=True)
    return parts[::2][::-1] + parts[1::2]


def rearrange_micro_batches(batch, max_token_len, dp_group=None, num_batches_divided_by=None,
                            same_micro_num_in_dp=True, min_num_micro_batch=None,
                            use_dynamic_bsz_balance=True, force_group_size=1):
    """verl's function, same arguments and defaults: ``(micro_batches, micro_bsz_idx)``, the
    TensorDict rows of each micro-batch and their indices. Every micro-batch holds at most
    max_token_len tokens (attention-mask sums); the count is verl's (ceil(tokens / cap) at least,
    min_num_micro_batch, the MAX over dp_group, rounded to num_batches_divided_by, raised until
    the split fits the cap on every rank); the split balances workload at least as well as verl's.
    """
    import torch.distributed as dist
    lengths, longest = _effective_lengths(batch)
    if max_token_len < longest:
        raise _thdpack.InvalidArgument(
            f"max_token_len must be greater than the sequence length. Got "
            f"max_token_len={max_token_len} and max_seq_len={longest}")
    size = len(lengths)
    if force_group_size < 1 or size % force_group_size:
        raise _thdpack.InvalidArgument(
            f"Batch size {size} must be divisible by force_group_size {force_group_size}")
    groups = size // force_group_size
    count = min(groups, ceildiv(int(lengths.sum()), max_token_len))
    if min_num_micro_batch is not None:
        count = max(min_num_micro_batch, count)
    sync = dist.is_initialized() and same_micro_num_in_dp and dp_group is not None
    if sync:
        count = _all_reduce([count], dist.ReduceOp.MAX, dp_group)[0]
    if num_batches_divided_by is not None:
        count = roundup_divisible(count, num_batches_divided_by)
    per_sample = calculate_workload(lengths).view(groups, force_group_size)
    workloads = per_sample.sum(dim=1).tolist()
    tokens = lengths.view(groups, force_group_size).sum(dim=1).tolist()
    longest_group, min_groups = max(tokens), groups
    if sync:  # agreed before any rank raises, so no peer waits in a later collective
        longest_group, negative = _all_reduce([longest_group, -groups], dist.ReduceOp.MAX,
                                              dp_group)
        min_groups = -negative
    if longest_group > max_token_len:
        raise _thdpack.InvalidArgument(
            f"A forced group exceeds max_token_len and cannot be split. Got "
            f"max_group_token_len={longest_group} and max_token_len={max_token_len}.")
    parts = _micro_batch_partitions(workloads, tokens, count, max_token_len,
                                    num_batches_divided_by or 1, min_groups, sync, dp_group)
    if use_dynamic_bsz_balance:
        parts = _balance_order(parts, lambda p: sum(workloads[g] for g in p))
    indices = [[g * force_group_size + j for g in p for j in range(force_group_size)]
               for p in parts]
    return [_index_select(batch, idx) for idx in indices], indices


def prepare_dynamic_batch(data, max_token_len, dp_group=None, num_batches_divided_by=None,
                          same_micro_num_in_dp=True, min_num_micro_batch=None,
                          use_dynamic_bsz_balance=True):
    """verl's function: a DataProto split by rearrange_micro_batches, non-tensor fields and
    meta_info carried along; ``(micro_batches, batch_idx_list)``."""
    import copy
    batches, indices = rearrange_micro_batches(
        data.batch, max_token_len=max_token_len, dp_group=dp_group,
        num_batches_divided_by=num_batches_divided_by, same_micro_num_in_dp=same_micro_num_in_dp,
        min_num_micro_batch=min_num_micro_batch, use_dynamic_bsz_balance=use_dynamic_bsz_balance)
    out = []
    for micro, idx in zip(batches, indices):
        non_tensors = {key: value[idx] for key, value in data.non_tensor_batch.items()}
        out.append(type(data).from_dict(dict(micro), non_tensors,
                                        meta_info=copy.deepcopy(data.meta_info)))
    return out, indices


def restore_dynamic_batch(data, batch_idx_list):
    """verl's function: the rows of `data` (micro-batch order) back in the original order."""
    import torch
    order = list(chain.from_iterable(batch_idx_list))
    if len(order) != data.shape[0]:
        raise _thdpack.InvalidArgument(f"{len(order)} indices for {data.shape[0]} rows")
    back = torch.tensor(get_reverse_idx(order), dtype=torch.long)
    if data.is_nested:
        rows = data.unbind()
        return torch.nested.as_nested_tensor([rows[i] for i in back], layout=torch.jagged)
    return data[back]
