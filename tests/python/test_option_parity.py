"""Every pipeline option is reachable, with the same default, from every front end. The options
table (PipelineOptions.fields(), include/thdpack/pipeline/option_fields.hpp) declares each field
once; describe() is its text and PipelineOptions(...) takes its names. This checks the rest
against it: its .pyi stub, ThdPacker's keywords and the CLI's `thdpack run` flags (and `thdpack
plan`'s, for the options that change a plan). A field added to one and not the others fails here."""

import inspect
import os
import re
import subprocess

import pytest

import thdpack
from thdpack.torch import ThdPacker

THDPACK = os.environ.get("THDPACK_CLI", os.path.join("build", "bin", "thdpack"))
STUB = os.path.join(os.path.dirname(thdpack.__file__), "_thdpack.pyi")

FIELDS = thdpack.PipelineOptions.fields()
# The topology's fields, which `topology` sets.
TOPOLOGY = {f["name"] for f in FIELDS if not f["settable"]}
REQUIRED = {f["name"] for f in FIELDS if f["required"]}
# Options that change the plan: `thdpack plan` must take them too.
PLANNING = {"topology", "max_seqlen_per_dp_cp_rank", "scheduler", "cost", "model", "gpu_tflops",
            "cp_link_gbps", "cp_step_overhead_us", "min_cp", "max_sequences_per_pack",
            "sequence_parallel", "oversize", "tail_align", "tail_policy",
            "fixed_cu_seqlens_entries"}
# ThdPacker derives these two from other keywords when not given (None): the FLOPs cost of
# `model` (tokens without one), and the preset name of a `model` given by name.
DERIVED = {"cost", "model"}


def keywords():
    """{name: default text} of PipelineOptions(...)'s keywords (topology and M besides)."""
    return {f["name"]: f["default"] for f in FIELDS if f["settable"]}


def as_text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:.17g}"
    return str(value)


def test_thdpacker_takes_every_option_with_the_same_default():
    packer = inspect.signature(ThdPacker.__init__).parameters
    assert "max_seqlen_per_dp_cp_rank" in packer
    for name, default in keywords().items():
        assert name in packer, f"ThdPacker has no keyword {name}"
        if name in DERIVED or name in REQUIRED:
            continue
        assert as_text(packer[name].default) == default, \
            f"{name}: ThdPacker's default {packer[name].default!r}, PipelineOptions' {default}"
    for name in TOPOLOGY - {"ep"}:  # ThdPacker has no expert parallelism
        assert name in packer or f"{name}_group" in packer, f"ThdPacker has no keyword {name}"


def test_every_field_is_a_keyword_that_reaches_describe():
    base = thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=8)
    assert [item.split("=", 1)[0] for item in base.describe().split()] == \
        [f["name"] for f in FIELDS]
    other = {"integer": 3, "number": 12.5, "flag": True, "cost": thdpack.CostModel(linear=2.0)}
    texts = {"scheduler": "dp_balanced", "model": "llama3-8b", "reading": "all-ranks",
             "cp_mode": "contiguous", "oversize": "truncate", "pad_positions": "zero",
             "tail_align": "multiple", "tail_policy": "extend_last"}
    for f in FIELDS:
        if not f["settable"]:
            continue
        value = texts[f["name"]] if f["kind"] == "text" else other[f["kind"]]
        kwargs = {"max_seqlen_per_dp_cp_rank": 8, f["name"]: value}
        changed = thdpack.PipelineOptions(topology=thdpack.Topology(), **kwargs)
        differs = [a for a, b in zip(changed.describe().split(), base.describe().split()) if a != b]
        assert [d.split("=", 1)[0] for d in differs] == [f["name"]], (f["name"], differs)
    with pytest.raises(TypeError, match="unexpected keyword argument 'pad_idd'"):
        thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=8,
                                pad_idd=1)
    with pytest.raises(TypeError, match="min_cp must be an int, not str"):
        thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=8,
                                min_cp="2")
    with pytest.raises(thdpack.InvalidArgument, match="cp_mode must be 'zigzag' or 'contiguous'"):
        thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=8,
                                cp_mode="ring")


def test_the_stub_declares_every_option():
    with open(STUB) as f:
        stub = f.read()
    block = re.search(r"class PipelineOptions:\n    def __init__\(self, \*,(.*?)\) -> None", stub,
                      re.S).group(1)
    declared = set(re.findall(r"(\w+):", block))
    assert declared == set(keywords()) | {"topology"}


def cli_flags(command):
    text = subprocess.run([THDPACK, command, "--help"], capture_output=True, text=True,
                          check=True).stdout
    return set(re.findall(r"--[a-z0-9-]+", text))


@pytest.mark.parametrize("command", ["run", "plan"])
def test_the_cli_takes_every_option(command):
    if command == "run" and "run" not in subprocess.run([THDPACK, "--help"], capture_output=True,
                                                         text=True).stdout:
        pytest.skip("built without MPI: no `thdpack run`")
    flags = cli_flags(command)
    cli_flag = {f["name"]: f["cli_flag"] for f in FIELDS}
    cli_flag["topology"] = "--tp"
    wanted = set(cli_flag) if command == "run" else PLANNING
    missing = sorted(name for name in wanted if cli_flag[name] not in flags)
    assert not missing, f"thdpack {command} has no flag for {missing}"


# Flags every long-running subcommand offers, whatever it does (a script that passes one to any of
# them must not be refused by another).
COMMON_FLAGS = {"--no-progress", "--json"}
LONG_RUNNING = ["plan", "pack", "run", "reorder"]


@pytest.mark.parametrize("command", LONG_RUNNING + ["convert"])
def test_every_long_running_command_takes_the_common_flags(command):
    if command in ("run", "reorder") and command not in subprocess.run(
            [THDPACK, "--help"], capture_output=True, text=True).stdout:
        pytest.skip(f"built without MPI: no `thdpack {command}`")
    missing = sorted(COMMON_FLAGS - cli_flags(command))
    assert not missing, f"thdpack {command} has no {missing}"


# The options of reading a data source: every keyword of the Python readers is a flag of each CLI
# command that reads data, and every such flag is a keyword of a reader.
READERS = {
    "load_jsonl_dataset": lambda: thdpack.load_jsonl_dataset.__doc__.splitlines()[0],
    "load_parquet_dataset": lambda: str(inspect.signature(thdpack.load_parquet_dataset)),
    "load_hf_dataset": lambda: str(inspect.signature(thdpack.load_hf_dataset)),
}
# Keywords whose flag is not the keyword with dashes: the JSONL-only one says so.
FLAG_OF_KEYWORD = {"ignore_unknown_keys": "--jsonl-ignore-unknown-keys"}
READING_FLAG = re.compile(r"--(?:[a-z-]+-column|jsonl-ignore-unknown-keys|labels-shifted|"
                          r"bridge-packed)\b")


def reader_keywords():
    """{keyword: reader} of the readers' keyword-only options."""
    out = {}
    for reader, signature in READERS.items():
        options = signature().split("*,", 1)[1]
        for name in re.findall(r"(\w+)\s*:", options):
            out[name] = reader
    return out


@pytest.mark.parametrize("command", ["plan", "pack", "convert", "run"])
def test_every_reading_keyword_is_a_flag_and_back(command):
    text = subprocess.run([THDPACK, command, "--help"], capture_output=True, text=True,
                          check=True).stdout
    flags = set(READING_FLAG.findall(text))
    keywords = reader_keywords()
    assert {"tokens_column", "labels_shifted", "bridge_packed", "ignore_unknown_keys"} <= set(keywords)
    wanted = {FLAG_OF_KEYWORD.get(k, "--" + k.replace("_", "-")): k for k in keywords}
    for flag, keyword in wanted.items():
        assert flag in flags, f"thdpack {command} has no {flag} for {keywords[keyword]}'s {keyword}"
    for flag in flags:
        assert flag in wanted, f"thdpack {command}'s {flag} is no keyword of a Python reader"
