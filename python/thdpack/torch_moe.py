"""MoE dispatch and combine as differentiable torch operations (re-exported by ``thdpack.torch``).

::

    d = moe_dispatch(x, topk_idx, topk_weights, num_experts=64, group=ep_group)
    y = my_experts(d.recv_x, d.recv_topk_idx, d.recv_topk_weights, d.num_recv_tokens_per_expert)
    out = moe_combine(y, d)                  # [tokens, hidden], summed per token
    out.sum().backward()                     # gradients reach x, topk_weights and the experts

Autograd uses the backward duality of thdpack.moe: the backward of dispatch is a combine (for
``recv_x``, and for ``recv_topk_weights`` with ``k`` columns) and the backward of combine is a
dispatch along the cached layout. ``topk_idx`` is not differentiable (route with a separate,
detached top-k; the gate's gradient flows through ``topk_weights``).

Values travel through host memory as float32 (other dtypes are converted and the results cast
back): thdpack's collectives run over the Communicator, not GPU buffers. Every EP rank calls
forward and backward in the same order, as with any collective.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from . import _thdpack


def _host(t: torch.Tensor, dtype=np.float32) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=dtype)


def _like(array: np.ndarray, reference: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(array).to(device=reference.device, dtype=reference.dtype)


def _communicator(group, comm) -> "_thdpack.Communicator":
    if comm is not None:
        return comm
    from .comm import TorchCommunicator

    return TorchCommunicator(group)


class _Slot:
    """Carries the handle out of the autograd function (forward returns tensors only)."""

    handle: Any = None
    tokens_per_expert: Any = None
    aligned_tokens_per_expert: Any = None


class MoeDispatch(torch.autograd.Function):
    """dispatch (forward) / combine (backward). Use ``moe_dispatch``."""

    @staticmethod
    def forward(ctx, x, topk_weights, topk_idx, comm, options, slot):
        recv_x, recv_idx, recv_w, per_expert, aligned, handle = _thdpack.moe_dispatch(
            comm, _host(x), _host(topk_idx, np.int64), _host(topk_weights), **options)
        ctx.comm, ctx.handle = comm, handle
        ctx.x, ctx.w = torch.empty(0, dtype=x.dtype, device=x.device), torch.empty(
            0, dtype=topk_weights.dtype, device=topk_weights.device)
        slot.handle, slot.tokens_per_expert, slot.aligned_tokens_per_expert = (
            handle, per_expert.tolist(), aligned.tolist())
        recv_idx_t = torch.from_numpy(recv_idx).to(x.device)
        ctx.save_for_backward(recv_idx_t)
        ctx.mark_non_differentiable(recv_idx_t)
        return _like(recv_x, x), _like(recv_w, topk_weights), recv_idx_t

    @staticmethod
    def backward(ctx, grad_recv_x, grad_recv_w, _grad_idx):
        (recv_idx,) = ctx.saved_tensors
        grad_x = _thdpack.moe_dispatch_backward(ctx.comm, _host(grad_recv_x), ctx.handle)
        # Always run the weights' combine too, so that every rank makes the same collectives
        # whatever its own requires_grad flags say. Each (token, expert) weight is local on one
        # rank only: mask the others before summing.
        masked = torch.where(recv_idx >= 0, grad_recv_w, torch.zeros_like(grad_recv_w))
        grad_w = _thdpack.moe_combine_values(ctx.comm, _host(masked), ctx.handle)
        return (_like(grad_x, ctx.x), _like(grad_w, ctx.w) if ctx.needs_input_grad[1] else None,
                None, None, None, None)


class MoeCombine(torch.autograd.Function):
    """combine (forward) / cached dispatch (backward). Use ``moe_combine``."""

    @staticmethod
    def forward(ctx, expert_output, comm, handle):
        ctx.comm, ctx.handle = comm, handle
        ctx.y = torch.empty(0, dtype=expert_output.dtype, device=expert_output.device)
        return _like(_thdpack.moe_combine(comm, _host(expert_output), handle), expert_output)

    @staticmethod
    def backward(ctx, grad_output):
        grad = _thdpack.moe_combine_backward(ctx.comm, _host(grad_output), ctx.handle)
        return _like(grad, ctx.y), None, None


@dataclass
class MoeDispatchOutput:
    """What ``moe_dispatch`` returns: the received rows (grouped by source rank, then source token
    order) and what ``moe_combine`` needs."""

    recv_x: torch.Tensor                 #: [rows, hidden]
    recv_topk_idx: torch.Tensor          #: [rows, k] local expert ids, -1 where not local
    recv_topk_weights: torch.Tensor      #: [rows, k] gate weights, 0 where not local
    num_recv_tokens_per_expert: list     #: per local expert
    aligned_tokens_per_expert: list      #: the same rounded up to expert_alignment
    handle: "_thdpack.DispatchHandle" = field(repr=False)
    comm: Any = field(repr=False)


def moe_dispatch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, *,
                 num_experts: int, group=None, comm=None, expert_alignment: int = 1,
                 padded: bool = False, pad_alignment: int = 64,
                 pad_group: Optional["_thdpack.Communicator"] = None) -> MoeDispatchOutput:
    """Sends each token of ``x`` [tokens, hidden] once to every EP rank hosting one of its top-k
    experts (``topk_idx`` [tokens, k], -1 for none). The EP group is ``comm`` (a thdpack
    Communicator) or the torch.distributed ``group`` (default: the world). Differentiable in ``x``
    and ``topk_weights``. ``padded=True``: HybridEP's equal shapes, identical results."""
    comm = _communicator(group, comm)
    slot = _Slot()
    options = dict(num_experts=num_experts, expert_alignment=expert_alignment, padded=padded,
                   pad_alignment=pad_alignment, pad_group=pad_group)
    recv_x, recv_w, recv_idx = MoeDispatch.apply(x, topk_weights, topk_idx, comm, options, slot)
    return MoeDispatchOutput(recv_x, recv_idx, recv_w, slot.tokens_per_expert,
                             slot.aligned_tokens_per_expert, slot.handle, comm)


def moe_combine(expert_output: torch.Tensor, dispatched: MoeDispatchOutput) -> torch.Tensor:
    """Sends ``expert_output`` [rows, hidden] (in ``dispatched``'s row order) back and sums it per
    source token, unweighted (experts apply their gate weights). Returns [tokens, hidden];
    differentiable."""
    return MoeCombine.apply(expert_output, dispatched.comm, dispatched.handle)
