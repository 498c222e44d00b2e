"""Every numeric and path flag of every subcommand, given a bad value, ends in exit 2 and one line
naming the flag; parse errors, a mistyped subcommand and values that only fail once the data is
known (--limit past the end, --model with coefficients, an overflowing capacity) likewise.

The table must cover every INT/UINT/FLOAT option each subcommand's --help lists, so a new numeric
flag without a check fails here.

Usage: check_flag_values.py THDPACK WORKDIR"""

import os
import re
import subprocess
import sys

THDPACK, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
LENGTHS = os.path.join(WORK, "three.csv")
with open(LENGTHS, "w") as f:
    f.write("5\n7\n9\n")
HUGE = os.path.join(WORK, "huge.csv")
with open(HUGE, "w") as f:
    f.write("5\n9223372036854775807\n")

# Values each kind of flag refuses (the kinds are those of tools/thdpack/flags/flag_values.hpp).
BAD = {
    "positive": ["0", "-1", "nan", "1e30", "", "abc", "1.5", "99999999999999999999"],
    "non_negative": ["-1", "nan", "1e30", "", "abc", "1.5", "99999999999999999999"],
    "positive_number": ["0", "-1", "nan", "inf", "1e30", "", "abc"],
    "non_negative_number": ["-1", "nan", "-inf", "1e30", "", "abc"],
    "fraction": ["-1", "nan", "1.5", "1e30", "", "abc"],
    "text": [""],
    "integer": ["abc", "1.5", "", "1e30", "99999999999999999999"],
}

WORKLOAD = {"--workload": "text", "--dataset-config": "text", "--lengths": "text",
            "--jsonl": "text", "--data-path": "text", "--seq-length": "positive",
            "--parquet": "text", "--tokens-column": "text", "--loss-mask-column": "text",
            "--labels-column": "text", "--hf-dataset": "text"}
LAYOUT = {"--tp": "positive", "--cp": "positive", "--dp": "positive", "--pp": "positive",
          "--ep": "positive", "--vpp": "positive", "--vpp-group": "non_negative",
          "--order": "text"}
JOB = {**WORKLOAD, **LAYOUT, "--max-seqlen-per-dp-cp-rank": "positive",
       "--global-batch": "positive", "--model": "text", "--cost-linear": "non_negative_number",
       "--cost-quadratic": "non_negative_number", "--oversize": "text",
       "--sample-order": "text", "--thd-max-packed-sequences": "non_negative"}
FLAGS = {
    "plan": {**JOB, "--steps": "positive", "--scheduler": "text",
             "--gpu-tflops": "positive_number", "--plan-out": "text", "--report": "text",
             "--report-step": "non_negative", "--cp-link-gbps": "non_negative_number",
             "--cp-step-overhead-us": "non_negative_number", "--min-cp": "positive",
             "--tail-align": "text", "--tail-multiple": "non_negative", "--tail-policy": "text",
             "--fixed-cu-seqlens-entries": "non_negative"},
    "run": {**JOB, "--steps": "positive", "--scheduler": "text", "--reading": "text",
            "--cp-mode": "text", "--timeout": "positive_number", "--report": "text",
            "--tail-align": "text", "--tail-multiple": "non_negative", "--tail-policy": "text",
            "--fixed-cu-seqlens-entries": "non_negative", "--gpu-tflops": "positive_number",
            "--cp-link-gbps": "non_negative_number", "--cp-step-overhead-us": "non_negative_number",
            "--min-cp": "positive", "--pad-id": "integer", "--ignore-id": "integer",
            "--pad-positions": "text", "--plan-in": "text"},
    "pack": {**WORKLOAD, "--capacity": "positive", "--strategy": "text", "--divisor": "positive",
             "--seed": "non_negative", "--group-size": "positive", "--limit": "positive",
             "--stream": "positive", "--out": "text", "--materialize": "text", "--dtype": "text",
             "--report": "text", "--tail-align": "text", "--tail-multiple": "non_negative",
             "--tail-policy": "text", "--fixed-cu-seqlens-entries": "non_negative",
             "--parquet-out": "text", "--parquet-shard-packs": "positive"},
    "convert": {**WORKLOAD, "--out": "text", "--dtype": "text", "--limit": "positive"},
    "reorder": {"--microbatch-size": "positive", "--microbatches": "positive",
                "--window": "positive", "--method": "text", "--module-dp-sizes": "text",
                "--w-vision": "non_negative_number", "--w-text": "non_negative_number",
                "--compute-ms": "non_negative_number", "--pack-divisor": "non_negative",
                "--seed": "non_negative", "--text-only-fraction": "fraction",
                "--mean-images": "non_negative_number", "--max-images": "positive",
                "--min-side": "positive", "--max-side": "positive",
                "--median-text-tokens": "positive", "--pixel-dim": "positive",
                "--timeout": "positive_number", "--report": "text"},
}
# Required flags given alongside the one under test (unless it is the one under test).
REQUIRED = {"pack": ["--capacity", "100"], "convert": ["--out", os.path.join(WORK, "never")]}

failures = []
cases = 0


def run(args):
    return subprocess.run([THDPACK] + args, capture_output=True, text=True, timeout=60)


def expect(args, code, *needles):
    global cases
    cases += 1
    r = run(args)
    lines = r.stderr.splitlines()
    problem = None
    if r.returncode != code:
        problem = f"exit {r.returncode}, expected {code}"
    elif code != 0 and len(lines) != 1:
        problem = f"{len(lines)} stderr lines, expected 1"
    elif code != 0 and not lines[0].startswith("thdpack: error: "):
        problem = "the line does not start with 'thdpack: error: '"
    else:
        missing = [n for n in needles if n not in r.stderr]
        if missing:
            problem = f"stderr lacks {missing}"
    if problem:
        failures.append(f"thdpack {' '.join(repr(a) for a in args)}: {problem}: {r.stderr!r}")
    return r


def help_options(subcommand):
    """The long names of the options --help lists with a numeric type."""
    text = run([subcommand, "--help"]).stdout
    numeric = set()
    for line in text.splitlines():
        m = re.match(r"\s+(?:-\w,)?(--[\w-]+)(?:,--?[\w-]+)*\s+(\S+)", line)
        if m and re.match(r"(INT|UINT|FLOAT|NUM)", m.group(2)):
            numeric.add(m.group(1))
    return numeric


available = run(["--help"]).stdout
for subcommand, flags in FLAGS.items():
    if not re.search(rf"^\s+{subcommand}\b", available, re.M):
        continue  # built without MPI: run and reorder do not exist
    listed = help_options(subcommand)
    if not listed:
        failures.append(f"{subcommand} --help lists no numeric option: the parser is outdated")
    untested = listed - set(flags)
    if untested:
        failures.append(f"{subcommand}: numeric flags missing from the table: {sorted(untested)}")
    for flag, kind in flags.items():
        extra = [] if flag in REQUIRED.get(subcommand, []) else REQUIRED.get(subcommand, [])
        for value in BAD[kind]:
            expect([subcommand, flag, value] + extra, 2, flag)

# Parse errors: exit 2 and one line, whatever CLI11's own code.
expect(["plam"], 2, "unknown subcommand 'plam'", "plan", "pack", "convert", "list")
expect([], 2, "plan", "list")
expect(["plan", "--no-such-flag"], 2, "--no-such-flag")
expect(["plan", "--steps"], 2, "--steps")
expect(["plan", "--steps", "1", "--steps", "2"], 2, "--steps")
expect(["pack", "--lengths", LENGTHS], 2, "--capacity")
expect(["list", "extra"], 2, "extra")
for ok in (["--help"], ["plan", "--help"], ["--version"]):
    expect(ok, 0)

# Values that fail once the data is known.
expect(["pack", "--lengths", LENGTHS, "-C", "100", "--limit", "4", "--no-progress"], 2,
       "--limit 4", "3 samples")
expect(["convert", "--lengths", LENGTHS, "-o", os.path.join(WORK, "c"), "--limit", "9",
        "--no-progress"], 2, "--limit 9")
expect(["plan", "--lengths", LENGTHS, "--model", "llama3-8b", "--cost-linear", "1"], 2,
       "--model")
expect(["plan", "--lengths", LENGTHS, "--dp", "1", "--global-batch", "3", "--cp", "4",
        "-M", str(2**62), "--no-progress"], 2, "overflows")
expect(["plan", "--lengths", LENGTHS, "--tp", "65536", "--dp", "65536", "--no-progress"], 2,
       "tp*cp*dp*pp")
for strategy in ("bfd", "ffd", "next-fit"):
    expect(["pack", "--lengths", HUGE, "-C", str(2**63 - 1), "--strategy", strategy,
            "--no-progress"], 2, "overflows")
expect(["pack", "--lengths", HUGE, "-C", str(2**63 - 1), "--stream", "2", "--no-progress"], 2,
       "overflows")
expect(["plan", "--lengths", HUGE, "--dp", "1", "--global-batch", "2", "--no-progress"], 2,
       "overflows")

if failures:
    print(f"{len(failures)} of {cases} cases failed:")
    print("\n".join(failures[:60]))
    sys.exit(1)
print(f"ok: {cases} cases")
