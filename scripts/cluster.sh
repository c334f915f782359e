#!/usr/bin/env bash
# Starts N coordd servers on 127.0.0.1 in the foreground (make cluster).
# Clients on 2181.., peers on 2888..; data under .cluster/N<id>. Ctrl-C
# stops them all. Data persists between runs: rm -rf .cluster to start
# afresh.
set -euo pipefail
n=${1:-3}
case $n in 1|3|5|7) ;; *) echo "cluster: N must be 1, 3, 5 or 7" >&2; exit 2 ;; esac
bin=${BIN:-bin}
peers=""
servers=""
for i in $(seq 1 "$n"); do
  peers+="${peers:+,}$i=127.0.0.1:$((2887 + i))"
  servers+="${servers:+,}127.0.0.1:$((2180 + i))"
done
# Servers sharing this machine split its cores (scripts/procs.sh).
. "$(dirname "$0")/procs.sh"
procs=$(server_procs "$n")
pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping ${#pids[@]} servers"
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT
for i in $(seq 1 "$n"); do
  mkdir -p ".cluster/$i"
  GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir ".cluster/$i" \
    --client-addr "127.0.0.1:$((2180 + i))" --peer-addr "127.0.0.1:$((2887 + i))" \
    --peers "$peers" --log-level "${LOG_LEVEL:-warn}" 2>&1 | sed -u "s/^/[$i] /" &
  pids+=($!)
done
echo
echo "coordd: $n servers running (GOMAXPROCS=$procs each). Use:"
echo "  export COORD_SERVERS=$servers"
echo "  $bin/coordctl status"
echo "Ctrl-C stops them all."
wait
