"""Indexed datasets, offline packing and pack files from Python, checked against a Megatron-format
file written here byte by byte (as Megatron-LM's _IndexWriter does)."""

import json
import struct
import subprocess

import numpy as np
import pytest

import thdpack


def write_megatron(prefix, sequences, documents, dtype=np.int32, code=4):
    """The .bin/.idx pair Megatron-LM writes for these sequences."""
    lengths = np.array([len(s) for s in sequences], dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * np.dtype(dtype).itemsize)])[:-1]
    with open(prefix + ".bin", "wb") as f:
        for s in sequences:
            f.write(np.asarray(s, dtype=dtype).tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(documents)))
        f.write(lengths.tobytes())
        f.write(pointers.astype(np.int64).tobytes())
        f.write(np.asarray(documents, dtype=np.int64).tobytes())


def test_reads_a_megatron_file(tmp_path):
    sequences = [[5, 6, 7], [8], [9, 10, 11, 12]]
    write_megatron(str(tmp_path / "data"), sequences, [0, 2, 3], dtype=np.uint16, code=8)
    dataset = thdpack.open_indexed_dataset(str(tmp_path / "data"))
    assert len(dataset) == 3
    assert dataset.lengths(0, 3).tolist() == [3, 1, 4]
    assert [dataset.sample(i)["input_ids"].tolist() for i in range(3)] == sequences


def test_writer_matches_megatron_bytes(tmp_path):
    sequences = [[1, 2, 3], [4, 5], [6]]
    write_megatron(str(tmp_path / "megatron"), sequences, [0, 2, 3])
    writer = thdpack.IndexedDatasetWriter(str(tmp_path / "ours"), "int32")
    writer.add_sequence(sequences[0])
    writer.add_sequence(sequences[1])
    writer.end_document()
    writer.add_sequence(sequences[2])
    writer.end_document()
    writer.finish()
    assert (tmp_path / "ours.bin").read_bytes() == (tmp_path / "megatron.bin").read_bytes()
    # The index is Megatron's, then a 24-byte seal naming the .bin it was written with, which
    # Megatron's reader (offsets and counts from the header) never reaches.
    ours = (tmp_path / "ours.idx").read_bytes()
    assert ours[:-24] == (tmp_path / "megatron.idx").read_bytes()
    assert ours[-24:-16] == b"THDPSEAL"
    assert int.from_bytes(ours[-16:-8], "little") == len((tmp_path / "ours.bin").read_bytes())


def test_truncated_bin_is_reported_with_file_and_position(tmp_path):
    write_megatron(str(tmp_path / "data"), [[1, 2, 3], [4, 5]], [0, 1, 2])
    data = (tmp_path / "data.bin").read_bytes()
    (tmp_path / "data.bin").write_bytes(data[:-4])
    with pytest.raises(thdpack.InvalidArgument, match=r"data\.idx: byte \d+: sequence 1 ends at byte 20"):
        thdpack.open_indexed_dataset(str(tmp_path / "data"))


def test_pack_file_round_trip_through_the_cli(tmp_path):
    rng = np.random.default_rng(1)
    sequences = [rng.integers(2, 1000, rng.integers(1, 300)).tolist() for _ in range(400)]
    write_megatron(str(tmp_path / "data"), sequences, list(range(401)))
    out = tmp_path / "data.thdpacks"
    subprocess.run(["thdpack", "pack", "--data-path", str(tmp_path / "data"), "-C", "1024",
                    "-o", str(out), "--seed", "3"], check=True, capture_output=True,
                   env={"PATH": _bin_path()})
    packed = thdpack.PackedDataset.open(str(out))
    seen = []
    for p in range(len(packed)):
        batch = packed.batch(p)
        ids = packed.pack(p).tolist()
        seen += ids
        assert batch.num_rows <= 1024
        expected = np.concatenate([sequences[i] for i in ids])
        assert np.array_equal(batch.tokens[~batch.padding_mask], expected)
        assert batch.cu_seqlens.tolist() == np.concatenate([[0], np.cumsum([len(sequences[i]) for i in ids])]).tolist()
    assert sorted(seen) == list(range(400))
    direct = thdpack.pack_offline([len(s) for s in sequences], capacity=1024)
    assert len(direct["packs"]) == len(packed) >= direct["lower_bound_l2"]


def test_pack_file_of_a_jsonl_source_through_the_cli(tmp_path):
    # Masks, blank lines and a key the reader is told to ignore: the pack file records the options
    # and where each line is, so reopening it gives the JSONL reader's samples.
    rng = np.random.default_rng(2)
    lines = []
    for i in range(300):
        ids = rng.integers(2, 1000, rng.integers(1, 200)).tolist()
        lines.append(json.dumps({"input_ids": ids, "loss_mask": rng.integers(0, 2, len(ids)).tolist(),
                                 "meta": {"row": i}}))
        if i % 7 == 0:
            lines.append("")
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    out = tmp_path / "data.thdpacks"
    subprocess.run(["thdpack", "pack", "--jsonl", str(jsonl), "--jsonl-ignore-unknown-keys",
                    "-C", "1024", "--divisor", "4", "-o", str(out)],
                   check=True, capture_output=True, env={"PATH": _bin_path()})
    assert struct.unpack_from("<Q", out.read_bytes(), 8)[0] == 4  # the version with the index
    packed = thdpack.PackedDataset.open(str(out))
    eager = thdpack.load_jsonl_dataset(str(jsonl), ignore_unknown_keys=True)
    seen = []
    for p in range(len(packed)):
        ids = packed.pack(p).tolist()
        seen += ids
        batch = packed.batch(p)
        expected = thdpack.pack([eager.sample(i) for i in ids], capacity=1024, divisor=4)
        for field in ("tokens", "labels", "loss_mask", "position_ids", "padding_mask", "cu_seqlens",
                      "sample_ids"):
            assert np.array_equal(getattr(batch, field), getattr(expected, field)), field
    assert sorted(seen) == list(range(300))
    # The source changed since: refused, as the fingerprint says.
    jsonl.write_text(jsonl.read_text().replace('"input_ids": [', '"input_ids": [1', 1))
    with pytest.raises(thdpack.InvalidArgument, match="changed since it was packed"):
        thdpack.PackedDataset.open(str(out))


def _bin_path():
    import os

    import thdpack as package

    build = os.path.dirname(os.path.dirname(os.path.dirname(package.__file__)))
    return os.path.join(build, "bin") + ":" + os.environ.get("PATH", "")


def test_pack_offline_keeps_groups_together():
    lengths = [100, 200, 300, 50, 60, 70, 500, 10]
    result = thdpack.pack_offline(lengths, capacity=600, group_ids=[0, 0, 1, 1, 2, 2, 3, 3])
    where = {i: p for p, pack in enumerate(result["packs"]) for i in pack.tolist()}
    for a, b in [(0, 1), (2, 3), (4, 5), (6, 7)]:
        assert where[a] == where[b]


def test_shifted_labels_read_the_same_through_the_cli_and_python(tmp_path):
    # Megatron's convention (label j is position j's target): `--labels-shifted` and
    # labels_shifted=True read the same samples, and the pack file remembers it when reopened.
    rng = np.random.default_rng(5)
    lines = []
    for _ in range(120):
        ids = rng.integers(2, 1000, rng.integers(2, 60)).tolist()
        labels = [t if rng.random() < 0.6 else -100 for t in ids[1:]] + [-100]
        lines.append(json.dumps({"input_ids": ids, "labels": labels}))
    jsonl = tmp_path / "shifted.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    out = tmp_path / "shifted.thdpacks"
    subprocess.run(["thdpack", "pack", "--jsonl", str(jsonl), "--labels-shifted", "-C", "256",
                    "-o", str(out)], check=True, capture_output=True, env={"PATH": _bin_path()})
    packed = thdpack.PackedDataset.open(str(out))
    shifted = thdpack.load_jsonl_dataset(str(jsonl), labels_shifted=True)
    aligned = thdpack.load_jsonl_dataset(str(jsonl))
    differs = False
    for p in range(len(packed)):
        ids = packed.pack(p).tolist()
        batch = packed.batch(p)
        want = thdpack.pack([shifted.sample(i) for i in ids], capacity=256)
        other = thdpack.pack([aligned.sample(i) for i in ids], capacity=256)
        assert np.array_equal(batch.labels, want.labels)
        differs |= not np.array_equal(batch.labels, other.labels)
    assert differs  # the flag changed what training sees
    result = subprocess.run(["thdpack", "plan", "--workload", "sft-8k", "--labels-shifted"],
                            capture_output=True, text=True, env={"PATH": _bin_path()})
    assert result.returncode != 0 and "--labels-shifted says how labels are stored" in result.stderr
