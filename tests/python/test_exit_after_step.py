"""A gloo script that ends right after its last step exits cleanly.

Tensors that thdpack hands to gloo were freed on a gloo worker thread when the caller had already
dropped them; during interpreter finalization that thread is terminated on taking the GIL and the
process aborts ("terminate called without an active exception"), in about one run in four on a
loaded 2-core machine before the fix. Every run here must exit 0 with nothing on stderr about it.
With torch 2.x the worker calls destroy_process_group() after its last step, as torch 2 requires
(exit_after_step_worker.py says why).
"""

import os
import subprocess
import sys
import tempfile

WORKER = os.path.join(os.path.dirname(__file__), "exit_after_step_worker.py")
RUNS = 16
WORLD = 2


def _job(tmp: str, run: int):
    store = os.path.join(tmp, f"store-{run}")
    return [subprocess.Popen([sys.executable, WORKER, store, str(rank), str(WORLD)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for rank in range(WORLD)]


def test_gloo_script_ending_right_after_its_last_step_exits_cleanly():
    failures = []
    with tempfile.TemporaryDirectory(prefix="thdpack-exit-") as tmp:
        for run in range(RUNS):
            for rank, process in enumerate(_job(tmp, run)):
                out, err = process.communicate(timeout=120)
                if process.returncode != 0 or "terminate called" in err:
                    failures.append(f"run {run} rank {rank}: exit {process.returncode}: "
                                    f"{err.strip()[-300:]}")
    assert not failures, f"{len(failures)} of {RUNS * WORLD} ranks did not exit cleanly:\n" + \
        "\n".join(failures)
