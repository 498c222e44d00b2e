#!/usr/bin/env bash
# Coverage-guided fuzzing of thdpack's readers with libFuzzer: builds the targets of tests/fuzz
# with clang, AddressSanitizer and UBSan in a build directory of their own, then runs each for a
# bounded time from its seed corpus and regression inputs. Fails when a target finds anything: a
# crash, a sanitizer report, an exception other than InvalidArgument, a failed check, a hang
# (-timeout) or runaway memory (-rss_limit_mb). The input is kept in
# $FUZZ_BUILD_DIR/artifacts/<target>/: fix the bug, then add the input to
# tests/fuzz/regressions/<target>/, which the regular build replays (CTest fuzz_replay_<target>).
#
#   bash scripts/fuzz.sh                                # every target, 25 s each
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh jsonl_line    # one target, longer
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_SECONDS (default 25 per target),
# FUZZ_CXX (default clang++-14, else clang++), JOBS (default nproc: targets run that many at once).
# CTest runs this as the test fuzz_libfuzzer (label fuzz) with FUZZ_BUILD_DIR=<build>/fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-25}
JOBS=${JOBS:-$(nproc)}
CXX_BIN=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
if [ -z "$CXX_BIN" ]; then
  echo "[fuzz] clang++ not found: install clang-14 and libclang-rt-14-dev (scripts/setup.sh --tests" \
    "does)" >&2
  exit 1
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(jsonl_line lengths_file mock_config indexed_index pack_file)
fi

start=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$CXX_BIN" -DTHDPACK_BUILD_FUZZ=ON -DTHDPACK_BUILD_TESTS=OFF \
  -DTHDPACK_BUILD_BENCH=OFF -DTHDPACK_WITH_MPI=OFF -DTHDPACK_WITH_PYTHON=OFF > /dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target $(printf 'fuzz_%s ' "${targets[@]}")
echo "[fuzz] built in $(( $(date +%s) - start )) s; running ${#targets[@]} targets for" \
  "${SECONDS_PER_TARGET} s each, ${JOBS} at a time"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mkdir -p "$BUILD_DIR/logs"

run_target() {
  local t=$1
  local work="$BUILD_DIR/corpus/$t"  # inputs found here; the committed seeds stay as they are
  local artifacts="$BUILD_DIR/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  local args=(-max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=8192
              -print_final_stats=1 -artifact_prefix="$artifacts")
  if [ -f "tests/fuzz/$t.dict" ]; then args+=(-dict="tests/fuzz/$t.dict"); fi
  local dirs=("$work" "tests/fuzz/corpus/$t")
  if [ -d "tests/fuzz/regressions/$t" ]; then dirs+=("tests/fuzz/regressions/$t"); fi
  "$BUILD_DIR/tests/fuzz/fuzz_$t" "${args[@]}" "${dirs[@]}" > "$BUILD_DIR/logs/$t.log" 2>&1
}

failed=()
pids=()
names=()
wait_all() {
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
  done
  pids=()
  names=()
}
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -ge "$JOBS" ]; then wait_all; fi
done
wait_all

for t in "${targets[@]}"; do
  log="$BUILD_DIR/logs/$t.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 || true)
  printf '[fuzz] %-14s %10s runs %8s exec/s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "${cov:-}"
done
for t in "${failed[@]}"; do
  echo "[fuzz] FINDING in $t (input in $BUILD_DIR/artifacts/$t/); the end of its log:" >&2
  tail -n 40 "$BUILD_DIR/logs/$t.log" >&2
done
echo "[fuzz] done in $(( $(date +%s) - start )) s"
[ ${#failed[@]} -eq 0 ]
