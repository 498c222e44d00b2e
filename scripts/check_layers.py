#!/usr/bin/env python3
"""Checks that thdpack's domains depend on each other only downwards (README.md, Layout).

Every file in src/<domain>/ and include/thdpack/<domain>/ may include
- public headers "thdpack/<d>/..." and private headers "<d>/..." of its own domain or of a domain
  listed for it in ALLOWED below;
- no MPI, NCCL, CUDA or Python header, except the MPI backend (comm/mpi_communicator.*);
and no include climbs out of its folder ("../x.hpp"), and public headers include only public ones.

Exit status 0 when every include is allowed; otherwise 1, with one line per violation
(file:line: what is included and what is allowed).

    python3 scripts/check_layers.py [ROOT]
"""

import pathlib
import re
import sys

# Which domains each domain may use (besides itself): core at the bottom; packing and data on it
# (a pack file holds packs, so data may use packing); schedule and multimodal on those; moe and
# comm on core alone; pipeline on everything.
ALLOWED = {
    "core": set(),
    "packing": {"core"},
    "data": {"core", "packing"},
    "schedule": {"core", "packing", "data"},
    "multimodal": {"core", "packing", "data"},
    "moe": {"core"},
    "comm": {"core"},
    "pipeline": {"core", "packing", "data", "schedule", "multimodal", "moe", "comm"},
}

# Communication, GPU and Python headers: only the MPI backend may include mpi.h.
FOREIGN = re.compile(r"^(mpi\.h|mpi-ext\.h|nccl\.h|cuda.*|cub/.*|thrust/.*|pybind11/.*|Python\.h|"
                     r"torch/.*|ATen/.*|c10/.*)$")
MPI_BACKEND = {"comm/mpi_communicator.cpp", "comm/mpi_communicator.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def domain_of_include(name):
    """The domain an include names ("thdpack/packing/x.hpp" or "packing/x.hpp"), or None."""
    parts = name.split("/")
    if parts[0] == "thdpack" and len(parts) >= 3:
        return parts[1]
    if len(parts) >= 2 and parts[0] in ALLOWED:
        return parts[0]
    return None


def check_file(path, domain, relative, public):
    problems = []
    allowed = ALLOWED[domain] | {domain}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = INCLUDE.match(line)
        if not match:
            continue
        name = match.group(2)
        where = f"{path}:{number}"
        if FOREIGN.match(name) and not (name == "mpi.h" and relative in MPI_BACKEND):
            problems.append(f"{where}: {domain} includes <{name}>; only the MPI backend may "
                            "include a communication header, and no domain includes GPU or "
                            "Python headers")
            continue
        target = domain_of_include(name)
        if match.group(1) == '"' and name.startswith(".."):
            problems.append(f"{where}: '{name}' climbs out of its folder; include by domain")
        elif public and target is not None and not name.startswith("thdpack/"):
            problems.append(f"{where}: public header includes the private header '{name}'")
        elif name.startswith("thdpack/") and target is None and name != "thdpack/thdpack.hpp":
            problems.append(f"{where}: '{name}' is not under a domain folder")
        elif target is not None and target not in ALLOWED:
            problems.append(f"{where}: '{name}' names an unknown domain '{target}'")
        elif target is not None and target not in allowed:
            problems.append(f"{where}: {domain} includes '{name}' ({target}); {domain} may use "
                            f"{', '.join(sorted(allowed))}")
        elif name == "thdpack/thdpack.hpp":
            problems.append(f"{where}: the umbrella header is for users, not for the library")
    return problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    problems = []
    checked = 0
    for base in (root / "src", root / "include" / "thdpack"):
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".hpp", ".cpp", ".h", ".cu", ".cuh"):
                continue
            relative = path.relative_to(base).as_posix()
            domain = relative.split("/")[0]
            if domain == relative:  # a file directly in src/ or include/thdpack/
                if relative != "thdpack.hpp":
                    problems.append(f"{path}: not in a domain folder ({', '.join(ALLOWED)})")
                continue
            if domain not in ALLOWED:
                problems.append(f"{path}: unknown domain folder '{domain}'")
                continue
            problems += check_file(path, domain, relative, public=base.name == "thdpack")
            checked += 1
    for problem in problems:
        print(problem)
    print(f"check_layers: {checked} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
