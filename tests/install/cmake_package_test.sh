#!/usr/bin/env bash
# What a C++ user does with `cmake --install`: install thdpack to a fresh prefix, move the prefix
# (installs must be relocatable), then build and run an out-of-tree consumer once with
# find_package(thdpack) and once with pkg-config, compile every installed header on its own, and
# run the installed CLI. Fails on the first step that does not work.
#
#   bash tests/install/cmake_package_test.sh BUILD_DIR WITH_MPI(ON|OFF)
set -euo pipefail
build=$(cd "$1" && pwd)
case "${2:-}" in
  ON) with_mpi=1 ;;
  OFF) with_mpi=0 ;;
  *) echo "usage: $0 BUILD_DIR ON|OFF (was thdpack built with MPI)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(sed -n 's/^project(thdpack VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
step() { echo "[install] $*"; }

# A plain `cmake --install`: everything under the prefix, the Python package left out (it is the
# component "python", installed only where asked, as scripts/setup.sh does for Debian's Python).
step "cmake --install to a fresh prefix"
cmake --install "$build" --prefix "$work/staged" > "$work/install.log"
installed=$(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$work/install.log")
outside=$(echo "$installed" | grep -v "^$work/staged/" || true)
[ -z "$outside" ] || { echo "installed outside the prefix: $outside" >&2; exit 1; }
python_files=$(echo "$installed" | grep -E '\.py$|_thdpack' || true)
[ -z "$python_files" ] || { echo "a plain install installed Python files: $python_files" >&2; exit 1; }
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
for f in bin/thdpack include/thdpack/thdpack.hpp include/thdpack/core/version.hpp \
    lib/libthdpack.a lib/cmake/thdpack/thdpackConfig.cmake \
    lib/cmake/thdpack/thdpackConfigVersion.cmake lib/cmake/thdpack/thdpackTargets.cmake \
    lib/pkgconfig/thdpack.pc; do
  [ -e "$prefix/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
done
if [ "$with_mpi" = 1 ]; then
  for f in lib/libthdpack_mpi.a lib/pkgconfig/thdpack-mpi.pc lib/cmake/thdpack/thdpackMpiTargets.cmake \
      include/thdpack/comm/mpi_communicator.hpp; do
    [ -e "$prefix/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
  done
fi
# Every public header of the source tree is installed (the MPI backend's only with MPI).
missing=$(cd "$root/include" && find thdpack -name '*.hpp' | while read -r h; do
  [ "$with_mpi" = 0 ] && [ "$h" = thdpack/comm/mpi_communicator.hpp ] && continue
  [ -e "$prefix/include/$h" ] || echo "$h"; done)
[ -z "$missing" ] || { echo "headers not installed: $missing" >&2; exit 1; }

step "find_package(thdpack) consumer"
cmake -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
grep -q "thdpack $version from $prefix/lib/cmake/thdpack" "$work/configure.log" ||
  { echo "find_package found another thdpack:"; grep thdpack "$work/configure.log"; exit 1; } >&2
cmake --build "$work/consumer" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/consumer/plan_and_pack"
if [ "$with_mpi" = 1 ]; then
  mpirun --oversubscribe -np 2 "$work/consumer/mpi_sum" < /dev/null
fi
if [ "$with_mpi" = 1 ]; then
  grep -q "thdpack::mpi available" "$work/configure.log" || { echo "no thdpack::mpi" >&2; exit 1; }
  # Where MPI cannot be found, thdpack::thdpack still works and thdpack::mpi is absent.
  cmake -S "$here/consumer" -B "$work/no_mpi" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON > "$work/no_mpi.log" 2>&1 ||
    { echo "find_package(thdpack) needs MPI:"; cat "$work/no_mpi.log"; exit 1; } >&2
  grep -q "thdpack::mpi not available" "$work/no_mpi.log" ||
    { echo "thdpack::mpi without MPI:"; cat "$work/no_mpi.log"; exit 1; } >&2
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
# Every directory the .pc files name resolves into this prefix: a wrong one would fall back to
# another installation in the compiler's default paths (/usr/local) and still build.
for var in prefix includedir libdir; do
  dir=$(pkg-config --variable=$var thdpack)
  resolved=$(cd "$dir" 2>/dev/null && pwd || echo "$dir (missing)")
  case "$resolved" in
    "$prefix" | "$prefix"/*) ;;
    *) echo "pkg-config $var resolves outside $prefix: $resolved" >&2; exit 1 ;;
  esac
done
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
check_header() {  # header: compiles alone, with thdpack's warnings as errors
  printf '#include "%s"\n' "$1" | g++ -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Werror \
    -I"$PREFIX_INCLUDE" $MPI_FLAGS -x c++ - || { echo "not self-contained: $1"; exit 255; }
}
export -f check_header
PREFIX_INCLUDE=$prefix/include MPI_FLAGS=$mpi_flags xargs -P 2 -I{} bash -c 'check_header "$1"' _ {} \
  < "$work/headers"
echo "[install] $(wc -l < "$work/headers") headers compile alone"

step "the installed CLI"
"$prefix/bin/thdpack" --version
"$prefix/bin/thdpack" plan --workload sft-8k --dp 2 --steps 1 --no-progress > "$work/plan.txt"
grep -q '^balanced' "$work/plan.txt" || { cat "$work/plan.txt"; exit 1; }
echo "[install] cmake package, pkg-config and CLI all work from a relocated prefix"
