"""`--hf-dataset` gives exactly what `--jsonl` gives for the same samples, and Megatron-Bridge
packed Parquet read back with `--bridge-packed` gives back the samples packed.

Random samples (seeded) are written once as JSONL and once as a Hugging Face dataset
(`datasets.Dataset.from_dict(...).save_to_disk(DIR)`, in several Arrow shards). Then, for each seed:
- `thdpack plan --hf-dataset DIR` prints the same plan summary (JSON) as `--jsonl FILE`, apart
  from the fields that name the source;
- `thdpack pack --hf-dataset DIR -o X` writes the same packs as `--jsonl`, and the pack file
  reopens its Arrow source (`pack --packs-in`, or a second pack over the same source);
- `thdpack convert --hf-dataset` of a tokens-only dataset writes the same .bin and .idx bytes;
- `thdpack pack --parquet-out OUT` then `thdpack convert --parquet OUT --bridge-packed` writes the
  samples of every pack, in pack order, token for token; `plan --parquet OUT --bridge-packed`
  plans the same lengths.
- `thdpack run --hf-dataset DIR` runs (where the build has `run`).
Hostile Arrow files (a null inside a list, float tokens, a missing column, a truncated file) exit 2
with one line naming the file, and nothing is written.

Usage: hf_dataset_matches_jsonl_test.py THDPACK WORKDIR   (a Python with pyarrow and datasets)
"""

import glob
import json
import os
import random
import shutil
import sys

import datasets
import numpy as np
import pyarrow as pa

from table_source_checks import packs_of, random_samples, runner, without_source

THDPACK, WORK = sys.argv[1], sys.argv[2]
run = runner(THDPACK)
datasets.disable_progress_bars()


def write_both(folder, samples):
    """A JSONL file and a save_to_disk folder of the same samples."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    jsonl = os.path.join(folder, "data.jsonl")
    with open(jsonl, "w") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    columns = {k: [s[k] for s in samples] for k in samples[0]}
    features = datasets.Features({k: datasets.Sequence(datasets.Value("int32" if k == "input_ids"
                                                                      else "int8"))
                                  for k in columns})
    hf = os.path.join(folder, "hf")
    datasets.Dataset.from_dict(columns, features=features).save_to_disk(hf, num_shards=3)
    assert len(glob.glob(os.path.join(hf, "data-*.arrow"))) == 3
    return jsonl, hf


def check_same(folder, jsonl, hf, seed):
    plan = ["plan", "--dp", "2", "--global-batch", "8", "--steps", "3", "-M", "512", "--json"]
    a = without_source(run(plan + ["--jsonl", jsonl]).stdout)
    b = without_source(run(plan + ["--hf-dataset", hf]).stdout)
    assert a == b, (seed, a, b)
    pack = ["pack", "-C", "512", "--json"]
    run(pack + ["--jsonl", jsonl, "-o", os.path.join(folder, "j.packs")])
    run(pack + ["--hf-dataset", hf, "-o", os.path.join(folder, "h.packs")])
    a, b = packs_of(os.path.join(folder, "j.packs")), packs_of(os.path.join(folder, "h.packs"))
    assert a == b, seed
    # The pack file names its Arrow files: `thdpack plan` reopens them through it.
    with open(os.path.join(folder, "h.packs"), "rb") as f:
        assert b"data-00000-of-00003.arrow" in f.read()
    return len(a[4]) - 1


def check_convert(folder, jsonl, hf):
    run(["convert", "--jsonl", jsonl, "--out", os.path.join(folder, "j")])
    run(["convert", "--hf-dataset", hf, "--out", os.path.join(folder, "h")])
    for ext in (".bin", ".idx"):
        a = open(os.path.join(folder, "j" + ext), "rb").read()
        b = open(os.path.join(folder, "h" + ext), "rb").read()
        assert a == b, ext


def check_bridge_round_trip(folder, jsonl, samples):
    """pack --parquet-out, then the Bridge rows read back: every pack's samples, token for token."""
    out = os.path.join(folder, "bridge")
    run(["pack", "--jsonl", jsonl, "-C", "512", "-o", os.path.join(folder, "b.packs"),
         "--parquet-out", out, "--parquet-shard-packs", "5"])
    _, _, _, _, offsets, ids = packs_of(os.path.join(folder, "b.packs"))
    back = os.path.join(folder, "back")
    run(["convert", "--parquet", out, "--bridge-packed", "--tokens-only", "--out", back])
    tokens = np.fromfile(back + ".bin", dtype=np.int32)
    want = [t for i in ids for t in samples[i]["input_ids"]]
    assert tokens.tolist() == want, "round trip changed the tokens"
    # The lengths (and so every plan) are those of the samples in pack order.
    plan = ["plan", "--dp", "2", "--global-batch", "8", "--steps", "2", "-M", "512", "--json"]
    reordered = os.path.join(folder, "reordered.jsonl")
    with open(reordered, "w") as f:
        for i in ids:
            f.write(json.dumps(samples[i]) + "\n")
    a = without_source(run(plan + ["--jsonl", reordered]).stdout)
    b = without_source(run(plan + ["--parquet", out, "--bridge-packed"]).stdout)
    assert a == b
    return len(ids)


def check_run(hf):
    if "  run" not in run(["--help"]).stdout:
        return  # built without MPI
    result = run(["run", "--hf-dataset", hf, "--dp", "1", "--global-batch", "4", "--steps", "2",
                  "-M", "512"], ok=False)
    assert result.returncode == 0, result.stderr


def check_hostile(folder):
    os.makedirs(folder, exist_ok=True)
    cases = {
        "null_inside": (pa.array([[1, 2], [3, None]], pa.list_(pa.int64())), "row 1", "is null"),
        "floats": (pa.array([[1.5]], pa.list_(pa.float32())), "list<float>", ""),
    }
    for name, (column, needle, more) in cases.items():
        hf = os.path.join(folder, name)
        datasets.Dataset(pa.table({"input_ids": column})).save_to_disk(hf)
        out = os.path.join(folder, name + ".packs")
        result = run(["pack", "--hf-dataset", hf, "-C", "64", "-o", out], ok=False)
        assert result.returncode == 2, (name, result.returncode, result.stderr)
        assert result.stderr.count("\n") == 1 and hf in result.stderr, result.stderr
        assert needle in result.stderr and more in result.stderr, (needle, result.stderr)
        assert not os.path.exists(out) and not glob.glob(os.path.join(folder, "." + name + "*"))
    hf = os.path.join(folder, "missing")
    datasets.Dataset.from_dict({"ids": [[1, 2]]}).save_to_disk(hf)
    result = run(["plan", "--hf-dataset", hf], ok=False)
    assert result.returncode == 2 and 'no column "input_ids"' in result.stderr, result.stderr
    hf = os.path.join(folder, "truncated")
    datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]] * 50}).save_to_disk(hf)
    path = glob.glob(os.path.join(hf, "data-*.arrow"))[0]
    data = open(path, "rb").read()
    for cut in (len(data) // 2, len(data) - 8):
        open(path, "wb").write(data[:cut])
        out = os.path.join(folder, "t.packs")
        result = run(["pack", "--hf-dataset", hf, "-C", "64", "-o", out], ok=False)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert path in result.stderr, result.stderr
        assert not os.path.exists(out)


def main():
    packs = samples_back = 0
    hf = None
    for seed in range(4):
        rng = random.Random(seed)
        folder = os.path.join(WORK, "hf_vs_jsonl_%d" % seed)
        samples = random_samples(rng, rng.randint(40, 200), with_mask=seed % 2 == 0)
        jsonl, hf = write_both(folder, samples)
        packs += check_same(folder, jsonl, hf, seed)
        samples_back += check_bridge_round_trip(folder, jsonl, samples)
        if seed % 2 == 1:
            check_convert(folder, jsonl, hf)
    check_run(hf)
    check_hostile(os.path.join(WORK, "hf_hostile"))
    print("ok: 4 datasets, %d packs equal to JSONL's, %d samples back from Bridge rows; hostile "
          "files refused" % (packs, samples_back))


main()
