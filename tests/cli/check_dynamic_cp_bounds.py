#!/usr/bin/python3
"""`thdpack plan` with a dynamic-CP scheduler prints fixed-CP and dynamic-CP rows side by side:
over many workloads and layouts, every row's step must be at least its own bound (a bound for the
row's layout, not the other's), and "vs fastest" must name the fastest row at 1.

Usage: check_dynamic_cp_bounds.py THDPACK
"""

import json
import subprocess
import sys

WORKLOADS = ["sft-8k", "longtail-32k", "rl-64k", "bimodal-16k", "longctx-128k"]
LAYOUTS = [(2, 2), (4, 2), (8, 4), (64, 8), (128, 4), (256, 2), (3, 2), (16, 1)]


def main():
    thdpack = sys.argv[1]
    failures, rows = [], 0
    for workload in WORKLOADS:
        for dp, cp in LAYOUTS:
            for scheduler in ("balanced_dynamic_cp", "default_dynamic_cp"):
                command = [thdpack, "plan", "--workload", workload, "--dp", str(dp), "--cp",
                           str(cp), "--scheduler", scheduler, "--steps", "2", "--oversize", "truncate", "--json",
                           "--no-progress"]
                run = subprocess.run(command, capture_output=True, text=True)
                if run.returncode != 0:
                    failures.append(f"{' '.join(command[1:])}: exit {run.returncode}: "
                                    f"{run.stderr.strip()[-200:]}")
                    continue
                result = json.loads(run.stdout)
                ok = [r for r in result["schedulers"] if not r["error"]]
                for r in ok:
                    rows += 1
                    if r["step_mean"] < r["lower_bound_mean"] * (1 - 1e-9) or \
                            r["step_ratio"] < 1 - 1e-9:
                        failures.append(f"{workload} dp {dp} cp {cp}: {r['name']} ({r['cp']}) "
                                        f"steps {r['step_mean']:.6g} s under its bound "
                                        f"{r['lower_bound_mean']:.6g} s")
                fastest = min(r["step_mean"] for r in ok)
                for r in ok:
                    if abs(r["step_vs_fastest"] - r["step_mean"] / fastest) > 1e-9:
                        failures.append(f"{workload} dp {dp} cp {cp}: {r['name']} vs fastest "
                                        f"{r['step_vs_fastest']}")
    if failures:
        print(f"FAIL: {len(failures)} problems, first: " + "\n".join(failures[:5]))
        sys.exit(1)
    print(f"ok: {rows} rows over {len(WORKLOADS)} workloads x {len(LAYOUTS)} layouts x 2 "
          "dynamic-CP schedulers, each at or above its own layout's bound")


if __name__ == "__main__":
    main()
