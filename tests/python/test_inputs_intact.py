"""From Python too, no writer replaces a file that an open dataset reads, and a pack file notices a
source rewritten with the same number of samples."""

import hashlib
import os
import subprocess

import pytest

import thdpack
from test_datasets import _bin_path


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_dataset(prefix, sequences):
    writer = thdpack.IndexedDatasetWriter(prefix)
    for s in sequences:
        writer.add_sequence(s)
    writer.finish()


@pytest.mark.parametrize("alias", ["same", "symlink", "hardlink", "spelling"])
def test_writer_onto_an_open_dataset_is_refused(tmp_path, alias):
    prefix = str(tmp_path / "d")
    write_dataset(prefix, [[1, 2, 3], [4, 5]])
    before = {ext: digest(prefix + ext) for ext in (".bin", ".idx")}
    dataset = thdpack.open_indexed_dataset(prefix)
    target = prefix
    if alias == "symlink":
        target = str(tmp_path / "link")
        os.symlink(prefix + ".bin", target + ".bin")
    elif alias == "hardlink":
        target = str(tmp_path / "hard")
        os.link(prefix + ".idx", target + ".idx")
    elif alias == "spelling":
        os.makedirs(tmp_path / "sub")
        target = str(tmp_path / "sub" / ".." / "." / "d")
    with pytest.raises(ValueError, match="is the same file as the input"):
        write_dataset(target, [[9]])
    assert {ext: digest(prefix + ext) for ext in (".bin", ".idx")} == before
    assert dataset.size == 2
    assert not [n for n in os.listdir(tmp_path) if ".tmp." in n]
    del dataset
    write_dataset(target, [[9]])  # closed: an output like any other
    assert thdpack.open_indexed_dataset(target).size == 1


def test_pack_file_refuses_a_source_rewritten_with_the_same_count(tmp_path):
    source = tmp_path / "s.jsonl"
    source.write_text('{"input_ids":[1,2,3]}\n{"input_ids":[4]}\n')
    packs = tmp_path / "s.thdpacks"
    subprocess.run(["thdpack", "pack", "--jsonl", str(source), "-C", "8", "-o", str(packs),
                    "--no-progress"], check=True, capture_output=True, env={"PATH": _bin_path()})
    assert len(thdpack.PackedDataset.open(str(packs))) == 1
    source.write_text('{"input_ids":[1,2,7]}\n{"input_ids":[4]}\n')
    with pytest.raises(ValueError, match="changed since it was packed"):
        thdpack.PackedDataset.open(str(packs))
