"""thdpack.trl.pack_dataset against the installed trl.pack_dataset: the same signature, and on
random datasets for every strategy the same rows, columns, column types, features and format;
the C++ best-fit packer renamed into TRL's packs on large inputs; and the packing invariants."""

import inspect

import datasets
import numpy as np
import pyarrow as pa
import pytest
import trl

import thdpack
from thdpack.trl import _trl_best_fit, pack_dataset

datasets.disable_progress_bars()


def test_signature_is_trl():
    theirs = inspect.signature(trl.pack_dataset).parameters
    ours = inspect.signature(pack_dataset).parameters
    assert [(n, p.default, p.kind) for n, p in theirs.items()] == \
        [(n, p.default, p.kind) for n, p in ours.items()]


def _random_dataset(rng):
    """Rows of random lengths (empty, short, longer than seq_length, many ties), list columns of
    several types beside input_ids, and sometimes a format, a column selection or a split dict."""
    rows = int(rng.choice([0, 1, 2, int(rng.integers(1, 60)), int(rng.integers(60, 2500))]))
    seq_length = int(rng.choice([1, 2, int(rng.integers(1, 40)), int(rng.integers(40, 600))]))
    top = int(rng.choice([3, seq_length + 2, 3 * seq_length, 1000]))
    lengths = rng.integers(0, max(top, 1), rows)
    lengths[rng.random(rows) < 0.1] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = rng.integers(0, 50000, int(offsets[-1]))
    large = rng.random() < 0.2
    list_of = pa.large_list if large else pa.list_
    columns = {"input_ids": list_of(pa.int64())}
    extras = rng.choice(["attention_mask", "labels", "completion_mask", "assistant_masks"],
                        size=int(rng.integers(0, 3)), replace=False)
    for name in extras:
        columns[str(name)] = list_of(rng.choice([pa.int64(), pa.int32(), pa.int8(), pa.float32()]))
    arrays = []
    for name, kind in columns.items():
        values = tokens if name == "input_ids" else rng.integers(-100, 2, tokens.size)
        array_type = pa.LargeListArray if large else pa.ListArray
        arrays.append(array_type.from_arrays(offsets.astype(np.int64 if large else np.int32),
                                             pa.array(values).cast(kind.value_type)))
    dataset = datasets.Dataset(pa.Table.from_arrays(arrays, names=list(columns)))
    choice = rng.integers(6)
    if choice == 1:
        dataset = dataset.with_format("numpy")
    elif choice == 2:
        dataset = dataset.with_format("torch", columns=["input_ids"], output_all_columns=True)
    elif choice == 3:
        dataset = dataset.with_format(None, columns=list(columns)[:1])
    elif choice == 4 and rows > 1:
        dataset = dataset.train_test_split(test_size=0.5, seed=int(rng.integers(100)))
    map_kwargs = None
    if rng.random() < 0.4:
        map_kwargs = {"batch_size": int(rng.choice([1, 7, 100, 1000, 5000]))}
    return dataset, seq_length, map_kwargs


def _rows(dataset):
    if isinstance(dataset, datasets.DatasetDict):
        return [d.num_rows for d in dataset.values()]
    return [dataset.num_rows]


def _tables(dataset):
    if isinstance(dataset, datasets.DatasetDict):
        return {k: _tables(v) for k, v in dataset.items()}
    return (dataset.with_format("arrow")[:], dataset.features, dataset.format, dataset.num_rows)


def _trl_skipping_empty_batches(dataset, seq_length, strategy, map_kwargs):
    """TRL's packing of each map batch that has a token; TRL's bfd fails on a batch whose rows
    are all empty, where thdpack's gives no rows for it."""
    if isinstance(dataset, datasets.DatasetDict):
        return datasets.DatasetDict({k: _trl_skipping_empty_batches(v, seq_length, strategy, map_kwargs)
                                     for k, v in dataset.items()})
    size = (map_kwargs or {}).get("batch_size", 1000)
    parts = []
    for start in range(0, dataset.num_rows, size):
        part = dataset.select(range(start, min(start + size, dataset.num_rows)))
        if any(len(r) for r in part.with_format(None)["input_ids"]):
            parts.append(trl.pack_dataset(part, seq_length, strategy,
                                          map_kwargs={"batch_size": size}))
    if not parts:  # no tokens at all: no rows, the columns and seq_lengths as types
        schema = dataset.data.table.schema
        large = pa.types.is_large_list(schema.field("input_ids").type)
        schema = schema.append(pa.field("seq_lengths", pa.list_(pa.int64() if large else pa.int32())))
        parts = [datasets.Dataset(schema.empty_table())]
    return datasets.concatenate_datasets(parts).with_format(**_format_of(dataset, strategy))


def _format_of(dataset, strategy):
    format = dict(dataset.format)
    format.update(format.pop("format_kwargs", {}))
    if strategy != "wrapped":
        format["columns"] = format["columns"] + ["seq_lengths"]
    return format


@pytest.mark.parametrize("strategy", ["bfd", "bfd_split", "wrapped"])
@pytest.mark.parametrize("seed", range(210))
def test_matches_trl_on_random_datasets(strategy, seed):
    rng = np.random.default_rng([seed, len(strategy)])
    dataset, seq_length, map_kwargs = _random_dataset(rng)
    try:
        want = trl.pack_dataset(dataset, seq_length, strategy, map_kwargs=map_kwargs)
    except pa.ArrowNotImplementedError:
        want = _trl_skipping_empty_batches(dataset, seq_length, strategy, map_kwargs)
    except ValueError:  # TRL's bfd on a dataset without rows: thdpack's gives it back as it is
        assert strategy != "wrapped" and min(_rows(dataset)) == 0
        want = dataset
    want = _tables(want)
    got = _tables(pack_dataset(dataset, seq_length, strategy, map_kwargs=map_kwargs))
    if isinstance(want, dict):
        assert list(got) == list(want)
        pairs = [(got[k], want[k]) for k in want]
    else:
        pairs = [(got, want)]
    for (table, features, format, rows), (table_w, features_w, format_w, rows_w) in pairs:
        assert rows == rows_w
        assert table.column_names == table_w.column_names
        for name in table_w.column_names:  # column by column: type, then values
            assert table[name].type == table_w[name].type, name
            assert table[name].combine_chunks().equals(table_w[name].combine_chunks()), name
        assert features == features_w
        assert format == format_w


def _trl_bfd_order(lengths, capacity):
    """TRL's own packing of rows with these lengths (one column, no truncation needed)."""
    from trl.data_utils import _pack_bfd

    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = pa.array(np.arange(offsets[-1]))
    table = pa.table({"input_ids": pa.LargeListArray.from_arrays(offsets, values)})
    packed = _pack_bfd(table, capacity)
    return packed["input_ids"].combine_chunks(), packed["seq_lengths"].combine_chunks()


@pytest.mark.parametrize("seed", range(8))
def test_renamed_cpp_packs_are_trls_on_large_inputs(seed):
    """Many rows in one map batch, with the room-indexed packer (capacity close to the row count)
    and the tree packer (a capacity far above it)."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([20000, 50000]))
    capacity = int(rng.choice([64, 4096, 10_000_000]))
    lengths = np.minimum(capacity, np.minimum(rng.zipf(1.3, n), 20000) + rng.integers(1, 3, n))
    order, pack_offsets = _trl_best_fit(lengths, capacity)
    ids, seq_lengths = _trl_bfd_order(lengths, capacity)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    want_first_tokens = np.asarray(ids.flatten())[np.concatenate(
        [[0], np.cumsum(np.asarray(seq_lengths.flatten()))[:-1]])]
    assert np.array_equal(starts[order], want_first_tokens)  # every row where TRL puts it
    assert np.array_equal(pack_offsets, np.asarray(seq_lengths.offsets))
    # and the packs are best-fit decreasing packs: as many as thdpack's packer makes
    assert pack_offsets.size - 1 == len(thdpack.best_fit_decreasing(lengths, capacity))


@pytest.mark.parametrize("strategy", ["bfd", "bfd_split"])
def test_packing_invariants(strategy):
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 300, 3000)
    tokens = [list(range(int(s), int(s + n))) for s, n in zip(np.cumsum(lengths) - lengths, lengths)]
    dataset = datasets.Dataset.from_dict({"input_ids": tokens})
    packed = pack_dataset(dataset, 128, strategy)
    rows = packed["input_ids"]
    assert all(0 < len(r) <= 128 for r in rows)
    assert all(sum(s) == len(r) for r, s in zip(rows, packed["seq_lengths"]))
    flat = sorted(t for r in rows for t in r)
    if strategy == "bfd_split":  # every token once
        assert flat == list(range(int(lengths.sum())))
    else:  # the first 128 tokens of every row once
        assert flat == sorted(t for r in tokens for t in r[:128])
    assert len(rows) <= len(trl.pack_dataset(dataset, 128, strategy))


def test_errors():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2], [3]], "label": [0, 1]})
    with pytest.raises(thdpack.InvalidArgument, match="'label' is int64"):
        pack_dataset(dataset, 4)
    with pytest.raises(thdpack.InvalidArgument, match="unknown packing strategy 'ffd'"):
        pack_dataset(dataset, 4, "ffd")
    with pytest.raises(thdpack.InvalidArgument, match="seq_length must be an integer >= 1"):
        pack_dataset(dataset, 0)
    mismatched = datasets.Dataset.from_dict({"input_ids": [[1, 2], [3]], "labels": [[1], [3]]})
    with pytest.raises(thdpack.InvalidArgument, match="'labels' has other per-row lengths"):
        pack_dataset(mismatched, 4)


def test_iterable_dataset():
    rng = np.random.default_rng(0)
    rows = {"input_ids": [rng.integers(0, 100, int(n)).tolist() for n in rng.integers(0, 30, 300)]}
    iterable = datasets.Dataset.from_dict(rows).to_iterable_dataset(num_shards=3)
    for strategy in ("bfd", "bfd_split", "wrapped"):
        want = list(trl.pack_dataset(iterable, 16, strategy, map_kwargs={"batch_size": 50}))
        got = list(pack_dataset(iterable, 16, strategy, map_kwargs={"batch_size": 50}))
        assert got == want, strategy
