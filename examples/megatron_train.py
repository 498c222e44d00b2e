"""Megatron-LM's sequence-packing training loop with thdpack in place of Megatron's data schedule.

A training script written for Megatron-LM's packed-sequence path calls, once per global batch,
``wrap_data_iterator`` and then, in every forward step, ``get_batch_on_this_rank_for_sequence_packing``.
Switching to thdpack is the import below; the calls, the config fields they read and the tuples
they return stay the same. This example runs that loop on CPU without Megatron installed: the
config is a plain object with Megatron's field names, the process groups are gloo groups in
Megatron's rank order, the data iterator yields what Megatron's packing path takes (dicts of 1-D
tensors, here from thdpack's mock in the order MegatronPretrainingSampler deals samples), and the
model is the small THD GPT of ``examples/gpt.py``::

    # 4 processes: data parallel 2 x context parallel 2, Megatron's dp_balanced plan
    /usr/bin/python3 examples/megatron_train.py --nproc 4 --dp 2 --cp 2 --steps 5

    # thdpack's workload-aware plan, every pack padded to a static shape (CUDA graphs)
    /usr/bin/python3 examples/megatron_train.py --scheduler balanced --static-shapes

Each step prints the micro-batch count, the loss and the seqlen sums Megatron's FLOPs counter
takes.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from types import SimpleNamespace
from typing import List, Optional, Sequence

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpt import GPT, GPTConfig  # noqa: E402
from train_gpt import all_reduce_gradients, setup_parallel, spawn  # noqa: E402

from thdpack.megatron import (  # noqa: E402  (was: megatron.core.datasets.data_schedule)
    get_batch_on_this_rank_for_sequence_packing,
    mock_data_iterator,
    release_packers,
    wrap_data_iterator,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=4, help="processes (dp x cp)")
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--cp", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--scheduler", default="dp_balanced", help="sequence_packing_scheduler")
    p.add_argument("--seq-length", type=int, default=256,
                   help="Megatron's default mock for this length; also max_seqlen_per_dp_cp_rank")
    p.add_argument("--num-microbatches", type=int, default=8,
                   help="items each reading rank pulls per global batch")
    p.add_argument("--static-shapes", action="store_true",
                   help="every pack max_seqlen_per_dp_cp_rank x cp rows, 9 cu_seqlens entries")
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3)
    args = p.parse_args(argv)
    if args.dp * args.cp != args.nproc:
        p.error(f"--dp x --cp must equal --nproc ({args.dp} x {args.cp} != {args.nproc})")
    return args


def megatron_config(args: argparse.Namespace) -> SimpleNamespace:
    """The fields of Megatron's TransformerConfig / arguments the packing path reads."""
    return SimpleNamespace(sequence_packing_scheduler=args.scheduler,
                           max_seqlen_per_dp_cp_rank=args.seq_length,
                           context_parallel_size=args.cp, sequence_parallel=False,
                           virtual_pipeline_model_parallel_size=None,
                           microbatch_group_size_per_vp_stage=None,
                           sft_mock_dataset_config_json=None,
                           thd_max_packed_sequences=8 if args.static_shapes else None)


def train(rank: int, args: argparse.Namespace, out: Optional[list] = None) -> List[float]:
    par = setup_parallel(args.dp, args.cp)
    pg_collection = SimpleNamespace(tp=None, pp=None, cp=par.cp_group, dp=par.dp_group)
    config = megatron_config(args)
    static = dict(tail_align="capacity", fixed_cu_seqlens_entries=10) if args.static_shapes else {}
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=args.vocab, max_positions=args.seq_length))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    # With tp = pp = 1 every rank reads (Megatron: TP-rank 0 of the first and last stage).
    data_iterator = mock_data_iterator(config, par.dp_rank, args.dp, seq_length=args.seq_length)
    losses = []
    for step in range(args.steps):
        iterator, num_microbatches, seqlen_sum, seqlen_squared_sum = wrap_data_iterator(
            data_iterator, config, args.num_microbatches, pg_collection, **static)
        optimizer.zero_grad()
        loss_sum = torch.zeros(())
        tokens_sum = torch.zeros(())
        for _ in range(num_microbatches):
            (tokens, labels, loss_mask, _attention_mask, position_ids, packed_seq_params,
             padding_mask) = get_batch_on_this_rank_for_sequence_packing(
                iterator, None, False, None, pg_collection=pg_collection, config=config)
            mb = {"tokens": tokens[0] % args.vocab, "labels": labels[0] % args.vocab,
                  "loss_mask": loss_mask[0], "position_ids": position_ids[0],
                  "padding_mask": padding_mask[0],
                  "cu_seqlens": packed_seq_params.cu_seqlens_q,
                  "cu_seqlens_padded": packed_seq_params.cu_seqlens_q_padded}
            mb_loss, mb_tokens = model.thd_loss(mb, cp_group=par.cp_group)
            mb_loss.backward()
            loss_sum += mb_loss.detach()
            tokens_sum += mb_tokens
        totals = torch.stack([loss_sum, tokens_sum]).double()
        dist.all_reduce(totals)
        all_reduce_gradients(model)
        for p in model.parameters():
            p.grad /= totals[1].item()
        optimizer.step()
        loss = totals[0].item() / totals[1].item()
        losses.append(loss)
        if rank == 0:
            print(f"step {step}: {num_microbatches} micro-batches, loss {loss:.4f}, "
                  f"seqlen_sum {seqlen_sum:.0f}, seqlen_squared_sum {seqlen_squared_sum:.0f}",
                  flush=True)
    # The adapter's packers hold process groups: they go before the groups are destroyed (left to
    # the interpreter's exit, a group can be destroyed on a gloo thread, which aborts).
    release_packers()
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"rank {rank}: non-finite loss {losses}")
    return losses


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    spawn(train, args.nproc, args, threads=1)


if __name__ == "__main__":
    main()
