"""Every pipeline option is reachable, with the same default, from every front end: the C++
options (PipelineOptions.describe()), the Python binding (PipelineOptions), its .pyi stub,
ThdPacker's keywords and the CLI's `thdpack run` flags (and `thdpack plan`'s, for the options that
change a plan). A field added to one and not the others fails here."""

import inspect
import os
import re
import subprocess

import pytest

import thdpack
from thdpack.torch import ThdPacker

THDPACK = os.environ.get("THDPACK_CLI", os.path.join("build", "bin", "thdpack"))
STUB = os.path.join(os.path.dirname(thdpack.__file__), "_thdpack.pyi")

# The topology's fields, which describe() lists in place of `topology`.
TOPOLOGY = {"tp", "cp", "dp", "pp", "ep", "vpp", "vpp_group", "order"}
# Options spelled differently on the CLI (Megatron's flag names); `cost` is two flags.
CLI_FLAG = {"max_sequences_per_pack": "--thd-max-packed-sequences", "cost": "--cost-linear",
            "topology": "--tp", "max_seqlen_per_dp_cp_rank": "--max-seqlen-per-dp-cp-rank"}
# Options that change the plan: `thdpack plan` must take them too.
PLANNING = {"topology", "max_seqlen_per_dp_cp_rank", "scheduler", "cost", "model", "gpu_tflops",
            "cp_link_gbps", "cp_step_overhead_us", "min_cp", "max_sequences_per_pack",
            "sequence_parallel", "oversize", "tail_align", "tail_policy",
            "fixed_cu_seqlens_entries"}
# ThdPacker derives these two from other keywords when not given (None): the FLOPs cost of
# `model` (tokens without one), and the preset name of a `model` given by name.
DERIVED = {"cost", "model"}


def binding_keywords():
    """{name: default text or None} of PipelineOptions(...), from pybind11's signature."""
    doc = thdpack.PipelineOptions.__init__.__doc__
    signature = doc[doc.index("*,") + 2:doc.index(") -> None")]
    out = {}
    for part in re.split(r",\s*(?=\w+:)", signature):
        m = re.match(r"\s*(\w+): [^=]+?(?: = (.+))?$", part.strip())
        assert m, part
        out[m.group(1)] = m.group(2)
    return out


def as_text(value):
    return repr(value) if isinstance(value, str) else str(value)


def test_thdpacker_takes_every_option_with_the_same_default():
    packer = inspect.signature(ThdPacker.__init__).parameters
    for name, default in binding_keywords().items():
        if name == "topology":
            continue  # ThdPacker builds it from its groups (or tp, cp, dp, pp, vpp, ...)
        assert name in packer, f"ThdPacker has no keyword {name}"
        if name in DERIVED or default is None:
            continue
        assert as_text(packer[name].default) == default, \
            f"{name}: ThdPacker's default {packer[name].default!r}, PipelineOptions' {default}"
    for name in TOPOLOGY - {"ep"}:  # ThdPacker has no expert parallelism
        assert name in packer or f"{name}_group" in packer, f"ThdPacker has no keyword {name}"


def test_describe_lists_every_option():
    options = thdpack.PipelineOptions(topology=thdpack.Topology(), max_seqlen_per_dp_cp_rank=8)
    described = {item.split("=", 1)[0] for item in options.describe().split()}
    assert described == (set(binding_keywords()) - {"topology"}) | TOPOLOGY


def test_the_stub_declares_every_option():
    with open(STUB) as f:
        stub = f.read()
    block = re.search(r"class PipelineOptions:\n    def __init__\(self, \*,(.*?)\) -> None", stub,
                      re.S).group(1)
    declared = set(re.findall(r"(\w+):", block))
    assert declared == set(binding_keywords())


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
    wanted = binding_keywords() if command == "run" else PLANNING
    missing = [name for name in wanted
               if CLI_FLAG.get(name, "--" + name.replace("_", "-")) not in flags]
    assert not missing, f"thdpack {command} has no flag for {missing}"
