"""Parquet ingestion: `thdpack pack --parquet` (Parquet shards to a pack file) against pyarrow's own
read of the same columns, over several seeded files, and one large end-to-end run.

    .venv/bin/python bench/parquet_bench.py [--rows 400000] [--seeds 3] [--reps 3]
        [--thdpack build/bin/thdpack] [--large-samples 100000000] [--out results.json]

Each seed writes one Parquet file (row groups of 64K rows, pyarrow's default compression) of
`--rows` SFT-like samples: int32 `input_ids` with log-normal lengths (median about 220 tokens,
clipped to [1, 8192]) and an int8 `loss_mask`. For each file, alternating, `--reps` times each:

- pyarrow: `pyarrow.parquet.read_table(file, columns=[input_ids, loss_mask], use_threads=False)`,
  one thread, as thdpack reads (and with its default threads, for reference);
- thdpack: `thdpack pack --parquet FILE --loss-mask-column loss_mask -C 8192 -o OUT.pack`, the
  whole command (start, read, pack, write the pack file), as a separate process.

Throughput is the columns' decoded bytes (4 per token, 1 per mask value) per second, of wall time
and of CPU time (user + system, all threads). Both ratios thdpack / pyarrow are given: wall time
is what a user waits for (pyarrow's reader uses helper threads even with use_threads=False, so its
CPU time exceeds its wall time), CPU time swings less on a shared machine. The summary gives the
median and the worst ratio over the files.

`--large-samples N` (0: skip) also writes N short samples (1-15 tokens, ten shards in a folder) and
times `thdpack pack --parquet FOLDER` on them end to end, with the peak resident memory of the
thdpack process (GNU time's maximum RSS).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP = 65536


def write_sft_file(path, rows, seed):
    """An SFT-like file; returns its decoded column bytes."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(220), 1.0, rows), 1, 8192).astype(np.int32)
    return write_file(path, lengths, rng)


def write_file(path, lengths, rng):
    offsets = np.zeros(lengths.size + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    tokens = rng.integers(0, 128000, int(offsets[-1]), dtype=np.int32)
    mask = (rng.random(tokens.size) < 0.7).astype(np.int8)
    table = pa.table({
        "input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(tokens)),
        "loss_mask": pa.ListArray.from_arrays(pa.array(offsets), pa.array(mask)),
    })
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    return int(offsets[-1]) * 5


def pyarrow_read(path, threads):
    """(CPU seconds, wall seconds) of one read of the two columns."""
    cpu, wall = time.process_time(), time.perf_counter()
    table = pq.read_table(path, columns=["input_ids", "loss_mask"], use_threads=threads)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert table.num_rows > 0
    return cpu, wall


def thdpack_pack(cli, source, out, capacity=8192):
    """(CPU seconds, wall seconds, peak RSS in MiB) of one `thdpack pack` process, by GNU time."""
    command = ["/usr/bin/time", "-f", "%U %S %e %M", cli, "pack", "--parquet", source,
               "--loss-mask-column", "loss_mask", "-C", str(capacity), "-o", out, "--no-progress"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"thdpack pack failed:\n{done.stdout}\n{done.stderr}")
    user, system, wall, rss_kib = done.stderr.strip().splitlines()[-1].split()
    os.remove(out)
    return float(user) + float(system), float(wall), int(rss_kib) / 1024


def compare_files(args, work):
    rows = []
    for seed in range(args.seeds):
        path = os.path.join(work, f"sft-{seed}.parquet")
        decoded = write_sft_file(path, args.rows, seed)
        one, threaded, ours = [], [], []
        for _ in range(args.reps):
            one.append(pyarrow_read(path, threads=False))
            threaded.append(pyarrow_read(path, threads=True))
            ours.append(thdpack_pack(args.thdpack, path, os.path.join(work, "out.pack")))
        mb = decoded / 1e6

        def rate(runs, i):  # MB per median second (i: 0 CPU, 1 wall)
            return mb / statistics.median(r[i] for r in runs)

        row = {"seed": seed, "rows": args.rows, "decoded_mb": mb,
               "file_mb": os.path.getsize(path) / 1e6,
               "pyarrow_1_thread_mb_per_cpu_s": rate(one, 0),
               "thdpack_pack_mb_per_cpu_s": rate(ours, 0),
               "pyarrow_1_thread_mb_per_wall_s": rate(one, 1),
               "pyarrow_threads_mb_per_wall_s": rate(threaded, 1),
               "thdpack_pack_mb_per_wall_s": rate(ours, 1),
               "thdpack_peak_rss_mib": max(r[2] for r in ours)}
        row["ratio"] = row["thdpack_pack_mb_per_cpu_s"] / row["pyarrow_1_thread_mb_per_cpu_s"]
        row["wall_ratio"] = (row["thdpack_pack_mb_per_wall_s"] /
                             row["pyarrow_1_thread_mb_per_wall_s"])
        rows.append(row)
        print(f"seed {seed}: {mb:7.1f} MB decoded ({row['file_mb']:.1f} MB file)  per CPU s: "
              f"pyarrow {row['pyarrow_1_thread_mb_per_cpu_s']:6.0f} MB/s, thdpack pack "
              f"{row['thdpack_pack_mb_per_cpu_s']:6.0f} MB/s, ratio {row['ratio']:.3f}, by wall "
              f"{row['wall_ratio']:.3f}  "
              f"(wall: pyarrow {row['pyarrow_1_thread_mb_per_wall_s']:.0f}, with threads "
              f"{row['pyarrow_threads_mb_per_wall_s']:.0f}, thdpack "
              f"{row['thdpack_pack_mb_per_wall_s']:.0f} MB/s; thdpack peak RSS "
              f"{row['thdpack_peak_rss_mib']:.0f} MiB)", flush=True)
        os.remove(path)
    for key, what in (("wall_ratio", "wall"), ("ratio", "CPU")):
        ratios = [r[key] for r in rows]
        print(f"thdpack pack / pyarrow read (1 thread), per {what} second: median "
              f"{statistics.median(ratios):.3f}, worst {min(ratios):.3f} over {len(rows)} files")
    return rows


def large_run(args, work):
    folder = os.path.join(work, "large")
    os.makedirs(folder)
    rng = np.random.default_rng(1234)
    shards = 10
    per_shard = -(-args.large_samples // shards)
    tokens = 0
    start = time.perf_counter()
    for s in range(shards):
        n = min(per_shard, args.large_samples - s * per_shard)
        lengths = rng.integers(1, 16, n, dtype=np.int32)
        tokens += write_file(os.path.join(folder, f"part-{s:02d}.parquet"), lengths, rng) // 5
    written = time.perf_counter() - start
    print(f"large: {args.large_samples} samples, {tokens} tokens in {shards} shards "
          f"(written in {written:.0f} s)", flush=True)
    cpu, seconds, rss = thdpack_pack(args.thdpack, folder, os.path.join(work, "large.pack"), 4096)
    print(f"large: thdpack pack --parquet FOLDER -C 4096: {seconds:.1f} s ({cpu:.1f} CPU s), "
          f"{args.large_samples / seconds / 1e6:.2f} M samples/s, peak RSS {rss:.0f} MiB")
    shutil.rmtree(folder)
    return {"samples": args.large_samples, "tokens": tokens, "seconds": seconds,
            "cpu_seconds": cpu, "peak_rss_mib": rss}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--thdpack", default=os.environ.get("THDPACK_CLI", "build/bin/thdpack"))
    parser.add_argument("--large-samples", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args()
    if min(args.rows, args.seeds, args.reps) < 1 or args.large_samples < 0:
        parser.error("--rows, --seeds and --reps must be >= 1, --large-samples >= 0")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as work:
        result = {"pyarrow": pa.__version__, "reps": args.reps,
                  "files": compare_files(args, work)}
        if args.large_samples:
            result["large"] = large_run(args, work)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
