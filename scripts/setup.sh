#!/usr/bin/env bash
# Installs every Debian package thdpack uses, builds thdpack in ./build and installs it: the
# `thdpack` command, headers, libraries, CMake and pkg-config files under PREFIX, and the Python
# package for Debian's /usr/bin/python3 (the interpreter with python3-torch and python3-numpy).
#
#   bash scripts/setup.sh                       # apt packages + build (Release) + install
#   bash scripts/setup.sh --tests               # also the tests and benchmarks (scripts/test.sh),
#                                               # and .venv with the pinned Python packages the
#                                               # adapters are tested against (scripts/python_env.sh)
#   THDPACK_SKIP_APT=1 bash scripts/setup.sh    # packages already present
#   THDPACK_SKIP_INSTALL=1 bash scripts/setup.sh  # build only
#   THDPACK_SKIP_VENV=1 bash scripts/setup.sh --tests  # no .venv (offline): no Parquet sources
#
# Without --tests a fresh build directory gets what `thdpack plan`, `thdpack run` and
# `import thdpack` need (library, CLI, Python module) and none of the test-only packages; a build
# directory configured before keeps its choice.
#
# THDPACK_SKIP_VENV=1 leaves .venv out (offline): the Python tests then run with /usr/bin/python3.
# Environment: BUILD_DIR (default build), BUILD_TYPE (default Release), JOBS (default nproc),
# PREFIX (default /usr/local when writable, else ~/.local), CMAKE_ARGS (extra configure flags).
# For another Python, a venv or conda: `pip install --no-build-isolation .` (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
if [ "${1:-}" = "--tests" ]; then with_tests=1; fi

packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libsimdjson-dev libcli11-dev
  openmpi-bin libopenmpi-dev
  python3 python3-dev python3-numpy python3-pybind11 pybind11-dev python3-torch
  python3-mpi4py python3-pip python3-setuptools python3-wheel
)
if [ "$with_tests" = 1 ]; then
  packages+=(
    libgtest-dev libgmock-dev googletest libbenchmark-dev python3-pytest
    python3-venv python3-build  # the install tests: fresh venvs, sdist and wheel
    chromium  # headless, for the tests that open the HTML reports
    iproute2 util-linux  # ip netns, tc and flock: the multi-host and writer-lock tests
    time  # GNU time: peak memory in bench/parquet_bench.py
    clang-14 libclang-rt-14-dev  # the libFuzzer run of the readers
  )
fi

if [ "${THDPACK_SKIP_APT:-0}" != "1" ]; then
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[setup] installing: ${missing[*]}"
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "[setup] all Debian packages present"
  fi
fi

# The Python tests run in .venv when it exists: torch from PyPI and the real transformers, trl,
# datasets and verl that thdpack's adapters are compared with (python/constraints.txt). It also
# holds pyarrow, whose wheel's Arrow/Parquet C++ libraries the Parquet sources link
# (THDPACK_WITH_PARQUET=AUTO finds them through .venv/bin/python), so it comes before the build.
if [ "$with_tests" = 1 ] && [ "${THDPACK_SKIP_VENV:-0}" != "1" ]; then
  bash scripts/python_env.sh
fi

# Install, so that `thdpack` runs as the docs write it and `import thdpack` works for Debian's
# Python. The package goes where that Python looks for the prefix's packages.
if [ -z "${PREFIX:-}" ]; then
  if [ -w /usr/local/bin ] && [ -w /usr/local/lib ]; then PREFIX=/usr/local; else PREFIX=$HOME/.local; fi
fi
# Debian's Python looks for the prefix's packages in a directory of its own (for /usr/local:
# lib/python3.X/dist-packages): the package goes there, as a path under the prefix.
python_dir=$(/usr/bin/python3 - "$PREFIX" <<'PY'
import os, site, sys
prefix = os.path.realpath(sys.argv[1])
for d in site.getsitepackages() + [site.getusersitepackages()]:
    relative = os.path.relpath(os.path.realpath(d), prefix)
    if relative.startswith("lib"):  # not ../, and not local/ (/usr vs /usr/local)
        print(relative)
        break
else:
    print(f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages")
PY
)
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
JOBS=${JOBS:-$(nproc)}
targets=()
if [ "$with_tests" = 1 ]; then
  targets=(-DTHDPACK_BUILD_TESTS=ON -DTHDPACK_BUILD_BENCH=ON)
elif [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  targets=(-DTHDPACK_BUILD_TESTS=OFF -DTHDPACK_BUILD_BENCH=OFF)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja "${targets[@]}" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DTHDPACK_PYTHON_INSTALL_DIR="$python_dir" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "[setup] built in $BUILD_DIR"

[ "${THDPACK_SKIP_INSTALL:-0}" = "1" ] && exit 0

cmake --install "$BUILD_DIR" > "$BUILD_DIR/install.log"
cmake --install "$BUILD_DIR" --component python >> "$BUILD_DIR/install.log"
# Earlier set-ups pointed Debian's Python at the build tree with a .pth file; the install replaces it.
for site in $(/usr/bin/python3 -c "import site; print(' '.join(site.getsitepackages()))"); do
  rm -f "$site/thdpack-build.pth" 2>/dev/null || true
done
echo "[setup] installed thdpack $("$PREFIX/bin/thdpack" --version | cut -d' ' -f2) in $PREFIX" \
  "(bin/thdpack, include/thdpack, lib, lib/cmake/thdpack, lib/pkgconfig; Python:" \
  "$PREFIX/$python_dir)"
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "[setup] $PREFIX/bin is not on PATH: export PATH=$PREFIX/bin:\$PATH" ;;
esac
if ! (cd / && /usr/bin/python3 -c "import thdpack" 2>/dev/null); then
  echo "[setup] /usr/bin/python3 does not see $PREFIX/$python_dir:" \
    "export PYTHONPATH=$PREFIX/$python_dir"
fi
