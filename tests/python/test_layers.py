"""scripts/check_layers.py: passes on the tree and catches each kind of violation it exists for."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_layers.py"


def run_check(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)


def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_tree_follows_the_layers():
    result = run_check(ROOT)
    assert result.returncode == 0, result.stdout
    assert ", 0 problems" in result.stdout


def test_allowed_includes_pass(tmp_path):
    write(tmp_path, "src/data/pack_file.cpp",
          '#include "thdpack/packing/packed_batch.hpp"\n#include "core/counter_rng.hpp"\n')
    write(tmp_path, "src/comm/mpi_communicator.cpp", "#include <mpi.h>\n")
    write(tmp_path, "include/thdpack/pipeline/pipeline.hpp",
          '#include "thdpack/comm/communicator.hpp"\n#include "thdpack/schedule/scheduler.hpp"\n')
    write(tmp_path, "include/thdpack/thdpack.hpp", '#include "thdpack/core/errors.hpp"\n')
    result = run_check(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "3 files, 0 problems" in result.stdout


def test_each_kind_of_violation_is_reported(tmp_path):
    write(tmp_path, "src/packing/packer.cpp", '#include "thdpack/data/pack_file.hpp"\n')
    write(tmp_path, "src/core/topology.cpp", '#include "schedule/step_bounds.hpp"\n')
    write(tmp_path, "src/schedule/plan.cpp", "#include <mpi.h>\n")
    write(tmp_path, "src/pipeline/x.cpp", "#include <pybind11/pybind11.h>\n")
    write(tmp_path, "src/moe/y.cpp", '#include "thdpack/thdpack.hpp"\n')
    write(tmp_path, "src/loose.cpp", "int x;\n")
    write(tmp_path, "include/thdpack/flat.hpp", "#pragma once\n")
    write(tmp_path, "src/moe/z.cpp", '#include "thdpack/flat.hpp"\n')
    write(tmp_path, "src/schedule/up.cpp", '#include "../pipeline/pack_segments.hpp"\n')
    write(tmp_path, "include/thdpack/data/leak.hpp", '#include "data/readers.hpp"\n')
    write(tmp_path, "src/packing/gpu.cpp", "#include <cuda/std/span>\n")
    result = run_check(tmp_path)
    assert result.returncode == 1
    out = result.stdout
    assert "packer.cpp:1: packing includes 'thdpack/data/pack_file.hpp' (data)" in out
    assert "topology.cpp:1: core includes 'schedule/step_bounds.hpp' (schedule)" in out
    assert "plan.cpp:1: schedule includes <mpi.h>" in out
    assert "x.cpp:1: pipeline includes <pybind11/pybind11.h>" in out
    assert "y.cpp:1: the umbrella header is for users" in out
    assert "loose.cpp: not in a domain folder" in out
    assert "flat.hpp: not in a domain folder" in out
    assert "z.cpp:1: 'thdpack/flat.hpp' is not under a domain folder" in out
    assert "up.cpp:1: '../pipeline/pack_segments.hpp' climbs out of its folder" in out
    assert "leak.hpp:1: public header includes the private header 'data/readers.hpp'" in out
    assert "gpu.cpp:1: packing includes <cuda/std/span>" in out
    assert ", 11 problems" in out
