"""torch data loading: packed steps as an iterable dataset that resumes at the exact sample.

    from thdpack.torch import ThdPacker
    from thdpack.torch_data import PackedSteps

    packer = ThdPacker(max_seqlen_per_dp_cp_rank=8192, private_groups=True)   # DP-only world
    steps = PackedSteps(packer, dataset, samples_per_step=16,
                        sampler=DistributedSampler(dataset, shuffle=True), prefetch=True)
    for step in steps:                      # one PackedStep per global batch
        train(step.microbatches)
        if time_to_checkpoint:
            save({"data": steps.state_dict(), ...})
    # after a restart: steps.load_state_dict(saved["data"]) and iterate again

``dataset`` is map-style (``len`` and ``dataset[i]``); an item is a dict with ``input_ids`` and
optionally ``labels`` / ``loss_mask`` (lists, arrays or tensors, ``[L]`` or ``[1, L]``; other keys
such as ``attention_mask`` are ignored) or a sequence of token ids. ``sampler`` yields this rank's
dataset indices (default: indices ``r, r + dp, r + 2·dp, ...`` for DP rank ``r``); each reader
rank takes ``samples_per_step`` of them per step.

- Sample ids: the j-th index of DP rank r's sampler gets the global id ``j·dp + r`` (its position
  in the global stream), so ids are unique even when a sampler repeats a dataset index.
  ``step.dataset_indices`` maps the ids this rank read to dataset indices, and
  ``step.microbatch_dataset_indices[k]`` lists the dataset index of every sample of this rank's
  micro-batch k, wherever it was read.
- ``DistributedSampler`` without ``drop_last`` pads its list with repeats of the first indices so
  that every rank gets the same count; those repeats (global position >= len(dataset)) are skipped,
  so every sample is trained once per epoch. thdpack does not need equal counts per rank.
- The last partial global batch is packed (ranks may hold different counts) unless
  ``drop_last=True``. A tail too small to give every DP rank a micro-batch is dropped with a
  warning.
- ``state_dict()`` after a step records the epoch and the sampler position after the last step
  handed out (prefetched steps are not counted); ``load_state_dict`` in a fresh object resumes at
  the next sample. Samplers with ``set_epoch`` are reseeded per epoch, as in torch.
- ``prefetch=True`` prepares step N+1 in a background thread while step N trains; the C++ pipeline
  runs without the GIL. The packer's collectives then run concurrently with the training loop's, so
  the packer must own its process groups: build it with ``ThdPacker(..., private_groups=True)``
  (otherwise, and with an mpi4py communicator, ``prefetch=True`` raises ``InvalidArgument``).
  The thread runs on the caller's current CUDA device (``torch.cuda.set_device`` in the thread).
- ``samples_per_step`` below the VPP group (``topology.microbatch_multiple``) raises
  ``InvalidArgument``: no step could give every DP rank its micro-batches.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from typing import Any, Iterator, Optional

import numpy as np
import torch.utils.data

from . import _thdpack

_SAMPLE_KEYS = ("input_ids", "labels", "loss_mask", "labels_shifted")


def as_sample(item, sample_id: int) -> dict:
    """A dataset item as a pipeline sample dict with the given id."""
    if not isinstance(item, dict):
        item = {"input_ids": item}
    out = {"id": sample_id}
    for key in _SAMPLE_KEYS:
        value = item.get(key)
        if value is None:
            continue
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        if key != "labels_shifted":
            value = np.asarray(value)
            if value.ndim == 2 and value.shape[0] == 1:
                value = value[0]
        out[key] = value
    if "input_ids" not in out:
        raise _thdpack.InvalidArgument(f"dataset item for sample {sample_id} has no 'input_ids'")
    return out


class PackedSteps(torch.utils.data.IterableDataset):
    """Iterates this rank's ``PackedStep`` for each global batch (see the module docs).

    An ``IterableDataset`` with ``state_dict`` / ``load_state_dict``: torchdata's
    ``StatefulDataLoader(steps, batch_size=None)`` (in the main process, ``num_workers=0``: the
    packer's collectives run there) saves and restores it with its own state."""

    def __init__(self, packer, dataset, *, samples_per_step: int, sampler=None,
                 drop_last: bool = False, prefetch: bool = False):
        if samples_per_step < 1:
            raise _thdpack.InvalidArgument(f"samples_per_step must be >= 1, got {samples_per_step}")
        multiple = packer.options.topology.microbatch_multiple
        if samples_per_step < multiple:
            raise _thdpack.InvalidArgument(
                f"samples_per_step={samples_per_step} cannot fill the {multiple} micro-batches "
                f"(the VPP group) every DP rank needs per step; give at least {multiple}")
        if prefetch and getattr(packer, "_mpi_comm", None) is not None:
            raise _thdpack.InvalidArgument(
                "prefetch=True is not supported with an mpi4py communicator: the packer's "
                "collectives would run beside the training loop's on the same communicator")
        if prefetch and getattr(packer, "_control", None) is None:
            raise _thdpack.InvalidArgument(
                "prefetch=True runs the packer's collectives beside the training loop's; build "
                "the packer with ThdPacker(..., private_groups=True) so that it owns its groups")
        _check_sampler_layout(sampler, packer.options.topology.dp, packer.coordinates["dp"])
        self.packer = packer
        self.dataset = dataset
        self.samples_per_step = samples_per_step
        self.sampler = sampler
        self.drop_last = drop_last
        self.prefetch = prefetch
        self.dp = packer.options.topology.dp
        self.dp_rank = packer.coordinates["dp"]
        self._epoch = 0
        self._consumed = 0  # sampler entries of this epoch behind the last step handed out
        self._steps = 0
        self._skip_padding = _distributed_sampler_padding(sampler, len(dataset))

    # ---- checkpointing ----
    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "consumed": self._consumed, "steps": self._steps,
                "samples_per_step": self.samples_per_step, "dp": self.dp}

    def load_state_dict(self, state: dict) -> None:
        if state["samples_per_step"] != self.samples_per_step or state["dp"] != self.dp:
            raise _thdpack.InvalidArgument(
                f"the state was saved with samples_per_step={state['samples_per_step']} and "
                f"dp={state['dp']}; this loader has {self.samples_per_step} and {self.dp}")
        self._epoch, self._consumed, self._steps = (int(state["epoch"]), int(state["consumed"]),
                                                    int(state["steps"]))

    # ---- iteration ----
    def __iter__(self) -> Iterator[Any]:
        steps = self._produce()
        if self.prefetch:
            steps = _Prefetcher(steps, device=_caller_cuda_device())
        try:
            for step, consumed in steps:
                self._consumed = consumed
                self._steps += 1
                yield step
        finally:
            if isinstance(steps, _Prefetcher):
                steps.close()
        self._epoch += 1
        self._consumed = 0

    def __len__(self) -> int:
        """The steps a full epoch yields, as iteration stops: when no DP rank has samples left,
        with drop_last when some rank cannot fill a step, and when the ranks' last samples cannot
        fill one micro-batch slot per DP rank (dp x VPP group), dropped with a warning. Exact for
        no sampler and for DistributedSampler; another sampler's length is taken as every rank's."""
        counts = self._rank_counts()
        per_step = self.samples_per_step
        need = self.dp * self.packer.options.topology.microbatch_multiple
        # Steps where every rank fills samples_per_step, then the ragged end step by step.
        steps = min(counts) // per_step
        counts = [c - steps * per_step for c in counts]
        while True:
            taken = [min(c, per_step) for c in counts]
            if max(taken) == 0 or (self.drop_last and min(taken) < per_step) or sum(taken) < need:
                return steps
            steps += 1
            counts = [c - t for c, t in zip(counts, taken)]

    def _rank_counts(self) -> list:
        """Samples each DP rank reads in an epoch."""
        size = len(self.dataset)
        if self.sampler is None or self._skip_padding:
            # Rank r reads positions r, r + dp, ...; a padded DistributedSampler's repeats are
            # skipped, which leaves the same.
            counts = [len(range(r, size, self.dp)) for r in range(self.dp)]
            if self.sampler is not None:
                counts = [min(c, len(self.sampler)) for c in counts]
            return counts
        return [len(self.sampler)] * self.dp

    def _indices(self) -> Iterator[int]:
        if self.sampler is None:
            return iter(range(self.dp_rank, len(self.dataset), self.dp))
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self._epoch)
        return iter(self.sampler)

    def _produce(self):
        """(step, sampler position after it) for the rest of the epoch; collective per step."""
        indices = self._indices()
        position = 0
        for _ in zip(range(self._consumed), indices):
            position += 1

        def next_chunk():
            nonlocal position
            chunk, index_of = [], {}
            for index in indices:
                sample_id = position * self.dp + self.dp_rank
                position += 1
                if self._skip_padding and sample_id >= len(self.dataset):
                    continue
                chunk.append(as_sample(self.dataset[index], sample_id))
                index_of[sample_id] = int(index)
                if len(chunk) == self.samples_per_step:
                    break
            return chunk, index_of

        for step, index_of in packed_steps(self.packer, next_chunk, self.samples_per_step,
                                           self.drop_last):
            step.dataset_indices = index_of if index_of is not None else {}
            # The samples of this rank's micro-batches were read on any DP rank: every rank's
            # map, gathered, names their dataset indices (one allgather of the step's ids).
            everyone = {}
            for part in self.packer.allgather_object(step.dataset_indices):
                everyone.update(part)
            step.microbatch_dataset_indices = [
                [everyone.get(int(i), -1) for i in batch.sample_ids]
                for batch in step.result.microbatches]
            yield step, position


def packed_steps(packer, next_chunk, samples_per_step: int, drop_last: bool):
    """Steps while any reader has samples: ``next_chunk()`` -> (up to samples_per_step samples,
    extra) on reader ranks (not called elsewhere); yields (step, extra). Collective per step: one
    allreduce of each DP index's count decides, identically on every rank, whether to stop; an
    error from ``next_chunk()`` on any rank travels in it too, so every rank raises."""
    coordinates = packer.coordinates
    dp = packer.options.topology.dp
    source = packer.reads_data and coordinates["tp"] == coordinates["cp"] == coordinates["pp"] == 0
    while True:
        chunk, extra, error = [], None, None
        if packer.reads_data:
            try:
                chunk, extra = next_chunk()
            except Exception as e:  # noqa: BLE001 - the peers wait in the allreduce: tell them
                error = e
        # counts[dp]: dp - (the lowest DP rank whose next_chunk() raised), 0 if none.
        counts = np.zeros(dp + 1, dtype=np.int64)
        if source and error is None:
            counts[coordinates["dp"]] = len(chunk)
        if error is not None:
            counts[dp] = dp - coordinates["dp"]
        counts = packer.reduce_max(counts)
        if error is not None:
            try:
                raise error
            finally:
                error = None  # no cycle frame -> error -> traceback -> frame
        if counts[dp] > 0:
            raise _thdpack.InvalidArgument(
                f"DP rank {dp - int(counts[dp])} failed to read its samples (its own error says "
                "why); every rank stops")
        counts = counts[:dp]
        if counts.max() == 0 or (drop_last and counts.min() < samples_per_step):
            return
        need = dp * packer.options.topology.microbatch_multiple
        if counts.sum() < need:
            mine = sorted(extra.values()) if isinstance(extra, dict) else []
            named = (f"; DP rank {coordinates['dp']} drops dataset indices {mine[:20]}"
                     + (" ..." if len(mine) > 20 else "")) if mine else ""
            warnings.warn(f"the last {int(counts.sum())} samples cannot fill the {need} "
                          f"micro-batch slots of one step; they are dropped{named}")
            return
        yield packer.step(chunk), extra


def _check_sampler_layout(sampler, dp: int, dp_rank: int) -> None:
    """A sampler that splits the data itself (DistributedSampler's num_replicas and rank) must
    split it over the packer's DP ranks."""
    replicas, rank = getattr(sampler, "num_replicas", None), getattr(sampler, "rank", None)
    if replicas is None or rank is None:
        return
    if (int(replicas), int(rank)) != (dp, dp_rank):
        raise _thdpack.InvalidArgument(
            f"the sampler splits the data over num_replicas={replicas} with rank={rank} but the "
            f"packer's DP size is {dp} and this rank's DP rank is {dp_rank}: build it with "
            f"num_replicas={dp}, rank={dp_rank}")


def _distributed_sampler_padding(sampler, size: int) -> bool:
    """Whether `sampler` is a DistributedSampler that pads its list with repeats."""
    try:
        from torch.utils.data.distributed import DistributedSampler
    except ImportError:  # pragma: no cover - torch is a dependency of this module's users
        return False
    return isinstance(sampler, DistributedSampler) and not sampler.drop_last and (
        sampler.total_size > size)


def _caller_cuda_device() -> Optional[int]:
    """The calling thread's current CUDA device index, or None when CUDA is not in use."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of this module's users
        return None
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    return int(torch.cuda.current_device())


class _Prefetcher:
    """Runs a generator exactly one item ahead in a background thread: item 0 at once, item N+1
    when the consumer takes item N, never earlier, and always once granted, so every rank runs the
    same steps (their collectives match) however the consumer stops. Errors reach the consumer in
    order."""

    def __init__(self, source, device: Optional[int] = None, set_device=None):
        # The thread starts on CUDA device 0; it runs on the caller's device (`device`, applied
        # by `set_device`, torch.cuda.set_device by default) so that its tensors land there.
        self._device = device
        self._set_device = set_device
        self._queue: queue.Queue = queue.Queue()
        self._permits = threading.Semaphore(1)  # item 0 may start now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(iter(source),), daemon=True,
                                        name="thdpack-prefetch")
        self._thread.start()

    def _run(self, source):
        try:
            if self._device is not None:
                if self._set_device is None:
                    import torch

                    self._set_device = torch.cuda.set_device
                self._set_device(self._device)
            while True:
                while not self._permits.acquire(timeout=0.1):
                    if self._stop.is_set():
                        return
                # A granted item is produced even when the consumer has stopped since: every rank
                # granted it, so every rank's thread is entering its collectives.
                # The consumer was handed the previous item just now and needs the GIL for a
                # moment to return it; let it run before this thread's Python work starts.
                time.sleep(0.002)
                item = next(source, _END)
                if item is _END:
                    self._queue.put(("done", None))
                    return
                self._queue.put(("item", item))
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self._queue.put(("error", error))

    def __iter__(self):
        while True:
            kind, value = self._queue.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            self._permits.release()  # start the next item while this one trains
            yield value

    def close(self, timeout: Optional[float] = 600.0):
        self._stop.set()
        self._thread.join(timeout)


_END = object()
