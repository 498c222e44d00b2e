"""MoE dispatch/combine from Python: the numpy layout, and the torch autograd wrapper over gloo
processes compared with a dense single-process computation (outputs and every gradient)."""

import numpy as np
import pytest
import torch
import torch.distributed as dist

import thdpack
from thdpack import moe
from thdpack.comm import TorchCommunicator
from thdpack.torch import moe_combine, moe_dispatch

from dist_support import run_processes

HIDDEN = 5
TOPK = 2


def test_layout_counts_each_token_once_per_rank():
    # 4 experts on 2 ranks: token 0 -> experts 0, 1 (rank 0 once); token 1 -> 1, 3; token 2 -> 2.
    topk = np.array([[0, 1], [1, 3], [-1, 2]], dtype=np.int64)
    per_rank, per_expert, in_rank = moe.get_dispatch_layout(topk, 4, 2)
    assert per_rank.tolist() == [2, 2]
    assert per_expert.tolist() == [1, 2, 1, 1]
    assert in_rank.tolist() == [[True, False], [True, True], [False, True]]
    with pytest.raises(thdpack.InvalidArgument, match="outside"):
        moe.get_dispatch_layout(np.array([[0, 4]]), 4, 2)
    with pytest.raises(thdpack.InvalidArgument, match="two-dimensional"):
        moe.get_dispatch_layout(np.array([0, 1]), 4, 2)


def _routing(rank, experts, seed):
    """This rank's tokens (rank 1 has none), distinct experts per token, some -1."""
    g = torch.Generator().manual_seed(seed * 100 + rank)
    tokens = 0 if rank == 1 else int(torch.randint(3, 30, (1,), generator=g))
    x = torch.randn(tokens, HIDDEN, generator=g)
    first = torch.randint(0, experts, (tokens,), generator=g)
    second = (first + torch.randint(1, experts, (tokens,), generator=g)) % experts
    second[torch.rand(tokens, generator=g) < 0.2] = -1
    idx = torch.stack([first, second], dim=1)
    w = torch.rand(tokens, TOPK, generator=g)
    w[idx < 0] = 0
    return x, idx, w


def _expert_weights(experts):
    return torch.randn(experts, HIDDEN, HIDDEN, generator=torch.Generator().manual_seed(7))


def _dense(x, idx, w, weights):
    """out[t] = sum_j w[t, j] * W[idx[t, j]] @ x[t], computed on one process."""
    out = torch.zeros_like(x)
    for j in range(TOPK):
        valid = idx[:, j] >= 0
        e = idx[valid, j]
        out[valid] += w[valid, j:j + 1] * torch.einsum("toc,tc->to", weights[e], x[valid])
    return out


def _layer_check(rank, world, padded):
    experts = 2 * world
    per_rank = experts // world
    x, idx, w = _routing(rank, experts, seed=3)
    all_weights = _expert_weights(experts)
    target = torch.randn(x.shape, generator=torch.Generator().manual_seed(50 + rank))

    # Distributed: dispatch, this rank's experts (gate weight applied in the expert), combine.
    x_d = x.clone().requires_grad_()
    w_d = w.clone().requires_grad_()
    local = all_weights[rank * per_rank:(rank + 1) * per_rank].clone().requires_grad_()
    d = moe_dispatch(x_d, idx, w_d, num_experts=experts, padded=padded, expert_alignment=4)
    assert d.recv_x.shape[0] == d.handle.num_recv_rows
    assert sum(d.num_recv_tokens_per_expert) == int((d.recv_topk_idx >= 0).sum())
    assert all(a % 4 == 0 for a in d.aligned_tokens_per_expert)
    y = torch.zeros_like(d.recv_x)
    for j in range(TOPK):
        valid = d.recv_topk_idx[:, j] >= 0
        e = d.recv_topk_idx[valid, j]
        y[valid] = y[valid] + d.recv_topk_weights[valid, j:j + 1] * torch.einsum(
            "toc,tc->to", local[e], d.recv_x[valid])
    out = moe_combine(y, d)
    (out * target).sum().backward()

    # Dense reference on this process alone, with every expert.
    x_r = x.clone().requires_grad_()
    w_r = w.clone().requires_grad_()
    weights_r = all_weights.clone().requires_grad_()
    ref = _dense(x_r, idx, w_r, weights_r)
    (ref * target).sum().backward()

    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_d.grad, x_r.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w_d.grad, w_r.grad, rtol=1e-5, atol=1e-5)
    # An expert's gradient sums every rank's tokens: all-reduce the dense ones.
    dist.all_reduce(weights_r.grad)
    torch.testing.assert_close(local.grad, weights_r.grad[rank * per_rank:(rank + 1) * per_rank],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("padded", [False, True])
def test_torch_moe_layer_equals_dense_reference(world, padded):
    run_processes(world, _layer_check, padded)


def _numpy_check(rank, world):
    comm = TorchCommunicator()
    experts = 2 * world
    x, idx, w = (t.numpy() for t in _routing(rank, experts, seed=9))
    plain = moe.dispatch(comm, x, idx, w, num_experts=experts)
    padded = moe.dispatch(comm, x, idx, w, num_experts=experts, padded=True, pad_alignment=16)
    for a, b in zip(plain[:5], padded[:5]):
        np.testing.assert_array_equal(a, b)
    assert padded[5].padded_tokens % 16 == 0 and padded[5].padded_tokens >= len(x)
    # Identity experts: each token comes back once per rank it visited.
    visits = moe.get_dispatch_layout(idx, experts, world)[2].sum(axis=1)
    np.testing.assert_allclose(moe.combine(comm, plain[0], plain[5]), x * visits[:, None],
                               rtol=1e-6)
    np.testing.assert_array_equal(moe.combine(comm, padded[0], padded[5]),
                                  moe.combine(comm, plain[0], plain[5]))
    # Adjoints: <dispatch(x), g> == <x, dispatch_backward(g)> over the group, and for combine.
    g = np.random.default_rng(rank).standard_normal(plain[0].shape).astype(np.float32)
    u = np.random.default_rng(10 + rank).standard_normal(x.shape).astype(np.float32)
    sums = torch.tensor([
        float(np.sum(plain[0].astype(np.float64) * g)),
        float(np.sum(x.astype(np.float64) * moe.dispatch_backward(comm, g, plain[5]))),
        float(np.sum(moe.combine(comm, g, plain[5]).astype(np.float64) * u)),
        float(np.sum(g.astype(np.float64) * moe.combine_backward(comm, u, plain[5]))),
    ], dtype=torch.float64)
    dist.all_reduce(sums)
    assert abs(sums[0] - sums[1]) <= 1e-4 * (1 + abs(sums[0]))
    assert abs(sums[2] - sums[3]) <= 1e-4 * (1 + abs(sums[2]))
    # A bad expert id on the last rank is an error on every rank, naming that rank.
    bad = idx.copy()
    if rank == world - 1:
        bad = np.array([[experts, 0]], dtype=np.int64)
        x, w = np.zeros((1, HIDDEN), np.float32), np.zeros((1, TOPK), np.float32)
    with pytest.raises(thdpack.InvalidArgument, match=f"EP rank {world - 1}"):
        moe.dispatch(comm, x, bad, w, num_experts=experts)
    with pytest.raises(thdpack.InvalidArgument, match="columns"):
        moe.combine(comm, np.zeros((plain[5].num_recv_rows, HIDDEN + 1), np.float32), plain[5])


def test_numpy_dispatch_combine_padded_adjoint_and_errors():
    run_processes(3, _numpy_check)
