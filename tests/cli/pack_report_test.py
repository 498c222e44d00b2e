#!/usr/bin/python3
"""`thdpack pack --report` in headless Chromium: the page renders without a script error, and its
charts hold what the pack file and the --json summary say.

Usage: pack_report_test.py THDPACK OUT_DIR [pack flags ...]   (needs the build's PYTHONPATH)
"""

import json
import os
import subprocess
import sys

from report_browser_test import fail, render

import thdpack


def main():
    binary, out_dir, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    report = os.path.join(out_dir, "pack.html")
    packs_path = os.path.join(out_dir, "packs.thdpacks")
    summary = json.loads(subprocess.run(
        [binary, "pack", *flags, "--report", report, "--out", packs_path, "--json",
         "--no-progress"], check=True, stdout=subprocess.PIPE, text=True).stdout)

    page, dom = render(report, os.path.join(out_dir, "pack.png"))

    # The bars are the excess over the L1 bound (the counts differ by a few packs out of
    # thousands); at the bound itself the page says so instead of drawing empty bars.
    bounds = {a["data-what"]: (float(a["data-count"]), float(a["data-value"]))
              for tag, a, _, _ in page.found if tag == "g" and "data-what" in a}
    expected = {"l1": summary["lower_bound_l1"], "l2": summary["lower_bound_l2"],
                "packs": summary["packs"]}
    l1 = summary["lower_bound_l1"]
    if summary["packs"] == l1:
        if bounds or "meet the L1 bound" not in dom:
            fail(f"packs at the L1 bound: expected the note and no bars, got {bounds}")
    elif bounds != {k: (float(v), float(v - l1)) for k, v in expected.items()}:
        fail(f"bounds chart (count, over L1) {bounds}, summary {expected}")

    packed = thdpack.PackedDataset.open(packs_path)
    capacity = packed.capacity
    bins = [0] * 20
    padded_total = 0
    for p in range(len(packed)):
        tokens = int(packed.batch(p).cu_seqlens_padded[-1])
        padded_total += tokens
        bins[min(19, int(tokens / capacity * 20))] += 1
    drawn = {int(a["data-bin"]): float(a["data-value"]) for tag, a, _, _ in page.found
             if tag == "g" and "data-bin" in a}
    if [drawn.get(b) for b in range(20)] != [float(c) for c in bins]:
        fail(f"fill histogram {drawn}, pack file {bins}")
    unused = [float(a["data-value"]) for tag, a, _, _ in page.found
              if tag == "rect" and a.get("data-part") == "unused"]
    if unused != [float(len(packed) * capacity - padded_total)]:
        fail(f"unused capacity {unused}, pack file {len(packed) * capacity - padded_total}")
    # Samples per pack and sample lengths: every pack and every sample in the bin of its value.
    per_pack = [len(packed.batch(p).sample_ids) for p in range(len(packed))]
    lengths = [int(b - a) for p in range(len(packed))
               for a, b in zip(packed.batch(p).cu_seqlens[:-1], packed.batch(p).cu_seqlens[1:])]
    for histogram, values in (("samples-per-pack", per_pack), ("lengths", lengths)):
        drawn = [(int(a["data-low"]), int(a["data-high"]), float(a["data-value"]))
                 for tag, a, _, _ in page.found if tag == "g" and a.get("data-histogram") == histogram]
        if not drawn:
            fail(f"no {histogram} histogram")
        last = len(drawn) - 1
        for i, (low, high, count) in enumerate(drawn):
            want = sum(1 for v in values if (low <= v <= high) or (i == last and v > high))
            if count != want:
                fail(f"{histogram}: {count:g} in [{low}, {high}], the pack file has {want}")
    print(f"ok: {len(packed)} packs; bounds, 20 fill bins, samples per pack, {len(lengths)} sample "
          "lengths and unused capacity equal the pack file; no chart labels overlap")


if __name__ == "__main__":
    main()
