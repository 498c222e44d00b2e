#!/usr/bin/env bash
# Runs every benchmark and rewrites the README's results section.
#
#   bash scripts/bench.sh            # setup + build, speed and quality benchmarks, README table
#   bash scripts/bench.sh --quick    # fewer repetitions and cases (a smoke run; README untouched)
#
# Results land in bench/results/{speed,quality}.json.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

bash scripts/setup.sh
mkdir -p bench/results
if [ "$quick" = 1 ]; then
  out=build/bench-quick
  mkdir -p "$out"
  ./build/bin/thdpack_speed_bench --benchmark_min_time=0.01 --benchmark_out="$out/speed.json" \
    --benchmark_out_format=json
  ./build/bin/thdpack_quality_bench --quick --out "$out/quality.json"
  /usr/bin/python3 bench/report.py --speed "$out/speed.json" --quality "$out/quality.json" >/dev/null
  echo "[bench] quick run OK ($out)"
  exit 0
fi
./build/bin/thdpack_speed_bench --benchmark_repetitions=15 --benchmark_report_aggregates_only=true \
  --benchmark_out=bench/results/speed.json --benchmark_out_format=json
./build/bin/thdpack_quality_bench --out bench/results/quality.json
/usr/bin/python3 bench/report.py --speed bench/results/speed.json --quality bench/results/quality.json \
  --readme README.md
