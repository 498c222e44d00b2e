#!/usr/bin/python3
"""Runs the fenced code blocks of README.md and docs/*.md, so that the docs cannot go stale.

How a block is treated depends on its info string (the words after the opening fence):

- ``illustrative`` anywhere in it: skipped. This is the one marker for a block that cannot run as
  written (it needs several MPI ranks, a GPU, Megatron, the network, an installation, or it is a
  fragment or a picture of a format). Every other block runs.
- ``console``: lines starting with ``$ `` are commands (a trailing ``\\`` continues one), the lines
  after a command up to the next ``$ `` are its expected output. Commands run in bash with the
  built ``thdpack`` first on PATH; a command that exits non-zero fails the block unless the
  expected output ends with ``[exit N]`` naming that status.
- ``sh`` / ``bash``: the block runs as one ``bash -e -o pipefail`` script. When a ``text`` block
  follows it (only blank lines between), that block is the expected output.
- ``text`` right after a ``sh``/``bash``/``cpp`` block: its expected output (see above). Any other
  ``text`` block must be marked illustrative.
- ``python``: runs with the interpreter given by ``--python`` (default /usr/bin/python3; CTest
  passes the project's venv when it exists) and the build's PYTHONPATH.
- ``cpp``: compiled and linked as a complete program against the build tree's headers and
  libraries (with MPI's compiler wrapper when it includes ``mpi_communicator.hpp``). When a
  ``text`` block follows it (only blank lines between), the program runs too and that block is
  its expected output; otherwise it is not run.
- ``json``: parsed.
- anything else (no info string, ``cmake``, ...): an error; give the block a language above or
  mark it illustrative.

The blocks of one file run in order in one scratch directory, which holds links to every
top-level entry of the repository (so ``tests/...``, ``examples/...`` resolve) and receives what
the commands write. Expected output is compared after these normalisations, and no others:

- durations are volatile: ``<number> ms`` / ``<number> s`` (``\\d+(\\.\\d+)? ?(ms|s)\\b``) and
  ``<number>s elapsed``;
- in tables, the cells of a column whose header ends in `` ms`` (``plan ms``, ``wall ms``) are
  volatile;
- runs of spaces are one space and runs of ``-`` in table rules are one rule (column widths
  follow the volatile cells);
- progress-bar lines on stderr are dropped.

README regions between ``<!-- generated:NAME -->`` and ``<!-- end generated -->`` are written by
scripts/update_readme.py from real runs; since they are ``console`` blocks, this test fails when
one is out of date.

Usage: run_docs.py --repo ROOT --bin DIR --pythonpath P [--python EXE] [--include DIR ...] [--lib A ...]
                   [--mpi-lib A] [--cxx COMPILER] FILE.md ...
Prints one line ``FILE:LINE: what went wrong`` per failing block and exits 1 if any failed.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^(\s*)(```+)(.*)$")
DURATION = re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b|\b\d+(\.\d+)?s elapsed")
PROGRESS = re.compile(r"\[[=> ]+\] \d+/\d+ .*elapsed")
EXIT_MARK = re.compile(r"^\[exit (\d+)\]$")
COMMAND_TIMEOUT_S = 120


def run(command, cwd=None, env=None, timeout=COMMAND_TIMEOUT_S):
    """Runs `command` in a session of its own, merging stderr into stdout; on a timeout the whole
    process group is killed (a block's children must not outlive it)."""
    p = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out


class Block:
    def __init__(self, path, line, info, lines):
        self.path = path
        self.line = line  # 1-based line of the opening fence
        words = info.split()
        self.lang = words[0] if words else ""
        self.flags = words[1:]
        self.lines = lines

    @property
    def text(self):
        return "".join(l + "\n" for l in self.lines)

    @property
    def illustrative(self):
        return "illustrative" in self.flags or self.lang == "illustrative"

    def where(self):
        return f"{self.path}:{self.line}"


def read_blocks(path, display):
    blocks = []
    gaps = []  # whether only blank lines separate block i from block i-1
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    last_end = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + fence + r"\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{display}:{start + 1}: code block is never closed")
        adjacent = last_end is not None and all(not l.strip() for l in lines[last_end + 1:start])
        blocks.append(Block(display, start + 1, info, body))
        gaps.append(adjacent)
        last_end = i
        i += 1
    return blocks, gaps


def mask_ms_columns(lines):
    """Blanks the cells of table columns whose header ends in ' ms' (timings)."""
    out = []
    spans = []
    for line in lines:
        if not line.strip():
            spans = []
        elif re.search(r"\S ms(\s|$)", line) and "  " in line:
            # A table header: cells are separated by two or more spaces, right-aligned.
            spans = []
            prev_end = 0
            for m in re.finditer(r"\S+(?: \S+)*", line):
                unit = re.search(r"(?<=\S )ms\b", m.group(0))
                if unit:  # the column's cells end where its header's "ms" ends
                    spans.append((prev_end, m.start() + unit.end()))
                prev_end = m.end()
            out.append(line)
            continue
        for begin, end in reversed(spans):
            if len(line) >= end:
                line = line[:begin] + " <ms>" + line[end:]
        out.append(line)
    return out


def normalise(text):
    lines = [l for l in text.split("\n") if not PROGRESS.search(l)]
    lines = mask_ms_columns(lines)
    result = []
    for line in lines:
        line = DURATION.sub("<time>", line)
        line = re.sub(r"-{3,}", "---", line)
        line = re.sub(r"\s+", " ", line).strip()
        result.append(line)
    while result and not result[-1]:
        result.pop()
    while result and not result[0]:
        result.pop(0)
    return result


def first_difference(expected, actual):
    e, a = normalise(expected), normalise(actual)
    for n in range(max(len(e), len(a))):
        le = e[n] if n < len(e) else "<end of output>"
        la = a[n] if n < len(a) else "<end of output>"
        if le != la:
            return f"output line {n + 1} differs: docs say '{le}', the program prints '{la}'"
    return None


class Runner:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        env = dict(os.environ)
        env["PATH"] = args.bin + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = args.pythonpath
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        env["COLUMNS"] = "200"
        self.env = env
        self.interpreter = args.python

    def shell(self, script, timeout=COMMAND_TIMEOUT_S):
        return run(["bash", "-e", "-o", "pipefail", "-c", script], self.workdir, self.env, timeout)

    def console(self, block):
        """Returns an error message or None."""
        entries = []  # (command, expected output lines)
        lines = list(block.lines)
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                if lines[i].strip():
                    return f"console block: line '{lines[i]}' is neither a '$ ' command nor output"
                i += 1
                continue
            command = lines[i][2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            output = []
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            entries.append((command, output))
        for command, output in entries:
            expect_rc = 0
            trimmed = [l for l in output]
            while trimmed and not trimmed[-1].strip():
                trimmed.pop()
            if trimmed and EXIT_MARK.match(trimmed[-1].strip()):
                expect_rc = int(EXIT_MARK.match(trimmed[-1].strip()).group(1))
                trimmed.pop()
            rc, actual = self.shell(command)
            if rc != expect_rc:
                tail = actual.strip().splitlines()[-1:] or [""]
                return f"'{command}' exited {rc}, the docs say {expect_rc}: {tail[0]}"
            diff = first_difference("\n".join(trimmed), actual)
            if diff:
                return f"'{command}': {diff}"
        return None

    def script(self, block, expected):
        rc, actual = self.shell(block.text)
        if rc != 0:
            tail = actual.strip().splitlines()[-1:] or [""]
            return f"{block.lang} block exited {rc}: {tail[0]}"
        if expected is not None:
            return first_difference(expected.text, actual)
        return None

    def python(self, block):
        rc, out = run([self.interpreter, "-c", block.text], self.workdir, self.env)
        if rc != 0:
            tail = out.strip().splitlines()[-1:] or [""]
            return f"python block exited {rc}: {tail[0]}"
        return None

    def cpp(self, block, index, expected=None):
        source = os.path.join(self.workdir, f"block_{index}.cpp")
        with open(source, "w", encoding="utf-8") as f:
            f.write(block.text)
        uses_mpi = "mpi_communicator.hpp" in block.text
        compiler = "mpicxx" if uses_mpi else self.args.cxx
        command = [compiler, "-std=c++20", "-O0", source, "-o", source[:-4]]
        for d in self.args.include:
            command += ["-I", d]
        if uses_mpi:
            command += ["-DOMPI_SKIP_MPICXX", "-DMPICH_SKIP_MPICXX", self.args.mpi_lib]
        command += self.args.lib + ["-lpthread"]
        rc, out = run(command)
        if rc != 0:
            errors = [l for l in out.splitlines() if "error" in l] or out.splitlines()
            first = errors[0] if errors else ""
            m = re.match(r".*block_\d+\.cpp:(\d+):(\d+): (.*)", first)
            if m:
                return f"C++ block line {m.group(1)} does not compile: {m.group(3)}"
            return f"C++ block does not compile or link: {first}"
        if expected is None:
            return None
        rc, actual = run([source[:-4]], self.workdir, self.env)
        if rc != 0:
            tail = actual.strip().splitlines()[-1:] or [""]
            return f"C++ program exited {rc}: {tail[0]}"
        return first_difference(expected.text, actual)


def check_file(runner, path, display):
    blocks, adjacent = read_blocks(path, display)
    failures = []
    ran = skipped = 0
    for n, block in enumerate(blocks):
        if block.illustrative:
            skipped += 1
            continue
        follows_command = (n > 0 and adjacent[n] and blocks[n - 1].lang in ("sh", "bash", "cpp")
                           and not blocks[n - 1].illustrative)
        if block.lang == "text":
            if not follows_command:
                failures.append(f"{block.where()}: a text block that is not the output of the "
                                f"sh block before it; mark it illustrative")
            continue  # checked with the command block
        expected = None
        if n + 1 < len(blocks) and adjacent[n + 1] and blocks[n + 1].lang == "text" \
                and not blocks[n + 1].illustrative:
            expected = blocks[n + 1]
        try:
            if block.lang == "console":
                error = runner.console(block)
            elif block.lang in ("sh", "bash"):
                error = runner.script(block, expected)
            elif block.lang == "python":
                error = runner.python(block)
            elif block.lang == "cpp":
                error = runner.cpp(block, n, expected)
            elif block.lang == "json":
                try:
                    json.loads(block.text)
                    error = None
                except json.JSONDecodeError as e:
                    error = f"json block does not parse: {e}"
            else:
                error = (f"block of language '{block.lang or '(none)'}' cannot be run; give it "
                         f"console, sh, python, cpp, json or text, or mark it illustrative")
        except subprocess.TimeoutExpired:
            error = f"{block.lang} block ran over {COMMAND_TIMEOUT_S} s"
        ran += 1
        if error:
            failures.append(f"{block.where()}: {error}")
    return failures, ran, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--bin", required=True, help="folder holding the built thdpack")
    parser.add_argument("--pythonpath", default="")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--include", action="append", default=[])
    parser.add_argument("--lib", action="append", default=[])
    parser.add_argument("--mpi-lib", default="")
    parser.add_argument("--cxx", default="g++", help="C++ compiler of blocks without MPI")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    failures = []
    for path in args.files:
        full = path if os.path.isabs(path) else os.path.join(args.repo, path)
        display = os.path.relpath(full, args.repo)
        workdir = tempfile.mkdtemp(prefix="thdpack_docs_")
        try:
            for entry in os.listdir(args.repo):
                if entry not in ("build", ".git"):
                    os.symlink(os.path.join(os.path.abspath(args.repo), entry),
                               os.path.join(workdir, entry))
            found, ran, skipped = check_file(Runner(args, workdir), full, display)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"{display}: {ran} blocks run, {skipped} illustrative, {len(found)} failed")
        failures += found
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
