#!/usr/bin/python3
"""Train the example GPT (examples/gpt.py) on CPU from thdpack's packed (THD) micro-batches.

Run from the repository root after ``bash scripts/setup.sh`` (which installs thdpack for Debian's
``/usr/bin/python3``, the interpreter with python3-torch; in a venv, ``pip install .`` first)::

    # 4 processes (torch.multiprocessing + gloo): data parallel 2 x context parallel 2
    /usr/bin/python3 examples/train_gpt.py --nproc 4 --dp 2 --cp 2 --steps 20

    # the same global batches as padded [B, L] micro-batches, to compare tokens/s
    /usr/bin/python3 examples/train_gpt.py --nproc 4 --dp 2 --cp 2 --steps 20 --padded

    # one process, pre-tokenized data: one {"input_ids": [...], "loss_mask"/"labels": [...]} a line
    /usr/bin/python3 examples/train_gpt.py --jsonl data.jsonl

Data. By default a mock dataset: lengths from thdpack's lognormal mock (``--mock-config``, default
lengths 16..256, mean 96) and thdpack's mock token content, computed here for this small
vocabulary: token ``j`` of sample ``i`` of length ``L`` is ``2 + (i + j) % (vocab - 2)`` for
``j < L - 1`` and the end-of-document id 1 last (thdpack's ``mock_token`` with
``vocab_size = --vocab``; ``thdpack.mock_dataset`` itself uses a 32000-token vocabulary, so only its
lengths are used). With ``--jsonl`` every token id must be below ``--vocab``.

A training step (``--dp`` x ``--cp`` = ``--nproc`` ranks, tp = pp = 1, Megatron rank order):

1. Each rank takes the samples of its DP index from global batch ``step``
   (``thdpack.global_batch_indices``); the CP ranks of one DP index hold the same samples.
2. ``thdpack.torch.ThdPacker.step`` (reading mode "megatron", scheduler "balanced") plans the
   global batch, moves every sample to the DP replica that packs it and returns this rank's
   micro-batches: its zigzag CP slice of each pack, ``cu_seqlens`` of the whole pack.
3. The loss-token count of the global batch is all-reduced first; each micro-batch then runs
   forward/backward with ``loss_sum / global_loss_tokens``, so gradients accumulate to the
   gradient of the global mean loss.
4. Gradients are all-reduced (SUM) over the world (dp x cp) and the optimizer steps; the seeded
   initialisation is identical on every rank, so the replicas stay identical.

Per step, rank 0 prints the loss, tokens/s (REAL tokens of the global batch / step wall time,
slowest rank), micro-batches per DP replica, ``fill`` = real tokens / (micro-batches x dp x cp x M)
and ``rows`` = real tokens / rows actually computed (packed: padded sample lengths; padded mode:
micro-batch size x longest sample, summed over micro-batches).

``--padded`` runs the same global batches with the same micro-batch grouping (the plan of the
packer), but as padded ``[B, L]`` batches, each sample padded to the longest of its micro-batch,
standard causal attention with a key padding mask, the same weights and loss definition (with CP,
the sequence dimension is zigzag-sliced the same way and keys/values are gathered).

Functions for tests and notebooks: ``train(args)`` (in an initialised process group; a single
process initialises its own) returns the losses; ``global_batch_loss_and_grads`` computes the loss
and all-reduced gradients of one global batch; ``spawn`` runs a function on N gloo processes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import thdpack
from thdpack.torch import PackedStep, ThdPacker

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, GPTConfig, loss_tokens  # noqa: E402

EOD_ID = 1
PAD_ID = 0
DEFAULT_MOCK = {"mode": "distribution", "type": "lognormal", "min_seq_len": 16,
                "max_seq_len": 256, "mean_seq_len": 96, "lognormal_sigma": 0.8,
                "size": 100000, "seed": 0}


# --------------------------------------------------------------------------------------------
# Arguments and data
# --------------------------------------------------------------------------------------------

def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command-line options (also the configuration object of ``train``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("parallelism")
    g.add_argument("--nproc", type=int, default=1, help="processes to spawn (= dp * cp)")
    g.add_argument("--dp", type=int, default=None, help="data-parallel size (default nproc/cp)")
    g.add_argument("--cp", type=int, default=1, help="context-parallel size")
    g.add_argument("--master-addr", default="127.0.0.1")
    g.add_argument("--master-port", type=int, default=29555)
    g.add_argument("--threads", type=int, default=0,
                   help="torch threads per process (0: cores / nproc)")
    g = p.add_argument_group("data")
    g.add_argument("--jsonl", default=None, help="pre-tokenized JSONL file")
    g.add_argument("--mock-config", default=json.dumps(DEFAULT_MOCK),
                   help="thdpack mock dataset config (JSON) for the sample lengths")
    g.add_argument("--global-batch", type=int, default=32, help="samples per optimizer step")
    g.add_argument("--max-seqlen-per-rank", type=int, default=256,
                   help="M = max_seqlen_per_dp_cp_rank; a pack holds at most M*cp tokens")
    g = p.add_argument_group("model and training")
    g.add_argument("--vocab", type=int, default=512)
    g.add_argument("--hidden", type=int, default=64)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--layers", type=int, default=2)
    g.add_argument("--ffn", type=int, default=0, help="MLP width (0: 4 * hidden)")
    g.add_argument("--max-positions", type=int, default=1024)
    g.add_argument("--untied", action="store_true", help="separate LM head weights")
    g.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    g.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    g.add_argument("--lr", type=float, default=3e-3)
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip (0: off)")
    g.add_argument("--steps", type=int, default=20)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--padded", action="store_true",
                   help="run padded [B, L] micro-batches instead of THD packs (baseline)")
    g.add_argument("--quiet", action="store_true", help="no per-step lines")
    args = p.parse_args(argv)
    return finish_args(args)


def finish_args(args: argparse.Namespace) -> argparse.Namespace:
    """Fills derived defaults and checks the sizes."""
    if args.dp is None:
        args.dp = max(1, args.nproc // args.cp)
    if args.dp * args.cp != args.nproc:
        raise SystemExit(f"--dp {args.dp} x --cp {args.cp} must equal --nproc {args.nproc}")
    if args.global_batch % args.dp:
        raise SystemExit(f"--global-batch {args.global_batch} is not divisible by --dp {args.dp}")
    if not args.ffn:
        args.ffn = 4 * args.hidden
    return args


class MockTokens:
    """thdpack mock lengths with thdpack's mock token content for a ``vocab``-token vocabulary."""

    def __init__(self, config_json: str, vocab: int):
        if vocab < 3:
            raise ValueError("the mock content needs a vocabulary of at least 3 tokens")
        self.lengths = thdpack.mock_dataset(config_json)
        self.vocab = vocab
        self.size = self.lengths.size

    def length(self, index: int) -> int:
        """Real length of sample ``index``."""
        return self.lengths.length(index)

    def sample(self, index: int) -> dict:
        """``{"id", "input_ids"}``: ``2 + (index + j) % (vocab - 2)``, end-of-document last."""
        j = np.arange(self.length(index), dtype=np.int64)
        tokens = 2 + (index + j) % (self.vocab - 2)
        tokens[-1] = EOD_ID
        return {"id": index, "input_ids": tokens}


class JsonlTokens:
    """A pre-tokenized JSONL file (thdpack.load_jsonl_dataset), checked against the vocabulary."""

    def __init__(self, path: str, vocab: int):
        self.data = thdpack.load_jsonl_dataset(path)
        self.vocab = vocab
        self.size = self.data.size

    def length(self, index: int) -> int:
        """Real length of sample ``index``."""
        return self.data.length(index)

    def sample(self, index: int) -> dict:
        """The sample's dict, with a check that every token id is below the vocabulary."""
        sample = self.data.sample(index)
        ids = np.asarray(sample["input_ids"])
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab):
            raise ValueError(f"sample {index} has token ids outside [0, {self.vocab})")
        return sample


def make_dataset(args: argparse.Namespace):
    """The training samples: ``--jsonl`` or the mock."""
    if args.jsonl:
        return JsonlTokens(args.jsonl, args.vocab)
    return MockTokens(args.mock_config, args.vocab)


def local_samples(dataset, step: int, global_batch: int, dp: int, dp_rank: int) -> List[dict]:
    """The samples DP rank ``dp_rank`` holds for global batch ``step`` (DP-rank-major split)."""
    ids = thdpack.global_batch_indices(step, global_batch, dataset.size)
    per = global_batch // dp
    return [dataset.sample(int(i)) for i in ids[dp_rank * per:(dp_rank + 1) * per]]


def build_model(args: argparse.Namespace) -> GPT:
    """The model with a seeded initialisation (identical on every rank)."""
    torch.manual_seed(args.seed)
    config = GPTConfig(vocab_size=args.vocab, max_positions=args.max_positions,
                       hidden=args.hidden, heads=args.heads, layers=args.layers, ffn=args.ffn,
                       tie_embeddings=not args.untied)
    return GPT(config).to(getattr(torch, args.dtype))


# --------------------------------------------------------------------------------------------
# Parallel setup
# --------------------------------------------------------------------------------------------

@dataclass
class Parallel:
    """This rank's place: process groups (None when of size 1) and coordinates."""

    dp: int
    cp: int
    cp_group: Optional[object]
    dp_group: Optional[object]
    dp_rank: int
    cp_rank: int
    world: int


def init_single_process() -> None:
    """A one-process gloo world (no port needed), unless a process group already exists."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def setup_parallel(dp: int, cp: int) -> Parallel:
    """Megatron-order CP and DP groups for tp = pp = 1 (collective: every rank must call it)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    topology = thdpack.Topology(tp=1, cp=cp, dp=dp)
    topology.check_world_size(world)
    mine = {}
    for kind in ("cp", "dp"):
        # new_group is collective: every rank creates every group, in the same order.
        for ranks in topology.all_groups(kind):
            group = dist.new_group(ranks)
            if rank in ranks:
                mine[kind] = group
    coords = topology.coordinates(rank)
    return Parallel(dp=dp, cp=cp, cp_group=mine["cp"], dp_group=mine["dp"],
                    dp_rank=coords["dp"], cp_rank=coords["cp"], world=world)


def make_packer(args: argparse.Namespace, par: Parallel) -> ThdPacker:
    """thdpack's packer for this rank (balanced scheduler, Megatron reading mode)."""
    return ThdPacker(max_seqlen_per_dp_cp_rank=args.max_seqlen_per_rank,
                     cp_group=par.cp_group, dp_group=par.dp_group, scheduler="balanced",
                     reading="megatron", model="tiny-gpt")


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(rank: int, nproc: int, addr: str, port: int, threads: int, fn: Callable,
             fn_args: tuple) -> None:
    torch.set_num_threads(threads or max(1, (os.cpu_count() or 1) // nproc))
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=nproc)
    try:
        fn(rank, *fn_args)
    finally:
        dist.destroy_process_group()


def spawn(fn: Callable, nproc: int, *fn_args, addr: str = "127.0.0.1",
          port: Optional[int] = None, threads: int = 0) -> None:
    """Runs ``fn(rank, *fn_args)`` on ``nproc`` processes joined in a gloo process group."""
    mp.spawn(_spawned, args=(nproc, addr, port or free_port(), threads, fn, fn_args),
             nprocs=nproc, join=True)


# --------------------------------------------------------------------------------------------
# One global batch
# --------------------------------------------------------------------------------------------

@dataclass
class StepOutput:
    """What one global batch did (identical on every rank)."""

    loss: float             # global mean loss over loss tokens
    loss_tokens: float      # global loss-token count
    real_tokens: int        # real tokens of the global batch
    microbatches: int       # micro-batches per DP replica
    computed_rows: int      # rows the model computed, summed over the world


def padded_microbatch(samples: List[dict], multiple: int) -> dict:
    """A padded ``[B, L]`` batch of whole samples; L = longest, rounded up to ``multiple``.

    Labels and loss masks come from ``thdpack.pack`` of each sample alone, so the loss definition
    is exactly the packed one.
    """
    packs = [thdpack.pack([s]) for s in samples]
    lengths = [p.num_rows for p in packs]
    seq_len = -(-max(lengths) // multiple) * multiple
    tokens = torch.full((len(packs), seq_len), PAD_ID, dtype=torch.int64)
    labels = torch.full((len(packs), seq_len), -100, dtype=torch.int64)
    loss_mask = torch.zeros((len(packs), seq_len), dtype=torch.float32)
    for b, p in enumerate(packs):
        tokens[b, :lengths[b]] = torch.from_numpy(np.asarray(p.tokens))
        labels[b, :lengths[b]] = torch.from_numpy(np.asarray(p.labels))
        loss_mask[b, :lengths[b]] = torch.from_numpy(np.asarray(p.loss_mask))
    return {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "lengths": lengths}


def _padded_rows(packed: PackedStep, multiple: int) -> int:
    """Rows a padded run of this plan computes over the world (B x longest per pack)."""
    batch = packed.result.batch
    length = dict(zip(batch.ids.tolist(), batch.real_lengths.tolist()))
    rows = 0
    for step_packs in packed.result.plan.to_list():
        for ids in step_packs:
            if ids:
                rows += len(ids) * (-(-max(length[i] for i in ids) // multiple) * multiple)
    return rows


def _all_reduce(values: List[float], op=dist.ReduceOp.SUM) -> List[float]:
    tensor = torch.tensor(values, dtype=torch.float64)
    if dist.get_world_size() > 1:
        dist.all_reduce(tensor, op=op)
    return tensor.tolist()


def all_reduce_gradients(model: torch.nn.Module) -> None:
    """Sums every parameter's gradient over the world (one flat all-reduce)."""
    if dist.get_world_size() == 1:
        return
    params = list(model.parameters())
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()


def global_batch_loss_and_grads(model: GPT, packer: ThdPacker, samples: List[dict],
                                par: Parallel, padded: bool = False,
                                sample_of: Optional[Callable[[int], dict]] = None) -> StepOutput:
    """Loss of one global batch; leaves the world-summed gradients in ``model``'s ``.grad``.

    Collective over the world. ``samples`` are this rank's (its DP index's) samples. The gradient
    is that of the global mean loss (sum of loss over all loss tokens / their global count).
    ``padded`` runs the packer's micro-batch grouping as padded [B, L] batches; it needs
    ``sample_of(id)`` to fetch each sample whole.
    """
    packed = packer.step(samples)
    cp_group = par.cp_group if par.cp > 1 else None
    multiple = 2 * par.cp if par.cp > 1 else 1
    if padded:
        if sample_of is None:
            raise ValueError("padded mode needs sample_of(id)")
        mbs = [padded_microbatch([sample_of(int(i)) for i in mb["sample_ids"]], multiple)
               for mb in packed.microbatches]
        # The padded tensors are whole here (the model slices them for CP): count on CP rank 0.
        local = sum(float(loss_tokens(mb["labels"], mb["loss_mask"])) for mb in mbs)
        local = local if par.cp_rank == 0 else 0.0
        computed_rows = _padded_rows(packed, multiple)
    else:
        mbs = packed.microbatches
        local = sum(float(loss_tokens(mb["labels"], mb["loss_mask"])) for mb in mbs)
        computed_rows = int(packed.flops["seqlen_sum_padded"])
    (global_tokens,) = _all_reduce([local])
    model.zero_grad(set_to_none=False)
    loss_sum = 0.0
    for mb in mbs:
        if padded:
            loss, _ = model.padded_loss(mb["tokens"], mb["labels"], mb["loss_mask"],
                                        mb["lengths"], cp_group)
        else:
            loss, _ = model.thd_loss(mb, cp_group)
        (loss / max(global_tokens, 1.0)).backward()
        loss_sum += float(loss.detach())
    all_reduce_gradients(model)
    (global_loss_sum,) = _all_reduce([loss_sum])
    return StepOutput(loss=global_loss_sum / max(global_tokens, 1.0), loss_tokens=global_tokens,
                      real_tokens=int(packed.flops["seqlen_sum"]),
                      microbatches=packed.num_microbatches, computed_rows=computed_rows)


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------

def make_optimizer(args: argparse.Namespace, model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW or SGD over all parameters."""
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                               weight_decay=args.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95),
                             weight_decay=args.weight_decay)


def train(args: argparse.Namespace, log: Callable[[str], None] = print) -> List[float]:
    """Trains ``args.steps`` steps; returns the global loss of every step (on every rank).

    Runs in the current process group (one process without one initialises its own). Rank 0
    calls ``log`` with a line per step and a summary.
    """
    init_single_process()
    if dist.get_world_size() != args.dp * args.cp:
        raise ValueError(f"world of {dist.get_world_size()} ranks, expected dp*cp = "
                         f"{args.dp * args.cp}")
    par = setup_parallel(args.dp, args.cp)
    dataset = make_dataset(args)
    model = build_model(args)
    optimizer = make_optimizer(args, model)
    packer = make_packer(args, par)
    rank0 = dist.get_rank() == 0
    mode = "padded" if args.padded else "packed"
    if rank0:
        log(f"# {mode}: dp={args.dp} cp={args.cp} M={args.max_seqlen_per_rank} "
            f"global_batch={args.global_batch} model: hidden={args.hidden} layers={args.layers} "
            f"heads={args.heads} vocab={args.vocab} {args.dtype}")
    losses, rates = [], []
    for step in range(args.steps):
        samples = local_samples(dataset, step, args.global_batch, args.dp, par.dp_rank)
        start = time.perf_counter()
        out = global_batch_loss_and_grads(model, packer, samples, par, padded=args.padded,
                                          sample_of=dataset.sample)
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        (seconds,) = _all_reduce([time.perf_counter() - start], op=dist.ReduceOp.MAX)
        losses.append(out.loss)
        rates.append(out.real_tokens / seconds)
        capacity = out.microbatches * args.dp * args.cp * args.max_seqlen_per_rank
        if rank0 and not args.quiet:
            log(f"step {step:4d} | loss {out.loss:.4f} | tokens/s {rates[-1]:9.0f} | "
                f"micro-batches {out.microbatches} | fill {out.real_tokens / capacity:.3f} | "
                f"rows {out.real_tokens / out.computed_rows:.3f} | {seconds * 1e3:.0f} ms")
    if rank0 and len(rates) > 1:
        log(f"# {mode}: mean tokens/s over steps 1..{len(rates) - 1}: "
            f"{np.mean(rates[1:]):.0f} (real tokens)")
    return losses


def _train_worker(rank: int, args: argparse.Namespace) -> None:
    train(args, log=lambda line: print(line, flush=True))


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Command-line entry point: spawns ``--nproc`` processes (or runs in this one)."""
    args = parse_args(argv)
    if args.nproc == 1:
        if args.threads:
            torch.set_num_threads(args.threads)
        train(args, log=lambda line: print(line, flush=True))
    else:
        spawn(_train_worker, args.nproc, args, addr=args.master_addr, port=args.master_port,
              threads=args.threads)


if __name__ == "__main__":
    main()
