#!/usr/bin/env bash
# Every public header, included alone by a C++17 translation unit, fails first with thdpack's one
# clear line ("thdpack needs C++20"), not with an error deep inside a header; and compiles under
# C++20.
#
#   bash tests/install/cxx_standard_test.sh CXX INCLUDE_DIR GENERATED_INCLUDE_DIR
set -euo pipefail
cxx=$1 include=$2 generated=$3
failures=0 headers=0
while IFS= read -r header; do
  name=${header#"$include"/}
  [ "$name" = thdpack/comm/mpi_communicator.hpp ] && continue  # needs <mpi.h>: the MPI build's test
  headers=$((headers + 1))
  first=$(echo "#include \"$name\"" | "$cxx" -std=c++17 -fsyntax-only -I "$include" -I "$generated" \
    -x c++ - 2>&1 | grep -m1 " error: " || true)
  case $first in
    *"thdpack needs C++20"*) ;;
    *) echo "$name under -std=c++17: first error is '$first'"; failures=$((failures + 1)) ;;
  esac
  if ! echo "#include \"$name\"" | "$cxx" -std=c++20 -fsyntax-only -I "$include" -I "$generated" \
      -x c++ - > /dev/null 2>&1; then
    echo "$name does not compile on its own under -std=c++20"; failures=$((failures + 1))
  fi
done < <(find "$include/thdpack" -name '*.hpp' | sort)
[ "$failures" -eq 0 ] || exit 1
echo "ok: $headers public headers refuse C++17 with one clear line and compile alone under C++20"
