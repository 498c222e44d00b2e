"""Every writing command of the thdpack CLI refuses an output that is one of its inputs.

For each input kind (JSONL, lengths file, mock config file, Megatron indexed dataset), each way of
naming the same file again (the same path, another spelling of it, a symbolic link, a hard link, the
companion .idx of an indexed prefix) and each writer (convert --out, pack -o, pack --materialize,
plan --plan-out, pack --report, plan --report), the command must exit 2 with one line saying which input the output is, leave
every input byte-identical and leave no temporary file behind. A control run per writer and input
with a fresh output must succeed, so the check cannot pass by failing everything. A report naming another output of the same command
(pack -o, pack --materialize, plan --plan-out) is refused too, leaving that file as it was.

Usage: check_inputs_intact.py THDPACK WORKDIR
"""

import hashlib
import os
import shutil
import subprocess
import sys

THDPACK, WORK = sys.argv[1], sys.argv[2]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(args):
    return subprocess.run([THDPACK] + args + ["--no-progress"], capture_output=True, text=True)


def make_inputs(folder):
    """Input files named *.bin, so that a PREFIX writer's PREFIX.bin can be one of them."""
    jsonl = os.path.join(folder, "j.bin")
    with open(jsonl, "w") as f:
        f.write('{"input_ids":[1,2,3]}\n{"input_ids":[4,5]}\n{"input_ids":[6]}\n')
    lengths = os.path.join(folder, "l.bin")
    with open(lengths, "w") as f:
        f.write("3\n2\n1\n4\n")
    config = os.path.join(folder, "c.bin")
    with open(config, "w") as f:
        f.write('{"mode":"distribution","type":"uniform","min_seq_len":1,"max_seq_len":8,'
                '"size":6}\n')
    prefix = os.path.join(folder, "d")
    result = run(["convert", "--lengths", lengths, "--out", prefix])
    assert result.returncode == 0, result.stderr
    return {
        "jsonl": (["--jsonl", jsonl], [jsonl]),
        "lengths": (["--lengths", lengths], [lengths]),
        "config": (["--dataset-config", config], [config]),
        "indexed": (["--data-path", prefix], [prefix + ".bin", prefix + ".idx"]),
    }


def aliases(folder, files):
    """(spelling, path) pairs naming one of `files` again; every path ends in .bin or .idx."""
    target = files[0]
    sub = os.path.join(folder, "sub")
    os.makedirs(sub, exist_ok=True)
    link = os.path.join(folder, "link" + target[-4:])
    os.symlink(os.path.basename(target), link)
    hard = os.path.join(folder, "hard" + target[-4:])
    os.link(target, hard)
    out = [("same path", target),
           ("other spelling", os.path.join(sub, "..", ".", os.path.basename(target))),
           ("symbolic link", link),
           ("hard link", hard)]
    if len(files) > 1:
        out.append(("companion", files[1]))
    return out


def writers(source_args, output):
    """(writer, argv) writing `output` (a file path ending in .bin or .idx)."""
    prefix = output[:-4]
    fresh = os.path.join(WORK, "fresh.thdpacks")
    return [
        ("convert --out", ["convert"] + source_args + ["--out", prefix]),
        ("pack -o", ["pack"] + source_args + ["-C", "16", "-o", output]),
        ("pack --materialize", ["pack"] + source_args + ["-C", "16", "-o", fresh,
                                                         "--materialize", prefix]),
        ("plan --plan-out", ["plan"] + source_args + ["--dp", "1", "--global-batch", "2", "--steps", "1",
                                                      "--plan-out", output]),
        ("pack --report", ["pack"] + source_args + ["-C", "16", "--report", output]),
        ("plan --report", ["plan"] + source_args + ["--dp", "1", "--global-batch", "2", "--steps", "1",
                                                    "--report", output]),
    ]


def check_report_onto_outputs(source_args, folder):
    """--report naming the command's other output (again or through a link) is refused."""
    existing = os.path.join(folder, "existing.bin")
    with open(existing, "w") as f:
        f.write("kept\n")
    link = os.path.join(folder, "existing-link.bin")
    os.symlink("existing.bin", link)
    checked = 0
    for report in (existing, link):
        for writer, argv in [
                ("pack -o", ["pack"] + source_args + ["-C", "16", "-o", existing,
                                                      "--report", report]),
                ("pack --materialize", ["pack"] + source_args + [
                    "-C", "16", "-o", os.path.join(folder, "m.thdpacks"),
                    "--materialize", existing[:-4], "--report", report]),
                ("plan --plan-out", ["plan"] + source_args + [
                    "--dp", "1", "--global-batch", "2", "--steps", "1", "--plan-out", existing,
                    "--report", report])]:
            result = run(argv)
            where = "--report %s onto %s" % (report, writer)
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2, "%s: exit %d\n%s" % (
                where, result.returncode, result.stderr)
            assert len(lines) == 1 and "is the same file as" in lines[0], (
                "%s: %s" % (where, result.stderr))
            with open(existing) as f:
                assert f.read() == "kept\n", "%s: %s changed" % (where, existing)
            no_temporaries(folder)
            checked += 1
    os.remove(link)
    os.remove(existing)
    return checked


def no_temporaries(folder):
    left = [name for name in os.listdir(folder) if ".tmp." in name]
    assert not left, "temporary files left behind: %s" % left


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    cases = controls = 0
    for kind in ["jsonl", "lengths", "config", "indexed"]:
        folder = os.path.join(WORK, kind)
        os.makedirs(folder)
        inputs = make_inputs(folder)
        source_args, files = inputs[kind]
        every_input = [p for _, paths in inputs.values() for p in paths]
        before = {p: digest(p) for p in every_input}
        for spelling, alias in aliases(folder, files):
            for writer, argv in writers(source_args, alias):
                if writer in ("convert --out", "pack --materialize") and not alias.endswith(
                        (".bin", ".idx")):
                    continue
                result = run(argv)
                where = "%s input, %s, %s" % (kind, spelling, writer)
                lines = result.stderr.strip().splitlines()
                assert result.returncode == 2, "%s: exit %d\n%s" % (
                    where, result.returncode, result.stderr)
                assert len(lines) == 1 and "is the same file as the input" in lines[0], (
                    "%s: %s" % (where, result.stderr))
                for p in every_input:
                    assert digest(p) == before[p], "%s: %s changed" % (where, p)
                no_temporaries(folder)
                cases += 1
        # Controls: the same commands onto fresh outputs succeed.
        for writer, argv in writers(source_args, os.path.join(folder, "new%d.bin" % controls)):
            result = run(argv)
            assert result.returncode == 0, "%s input, control %s: %s" % (
                kind, writer, result.stderr)
            no_temporaries(folder)
            controls += 1
        cases += check_report_onto_outputs(source_args, folder)
    print("ok: %d refused outputs, %d controls" % (cases, controls))


main()
