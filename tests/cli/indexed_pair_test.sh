#!/usr/bin/env bash
# An indexed dataset's .bin and .idx stay one unit under concurrent and interrupted writers:
# - a convert to a prefix whose writer lock is held (flock on .NAME.lock, as another convert holds
#   it) exits 2 with one line naming the holder, and leaves the dataset as it was;
# - two converts of different data to one prefix at once: each exits 0 or is refused with that
#   line, and the result opens as one of the two datasets, never a mix;
# - a mixed pair (the new .bin beside the old .idx, as a crash between convert's two renames
#   leaves it) is refused by pack with one line, not opened;
# - converts killed (SIGKILL) at random moments leave the old pair, the new pair, or a mixed pair
#   that is refused: never one that opens with the wrong tokens.
#
#   bash tests/cli/indexed_pair_test.sh THDPACK WORK_DIR
set -uo pipefail
thdpack=$(realpath "$1") work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
command -v flock > /dev/null || { echo "ok: skipped, no flock command (util-linux)"; exit 0; }

# Two datasets of different sizes, and what pack says of each.
seq 1 3000 | awk '{print 1 + ($1 * 7919) % 900}' > a.csv
seq 1 5000 | awk '{print 1 + ($1 * 104729) % 700}' > b.csv
summary() { "$thdpack" pack --data-path "$1" -C 1024 --json --no-progress 2> "$work/err.txt" |
  sed -n 's/.*"samples": *\([0-9]*\).*/\1/p' | head -1; }
"$thdpack" convert --lengths a.csv --out d --no-progress > /dev/null || fail "first convert"
[ "$(summary d)" = 3000 ] || fail "the converted dataset does not pack 3000 samples: $(cat err.txt)"

# 1. The lock held by another writer.
flock .d.lock sleep 1.5 &
holder=$!
sleep 0.3
before=$(md5sum d.bin d.idx)
err=$("$thdpack" convert --lengths b.csv --out d --no-progress 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] || fail "convert beside a held lock: exit $rc, expected 2 ($err)"
[ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == *"is being written by another writer"*".d.lock"* ]] ||
  fail "convert beside a held lock says: $err"
[ "$(md5sum d.bin d.idx)" = "$before" ] || fail "a refused convert changed the dataset"
wait "$holder"

# 2. Two converts at once, five times.
for round in 1 2 3 4 5; do
  "$thdpack" convert --lengths a.csv --out race --no-progress > /dev/null 2> ra.txt &
  first=$!
  "$thdpack" convert --lengths b.csv --out race --no-progress > /dev/null 2> rb.txt &
  second=$!
  wait "$first"; rc_a=$?
  wait "$second"; rc_b=$?
  for pair in "$rc_a ra.txt" "$rc_b rb.txt"; do
    set -- $pair
    [ "$1" = 0 ] || { [ "$1" = 2 ] && grep -q "is being written by another writer" "$2"; } ||
      fail "round $round: a racing convert exited $1: $(cat "$2")"
  done
  n=$(summary race)
  [ "$n" = 3000 ] || [ "$n" = 5000 ] || fail "round $round: the raced dataset packs '$n' samples: $(cat err.txt)"
done

# 3. The new .bin beside the old .idx.
cp d.idx old.idx
"$thdpack" convert --lengths b.csv --out d --no-progress > /dev/null || fail "second convert"
cp old.idx d.idx
err=$("$thdpack" pack --data-path d -C 1024 --no-progress 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] && [ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == *"the pair is mixed"* ]] ||
  fail "a mixed pair: exit $rc, message: $err"

# 4. Converts killed at random moments.
mixed=0
for kill_round in $(seq 1 12); do
  src=$([ $((kill_round % 2)) = 0 ] && echo a.csv || echo b.csv)
  "$thdpack" convert --lengths "$src" --out k --no-progress > /dev/null 2>&1 &
  pid=$!
  sleep "0.0$((RANDOM % 10))"
  kill -KILL "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
  [ -e k.idx ] || continue
  n=$(summary k)
  if [ -z "$n" ]; then
    grep -q "the pair is mixed" err.txt || fail "killed convert $kill_round: $(cat err.txt)"
    mixed=$((mixed + 1))
    rm -f k.bin k.idx
  else
    [ "$n" = 3000 ] || [ "$n" = 5000 ] || fail "killed convert $kill_round: $n samples"
  fi
done
echo "ok: held lock refused, 5 racing rounds whole, mixed pair refused, 12 kills ($mixed mixed pairs refused)"
