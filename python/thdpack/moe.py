"""MoE expert-parallel dispatch and combine for packed (THD) inputs, on numpy arrays.

Every EP rank holds its own number of tokens (packed micro-batches differ in length). Experts are
laid out in contiguous blocks: with ``E`` experts over ``R`` EP ranks, rank ``r`` hosts experts
``[r*E/R, (r+1)*E/R)``. The names follow DeepEP's ``Buffer`` methods::

    from thdpack import moe
    per_rank, per_expert, in_rank = moe.get_dispatch_layout(topk_idx, num_experts, comm.size)
    recv_x, recv_idx, recv_w, counts, aligned, handle = moe.dispatch(
        comm, x, topk_idx, topk_weights, num_experts=64, expert_alignment=128)
    y = experts(recv_x, recv_idx, recv_w)       # each expert applies its gate weight
    out = moe.combine(comm, y, handle)          # [tokens, hidden], summed per token

``x`` and expert outputs are float32 ``[tokens or rows, hidden]``; ``topk_idx`` is int64
``[tokens, k]`` with -1 for no expert. Received rows are grouped by source rank, then source token
order; ``recv_idx`` holds local expert ids (-1 where the expert is on another rank) and ``recv_w``
the gate weights (0 there). ``padded=True`` reproduces HybridEP's equal shapes (every rank padded
to the group maximum rounded up to ``pad_alignment``, pad rows routed nowhere and trimmed after
combine) with identical results.

Backward: the gradient of ``dispatch`` is ``dispatch_backward`` (a combine) and the gradient of
``combine`` is ``combine_backward`` (a dispatch along the cached layout); ``combine_values`` with
``k`` columns carries the gradient of ``recv_w`` back. ``thdpack.torch.moe_dispatch`` and
``moe_combine`` wrap them in autograd.

All of these except ``get_dispatch_layout`` are collectives over ``comm`` (a thdpack
``Communicator``: ``thdpack.comm.TorchCommunicator(group)`` or ``mpi4py_communicator(comm)``);
every EP rank calls them in the same order. Bad routing, or ranks disagreeing on ``k``, the hidden
size or the number of experts, raise ``InvalidArgument`` on every rank.
"""

from __future__ import annotations

from ._thdpack import DispatchHandle
from ._thdpack import moe_combine as combine
from ._thdpack import moe_combine_backward as combine_backward
from ._thdpack import moe_combine_values as combine_values
from ._thdpack import moe_dispatch as dispatch
from ._thdpack import moe_dispatch_backward as dispatch_backward
from ._thdpack import moe_dispatch_layout as get_dispatch_layout

__all__ = ["DispatchHandle", "get_dispatch_layout", "dispatch", "combine", "dispatch_backward",
           "combine_backward", "combine_values"]
