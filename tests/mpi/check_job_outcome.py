"""Runs tests/mpi/job_outcome_main.cpp under mpirun for each scenario and checks the job's end:
the exit code, exactly one 'thdpack:' line on stderr naming the rank that failed first for a
reason other than a communication failure, no MPI abort, and a wall time within the communicator
timeout plus the outcome exchange's grace.

Usage: check_job_outcome.py MPIEXEC [MPIEXEC_FLAGS...] -- PROGRAM"""

import subprocess
import sys
import time

split = sys.argv.index("--")
launcher, program = sys.argv[1:split], sys.argv[split + 1]

# scenario -> (exit code, text of the one line, or None for no line)
CASES = {
    "ok": (0, None),
    "skip": (3, "thdpack: error on rank 0: barrier did not complete within 2 s on rank 0: a peer "
                "may have died or skipped the collective (1 other ranks failed too); ranks 1 "
                "finished without entering it"),
    "fail": (2, "thdpack: error on rank 1: bad input on one rank (2 other ranks failed too)"),
}
failures = []
for scenario, (code, line) in CASES.items():
    start = time.monotonic()
    r = subprocess.run(launcher + ["-np", "3", program, scenario], capture_output=True,
                       text=True, timeout=60)
    seconds = time.monotonic() - start
    ours = [x for x in r.stderr.splitlines() if x.startswith("thdpack:")]
    problems = []
    if r.returncode != code:
        problems.append(f"exit {r.returncode}, expected {code}")
    if (line is None and ours) or (line is not None and (len(ours) != 1 or
                                                         not ours[0].startswith(line))):
        problems.append(f"thdpack lines {ours}, expected {[line] if line else []}")
    if "MPI_ABORT" in r.stderr or "MPI_Abort" in r.stderr:
        problems.append("the job was aborted")
    if seconds > 30:
        problems.append(f"took {seconds:.1f} s")
    if problems:
        failures.append(f"{scenario}: {'; '.join(problems)}\n{r.stderr}")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"ok: {len(CASES)} scenarios")
