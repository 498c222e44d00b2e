#!/usr/bin/env bash
# Paths users have: an output that is a dangling symbolic link is written through it (the link
# stays a link), one that loops is refused in one line and left alone, and a folder whose name is
# not UTF-8 works for every command and output (the pack file reopens its source).
#
#   bash tests/cli/path_cases_test.sh THDPACK WORK_DIR      (PYTHONPATH: the build's package)
set -uo pipefail
thdpack=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
printf '5\n3\n' > l.csv
ln -s loop loop
ln -s missing.packs dangling.packs

err=$("$thdpack" pack --lengths l.csv -C 10 -o loop --no-progress 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] && [ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == *"is a symbolic link that loops"* ]] ||
  fail "an output link that loops: exit $rc: $err"
[ -L loop ] && [ "$(readlink loop)" = loop ] || fail "the looping link was changed"

"$thdpack" pack --lengths l.csv -C 10 -o dangling.packs --no-progress > /dev/null ||
  fail "an output that is a dangling link was refused"
[ -L dangling.packs ] && [ -f missing.packs ] || fail "the dangling link was replaced, not written through"

latin=$'caf\xe9'
mkdir "$latin" && cp l.csv "$latin/l.csv" || fail "cannot make a folder named in Latin-1"
for outputs in "" "--json" "--plan-out plans.json" "--report report.html"; do
  # shellcheck disable=SC2086
  "$thdpack" plan --lengths "$latin/l.csv" --dp 1 --global-batch 2 --steps 1 --no-progress \
    $outputs > /dev/null || fail "plan with a non-UTF-8 folder and '$outputs' failed"
done
"$thdpack" pack --lengths "$latin/l.csv" -C 10 -o latin.packs --json --no-progress > /dev/null ||
  fail "pack with a non-UTF-8 folder failed"
# Every source's name reaches the --json summaries, which must not fail on it.
printf '{"input_ids": [1, 2, 3]}\n{"input_ids": [4, 5]}\n' > "$latin/d.jsonl"
"$thdpack" plan --jsonl "$latin/d.jsonl" --dp 1 --global-batch 2 --steps 1 -M 8 --json \
  --no-progress > /dev/null || fail "plan --json of a JSONL file in a non-UTF-8 folder failed"
"$thdpack" pack --jsonl "$latin/d.jsonl" -C 10 --json --no-progress > /dev/null ||
  fail "pack --json of a JSONL file in a non-UTF-8 folder failed"
/usr/bin/python3 -c "import sys, thdpack; sys.exit(len(thdpack.PackedDataset.open('latin.packs')) != 1)" ||
  fail "the pack file of a non-UTF-8 folder does not reopen its source"
echo "ok: looping output link refused, dangling one written through, non-UTF-8 folder works"
