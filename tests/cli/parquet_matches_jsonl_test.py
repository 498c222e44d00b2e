"""`--parquet` gives exactly what `--jsonl` gives for the same samples.

Random samples (seeded) are written once as JSONL and once as Parquet shards (several files,
several row groups each, an empty row group, tokens as list<int32> or list<uint16>, the loss mask
as list<int8>). Then, for each seed:
- `thdpack plan --parquet DIR` prints the same plan summary (JSON) as `--jsonl FILE`, apart from
  the fields that name the source;
- `thdpack pack --parquet 'DIR/*.parquet' -o X` writes the same packs (capacity, divisor, sample
  count, pack offsets and sample indices) as `--jsonl`;
- `thdpack convert --parquet` of tokens-only shards writes the same .bin and .idx bytes;
- `thdpack pack --parquet-out` writes the same Megatron-Bridge packed Parquet from both, each row
  the samples of its pack back to back with their starts and shifted loss masks.
Hostile shards (a negative id, a null list, a truncated file) exit 2 with one line naming the
file, and nothing is written.

Usage: parquet_matches_jsonl_test.py THDPACK WORKDIR   (run with a Python that has pyarrow)
"""

import glob
import json
import os
import random
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from table_source_checks import packs_of, random_samples, runner, without_source

THDPACK, WORK = sys.argv[1], sys.argv[2]
run = runner(THDPACK)


def write_both(folder, samples, rng, token_type):
    """JSONL file and Parquet shards of the same samples; returns the JSONL path."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "shards"))
    jsonl = os.path.join(folder, "data.jsonl")
    with open(jsonl, "w") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    cuts = sorted(rng.sample(range(1, len(samples)), 3))
    for i, (a, b) in enumerate(zip([0] + cuts, cuts + [len(samples)])):
        part = samples[a:b]
        columns = {"input_ids": pa.array([s["input_ids"] for s in part], pa.list_(token_type))}
        if "loss_mask" in samples[0]:
            columns["loss_mask"] = pa.array([s["loss_mask"] for s in part], pa.list_(pa.int8()))
        table = pa.table(columns)
        path = os.path.join(folder, "shards", "part-%05d.parquet" % i)
        with pq.ParquetWriter(path, table.schema) as writer:
            writer.write_table(table.slice(0, 0))  # an empty row group: no error
            writer.write_table(table, row_group_size=rng.randint(1, 9))
    return jsonl


def check_same(folder, jsonl, seed):
    shards = os.path.join(folder, "shards")
    plan = ["plan", "--dp", "2", "--global-batch", "8", "--steps", "3", "-M", "512", "--json"]
    a = without_source(run(plan + ["--jsonl", jsonl]).stdout)
    b = without_source(run(plan + ["--parquet", shards]).stdout)
    assert a == b, (seed, a, b)
    pack = ["pack", "-C", "512", "--json"]
    run(pack + ["--jsonl", jsonl, "-o", os.path.join(folder, "j.packs")])
    run(pack + ["--parquet", os.path.join(shards, "*.parquet"), "-o", os.path.join(folder, "p.packs")])
    a, b = packs_of(os.path.join(folder, "j.packs")), packs_of(os.path.join(folder, "p.packs"))
    assert a == b, seed
    return len(a[4]) - 1


def expected_bridge_row(samples, ids):
    """Megatron-Bridge's packed row of the samples `ids`: tokens back to back, where each starts,
    and position j's loss weight (the mask of token j+1 of the same sample, 0 at its end)."""
    tokens, mask, starts = [], [], []
    for i in ids:
        s = samples[i]
        starts.append(len(tokens))
        tokens += s["input_ids"]
        weights = s.get("loss_mask", [1] * len(s["input_ids"]))
        mask += weights[1:] + [0]
    return tokens, mask, starts


def check_bridge(folder, jsonl, samples):
    """`pack --parquet-out` from JSONL and from Parquet: the same rows, each as Megatron-Bridge
    packs the samples of the pack file's packs."""
    shards = os.path.join(folder, "shards")
    tables = []
    mask = ["--loss-mask-column", "loss_mask"] if "loss_mask" in samples[0] else []
    for name, source in (("j", ["--jsonl", jsonl]), ("p", ["--parquet", shards] + mask)):
        out = os.path.join(folder, name + "_bridge")
        run(["pack", "-C", "512", "-o", os.path.join(folder, name + "_b.packs"), "--parquet-out",
             out, "--parquet-shard-packs", "7"] + source)
        files = sorted(glob.glob(os.path.join(out, "*.idx.parquet")))
        table = pa.concat_tables([pq.read_table(f) for f in files])
        assert str(table.schema.field("input_ids").type) == "list<element: int32>", table.schema
        assert str(table.schema.field("loss_mask").type) == "list<element: int8>", table.schema
        assert str(table.schema.field("seq_start_id").type) == "list<element: int32>", table.schema
        tables.append(table)
    assert tables[0].equals(tables[1])
    _, _, _, _, offsets, ids = packs_of(os.path.join(folder, "j_b.packs"))
    assert tables[0].num_rows == len(offsets) - 1
    rows = tables[0].to_pylist()
    for p, row in enumerate(rows):
        tokens, mask, starts = expected_bridge_row(samples, ids[offsets[p]:offsets[p + 1]])
        assert row["input_ids"] == tokens and row["loss_mask"] == mask, p
        assert row["seq_start_id"] == starts, p
    # An output folder that already holds Parquet files is refused: Bridge would read them too.
    result = run(["pack", "--jsonl", jsonl, "-C", "512", "--parquet-out",
                  os.path.join(folder, "p_bridge")], ok=False)
    assert result.returncode == 2 and "already holds shard-0" in result.stderr
    return len(rows)


def check_convert(folder, jsonl):
    shards = os.path.join(folder, "shards")
    run(["convert", "--jsonl", jsonl, "--out", os.path.join(folder, "j")])
    run(["convert", "--parquet", shards, "--out", os.path.join(folder, "p")])
    for ext in (".bin", ".idx"):
        a = open(os.path.join(folder, "j" + ext), "rb").read()
        b = open(os.path.join(folder, "p" + ext), "rb").read()
        assert a == b, ext


def check_hostile(folder):
    os.makedirs(folder, exist_ok=True)
    cases = {
        "negative": (pa.array([[1, 2], [3, -4]], pa.list_(pa.int64())), "row group 0, row 1"),
        "null": (pa.array([[1, 2], None], pa.list_(pa.int32())), "row group 0, row 1"),
        "strings": (pa.array([["a"]], pa.list_(pa.string())), "list<string>"),
    }
    for name, (column, needle) in cases.items():
        path = os.path.join(folder, name + ".parquet")
        pq.write_table(pa.table({"input_ids": column}), path)
        out = os.path.join(folder, name + ".packs")
        result = run(["pack", "--parquet", path, "-C", "64", "-o", out], ok=False)
        assert result.returncode == 2, (name, result.returncode, result.stderr)
        assert result.stderr.count("\n") == 1 and path in result.stderr, result.stderr
        assert needle in result.stderr, (needle, result.stderr)
        assert not os.path.exists(out) and not glob.glob(os.path.join(folder, "." + name + "*")), name
    path = os.path.join(folder, "truncated.parquet")
    pq.write_table(pa.table({"input_ids": pa.array([[1, 2, 3]] * 50)}), path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    result = run(["plan", "--parquet", path], ok=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert path in result.stderr, result.stderr


def main():
    packs = rows = 0
    for seed in range(6):
        rng = random.Random(seed)
        folder = os.path.join(WORK, "parquet_vs_jsonl_%d" % seed)
        samples = random_samples(rng, rng.randint(40, 200), with_mask=seed % 2 == 0)
        token_type = pa.int32() if seed % 3 else pa.uint16()
        jsonl = write_both(folder, samples, rng, token_type)
        packs += check_same(folder, jsonl, seed)
        rows += check_bridge(folder, jsonl, samples)
        if seed % 2 == 1:
            check_convert(folder, jsonl)
    check_hostile(os.path.join(WORK, "parquet_hostile"))
    print("ok: 6 datasets, %d packs equal to JSONL's, %d Megatron-Bridge rows checked; hostile "
          "files refused" % (packs, rows))


main()
