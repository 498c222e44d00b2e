#!/usr/bin/env bash
# Installs every Debian package thdpack uses, then configures and builds it in ./build.
#
#   bash scripts/setup.sh            # install + build (Release)
#   THDPACK_SKIP_APT=1 bash scripts/setup.sh   # build only (packages already present)
#
# Environment: BUILD_DIR (default build), BUILD_TYPE (default Release), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  nlohmann-json3-dev libcli11-dev
  openmpi-bin libopenmpi-dev
  python3 python3-dev python3-numpy python3-pybind11 pybind11-dev python3-pytest python3-torch
  python3-mpi4py
  clang-14 libclang-rt-14-dev
)

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

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "[setup] built in $BUILD_DIR"

# Make `import thdpack` work for Debian's /usr/bin/python3 (the interpreter with python3-torch),
# pointing at the build tree like an editable install. `cmake --install` does a real install.
if [ -d "$BUILD_DIR/python/thdpack" ]; then
  site=$(/usr/bin/python3 -c "import site; print(site.getsitepackages()[0])")
  pth="$site/thdpack-build.pth"
  if mkdir -p "$site" 2>/dev/null && echo "$(cd "$BUILD_DIR/python" && pwd)" > "$pth" 2>/dev/null; then
    echo "[setup] /usr/bin/python3 imports thdpack from $BUILD_DIR/python ($pth)"
  else
    echo "[setup] to import thdpack: export PYTHONPATH=$(cd "$BUILD_DIR/python" && pwd)"
  fi
fi
