"""Parquet, Hugging Face datasets and Megatron-Bridge packed Parquet from Python.

load_parquet_dataset and load_hf_dataset give the samples load_jsonl_dataset gives for the same
rows (datasets.Dataset in memory, memory-mapped from its cache files, after column renames, through
an indices mapping, as a save_to_disk folder, as a pyarrow Table); they work where other datasets do (make_global_batch);
pack files of `thdpack pack --parquet` / `--hf-dataset` open with PackedDataset.open; Bridge packed
Parquet read back (bridge_packed=True) gives the samples packed, token for token; hostile tables
raise InvalidArgument naming the row.
"""

import json
import os
import subprocess

import numpy as np
import pytest

import thdpack

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")
try:
    import thdpack._parquet  # noqa: F401
except ImportError as e:  # a build without Parquet support
    pytest.skip(str(e), allow_module_level=True)

datasets.disable_progress_bars()
THDPACK = os.environ.get("THDPACK_CLI", os.path.join("build", "bin", "thdpack"))


def random_rows(seed, n=120, mask=True):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        length = int(rng.integers(1, 200 if rng.random() < 0.2 else 40))
        row = {"input_ids": rng.integers(0, 50000, length).tolist()}
        if mask:
            row["loss_mask"] = rng.integers(0, 2, length).tolist()
        rows.append(row)
    return rows


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return thdpack.load_jsonl_dataset(str(path))


def columns_of(rows):
    return {k: [r[k] for r in rows] for k in rows[0]}


def hf_dataset(rows):
    features = datasets.Features({k: datasets.Sequence(datasets.Value("int32" if k == "input_ids"
                                                                      else "int8"))
                                  for k in rows[0]})
    return datasets.Dataset.from_dict(columns_of(rows), features=features)


def assert_same(a, b):
    assert len(a) == len(b)
    assert a.lengths(0, len(a)).tolist() == b.lengths(0, len(b)).tolist()
    for i in range(len(a)):
        x, y = a.sample(i), b.sample(i)
        assert x["input_ids"].tolist() == y["input_ids"].tolist(), i
        assert ("loss_mask" in x) == ("loss_mask" in y)
        if "loss_mask" in x:
            assert x["loss_mask"].tolist() == y["loss_mask"].tolist(), i


def test_parquet_gives_the_jsonl_samples_and_works_where_datasets_do(tmp_path):
    rows = random_rows(1)
    jsonl = write_jsonl(tmp_path / "d.jsonl", rows)
    table = pa.table({"input_ids": pa.array(columns_of(rows)["input_ids"], pa.list_(pa.uint16())),
                      "loss_mask": pa.array(columns_of(rows)["loss_mask"], pa.list_(pa.int8()))})
    os.makedirs(tmp_path / "shards")
    pq.write_table(table.slice(0, 50), tmp_path / "shards" / "a.parquet", row_group_size=7)
    pq.write_table(table.slice(50), tmp_path / "shards" / "b.parquet", row_group_size=11)
    parquet = thdpack.load_parquet_dataset(tmp_path / "shards", loss_mask_column="loss_mask")
    assert_same(parquet, jsonl)
    assert "b.parquet" in parquet.describe() or "a.parquet" in parquet.describe()
    for step in range(3):
        a = thdpack.make_global_batch(parquet, step, global_batch=16, dp=2, capacity=512)
        b = thdpack.make_global_batch(jsonl, step, global_batch=16, dp=2, capacity=512)
        assert a.ids.tolist() == b.ids.tolist()
        assert a.real_lengths.tolist() == b.real_lengths.tolist()
    # A list of paths, in order; the tokens column alone.
    both = thdpack.load_parquet_dataset([tmp_path / "shards" / "a.parquet",
                                         str(tmp_path / "shards" / "b.parquet")])
    assert len(both) == len(rows) and "loss_mask" not in both.sample(0)


def test_hf_datasets_in_memory_on_disk_and_as_paths_give_the_jsonl_samples(tmp_path):
    rows = random_rows(2)
    jsonl = write_jsonl(tmp_path / "d.jsonl", rows)
    ds = hf_dataset(rows)
    options = dict(loss_mask_column="loss_mask")
    assert_same(thdpack.load_hf_dataset(ds, **options), jsonl)  # in memory
    ds.save_to_disk(str(tmp_path / "hf"), num_shards=3)
    assert_same(thdpack.load_hf_dataset(str(tmp_path / "hf"), **options), jsonl)  # the files
    on_disk = datasets.load_from_disk(str(tmp_path / "hf"))
    assert len(on_disk.cache_files) == 3
    loaded = thdpack.load_hf_dataset(on_disk, **options)  # memory-mapped table
    assert_same(loaded, jsonl)
    assert "data-00000-of-00003.arrow" in loaded.describe()
    assert_same(thdpack.load_hf_dataset(on_disk.data.table, **options), jsonl)  # a pyarrow Table
    # What datasets shows is what is read: a renamed column, columns removed.
    renamed = on_disk.rename_column("input_ids", "tokens").remove_columns(["loss_mask"])
    plain = thdpack.load_hf_dataset(renamed, tokens_column="tokens")
    assert [plain.sample(i)["input_ids"].tolist() for i in range(len(plain))] == \
        [r["input_ids"] for r in rows]


def test_an_indices_mapping_is_followed(tmp_path):
    rows = random_rows(3, n=40, mask=False)
    ds = hf_dataset(rows)
    ds.save_to_disk(str(tmp_path / "hf"), num_shards=2)
    on_disk = datasets.load_from_disk(str(tmp_path / "hf"))
    for view in (ds.shuffle(seed=0), on_disk.shuffle(seed=1), ds.select([5, 3, 3, 39]),
                 on_disk.filter(lambda r: len(r["input_ids"]) > 20),
                 ds.train_test_split(test_size=0.25, seed=2)["test"]):
        assert view._indices is not None
        got = thdpack.load_hf_dataset(view)
        assert len(got) == len(view)
        assert [got.sample(i)["input_ids"].tolist() for i in range(len(got))] == view["input_ids"]
        assert got.lengths(0, len(got)).tolist() == [len(r) for r in view["input_ids"]]
        assert [got.sample(i)["id"] for i in range(len(got))] == list(range(len(got)))
        backwards = list(range(len(got)))[::-1] + [0, 0]
        together = got.samples(backwards)
        assert [s["input_ids"].tolist() for s in together] == [view["input_ids"][i] for i in backwards]
        assert [s["id"] for s in together] == backwards
        flat = thdpack.load_hf_dataset(view.flatten_indices())
        assert flat.lengths(0, len(flat)).tolist() == got.lengths(0, len(got)).tolist()
    with pytest.raises(thdpack.InvalidArgument, match="no rows"):
        thdpack.load_hf_dataset(ds.select([]))  # datasets makes an empty table of it
    from thdpack import _parquet
    table = ds.data.table
    with pytest.raises(thdpack.InvalidArgument, match="t: its indices mapping selects no row"):
        _parquet.load_arrow_stream_dataset(table.__arrow_c_stream__(), name="t",
                                           rows=np.array([], np.int64))
    with pytest.raises(thdpack.InvalidArgument, match="entry 1 is row 40, outside the table's 40"):
        _parquet.load_arrow_stream_dataset(table.__arrow_c_stream__(), name="t",
                                           rows=np.array([0, 40], np.int64))
    with pytest.raises(thdpack.InvalidArgument, match="takes a datasets.Dataset"):
        thdpack.load_hf_dataset(42)


def test_hostile_tables_name_the_row(tmp_path):
    null_inside = pa.table({"input_ids": pa.array([[1, 2], [3, None]], pa.list_(pa.int64()))})
    with pytest.raises(thdpack.InvalidArgument, match=r"record batch 0, row 1: \"input_ids\"\[1\] is null"):
        thdpack.load_hf_dataset(null_inside)
    with pytest.raises(thdpack.InvalidArgument, match=r"column \"input_ids\" is list<float>"):
        thdpack.load_hf_dataset(pa.table({"input_ids": pa.array([[1.5]], pa.list_(pa.float32()))}))
    with pytest.raises(thdpack.InvalidArgument, match=r"no column \"input_ids\""):
        thdpack.load_hf_dataset(pa.table({"ids": pa.array([[1]], pa.list_(pa.int32()))}))
    datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]] * 40}).save_to_disk(str(tmp_path / "t"))
    (path,) = [os.path.join(tmp_path, "t", f) for f in os.listdir(tmp_path / "t")
               if f.endswith(".arrow")]
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(thdpack.InvalidArgument, match=path):
        thdpack.load_hf_dataset(str(tmp_path / "t"))
    with pytest.raises(thdpack.InvalidArgument, match="does not exist"):
        thdpack.load_parquet_dataset(tmp_path / "none.parquet")


def cli(*args):
    result = subprocess.run([THDPACK, *map(str, args), "--no-progress"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    return result


def test_pack_files_of_parquet_and_arrow_sources_open(tmp_path):
    rows = random_rows(4)
    write_jsonl(tmp_path / "d.jsonl", rows)
    pq.write_table(hf_dataset(rows).data.table, tmp_path / "d.parquet", row_group_size=13)
    hf_dataset(rows).save_to_disk(str(tmp_path / "hf"), num_shards=2)
    cli("pack", "--jsonl", tmp_path / "d.jsonl", "-C", "256", "-o", tmp_path / "j.packs")
    cli("pack", "--parquet", tmp_path / "d.parquet", "--loss-mask-column", "loss_mask", "-C", "256",
        "-o", tmp_path / "p.packs")
    cli("pack", "--hf-dataset", tmp_path / "hf", "--loss-mask-column", "loss_mask", "-C", "256",
        "-o", tmp_path / "h.packs")
    j = thdpack.PackedDataset.open(tmp_path / "j.packs")
    for other in ("p.packs", "h.packs"):
        packed = thdpack.PackedDataset.open(tmp_path / other)
        assert len(packed) == len(j)
        for p in range(len(j)):
            assert packed.pack(p).tolist() == j.pack(p).tolist()
            a, b = packed.batch(p), j.batch(p)
            assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.labels, b.labels)
            assert np.array_equal(a.loss_mask, b.loss_mask)
            assert np.array_equal(a.cu_seqlens, b.cu_seqlens)


def test_shifted_labels_columns_pack_as_python_reads_them(tmp_path):
    # --labels-shifted with --labels-column, as labels_shifted=True: recorded in the pack file.
    rng = np.random.default_rng(8)
    ids = [rng.integers(2, 900, rng.integers(2, 40)).tolist() for _ in range(80)]
    labels = [[t if rng.random() < 0.5 else -100 for t in x[1:]] + [-100] for x in ids]
    pq.write_table(pa.table({"input_ids": ids, "labels": labels}), tmp_path / "s.parquet",
                   row_group_size=9)
    cli("pack", "--parquet", tmp_path / "s.parquet", "--labels-column", "labels",
        "--labels-shifted", "-C", "128", "-o", tmp_path / "s.packs")
    packed = thdpack.PackedDataset.open(tmp_path / "s.packs")
    python = thdpack.load_parquet_dataset(tmp_path / "s.parquet", labels_column="labels",
                                          labels_shifted=True)
    for p in range(len(packed)):
        want = thdpack.pack(python.samples(packed.pack(p).tolist()), capacity=128)
        assert np.array_equal(packed.batch(p).labels, want.labels)


def test_bridge_packed_parquet_reads_back_the_samples_packed(tmp_path):
    rows = random_rows(5)
    jsonl = write_jsonl(tmp_path / "d.jsonl", rows)
    cli("pack", "--jsonl", tmp_path / "d.jsonl", "-C", "300", "-o", tmp_path / "b.packs",
        "--parquet-out", tmp_path / "bridge", "--parquet-shard-packs", "4")
    packs = thdpack.PackedDataset.open(tmp_path / "b.packs")
    back = thdpack.load_parquet_dataset(tmp_path / "bridge", bridge_packed=True)
    i = 0
    for p in range(len(packs)):
        ids = packs.pack(p).tolist()
        for sample_id in ids:
            want, got = jsonl.sample(sample_id), back.sample(i)
            assert got["input_ids"].tolist() == want["input_ids"].tolist(), (p, sample_id)
            # Token 0 is never a target (nothing predicts it); every other token's mask is kept.
            assert got["loss_mask"][1:].tolist() == want["loss_mask"][1:].tolist()
            i += 1
        # Packed again, the samples give the pack's very tokens, labels and weights.
        again = thdpack.pack([back.sample(k) for k in range(i - len(ids), i)])
        original = packs.batch(p)
        assert np.array_equal(again.tokens, original.tokens)
        assert np.array_equal(again.labels, original.labels)
        assert np.array_equal(again.loss_mask, original.loss_mask)
    assert i == len(back) == len(rows)
    with pytest.raises(thdpack.InvalidArgument, match="no labels column"):
        thdpack.load_parquet_dataset(tmp_path / "bridge", bridge_packed=True, labels_column="x")
