#!/usr/bin/env python3
"""`thdpack plan --sample-order megatron` (with Megatron's flag names) against an independent
reimplementation of Megatron-LM's training plan: MegatronPretrainingSampler deals global batch s
(dataset indices s*B .. s*B+B-1, one sample per micro-batch) so that DP rank r holds positions
r, r + dp, ...; the lengths are all-gathered DP-rank-major; DpBalancedScheduler packs them by
next-fit and splits the tail to a multiple of dp (x the VPP group); pack j runs on DP rank j % dp
in micro-batch j // dp. Over many seeds and layouts with dp > 1; also counts how often the
contiguous order (thdpack's default) gives the same plan, which is rare.

Usage: check_megatron_order.py THDPACK_EXECUTABLE WORK_DIR"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from megatron_reference import megatron_dp_balanced  # noqa: E402


def megatron_plan(lengths_of, step, batch, dp, capacity, multiple, size):
    positions = [(step * batch + j) % size for j in range(batch)]
    gathered = [positions[j] for r in range(dp) for j in range(r, batch, dp)]
    packs = [[gathered[i] for i in pack] for pack in megatron_dp_balanced(
        [lengths_of[index] for index in gathered], capacity, multiple)]
    return [[packs[k * dp + r] for r in range(dp)] for k in range(len(packs) // dp)]


def plan_file(exe, out, config, dp, batch, m, order, extra=()):
    subprocess.run([exe, "plan", "--sft-mock-dataset-config-json", config,
                    "--sequence-packing-scheduler", "dp_balanced", "--dp", str(dp),
                    "--global-batch-size", str(batch),
                    "--max-seqlen-per-dp-cp-rank", str(m), "--sample-order", order,
                    "--steps", "3", "--plan-out", out, "--no-progress", *extra],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def main(exe, work):
    matched = cases = contiguous_matches = 0
    for seed in range(40):
        dp = (2, 4, 8)[seed % 3]
        vpp = seed % 4 == 3
        size = 3000
        config = json.dumps({"mode": "distribution", "type": "lognormal", "min_seq_len": 16,
                             "max_seq_len": 4096, "mean_seq_len": 1200 + 50 * seed,
                             "lognormal_sigma": 1.1, "size": size, "seed": seed})
        batch = dp * (4 + seed % 7)
        m = 4096
        extra = ("--pp", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                 "--microbatch-group-size-per-virtual-pipeline-stage", "2") if vpp else ()
        multiple = dp * (2 if vpp else 1)
        out = os.path.join(work, f"megatron_order_{seed}.json")
        doc = plan_file(exe, out, config, dp, batch, m, "megatron", extra)
        contiguous = plan_file(exe, out, config, dp, batch, m, "contiguous", extra)
        def packs(step):  # fixed CP: group r of micro-batch k is replica r's pack
            return [[g["ids"] for g in mb] for mb in step["plans"]["dp_balanced"]["microbatches"]]

        for got, other in zip(doc["steps"], contiguous["steps"]):
            lengths_of = dict(zip(got["ids"], got["plans"]["dp_balanced"]["padded_lengths"]))
            want = megatron_plan(lengths_of, got["step"], batch, dp, m, multiple, size)
            cases += 1
            if packs(got) == want:
                matched += 1
            else:
                print(f"seed {seed} step {got['step']}: plan differs from Megatron's")
            contiguous_matches += packs(other) == want
    print(f"megatron order: {matched} of {cases} plans equal Megatron's; "
          f"contiguous order: {contiguous_matches} of {cases}")
    if matched != cases or contiguous_matches * 2 > cases:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
