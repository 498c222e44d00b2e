"""One rank of a gloo job across hosts (network namespaces in netns_test.sh):
``gloo_worker.py MASTER_ADDR PORT RANK WORLD STEPS TIMEOUT_S OUT``.

Runs STEPS ThdPacker steps on seeded samples and writes, per step, a digest of every tensor of
the rank's micro-batches to OUT (one line per step), so that runs over different links can be
compared byte for byte. A failure is written as one line "error: TYPE: MESSAGE" and exits 3."""

import datetime
import hashlib
import random
import sys

import torch.distributed as dist

from thdpack.torch import ThdPacker


def samples_of(step: int, rank: int):
    rng = random.Random(step * 1000 + rank)
    return [{"id": (step * 64 + rank * 16) + i,
             "input_ids": [rng.randrange(1, 50000) for _ in range(rng.randint(16, 3000))]}
            for i in range(16)]


def digest(step) -> str:
    h = hashlib.sha256()
    for mb in step.microbatches:
        for name in sorted(mb):
            value = mb[name]
            h.update(name.encode())
            h.update(value.cpu().numpy().tobytes() if hasattr(value, "numpy") else repr(value).encode())
    return h.hexdigest()


def main(addr, port, rank, world, steps, timeout_s, out):
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=8192)
    with open(out, "w") as f:
        try:
            for step in range(steps):
                f.write(digest(packer.step(samples_of(step, rank))) + "\n")
                f.flush()
        except Exception as error:  # what a training script sees: one exception, one message
            f.write(f"error: {type(error).__name__}: {error}\n")
            f.flush()
            sys.exit(3)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), float(a[5]), a[6])
