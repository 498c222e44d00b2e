"""Every path a Python function takes may be a str, bytes or os.PathLike (pathlib.Path), including
names that are not UTF-8; anything else is one clear InvalidArgument, not a pybind TypeError."""

import os
import pathlib

import pytest

import thdpack


@pytest.fixture(params=["plain", "not_utf8"])
def folder(tmp_path, request):
    if request.param == "plain":
        return tmp_path
    name = os.fsdecode(b"caf\xe9-data")  # Latin-1 bytes: a surrogate-escaped str in Python
    path = tmp_path / name
    try:
        path.mkdir()
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    return path


def _forms(path: pathlib.Path):
    return [path, str(path), os.fsencode(path)]


def test_every_path_argument_takes_str_bytes_and_pathlike(folder):
    jsonl = folder / "data.jsonl"
    jsonl.write_text('{"input_ids": [1, 2, 3]}\n{"input_ids": [4, 5]}\n')
    lengths = folder / "lengths.csv"
    lengths.write_text("3\n2\n")
    for form in _forms(jsonl):
        assert len(thdpack.load_jsonl_dataset(form)) == 2
    for form in _forms(lengths):
        assert list(thdpack.read_lengths_file(form)) == [3, 2]
    config = '{"mode": "file", "path": "lengths.csv"}'  # relative to base_dir
    for form in _forms(folder):
        assert thdpack.mock_dataset(config, base_dir=form).length(1) == 2
    for i in range(3):
        prefix = folder / f"corpus{i}"
        writer = thdpack.IndexedDatasetWriter(_forms(prefix)[i])
        writer.add_sequence([1, 2, 3])
        writer.end_document()
        writer.finish()
        for form in _forms(prefix):
            assert thdpack.open_indexed_dataset(form).length(0) == 3


@pytest.mark.parametrize("bad", [42, None, ["a.jsonl"]])
def test_a_path_of_another_type_is_one_clear_error(bad):
    with pytest.raises(thdpack.InvalidArgument, match="path must be a str, bytes or os.PathLike"):
        thdpack.load_jsonl_dataset(bad)
    with pytest.raises(thdpack.InvalidArgument, match="must be a str, bytes or os.PathLike"):
        thdpack.read_plan_file(bad)


def test_an_error_about_a_path_that_is_not_utf8_keeps_its_message(tmp_path):
    missing = tmp_path / os.fsdecode(b"caf\xe9") / "corpus"
    with pytest.raises(thdpack.InvalidArgument, match=r"caf\\xe9/corpus\.idx'"):
        thdpack.open_indexed_dataset(missing)
