#!/usr/bin/python3
"""`thdpack reorder --report` under mpirun, read back in headless Chromium: the page renders
without a script error, and per window the drawn vision-cost spreads (before, after, longest-first),
the slowest rank over the mean, the samples moved (ours and longest-first), the bytes and the
exchange times equal the --json summary's; an infinite spread is marked, not drawn to scale.

Usage: reorder_report_test.py [--static] MPIEXEC THDPACK OUT_DIR RANKS [reorder flags ...]

Writes OUT_DIR/reorder.html and, unless --static, the screenshot OUT_DIR/reorder.png.
"""

import json
import os
import subprocess
import sys

from report_browser_test import Elements, close, fail, render


def main():
    args = sys.argv[1:]
    static = args[:1] == ["--static"]
    if static:
        args = args[1:]
    mpiexec, binary, out_dir, ranks, flags = args[0], args[1], args[2], args[3], args[4:]
    os.makedirs(out_dir, exist_ok=True)
    report = os.path.join(out_dir, "reorder.html")
    if os.path.exists(report):
        os.remove(report)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    summary = json.loads(subprocess.run(
        [mpiexec, "-np", ranks, binary, "reorder", *flags, "--report", report, "--json"],
        check=True, stdout=subprocess.PIPE, text=True, env=env, timeout=240).stdout)

    if static:
        page = Elements()
        with open(report, encoding="utf-8") as f:
            page.feed(f.read())
    else:
        shot = os.path.join(out_dir, "reorder.png")
        page, _ = render(report, shot)
        if not os.path.exists(shot) or os.path.getsize(shot) < 10000:
            fail(f"no screenshot, or a blank one: {shot}")

    drawn = {}
    for tag, a, _, _ in page.found:
        if tag == "g" and "data-window" in a:
            key = (int(a["data-window"]), a["data-part"])
            if key in drawn:
                fail(f"window {key[0]}: two bars for {key[1]}")
            drawn[key] = a
    windows = summary["per_window"]
    expected = {
        "before": lambda w: w["spread_before"],
        "after": lambda w: w["spread_after"],
        "reference": lambda w: w["spread_reference"],
        "peak": lambda w: w["max_over_mean_after"],
        "moved": lambda w: w["samples_moved"],
        "reference-moved": lambda w: w["reference_samples_moved"],
        "bytes": lambda w: w["bytes_moved"] / 1e6,
        "sync": lambda w: 1e3 * w["sync_seconds"],
        "exposed": lambda w: 1e3 * w["overlapped_exposed_seconds"],
    }
    if len(drawn) != len(windows) * len(expected):
        fail(f"{len(drawn)} bars drawn, expected {len(expected)} for each of {len(windows)} windows")
    infinite = 0
    for k, w in enumerate(windows):
        for part, value in expected.items():
            a = drawn.get((k, part))
            if a is None:
                fail(f"window {k}: no {part} bar")
            want = value(w)
            if want is None:  # an infinite spread (null in the JSON)
                if a.get("data-infinite") != "true" or float(a["data-value"]) != 0:
                    fail(f"window {k} {part}: infinite in the summary, drawn {a}")
                infinite += 1
            elif "data-infinite" in a or not close(float(a["data-value"]), want):
                fail(f"window {k} {part}: drawn {a['data-value']}, summary {want}")
        if int(drawn[(k, "bytes")]["data-bytes"]) != w["bytes_moved"]:
            fail(f"window {k}: bytes {drawn[(k, 'bytes')]['data-bytes']}, summary "
                 f"{w['bytes_moved']}")
    body_windows = page.body.get("data-windows")
    if body_windows != str(len(windows)):
        fail(f"body data-windows {body_windows}, summary {len(windows)} windows")
    print(f"ok: {len(windows)} windows, {len(drawn)} drawn values equal the summary's"
          f" ({infinite} infinite)")


if __name__ == "__main__":
    main()
