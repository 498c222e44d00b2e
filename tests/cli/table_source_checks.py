"""What the CLI tests of table sources (parquet_matches_jsonl_test.py,
hf_dataset_matches_jsonl_test.py) share: running the CLI, random samples, reading a pack file's
packs and a plan summary without the fields that name its source."""

import json
import struct
import subprocess


def runner(thdpack):
    """run(args, ok=True): `thdpack ARGS --no-progress`, asserting exit 0 unless ok is False."""
    def run(args, ok=True):
        result = subprocess.run([thdpack] + args + ["--no-progress"], capture_output=True,
                                text=True)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result
    return run


def random_samples(rng, n, with_mask):
    samples = []
    for _ in range(n):
        length = rng.randint(1, 300 if rng.random() < 0.2 else 40)
        sample = {"input_ids": [rng.randint(0, 65535) for _ in range(length)]}
        if with_mask:
            sample["loss_mask"] = [rng.randint(0, 1) for _ in range(length)]
        samples.append(sample)
    return samples


def packs_of(path):
    """A pack file's packs, without its source: capacity, divisor, size, offsets, sample ids."""
    data = open(path, "rb").read()
    assert data[:8] == b"THDPACKS"
    at = 8
    version, capacity, divisor = struct.unpack_from("<Qqq", data, at)
    at += 24
    for _ in range(2):  # kind, spec
        (n,) = struct.unpack_from("<I", data, at)
        at += 4 + n
    size, _fingerprint, packs, items = struct.unpack_from("<qQQQ", data, at)
    at += 32
    if version >= 4:
        at += 16  # a JSONL source's options and the size of its index (after the sample ids)
    at += 8  # the header checksum
    offsets = struct.unpack_from("<%dq" % (packs + 1), data, at)
    ids = struct.unpack_from("<%dq" % items, data, at + 8 * (packs + 1))
    return version, capacity, divisor, size, offsets, ids


def without_source(summary):
    """A plan summary without what names the source or times the planner."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if not k.startswith("workload") and not k.startswith("plan_ms")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(summary))
