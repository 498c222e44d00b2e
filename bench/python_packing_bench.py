"""Python packing at 1M samples against the native call (the third item of figure 4).

Times thdpack.best_fit_decreasing from Python on 1M longtail-32k-like lengths, returning one array
per pack and flat (items, offsets), and the same packing in C++ (thdpack_speed_bench's
BM_PackerBestFitDecreasing/1000000, run right before on the same machine), and prints the ratios.

    python3 bench/python_packing_bench.py --speed-bench build/bin/thdpack_speed_bench [--out F.json]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import thdpack


def median_ms(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed-bench", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out")
    args = ap.parse_args()

    # The same lengths as the C++ benchmark: the first 1M samples of longtail-32k.
    dataset = thdpack.mock_dataset(thdpack.workload("longtail-32k")["dataset_config"])
    lengths = np.array([dataset.length(i) for i in range(1_000_000)], dtype=np.int64)
    capacity = 32768

    out = subprocess.run(
        [args.speed_bench, "--benchmark_filter=BM_PackerBestFitDecreasing/1000000",
         f"--benchmark_repetitions={args.reps}", "--benchmark_report_aggregates_only=true",
         "--benchmark_format=json"], capture_output=True, text=True, check=True)
    runs = json.loads(out.stdout)["benchmarks"]
    native = next(b for b in runs if b.get("aggregate_name") == "median")
    native_ms = native["real_time"] if native["time_unit"] == "ms" else native["real_time"] / 1e6

    lists_ms = median_ms(lambda: thdpack.best_fit_decreasing(lengths, capacity), args.reps)
    flat_ms = median_ms(lambda: thdpack.best_fit_decreasing(lengths, capacity, flat=True), args.reps)
    result = {"samples": len(lengths), "native_ms": native_ms, "python_lists_ms": lists_ms,
              "python_flat_ms": flat_ms, "lists_over_native": lists_ms / native_ms,
              "flat_over_native": flat_ms / native_ms}
    print(f"best-fit decreasing, 1M samples: native {native_ms:.1f} ms; Python, one array per "
          f"pack {lists_ms:.1f} ms ({lists_ms / native_ms:.2f}x); Python, flat "
          f"{flat_ms:.1f} ms ({flat_ms / native_ms:.2f}x)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
