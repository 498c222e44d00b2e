"""Times TRL's pack_dataset against thdpack.trl.pack_dataset on the same dataset, in one process.

    .venv/bin/python bench/trl_pack_bench.py [--rows 1000000] [--seq-length 4096] [--reps 3]

The dataset is `--rows` rows of int32 token ids (and an int8 attention mask with --mask) whose
lengths are drawn from a log-normal distribution (median about 220 tokens, a long tail clipped at
16384: SFT-like), held in memory as a datasets.Dataset. Each strategy is packed `--reps` times by
each implementation, alternating; the table gives the median seconds and TRL / thdpack. Both run
through datasets.map with TRL's default batch of 1000 rows; the outputs are checked to be equal.
A second table times the packing functions alone (TRL's and thdpack's per-batch function, on the
same 1000-row arrow batches, without datasets.map around them).
"""

import argparse
import statistics
import time

import datasets
import numpy as np
import pyarrow as pa
import trl

from thdpack.trl import pack_dataset


def make_dataset(rows, seed, mask):
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(220), 1.0, rows), 1, 16384).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = rng.integers(0, 128000, int(offsets[-1]), dtype=np.int32)
    columns = {"input_ids": pa.LargeListArray.from_arrays(offsets, pa.array(tokens))}
    if mask:
        columns["attention_mask"] = pa.LargeListArray.from_arrays(
            offsets, pa.array(np.ones(tokens.size, dtype=np.int8)))
    return datasets.Dataset(pa.table(columns)), int(offsets[-1])


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seq-length", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mask", action="store_true", help="also an attention_mask column")
    parser.add_argument("--strategies", default="bfd,bfd_split,wrapped")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    datasets.disable_caching()

    dataset, tokens = make_dataset(args.rows, args.seed, args.mask)
    print(f"{args.rows} rows, {tokens} tokens, seq_length {args.seq_length}, "
          f"median of {args.reps}, datasets {datasets.__version__}, trl {trl.__version__}")
    print(f"{'strategy':<10} {'packed rows':>11} {'TRL s':>8} {'thdpack s':>10} {'TRL/thdpack':>12}")
    for strategy in args.strategies.split(","):
        theirs, ours = [], []
        for _ in range(args.reps):
            t, want = timed(lambda: trl.pack_dataset(dataset, args.seq_length, strategy))
            theirs.append(t)
            t, got = timed(lambda: pack_dataset(dataset, args.seq_length, strategy))
            ours.append(t)
        assert got.data.table.equals(want.data.table), f"{strategy}: outputs differ"
        a, b = statistics.median(theirs), statistics.median(ours)
        print(f"{strategy:<10} {got.num_rows:>11} {a:>8.2f} {b:>10.2f} {a / b:>11.2f}x")

    from trl.data_utils import _pack_bfd as trl_pack_bfd

    from thdpack.trl import _pack_bfd

    table = dataset.data.table
    batches = [table.slice(i, 1000) for i in range(0, table.num_rows, 1000)]
    print("packing function alone, per map batch of 1000 rows, summed over the batches:")
    print(f"{'strategy':<10} {'TRL s':>8} {'thdpack s':>10} {'TRL/thdpack':>12}")
    for strategy, overflow in (("bfd", "truncate"), ("bfd_split", "split")):
        theirs, ours = [], []
        for _ in range(args.reps):
            theirs.append(timed(lambda: [trl_pack_bfd(b, args.seq_length, overflow)
                                         for b in batches])[0])
            ours.append(timed(lambda: [_pack_bfd(b, args.seq_length, overflow == "split")
                                       for b in batches])[0])
        a, b = statistics.median(theirs), statistics.median(ours)
        print(f"{strategy:<10} {a:>8.2f} {b:>10.2f} {a / b:>11.2f}x")


if __name__ == "__main__":
    main()
