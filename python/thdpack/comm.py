"""Communicators from Python frameworks for thdpack's pipeline.

``TorchCommunicator(group)`` runs thdpack's collectives over a ``torch.distributed`` process group
(gloo on CPU, NCCL on GPU). Where a backend lacks a collective thdpack needs, it is built from the
ones it has: variable-size allgather as a padded ``all_gather``; variable all-to-all as
``all_to_all_single`` or, failing that, as pairwise ``isend``/``irecv``.

``mpi4py_communicator(comm)`` gives thdpack's own MPI backend over an mpi4py communicator.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import time

import numpy as np

from . import _thdpack

_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN"}

# The tensors of recent collectives, over every communicator, with when they finished (see _hold):
# all of the last _HELD_SECONDS, so that a worker thread descheduled for a while on a loaded
# machine has long finished with an older one, and at least the last _HELD_AT_LEAST.
_recent = collections.deque()
_HELD_SECONDS = 5.0
_HELD_AT_LEAST = 4


def _hold(*tensors) -> None:
    """Keeps the tensors of a finished collective referenced from Python a while longer.

    A gloo worker thread drops its reference to a collective's tensors just after the waiting
    caller resumes. When that is the last reference, the tensor is freed on the gloo thread, which
    must take the GIL; once the interpreter is finalizing (a script that ends right after its last
    step) that thread is terminated on taking it, and the process aborts. The last collectives'
    tensors stay referenced here, and at exit they are kept for good (_keep_held_tensors_at_exit)."""
    now = time.monotonic()
    _recent.append((now, tensors))
    while len(_recent) > _HELD_AT_LEAST and now - _recent[0][0] > _HELD_SECONDS:
        _recent.popleft()


@atexit.register
def _keep_held_tensors_at_exit() -> None:
    """At exit: the held tensors are never freed. A gloo worker may still hold a collective's
    tensor, or a view of its memory (a tensor over a numpy array frees that array, under the GIL,
    when its memory goes); whichever reference goes last frees it, and on a gloo thread during
    finalization that ends the process. With one reference that is never dropped, nothing a
    collective touched is freed by anyone: the process is ending, and its memory goes with it."""
    held = [tensor for _, tensors in _recent for tensor in tensors]
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(held))


class _TorchCollectives:
    """The callback protocol of ``thdpack.CallbackCommunicator`` over one process group."""

    def __init__(self, group=None, device=None):
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            raise _thdpack.InvalidArgument(
                "torch.distributed is not initialised: call init_process_group first")
        self._torch = torch
        self._dist = dist
        self.group = group if group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.size = dist.get_world_size(self.group)
        backend = dist.get_backend(self.group)
        self.backend = f"torch-{backend}"
        if device is None:
            device = (torch.device("cuda", torch.cuda.current_device())
                      if backend == "nccl" else torch.device("cpu"))
        self.device = torch.device(device)
        self._global = list(dist.get_process_group_ranks(self.group))
        self._all_to_all_works = True

    def _tensor(self, array):
        return self._torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    @staticmethod
    def _host(tensor):
        return tensor.cpu().numpy()

    def allgatherv(self, send, counts):
        width = max(max(counts), 1)
        padded = np.zeros(width, dtype=np.uint8)
        padded[: len(send)] = send
        parts = [self._torch.empty(width, dtype=self._torch.uint8, device=self.device)
                 for _ in range(self.size)]
        tensor = self._tensor(padded)
        self._dist.all_gather(parts, tensor, group=self.group)
        _hold(tensor, *parts)
        return np.concatenate([self._host(p)[:c] for p, c in zip(parts, counts)])

    def alltoallv(self, send, send_counts, recv_counts):
        torch = self._torch
        out = torch.empty(int(sum(recv_counts)), dtype=torch.uint8, device=self.device)
        if self._all_to_all_works:
            try:
                tensor = self._tensor(send)
                self._dist.all_to_all_single(out, tensor, list(map(int, recv_counts)),
                                             list(map(int, send_counts)), group=self.group)
                _hold(out, tensor)
                return self._host(out)
            except RuntimeError as error:
                if "not supported" not in str(error).lower():
                    raise
                self._all_to_all_works = False
        return self._alltoallv_pairwise(send, send_counts, recv_counts)

    def alltoallv_into(self, send, send_counts, recv, recv_counts):
        """alltoallv writing straight into ``recv`` (thdpack's buffer): no copy on the host."""
        if self.device.type != "cpu" or not self._all_to_all_works:
            recv[:] = self.alltoallv(send, send_counts, recv_counts)
            return
        torch = self._torch
        recv_tensor, send_tensor = torch.from_numpy(recv), torch.from_numpy(send)
        try:
            self._dist.all_to_all_single(recv_tensor, send_tensor, list(map(int, recv_counts)),
                                         list(map(int, send_counts)), group=self.group)
            _hold(recv_tensor, send_tensor)
        except RuntimeError as error:
            if "not supported" not in str(error).lower():
                raise
            self._all_to_all_works = False
            recv[:] = self._alltoallv_pairwise(send, send_counts, recv_counts)

    def broadcast_into(self, data, root):
        if self.device.type != "cpu":
            data[:] = self.broadcast(data, root)
            return
        tensor = self._torch.from_numpy(data)
        self._dist.broadcast(tensor, src=self._global[root], group=self.group)
        _hold(tensor)

    def _alltoallv_pairwise(self, send, send_counts, recv_counts):
        torch = self._torch
        send_at = np.concatenate([[0], np.cumsum(send_counts)]).astype(int)
        recv_at = np.concatenate([[0], np.cumsum(recv_counts)]).astype(int)
        received = [None] * self.size
        requests, sent = [], []
        for peer in range(self.size):
            if peer == self.rank:
                received[peer] = np.asarray(send[send_at[peer]:send_at[peer + 1]])
                continue
            if recv_counts[peer]:
                buffer = torch.empty(int(recv_counts[peer]), dtype=torch.uint8, device=self.device)
                received[peer] = buffer
                requests.append(self._dist.irecv(buffer, src=self._global[peer], group=self.group))
            if send_counts[peer]:
                chunk = self._tensor(send[send_at[peer]:send_at[peer + 1]])
                sent.append(chunk)
                requests.append(self._dist.isend(chunk, dst=self._global[peer], group=self.group))
        for request in requests:
            request.wait()
        _hold(*sent, *(r for r in received if r is not None and not isinstance(r, np.ndarray)))
        parts = [r if isinstance(r, np.ndarray) else (self._host(r) if r is not None else
                 np.zeros(0, dtype=np.uint8)) for r in received]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)

    def broadcast(self, data, root):
        tensor = self._tensor(data)
        self._dist.broadcast(tensor, src=self._global[root], group=self.group)
        _hold(tensor)
        return self._host(tensor)

    def allreduce(self, data, op):
        tensor = self._tensor(data)
        self._dist.all_reduce(tensor, op=getattr(self._dist.ReduceOp, _OPS[op]), group=self.group)
        _hold(tensor)
        return self._host(tensor)

    def barrier(self):
        self._dist.barrier(group=self.group)


def TorchCommunicator(group=None, device=None) -> _thdpack.CallbackCommunicator:
    """A thdpack communicator over a torch.distributed process group (default: the world)."""
    return _thdpack.CallbackCommunicator(_TorchCollectives(group, device))


def mpi4py_communicator(comm=None, timeout_seconds: float = 600.0):
    """thdpack's MPI backend over a duplicate of an mpi4py communicator (default COMM_WORLD)."""
    if not _thdpack.HAVE_MPI:
        raise _thdpack.InvalidArgument("this thdpack build has no MPI backend")
    from mpi4py import MPI

    return _thdpack.MpiCommunicator.from_mpi4py(comm if comm is not None else MPI.COMM_WORLD,
                                               timeout_seconds)
