#!/usr/bin/python3
"""Rewrites the generated regions of README.md and docs/*.md from real runs.

A region is

    <!-- generated: COMMAND -->
    ...
    <!-- end generated -->

and becomes a ``console`` block holding ``$ COMMAND`` and what COMMAND prints on stdout, run from
the repository root with the built ``thdpack`` (``--bin``, default ``build/bin``) first on PATH.
The docs test (tests/docs/run_docs.py) runs every console block again and fails when a region is
out of date, timings aside. The benchmark tables between ``<!-- results:begin -->`` and
``<!-- results:end -->`` are written by bench/report.py (scripts/bench.sh), not here.

Usage: /usr/bin/python3 scripts/update_readme.py [--bin DIR] [FILE.md ...]
(default: README.md and docs/*.md). A command that fails stops the script with its status.
"""

import argparse
import glob
import os
import re
import subprocess
import sys

REGION = re.compile(
    r"(<!-- generated: (?P<command>.+?) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)


def run(command, root, bin_dir):
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(bin_dir) + os.pathsep + env.get("PATH", "")
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=root, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"'{command}' exited {p.returncode}")
    return p.stdout


def update(path, root, bin_dir):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count("<!-- generated:") != text.count("<!-- end generated -->"):
        raise SystemExit(f"{path}: a generated region lacks its '<!-- end generated -->'")

    def replace(m):
        out = run(m.group("command"), root, bin_dir).rstrip("\n")
        lines = "\n".join(l.rstrip() for l in out.split("\n"))
        return f"{m.group(1)}```console\n$ {m.group('command')}\n{lines}\n```\n{m.group(4)}"

    new = REGION.sub(replace, text)
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"updated {os.path.relpath(path, root)}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(root, "build", "bin"))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = args.files or [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "*.md")))
    for path in files:
        update(path, root, args.bin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
