#!/usr/bin/python3
"""`thdpack run --report` under mpirun, read back in headless Chromium: the page renders without a
script error, and per step the drawn replica times over the bound peak at the --json summary's
step ratios (for the run's scheduler and for dp_balanced) with the straggler marked there, and the
exchange and wall-time bars equal the summary's bytes and seconds.

Usage: run_report_test.py MPIEXEC THDPACK OUT_DIR RANKS [run flags, --dp among them ...]
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from report_browser_test import close, fail, render  # noqa: E402


def main():
    mpiexec, binary, out_dir, ranks, flags = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4],
                                              sys.argv[5:])
    os.makedirs(out_dir, exist_ok=True)
    report = os.path.join(out_dir, "run.html")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    summary = json.loads(subprocess.run(
        [mpiexec, "-np", ranks, binary, "run", *flags, "--report", report, "--json"], check=True,
        stdout=subprocess.PIPE, text=True, env=env, timeout=240).stdout)

    page, _ = render(report)

    dp = int(flags[flags.index("--dp") + 1])
    checked = 0
    for s in summary["per_step"]:
        step = str(s["step"])
        for scheduler, ratio in ((summary["scheduler"], s["step_ratio"]),
                                 ("dp_balanced", s["dp_balanced_ratio"])):
            bars = [(float(a["data-value"]), a["data-straggler"], cls)
                    for tag, a, cls, _ in page.found if tag == "g" and a.get("data-step") == step
                    and a.get("data-scheduler") == scheduler and "data-replica" in a]
            if len(bars) != dp:
                fail(f"step {step} {scheduler}: {len(bars)} replica bars, dp is {dp}")
            peak = max(v for v, _, _ in bars)
            if not close(peak, ratio):
                fail(f"step {step} {scheduler}: tallest replica {peak}, summary ratio {ratio}")
            marked = [v for v, flag, cls in bars if flag == "true" and "straggler" in cls]
            if marked != [peak]:
                fail(f"step {step} {scheduler}: straggler marked on {marked}, tallest is {peak}")
            checked += len(bars)
        parts = {a["data-part"]: a for tag, a, _, p in page.found if tag == "rect"
                 and a.get("data-part") in ("minimum", "excess") and p
                 and p[-1].get("data-step") == step}
        if int(parts["minimum"]["data-bytes"]) != s["exchange_minimum"] or \
                int(parts["excess"]["data-bytes"]) != s["exchange_bytes"] - s["exchange_minimum"]:
            fail(f"step {step}: exchange bars {parts}, summary {s}")
        wall = [float(a["data-value"]) for tag, a, _, _ in page.found
                if tag == "g" and a.get("data-part") == "wall" and a.get("data-step") == step]
        if len(wall) != 1 or not close(wall[0], 1e3 * s["seconds_max"]):
            fail(f"step {step}: wall bar {wall}, summary {1e3 * s['seconds_max']} ms")
        checked += 3
    print(f"ok: {len(summary['per_step'])} steps, {checked} drawn values equal the summary's")


if __name__ == "__main__":
    main()
