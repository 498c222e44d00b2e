#!/usr/bin/env bash
# Interrupted and limited writers leave no temporary file behind:
# - past RLIMIT_FSIZE (ulimit -f) a write fails with one line naming the file, not SIGXFSZ;
# - SIGTERM in the middle of a convert removes the half-written .bin and ends the process as the
#   signal would (exit 143).
#
#   bash tests/cli/write_limits_test.sh THDPACK WORK_DIR
set -uo pipefail
thdpack=$1 work=$2
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
echo "ok: no temporary left past the file size limit (one line, exit 2) or after SIGTERM (exit 143)"
