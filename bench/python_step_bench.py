"""Data-loader overhead (BENCHMARKS.md figure 13): thdpack.torch over 4 gloo processes.

Per step each rank holds about 1.38M tokens (samples drawn from longtail-32k, token ids only, as
pretraining data has them). Measured in the same run, medians over repetitions:
  - prepare: ThdPacker.step (gather, plan, exchange, pack) per rank, the slowest rank per step.
    No sample carries labels or a loss mask, so the exchange sends tokens alone (8 bytes per real
    row) and labels and loss mask are derived on arrival;
  - raw: one all_to_all_single moving the same bytes each rank sent in the step, right after the
    step (so that both see the same load on the machine), between buffers kept from step to step
    (as the pipeline keeps its own);
  - rows: the same step with every sample given a loss mask of ones (the same micro-batches), so
    that the exchange sends rows (tokens, labels and loss mask, 20 bytes per row, as it does for
    SFT data), its raw exchange, and the token-only preparation against that raw exchange (the
    bytes of the rows the step delivers);
  - wait: with PackedSteps(prefetch=True) and a training step that takes `--train-ms` (a sleep:
    training runs on the accelerator, not on these cores; default twice the measured prepare
    time, so that the figure is the cost of the hand-over, not the machine's load), the time the
    loop waits for data.

  - solo: the same preparation in a world of one process (no exchange: every row stays), the
    CPU cost of assembly alone;
  - load: the machine's 1-minute load average before and after (the cores are shared).

    /usr/bin/python3 bench/python_step_bench.py [--ranks 4] [--reps 9] [--tokens-per-rank N]
                                                [--out F.json]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import thdpack
from thdpack.torch import ThdPacker
from thdpack.torch_data import PackedSteps

TOKENS_PER_RANK = 1_380_000


def rank_samples(dataset, rank, ranks, steps, tokens_per_rank):
    """Per step, this rank's samples: consecutive dataset samples up to tokens_per_rank tokens."""
    out, at = [], 0
    for _ in range(steps):
        for r in range(ranks):
            chunk, tokens = [], 0
            while tokens < tokens_per_rank:
                chunk.append(at)
                tokens += dataset.length(at)
                at += 1
            if r == rank:
                out.append(chunk)
    return out


class _Indexed:
    """A map-style dataset over the mock dataset, returning dicts of numpy arrays."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return self.dataset.size

    def __getitem__(self, i):
        return {"input_ids": self.dataset.sample(int(i))["input_ids"]}


def _slowest(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def solo_worker(rank, store, reps, tokens_per_rank, out):
    """Prepare of rank 0's samples of each step in a one-process world (no exchange)."""
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    dataset = thdpack.mock_dataset(thdpack.workload("longtail-32k")["dataset_config"])
    steps = rank_samples(dataset, 0, 1, reps, tokens_per_rank)
    samples = [[dataset.sample(i) for i in chunk] for chunk in steps]
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=32768, model="llama3-8b")
    times = []
    for chunk in samples:
        t0 = time.perf_counter()
        packer.step(chunk)
        times.append(time.perf_counter() - t0)
    with open(out, "w") as f:
        json.dump({"solo_prepare_ms": 1e3 * statistics.median(times)}, f)
    dist.destroy_process_group()


class RawExchange:
    """all_to_all_single of a given size between buffers kept from step to step (touched when they
    grow), as the pipeline keeps its own: a fresh buffer would fault its pages in inside the timed
    exchange."""

    def __init__(self, rank, ranks):
        self.rank, self.ranks = rank, ranks
        self.send = torch.zeros(0, dtype=torch.uint8)
        self.recv = torch.zeros(0, dtype=torch.uint8)

    def time(self, nbytes):
        """Seconds of the slowest rank; every rank sends each peer an equal share of what the
        largest sender sent."""
        per_peer = int(_slowest(float(nbytes))) // (self.ranks - 1)
        counts = [0 if r == self.rank else per_peer for r in range(self.ranks)]
        total = sum(counts)
        if total > self.send.numel():
            self.send = torch.zeros(total + total // 4, dtype=torch.uint8)
            self.recv = torch.zeros(total + total // 4, dtype=torch.uint8)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(self.recv[:total], self.send[:total], counts, counts)
        return _slowest(time.perf_counter() - t0)


def timed_step(packer, samples):
    """(seconds of the slowest rank, bytes this rank sent in the exchange)"""
    dist.barrier()
    t0 = time.perf_counter()
    step = packer.step(samples)
    return _slowest(time.perf_counter() - t0), step.result.traffic["exchange_bytes"]


def with_loss_masks(samples):
    """The samples with a loss mask of ones: the same micro-batches, exchanged as rows."""
    return [dict(s, loss_mask=np.ones(len(s["input_ids"]), dtype=np.float32)) for s in samples]


def worker(rank, ranks, store, reps, tokens_per_rank, train_ms, out):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=ranks)
    config = thdpack.workload("longtail-32k")["dataset_config"]
    dataset = thdpack.mock_dataset(config)
    steps = rank_samples(dataset, rank, ranks, reps, tokens_per_rank)
    samples = [[dataset.sample(i) for i in chunk] for chunk in steps]
    masked = [with_loss_masks(chunk) for chunk in samples]
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=32768, model="llama3-8b")
    rows_packer = ThdPacker(max_seqlen_per_dp_cp_rank=32768, model="llama3-8b")
    raw_exchange = RawExchange(rank, ranks)
    prepare, raw, sent = [], [], []
    rows_prepare, rows_raw, rows_sent = [], [], []
    for chunk, masked_chunk in zip(samples, masked):
        # Each step, then right after it the raw exchange of its bytes: both see the same load.
        seconds, nbytes = timed_step(packer, chunk)
        prepare.append(seconds)
        sent.append(nbytes)
        raw.append(raw_exchange.time(nbytes))
        seconds, nbytes = timed_step(rows_packer, masked_chunk)
        rows_prepare.append(seconds)
        rows_sent.append(nbytes)
        rows_raw.append(raw_exchange.time(nbytes))

    if train_ms <= 0:
        train_ms = 2e3 * statistics.median(prepare)  # the same on every rank (slowest-rank times)
    # Prefetch: the same data through PackedSteps, a sleep standing in for the training step.
    private = ThdPacker(max_seqlen_per_dp_cp_rank=32768, model="llama3-8b", private_groups=True)
    per_step = len(steps[0])
    indices = [i for chunk in steps for i in chunk]
    loader = PackedSteps(private, _Indexed(dataset), samples_per_step=per_step,
                         sampler=indices[: per_step * reps], prefetch=True)
    waits = []
    iterator = iter(loader)
    while True:
        t0 = time.perf_counter()
        step = next(iterator, None)
        if step is None:
            break
        waits.append(time.perf_counter() - t0)
        time.sleep(train_ms / 1e3)
    waits = [_slowest(w) for w in waits]
    if rank == 0:
        tokens = sum(int(s["input_ids"].size) for s in samples[0])
        result = {"ranks": ranks, "tokens_per_rank": tokens, "reps": reps,
                  "prepare_ms": 1e3 * statistics.median(prepare),
                  "raw_exchange_ms": 1e3 * statistics.median(raw),
                  "exchange_bytes_per_rank": int(statistics.median(sent)),
                  "train_ms": train_ms,
                  # The first step has nothing to overlap with; the rest is the steady state.
                  "prefetch_wait_ms": 1e3 * statistics.median(waits[1:]),
                  "first_step_wait_ms": 1e3 * waits[0],
                  "waits_ms": [round(1e3 * w, 3) for w in waits]}
        result["prepare_over_raw"] = result["prepare_ms"] / result["raw_exchange_ms"]
        # The same ratio step by step (each step against the exchange right after it).
        result["prepare_over_raw_per_step_median"] = statistics.median(
            p / r for p, r in zip(prepare, raw))
        result["rows"] = {"prepare_ms": 1e3 * statistics.median(rows_prepare),
                          "raw_exchange_ms": 1e3 * statistics.median(rows_raw),
                          "exchange_bytes_per_rank": int(statistics.median(rows_sent))}
        result["rows"]["prepare_over_raw"] = (result["rows"]["prepare_ms"] /
                                              result["rows"]["raw_exchange_ms"])
        # Token-only preparation against the raw exchange of the rows it delivers.
        result["prepare_over_rows_raw"] = result["prepare_ms"] / result["rows"]["raw_exchange_ms"]
        result["wait_over_raw"] = result["prefetch_wait_ms"] / result["raw_exchange_ms"]
        with open(out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--tokens-per-rank", type=int, default=TOKENS_PER_RANK)
    ap.add_argument("--train-ms", type=float, default=0.0,
                    help="training step (a sleep); default: twice the measured prepare time")
    ap.add_argument("--out")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="thdpack-bench-") as tmp:
        path = os.path.join(tmp, "result.json")
        solo = os.path.join(tmp, "solo.json")
        mp.spawn(solo_worker, args=(os.path.join(tmp, "solo-store"), args.reps,
                                    args.tokens_per_rank, solo), nprocs=1, join=True)
        mp.spawn(worker, args=(args.ranks, os.path.join(tmp, "store"), args.reps,
                               args.tokens_per_rank, args.train_ms, path),
                 nprocs=args.ranks, join=True)
        with open(path) as f:
            result = json.load(f)
        with open(solo) as f:
            result.update(json.load(f))
    result["load_average"] = [load_before, os.getloadavg()[0]]
    result["cores"] = os.cpu_count()
    print(f"{result['ranks']} gloo ranks, {result['tokens_per_rank']} tokens per rank per step, "
          f"median of {result['reps']}: prepare {result['prepare_ms']:.1f} ms, raw exchange of "
          f"the same bytes {result['raw_exchange_ms']:.1f} ms ({result['prepare_over_raw']:.2f}x; "
          f"step by step {result['prepare_over_raw_per_step_median']:.2f}x); raw exchange of the "
          f"rows it delivers {result['rows']['raw_exchange_ms']:.1f} ms "
          f"({result['prepare_over_rows_raw']:.2f}x); with loss masks (rows on the wire): prepare "
          f"{result['rows']['prepare_ms']:.1f} ms, its raw exchange "
          f"{result['rows']['raw_exchange_ms']:.1f} ms ({result['rows']['prepare_over_raw']:.2f}x); "
          f"with prefetch and a {result['train_ms']:.0f} ms step the loop waits "
          f"{result['prefetch_wait_ms']:.2f} ms ({100 * result['wait_over_raw']:.1f}% of raw); "
          f"one process, no exchange: prepare {result['solo_prepare_ms']:.1f} ms; load average "
          f"{result['load_average'][0]:.2f} -> {result['load_average'][1]:.2f} on "
          f"{result['cores']} cores")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
