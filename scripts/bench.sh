#!/usr/bin/env bash
# Runs every benchmark and rewrites the README's results section.
#
#   bash scripts/bench.sh            # setup + build, speed and quality benchmarks, README table
#   bash scripts/bench.sh --quick    # fewer repetitions and cases (a smoke run; README untouched)
#
# Results land in bench/results/ (speed, quality, pack, jsonl, parquet, bridge_pack, pipeline_*,
# moe_*, reorder_* JSON).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

bash scripts/setup.sh --tests  # the benchmarks build with the tests
mkdir -p bench/results
if [ "$quick" = 1 ]; then
  out=build/bench-quick
  mkdir -p "$out"
  ./build/bin/thdpack_speed_bench --benchmark_min_time=0.01 --benchmark_out="$out/speed.json" \
    --benchmark_out_format=json
  ./build/bin/thdpack_quality_bench --quick --out "$out/quality.json"
  ./build/bin/thdpack_planner_bench --quick --out "$out/planner.json"
  ./build/bin/thdpack_dynamic_cp_bench --quick --out "$out/dynamic_cp.json"
  ./build/bin/thdpack_jsonl_bench --quick --out "$out/jsonl.json" --dir "$out"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 8 \
    ./build/bin/thdpack_pipeline_bench --tp 2 --cp 2 --dp 2 --steps 2 --out "$out/pipeline.json" >/dev/null
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 8 \
    ./build/bin/thdpack_moe_bench --tokens 1024 --hidden 64 --reps 2 --out "$out/moe.json" >/dev/null
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 4 \
    ./build/bin/thdpack reorder --microbatches 4 --compute-ms 1 --json >"$out/reorder.json"
  /usr/bin/python3 bench/report.py --speed "$out/speed.json" --quality "$out/quality.json" \
    --planner "$out/planner.json" --dynamic-cp "$out/dynamic_cp.json" --jsonl "$out/jsonl.json" \
    --pipeline "$out/pipeline.json" --moe "$out/moe.json" --reorder "$out/reorder.json" >/dev/null
  echo "[bench] quick run OK ($out)"
  exit 0
fi
./build/bin/thdpack_speed_bench --benchmark_repetitions=15 --benchmark_report_aggregates_only=true \
  --benchmark_out=bench/results/speed.json --benchmark_out_format=json
./build/bin/thdpack_quality_bench --out bench/results/quality.json
# The planner's worst case: 25 seeds x 8 distributions per case, then ~1M samples as dp grows.
./build/bin/thdpack_planner_bench --seeds 25 --large-seeds 1 --out bench/results/planner.json
# Dynamic CP (figure 12): fixed CP, default_dynamic_cp and balanced_dynamic_cp, 15 seeds per case,
# batches of 8 and 64 samples per rank;
# planning time over 50 seeded inputs x 4 distributions x 2 sizes, then ~1M samples.
./build/bin/thdpack_dynamic_cp_bench --seeds 15 --samples-per-rank 8,64 --out bench/results/dynamic_cp.json
# Python packing at 1M samples against the native call.
PYTHONPATH=build/python /usr/bin/python3 bench/python_packing_bench.py \
  --speed-bench build/bin/thdpack_speed_bench --out bench/results/python_packing.json
# Offline packing from indexed datasets, 10k, 1M and 100M samples (the 100M index takes ~2 GB of
# disk in the temporary directory and ~8 GB of memory while packing).
./build/bin/thdpack_pack_bench --huge --out bench/results/pack.json
# Reading JSONL: four seeded ~31 MB files, the reader against the one it replaced, 7 reads each.
./build/bin/thdpack_jsonl_bench --reps 7 --out bench/results/jsonl.json
# Reading Parquet: three seeded ~700 MB files against pyarrow, and 100M samples end to end (about
# 5 GB of Parquet in the temporary directory and 5 GB of memory while packing).
.venv/bin/python bench/parquet_bench.py --rows 400000 --seeds 3 --reps 5 \
  --large-samples 100000000 --out bench/results/parquet.json
# Parquet to packed Parquet beside Megatron-Bridge's preparation (python/constraints.txt pins it):
# three seeded 100,000-row files, Bridge's Python steps once each, thdpack 3 times.
.venv/bin/python bench/bridge_pack_bench.py --rows 100000 --seeds 3 --reps 3 \
  --out bench/results/bridge_pack.json

# Figure 8 under mpirun (oversubscribed on small machines): "ranks tp cp pp dp" per line.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -f bench/results/pipeline_*.json
while read -r ranks tp cp pp dp; do
  mpirun --oversubscribe -np "$ranks" ./build/bin/thdpack_pipeline_bench --tp "$tp" --cp "$cp" \
    --pp "$pp" --dp "$dp" --steps 20 --out "bench/results/pipeline_${ranks}_tp${tp}_cp${cp}_pp${pp}_dp${dp}.json" \
    </dev/null >/dev/null  # mpirun would otherwise read the layout list
done <<LAYOUTS
8 1 1 1 8
8 2 2 1 2
8 1 2 2 2
16 2 2 2 2
16 1 2 1 8
LAYOUTS

# Figure 10: MoE dispatch and combine on 8 ranks, "tokens-per-rank hidden experts topk" per line.
rm -f bench/results/moe_*.json
while read -r tokens hidden experts topk; do
  mpirun --oversubscribe -np 8 ./build/bin/thdpack_moe_bench --tokens "$tokens" --hidden "$hidden" \
    --experts "$experts" --topk "$topk" --reps 10 \
    --out "bench/results/moe_8_t${tokens}_h${hidden}_e${experts}_k${topk}.json" </dev/null >/dev/null
done <<SHAPES
8192 1024 64 2
8192 1024 64 8
16384 256 64 4
4096 2048 128 8
SHAPES

# Multimodal reordering at dp 4 and 8: "ranks name extra-flags" per line (the default workload,
# then a milder one with one mid-sized image per sample).
rm -f bench/results/reorder_*.json
while read -r ranks name flags; do
  # shellcheck disable=SC2086  # the flags are split on purpose
  mpirun --oversubscribe -np "$ranks" ./build/bin/thdpack reorder --microbatches 48 -W 2 \
    --compute-ms 20 --json $flags >"bench/results/reorder_${ranks}_${name}.json" </dev/null
done <<RUNS
4 default
8 default
4 mild --text-only-fraction 0 --mean-images 1 --min-side 12 --max-side 24
8 mild --text-only-fraction 0 --mean-images 1 --min-side 12 --max-side 24
RUNS

/usr/bin/python3 bench/report.py --results bench/results --readme README.md
