"""TRL: ``pack_dataset``, name for name, with thdpack's C++ best-fit-decreasing packer.

    from thdpack.trl import pack_dataset          # was: from trl import pack_dataset
    packed = pack_dataset(dataset, seq_length=4096, strategy="bfd")

``pack_dataset(dataset, seq_length, strategy="bfd", map_kwargs=None)`` takes what TRL's takes (a
``datasets.Dataset``, ``DatasetDict``, ``IterableDataset`` or ``IterableDatasetDict`` whose columns
are all lists of the same per-row length, such as ``input_ids``, ``attention_mask``,
``completion_mask``) and returns what TRL's returns, column for column and row for row:

- ``"bfd"``: rows without tokens are dropped, longer rows are truncated to ``seq_length``, and the
  rows are packed best-fit decreasing into rows of at most ``seq_length`` tokens; every list column
  is concatenated the same way, and ``seq_lengths`` lists the lengths of the rows a packed row
  holds (TRL builds ``position_ids`` from it);
- ``"bfd_split"``: as ``"bfd"``, but a longer row is cut into pieces of ``seq_length`` tokens (the
  last one shorter) that are packed like rows, so no token is lost;
- ``"wrapped"``: all tokens one after the other, cut every ``seq_length`` tokens (no
  ``seq_lengths``).

As in TRL, the packing runs through ``dataset.map(batched=True, **map_kwargs)``: every map batch
(1000 rows unless ``map_kwargs`` says ``batch_size``) is packed on its own, and the dataset's
format is kept (``seq_lengths`` joins a column selection).

The bin assignment is thdpack's C++ best-fit decreasing (``thdpack.best_fit_decreasing``). It
takes the rows in the same order as TRL (longest first, ties in row order) and chooses the same
room for every row, so it opens the same packs; where several packs have the same room, thdpack
fills the one that reached it last, TRL the one that reached it first. The packs are then renamed
into TRL's choice (which pack reached each room first is known from the rooms alone), so the
output is TRL's, pack for pack, in TRL's order.

Deliberate differences: a bad ``strategy``, a ``seq_length`` below 1 and columns that are not
lists, or not of the same per-row lengths, raise ``thdpack.InvalidArgument`` (a ``ValueError``;
TRL raises ``ValueError`` or ``TypeError``), before the dataset is touched where the check allows;
a ``list`` column beside a ``large_list`` one with the same lengths is accepted (TRL compares the
offset buffers and refuses it); a dataset without rows comes back as it is (TRL's ``"bfd"``
strategies raise ``ValueError``: ``seq_lengths`` is not a column), and a map batch whose rows
are all empty gives no rows (TRL's raises ``ArrowNotImplementedError``).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _thdpack

STRATEGIES = ("bfd", "bfd_split", "wrapped")


def pack_dataset(dataset, seq_length: int, strategy: str = "bfd",
                 map_kwargs: Optional[dict[str, Any]] = None):
    """Packs the list columns of ``dataset`` into rows of at most ``seq_length`` tokens."""
    if strategy not in STRATEGIES:
        raise _thdpack.InvalidArgument(
            f"unknown packing strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    if isinstance(seq_length, bool) or not isinstance(seq_length, (int, np.integer)) or seq_length < 1:
        raise _thdpack.InvalidArgument(f"seq_length must be an integer >= 1, not {seq_length!r}")
    seq_length = int(seq_length)
    if map_kwargs is None:
        map_kwargs = {}
    format = _dataset_format(dataset)
    dataset = dataset.with_format("arrow")
    if strategy == "wrapped":
        dataset = dataset.map(_pack_wrapped, batched=True, fn_kwargs={"seq_length": seq_length},
                              **map_kwargs)
    else:
        dataset = dataset.map(_pack_bfd, batched=True,
                              fn_kwargs={"seq_length": seq_length, "split": strategy == "bfd_split"},
                              **map_kwargs)
        if "columns" in format and "seq_lengths" in _column_names(dataset):
            format["columns"] = format["columns"] + ["seq_lengths"]
    return dataset.with_format(**format)


def _dataset_format(dataset) -> dict:
    """The format to restore after packing: a Dataset's (of the first split of a dict), or an
    iterable dataset's format type."""
    from datasets import Dataset, DatasetDict, IterableDatasetDict

    if isinstance(dataset, (DatasetDict, IterableDatasetDict)):
        dataset = dataset[next(iter(dataset))]
    if isinstance(dataset, Dataset):
        format = dict(dataset.format)
    else:
        formatting = dataset._formatting
        format = {"type": formatting.format_type if formatting is not None else None}
    format.update(format.pop("format_kwargs", {}))
    return format


def _column_names(dataset) -> list:
    names = dataset.column_names
    if isinstance(names, dict):  # a dict of splits; map saw none of them if the first is empty
        names = next(iter(names.values()), [])
    return names or []


def _list_columns(table):
    """The table's columns as single list arrays, checked to be lists of equal per-row lengths."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_columns == 0:
        raise _thdpack.InvalidArgument("the dataset has no columns to pack")
    columns = [column.combine_chunks() for column in table.columns]
    lengths = None
    for name, column in zip(table.column_names, columns):
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
            raise _thdpack.InvalidArgument(
                f"column {name!r} is {column.type}; packing needs every column to be a list per row")
        these = pc.list_value_length(column)
        if lengths is None:
            lengths = these
        elif not np.array_equal(lengths.to_numpy(zero_copy_only=False),
                                these.to_numpy(zero_copy_only=False)):
            raise _thdpack.InvalidArgument(
                f"column {name!r} has other per-row lengths than column {table.column_names[0]!r}; "
                f"packing needs every column to have one entry per token")
    return columns, lengths


def _pack_bfd(table, seq_length: int, split: bool):
    import pyarrow as pa

    columns, lengths = _list_columns(table)
    lengths = np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)
    starts = np.cumsum(lengths) - lengths  # of each row in its column's flattened values
    rows = np.flatnonzero(lengths > 0)  # rows without tokens are dropped
    starts, lengths = starts[rows], lengths[rows]
    if split:
        # A row of L tokens becomes ceil(L / S) consecutive pieces of S tokens, the last shorter.
        pieces = -(-lengths // seq_length)
        within = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        starts = np.repeat(starts, pieces) + within * seq_length
        lengths = np.minimum(seq_length, np.repeat(lengths, pieces) - within * seq_length)
    else:
        lengths = np.minimum(lengths, seq_length)  # truncated

    order, pack_offsets = _trl_best_fit(lengths, seq_length)
    lengths, starts = lengths[order], starts[order]
    ends = np.cumsum(lengths)
    # Every packed token's position in the flattened column: one gather per column.
    total = int(ends[-1]) if ends.size else 0
    gather = pa.array(np.repeat(starts - (ends - lengths), lengths) + np.arange(total))
    token_offsets = np.concatenate([[0], ends])[pack_offsets]
    out = []
    for column in columns:
        offsets = token_offsets.astype(column.offsets.type.to_pandas_dtype())
        out.append(type(column).from_arrays(offsets, column.flatten().take(gather)))
    large = pa.types.is_large_list(columns[0].type)
    seq_lengths = pa.ListArray.from_arrays(
        pack_offsets.astype(np.int32), pa.array(lengths, type=pa.int64() if large else pa.int32()))
    return pa.Table.from_arrays(out + [seq_lengths], names=table.column_names + ["seq_lengths"])


def _trl_best_fit(lengths: np.ndarray, capacity: int):
    """TRL's best-fit decreasing packs of ``lengths`` (each in [1, capacity]): the items in pack
    order (each pack's items in the order they were placed) and the pack offsets into them.

    thdpack's packer and TRL's open the same packs and give every item a pack with the same room
    (best fit depends on the rooms only); they differ in which of several packs with that room
    takes it: TRL's takes the one that has had the room longest, thdpack's the latest. Each item
    is placed at time t (its rank, longest first, ties by index); from thdpack's packs we know the
    room each item found and the room it left. TRL's pack for an item that found room r is the
    pack of the j-th item that left room r, if the item is the j-th to find room r."""
    n = lengths.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    items, offsets = _thdpack.best_fit_decreasing(lengths, capacity, flat=True)
    by_time = np.argsort(-lengths, kind="stable")  # item placed at each time
    time = np.empty(n, dtype=np.int64)
    time[by_time] = np.arange(n)
    # Items by (thdpack pack, time): the room before each is the capacity less what came before.
    pack = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    placed = items[np.lexsort((time[items], pack))]
    before = np.cumsum(lengths[placed]) - lengths[placed]  # tokens placed before, in all packs
    filled = before - before[offsets[pack]]  # ... in the item's own pack
    room_before = np.empty(n, dtype=np.int64)
    room_before[time[placed]] = capacity - filled
    length_t = lengths[by_time]
    room_after = room_before - length_t
    opens = room_before == capacity

    # FIFO match: the j-th item to find room r joins the pack of the j-th item to leave room r.
    leave = np.lexsort((np.arange(n), room_after))  # times, by (room left, time)
    leave_rooms = room_after[leave]
    takers = np.flatnonzero(~opens)  # in time order
    found = room_before[takers]
    take = np.lexsort((takers, found))
    found_sorted = found[take]
    rank = np.arange(found_sorted.size) - np.searchsorted(found_sorted, found_sorted, side="left")
    at = np.searchsorted(leave_rooms, found_sorted, side="left") + rank
    if at.size and (at.max() >= n or np.any(leave_rooms[at] != found_sorted)
                    or np.any(leave[at] >= takers[take])):
        raise _thdpack.InternalError("best-fit decreasing packs are not consistent with TRL's")
    giver = leave[at]
    parent = np.arange(n)
    parent[takers[take]] = giver
    while True:  # every item to the item that opened its pack
        up = parent[parent]
        if np.array_equal(up, parent):
            break
        parent = up
    pack_of = np.cumsum(opens)[parent] - 1  # packs numbered in the order they opened
    in_order = np.lexsort((np.arange(n), pack_of))  # times, by (pack, time)
    counts = np.bincount(pack_of, minlength=int(opens.sum()))
    return by_time[in_order], np.concatenate([[0], np.cumsum(counts)])


def _pack_wrapped(table, seq_length: int):
    import pyarrow as pa

    columns, _ = _list_columns(table)
    packed = []
    for column in columns:
        values = column.flatten()
        total = len(values)
        offsets = np.append(np.arange(0, total, seq_length), total)
        packed.append(type(column).from_arrays(
            offsets.astype(column.offsets.type.to_pandas_dtype()), values))
    return pa.Table.from_arrays(packed, names=table.column_names)
