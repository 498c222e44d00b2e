"""Same words, same plan: one batch planned with the same options through every front end - the
CLI (`thdpack plan --plan-out`), Python's `schedule`, the C++ pipeline's `plan_global_batch` and
`ThdPacker` over real torch.distributed (gloo) processes - gives bit-identical plans, for every
scheduler, dynamic CP with a model preset included. A plan read back from the CLI's file is then
delivered by the packer (`step(plan=)`) exactly as the packer's own."""

import json
import os
import random
import subprocess

import pytest

import thdpack
from thdpack.torch import ThdPacker
from dist_support import megatron_groups, run_processes

DP, CP, M, GLOBAL_BATCH, STEPS, MODEL = 2, 2, 1024, 32, 2, "llama3-8b"
THDPACK = os.environ.get("THDPACK_CLI", os.path.join("build", "bin", "thdpack"))


def _write_jsonl(path):
    rng = random.Random(11)
    with open(path, "w") as f:
        for i in range(GLOBAL_BATCH * STEPS):
            length = max(1, min(2040, int(rng.lognormvariate(5.5, 1.0))))
            f.write(json.dumps({"input_ids": [(i * 7 + j) % 5000 + 1 for j in range(length)]}))
            f.write("\n")


def _cli_plans(data, out_dir, scheduler):
    path = os.path.join(out_dir, f"{scheduler}.json")
    subprocess.run([THDPACK, "plan", "--jsonl", data, "--dp", str(DP), "--cp", str(CP), "-M",
                    str(M), "--global-batch", str(GLOBAL_BATCH), "--steps", str(STEPS),
                    "--model", MODEL, "--scheduler", scheduler, "--plan-out", path,
                    "--no-progress"], check=True, capture_output=True)
    return [step[scheduler] for step in thdpack.read_plan_file(path)]


def _options(scheduler):
    return thdpack.PipelineOptions(
        topology=thdpack.Topology(cp=CP, dp=DP), max_seqlen_per_dp_cp_rank=M,
        scheduler=scheduler, cost=thdpack.CostModel.from_model(thdpack.model_preset(MODEL)),
        model=MODEL)


def _packer_worker(rank, world, data, out_dir, cli_dir):
    dataset = thdpack.load_jsonl_dataset(data)
    groups = megatron_groups(thdpack.Topology(cp=CP, dp=DP))
    plans = {}
    for scheduler in thdpack.scheduler_names():
        packer = ThdPacker(
            max_seqlen_per_dp_cp_rank=M, cp_group=groups["cp"], dp_group=groups["dp"],
            scheduler=scheduler, model=MODEL)
        files = thdpack.read_plan_file(os.path.join(cli_dir, f"{scheduler}.json"))
        plans[scheduler] = []
        for step in range(STEPS):
            batch = thdpack.make_global_batch(dataset, step, global_batch=GLOBAL_BATCH, dp=DP,
                                              capacity=M * CP)
            per = GLOBAL_BATCH // DP
            d = packer.coordinates["dp"]
            samples = [dataset.sample(int(i)) for i in batch.ids[d * per:(d + 1) * per]]
            own = packer.step(samples)
            given = packer.step(samples, plan=files[step][scheduler])
            same = all(
                all((a[f] == b[f]).all() if hasattr(a[f], "all") else a[f] == b[f]
                    for f in a)
                for a, b in zip(own.microbatches, given.microbatches))
            plans[scheduler].append({"groups": own.result.plan.groups(), "delivered_same": same,
                                     "count": len(own.microbatches) == len(given.microbatches)})
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(plans, f)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    work = tmp_path_factory.mktemp("same_plan")
    data = str(work / "data.jsonl")
    _write_jsonl(data)
    cli = {s: _cli_plans(data, str(work), s) for s in thdpack.scheduler_names()}
    run_processes(DP * CP, _packer_worker, data, str(work), str(work))
    packer = {}
    for rank in range(DP * CP):
        with open(work / f"rank{rank}.json") as f:
            packer[rank] = json.load(f)
    return data, cli, packer


def _as_json(groups):
    return json.loads(json.dumps(groups))


@pytest.mark.parametrize("scheduler", thdpack.scheduler_names())
def test_every_front_end_makes_the_same_plan(planned, scheduler):
    data, cli, packer = planned
    dataset = thdpack.load_jsonl_dataset(data)
    dynamic = scheduler in thdpack.scheduler_names("dynamic")
    for step in range(STEPS):
        from_cli = cli[scheduler][step]
        # The batch: the CLI's ids and padded lengths are what Python's make_global_batch gives.
        batch = thdpack.make_global_batch(
            dataset, step, global_batch=GLOBAL_BATCH, dp=DP,
            divisor=thdpack.padding_divisor(cp=CP, dynamic_cp=dynamic, dp=DP),
            capacity=M * CP * (DP if dynamic else 1))
        assert list(batch.ids) == list(from_cli.ids)
        assert list(batch.padded_lengths) == list(from_cli.padded_lengths)
        assert from_cli.scheduler == scheduler
        # Python's schedule, with the same words.
        python = thdpack.schedule(from_cli.padded_lengths, ids=from_cli.ids,
                                  samples_per_rank=batch.samples_per_rank, dp=DP, cp=CP,
                                  max_seqlen_per_dp_cp_rank=M, scheduler=scheduler, model=MODEL)
        assert python == from_cli.plan, f"{scheduler} step {step}: schedule() differs from the CLI"
        # The C++ pipeline's planning of the same batch.
        pipeline = thdpack.plan_global_batch(batch, _options(scheduler))
        assert pipeline == from_cli.plan, f"{scheduler} step {step}: pipeline differs from the CLI"
        # ThdPacker over gloo, on every rank; and the CLI's plan delivered as the packer's own.
        for rank, plans in packer.items():
            got = plans[scheduler][step]
            assert got["groups"] == _as_json(from_cli.plan.groups()), \
                f"{scheduler} step {step} rank {rank}: ThdPacker's plan differs from the CLI"
            assert got["count"] and got["delivered_same"], \
                f"{scheduler} step {step} rank {rank}: the CLI's plan delivered differently"


def test_the_front_ends_differ_where_the_words_differ(planned):
    """The comparison can fail: another cost model changes balanced_dynamic_cp's plan."""
    _, cli, _ = planned
    from_cli = cli["balanced_dynamic_cp"][0]
    without_model = thdpack.schedule(from_cli.padded_lengths, ids=from_cli.ids, dp=DP, cp=CP,
                                     max_seqlen_per_dp_cp_rank=M, scheduler="balanced_dynamic_cp",
                                     gpu_tflops=1.0, cp_link_gbps=0.001, model=MODEL)
    assert without_model != from_cli.plan


def _wrong_plan_worker(rank, world, out_dir):
    dataset = thdpack.mock_dataset(thdpack.default_mock_config(512))
    packer = ThdPacker(max_seqlen_per_dp_cp_rank=512)
    samples = [dataset.sample(rank * 4 + i) for i in range(4)]
    try:
        packer.step(samples, plan="plans.json" if rank == 1 else None)
        outcome = "no error"
    except thdpack.InvalidArgument as error:
        outcome = str(error)
    # The same on the pipeline itself, for samples that are not a sequence.
    try:
        packer.pipeline.run_step(42 if rank == 1 else [])
        samples_outcome = "no error"
    except thdpack.InvalidArgument as error:
        samples_outcome = str(error)
    with open(os.path.join(out_dir, f"wrong{rank}.txt"), "w") as f:
        f.write(outcome)
    with open(os.path.join(out_dir, f"samples{rank}.txt"), "w") as f:
        f.write(samples_outcome)


def test_a_plan_of_the_wrong_type_fails_every_rank(tmp_path):
    """A rank given something other than a PlannedBatch, or samples that are not a sequence, does
    not leave its peers waiting: every rank raises."""
    run_processes(2, _wrong_plan_worker, str(tmp_path))
    for rank in range(2):
        text = (tmp_path / f"wrong{rank}.txt").read_text()
        assert ("PlannedBatch" in text) if rank == 1 else ("rank 1" in text), (rank, text)
        text = (tmp_path / f"samples{rank}.txt").read_text()
        assert ("must be a sequence" in text) if rank == 1 else ("rank 1" in text), (rank, text)
