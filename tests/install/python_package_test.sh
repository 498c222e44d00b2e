#!/usr/bin/env bash
# What a Python user does: `python -m build --no-isolation` (an sdist, checked to hold every
# tracked source file and to configure on its own; a wheel), install the wheel into a fresh venv
# (with Debian's numpy and torch visible through --system-site-packages), offline, and use it; then
# `pip install --no-build-isolation .` from the source tree into a second fresh venv. In each venv:
# the import-and-pack smoke test (python_smoke.py) and the `thdpack` console script. The project
# is compiled at most once: the wheel and `pip install .` share setup.py's build folder
# (build-python/), or, given BUILD_DIR, take the module and CLI from that CMake build of the
# source tree (the suite passes its own, so nothing is compiled twice; setup.py's configure of a
# new folder is then covered by the sdist check below). Nothing here reaches a network: pip runs
# with --no-index.
#
#   bash tests/install/python_package_test.sh [PYTHON [BUILD_DIR]]   (default /usr/bin/python3)
set -euo pipefail
python=${1:-/usr/bin/python3}
if [ -n "${2:-}" ]; then export THDPACK_CMAKE_BUILD_DIR=$2; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^project(thdpack VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
step() { echo "[python-package] $*"; }

check_venv() {  # venv: the smoke test and the console script, from outside the source tree
  local venv=$1
  (cd "$work" && "$venv/bin/python" "$here/python_smoke.py" "$version" "$venv")
  local reported
  reported=$("$venv/bin/thdpack" --version)
  [ "$reported" = "thdpack $version" ] ||
    { echo "the thdpack console script says '$reported', not 'thdpack $version'" >&2; exit 1; }
  "$venv/bin/thdpack" plan --workload sft-8k --dp 2 --steps 1 --no-progress > "$work/plan.txt"
  grep -q '^balanced' "$work/plan.txt" || { cat "$work/plan.txt"; exit 1; }
}

step "sdist (python -m build --sdist): complete, no build output, configures on its own"
"$python" -m venv --system-site-packages "$work/wheel-venv"
(cd "$work" && "$work/wheel-venv/bin/python" -m build --sdist --no-isolation --outdir "$work/dist" \
  "$root" > "$work/sdist.log" 2>&1) || { tail -40 "$work/sdist.log"; exit 1; }
sdist=$(ls "$work"/dist/thdpack-"$version".tar.gz)
tar tzf "$sdist" | sed "s|^thdpack-$version/||" > "$work/sdist-contents.txt"
needed="$work/sdist-needed.txt"
if git -C "$root" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  # Every tracked file of the folders the build reads, not a chosen few.
  git -C "$root" ls-files CMakeLists.txt setup.py pyproject.toml cmake include src tools python \
    > "$needed"
else
  printf '%s\n' CMakeLists.txt cmake/install.cmake src/CMakeLists.txt include/thdpack/thdpack.hpp \
    tools/thdpack/main.cpp python/src/module.cpp > "$needed"
fi
missing=$(grep -vxF -f "$work/sdist-contents.txt" "$needed" || true)
[ -z "$missing" ] || { echo "sdist lacks:" >&2; echo "$missing" >&2; exit 1; }
if grep -qE '^build|\.so$' "$work/sdist-contents.txt"; then
  echo "sdist carries build output:" >&2; grep -E '^build|\.so$' "$work/sdist-contents.txt" >&2; exit 1
fi
# CMake checks at generate time that every source file it names exists: the unpacked sdist alone
# configures (building it again would only repeat the wheel build below).
tar xzf "$sdist" -C "$work"
cmake -S "$work/thdpack-$version" -B "$work/sdist-configure" -DTHDPACK_WITH_PYTHON=ON \
  -DPython3_EXECUTABLE="$work/wheel-venv/bin/python" -DTHDPACK_BUILD_TESTS=OFF \
  -DTHDPACK_BUILD_BENCH=OFF > "$work/sdist-configure.log" 2>&1 ||
  { tail -40 "$work/sdist-configure.log"; exit 1; }
step "$(basename "$sdist") holds all $(wc -l < "$needed") source files and configures"

# One compile at most for the whole test: the wheel builds the project in setup.py's build folder
# (build-python/) or THDPACK_CMAKE_BUILD_DIR, and the `pip install .` below finds it built.
step "wheel (python -m build --wheel --no-isolation)"
(cd "$root" && "$work/wheel-venv/bin/python" -m build --wheel --no-isolation --outdir "$work/dist" \
  . > "$work/wheel.log" 2>&1) || { tail -40 "$work/wheel.log"; exit 1; }
wheel=$(ls "$work"/dist/thdpack-"$version"-*.whl)
"$work/wheel-venv/bin/python" -m zipfile -l "$wheel" > "$work/wheel-contents.txt"
for f in thdpack/__init__.py thdpack/py.typed thdpack/_thdpack.pyi thdpack/_bin/thdpack \
    thdpack/torch.py; do
  grep -q "^$f " "$work/wheel-contents.txt" || { echo "wheel lacks $f" >&2; exit 1; }
done
"$work/wheel-venv/bin/pip" install --no-index "$wheel" > "$work/pip-wheel.log" ||
  { cat "$work/pip-wheel.log"; exit 1; }
check_venv "$work/wheel-venv"

step "pip install --no-build-isolation . into a second fresh venv"
"$python" -m venv --system-site-packages "$work/pip-venv"
(cd "$root" && "$work/pip-venv/bin/pip" install --no-build-isolation --no-index . \
  > "$work/pip-source.log" 2>&1) || { tail -40 "$work/pip-source.log"; exit 1; }
check_venv "$work/pip-venv"
step "wheel and source installs work in fresh venvs"
