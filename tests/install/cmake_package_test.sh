#!/usr/bin/env bash
# What a C++ user does with `cmake --install`: install thdpack to a fresh prefix, move the prefix
# (installs must be relocatable), then build and run an out-of-tree consumer once with
# find_package(thdpack) and once with pkg-config, compile every installed header on its own, and
# run the installed CLI. Fails on the first step that does not work.
#
#   bash tests/install/cmake_package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
step() { echo "[install] $*"; }

# Only what a plain `cmake --install` installs: the Python package is a component of its own that
# is installed only where asked (scripts/setup.sh asks, for Debian's Python).
step "cmake --install to a fresh prefix"
cmake --install "$build" --prefix "$work/staged" --component Unspecified > "$work/install.log"
outside=$(grep -v "^$work/staged/" "$build/install_manifest_Unspecified.txt" || true)
[ -z "$outside" ] || { echo "installed outside the prefix: $outside" >&2; exit 1; }
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
with_mpi=0
[ -f "$prefix/lib/libthdpack_mpi.a" ] && with_mpi=1
for f in bin/thdpack include/thdpack/thdpack.hpp include/thdpack/core/version.hpp \
    lib/libthdpack.a lib/cmake/thdpack/thdpackConfig.cmake \
    lib/cmake/thdpack/thdpackConfigVersion.cmake lib/cmake/thdpack/thdpackTargets.cmake \
    lib/pkgconfig/thdpack.pc; do
  [ -e "$prefix/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
done
if [ "$with_mpi" = 1 ]; then
  [ -e "$prefix/lib/pkgconfig/thdpack-mpi.pc" ] || { echo "missing thdpack-mpi.pc" >&2; exit 1; }
fi
# Every public header of the source tree is installed.
missing=$(cd "$root/include" && find thdpack -name '*.hpp' | while read -r h; do
  [ -e "$prefix/include/$h" ] || echo "$h"; done)
[ -z "$missing" ] || { echo "headers not installed: $missing" >&2; exit 1; }

step "find_package(thdpack) consumer"
cmake -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
grep -q "thdpack 0.*from $prefix/lib/cmake/thdpack" "$work/configure.log" ||
  { echo "find_package found another thdpack:"; grep thdpack "$work/configure.log"; exit 1; } >&2
cmake --build "$work/consumer" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/consumer/plan_and_pack"
if [ "$with_mpi" = 1 ]; then
  mpirun --oversubscribe -np 2 "$work/consumer/mpi_sum" < /dev/null
fi
# A version the package does not satisfy is refused.
if cmake -S "$here/consumer" -B "$work/too_new" -DCMAKE_PREFIX_PATH="$prefix" \
    -DTHDPACK_CONSUMER_VERSION=99.0 > "$work/too_new.log" 2>&1; then
  echo "find_package(thdpack 99.0) succeeded" >&2; exit 1
fi
grep -q 'compatible with requested version "99.0"' "$work/too_new.log" ||
  { echo "find_package(thdpack 99.0) failed for another reason:"; cat "$work/too_new.log"; exit 1; } >&2

step "pkg-config consumer"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(cd "$(pkg-config --variable=prefix thdpack)" && pwd)" = "$prefix" ] ||
  { echo "pkg-config resolves another prefix: $(pkg-config --variable=prefix thdpack)" >&2; exit 1; }
# shellcheck disable=SC2046
g++ -std=c++20 -O1 "$here/consumer/plan_and_pack.cpp" -o "$work/pc_plan_and_pack" \
  $(pkg-config --cflags --libs thdpack)
"$work/pc_plan_and_pack"
if [ "$with_mpi" = 1 ]; then
  # shellcheck disable=SC2046
  g++ -std=c++20 -O1 "$here/consumer/mpi_sum.cpp" -o "$work/pc_mpi_sum" \
    $(pkg-config --cflags --libs thdpack-mpi)
  mpirun --oversubscribe -np 2 "$work/pc_mpi_sum" < /dev/null
fi

step "every installed header compiles on its own"
mpi_flags=""
# MPI's own headers as system headers: their warnings are not thdpack's.
[ "$with_mpi" = 1 ] && mpi_flags=$(pkg-config --cflags-only-I mpi-cxx | sed 's/-I/-isystem /g')
(cd "$prefix/include" && find thdpack -name '*.hpp' | sort) > "$work/headers"
xargs -P 2 -I{} sh -c "printf '#include \"{}\"\n' | g++ -std=c++20 -fsyntax-only -Wall -Wextra \
  -Werror -I'$prefix/include' $mpi_flags -x c++ - || { echo 'not self-contained: {}'; exit 255; }" \
  < "$work/headers"
echo "[install] $(wc -l < "$work/headers") headers compile alone"

step "the installed CLI"
"$prefix/bin/thdpack" --version
"$prefix/bin/thdpack" plan --workload sft-8k --dp 2 --steps 1 --no-progress > "$work/plan.txt"
grep -q '^balanced' "$work/plan.txt" || { cat "$work/plan.txt"; exit 1; }
echo "[install] cmake package, pkg-config and CLI all work from a relocated prefix"
