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
        sys.exit(f"thdpack: the CLI is not part of this installation ({path} is missing); "
                 "install the package with `pip install .` or build it with scripts/setup.sh")
    os.execv(path, [str(path), *sys.argv[1:]])


if __name__ == "__main__":
    main()
