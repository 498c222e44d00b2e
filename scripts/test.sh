#!/usr/bin/env bash
# Installs what thdpack needs, builds it, and runs the whole test suite (unit and property tests,
# CLI end-to-end tests, benchmark smoke runs).
#
#   bash scripts/test.sh
#
# Environment: as scripts/setup.sh (BUILD_DIR, BUILD_TYPE, JOBS, THDPACK_SKIP_APT).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# The core must stay free of communication, GPU and Python headers (DESIGN.md, layers).
if grep -rlE '#include *[<"](mpi\.h|nccl\.h|cuda_runtime|cuda\.h|pybind11|Python\.h)' src/core; then
  echo "[test] src/core includes MPI/NCCL/CUDA/Python headers" >&2
  exit 1
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
