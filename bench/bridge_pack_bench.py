"""Parquet to packed Parquet: `thdpack pack --parquet-out` beside Megatron-Bridge's packed-Parquet
preparation, on the same seeded files.

    .venv/bin/python bench/bridge_pack_bench.py [--rows 100000] [--seeds 3] [--reps 3]
        [--pack-size 8192] [--thdpack build/bin/thdpack] [--out results.json]
    .venv/bin/python bench/bridge_pack_bench.py --bridge-only IN.parquet OUT.idx.parquet
        [--pack-size 8192] [--seed 0]

Each seed writes one SFT-like Parquet file with parquet_bench.py's generator (int32 `input_ids`,
log-normal lengths with a median of about 220 tokens clipped to [1, 8192], int8 `loss_mask`, row
groups of 64K rows). Both sides start from that pre-tokenized file and end with packed Parquet in
Megatron-Bridge's schema written; each runs as its own process, timed by GNU time (wall, CPU and
peak resident memory):

- Bridge: megatron-bridge 0.3.1 as pinned in python/constraints.txt. Its packing module
  (megatron/bridge/data/datasets/packing_utils.py) is loaded by file path, because importing the
  package `megatron.bridge` needs megatron-core. This script's `--bridge-only` mode runs the steps
  of Bridge's `prepare_gpt_sft_packed_data` after tokenization, each timed:
  1. read: the file's two columns with pyarrow, into one dict per sample {"input_ids": [...],
     "loss_mask": [...]} in a numpy object array, the shape Bridge's tokenization step returns
     (chat data carries a per-token loss mask, which `fill_packing_strategy` takes before
     `answer_start_idx`);
  2. hist: `create_hist(samples, pack_size)`;
  3. strategy: numpy's global seed set to `--seed`, then `create_packing_strategy(histogram,
     pack_size, "first_fit_shuffle")`, the algorithm `prepare_gpt_sft_packed_data` defaults to and
     Bridge's SFT data builder keeps (its recipes set the pack size to the model's seq_length);
  4. fill: `fill_packing_strategy(assignments, sequences, pack_size, 0)` under the same seed;
  5. write: 0.3.1 predates Bridge's Parquet writer (`write_packed_parquet`, on its main branch), so
     this script writes, with its own few lines of pyarrow, the table that writer produces from
     the filled packs: `input_ids` and `seq_start_id` as list<int64> (pyarrow's type for Python
     integers), `loss_mask` as list<int8> from every value converted to int, one file, row
     groups of 500 rows.
- thdpack: `thdpack pack --parquet IN --loss-mask-column loss_mask -C PACK --parquet-out DIR`
  (int32 `input_ids` and `seq_start_id`, int8 `loss_mask`, row groups of 500).

Each side runs `--reps` times per file (Bridge's runs, then thdpack's); the median run is
reported, with its stage times.

The two count a pack's size differently. Bridge counts a sample of n tokens as n - 1 (the positions
that have a next token to predict), so a pack of size P holds up to P + (its samples) tokens;
thdpack's `-C P` bounds the tokens themselves. Each side's packs are therefore set against the L1
bound under its own rule, ceil(sum(n - 1) / P) and ceil(sum(n) / P); fill is tokens / (packs x P)
in tokens as stored.

Equivalence: both outputs are read back with pyarrow, cut into samples at `seq_start_id`, and the
multiset of samples (tokens, loss mask) is compared with the input's, each input mask shifted by
one position (mask[1:] + [0], position j weighting the prediction of token j + 1: the convention
both write). A difference is counted per output and, for tokens alone, again (to tell a changed
mask from a lost or duplicated sample); the run fails when thdpack's output differs.
"""

import argparse
import collections
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquet_bench import write_sft_file

ALGORITHM = "first_fit_shuffle"
BRIDGE_ROW_GROUP = 500


def bridge_packing_module():
    """megatron-bridge's packing_utils module, loaded from the installed package's files."""
    spec = importlib.util.find_spec("megatron.bridge")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("megatron-bridge is not installed: bash scripts/python_env.sh "
                 "(python/constraints.txt pins it)")
    path = os.path.join(spec.submodule_search_locations[0], "data", "datasets", "packing_utils.py")
    module_spec = importlib.util.spec_from_file_location("bridge_packing_utils", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def bridge_only(source, out, pack_size, seed):
    """Bridge's preparation of one file; prints its stage times and packing figures as JSON."""
    stages = {}
    clock = time.perf_counter()

    def lap(name):
        nonlocal clock
        now = time.perf_counter()
        stages[name] = now - clock
        clock = now

    bridge = bridge_packing_module()
    lap("load")
    table = pq.read_table(source, columns=["input_ids", "loss_mask"])
    samples = np.array([{"input_ids": ids, "loss_mask": mask} for ids, mask in
                        zip(table.column("input_ids").to_pylist(),
                            table.column("loss_mask").to_pylist())])
    del table
    lap("read")
    sequences, histogram = bridge.create_hist(samples, pack_size)
    lap("hist")
    np.random.seed(seed)
    assignments, metadata = bridge.create_packing_strategy(histogram, pack_size, ALGORITHM)
    lap("strategy")
    packs = bridge.fill_packing_strategy(assignments, sequences, pack_size, 0)
    lap("fill")
    int_lists = pa.list_(pa.int64())
    columns = {
        "input_ids": pa.array([p["input_ids"] for p in packs], type=int_lists),
        "loss_mask": pa.array([list(map(int, p["loss_mask"])) for p in packs],
                              type=pa.list_(pa.int8())),
        "seq_start_id": pa.array([p["seq_start_id"] for p in packs], type=int_lists),
    }
    pq.write_table(pa.table(columns), out, row_group_size=BRIDGE_ROW_GROUP)
    lap("write")
    print(json.dumps({"stages": stages, "packs": len(packs), "metadata": metadata}))


def timed(command, env=None):
    """(stdout, CPU seconds, wall seconds, peak RSS in MiB) of one process, by GNU time."""
    done = subprocess.run(["/usr/bin/time", "-f", "%U %S %e %M"] + command, capture_output=True,
                          text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    user, system, wall, rss_kib = done.stderr.strip().splitlines()[-1].split()
    return done.stdout, float(user) + float(system), float(wall), int(rss_kib) / 1024


def sample_digest(tokens, mask=None):
    """A sample's identity: its tokens (int64) and, when given, its mask (int8)."""
    data = tokens.tobytes() if mask is None else tokens.tobytes() + mask.tobytes()
    return hashlib.blake2b(data, digest_size=16).digest()


def list_parts(column):
    """(offsets, values) of a list column in one chunk; values as numpy arrays."""
    array = column.combine_chunks()
    return array.offsets.to_numpy(), array.values.to_numpy(zero_copy_only=False)


def input_samples(path):
    """Counters of the input's samples: (tokens, shifted mask) and tokens alone."""
    table = pq.read_table(path, columns=["input_ids", "loss_mask"])
    offsets, tokens = list_parts(table.column("input_ids"))
    mask_offsets, mask = list_parts(table.column("loss_mask"))
    assert np.array_equal(offsets - offsets[0], mask_offsets - mask_offsets[0])
    tokens, mask = tokens.astype(np.int64), mask.astype(np.int8)
    both, alone = collections.Counter(), collections.Counter()
    for a, b, c in zip(offsets[:-1], offsets[1:], mask_offsets[:-1]):
        shifted = np.zeros(b - a, dtype=np.int8)
        shifted[:-1] = mask[c + 1:c + b - a]
        both[sample_digest(tokens[a:b], shifted)] += 1
        alone[sample_digest(tokens[a:b])] += 1
    return both, alone


def packed_samples(paths):
    """Counters of the samples of packed Parquet files, as input_samples gives them, and the
    files' packs: count, largest tokens per pack, largest tokens less samples per pack."""
    both, alone = collections.Counter(), collections.Counter()
    packs = largest = largest_positions = 0
    for path in paths:
        table = pq.read_table(path, columns=["input_ids", "loss_mask", "seq_start_id"])
        offsets, tokens = list_parts(table.column("input_ids"))
        mask_offsets, mask = list_parts(table.column("loss_mask"))
        start_offsets, starts = list_parts(table.column("seq_start_id"))
        tokens, mask = tokens.astype(np.int64), mask.astype(np.int8)
        for row in range(table.num_rows):
            a, b = int(offsets[row]), int(offsets[row + 1])
            c = int(mask_offsets[row])
            assert int(mask_offsets[row + 1]) - c == b - a, f"{path} row {row}: mask length"
            bounds = [int(s) for s in starts[start_offsets[row]:start_offsets[row + 1]]] + [b - a]
            for s, e in zip(bounds[:-1], bounds[1:]):
                both[sample_digest(tokens[a + s:a + e], mask[c + s:c + e])] += 1
                alone[sample_digest(tokens[a + s:a + e])] += 1
            packs += 1
            largest = max(largest, b - a)
            largest_positions = max(largest_positions, b - a - (len(bounds) - 1))
    return both, alone, packs, largest, largest_positions


def compare(expected, produced):
    """{samples_missing, samples_extra, token_samples_missing, token_samples_extra}: how far the
    multiset of output samples is from the input's, with masks and for tokens alone."""
    (want_both, want_alone), (have_both, have_alone) = expected, produced
    return {"samples_missing": sum((want_both - have_both).values()),
            "samples_extra": sum((have_both - want_both).values()),
            "token_samples_missing": sum((want_alone - have_alone).values()),
            "token_samples_extra": sum((have_alone - want_alone).values())}


def one_file(args, work, seed):
    path = os.path.join(work, f"sft-{seed}.parquet")
    write_sft_file(path, args.rows, seed)
    lengths = pq.read_table(path, columns=["input_ids"]).column("input_ids")
    lengths = pc.list_value_length(lengths).to_numpy(zero_copy_only=False)
    tokens = int(lengths.sum())
    P = args.pack_size
    row = {"seed": seed, "rows": args.rows, "tokens": tokens,
           "file_mb": os.path.getsize(path) / 1e6}
    expected = input_samples(path)

    env = dict(os.environ, TQDM_DISABLE="1")  # Bridge's fill step draws progress bars
    runs = []
    for rep in range(args.reps):
        out = os.path.join(work, f"bridge-{rep}.idx.parquet")
        stdout, cpu, wall, rss = timed([sys.executable, os.path.abspath(__file__), "--bridge-only",
                                        path, out, "--pack-size", str(P), "--seed", str(seed)],
                                       env)
        runs.append((wall, cpu, rss, json.loads(stdout.strip().splitlines()[-1]), out))
    wall, cpu, rss, report, bridge_out = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    both, alone, packs, largest, largest_positions = packed_samples([bridge_out])
    assert all(r[3]["packs"] == packs for r in runs)  # seeded: every run packs alike
    bridge = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": max(r[2] for r in runs),
              "wall_s_runs": [r[0] for r in runs], "stages_s": report["stages"],
              "packs": packs, "l1_bound": -(-(tokens - args.rows) // P),
              "fill": tokens / (packs * P),
              "fill_own_rule": (tokens - args.rows) / (packs * P),
              "largest_pack_tokens": largest, "largest_pack_positions": largest_positions,
              "reported_efficiency_pct": report["metadata"]["packing_efficiency"],
              "output_mb": os.path.getsize(bridge_out) / 1e6}
    bridge.update(compare(expected, (both, alone)))
    for r in runs:
        os.remove(r[4])

    runs = []
    for rep in range(args.reps):
        folder = os.path.join(work, f"thdpack-{rep}")
        stdout, cpu, wall, rss = timed([args.thdpack, "pack", "--parquet", path,
                                        "--loss-mask-column", "loss_mask", "-C", str(P),
                                        "--parquet-out", folder, "--json", "--no-progress"])
        runs.append((wall, cpu, rss, json.loads(stdout), folder))
    wall, cpu, rss, summary, folder = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    shards = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    both, alone, packs, largest, largest_positions = packed_samples(shards)
    assert packs == summary["packs"]
    ours = {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": max(r[2] for r in runs),
            "wall_s_runs": [r[0] for r in runs], "stages_s": summary["seconds"],
            "packs": packs, "l1_bound": -(-tokens // P), "l2_bound": summary["lower_bound_l2"],
            "fill": tokens / (packs * P), "largest_pack_tokens": largest,
            "largest_pack_positions": largest_positions, "shards": len(shards),
            "output_mb": sum(os.path.getsize(f) for f in shards) / 1e6}
    ours.update(compare(expected, (both, alone)))
    for r in runs:
        for f in os.listdir(r[4]):
            os.remove(os.path.join(r[4], f))
        os.rmdir(r[4])
    os.remove(path)

    row.update(bridge=bridge, thdpack=ours, speedup=bridge["wall_s"] / ours["wall_s"],
               cpu_speedup=bridge["cpu_s"] / ours["cpu_s"])
    stages = ", ".join(f"{k} {v:.2f}" for k, v in bridge["stages_s"].items())
    print(f"seed {seed}: {args.rows} samples, {tokens} tokens, pack size {P}\n"
          f"  Bridge  {bridge['wall_s']:7.2f} s wall ({bridge['cpu_s']:.2f} CPU s; {stages}), "
          f"{bridge['packs']} packs (L1 {bridge['l1_bound']} counting n - 1), fill "
          f"{bridge['fill']:.4f}, peak RSS {bridge['peak_rss_mib']:.0f} MiB, samples missing "
          f"{bridge['samples_missing']} extra {bridge['samples_extra']}\n"
          f"  thdpack {ours['wall_s']:7.2f} s wall ({ours['cpu_s']:.2f} CPU s), "
          f"{ours['packs']} packs "
          f"(L1 {ours['l1_bound']}), fill {ours['fill']:.4f}, peak RSS {ours['peak_rss_mib']:.0f} "
          f"MiB, samples missing {ours['samples_missing']} extra {ours['samples_extra']}\n"
          f"  Bridge / thdpack: {row['speedup']:.1f}x wall, {row['cpu_speedup']:.1f}x CPU",
          flush=True)
    if ours["samples_missing"] or ours["samples_extra"]:
        sys.exit(f"seed {seed}: thdpack's packed Parquet does not hold the input's samples "
                 "once each")
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pack-size", type=int, default=8192)
    parser.add_argument("--thdpack", default=os.environ.get("THDPACK_CLI", "build/bin/thdpack"))
    parser.add_argument("--out")
    parser.add_argument("--bridge-only", nargs=2, metavar=("IN", "OUT"),
                        help="only run Bridge's preparation of IN into OUT (what the benchmark "
                             "times)")
    parser.add_argument("--seed", type=int, default=0, help="with --bridge-only: numpy's seed")
    args = parser.parse_args()
    if args.pack_size < 8192:
        parser.error("--pack-size must be >= 8192, the longest sample of the generated files")
    if args.bridge_only:
        bridge_only(*args.bridge_only, args.pack_size, args.seed)
        return
    if min(args.rows, args.seeds, args.reps) < 1:
        parser.error("--rows, --seeds and --reps must be >= 1")
    from importlib.metadata import version
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as work:
        files = [one_file(args, work, seed) for seed in range(args.seeds)]
    speedups = [f["speedup"] for f in files]
    summary = {"median_speedup": statistics.median(speedups), "worst_speedup": min(speedups),
               "median_cpu_speedup": statistics.median(f["cpu_speedup"] for f in files),
               "worst_cpu_speedup": min(f["cpu_speedup"] for f in files)}
    print(f"Bridge / thdpack wall time over {len(files)} files: median "
          f"{summary['median_speedup']:.1f}x, worst {summary['worst_speedup']:.1f}x; CPU time: "
          f"median {summary['median_cpu_speedup']:.1f}x, worst {summary['worst_cpu_speedup']:.1f}x")
    if args.out:
        result = {"megatron_bridge": version("megatron-bridge"), "pyarrow": pa.__version__,
                  "algorithm": ALGORITHM, "pack_size": args.pack_size, "reps": args.reps,
                  "files": files, "summary": summary}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
