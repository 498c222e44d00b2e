#!/usr/bin/env bash
# thdpack across hosts: three network namespaces on this machine (veth pairs on a bridge in a
# fourth), as root. Skipped (exit 77) where namespaces cannot be made.
# - `thdpack run` under mpirun, 4 ranks on two hosts (launched into the namespaces through an
#   rsh agent, TCP only), every step verified, over a plain link and over shaped ones (tbf);
# - a gloo job of ThdPacker steps, one rank per host: the digests of every rank's micro-batches
#   over shaped links equal those of the same job on loopback;
# - a link taken down mid-run: every rank of the gloo job and of `thdpack run` is out within its
#   bound (gloo: the job's timeout; MPI: timeout + (timeout + 10 s) + 3 s, see run_mpi_job),
#   whatever mpirun does, each with one error line (an MPI rank mpirun stops after another rank's
#   MPI_Abort may end with none).
#
#   bash tests/multihost/netns_test.sh THDPACK PYTHON_PATH WORK_DIR
set -uo pipefail
thdpack=$(realpath "$1") pythonpath=$(realpath "$2") work=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null && command -v tc > /dev/null || skip "no ip/tc (iproute2)"
command -v mpirun > /dev/null || skip "no mpirun"
p="thn$$"  # namespace and link names of this run
ip netns add "${p}hub" 2> /dev/null || skip "ip netns add failed (no permission for namespaces here)"
# Processes left in a namespace outlive it (an MPI daemon cut off from mpirun waits forever):
# every one goes first.
cleanup() {
  for ns in "${p}hub" "${p}h0" "${p}h1" "${p}h2"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -KILL 2> /dev/null
    ip netns del "$ns" 2> /dev/null
  done
}
trap cleanup EXIT
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

hub() { ip netns exec "${p}hub" "$@"; }
# What cannot be made here (no bridge or veth support in this kernel or container) skips the test.
hub ip link add br0 type bridge && hub ip link set br0 up && hub ip link set lo up ||
  skip "cannot make a bridge in a network namespace"
for i in 0 1 2; do
  ns="${p}h$i"
  ip netns add "$ns" && ip link add "${p}v$i" type veth peer name "${p}p$i" &&
    ip link set "${p}v$i" netns "$ns" && ip link set "${p}p$i" netns "${p}hub" &&
    hub ip link set "${p}p$i" master br0 && hub ip link set "${p}p$i" up &&
    ip netns exec "$ns" ip link set "${p}v$i" name eth0 &&
    ip netns exec "$ns" ip addr add "10.77.0.$((i + 1))/24" dev eth0 &&
    ip netns exec "$ns" ip link set eth0 up && ip netns exec "$ns" ip link set lo up ||
    skip "cannot give namespace $ns a veth link on the bridge"
done
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
below() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }
ranks_running() {  # a thdpack process whose arguments hold $1, in any namespace
  local f
  for f in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' < "$f"; } 2> /dev/null | grep -q "^$thdpack run .*$1" && return 0
  done
  return 1
}
in_host() { local i=$1; shift; ip netns exec "${p}h$i" "$@"; }
# Links come up asynchronously: every host must reach host 0 over TCP before a job starts (a
# daemon connecting back to mpirun too early fails the whole job).
wait_for_links() {
  in_host 0 /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.1", int(sys.argv[1]))); s.listen(); s.settimeout(10)
for _ in range(2): s.accept()[0].close()' "$1" &
  local listener=$!
  for i in 1 2; do
    in_host "$i" /usr/bin/python3 -c '
import socket, sys, time
deadline = time.time() + 10
while True:
    try:
        socket.create_connection(("10.77.0.1", int(sys.argv[1])), timeout=1).close(); break
    except OSError:
        if time.time() > deadline: raise
        time.sleep(0.05)' "$1" || skip "host $i cannot reach host 0 over the bridge"
  done
  wait "$listener" || fail "host 0 never saw both hosts connect"
}
shape() {  # shape RATE: every host's outgoing link through a token bucket
  for i in 0 1 2; do
    in_host "$i" tc qdisc replace dev eth0 root tbf rate "$1" burst 64kb latency 100ms ||
      skip "cannot shape a link (tc tbf: no sch_tbf here)"
  done
}
# mpirun in host 0 starts its daemons in the other hosts through this agent ("ssh HOST CMD").
cat > agent.sh << 'AGENT'
#!/bin/bash
host=$1
shift
exec ip netns exec "$host" /bin/bash -c "$*"
AGENT
chmod +x agent.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMIX_MCA_gds=hash
mpi_run() {  # mpi_run OUTPUT_DIR thdpack-run-flags...: 4 ranks on hosts 1 and 2
  local out=$1
  shift
  in_host 0 timeout 120 mpirun --host "${p}h1:2,${p}h2:2" -np 4 --mca plm_rsh_agent "$work/agent.sh" \
    --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 --mca btl tcp,self \
    --mca rtc ^hwloc \
    --output-filename "$out" "$thdpack" run --dp 4 "$@"
}

wait_for_links $((20000 + ($$ + 7) % 20000))

# 1. thdpack run, plain and shaped. The first job's OpenMPI daemons have once failed to connect
# back to mpirun ("ORTE does not know how to route a message") although the links answered: that
# start, before any thdpack rank ran, is tried once more.
mpi_run plain --steps 3 > plain.txt 2>&1 ||
  { grep -q "ORTE does not know how to route" plain.txt && mpi_run plain --steps 3 > plain.txt 2>&1; } ||
  { tail -20 plain.txt; fail "thdpack run across hosts"; }
grep -q "3 steps, all verified" plain.txt || { tail -20 plain.txt; fail "plain run not verified"; }
shape 40mbit
mpi_run shaped --steps 3 > shaped.txt 2>&1 || { tail -20 shaped.txt; fail "thdpack run over shaped links"; }
grep -q "3 steps, all verified" shaped.txt || { tail -20 shaped.txt; fail "shaped run not verified"; }
ms() { sed -n 's/.*wall \([0-9.]*\) ms\/step.*/\1/p' "$1"; }

# 2. gloo: the same steps on loopback and across shaped links.
export PYTHONPATH=$pythonpath GLOO_SOCKET_IFNAME=eth0
gloo_job() {  # gloo_job NAME ADDR PORT STEPS TIMEOUT SPREAD(yes: a host each): sets pids
  local name=$1 addr=$2 port=$3 steps=$4 timeout=$5 spread=$6
  pids=()
  for r in 0 1 2; do
    if [ "$spread" = yes ]; then
      in_host "$r" /usr/bin/python3 "$here/gloo_worker.py" "$addr" "$port" "$r" 3 "$steps" "$timeout" \
        "$name.$r" 2> "$name.err.$r" &
    else
      GLOO_SOCKET_IFNAME=lo /usr/bin/python3 "$here/gloo_worker.py" "$addr" "$port" "$r" 3 "$steps" \
        "$timeout" "$name.$r" 2> "$name.err.$r" &
    fi
    pids+=($!)
  done
}
port=$((20000 + $$ % 20000))
gloo_job loopback 127.0.0.1 "$port" 4 30 no
for pid in "${pids[@]}"; do wait "$pid" || { cat loopback.err.*; fail "gloo on loopback"; }; done
gloo_job shaped 10.77.0.1 "$port" 4 30 yes
for pid in "${pids[@]}"; do
  wait "$pid" || { cat shaped.err.*; fail "gloo across shaped links"; }
done
for r in 0 1 2; do
  [ "$(wc -l < "shaped.$r")" = 4 ] && cmp -s "loopback.$r" "shaped.$r" ||
    fail "gloo rank $r: steps across shaped links differ from loopback"
done

# 3. A link dies mid-run: the gloo job (timeout 5 s).
tc_off() { for i in 0 1 2; do in_host "$i" tc qdisc del dev eth0 root 2> /dev/null; done; }
tc_off
gloo_job dead 10.77.0.1 $((port + 1)) 100000 5 yes
for _ in $(seq 300); do [ -s dead.0 ] && [ "$(wc -l < dead.0)" -ge 3 ] && break; sleep 0.1; done
[ "$(wc -l < dead.0)" -ge 3 ] || { cat dead.err.*; fail "the gloo job never got going"; }
in_host 2 ip link set eth0 down
down=$(date +%s.%N)
for pid in "${pids[@]}"; do wait "$pid"; done
gloo_out=$(since "$down")
for r in 0 1 2; do
  errors=$(grep -c '^error: ' "dead.$r")
  [ "$errors" = 1 ] && [ "$(tail -1 "dead.$r" | cut -c1-7)" = "error: " ] ||
    { tail -3 "dead.$r"; fail "gloo rank $r did not end with one error line"; }
done
below "$gloo_out" 15 || fail "gloo ranks took ${gloo_out}s to end after the link died"
in_host 2 ip link set eth0 up

# 4. A link dies mid-run: thdpack run (--timeout 3: every rank out within 3 + 13 + 3 s).
# The job must be running before the link goes. A launch that OpenMPI's daemons failed (as in 1.;
# under load it has also ended with no rank started and no message) is tried once more; a thdpack
# run that cannot start fails both times.
start_dead_mpi() {
  mpi_run dead_mpi --steps 1000000 --timeout 3 > dead_mpi.txt 2>&1 &
  mpirun_pid=$!
  for _ in $(seq 300); do
    grep -q "verified" dead_mpi.txt 2> /dev/null && return 0
    kill -0 "$mpirun_pid" 2> /dev/null || break
    sleep 0.1
  done
  grep -q "verified" dead_mpi.txt 2> /dev/null
}
if ! start_dead_mpi; then
  kill "$mpirun_pid" 2> /dev/null; wait "$mpirun_pid" 2> /dev/null
  echo "thdpack run did not start before the link was cut; trying once more:"
  tail -5 dead_mpi.txt
  rm -rf dead_mpi
  start_dead_mpi || { tail -20 dead_mpi.txt; fail "thdpack run never got going (twice)"; }
fi
in_host 2 ip link set eth0 down
down=$(date +%s.%N)
while ranks_running "--steps 1000000"; do
  below "$(since "$down")" 30 || fail "thdpack run ranks still running 30 s after the link died"
  sleep 0.2
done
mpi_out=$(since "$down")
ip netns pids "${p}h0" | xargs -r kill -KILL 2> /dev/null  # mpirun waits for the lost host
wait "$mpirun_pid" 2> /dev/null
# Ranks 2 and 3 are on the host cut off: nothing can stop them, each must end with its own line.
# Ranks 0 and 1 end with their line too, unless mpirun, told by a rank's MPI_Abort, stops them
# first; either way nothing else (no second line, no trace) reaches their stderr.
for r in 0 1 2 3; do
  f=$(find dead_mpi -path "*rank.$r/stderr" | head -1)
  lines=0 ours=0
  if [ -n "$f" ]; then  # grep -c prints 0 (and fails) when nothing matches
    lines=$(grep -c . "$f")
    ours=$(grep -c "^thdpack: error on rank $r: " "$f")
  fi
  if [ "$r" -ge 2 ]; then
    [ "$lines" = 1 ] && [ "$ours" = 1 ] ||
      { cat "$f" 2> /dev/null; fail "thdpack run rank $r did not end with one error line"; }
  else
    [ "$lines" = "$ours" ] && [ "$ours" -le 1 ] ||
      { cat "$f" 2> /dev/null; fail "thdpack run rank $r wrote more than its one error line"; }
  fi
done
below "$mpi_out" 22 || fail "thdpack run ranks took ${mpi_out}s to end"
printf 'ok: thdpack run across 2 hosts verified plain (%s ms/step) and over 40 Mbit/s links (%s ms/step); gloo steps across 3 shaped hosts equal loopback; a dead link ended every gloo rank in %.1f s (timeout 5) and every MPI rank in %.1f s (timeout 3)\n' \
  "$(ms plain.txt)" "$(ms shaped.txt)" "$gloo_out" "$mpi_out"
