"""PyTorch integration: this rank's packed micro-batches for each global batch, as torch tensors.

``ThdPacker`` wraps thdpack's distributed pipeline for code that holds Megatron-style process
groups (tensor, context, data and pipeline parallel)::

    packer = ThdPacker(max_seqlen_per_dp_cp_rank=8192, tp_group=tp, cp_group=cp, dp_group=dp,
                       pp_group=pp, model="llama3-8b")
    for step in packer.wrap(my_rank_samples, samples_per_step=32):
        for mb in step.microbatches:          # dicts of tensors, see PackedStep
            loss = model(mb["tokens"], mb["position_ids"], mb["cu_seqlens"], mb["max_seqlen"])

Groups may be omitted when their size is 1. Reading modes: "megatron" (TP rank 0 of the first and
last pipeline stage reads and broadcasts to its TP peers; other ranks pass no samples) and
"all-ranks" (every rank reads the samples of its DP index). Samples are dicts with a global "id",
"input_ids" and optionally "loss_mask" or "labels" (lists, numpy arrays or tensors).

MoE expert parallelism: ``moe_dispatch`` and ``moe_combine`` (differentiable; see
``thdpack.torch_moe``).

With mpi4py instead of torch.distributed, pass ``mpi_comm`` (e.g. ``MPI.COMM_WORLD``) and the
sizes (tp, cp, dp, pp) instead of groups.
"""

from __future__ import annotations

import contextlib
import datetime
import pickle
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import numpy as np
import torch

from . import _thdpack
from .comm import TorchCommunicator, _TorchCollectives, mpi4py_communicator
from .torch_moe import MoeCombine, MoeDispatch, MoeDispatchOutput, moe_combine, moe_dispatch  # noqa: F401

_FIELDS = ("tokens", "labels", "loss_mask", "position_ids", "padding_mask", "cu_seqlens",
           "cu_seqlens_padded", "sample_ids")


def _world_rank() -> int:
    import torch.distributed as dist

    return dist.get_rank()


def _host_sample(sample: dict) -> dict:
    out = dict(sample)
    for key, value in sample.items():
        if isinstance(value, torch.Tensor):
            out[key] = value.detach().cpu().numpy()
    return out


def job_timeout(group=None):
    """The timeout the job gave torch.distributed (init_process_group(timeout=...)): of `group`, by
    default the world's; None where this torch does not say. Groups thdpack creates use it, not
    torch's default of 30 minutes, so that a dead peer ends every wait as the job asked."""
    import torch.distributed as dist

    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    readers = (lambda: pg.options._timeout,  # torch 1.x
               lambda: pg._get_backend(torch.device("cpu")).options._timeout,  # torch 2.x
               lambda: dist.distributed_c10d._world.pg_default_timeout)
    for read in readers:
        try:
            timeout = read()
        except Exception:  # noqa: BLE001 - another torch version keeps it elsewhere
            continue
        if isinstance(timeout, datetime.timedelta):
            return timeout
    return None


def new_group(ranks, timeout=None):
    """torch.distributed.new_group with the job's timeout (job_timeout) unless one is given."""
    import torch.distributed as dist

    timeout = timeout if timeout is not None else job_timeout()
    return dist.new_group(list(ranks)) if timeout is None else \
        dist.new_group(list(ranks), timeout=timeout)


def fail_step_with(pipeline, error: BaseException) -> None:
    """Collective, instead of the step, on a rank whose samples could not be prepared: every peer
    raises an InvalidArgument naming this rank and the error, and this rank raises `error` itself
    (its own type and traceback, the message not prefixed twice)."""
    text = str(error) if isinstance(error, _thdpack.Error) else f"{type(error).__name__}: {error}"
    try:
        pipeline.fail_step(text)
    except _thdpack.InvalidArgument:
        try:
            raise error from None
        finally:
            error = None  # no cycle frame -> error -> traceback -> frame (see ThdPacker.__init__)


@dataclass
class PackedStep:
    """One global batch on this rank.

    ``microbatches[k]`` maps tokens, labels, loss_mask, position_ids, padding_mask, cu_seqlens,
    cu_seqlens_padded, sample_ids to 1-D tensors (the fields this rank's pipeline stage does not
    need are empty) and max_seqlen to a Python int. cu_seqlens and max_seqlen describe the whole
    pack (what THD attention kernels take); per-row tensors hold this rank's CP slice.
    ``flops`` has the global batch's seqlen sums (Megatron's FLOPs inputs) and, with a model, its
    training TFLOPs.
    ``cp_groups[k]`` is this rank's CP group in micro-batch k: ``local_cp_size`` (the CP size
    attention runs with), ``cp_rank`` (this rank's position in the group), ``member_ranks`` (the
    members' global ranks, in group order) and ``first_dp_cp_index``. With a dynamic-CP scheduler
    (``default_dynamic_cp``, ``balanced_dynamic_cp``) they change from micro-batch to micro-batch
    and micro-batch k holds this rank's zigzag slice over its group; with fixed CP they are the
    rank's CP group every time.
    """

    microbatches: list
    num_microbatches: int
    flops: dict
    virtual_stages: list
    result: Any = field(repr=False)
    cp_groups: list = field(default_factory=list)

    @property
    def local_cp_sizes(self) -> list:
        """``local_cp_size`` of every micro-batch."""
        return [g["local_cp_size"] for g in self.cp_groups]

    def virtual_stage(self, stage: int) -> list:
        """The micro-batches as virtual pipeline stage ``stage`` sees them (unneeded fields empty)."""
        keep = self.virtual_stages[stage]
        out = []
        for mb in self.microbatches:
            view = dict(mb)
            if not keep["tokens"]:
                view["tokens"] = view["position_ids"] = mb["tokens"][:0]
            if not keep["labels"]:
                view["labels"] = mb["labels"][:0]
                view["loss_mask"] = mb["loss_mask"][:0]
            out.append(view)
        return out


def microbatch_tensors(batch: "_thdpack.PackedBatch", device=None) -> dict:
    """A PackedBatch as a dict of tensors sharing its memory (on CPU) plus max_seqlen as an int."""
    out = {}
    for name in _FIELDS:
        tensor = torch.from_numpy(np.asarray(getattr(batch, name)))
        out[name] = tensor if device is None else tensor.to(device, non_blocking=True)
    out["max_seqlen"] = int(batch.max_seqlen)
    return out


class ThdPacker:
    """This rank's packed micro-batches for each global batch, from its local samples.

    Static shapes (CUDA graphs): ``tail_align="multiple"`` with ``tail_multiple=N`` rounds every
    pack's rows up to a multiple of N, ``tail_align="capacity"`` makes every pack
    ``max_seqlen_per_dp_cp_rank * cp`` rows; ``tail_policy`` puts the tail in an all-padding
    sequence ("append_dummy_seq", real length 0) or in the last one ("extend_last");
    ``fixed_cu_seqlens_entries=E`` gives every cu_seqlens array exactly E entries (and keeps
    packs within the sequences that leaves room for); ``max_sequences_per_pack`` caps the samples
    of one pack (Megatron's ``thd_max_packed_sequences``). ``tokens_on_last_stage`` gives the last
    pipeline stage tokens and position ids too (multi-token prediction).

    Every option of ``PipelineOptions`` is a keyword here, with the same default, so a packer
    plans exactly as ``thdpack run`` / ``thdpack plan`` do with the same words: ``pad_id``,
    ``ignore_id`` and ``pad_positions`` ("continue" or "zero") fill padding;
    ``ignore_masked_labels=True`` also makes the labels ``ignore_id`` wherever the loss mask is 0
    (masked prompts: a loss with ``ignore_index`` and no mask skips them); with a dynamic-CP
    scheduler, ``min_cp`` is the smallest CP group and a preset ``model`` name (with
    ``gpu_tflops``, ``cp_link_gbps``, ``cp_step_overhead_us``) selects the full CP cost model
    ``balanced_dynamic_cp`` minimises. A ``ModelSpec`` object as ``model`` sets the FLOPs cost
    (compute only: no K/V size, so no ring-communication term).
    """

    def __init__(self, *, max_seqlen_per_dp_cp_rank: int, tp_group=None, cp_group=None,
                 dp_group=None, pp_group=None, mpi_comm=None, tp: int = 1, cp: int = 1,
                 dp: Optional[int] = None, pp: int = 1, vpp: int = 1, vpp_group: int = 0,
                 order: str = "tp-cp-ep-dp-pp", scheduler: str = "balanced",
                 reading: str = "megatron", model=None, cost=None,
                 sequence_parallel: bool = False, cp_mode: str = "zigzag",
                 oversize: str = "error", device=None, tail_align: str = "none",
                 tail_multiple: int = 0, tail_policy: str = "append_dummy_seq",
                 fixed_cu_seqlens_entries: int = 0, max_sequences_per_pack: int = 0,
                 tokens_on_last_stage: bool = False, private_groups: bool = False,
                 pad_id: int = 0, ignore_id: int = -100, ignore_masked_labels: bool = False,
                 pad_positions: str = "continue",
                 min_cp: int = 1, gpu_tflops: float = 400.0, cp_link_gbps: float = 50.0,
                 cp_step_overhead_us: float = 20.0):
        self._mpi_comm = mpi_comm
        self._in_use = threading.Lock()  # held while a collective of this packer runs
        self._control = None  # the torch group of world-wide control collectives (None: WORLD)
        self.device = device
        # Everything that can fail on one rank alone runs before the first collective, and the
        # ranks agree on the outcome: a rank that failed never leaves its peers waiting in
        # new_group or in the pipeline's first collective until the process group times out.
        if mpi_comm is None:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                raise _thdpack.InvalidArgument(
                    "ThdPacker needs an initialised torch.distributed (call "
                    "torch.distributed.init_process_group first) or an mpi4py communicator "
                    "(mpi_comm=)")
        error = None
        try:
            if mpi_comm is not None:
                dp = dp if dp is not None else self._world_size() // (tp * cp * pp)
            else:
                import torch.distributed as dist

                size = lambda g: 1 if g is None else dist.get_world_size(g)  # noqa: E731
                tp, cp, pp = size(tp_group), size(cp_group), size(pp_group)
                dp = (size(dp_group) if dp_group is not None
                      else dist.get_world_size() // (tp * cp * pp))
            self.model = _thdpack.model_preset(model) if isinstance(model, str) else model
            if cost is None:
                cost = (_thdpack.CostModel.from_model(self.model) if self.model is not None
                        else _thdpack.CostModel())
            topology = _thdpack.Topology(tp=tp, cp=cp, dp=dp, pp=pp, vpp=vpp,
                                         vpp_group=vpp_group, order=order)
            if mpi_comm is None:
                self._check_groups(topology, {"tp": tp_group, "cp": cp_group, "dp": dp_group,
                                              "pp": pp_group})
            self.options = _thdpack.PipelineOptions(
                topology=topology, max_seqlen_per_dp_cp_rank=max_seqlen_per_dp_cp_rank,
                scheduler=scheduler, cost=cost, reading=reading,
                sequence_parallel=sequence_parallel, cp_mode=cp_mode, oversize=oversize,
                pad_id=pad_id, ignore_id=ignore_id, ignore_masked_labels=ignore_masked_labels,
                pad_positions=pad_positions,
                tail_align=tail_align, tail_multiple=tail_multiple, tail_policy=tail_policy,
                fixed_cu_seqlens_entries=fixed_cu_seqlens_entries,
                max_sequences_per_pack=max_sequences_per_pack,
                tokens_on_last_stage=tokens_on_last_stage,
                model=model if isinstance(model, str) else "", gpu_tflops=gpu_tflops,
                cp_link_gbps=cp_link_gbps, cp_step_overhead_us=cp_step_overhead_us,
                min_cp=min_cp)
        except Exception as e:  # noqa: BLE001 - every error must reach the peers
            error = e
        try:
            self._raise_together(error, "ThdPacker")
        finally:
            # No cycle frame -> error -> traceback -> frame: the groups this frame holds are freed
            # with the exception, not by a later garbage collection on whichever thread runs it (a
            # gloo group destroyed on a gloo thread aborts the process).
            error = None
        if mpi_comm is not None:
            world = mpi4py_communicator(mpi_comm)
            groups = {}
        else:
            import torch.distributed as dist

            # A missing DP group (a DP-only world, or groups given for the other dimensions) and,
            # with private_groups, copies of every group the packer uses, built from the topology
            # (every rank enters new_group for every group in the same order).
            if dp_group is None and dp > 1:
                dp_group = self._topology_group(topology, "dp")
            if private_groups:
                self._control = new_group(range(dist.get_world_size()))
                dp_group = self._topology_group(topology, "dp") if dp > 1 else None
                tp_group = self._topology_group(topology, "tp") if tp > 1 else None
            world = TorchCommunicator(self._control, device)
            groups = {"dp_group": TorchCommunicator(self._group_or_self(dp_group), device),
                      "tp_group": TorchCommunicator(self._group_or_self(tp_group), device)}
        self.world = world
        self.pipeline = _thdpack.Pipeline(world, self.options, **groups)

    def _world_size(self) -> int:
        if self._mpi_comm is not None:
            return self._mpi_comm.Get_size()
        import torch.distributed as dist

        return dist.get_world_size()

    def _raise_together(self, error, what: str) -> None:
        """Collective over the world: raises on every rank when any rank has an error (the
        failing rank its own; the others an InvalidArgument naming the lowest failing rank)."""
        rank = self._mpi_comm.Get_rank() if self._mpi_comm is not None else _world_rank()
        size = self._world_size()
        # MAX of (size - rank) finds the lowest failing rank; 0 when none failed.
        mark = np.array([size - rank if error is not None else 0], dtype=np.int64)
        failed = self._max(mark)
        if error is not None:
            try:
                raise error
            finally:
                error = None  # no cycle frame -> error -> traceback -> frame (see __init__)
        if failed > 0:
            raise _thdpack.InvalidArgument(
                f"{what}: rank {size - failed} failed (its own error says why); every rank stops")

    @staticmethod
    def _topology_group(topology, kind):
        """This rank's `kind` group, created from the topology on every rank (a DP-only world's
        DP group is the world itself)."""
        import torch.distributed as dist

        rank = dist.get_rank()
        mine = None
        for ranks in topology.all_groups(kind):
            group = new_group(ranks)
            if rank in ranks:
                mine = group
        return mine

    @staticmethod
    def _check_groups(topology, groups):
        """Every given group must hold this rank's peers of its kind, in topology order."""
        import torch.distributed as dist

        rank = dist.get_rank()
        for kind, group in groups.items():
            if group is None:
                continue
            got = list(dist.get_process_group_ranks(group))
            want = topology.group_ranks(kind, rank)
            if got != want:
                raise _thdpack.InvalidArgument(
                    f"the {kind} group holds world ranks {got}, but {topology} puts rank {rank} "
                    f"with {want}; build the groups in the topology's rank order (order=...)")

    _singleton_groups = (None, [])  # (the world they belong to, one group per rank)

    @classmethod
    def _group_or_self(cls, group):
        """A size-1 dimension without a group: a group of this rank alone (created once per
        torch.distributed world)."""
        if group is not None:
            return group
        import torch.distributed as dist

        world = dist.distributed_c10d._get_default_group()
        if cls._singleton_groups[0] is not world:
            # new_group must be entered by every rank for every group, in the same order.
            cls._singleton_groups = (world, [new_group([r])
                                             for r in range(dist.get_world_size())])
        return cls._singleton_groups[1][dist.get_rank()]

    @property
    def reads_data(self) -> bool:
        """Whether this rank must pass samples to step()."""
        return self.pipeline.reads_data

    @property
    def coordinates(self) -> dict:
        return self.pipeline.coordinates

    def step(self, samples: Iterable[dict] = (), group_ids=None, plan=None) -> PackedStep:
        """Collective over the world: this rank's micro-batches of one global batch.

        ``group_ids`` (one int >= 0 per sample, or a ``"group_id"`` key in every sample) keeps the
        samples of a group (GRPO group, preference pair) in one micro-batch. ``plan`` (a
        ``thdpack.PlannedBatch``, the same on every rank: made by a driver from the lengths with
        ``thdpack.schedule``, read from ``thdpack.read_plan_file``, or ``PlannedBatch.from_json``)
        is delivered instead of planning; every rank checks it against the step first and raises
        ``InvalidArgument`` together when it does not fit.
        """
        with self._one_caller("step"):
            return self._step(samples, group_ids, plan)

    def _step(self, samples, group_ids, plan) -> PackedStep:
        # Samples given to a rank that does not read are passed on, so that the pipeline reports
        # the mistake on every rank instead of silently dropping them.
        try:
            host = [_host_sample(s) for s in samples]
            if group_ids is None and host and "group_id" in host[0]:
                group_ids = [s.get("group_id", -1) for s in host]
            for s in host:
                s.pop("group_id", None)
        except Exception as e:  # noqa: BLE001 - the peers wait in this step: tell them
            fail_step_with(self.pipeline, e)
        # A sample run_step cannot convert is reported to the peers there as well.
        result = self.pipeline.run_step(host, group_ids=group_ids, plan=plan)
        sums = result.sums
        flops = {
            "seqlen_sum": sums["s1_real"],
            "seqlen_squared_sum": sums["s2_real"],
            "seqlen_sum_padded": sums["s1_padded"],
            "seqlen_squared_sum_padded": sums["s2_padded"],
        }
        if self.model is not None:
            flops["model_tflops"] = _thdpack.training_flops(
                self.model, sums["s1_real"], sums["s2_real"]) / 1e12
        return PackedStep(
            microbatches=[microbatch_tensors(b, self.device) for b in result.microbatches],
            num_microbatches=result.num_microbatches,
            flops=flops,
            virtual_stages=result.virtual_stages,
            result=result,
            cp_groups=result.cp_groups,
        )

    def wrap(self, samples: Iterable[dict], samples_per_step: int,
             drop_last: bool = False) -> Iterator[PackedStep]:
        """Steps over an iterator of this rank's samples, ``samples_per_step`` at a time; the
        last partial step is packed too unless ``drop_last``. (``thdpack.torch_data.PackedSteps``
        adds samplers, checkpointing and prefetch.)

        Ranks that do not read (see ``reads_data``) pass any iterable (it is not consumed) and
        must call this as many times as the readers.
        """
        from .torch_data import packed_steps

        iterator = iter(samples)

        def next_chunk():
            return [s for _, s in zip(range(samples_per_step), iterator)], None

        for step, _ in packed_steps(self, next_chunk, samples_per_step, drop_last):
            yield step

    def reduce_max(self, values) -> np.ndarray:
        """Element-wise maximum of int64 ``values`` over all ranks (one allreduce over the
        packer's world group)."""
        flag = np.ascontiguousarray(values, dtype=np.int64)
        with self._one_caller("reduce_max"):
            return self._reduce_max(flag)

    def _reduce_max(self, flag: np.ndarray) -> np.ndarray:
        if getattr(self, "_mpi_comm", None) is not None:
            from mpi4py import MPI

            out = np.empty_like(flag)
            self._mpi_comm.Allreduce(flag, out, op=MPI.MAX)
            return out
        return self._collectives().allreduce(flag, "max").copy()

    @contextlib.contextmanager
    def _one_caller(self, what: str):
        """Refuses a second thread while one runs this packer's collectives: every rank must enter
        them in the same order, which two threads sharing one packer cannot promise (their steps
        would exchange each other's samples)."""
        if not self._in_use.acquire(blocking=False):
            raise _thdpack.InvalidArgument(
                f"ThdPacker.{what}() called while another thread is inside this packer; a packer "
                "serves one thread at a time (give each thread its own packer and process groups, "
                "or serialise the calls)")
        try:
            yield
        finally:
            self._in_use.release()

    def allgather_object(self, obj) -> list:
        """Collective over the packer's world: every rank's picklable `obj`, in rank order."""
        with self._one_caller("allgather_object"):
            if getattr(self, "_mpi_comm", None) is not None:
                return self._mpi_comm.allgather(obj)
            # Through the packer's own collectives (not dist.all_gather_object), whose tensors are
            # kept from being freed on a gloo thread at exit (comm.py).
            collectives = self._collectives()
            payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
            sizes = collectives.allgatherv(
                np.array([payload.size], dtype=np.int64).view(np.uint8),
                [8] * collectives.size).view(np.int64)
            data = collectives.allgatherv(payload, [int(n) for n in sizes])
            bounds = np.concatenate([[0], np.cumsum(sizes)])
            return [pickle.loads(data[bounds[r]:bounds[r + 1]].tobytes())
                    for r in range(collectives.size)]

    def _collectives(self) -> _TorchCollectives:
        """The packer's world group's collectives (torch.distributed), made once."""
        if getattr(self, "_control_collectives", None) is None:
            self._control_collectives = _TorchCollectives(self._control, self.device)
        return self._control_collectives

    def _max(self, value: np.ndarray) -> int:
        """The largest of every rank's single value (one allreduce over the world)."""
        return int(self.reduce_max(value)[0])
