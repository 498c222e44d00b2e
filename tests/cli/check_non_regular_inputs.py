"""Every input flag of the thdpack CLI refuses what is not a regular file, naming it, and never blocks.

For each kind of non-regular file (a FIFO without a writer, the character device /dev/zero, a
directory, a Unix socket) and each input flag (--jsonl, --lengths, --dataset-config, --data-path
through its .idx and through its .bin), `thdpack pack` must exit 2 within a few seconds with one
line naming the path and what it is. A control run with regular files succeeds.

Usage: check_non_regular_inputs.py THDPACK WORKDIR
"""

import os
import shutil
import socket
import subprocess
import sys

THDPACK, WORK = sys.argv[1], sys.argv[2]


def run(args):
    return subprocess.run([THDPACK] + args + ["-C", "64", "--no-progress"], capture_output=True,
                          text=True, timeout=20)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    fifo = os.path.join(WORK, "fifo")
    os.mkfifo(fifo)
    directory = os.path.join(WORK, "folder")
    os.makedirs(directory)
    sock_path = os.path.join(WORK, "sock")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(sock_path)
    specials = {"a FIFO": fifo, "a character device": "/dev/zero", "a directory": directory,
                "a socket": sock_path}
    lengths = os.path.join(WORK, "lengths.csv")
    with open(lengths, "w") as f:
        f.write("3\n5\n")
    good = os.path.join(WORK, "good")
    assert subprocess.run([THDPACK, "convert", "--lengths", lengths, "--out", good,
                           "--no-progress"], capture_output=True).returncode == 0
    refused = 0
    for what, special in specials.items():
        flags = {"--jsonl": ["--jsonl", special], "--lengths": ["--lengths", special],
                 "--dataset-config": ["--dataset-config", special]}
        for companion in ["idx", "bin"]:
            prefix = os.path.join(WORK, "as_%s_%d" % (companion, refused))
            for ext in ["idx", "bin"]:
                target = special if ext == companion else good + "." + ext
                os.symlink(target, prefix + "." + ext)
            flags["--data-path (." + companion + ")"] = ["--data-path", prefix]
        for flag, args in flags.items():
            result = run(["pack"] + args)
            where = "%s as %s" % (what, flag)
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2, "%s: exit %d: %s" % (where, result.returncode,
                                                                result.stderr)
            assert len(lines) == 1, "%s: %s" % (where, result.stderr)
            assert "is %s" % what in lines[0] and "not a regular file" in lines[0], (
                "%s: %s" % (where, lines[0]))
            named = args[1] + "." if flag.startswith("--data-path") else args[1]
            assert named in lines[0], "%s: the message does not name %s: %s" % (
                where, named, lines[0])
            refused += 1
    control = run(["pack", "--lengths", lengths])
    assert control.returncode == 0, control.stderr
    sock.close()
    print("ok: %d inputs refused" % refused)


main()
