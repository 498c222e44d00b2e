#!/usr/bin/env python3
"""Independent check of a `thdpack plan --plan-out` file: for every step and scheduler, every
sample of the step appears exactly once, every pack is non-empty and within the capacity, and
every replica has the same number of micro-batches. Exits non-zero on the first violation."""
import json
import sys


def main(path, expected_schedulers):
    with open(path) as f:
        doc = json.load(f)
    assert doc["format"] == "thdpack-plans-v1", doc.get("format")
    dp, capacity = doc["dp"], doc["capacity"]
    assert doc["steps"], "no steps"
    for step in doc["steps"]:
        lengths = dict(zip(step["ids"], step["padded_lengths"]))
        assert len(lengths) == len(step["ids"]), "duplicate ids in the step input"
        assert set(step["plans"]) == set(expected_schedulers), step["plans"].keys()
        for name, microbatches in step["plans"].items():
            seen = []
            for mb in microbatches:
                assert len(mb) == dp, f"{name}: micro-batch with {len(mb)} replicas, dp {dp}"
                for pack in mb:
                    assert pack, f"{name}: empty pack"
                    tokens = sum(lengths[i] for i in pack)
                    assert tokens <= capacity, f"{name}: pack of {tokens} tokens > {capacity}"
                    seen.extend(pack)
            assert sorted(seen) == sorted(step["ids"]), f"{name} step {step['step']}: samples lost or duplicated"
    print(f"{path}: {len(doc['steps'])} steps x {len(expected_schedulers)} schedulers OK")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","))
