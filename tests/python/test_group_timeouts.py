"""Groups ThdPacker creates itself (private_groups=True, the DP group of a DP-only world, the
size-1 groups) wait as long as the job's process group (init_process_group(timeout=...)), not
torch's default of 30 minutes: a dead peer ends every wait when the job asked."""

import datetime
import os
import tempfile

import torch.distributed as dist
import torch.multiprocessing as mp

from thdpack.torch import ThdPacker, job_timeout

JOB_TIMEOUT = datetime.timedelta(seconds=17)


def _entry(rank, world, store, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=JOB_TIMEOUT)
    try:
        packer = ThdPacker(max_seqlen_per_dp_cp_rank=64, private_groups=True)
        groups = {"control": packer._control,
                  "singleton": ThdPacker._singleton_groups[1][rank]}
        dp_only = ThdPacker(max_seqlen_per_dp_cp_rank=64)  # builds the DP group itself
        packer.step([{"id": rank * 4 + i, "input_ids": [1, 2, 3]} for i in range(4)])
        dp_only.step([{"id": rank * 4 + i, "input_ids": [1, 2, 3]} for i in range(4)])
        seen = {name: job_timeout(group) for name, group in groups.items()}
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
            f.write(repr(seen))
        assert all(t == JOB_TIMEOUT for t in seen.values()), seen
    finally:
        ThdPacker._singleton_groups = (None, [])
        dist.destroy_process_group()


def test_groups_the_packer_creates_use_the_jobs_timeout(tmp_path):
    with tempfile.TemporaryDirectory(prefix="thdpack-gloo-") as tmp:
        mp.spawn(_entry, args=(2, os.path.join(tmp, "store"), str(tmp_path)), nprocs=2, join=True)
