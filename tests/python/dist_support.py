"""Helpers for tests that start several torch.distributed (gloo) processes."""

import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, port, fn, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_processes(world: int, fn, *args) -> None:
    """Runs fn(rank, world, *args) in `world` gloo processes; raises if any process fails."""
    mp.spawn(_entry, args=(world, free_port(), fn, args), nprocs=world, join=True)


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
