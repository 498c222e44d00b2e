#!/usr/bin/env bash
# Creates .venv (Debian's /usr/bin/python3, the interpreter the extension is built for) with the
# packages pinned in python/constraints.txt: torch from PyPI, transformers, trl, datasets, pyarrow,
# torchdata, verl, megatron-bridge, mpi4py, numpy, pytest and what they need. The Python tests
# (CTest's python_tests_*, the examples and the step benchmark's smoke run) use .venv/bin/python
# when it exists, with the build's extension on PYTHONPATH (docs/install.md).
#
#   bash scripts/python_env.sh          # create or bring up to date; quick when nothing changed
#   VENV=/path/to/venv bash scripts/python_env.sh
#
# Needs PyPI (pip's cache is used and kept) and Debian's python3-venv and libopenmpi-dev
# (scripts/setup.sh --tests installs both): mpi4py is compiled against Debian's Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
constraints=python/constraints.txt
stamp="$VENV/.thdpack-constraints.sha256"
want=$(sha256sum "$constraints" | cut -d' ' -f1)

if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "[python_env] $VENV is up to date with $constraints"
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv "$VENV"
fi
# --no-deps: the file is the whole set, verl included without the dependencies it declares but
# does not need for what thdpack uses (see the file's header). mpi4py is compiled from source
# once; pip 23.0 (Debian 12's) reads the wheel it built back from its cache only with a feature
# flag that later pips do by default and no longer accept.
cached_builds=()
if "$VENV/bin/python" -c 'import pip, sys
sys.exit(tuple(int(x) for x in pip.__version__.split(".")[:2]) >= (23, 1))'; then
  cached_builds=(--use-feature=no-binary-enable-wheel-cache)
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -q \
  --no-deps --no-binary mpi4py "${cached_builds[@]}" -r "$constraints"
"$VENV/bin/python" - <<'PY'
import numpy, torch, transformers, trl, datasets, pyarrow, torchdata, mpi4py.MPI, pytest
import verl.utils.seqlen_balancing
import importlib.util, os  # megatron.bridge itself needs megatron-core: only its files are checked
bridge = importlib.util.find_spec("megatron.bridge").submodule_search_locations[0]
assert os.path.isfile(os.path.join(bridge, "data", "datasets", "packing_utils.py")), bridge
assert int(numpy.__version__.split(".")[0]) < 2, "numpy 2 breaks the pybind11 2.10 extension"
print(f"[python_env] torch {torch.__version__}, transformers {transformers.__version__}, "
      f"trl {trl.__version__}, numpy {numpy.__version__}")
PY
echo "$want" > "$stamp"
echo "[python_env] ready: $VENV/bin/python"
