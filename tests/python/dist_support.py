"""Helpers for tests that start several torch.distributed (gloo) processes."""

import os
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank, world, store_path, fn, args):
    # A file store: no TCP port to pick, so no race with other processes picking the same one.
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank,
                            world_size=world)
    try:
        fn(rank, world, *args)
    finally:
        # Process groups held by thdpack's caches are released while the process group lives.
        import thdpack.megatron

        thdpack.megatron.release_packers()
        dist.destroy_process_group()


def run_processes(world: int, fn, *args) -> None:
    """Runs fn(rank, world, *args) in `world` gloo processes; raises if any process fails."""
    with tempfile.TemporaryDirectory(prefix="thdpack-gloo-") as tmp:
        store = os.path.join(tmp, "store")
        mp.spawn(_entry, args=(world, store, fn, args), nprocs=world, join=True)


def megatron_groups(topology, kinds=("tp", "cp", "dp", "pp")):
    """This rank's groups in Megatron order; every rank creates every group in the same order."""
    rank = dist.get_rank()
    mine = {}
    for kind in kinds:
        for ranks in topology.all_groups(kind):
            group = dist.new_group(ranks)
            if rank in ranks:
                mine[kind] = group
    return mine

