#!/usr/bin/env python3
"""Independent check of a `thdpack plan --scheduler <dynamic CP> --plan-out` file, and optionally
of the `--report` page written in the same run.

For every step and dynamic-CP scheduler: every sample of the step is in exactly one CP group of
one micro-batch; each micro-batch's groups are contiguous rank ranges covering [0, dp*cp) with the
member ranks listed; each group's size is allowed (a power of two, min_cp times one, or dp*cp) and
its tokens stay within M x size; the micro-batch count is a multiple of the VPP group;
sample_groups names each sample's group. Fixed-CP plans hold every sample once with dp replicas
and packs within M x cp. With a report, each scheduler's modeled step recomputed here from the
file's cost model matches the page's data-step-seconds. Exits non-zero on the first violation."""
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


def main(path, expected, report=None):
    with open(path) as f:
        doc = json.load(f)
    assert doc["format"] == "thdpack-dynamic-cp-plans-v1", doc.get("format")
    ranks, m, cp, dp = doc["ranks"], doc["max_seqlen_per_dp_cp_rank"], doc["cp"], doc["dp"]
    assert ranks == dp * cp
    assert doc["steps"], "no steps"
    steps = {}
    for step in doc["steps"]:
        ids = step["ids"]
        assert len(set(ids)) == len(ids), "duplicate ids in the step input"
        length = dict(zip(ids, step["padded_lengths"]))
        assert all(l % doc["divisor"] == 0 for l in step["padded_lengths"])
        fixed_length = dict(zip(ids, step["fixed_cp_padded_lengths"]))
        assert set(step["plans"]) == set(expected), step["plans"].keys()
        times = {}
        for name, mbs in step["fixed_cp_plans"].items():
            seen = []
            replica_time = [0.0] * dp
            for mb in mbs:
                assert len(mb) == dp, f"{name}: {len(mb)} replicas, dp {dp}"
                for r, pack in enumerate(mb):
                    assert sum(fixed_length[i] for i in pack) <= m * cp, f"{name}: pack over M x cp"
                    replica_time[r] += sum(time(doc["cost"], fixed_length[i], cp) for i in pack)
                    seen.extend(pack)
            assert sorted(seen) == sorted(ids), f"{name}: samples lost or duplicated"
            times[name] = max(replica_time)
        for name, plan in step["plans"].items():
            mbs = plan["microbatches"]
            assert len(mbs) % doc["microbatch_multiple"] == 0, f"{name}: {len(mbs)} micro-batches"
            where = {}
            total = 0.0
            for k, mb in enumerate(mbs):
                rank = 0
                slowest = 0.0
                for g, group in enumerate(mb["groups"]):
                    size = group["size"]
                    assert group["first_rank"] == rank, f"{name} mb {k} group {g}: not contiguous"
                    assert group["ranks"] == list(range(rank, rank + size)), f"{name} mb {k} group {g}: ranks"
                    assert allowed(size, ranks, doc["min_cp"]), f"{name} mb {k} group {g}: size {size}"
                    assert group["ids"], f"{name} mb {k} group {g}: empty"
                    assert sum(length[i] for i in group["ids"]) <= m * size, f"{name} mb {k} group {g}: over M x size"
                    for i in group["ids"]:
                        assert i not in where, f"{name}: sample {i} twice"
                        where[i] = [k, g]
                    slowest = max(slowest, sum(time(doc["cost"], length[i], size) for i in group["ids"]))
                    rank += size
                assert rank == ranks, f"{name} mb {k}: groups cover {rank} of {ranks} ranks"
                total += slowest
            assert sorted(where) == sorted(ids), f"{name}: samples lost"
            assert plan["sample_groups"] == [where[i] for i in ids], f"{name}: sample_groups"
            times[name] = total
        steps[step["step"]] = times
    if report:
        with open(report) as f:
            page = f.read()
        step = int(re.search(r'<body[^>]*data-step="(\d+)"', page).group(1))
        shown = dict(re.findall(r'<h3 data-scheduler="([^"]+)" data-step-seconds="([^"]+)"', page))
        assert set(shown) == set(steps[step]), (shown.keys(), steps[step].keys())
        for name, value in shown.items():
            want = steps[step][name]
            assert abs(float(value) - want) <= 1e-6 * want, f"{name}: report {value}, plan file {want}"
    print(f"{path}: {len(doc['steps'])} steps x {len(expected)} dynamic CP schedulers OK")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), sys.argv[3] if len(sys.argv) > 3 else None)
