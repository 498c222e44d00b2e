"""One ThdPacker serves one thread at a time: a second thread entering step() (or reduce_max())
while the first is inside is refused at once with a clear error, and the first step completes
with exactly its own samples."""

import threading
import time

import pytest
import torch.distributed as dist

import thdpack
from dist_support import run_processes
from thdpack.torch import ThdPacker


def _samples(rank, step):
    return [{"id": (step * 2 + rank) * 4 + i, "input_ids": [rank * 1000 + step * 100 + i + 1] * 8}
            for i in range(4)]


def _second_thread_refused(rank, world):
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=64)
    if rank == 1:
        time.sleep(1.0)  # rank 0's first step waits for this rank inside its collectives
        step = packer.step(_samples(rank, 0))
    else:
        outcome = {}

        def first():
            outcome["step"] = packer.step(_samples(rank, 0))

        thread = threading.Thread(target=first)
        thread.start()
        time.sleep(0.3)  # the first thread is inside step(), blocked on rank 1
        for call in (lambda: packer.step(_samples(rank, 1)),
                     lambda: packer.reduce_max([1])):
            with pytest.raises(thdpack.InvalidArgument, match="another thread is inside"):
                call()
        thread.join()
        step = outcome["step"]
    mine = [int(i) for mb in step.result.microbatches for i in mb.sample_ids]
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    assert sorted(i for ids in everyone for i in ids) == \
        sorted(s["id"] for r in range(world) for s in _samples(r, 0))
    packer.step(_samples(rank, 1))  # the packer is free again once the first step is done


def test_a_second_thread_is_refused_while_a_step_runs():
    run_processes(2, _second_thread_refused)
