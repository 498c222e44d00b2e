"""One rank of a gloo job that ends right after its last ThdPacker step, as many training scripts
do: no destroy_process_group, no cleanup. Run by test_exit_after_step.py as
``exit_after_step_worker.py STORE RANK WORLD``."""

import sys

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


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
