#!/usr/bin/env bash
# Installs what thdpack needs, builds it, and runs the whole test suite (unit and property tests,
# CLI end-to-end tests, benchmark smoke runs, and a bounded libFuzzer run of the readers:
# scripts/fuzz.sh, CTest label fuzz).
#
#   bash scripts/test.sh              # Release build in ./build, all tests
#   bash scripts/test.sh --sanitize   # also an AddressSanitizer + UBSan build in ./build-sanitize
#
# Environment: as scripts/setup.sh (BUILD_DIR, BUILD_TYPE, JOBS, THDPACK_SKIP_APT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"

if [ "${1:-}" = "--sanitize" ]; then
  # CMake reads CXXFLAGS when it first configures the directory.
  THDPACK_SKIP_APT=1 THDPACK_SKIP_INSTALL=1 BUILD_DIR=build-sanitize BUILD_TYPE=Debug \
    CXXFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" \
    CMAKE_ARGS="-DTHDPACK_BUILD_BENCH=OFF -DTHDPACK_FUZZ_IN_CTEST=OFF" bash scripts/setup.sh --tests
  # Hostile-input tests expect absurd allocations to throw std::bad_alloc, as they do without ASan.
  ASAN_OPTIONS=allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-sanitize --output-on-failure -j "$JOBS" -LE install
fi
