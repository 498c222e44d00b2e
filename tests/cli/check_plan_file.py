#!/usr/bin/env python3
"""Independent check of a `thdpack plan --plan-out` file (format thdpack-plan-v2, see
include/thdpack/schedule/plan_file.hpp), and optionally of the `--report` page of a dynamic-CP run
written beside it.

For every step and scheduler: the planned batch is laid out for the head's dp and cp, lists one
padded length per id of the step, and holds every sample of the step exactly once in non-empty
groups; the micro-batch count is a multiple of the head's microbatch_multiple (when given).
Fixed-CP plans have dp groups of size cp at ranks r*cp per micro-batch with at most M x cp tokens
each; dynamic-CP plans have contiguous groups covering [0, dp*cp) of allowed sizes (a power of two,
min_cp times one, or dp*cp) with at most M x size tokens. With a report, each scheduler's modeled
step recomputed from the head's CP cost model matches the page's data-step-seconds.
Usage: check_plan_file.py FILE sched1,sched2,... [REPORT.html]. Exits non-zero on the first
violation."""
import json
import re
import sys


def time(cost, length, c):
    compute = (cost["linear"] * length + cost["quadratic"] * length * length) / c / cost["flops_per_second"]
    exposed = 0.0
    if cost["link_bytes_per_second"] > 0 and c > 1:
        comm = cost["passes"] * (c - 1) / c * cost["kv_bytes_per_token"] * length / cost["link_bytes_per_second"]
        attention = cost["quadratic"] * length * length / c / cost["flops_per_second"]
        exposed = max(0.0, comm - attention)
    return compute + exposed + cost["step_overhead_seconds"] * cost["layers"] * c


def allowed(size, ranks, min_cp):
    if size == ranks:
        return True
    if size < min_cp or size > ranks:
        return False
    return any(size in (1 << j, min_cp << j) for j in range(31))


def check_plan(doc, name, plan, ids):
    """The plan's modeled step under the head's CP cost model (when it has one)."""
    dp, cp, m = doc["dp"], doc["cp"], doc["max_seqlen_per_dp_cp_rank"]
    ranks = dp * cp
    assert plan["scheduler"] == name, f"{name}: scheduler field {plan['scheduler']}"
    assert (plan["dp"], plan["cp"]) == (dp, cp), f"{name}: laid out for dp {plan['dp']} cp {plan['cp']}"
    assert len(plan["padded_lengths"]) == len(ids), f"{name}: padded lengths"
    length = dict(zip(ids, plan["padded_lengths"]))
    mbs = plan["microbatches"]
    assert len(mbs) % doc.get("microbatch_multiple", 1) == 0, f"{name}: {len(mbs)} micro-batches"
    fixed = plan["layout"] == "fixed"
    assert plan["layout"] in ("fixed", "dynamic"), plan["layout"]
    cost = doc["cost"] if "flops_per_second" in doc["cost"] else None
    seen = []
    replica = [0.0] * dp
    step = 0.0
    for k, mb in enumerate(mbs):
        rank = 0
        slowest = 0.0
        if fixed:
            assert len(mb) == dp, f"{name} mb {k}: {len(mb)} groups, dp {dp}"
        for g, group in enumerate(mb):
            size = group["size"]
            assert group["first_rank"] == rank, f"{name} mb {k} group {g}: not contiguous"
            if fixed:
                assert size == cp, f"{name} mb {k} group {g}: size {size} under fixed CP {cp}"
            else:
                assert allowed(size, ranks, doc["min_cp"]), f"{name} mb {k} group {g}: size {size}"
            assert group["ids"], f"{name} mb {k} group {g}: empty"
            tokens = sum(length[i] for i in group["ids"])
            assert tokens <= m * size, f"{name} mb {k} group {g}: {tokens} tokens over M x {size}"
            seen.extend(group["ids"])
            if cost:
                t = sum(time(cost, length[i], size) for i in group["ids"])
                slowest = max(slowest, t)
                if fixed:
                    replica[g] += t
            rank += size
        assert rank == ranks, f"{name} mb {k}: groups cover {rank} of {ranks} ranks"
        step += slowest
    assert sorted(seen) == sorted(ids), f"{name}: samples lost or duplicated"
    return max(replica) if fixed else step


def main(path, expected, report=None):
    with open(path) as f:
        doc = json.load(f)
    assert doc["format"] == "thdpack-plan-v2", doc.get("format")
    assert doc["steps"], "no steps"
    steps = {}
    for step in doc["steps"]:
        ids = step["ids"]
        assert len(set(ids)) == len(ids), "duplicate ids in the step input"
        assert set(step["plans"]) == set(expected), step["plans"].keys()
        steps[step["step"]] = {name: check_plan(doc, name, plan, ids)
                               for name, plan in step["plans"].items()}
    if report:
        with open(report) as f:
            page = f.read()
        at = int(re.search(r'<body[^>]*data-step="(\d+)"', page).group(1))
        shown = dict(re.findall(r'<h3 data-scheduler="([^"]+)" data-step-seconds="([^"]+)"', page))
        assert set(shown) == set(steps[at]), (shown.keys(), steps[at].keys())
        for name, value in shown.items():
            want = steps[at][name]
            assert abs(float(value) - want) <= 1e-6 * want, f"{name}: report {value}, plan file {want}"
        # The same page as without a dynamic-CP scheduler: the fixed-CP plans in detail follow.
        fixed_cp = [n for n in expected if not n.endswith("dynamic_cp")]
        drawn = set(re.findall(r'<svg[^>]*id="replicas-([^"]+)"', page))
        assert drawn == set(fixed_cp), f"fixed-CP replica charts {drawn}, expected {fixed_cp}"
    print(f"{path}: {len(doc['steps'])} steps x {len(expected)} schedulers OK")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), sys.argv[3] if len(sys.argv) > 3 else None)
