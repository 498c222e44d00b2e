#!/usr/bin/env python3
"""Turns the benchmark JSON files into the README's results section.

usage: report.py (--results DIR | --speed speed.json --quality quality.json [...])
                 [--readme README.md [--check]]

Prints the markdown; with --readme, replaces the text between the markers
<!-- results:begin --> and <!-- results:end --> in that file. With --check as well, writes nothing
and exits 1 when that section differs from what the JSON files give (the machine named in its
first line aside), so that the README's figures cannot drift from bench/results. Standard library
only.
"""
import argparse
import glob
import json
import os
import platform
import re
import statistics
import sys

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

TARGETS_MS = {  # BENCHMARKS.md figures 4 and 5
    "BM_PackerBestFitDecreasing/10000": 0.5,
    "BM_PackerBestFitDecreasing/1000000": 50.0,
    "BM_BalancerBalanced/8192/64": 1.0,
    "BM_BalancerBalanced/32768/256": 50.0,
}


def medians(speed):
    """Median time (ms) and bytes/s of every benchmark, from repetitions or aggregates."""
    runs = {}
    for b in speed["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        runs.setdefault(name, []).append((b["real_time"] * unit, b.get("bytes_per_second")))
    out = {}
    for name, values in runs.items():
        out[name] = (statistics.median(v[0] for v in values),
                     statistics.median(v[1] or 0 for v in values))
    return out


# The planner's worst case over many inputs (thdpack_planner_bench): targets per case, in ms.
PLANNER_TARGETS_MS = {(8192, 64): 2.0, (32768, 256): 20.0}
PLANNER_LARGE_TARGET_MS = 100.0


def planner_table(planner):
    lines = ["| case (cap 32768, cost 24576·L + L²) | inputs | p50 | p90 | **max** | target (max) | "
             "slowest input | max / its distribution's median | dp_balanced p50 / max | "
             "step / tight bound p50, max | K over ceil(L2/dp), max | peak heap per sample |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in planner:
        if not c["inputs"]:
            continue
        key = (c["samples"], c["dp"])
        target = PLANNER_TARGETS_MS.get(key, PLANNER_LARGE_TARGET_MS if c["samples"] >= 1 << 20 else None)
        verdict = "-" if target is None else \
            f"<= {target:g} ms {'(met)' if c['max_ms'] <= target else '(missed)'}"
        ratio = c["max_over_distribution_median"]  # 0: fewer than 3 inputs per distribution
        spread = f"{ratio:.2f}" if ratio else "-"
        dpb = (f"{c['dp_balanced_p50_ms']:.2f} / {c['dp_balanced_max_ms']:.2f} ms"
               if "dp_balanced_p50_ms" in c else "-")
        lines.append(
            f"| {c['case']} | {c['inputs']} | {c['p50_ms']:.2f} ms | {c['p90_ms']:.2f} ms | "
            f"**{c['max_ms']:.2f} ms** | {verdict} | {c['slowest_input']} | "
            f"{spread} | {dpb} | {c['quality_p50']:.5f}, "
            f"{c['quality_max']:.5f} | {c['max_k_over_bound']} | "
            f"{c['heap_bytes_per_sample_max']:.0f} B |")
    return "\n".join(lines)


def speed_table(speed, planner=None):
    m = medians(speed)
    lines = ["| benchmark | median | target | baseline in the same run |", "|---|---|---|---|"]
    pairs = [
        ("BM_PackerBestFitDecreasing/10000", "BM_PackerFirstFitDecreasing/10000", "packer, 10k samples (best-fit decreasing)"),
        ("BM_PackerBestFitDecreasing/1000000", "BM_PackerFirstFitDecreasing/1000000", "packer, 1M samples"),
        ("BM_BalancerBalanced/8192/64", "BM_BalancerDpBalanced/8192/64", "balancer, 8192 samples into dp 64"),
        ("BM_BalancerBalanced/32768/256", "BM_BalancerDpBalanced/32768/256", "balancer, 32768 samples into dp 256"),
    ]
    for ours, base, label in pairs:
        if ours not in m or (planner and "Balancer" in ours):
            continue  # the planner's rows come from its worst case over many inputs
        t = m[ours][0]
        target = TARGETS_MS.get(ours)
        verdict = f"<= {target:g} ms {'(met)' if t <= target else '(missed)'}" if target else "-"
        base_text = "-"
        if base in m:
            base_name = "first-fit decreasing" if "Packer" in base else "dp_balanced"
            base_text = f"{base_name} {m[base][0]:.3f} ms ({m[base][0] / t:.2f}x of ours)"
        lines.append(f"| {label} | {t:.3f} ms | {verdict} | {base_text} |")
    if "BM_PackOneMillionTokens" in m and "BM_MemcpySameBytes" in m:
        pack_bw, copy_bw = m["BM_PackOneMillionTokens"][1], m["BM_MemcpySameBytes"][1]
        ratio = pack_bw / copy_bw if copy_bw else 0
        lines.append(
            f"| pack 1M tokens (5 fields, 29 B/token) | {m['BM_PackOneMillionTokens'][0]:.2f} ms, "
            f"{pack_bw / 1e9:.1f} GB/s | >= 0.5 of memcpy {'(met)' if ratio >= 0.5 else '(missed)'} | "
            f"memcpy of the same bytes {copy_bw / 1e9:.1f} GB/s (ratio {ratio:.2f}) |")
    return "\n".join(lines)


def step_table(quality):
    rows = quality["step_time"]
    schedulers = ["balanced", "dp_balanced", "local", "naive_ffd_lpt"]
    lines = ["| workload | dp | " + " | ".join(schedulers) + " | balanced speedup vs dp_balanced | micro-batches balanced / bound |",
             "|---|---|" + "---|" * len(schedulers) + "---|---|"]
    keys = []
    for r in rows:
        k = (r["workload"], r["dp"])
        if k not in keys:
            keys.append(k)
    speedups = []
    for k in keys:
        by = {r["scheduler"]: r for r in rows if (r["workload"], r["dp"]) == k}
        cells = [f"{by[s]['ratio_mean']:.4f}x" for s in schedulers]
        b = by["balanced"]
        speedups.append(b["speedup_vs_dp_balanced"])
        lines.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) +
                     f" | {b['speedup_vs_dp_balanced']:.3f}x | {b['microbatches_mean']:.2f} / {b['microbatch_bound_mean']:.2f} |")
    worst = max(r["ratio_max"] for r in rows if r["scheduler"] == "balanced")
    summary = (f"\n`balanced`: worst step over all workloads and steps {worst:.4f}x of the lower bound "
               f"(target 1.02x); mean speedup over `dp_balanced` {statistics.mean(speedups):.3f}x "
               f"(target 1.2x).")
    return "\n".join(lines) + "\n" + summary


def fill_table(quality):
    lines = ["| workload | n | C | L1 | L2 | FFD packs | BFD packs | BFD fill | BFD over L2 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in quality["fill"]:
        lines.append(f"| {r['workload']} | {r['n']:,} | {r['capacity']} | {r['l1']:,} | {r['l2']:,} | "
                     f"{r['ffd']:,} | {r['bfd']:,} | {100 * r['bfd_fill']:.3f}% | {100 * r['bfd_over_l2']:.3f}% |")
    return "\n".join(lines)


def violation_table(quality):
    lines = ["| scheduler | random cases | planned | rejected (too few samples) | violations |",
             "|---|---|---|---|---|"]
    for r in quality["violations"]:
        lines.append(f"| {r['scheduler']} | {r['cases']:,} | {r['planned']:,} | {r['rejected']} | {r['violations']} |")
    return "\n".join(lines)


def cp_table(quality):
    lines = ["| workload | cp | packs | per-sample zigzag (step) | per pack mean / max | whole-pack zigzag (step) | per pack mean / max | padding |",
             "|---|---|---|---|---|---|---|---|"]
    for r in quality["cp_balance"]:
        lines.append(f"| {r['workload']} | {r['cp']} | {r['packs']} | {r['zigzag_step']:.4f}x | "
                     f"{r['zigzag_mean']:.4f} / {r['zigzag_max']:.3f} | {r['whole_pack_step']:.4f}x | "
                     f"{r['whole_pack_mean']:.3f} / {r['whole_pack_max']:.3f} | {100 * r['padding_overhead']:.3f}% |")
    return "\n".join(lines)


def dynamic_cp_table(dynamic_cp):
    lines = ["| workload | dp·cp | samples | cost | dp_balanced, fixed cp | default_dynamic_cp | "
             "balanced_dynamic_cp | ours vs Megatron | plan ms (ours), median / max |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in dynamic_cp["dynamic_cp"]:
        lines.append(f"| {r['workload']} | {r['ranks']} | {r['samples']} | {r['cost']} | "
                     f"{r['dp_balanced']:.4f}x (cp {r['fixed_cp']}) | {r['default_dynamic_cp']:.4f}x | "
                     f"{r['balanced_dynamic_cp']:.4f}x | "
                     f"{r['default_dynamic_cp'] / r['balanced_dynamic_cp']:.3f}x | {r['plan_ms']:.1f}"
                     + (f" / {r['plan_ms_max']:.1f}" if "plan_ms_max" in r else "") + " |")
    return "\n".join(lines)


def dynamic_cp_timing_table(dynamic_cp):
    lines = ["| workload | dp·cp | M | samples | cost | scheduler | inputs | wall p50 / p90 / max ms | CPU p50 / max ms | step / bound, worst |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in dynamic_cp.get("timing", []):
        quality = f"{r['worst_step_over_bound']:.4f}" if "worst_step_over_bound" in r else "-"
        lines.append(f"| {r['workload']} | {r['ranks']} | {r['max_seqlen_per_dp_cp_rank']} | {r['samples']:,} | "
                     f"{r.get('cost', 'full')} | {r['scheduler']} | {r['inputs']} | {r['p50_ms']:.2f} / {r['p90_ms']:.2f} / {r['max_ms']:.2f} | "
                     f"{r['cpu_p50_ms']:.2f} / {r['cpu_max_ms']:.2f} | {quality} |")
    return "\n".join(lines)


def pipeline_table(runs):
    lines = ["| ranks | layout | bytes/rank (ours / Megatron-style) | exchange vs minimum (ours / Megatron-style) | collectives per step | s per 1M tokens (ours / Megatron-style) |",
             "|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (r["ranks"], r["layout"])):
        o, m = r["ours"], r["megatron_style"]
        layout = r["layout"].split(" (")[0]
        lines.append(f"| {r['ranks']} | {layout} | {o['bytes_per_rank_mean'] / 1e6:.2f} MB / {m['bytes_per_rank_mean'] / 1e6:.2f} MB "
                     f"({m['bytes_per_rank_mean'] / o['bytes_per_rank_mean']:.1f}x less) | {o['exchange_vs_minimum']:.4f}x / {m['exchange_vs_minimum']:.2f}x | "
                     f"{o['collectives_per_step']} / {m['collectives_per_step']} | "
                     f"{o['seconds_per_million_tokens']:.4f} / {m['seconds_per_million_tokens']:.4f} "
                     f"({m['seconds_per_million_tokens'] / o['seconds_per_million_tokens']:.1f}x faster) |")
    return "\n".join(lines)


def pack_table(pack):
    lines = ["| samples | packs | L2 bound | over L2 | fill | end to end (open, read index, pack, write) | of which packing | FFD (thdpack) | plain BFD | plain FFD |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in pack["rows"]:
        plain_bfd = f"{r['plain_bfd_packs']:,} packs, {r['plain_bfd_seconds']:.3f} s" if "plain_bfd_packs" in r else "-"
        plain_ffd = f"{r['plain_ffd_packs']:,} packs, {r['plain_ffd_seconds']:.3f} s" if "plain_ffd_packs" in r else "- (O(n x packs))"
        lines.append(f"| {r['samples']:,} | {r['packs']:,} | {r['l2']:,} | {100 * r['over_l2']:.4f}% | {100 * r['fill']:.3f}% | "
                     f"{r['seconds_total']:.3f} s | {r['seconds_pack']:.3f} s | {r['ffd_packs']:,} packs, {r['ffd_seconds']:.3f} s | "
                     f"{plain_bfd} | {plain_ffd} |")
    return "\n".join(lines)


def jsonl_table(jsonl):
    lines = ["| file (seeded) | MB | reader before (nlohmann SAX) | reader now | ratio | wall clock, before / now |",
             "|---|---|---|---|---|---|"]
    for f in jsonl["files"]:
        lines.append(f"| {f['file']} | {f['bytes'] / 1e6:.1f} | {f['old_median_mb_per_s']:.0f} MB/s | "
                     f"{f['new_median_mb_per_s']:.0f} MB/s | {f['ratio']:.2f}x | "
                     f"{f['old_median_wall_mb_per_s']:.0f} / {f['new_median_wall_mb_per_s']:.0f} MB/s |")
    met = lambda ok: "met" if ok else "missed"
    lines.append("")
    lines.append(f"Worst file: {jsonl['worst_new_mb_per_s']:.0f} MB/s per core "
                 f"(target >= 300, {met(jsonl['worst_new_mb_per_s'] >= 300)}), "
                 f"{jsonl['worst_ratio']:.2f}x the reader before "
                 f"(target >= 7x, {met(jsonl['worst_ratio'] >= 7)}).")
    return "\n".join(lines)


def parquet_table(parquet):
    lines = ["| file (seeded) | decoded MB (file MB) | wall: pyarrow use_threads=False / True / thdpack pack | ratio (wall) | CPU: pyarrow use_threads=False / thdpack pack | ratio (CPU) | thdpack peak RSS |",
             "|---|---|---|---|---|---|---|"]
    for f in parquet["files"]:
        lines.append(f"| seed {f['seed']}, {f['rows']:,} rows | {f['decoded_mb']:.0f} ({f['file_mb']:.0f}) | "
                     f"{f['pyarrow_1_thread_mb_per_wall_s']:.0f} / {f['pyarrow_threads_mb_per_wall_s']:.0f} / "
                     f"{f['thdpack_pack_mb_per_wall_s']:.0f} MB/s | {f['wall_ratio']:.3f} | "
                     f"{f['pyarrow_1_thread_mb_per_cpu_s']:.0f} / {f['thdpack_pack_mb_per_cpu_s']:.0f} MB/s | "
                     f"{f['ratio']:.3f} | {f['thdpack_peak_rss_mib']:.0f} MiB |")
    lines.append("")
    for key, what in (("wall_ratio", "wall time"), ("ratio", "CPU time")):
        worst = min(f[key] for f in parquet["files"])
        lines.append(f"Worst file by {what}: thdpack pack at {worst:.3f} of pyarrow's read "
                     f"(target >= 0.8, {'met' if worst >= 0.8 else 'missed'}).")
    large = parquet.get("large")
    if large:
        lines.append(f"End to end, {large['samples']:,} samples ({large['tokens']:,} tokens, 1-15 "
                     f"each, 10 shards) to a pack file: {large['seconds']:.1f} s wall, "
                     f"{large['cpu_seconds']:.1f} s CPU, peak RSS {large['peak_rss_mib']:,.0f} MiB.")
    return "\n".join(lines)


def bridge_pack_table(bridge):
    lines = ["| file (seeded) | tokens | Bridge: wall (CPU) | Bridge stages: read / hist / strategy / fill / write | thdpack: wall (CPU) | thdpack stages: open / pack / write | Bridge / thdpack, wall (CPU) | packs (L1 bound), Bridge / thdpack | fill, Bridge (counting n - 1) / thdpack | largest pack, tokens, Bridge / thdpack | peak RSS, Bridge / thdpack | output MB, Bridge / thdpack | samples missing or extra, Bridge / thdpack |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in bridge["files"]:
        b, t = f["bridge"], f["thdpack"]
        stages = " / ".join(f"{b['stages_s'][k]:.1f}" for k in ("read", "hist", "strategy", "fill", "write"))
        ours = " / ".join(f"{t['stages_s'][k]:.2f}" for k in ("open", "pack", "write"))
        lines.append(f"| seed {f['seed']}, {f['rows']:,} rows | {f['tokens']:,} | "
                     f"{b['wall_s']:.1f} s ({b['cpu_s']:.1f} s) | {stages} s | "
                     f"{t['wall_s']:.2f} s ({t['cpu_s']:.2f} s) | {ours} s | "
                     f"{f['speedup']:.1f}x ({f['cpu_speedup']:.1f}x) | "
                     f"{b['packs']:,} ({b['l1_bound']:,}) / {t['packs']:,} ({t['l1_bound']:,}) | "
                     f"{b['fill']:.4f} ({b['fill_own_rule']:.4f}) / {t['fill']:.4f} | "
                     f"{b['largest_pack_tokens']:,} / {t['largest_pack_tokens']:,} | "
                     f"{b['peak_rss_mib']:,.0f} / {t['peak_rss_mib']:,.0f} MiB | "
                     f"{b['output_mb']:.0f} / {t['output_mb']:.0f} | "
                     f"{b['samples_missing'] + b['samples_extra']} / {t['samples_missing'] + t['samples_extra']} |")
    lines.append("")
    summary = bridge["summary"]
    lines.append(f"thdpack against Bridge over {len(bridge['files'])} files: "
                 f"{summary['median_speedup']:.1f}x faster by wall time at the median, "
                 f"{summary['worst_speedup']:.1f}x at the worst "
                 f"(CPU time: {summary['median_cpu_speedup']:.1f}x and {summary['worst_cpu_speedup']:.1f}x).")
    return "\n".join(lines)


def moe_table(runs):
    lines = ["| ranks | tokens/rank (mean) | hidden | experts | k | dispatch bytes vs minimum | combine bytes vs minimum | padded: extra rows/rank mean / max, over group max | s per 1M pairs (unpadded / padded / raw alltoallv floor) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (r["ranks"], r["hidden"], r["topk"])):
        lines.append(f"| {r['ranks']} | {r['tokens_per_rank_mean']:,} | {r['hidden']} | {r['experts']} | {r['topk']} | "
                     f"{r['dispatch_bytes_vs_minimum']:.4f}x | {r['combine_bytes_vs_minimum']:.4f}x | "
                     f"{r['padded_extra_rows_mean']:,.0f} / {r['padded_extra_rows_max']:,}, {r['padded_rows_over_max_tokens']} | "
                     f"{r['seconds_per_million_pairs']:.3f} / {r['padded_seconds_per_million_pairs']:.3f} / "
                     f"{r['raw_alltoallv_seconds_per_million_pairs']:.3f} ({r['vs_raw_alltoallv']:.1f}x the floor) |")
    return "\n".join(lines)


def reorder_table(runs):
    def spread(v):
        return "inf" if v is None else f"{v:.3f}x"
    lines = ["| DP ranks | workload | micro-batches x samples | vision-cost spread before | after, longest-first (reference) | after, ours | slowest rank / mean, ours | samples moved, ours / longest-first | MB moved | exchange ms, synchronous / overlapped (exposed) | wall s, synchronous / overlapped |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (r["workload"]["max_side"], r["ranks"])):
        w = r["workload"]
        name = (f"{100 * w['text_only_fraction']:.0f}% text-only, {w['mean_images']:g} images, "
                f"sides {w['min_side']}..{w['max_side']}")
        lines.append(f"| {r['ranks']} | {name} | {r['microbatches']} x {r['microbatch_size']} | "
                     f"{spread(r['spread_before_mean'])} | {spread(r['spread_reference_mean'])} | "
                     f"{spread(r['spread_after_mean'])} | {r['max_over_mean_after']:.4f}x | "
                     f"{r['samples_moved']:,} / {r['reference_samples_moved']:,} of {r['samples']:,} | "
                     f"{r['bytes_moved'] / 1e6:,.1f} | {1e3 * r['sync_exchange_seconds']:.0f} / "
                     f"{1e3 * r['overlapped_exposed_seconds']:.0f} | {r['sync_wall_seconds']:.2f} / "
                     f"{r['overlapped_wall_seconds']:.2f} |")
    return "\n".join(lines)


def render(speed, quality, pipeline=None, pack=None, moe=None, reorder=None, planner=None,
           dynamic_cp=None, jsonl=None, parquet=None, bridge_pack=None):
    cpu = platform.processor() or platform.machine()
    return "\n\n".join([
        f"Measured by `bash scripts/bench.sh` ({cpu}, single thread except where a row says not; "
        f"medians over repetitions; "
        f"quality figures over {quality['steps']} seeded steps per workload).",
        "**Modeled step time / lower bound** (BENCHMARKS.md figure 1; Llama-3-8B-like cost; lower bound "
        "max(total/dp, largest sample)/cp; mean over steps):\n\n" + step_table(quality),
        "**Speed** (figures 4, 5, 9):\n\n" + speed_table(speed, planner),
    ] + ([
        "**Planner time, worst case over many inputs** (figure 5; `thdpack_planner_bench`: the "
        "`balanced` scheduler timed on every input of a case, seeded inputs from 8 length "
        "distributions: sft-8k, longtail-32k, uniform-16k, bimodal-16k, a chat-like mix of "
        "100-600-token turns with a tail to 32k, RL rollouts clipped at the cap, a tight case whose "
        "lengths fill whole packs exactly, and many equal lengths; dp_balanced and plain LPT + "
        "first-fit on the same inputs in the same run; quality never worse than LPT + first-fit on "
        "any input):\n\n" + planner_table(planner)
    ] if planner else []) + ([
        "**Dynamic context parallelism** (figure 12; `thdpack_dynamic_cp_bench`: modeled step / lower "
        "bound, medians over seeds, batches of 8 and of 64 samples per rank of the dp·cp group (the "
        "samples column); `L^2/cp` is Megatron's "
        "workload, `full` the CP cost model of docs/schedulers.md with its defaults (Llama-3-8B, "
        "400 TFLOP/s, 50 GB/s ring link, 20 us per ring step and layer); a dynamic-CP step is the sum "
        "over micro-batches of the slowest CP group, a fixed-CP step the slowest replica's sum; the "
        "bound is max(least rank-time of all samples / (dp·cp), slowest single sample)):\n\n"
        + dynamic_cp_table(dynamic_cp)
    ] if dynamic_cp else []) + ([
        "**Dynamic-CP planning time** (`thdpack_dynamic_cp_bench`: both dynamic-CP schedulers timed on "
        "every one of many seeded inputs per row, 8 samples per rank, with the full CP cost model; "
        "four length distributions at their own M, then two inputs each of 4,095 (the most "
        "balanced_dynamic_cp plans whole on 256 ranks), 16,384, 131,072 and "
        "1,048,576 samples on 256 ranks and 16,383 on 1,024 ranks (the most planned whole there) "
        "under both cost models, and one batch of each size whose "
        "samples all have M = 16,384 tokens (fixed-M: a group per sample); wall time on a 2-core machine shared with other jobs, so the "
        "process's CPU time is shown too; the last column is the worst modeled step over the "
        "lower bound of the plans timed):\n\n" + dynamic_cp_timing_table(dynamic_cp)
    ] if dynamic_cp and dynamic_cp.get("timing") else []) + [
        "**Offline packing fill** (figure 3):\n\n" + fill_table(quality),
        "**Hard constraints** (figure 6):\n\n" + violation_table(quality),
        "**CP balance**, max/mean causal-attention work across CP ranks (figure 7; step = work-weighted "
        "over all packs):\n\n" + cp_table(quality),
    ] + ([
        "**Pipeline cost per step** (figure 8; `thdpack_pipeline_bench` under `mpirun --oversubscribe` "
        "on this machine, sft-8k global batches, median of 20 steps; the Megatron-style flow runs in "
        "the same process on the same plans: whole samples to every CP rank, one exchange per field, "
        "per-micro-batch TP broadcasts, PP metadata broadcast):\n\n" + pipeline_table(pipeline)
    ] if pipeline else []) + ([
        "**Offline packing from Megatron indexed datasets** (`thdpack_pack_bench`: longtail-32k "
        "lengths, capacity 32768, lengths read from the index; baselines implemented plainly in the "
        "benchmark):\n\n" + pack_table(pack)
    ] if pack else []) + ([
        "**Reading JSONL** (`thdpack_jsonl_bench`: what `thdpack plan --jsonl` and `pack --jsonl` "
        f"read first; {len(jsonl['files']) if jsonl else 0} files generated from fixed seeds, "
        "SFT-like token ids with and without a loss mask or labels, compact or spaced as Python's "
        "json.dumps writes them; the reader before (lines read byte by byte, nlohmann's SAX "
        "parser) runs in the same process on the same files; MB/s per core are bytes over the "
        "reading thread's CPU time, median of "
        f"{jsonl['files'][0]['reps'] if jsonl else 0} reads each; the wall clock is shown too, on "
        "a 2-core machine shared with other jobs):\n\n" + jsonl_table(jsonl)
    ] if jsonl else []) + ([
        "**Reading Parquet** (`bench/parquet_bench.py`: `thdpack pack --parquet FILE "
        "--loss-mask-column loss_mask -C 8192 -o OUT` as a process, start to pack file written, "
        "against pyarrow's `read_table` of the same two columns with use_threads=False; seeded SFT-like "
        "files, int32 `input_ids` and int8 `loss_mask`, row groups of 65,536 rows; MB/s of decoded "
        "column bytes per second of wall time and of CPU time (user + system, all threads; "
        "pyarrow's reader uses helper threads even with use_threads=False, and thdpack reads "
        "row groups on as many threads as the machine has, at most 8), median of "
        f"{parquet.get('reps', 3) if parquet else 0} runs each, on a 2-core machine):\n\n"
        + parquet_table(parquet)
    ] if parquet else []) + ([
        "**Parquet to packed Parquet, beside Megatron-Bridge** (`bench/bridge_pack_bench.py`: "
        "`thdpack pack --parquet FILE --loss-mask-column loss_mask -C "
        f"{bridge_pack['pack_size'] if bridge_pack else 0} --parquet-out DIR` against megatron-bridge "
        f"{bridge_pack['megatron_bridge'] if bridge_pack else ''}'s `create_hist`, "
        f"`create_packing_strategy` ({bridge_pack['algorithm'] if bridge_pack else ''}, Bridge's "
        "default) and `fill_packing_strategy` on seeded SFT-like files from the same generator as "
        "above, each side a process from the pre-tokenized file to packed Parquet in Bridge's "
        "schema written "
        "(Bridge's side reads the file into per-sample dicts with pyarrow and writes with pyarrow "
        "what its `write_packed_parquet` writes, row groups of 500); median of "
        f"{bridge_pack['reps'] if bridge_pack else 0} runs each; "
        "Bridge counts a sample of n tokens as n - 1 against the pack size, thdpack as n, so each "
        "side's packs are set against the L1 bound under its own rule, and fill is tokens / "
        "(packs x pack size) (for Bridge also (tokens - samples) / (packs x pack size)); both outputs read back and compared with the input sample by "
        "sample (tokens and the loss mask shifted by one); on a 2-core machine shared with other "
        "jobs):\n\n" + bridge_pack_table(bridge_pack)
    ] if bridge_pack else []) + ([
        "**MoE dispatch and combine** (figure 10; `thdpack_moe_bench` under `mpirun --oversubscribe` "
        "on this machine; per-rank token counts drawn from 0.5x to 1.5x the mean as with THD "
        "micro-batches; the minimum is each token's hidden state once per other rank it visits, the "
        "excess is its local expert ids and weights; padded mode pads to the group maximum rounded up "
        "to 64 and its pad rows route nowhere, so they add no traffic; the floor is one alltoallv of "
        "the same hidden-state bytes there and back with buffers reused, measured in the same run):\n\n"
        + moe_table(moe)
    ] if moe else []) + ([
        "**Multimodal intra-microbatch reordering** (`thdpack reorder --microbatches 48 -W 2 "
        "--compute-ms 20` under `mpirun --oversubscribe` on this machine; 8 samples per rank per "
        "micro-batch of the synthetic vision-language workload; spread = max/min of per-rank vision "
        "cost, mean over micro-batches; the reference is count-capped longest-first on the same "
        "costs; the compute step is simulated as a sleep proportional to the rank's cost, which the "
        "overlapped exchange of the next window hides; Megatron-Bridge reports 1.27x -> 1.07x at "
        "dp 4 and 1.55x -> 1.04x at dp 8 on its own data):\n\n" + reorder_table(reorder)
    ] if reorder else []))


def take_results_dir(args, folder):
    """Fills the file options of `args` from `folder`, as scripts/bench.sh names the files."""
    def one(name):
        path = os.path.join(folder, name)
        return path if os.path.exists(path) else None
    args.speed, args.quality = one("speed.json"), one("quality.json")
    args.planner, args.dynamic_cp, args.pack = (one("planner.json"), one("dynamic_cp.json"),
                                                one("pack.json"))
    args.jsonl, args.parquet = one("jsonl.json"), one("parquet.json")
    args.bridge_pack = one("bridge_pack.json")
    args.pipeline = sorted(glob.glob(os.path.join(folder, "pipeline_*.json")))
    args.moe = sorted(glob.glob(os.path.join(folder, "moe_*.json")))
    args.reorder = sorted(glob.glob(os.path.join(folder, "reorder_*.json")))


def check_section(path, readme, text):
    """None when the results section of `readme` is `text`, else a message naming the first line
    that differs. The first line names the benchmark machine and is not compared."""
    section = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n").split("\n")
    wanted = text.split("\n")
    first_line = readme[:readme.index(BEGIN)].count("\n") + 2
    for i, (have, want) in enumerate(zip(section, wanted)):
        if i > 0 and have != want:
            return (f"{path}:{first_line + i}: the results section differs from bench/results "
                    f"(run bash scripts/bench.sh or bench/report.py --readme):\n"
                    f"  README: {have}\n  JSON:   {want}")
    if len(section) != len(wanted):
        return (f"{path}: the results section has {len(section)} lines, the JSON files give "
                f"{len(wanted)}")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", metavar="DIR",
                    help="take every file from DIR under the names scripts/bench.sh gives them "
                         "(speed.json, quality.json, planner.json, dynamic_cp.json, pack.json, "
                         "jsonl.json, parquet.json, bridge_pack.json, pipeline_*.json, moe_*.json, reorder_*.json)")
    ap.add_argument("--speed")
    ap.add_argument("--quality")
    ap.add_argument("--pipeline", nargs="*", default=[])
    ap.add_argument("--pack")
    ap.add_argument("--moe", nargs="*", default=[])
    ap.add_argument("--reorder", nargs="*", default=[])
    ap.add_argument("--planner")
    ap.add_argument("--dynamic-cp")
    ap.add_argument("--jsonl")
    ap.add_argument("--parquet")
    ap.add_argument("--bridge-pack")
    ap.add_argument("--readme")
    ap.add_argument("--check", action="store_true",
                    help="with --readme: compare instead of writing; exit 1 on a difference")
    args = ap.parse_args()
    if args.check and not args.readme:
        ap.error("--check needs --readme")
    if args.results:
        take_results_dir(args, args.results)
    if not args.speed or not args.quality:
        ap.error("--speed and --quality are required (or --results DIR)")
    with open(args.speed) as f:
        speed = json.load(f)
    with open(args.quality) as f:
        quality = json.load(f)
    pipeline = []
    for path in args.pipeline:
        with open(path) as f:
            pipeline.append(json.load(f))
    pack = None
    if args.pack:
        with open(args.pack) as f:
            pack = json.load(f)
    moe = []
    for path in args.moe:
        with open(path) as f:
            moe.append(json.load(f))
    reorder = []
    for path in args.reorder:
        with open(path) as f:
            reorder.append(json.load(f))
    planner = None
    if args.planner:
        with open(args.planner) as f:
            planner = json.load(f)
    dynamic_cp = None
    if args.dynamic_cp:
        with open(args.dynamic_cp) as f:
            dynamic_cp = json.load(f)
    jsonl = None
    if args.jsonl:
        with open(args.jsonl) as f:
            jsonl = json.load(f)
    parquet = None
    if args.parquet:
        with open(args.parquet) as f:
            parquet = json.load(f)
    bridge_pack = None
    if args.bridge_pack:
        with open(args.bridge_pack) as f:
            bridge_pack = json.load(f)
    text = render(speed, quality, pipeline, pack, moe, reorder, planner, dynamic_cp, jsonl,
                  parquet, bridge_pack)
    if args.readme:
        with open(args.readme) as f:
            readme = f.read()
        if BEGIN not in readme or END not in readme:
            sys.exit(f"{args.readme} has no {BEGIN} ... {END} section")
        if args.check:
            sys.exit(check_section(args.readme, readme, text))
    print(text)
    if args.readme:
        readme = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                        lambda _: BEGIN + "\n" + text + "\n" + END, readme, flags=re.S)
        with open(args.readme, "w") as f:
            f.write(readme)
        print(f"\nupdated {args.readme}", file=sys.stderr)


if __name__ == "__main__":
    main()
