"""One rank of a gloo job that ends right after its last ThdPacker step, as many training scripts
do: no cleanup beyond what torch requires. Run by test_exit_after_step.py as
``exit_after_step_worker.py STORE RANK WORLD``.

torch 2.x requires destroy_process_group() before exit: without it a plain gloo script with no
thdpack in it aborts at exit ("terminate called without an active exception") in about one run
in two with torch 2.15 on 2 cores. The worker calls it there, right after the last step; with
torch 1.x it ends without it, as the scripts of that time did."""

import sys

import torch
import torch.distributed as dist

from thdpack.torch import ThdPacker
from thdpack.torch_data import PackedSteps


def main(store: str, rank: int, world: int) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=4096)
    for step in range(3):
        samples = [{"id": (step * world + rank) * 8 + i,
                    "input_ids": list(range(1, 100 + 37 * i + rank))} for i in range(8)]
        packer.step(samples)
    # And through the data loader, whose steps add collectives of their own (counts, id maps).
    dataset = [{"input_ids": list(range(1, 20 + 7 * i))} for i in range(16)]
    for _ in PackedSteps(packer, dataset, samples_per_step=4):
        pass
    if int(torch.__version__.split(".")[0]) >= 2:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
