"""thdpack.megatron with Megatron's dynamic-CP schedulers over gloo process groups: every rank's
get_batch tuple is compared with an independent single-process reference (the dynamic-CP plan,
each micro-batch's group packed, padded to 2·dp·cp and zigzag-sliced over the group's own size),
and packed_seq_params carries local_cp_size and the group's process group."""

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.distributed as dist

import thdpack
import thdpack.megatron as tm
from dist_support import megatron_groups, run_processes
from test_megatron import CONFIG, reference_pack, sampler_order



def _contiguous_groups(topology, rank):
    """A process group for every contiguous range of 2+ dp_cp positions of this rank's tp/pp slice
    (created on every rank in the same order), keyed by its global ranks."""
    dp_cp = topology.cp * topology.dp
    out = {}
    for slice_ranks in topology.all_groups("dp_cp"):
        for size in range(2, dp_cp + 1):
            for first in range(dp_cp - size + 1):
                ranks = tuple(slice_ranks[first:first + size])
                group = dist.new_group(list(ranks))
                if rank in ranks:
                    out[ranks] = group
    return out


def _dynamic_worker(rank, world, tp, cp, dp, M, scheduler, steps, out_dir):
    topology = thdpack.Topology(tp=tp, cp=cp, dp=dp)
    pg = SimpleNamespace(**megatron_groups(topology, ("tp", "cp", "dp", "pp", "dp_cp")))
    groups = _contiguous_groups(topology, rank)
    config = SimpleNamespace(sequence_packing_scheduler=scheduler, max_seqlen_per_dp_cp_rank=M,
                             context_parallel_size=cp, sequence_parallel=False,
                             sft_mock_dataset_config_json=CONFIG)
    coords = topology.coordinates(rank)
    me = coords["dp"] * cp + coords["cp"]
    source = tm.mock_data_iterator(config, coords["dp"], dp) if coords["tp"] == 0 else None
    dataset = thdpack.mock_dataset(CONFIG)
    divisor = 2 * dp * cp
    per_rank = 6
    checked, sizes = 0, set()
    for step in range(steps):
        it, count, s1, _ = tm.wrap_data_iterator(source, config, per_rank, pg)
        samples = [np.asarray(dataset.sample(i)["input_ids"])
                   for i in sampler_order(step, per_rank, dp)]
        padded = [-(-len(s) // divisor) * divisor for s in samples]
        assert s1 == float(sum(padded))
        plan = thdpack.schedule_dynamic_cp(padded, dp=dp, cp=cp, max_seqlen_per_dp_cp_rank=M,
                                           scheduler=scheduler)
        assert count == len(plan)
        for k in range(count):
            first, size, ids = next((f, s, i) for f, s, i in plan[k] if f <= me < f + s)
            got = tm.get_batch_on_this_rank_for_sequence_packing(
                it, None, False, None, True, pg, cp_group_of=lambda ranks: groups.get(ranks))
            tokens, labels, loss_mask, _, positions, params, pad = got
            want, cu, cu_padded, max_seqlen = reference_pack([samples[i] for i in ids], divisor,
                                                             size, me - first)
            for name, tensor in (("tokens", tokens), ("labels", labels),
                                 ("loss_mask", loss_mask), ("position_ids", positions),
                                 ("padding_mask", pad)):
                assert tensor[0].tolist() == want[name], (rank, step, k, name)
            assert params.cu_seqlens_q.tolist() == cu
            assert params.cu_seqlens_q_padded.tolist() == cu_padded
            assert params.max_seqlen_q == max_seqlen
            assert params.local_cp_size == size
            members = [topology.rank_of(tp=coords["tp"], cp=(first + i) % cp,
                                        dp=(first + i) // cp, pp=0) for i in range(size)]
            if size == 1:
                assert params.cp_group is None
            else:
                assert list(dist.get_process_group_ranks(params.cp_group)) == members
            sizes.add(size)
            checked += 1
        with pytest.raises(StopIteration):
            next(it)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"checked": checked, "sizes": sorted(sizes)}, f)


# M: samples of up to 200 tokens need CP groups of up to dp·cp ranks.
@pytest.mark.parametrize("tp,cp,dp,M", [(1, 2, 2, 64), (2, 1, 2, 128)])
def test_every_rank_gets_its_slice_of_its_dynamic_cp_group(tmp_path, tp, cp, dp, M):
    world = tp * cp * dp
    run_processes(world, _dynamic_worker, tp, cp, dp, M, "default_dynamic_cp", 3, str(tmp_path))
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    assert all(r["checked"] > 0 for r in results)
    # The batches need CP: some micro-batch runs on a group of more than one rank.
    assert any(max(r["sizes"]) > 1 for r in results)

