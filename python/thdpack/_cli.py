"""The ``thdpack`` command of a pip-installed thdpack: runs the CLI shipped inside the package."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def executable() -> Path:
    """Path of the thdpack executable bundled with this package (``thdpack/_bin/thdpack``)."""
    return Path(__file__).resolve().parent / "_bin" / "thdpack"


def main() -> None:
    path = executable()
    if not os.access(path, os.X_OK):
        problem = "is not executable" if path.exists() else "is missing"
        sys.exit(f"thdpack: the CLI is not part of this installation ({path} {problem}); "
                 "install the package with `pip install .` or build it with scripts/setup.sh")
    # argv[0] "thdpack", so that usage lines name the command the user typed.
    os.execv(path, ["thdpack", *sys.argv[1:]])


if __name__ == "__main__":
    main()
