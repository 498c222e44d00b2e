"""setup.py refuses an extension that links the C++ runtime statically (it would crash beside
torch's shared libstdc++) and accepts one that links it dynamically."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def runtime_check():
    """setup.py's check_cxx_runtime_is_shared, without running setup()."""
    source = (ROOT / "setup.py").read_text()
    start = source.index("def check_cxx_runtime_is_shared")
    end = source.index("class CMakeExtension")
    namespace = {}
    exec("import os, shutil, subprocess, sys\n" + source[start:end], namespace)
    return namespace["check_cxx_runtime_is_shared"]


def build_library(tmp_path, *flags):
    source = tmp_path / "uses_iostream.cpp"
    source.write_text("#include <iostream>\nvoid say() { std::cout << 1; }\n")
    library = tmp_path / f"lib{len(flags)}.so"
    subprocess.run(["g++", "-shared", "-fPIC", *flags, "-o", str(library), str(source)],
                   check=True)
    return library


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("g++") is None
                    or shutil.which("readelf") is None, reason="needs Linux, g++ and readelf")
def test_static_cxx_runtime_is_refused_and_shared_accepted(tmp_path, monkeypatch):
    monkeypatch.delenv("THDPACK_ALLOW_STATIC_CXX_RUNTIME", raising=False)
    check = runtime_check()
    shared = build_library(tmp_path)
    dynamic = subprocess.run(["readelf", "-d", str(shared)], capture_output=True, text=True).stdout
    if "libstdc++" not in dynamic:
        pytest.skip("this g++ links libstdc++ statically by default")
    check(shared)  # the shared runtime: accepted
    static = build_library(tmp_path, "-static-libstdc++")
    with pytest.raises(RuntimeError, match="CXX=/usr/bin/g\\+\\+"):
        check(static)
    monkeypatch.setenv("THDPACK_ALLOW_STATIC_CXX_RUNTIME", "0")  # only 1 keeps it
    with pytest.raises(RuntimeError, match="CXX=/usr/bin/g\\+\\+"):
        check(static)
    monkeypatch.setenv("THDPACK_ALLOW_STATIC_CXX_RUNTIME", "1")
    check(static)
