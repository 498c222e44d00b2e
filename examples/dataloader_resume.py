"""torch data loading with thdpack.torch_data.PackedSteps: DistributedSampler, prefetch, and a
checkpoint that resumes at the exact sample.

    /usr/bin/python3 examples/dataloader_resume.py [--nproc 2]

Runs `--nproc` gloo processes (a DP-only world: no process group to pass). Each trains 3 steps of
an epoch, saves the loader's state, and a fresh loader restored from it trains the rest; the
samples seen equal those of one uninterrupted epoch, and every sample is seen exactly once.
"""

import argparse
import json
import os
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data.distributed import DistributedSampler

import thdpack
from thdpack.torch import ThdPacker
from thdpack.torch_data import PackedSteps


class TokenizedDataset:
    """A map-style dataset of tokenizer-shaped items ([1, L] input ids)."""

    def __init__(self, size=203):
        config = json.dumps({"mode": "distribution", "type": "lognormal", "min_seq_len": 8,
                             "max_seq_len": 1024, "mean_seq_len": 200, "lognormal_sigma": 1.0,
                             "size": size, "seed": 1})
        self.mock = thdpack.mock_dataset(config)

    def __len__(self):
        return self.mock.size

    def __getitem__(self, i):
        return {"input_ids": self.mock.sample(int(i))["input_ids"][None, :]}


def loader(dataset, rank, world):
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=2048, private_groups=True)  # dp = world
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=7)
    return PackedSteps(packer, dataset, samples_per_step=16, sampler=sampler, prefetch=True)


def seen(step):
    return sorted(step.dataset_indices.values())


def worker(rank, world, store, out):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    dataset = TokenizedDataset()
    whole = [seen(step) for step in loader(dataset, rank, world)]

    first = loader(dataset, rank, world)
    resumed = []
    steps = iter(first)
    for step in steps:
        resumed.append(seen(step))
        tokens = sum(int(mb["tokens"].numel()) for mb in step.microbatches)
        print(f"rank {rank}: step {len(resumed)}, {step.num_microbatches} micro-batches, "
              f"{tokens} rows", flush=True)
        if len(resumed) == 3:
            checkpoint = first.state_dict()
            break
    steps.close()
    second = loader(dataset, rank, world)  # e.g. after a restart
    second.load_state_dict(checkpoint)
    resumed += [seen(step) for step in second]
    assert resumed == whole, f"rank {rank}: the resumed stream differs"
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump([i for step in whole for i in step], f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="thdpack-example-") as tmp:
        mp.spawn(worker, args=(args.nproc, os.path.join(tmp, "store"), tmp), nprocs=args.nproc,
                 join=True)
        everything = []
        for r in range(args.nproc):
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                everything += json.load(f)
        everything.sort()
    assert everything == list(range(len(TokenizedDataset()))), "a sample was lost or repeated"
    print(f"resumed streams equal the uninterrupted epoch; all {len(everything)} samples seen once "
          f"(the DistributedSampler's padding repeats skipped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
