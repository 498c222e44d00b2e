"""Builds thdpack's Python package through CMake (pyproject.toml has the metadata).

The extension module ``thdpack._thdpack`` and the ``thdpack`` CLI are built by the project's own
CMake for ``sys.executable`` (the Python that runs pip or build), so a venv, conda or any other
CPython gets a module of its own. The CLI lands in the package as ``thdpack/_bin/thdpack`` and the
``thdpack`` console script runs it.

Environment (all optional):
  THDPACK_WITH_MPI     ON / OFF (default: ON when an MPI C++ compiler wrapper is on PATH)
  THDPACK_ALLOW_STATIC_CXX_RUNTIME  1: keep a module that links libstdc++ statically (refused
                       otherwise: it crashes beside torch)
  THDPACK_BUILD_TYPE   CMake build type (default Release)
  CMAKE_GENERATOR      as for CMake (default Ninja when installed)
  CMAKE_ARGS           extra CMake arguments, split on spaces
  JOBS                 parallel build jobs (default: all cores)
  THDPACK_CMAKE_BUILD_DIR  a build folder of this source tree that CMake configured already (such
                       as scripts/setup.sh's build/, made for the same Python): the module and the
                       CLI are taken from it, built there if they are not, instead of compiling the
                       project once more in a new folder
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version():
    """The version in CMakeLists.txt's project() call: one version for C++, CLI and Python."""
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(thdpack\s+VERSION\s+([0-9.]+)", text)
    if not match:
        raise RuntimeError("no project(thdpack VERSION x.y.z) in CMakeLists.txt")
    return match.group(1)


def mpi_setting():
    choice = os.environ.get("THDPACK_WITH_MPI")
    if choice:
        return choice
    found = any(shutil.which(w) for w in ("mpicxx", "mpic++", "mpiCC"))
    return "ON" if found else "OFF"


def check_cxx_runtime_is_shared(module):
    """Refuses a module with the C++ runtime linked in statically (a compiler built to do that by
    default, for one). Such a module works alone but crashes inside iostreams in a process where
    another library (torch) has loaded the shared libstdc++: two copies of its locale state."""
    if not sys.platform.startswith("linux") or os.environ.get("THDPACK_ALLOW_STATIC_CXX_RUNTIME") == "1":
        return
    readelf = shutil.which("readelf")
    if readelf is None:
        return
    dynamic = subprocess.run([readelf, "-d", str(module)], capture_output=True, text=True).stdout
    if "NEEDED" in dynamic and "libstdc++" not in dynamic and "libc++" not in dynamic:
        raise RuntimeError(
            f"{module.name} links the C++ runtime statically (readelf -d shows no libstdc++), so it "
            "would crash beside torch, which loads the shared one. Build with a compiler that links "
            "it dynamically, e.g. CXX=/usr/bin/g++ CC=/usr/bin/gcc pip install "
            "--no-build-isolation . (set THDPACK_ALLOW_STATIC_CXX_RUNTIME=1 to keep the module).")


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


def configured_build_dir(folder):
    """The THDPACK_CMAKE_BUILD_DIR folder, checked to be a CMake build of this source tree."""
    build_dir = Path(folder).resolve()
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        raise RuntimeError(f"THDPACK_CMAKE_BUILD_DIR={folder} holds no CMakeCache.txt: configure it "
                           "first (bash scripts/setup.sh) or unset THDPACK_CMAKE_BUILD_DIR")
    home = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache.read_text(), re.MULTILINE)
    if not home or Path(home.group(1)).resolve() != ROOT:
        raise RuntimeError(f"THDPACK_CMAKE_BUILD_DIR={folder} is a build of "
                           f"{home.group(1) if home else 'another project'}, not of {ROOT}")
    if re.search(r"^BUILD_SHARED_LIBS:BOOL=(ON|TRUE|1)$", cache.read_text(), re.MULTILINE):
        raise RuntimeError(f"THDPACK_CMAKE_BUILD_DIR={folder} builds libthdpack as a shared "
                           "library, which the package would not carry: use a static build")
    return build_dir


class CMakeBuild(build_ext):
    """Configures and builds the CMake project, then copies the module and CLI into the package."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("thdpack needs CMake >= 3.22 to build (Debian: apt-get install cmake)")
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        if os.environ.get("THDPACK_CMAKE_BUILD_DIR"):
            build_dir = configured_build_dir(os.environ["THDPACK_CMAKE_BUILD_DIR"])
        else:
            build_dir = self.configure_new_build()
        jobs = os.environ.get("JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "-j", jobs, "--target", "_thdpack",
                        "thdpack"], check=True)

        built_package = build_dir / "python" / "thdpack"
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        modules = sorted(built_package.glob("_thdpack.*.so")) + sorted(
            built_package.glob("_thdpack.*.pyd"))
        if not modules:
            raise RuntimeError(f"CMake built no _thdpack module in {built_package}")
        if not modules[0].name.endswith(suffix):
            raise RuntimeError(f"{modules[0]} is not built for this Python (its modules end in "
                               f"{suffix}): configure the build for {sys.executable}")
        check_cxx_runtime_is_shared(modules[0])
        package_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(modules[0], self.get_ext_fullpath(ext.name))
        # The Parquet and Arrow readers, where the build found pyarrow's C++ libraries.
        for reader in built_package.glob("_thdpack_parquet*" + suffix):
            shutil.copy2(reader, package_dir / reader.name)
        bin_dir = package_dir / "_bin"
        bin_dir.mkdir(exist_ok=True)
        shutil.copy2(build_dir / "bin" / "thdpack", bin_dir / "thdpack")

    def configure_new_build(self):
        """Configures setup.py's own CMake folder (under build-python/) and returns it."""
        build_dir = Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        build_type = os.environ.get("THDPACK_BUILD_TYPE", "Release")
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DTHDPACK_WITH_MPI={mpi_setting()}",
            "-DTHDPACK_WITH_PYTHON=ON",
            "-DTHDPACK_BUILD_TESTS=OFF",
            "-DTHDPACK_BUILD_BENCH=OFF",
            "-DTHDPACK_WERROR=OFF",
            # The module and the CLI carry the library inside them: nothing else to ship.
            "-DBUILD_SHARED_LIBS=OFF",
        ]
        if "CMAKE_GENERATOR" not in os.environ and shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        return build_dir


setup(
    version=project_version(),
    ext_modules=[CMakeExtension("thdpack._thdpack")],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build tree stays out of the CMake build folder that scripts/setup.sh uses.
    options={"build": {"build_base": "build-python"}},
    zip_safe=False,
)
