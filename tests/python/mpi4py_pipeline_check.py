"""Run under mpirun (4 ranks): thdpack.torch.ThdPacker over mpi4py (cp 2 x dp 2), every step
verified against the single-process reference on every rank."""

import json

from mpi4py import MPI

import thdpack
import thdpack.torch as tt

CONFIG = json.dumps({"mode": "distribution", "type": "uniform", "min_seq_len": 4,
                     "max_seq_len": 200, "size": 5000})


def main():
    comm = MPI.COMM_WORLD
    packer = tt.ThdPacker(max_seqlen_per_dp_cp_rank=256, mpi_comm=comm, cp=2, dp=2)
    dataset = thdpack.mock_dataset(CONFIG)
    for step_index in range(2):
        ids = thdpack.global_batch_indices(step_index, 20, dataset.size)
        d = packer.coordinates["dp"]
        mine = [dataset.sample(int(i)) for i in ids[d * 10:(d + 1) * 10]]
        step = packer.step(mine)
        thdpack.verify_step(packer.world, packer.options, step.result, mine, dataset.sample)
    print(f"rank {comm.rank}: {step.num_microbatches} micro-batches, verified", flush=True)


if __name__ == "__main__":
    main()
