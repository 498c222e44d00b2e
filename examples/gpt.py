"""A small GPT whose attention runs on thdpack's packed (THD) micro-batches, context parallel too.

This is an example model in plain PyTorch (CPU is enough). It shows what a model must do with the
fields of a THD pack (see ``docs/cu_seqlens.md``):

* the input of one micro-batch is one row of ``T`` tokens holding several samples back to back;
  ``cu_seqlens_padded`` gives the sample boundaries and ``cu_seqlens`` the real lengths;
* position embeddings are looked up with the pack's ``position_ids`` (they restart at 0 for every
  sample);
* attention never crosses samples and is causal within a sample; padding rows (the tail of each
  padded sample) never serve as keys for real rows, so the result for every real row equals running
  its sample alone, unpadded;
* the loss is the sum over rows of ``cross_entropy(logits, labels) * loss_mask``, returned with the
  number of loss tokens, so the caller normalises over the whole global batch.

Context parallelism (``cp_group`` of size ``cp > 1``): each CP rank holds its zigzag slice of the
pack (chunks ``r`` and ``2·cp-1-r`` of every sample, Transformer Engine's layout), while
``cu_seqlens``, ``cu_seqlens_padded`` and ``max_seqlen`` still describe the whole pack.
``thdpack.cp_global_rows`` gives the global row of every local row. Every attention layer gathers
the keys and values of the CP group (an autograd-aware all-gather: its backward sums the key/value
gradients back onto the ranks that own the rows), puts them back in global row order, and masks
with global rows, so the result is the one of the ``cp = 1`` computation.

The same model also runs ordinary padded batches (``[B, L]``, standard causal attention with a key
padding mask, optionally CP-sliced the same way), which ``train_gpt.py --padded`` uses as a
baseline.

Layout: activations are sequence-first, ``[rows, batch, hidden]`` (Megatron's ``[s, b, h]``); a
THD pack is batch 1. Typical use, on one micro-batch dict from ``thdpack.torch``::

    model = GPT(GPTConfig(vocab_size=512))
    loss_sum, num_tokens = model.thd_loss(mb, cp_group=cp_group)
    (loss_sum / global_num_tokens).backward()

Run ``/usr/bin/python3 examples/gpt.py`` (Debian's interpreter, which has torch) for a tiny
self-check (packed loss equals per-sample loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import thdpack

IGNORE_ID = -100


# --------------------------------------------------------------------------------------------
# Context-parallel all-gather with a correct backward on any process group.
# --------------------------------------------------------------------------------------------

class _GatherRows(torch.autograd.Function):
    """All-gather along dim 0 over a process group; backward reduce-scatters the gradient.

    ``torch.distributed.nn.functional.all_gather`` of torch 1.13 cannot be used here: with gloo
    its backward calls ``dist.scatter`` with *group* ranks where global ranks are expected, so it
    fails (or is wrong) on every group that does not contain global rank 0, i.e. on all CP groups
    but the first.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:  # noqa: D102
        ctx.group = group
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x, group=group)
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: D102
        size = dist.get_world_size(ctx.group)
        # Rank j's chunk of every rank's gradient goes to rank j, which sums them.
        received = torch.empty_like(grad)
        dist.all_to_all_single(received, grad.contiguous(), group=ctx.group)
        return received.view(size, -1, *grad.shape[1:]).sum(dim=0), None


def gather_rows(x: torch.Tensor, group) -> torch.Tensor:
    """Concatenation along dim 0 of ``x`` from every rank of ``group`` (autograd-aware)."""
    return _GatherRows.apply(x, group)


# --------------------------------------------------------------------------------------------
# Attention layouts: which keys each query row may see.
# --------------------------------------------------------------------------------------------

@dataclass
class AttentionLayout:
    """Where each local query row finds its keys, computed once per micro-batch.

    ``blocks`` lists ``(query rows, key rows, allowed)``: a slice of this rank's rows, a slice of
    the global (gathered, reordered) rows, and a bool mask ``[B or 1, q, k]``. Blocks cover the
    local rows in order. ``gather_order`` reorders the rows gathered from the CP group (rank
    after rank) into global order; it is None without CP.
    """

    blocks: List[Tuple[slice, slice, torch.Tensor]]
    cp_group: Optional[object] = None
    gather_order: Optional[torch.Tensor] = None


def _cp_size_rank(cp_group) -> Tuple[int, int]:
    if cp_group is None:
        return 1, 0
    return dist.get_world_size(cp_group), dist.get_rank(cp_group)


def _as_numpy_int32(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(values, dtype=np.int32))


def thd_layout(cu_seqlens, cu_seqlens_padded, cp_group=None, cp_mode: str = "zigzag",
               device=None) -> AttentionLayout:
    """The attention layout of one THD pack (of this rank's CP slice when ``cp_group`` is given).

    Query row ``q`` may attend key row ``k`` iff both lie in the same sample (by
    ``cu_seqlens_padded``), ``k`` is not after ``q`` in global row order (= position order within
    a sample), and ``k`` is a real row or ``q`` is a padding row. Every row may attend itself, so
    no softmax row is empty.
    """
    cu = _as_numpy_int32(cu_seqlens)
    cu_padded = _as_numpy_int32(cu_seqlens_padded)
    cp, rank = _cp_size_rank(cp_group)
    total = int(cu_padded[-1])
    if cp == 1:
        my_rows = np.arange(total, dtype=np.int64)
        gather_order = None
    else:
        rows_of = [thdpack.cp_global_rows(cu, cu_padded, cp, r, cp_mode) for r in range(cp)]
        my_rows = rows_of[rank]
        # Gathered position p holds global row cat(rows_of)[p]; argsort inverts that.
        gather_order = torch.from_numpy(np.argsort(np.concatenate(rows_of), kind="stable"))
        if device is not None:
            gather_order = gather_order.to(device)
    starts = cu_padded[:-1].astype(np.int64)
    real_lengths = (cu[1:] - cu[:-1]).astype(np.int64)
    # Local rows of one sample are contiguous (zigzag and contiguous modes alike).
    sample_of_row = np.searchsorted(cu_padded, my_rows, side="right") - 1
    run_starts = np.flatnonzero(np.diff(sample_of_row, prepend=-1)).tolist()
    blocks = []
    for first, last in zip(run_starts, run_starts[1:] + [len(my_rows)]):
        s = int(sample_of_row[first])
        q_rows = torch.from_numpy(my_rows[first:last] - starts[s])  # offsets within the sample
        k_rows = torch.arange(int(cu_padded[s + 1] - cu_padded[s]))
        q_pad = q_rows >= int(real_lengths[s])
        k_real = k_rows < int(real_lengths[s])
        allowed = (k_rows[None, :] <= q_rows[:, None]) & (k_real[None, :] | q_pad[:, None])
        if device is not None:
            allowed = allowed.to(device)
        blocks.append((slice(first, last), slice(int(cu_padded[s]), int(cu_padded[s + 1])),
                       allowed[None]))
    return AttentionLayout(blocks, cp_group if cp > 1 else None, gather_order)


def padded_layout(lengths: Sequence[int], seq_len: int, cp_group=None,
                  device=None) -> Tuple[AttentionLayout, torch.Tensor]:
    """The layout of a padded ``[B, seq_len]`` batch, and the global positions of local rows.

    Standard causal attention with a key padding mask: row ``q`` of sample ``b`` sees positions
    ``k <= q`` with ``k < lengths[b]`` (padding queries see the real prefix, never empty since
    every length is at least 1). With CP, ``seq_len`` must be a multiple of ``2·cp`` and each rank
    holds the zigzag rows of the sequence dimension (the same for every sample).
    """
    cp, rank = _cp_size_rank(cp_group)
    lengths_t = torch.as_tensor(list(lengths), dtype=torch.int64)
    if int(lengths_t.min()) < 1:
        raise ValueError("every sample of a padded batch needs at least one token")
    cu = np.array([0, seq_len], dtype=np.int32)
    if cp == 1:
        my_rows = np.arange(seq_len, dtype=np.int64)
        gather_order = None
    else:
        if seq_len % (2 * cp):
            raise ValueError(f"padded length {seq_len} is not a multiple of 2*cp = {2 * cp}")
        rows_of = [thdpack.cp_global_rows(cu, cu, cp, r) for r in range(cp)]
        my_rows = rows_of[rank]
        gather_order = torch.from_numpy(np.argsort(np.concatenate(rows_of), kind="stable"))
    q_pos = torch.from_numpy(my_rows)
    k_pos = torch.arange(seq_len)
    allowed = (k_pos[None, None, :] <= q_pos[None, :, None]) & \
        (k_pos[None, None, :] < lengths_t[:, None, None])
    if device is not None:
        allowed = allowed.to(device)
        gather_order = gather_order.to(device) if gather_order is not None else None
    layout = AttentionLayout([(slice(0, len(my_rows)), slice(0, seq_len), allowed)],
                             cp_group if cp > 1 else None, gather_order)
    return layout, q_pos


# --------------------------------------------------------------------------------------------
# The model.
# --------------------------------------------------------------------------------------------

@dataclass
class GPTConfig:
    """Sizes of the model. ``max_positions`` bounds the position ids of real tokens."""

    vocab_size: int = 512
    max_positions: int = 1024
    hidden: int = 64
    heads: int = 4
    layers: int = 2
    ffn: int = 256
    tie_embeddings: bool = True


class Attention(nn.Module):
    """Multi-head self-attention over an ``AttentionLayout`` (dense per block)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if config.hidden % config.heads:
            raise ValueError("hidden must be divisible by heads")
        self.heads = config.heads
        self.head_dim = config.hidden // config.heads
        self.qkv = nn.Linear(config.hidden, 3 * config.hidden)
        self.proj = nn.Linear(config.hidden, config.hidden)

    def forward(self, x: torch.Tensor, layout: AttentionLayout) -> torch.Tensor:
        """``x``: ``[rows, batch, hidden]`` (this rank's rows); returns the same shape."""
        rows, batch, _ = x.shape
        qkv = self.qkv(x).view(rows, batch, 3, self.heads, self.head_dim)
        q = qkv[:, :, 0]
        kv = qkv[:, :, 1:]
        if layout.cp_group is not None:
            kv = gather_rows(kv, layout.cp_group).index_select(0, layout.gather_order)
        k, v = kv[:, :, 0], kv[:, :, 1]
        scale = 1.0 / math.sqrt(self.head_dim)
        outputs = []
        for q_rows, k_rows, allowed in layout.blocks:
            qb = q[q_rows].permute(1, 2, 0, 3)          # [B, heads, q, d]
            kb = k[k_rows].permute(1, 2, 3, 0)          # [B, heads, d, k]
            vb = v[k_rows].permute(1, 2, 0, 3)          # [B, heads, k, d]
            scores = torch.matmul(qb, kb) * scale
            scores = scores.masked_fill(~allowed[:, None], float("-inf"))
            out = torch.matmul(torch.softmax(scores, dim=-1), vb)
            outputs.append(out.permute(2, 0, 1, 3).reshape(-1, batch, self.heads * self.head_dim))
        return self.proj(torch.cat(outputs, dim=0) if len(outputs) > 1 else outputs[0])


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.hidden)
        self.attn = Attention(config)
        self.ln2 = nn.LayerNorm(config.hidden)
        self.fc = nn.Linear(config.hidden, config.ffn)
        self.out = nn.Linear(config.ffn, config.hidden)

    def forward(self, x: torch.Tensor, layout: AttentionLayout) -> torch.Tensor:  # noqa: D102
        x = x + self.attn(self.ln1(x), layout)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token + learned position embeddings, pre-norm blocks, final norm, LM head."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.hidden)
        self.pos_emb = nn.Embedding(config.max_positions, config.hidden)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.hidden)
        self.head = None if config.tie_embeddings else nn.Linear(config.hidden, config.vocab_size,
                                                                 bias=False)
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2 style: N(0, 0.02), residual projections scaled by 1/sqrt(2·layers)."""
        for name, p in self.named_parameters():
            if p.dim() == 1:
                is_norm_weight = name.endswith("weight") and name.split(".")[-2].startswith("ln")
                nn.init.ones_(p) if is_norm_weight else nn.init.zeros_(p)
            elif name.endswith(("proj.weight", "out.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.config.layers))
            else:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor, position_ids: torch.Tensor,
                layout: AttentionLayout, padding_mask: Optional[torch.Tensor] = None
                ) -> torch.Tensor:
        """Logits ``[rows, batch, vocab]`` for sequence-first ``tokens``/``position_ids``.

        Position ids of padding rows may run past ``max_positions`` (they keep counting within a
        sample); they are clamped, which cannot change any real row.
        """
        if padding_mask is not None:
            position_ids = torch.where(padding_mask,
                                       position_ids.clamp(max=self.config.max_positions - 1),
                                       position_ids)
        x = self.tok_emb(tokens) + self.pos_emb(position_ids)
        for block in self.blocks:
            x = block(x, layout)
        x = self.ln_f(x)
        weight = self.tok_emb.weight if self.head is None else self.head.weight
        return F.linear(x, weight)

    # ---- THD packs ----

    def thd_loss(self, mb: dict, cp_group=None, cp_mode: str = "zigzag",
                 layout: Optional[AttentionLayout] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Summed loss and loss-token count of one micro-batch dict from ``thdpack.torch``.

        ``mb`` holds this rank's rows of ``tokens``, ``position_ids``, ``labels``, ``loss_mask``,
        ``padding_mask`` and the whole pack's ``cu_seqlens`` / ``cu_seqlens_padded``.
        """
        if layout is None:
            layout = thd_layout(mb["cu_seqlens"], mb["cu_seqlens_padded"], cp_group, cp_mode,
                                device=mb["tokens"].device)
        if layout.blocks[-1][0].stop != len(mb["tokens"]):
            raise ValueError(f"the pack metadata describes {layout.blocks[-1][0].stop} local rows "
                             f"but the micro-batch has {len(mb['tokens'])}")
        logits = self(mb["tokens"][:, None], mb["position_ids"][:, None], layout,
                      mb["padding_mask"][:, None].bool())[:, 0]
        return masked_loss(logits, mb["labels"], mb["loss_mask"])

    # ---- padded [B, L] batches ----

    def padded_loss(self, tokens: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor,
                    lengths: Sequence[int], cp_group=None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Summed loss and token count of a padded batch (``[B, L]`` tensors, full length L).

        With CP the tensors are sliced here (zigzag along the sequence, the same for every
        sample), so each CP rank computes its share; the gradients summed over the group equal
        the ``cp = 1`` ones.
        """
        batch, seq_len = tokens.shape
        layout, q_pos = padded_layout(lengths, seq_len, cp_group, device=tokens.device)
        q_pos = q_pos.to(tokens.device)
        padding = q_pos[None, :] >= torch.as_tensor(list(lengths), device=tokens.device)[:, None]
        logits = self(tokens[:, q_pos].t(), q_pos[:, None].expand(-1, batch), layout,
                      padding.t())
        return masked_loss(logits, labels[:, q_pos].t(), loss_mask[:, q_pos].t())


def loss_tokens(labels: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """The token count that normalises the loss: sum of loss_mask over rows with a label."""
    return (loss_mask * (labels != IGNORE_ID)).sum()


def masked_loss(logits: torch.Tensor, labels: torch.Tensor,
                loss_mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``sum(cross_entropy(logits, labels) * loss_mask)`` (ignoring -100) and the token count."""
    vocab = logits.shape[-1]
    losses = F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1),
                             ignore_index=IGNORE_ID, reduction="none")
    mask = loss_mask.reshape(-1).to(losses.dtype)
    return (losses * mask).sum(), loss_tokens(labels.reshape(-1), mask)


def _self_check() -> None:
    """Packed loss of three samples equals the sum of their losses run alone."""
    from thdpack.torch import microbatch_tensors

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, hidden=32, heads=2, layers=2, ffn=64)).double()
    samples = [np.arange(2, 2 + n) % 64 for n in (5, 9, 3)]
    batch = thdpack.pack(samples, divisor=4)  # padded to multiples of 4, as with cp = 2
    packed, _ = model.thd_loss(microbatch_tensors(batch))
    alone = sum(model.thd_loss(microbatch_tensors(thdpack.pack([s])))[0] for s in samples)
    print(f"packed loss {packed.item():.12f}, per-sample sum {alone.item():.12f}")
    assert torch.allclose(packed, alone, rtol=1e-12, atol=0)


if __name__ == "__main__":
    _self_check()
