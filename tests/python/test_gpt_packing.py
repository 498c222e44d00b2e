"""The example GPT (examples/gpt.py, train_gpt.py) computes on thdpack packs what it should.

* packing is exact: one packed micro-batch gives the summed loss and gradients of its samples run
  alone, unpadded (float64, ``rtol=1e-9, atol=1e-12``), with and without padding rows, tail
  padding and SFT loss masks; the padded [B, L] baseline gives them too;
* distribution is exact: dp 2 x cp 2 gloo processes give the global loss and all-reduced gradients
  of one process on the same global batch (packed and padded modes); reading the zigzag slices in
  the wrong row order breaks it, so the check really depends on the CP key/value gather;
* training works: the loss falls over 30 steps, and the command line runs on 4 processes.

Run from the repository root: ``PYTHONPATH=build/python:examples /usr/bin/python3 -m pytest
tests/python -q``
(``-s`` prints the measured differences).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from typing import Dict, Tuple

import numpy as np
import pytest
import torch
import torch.distributed as dist

import thdpack
from thdpack.torch import microbatch_tensors

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
sys.path.insert(0, os.path.abspath(EXAMPLES))

import train_gpt  # noqa: E402
from gpt import GPT, GPTConfig, thd_layout  # noqa: E402

RTOL, ATOL = 1e-9, 1e-12  # float64 throughout
SMALL_MOCK = ('{"mode":"distribution","type":"lognormal","min_seq_len":4,"max_seq_len":60,'
              '"mean_seq_len":24,"lognormal_sigma":0.9,"size":5000,"seed":1}')
# Sizes shared by the 1-process reference and the 4-process run (M*cp >= longest sample).
DIST_ARGS = ["--mock-config", SMALL_MOCK, "--global-batch", "12", "--max-seqlen-per-rank", "64",
             "--vocab", "64", "--hidden", "32", "--heads", "4", "--layers", "2",
             "--max-positions", "128", "--dtype", "float64", "--seed", "5"]
DIST_STEP = 3  # which global batch


def _grads(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _max_diffs(got: Dict[str, torch.Tensor], want: Dict[str, torch.Tensor]) -> Tuple[float, float]:
    """Largest absolute difference, and largest relative one (to the tensor's max magnitude)."""
    abs_diff = max(float((got[n] - want[n]).abs().max()) for n in want)
    rel_diff = max(float((got[n] - want[n]).abs().max() / want[n].abs().max().clamp_min(1e-300))
                   for n in want)
    return abs_diff, rel_diff


def _assert_close(got: Dict[str, torch.Tensor], want: Dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert torch.allclose(got[name], want[name], rtol=RTOL, atol=ATOL), (
            name, float((got[name] - want[name]).abs().max()))


@pytest.fixture
def one_process_world():
    """A one-process gloo world for code that needs torch.distributed, torn down afterwards."""
    created = not dist.is_initialized()
    train_gpt.init_single_process()
    yield
    if created:
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------------
# (a) packing is exact
# ------------------------------------------------------------------------------------------

def _samples():
    rng = np.random.default_rng(7)
    samples = [{"id": i, "input_ids": rng.integers(2, 64, size=n)}
               for i, n in enumerate((7, 13, 2, 20, 5, 1))]
    # An SFT sample: the first 6 tokens are prompt (no loss).
    samples.append({"id": 6, "input_ids": rng.integers(2, 64, size=11),
                    "loss_mask": np.array([0] * 6 + [1] * 5, dtype=np.float32)})
    return samples


def _model() -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=64, max_positions=128, hidden=32, heads=4, layers=2, ffn=64,
                       tie_embeddings=False)
    return GPT(config).double()


def _alone(model: GPT, samples) -> Tuple[torch.Tensor, Dict[str, torch.Tensor], float]:
    """Sum of per-sample losses, each sample run alone unpadded as a [1, L] batch."""
    model.zero_grad()
    total, tokens = torch.zeros((), dtype=torch.float64), 0.0
    for sample in samples:
        b = train_gpt.padded_microbatch([sample], 1)
        loss, n = model.padded_loss(b["tokens"], b["labels"], b["loss_mask"], b["lengths"])
        loss.backward()
        total, tokens = total + loss.detach(), tokens + float(n)
    return total, _grads(model), tokens


@pytest.mark.parametrize("pack_options", [
    {},
    {"divisor": 4},
    {"divisor": 4, "tail_align": "capacity", "capacity": 96, "tail_policy": "append_dummy_seq"},
    {"divisor": 2, "tail_align": "multiple", "tail_multiple": 32, "tail_policy": "extend_last"},
    {"divisor": 4, "pad_positions": "zero"},
], ids=["unpadded", "divisor4", "dummy-seq", "extend-last", "zero-pad-positions"])
def test_packed_equals_samples_alone(pack_options):
    model = _model()
    samples = _samples()
    want_loss, want_grads, want_tokens = _alone(model, samples)

    batch = thdpack.pack(samples, **pack_options)
    mb = microbatch_tensors(batch)
    model.zero_grad()
    loss, tokens = model.thd_loss(mb)
    loss.backward()
    got = _grads(model)

    abs_diff, rel_diff = _max_diffs(got, want_grads)
    loss_rel = abs(loss.item() - want_loss.item()) / want_loss.item()
    print(f"\n[a] {pack_options}: T={batch.num_rows} loss {loss.item():.15g} (rel diff "
          f"{loss_rel:.3g}); grads max abs diff {abs_diff:.3g}, max rel diff {rel_diff:.3g}")
    # Every position but the last of a sample has a label; the SFT sample's prompt has none.
    assert float(tokens) == want_tokens == sum(len(s["input_ids"]) - 1 for s in samples) - 5
    assert torch.allclose(loss, want_loss, rtol=RTOL, atol=0)
    _assert_close(got, want_grads)


def test_padded_batch_equals_samples_alone():
    model = _model()
    samples = _samples()
    want_loss, want_grads, _ = _alone(model, samples)
    b = train_gpt.padded_microbatch(samples, 4)
    model.zero_grad()
    loss, _ = model.padded_loss(b["tokens"], b["labels"], b["loss_mask"], b["lengths"])
    loss.backward()
    abs_diff, rel_diff = _max_diffs(_grads(model), want_grads)
    print(f"\n[a] padded [B, L]: grads max abs diff {abs_diff:.3g}, max rel diff {rel_diff:.3g}")
    assert torch.allclose(loss, want_loss, rtol=RTOL, atol=0)
    _assert_close(_grads(model), want_grads)


def test_samples_do_not_see_each_other():
    """Changing one sample's tokens changes no other sample's logits (and does change its own)."""
    model = _model()
    samples = _samples()
    batch = thdpack.pack(samples, divisor=4)
    mb = microbatch_tensors(batch)
    layout = thd_layout(mb["cu_seqlens"], mb["cu_seqlens_padded"])
    with torch.no_grad():
        before = model(mb["tokens"][:, None], mb["position_ids"][:, None], layout)[:, 0]
        tokens = mb["tokens"].clone()
        start, end = int(mb["cu_seqlens_padded"][3]), int(mb["cu_seqlens_padded"][4])
        tokens[start + 5] = (tokens[start + 5] + 1) % 64  # sample 3, position 5
        after = model(tokens[:, None], mb["position_ids"][:, None], layout)[:, 0]
    changed = (before - after).abs().amax(dim=1) > 0
    assert not changed[:start + 5].any() and not changed[end:].any()
    assert changed[start + 5:start + 20].all()  # its own later real rows


# ------------------------------------------------------------------------------------------
# (b) dp 2 x cp 2 equals one process
# ------------------------------------------------------------------------------------------

def _one_global_batch(args, par, padded=False):
    dataset = train_gpt.make_dataset(args)
    model = train_gpt.build_model(args)
    packer = train_gpt.make_packer(args, par)
    samples = train_gpt.local_samples(dataset, DIST_STEP, args.global_batch, args.dp, par.dp_rank)
    out = train_gpt.global_batch_loss_and_grads(model, packer, samples, par, padded=padded,
                                                sample_of=dataset.sample)
    return out, _grads(model)


def _dp2cp2_worker(rank: int, out_dir: str) -> None:
    args = train_gpt.parse_args(["--nproc", "4", "--dp", "2", "--cp", "2"] + DIST_ARGS)
    par = train_gpt.setup_parallel(2, 2)
    results = {}
    for name, padded in (("packed", False), ("padded", True)):
        out, grads = _one_global_batch(args, par, padded)
        results[name] = {"loss": out.loss, "tokens": out.loss_tokens, "grads": grads,
                         "microbatches": out.microbatches}
    # A deliberate bug: read the zigzag slices as if they were contiguous ones.
    zigzag_rows = thdpack.cp_global_rows
    thdpack.cp_global_rows = lambda cu, cu_padded, cp, r, mode="zigzag": zigzag_rows(
        cu, cu_padded, cp, r, "contiguous")
    try:
        out, grads = _one_global_batch(args, par)
    finally:
        thdpack.cp_global_rows = zigzag_rows
    results["wrong_order"] = {"loss": out.loss, "grads": grads}
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


def test_dp2_cp2_equals_one_process(tmp_path, one_process_world):
    train_gpt.spawn(_dp2cp2_worker, 4, str(tmp_path), threads=1)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(4)]

    args = train_gpt.parse_args(DIST_ARGS)
    par = train_gpt.setup_parallel(1, 1)
    for mode in ("packed", "padded"):
        want, want_grads = _one_global_batch(args, par, padded=mode == "padded")
        for rank, got in enumerate(ranks):
            got = got[mode]
            abs_diff, rel_diff = _max_diffs(got["grads"], want_grads)
            if rank == 0:
                print(f"\n[b] {mode}: loss {got['loss']:.15g} vs {want.loss:.15g} "
                      f"(rel diff {abs(got['loss'] - want.loss) / want.loss:.3g}); grads max abs "
                      f"diff {abs_diff:.3g}, max rel diff {rel_diff:.3g}; micro-batches "
                      f"{got['microbatches']} per replica vs {want.microbatches}")
            assert got["tokens"] == want.loss_tokens
            assert math.isclose(got["loss"], want.loss, rel_tol=RTOL), (rank, mode)
            _assert_close(got["grads"], want_grads)
        if mode == "packed":
            # A wrong CP row order must be caught by the same comparison.
            broken = ranks[0]["wrong_order"]
            print(f"[b] wrong CP row order: loss {broken['loss']:.15g} vs {want.loss:.15g}")
            assert not math.isclose(broken["loss"], want.loss, rel_tol=1e-6)
            assert not all(torch.allclose(broken["grads"][n], want_grads[n], rtol=1e-6,
                                          atol=1e-9) for n in want_grads)


# ------------------------------------------------------------------------------------------
# (c) training
# ------------------------------------------------------------------------------------------

def test_loss_decreases(one_process_world):
    args = train_gpt.parse_args([
        "--mock-config", SMALL_MOCK, "--global-batch", "8", "--max-seqlen-per-rank", "64",
        "--vocab", "64", "--hidden", "32", "--heads", "2", "--layers", "2", "--lr", "1e-2",
        "--steps", "30", "--quiet"])
    losses = train_gpt.train(args, log=lambda line: None)
    first, last = float(np.mean(losses[:5])), float(np.mean(losses[-5:]))
    print(f"\n[c] mean loss of the first 5 steps {first:.3f}, of the last 5 {last:.3f}")
    assert all(math.isfinite(x) for x in losses)
    assert losses[0] > math.log(64) - 0.2  # starts near uniform over the vocabulary
    assert last < 0.6 * first


def test_command_line_runs_on_four_processes():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.abspath(EXAMPLES),
                                                    env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, os.path.join(EXAMPLES, "train_gpt.py"), "--nproc", "4",
               "--dp", "2", "--cp", "2", "--steps", "2", "--master-port",
               str(train_gpt.free_port()), "--global-batch", "8", "--hidden", "32",
               "--max-seqlen-per-rank", "64", "--mock-config", SMALL_MOCK]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = re.findall(r"^step +(\d+) \| loss ([0-9.]+) \| tokens/s +([0-9]+) .*fill ([0-9.]+)",
                       done.stdout, re.M)
    assert [int(s) for s, *_ in lines] == [0, 1], done.stdout
    for _, loss, rate, fill in lines:
        assert 0 < float(loss) < 10 and int(rate) > 0 and 0 < float(fill) <= 1
