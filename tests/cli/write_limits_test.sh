#!/usr/bin/env bash
# Interrupted and limited writers leave no temporary file behind:
# - past RLIMIT_FSIZE (ulimit -f) a write fails with one line naming the file, not SIGXFSZ;
# - SIGTERM in the middle of a convert removes the half-written .bin and ends the process as the
#   signal would (exit 143);
# - a command with several outputs whose last one fails (the report, past the size limit)
#   replaces none of them: plan --plan-out --report, pack -o --materialize --report.
#
#   bash tests/cli/write_limits_test.sh THDPACK WORK_DIR
set -uo pipefail
thdpack=$(realpath "$1") work=$2
fail() { echo "FAIL: $*"; exit 1; }
temporaries() { ls -a "$1" | grep -c '[.]tmp[.]'; }

rm -rf "$work" && mkdir -p "$work/limit" "$work/sigterm"
err=$( (ulimit -f 1; "$thdpack" convert --workload sft-8k --limit 2000 --out "$work/limit/big" \
  --no-progress) 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] || fail "past the file size limit: exit $rc, expected 2 ($err)"
[ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == *"cannot write '$work/limit/big.bin': File too large"* ]] ||
  fail "past the file size limit, the message is: $err"
[ "$(temporaries "$work/limit")" = 0 ] || fail "a temporary file was left past the size limit"

"$thdpack" convert --workload longtail-32k --out "$work/sigterm/big" --no-progress &
pid=$!
for _ in $(seq 200); do
  [ "$(temporaries "$work/sigterm")" != 0 ] && break
  sleep 0.05
done
[ "$(temporaries "$work/sigterm")" != 0 ] || fail "convert never started its .bin"
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 143 ] || fail "SIGTERM: exit $rc, expected 143"
[ "$(temporaries "$work/sigterm")" = 0 ] || fail "SIGTERM left a temporary file"
# Several outputs, one unit: the small plan or pack file completes, the large report does not.
mkdir -p "$work/several"
cd "$work/several" || exit 1
for f in plans.json report.html packs.thdpacks mat.bin mat.idx; do echo old > "$f"; done
# The plan file is about 14 KB, its report about 66 KB: the report passes the 40 KB limit.
(ulimit -f 40; "$thdpack" plan --workload sft-8k --dp 2 --steps 2 --plan-out plans.json \
  --report report.html --no-progress > /dev/null 2>&1)
[ $? = 2 ] || fail "plan with a report past the size limit did not fail with exit 2"
seq 1 300 > lengths.csv  # a pack file of about 3 KB, a report of about 33 KB
err=$( (ulimit -f 20; "$thdpack" pack --lengths lengths.csv -C 4096 -o packs.thdpacks --report \
  report.html --no-progress) 2>&1 >/dev/null)
[[ $err == *"cannot write"*"report.html': File too large"* ]] ||
  fail "pack with a report past the size limit: $err"
err=$( (ulimit -f 40; "$thdpack" pack --workload sft-8k --limit 200 -C 8192 -o packs.thdpacks \
  --materialize mat --no-progress) 2>&1 >/dev/null)
[[ $err == *"mat.bin': File too large"* ]] ||
  fail "pack with a materialized dataset past the size limit: $err"
for f in plans.json report.html packs.thdpacks mat.bin mat.idx; do
  [ "$(cat "$f")" = old ] || fail "$f was replaced although a later output of its command failed"
done
[ "$(temporaries .)" = 0 ] || fail "a failed command with several outputs left a temporary file"
"$thdpack" plan --workload sft-8k --dp 2 --steps 2 --plan-out plans.json --report report.html \
  --no-progress > /dev/null || fail "plan with two outputs failed"
[ "$(cat plans.json)" != old ] && [ "$(cat report.html)" != old ] || fail "outputs not replaced"
"$thdpack" pack --workload sft-8k --limit 200 -C 8192 -o packs.thdpacks --materialize mat \
  --report report.html --no-progress > /dev/null || fail "pack with three outputs failed"
[ "$(stat -c %s packs.thdpacks)" != 4 ] && [ "$(stat -c %s mat.idx)" != 4 ] || fail "pack outputs not replaced"
echo "ok: no temporary left past the file size limit (one line, exit 2) or after SIGTERM (exit 143); several outputs replaced together or not at all"
