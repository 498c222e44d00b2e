#!/usr/bin/env bash
# Memory the process may use, as the commands see it: under an address-space limit (ulimit -v),
# pack and convert refuse a source too large up front, naming the limit, and a command that runs
# out of memory anyway ends with one line and exit 2 (not "unexpected error: std::bad_alloc").
#
#   bash tests/cli/memory_limits_test.sh THDPACK WORK_DIR
set -uo pipefail
thdpack=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
# The address space the binary needs to start at all, over what it needed without shared libraries
# of its own (a build with Parquet sources maps Arrow's and Parquet's, some 60 MB), is added to
# every limit below, so that each still lies where the command runs short of memory, not before it
# starts.
start=5000
until { (ulimit -v "$start"; "$thdpack" --version >/dev/null 2>&1); } 2>/dev/null; do
  start=$((start + 5000))
  [ "$start" -le 1000000 ] || fail "thdpack does not start under ulimit -v 1000000"
done
extra=$((start > 15000 ? start - 15000 : 0))  # 15000: what a build without them needs
mock() {  # a mock config of $1 samples
  echo "{\"mode\": \"distribution\", \"type\": \"lognormal\", \"min_seq_len\": 1, \"max_seq_len\": 10, \"mean_seq_len\": 5, \"lognormal_sigma\": 1.0, \"size\": $1}" > "$work/mock_$1.json"
  echo "$work/mock_$1.json"
}
expect() {  # expect KB_LIMIT NEEDLE COMMAND...: exit 2 and one line holding NEEDLE
  local limit=$1 needle=$2
  shift 2
  local err rc
  err=$( (ulimit -v "$((limit + extra))"; "$thdpack" "$@" --no-progress) 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = 2 ] || fail "$*: exit $rc, expected 2 ($err)"
  [ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == *"$needle"* ]] || fail "$*: the message is: $err"
}
big=$(mock 100000000)
expect 2000000 "GB of memory; this process may use" \
  pack --dataset-config "$big" -C 100
expect 2000000 "GB of memory; this process may use" \
  convert --dataset-config "$big" --out "$work/never"
expect 400000 "thdpack: error: out of memory" \
  plan --dataset-config "$(mock 1000000000)" --global-batch 100000000 --dp 1 --steps 1 -M 16
# A JSONL source under limits from too small to enough, read and reread (pack -o --materialize):
# every run ends with exit 0 or one line and exit 2, never an abort (a JSON document's destructor
# allocates: reading lines through one ended in std::terminate when memory ran out).
/usr/bin/python3 - "$work/big.jsonl" <<'PY'
import random, sys
rng = random.Random(1)
with open(sys.argv[1], "w") as f:
    for _ in range(4000):
        f.write('{"input_ids":[' + ",".join(str(rng.randrange(50000)) for _ in range(rng.randint(1, 1500))) + "]}\n")
PY
outcomes=""
for limit in 40000 50000 60000 70000 80000 100000 120000 160000; do
  err=$( (ulimit -v "$((limit + extra))"; "$thdpack" pack --jsonl "$work/big.jsonl" -C 4096 -o "$work/j.thdpacks" \
    --materialize "$work/j_m" --no-progress) 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = 0 ] || { [ "$rc" = 2 ] && [ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == "thdpack: error: "* ]]; } ||
    fail "JSONL under ulimit -v $limit: exit $rc: $err"
  outcomes="$outcomes $rc"
done
echo "ok: pack and convert refuse past ulimit -v up front; running out of memory is one line (JSONL exits:$outcomes)"
