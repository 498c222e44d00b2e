"""`thdpack pack` with static shapes: every pack read back with the same options has the aligned
row count and exactly the fixed number of cu_seqlens entries, no pack holds more samples than the
entries allow, every sample is in one pack, and the summary's rows agree.

Usage: check_pack_static_shapes.py THDPACK WORKDIR"""

import json
import os
import subprocess
import sys

import numpy as np

import thdpack

THDPACK, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
CONFIG = json.dumps({"mode": "distribution", "type": "lognormal", "min_seq_len": 1,
                     "max_seq_len": 900, "mean_seq_len": 120, "lognormal_sigma": 1.2,
                     "size": 600, "seed": 3})
CASES = [  # (tail_align, tail_multiple, tail_policy, fixed entries, divisor, strategy)
    ("capacity", 0, "append_dummy_seq", 0, 1, "bfd"),
    ("capacity", 0, "extend_last", 6, 4, "bfd"),
    ("multiple", 64, "append_dummy_seq", 5, 8, "ffd"),
    ("multiple", 128, "extend_last", 0, 2, "next-fit"),
    ("none", 0, "append_dummy_seq", 3, 1, "bfd"),
    ("multiple", 32, "append_dummy_seq", 9, 1, "stream"),
]
checked = 0
for align, multiple, policy, entries, divisor, strategy in CASES:
    out = os.path.join(WORK, f"{align}_{multiple}_{policy}_{entries}.thdpacks")
    args = [THDPACK, "pack", "--dataset-config", CONFIG, "-C", "1024", "--divisor", str(divisor),
            "--tail-align", align, "--tail-policy", policy, "-o", out, "--json", "--no-progress"]
    args += ["--stream", "4"] if strategy == "stream" else ["--strategy", strategy]
    if multiple:
        args += ["--tail-multiple", str(multiple)]
    if entries:
        args += ["--fixed-cu-seqlens-entries", str(entries)]
    summary = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    packed = thdpack.PackedDataset.open(out)
    assert summary["packs"] == packed.num_packs
    dummy = align != "none" and policy == "append_dummy_seq"
    room = entries - 1 - (1 if dummy else 0) if entries else None
    seen, rows = [], 0
    for p in range(packed.num_packs):
        ids = list(packed.pack(p))
        seen += ids
        if room is not None:
            assert len(ids) <= room, (out, p, len(ids), room)
        batch = packed.batch(p, tail_align=align, tail_multiple=multiple, tail_policy=policy,
                             fixed_cu_seqlens_entries=entries)
        t = len(np.asarray(batch.tokens))
        rows += t
        if align == "capacity":
            assert t == 1024, (out, p, t)
        elif align == "multiple":
            assert t % multiple == 0, (out, p, t)
        if entries:
            assert len(np.asarray(batch.cu_seqlens)) == entries, (out, p)
            assert len(np.asarray(batch.cu_seqlens_padded)) == entries, (out, p)
        checked += 1
    assert sorted(seen) == list(range(600)), out
    assert summary["rows"] == rows, (summary["rows"], rows)
    assert summary["static_shapes"] == {"tail_align": align, "tail_multiple": multiple,
                                        "tail_policy": policy,
                                        "fixed_cu_seqlens_entries": entries}
print(f"ok: {len(CASES)} packings, {checked} packs read back")
