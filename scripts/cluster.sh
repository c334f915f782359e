#!/usr/bin/env bash
# Starts N coordd servers in the foreground (make cluster), each server's
# log lines prefixed with its id. Ctrl-C, or a TERM, INT or HUP sent to
# this script, stops them all and says how many it stopped (Ctrl-C, the
# usual end, exits 0; TERM and HUP exit 128 + the signal). A server that
# exits meanwhile is reported with its status ("server 3 exited (status
# 137)") and the others run on; when none is left the script exits 1.
# Data persists between runs: remove the data directory to start afresh.
#
# Environment: BIN (default bin), LOG_LEVEL (default warn), GOMAXPROCS (of
# each server; default cores / N, at least 1), CLUSTER_HOST (default
# 127.0.0.1), CLIENT_PORT and PEER_PORT (server 1's ports, default 2181 and
# 2888; server i uses the port + i - 1), METRICS_PORT (server 1's admin HTTP
# port, metrics and health, likewise; default 9181, empty for none),
# CONSOLE (the web console on that port; default 1, 0 for none),
# CONSOLE_WRITES (1: the console may create, set and delete; default read-only),
# CLUSTER_DIR (default .cluster; data in CLUSTER_DIR/<id>), TLS_DIR (when
# set, both ports speak TLS with the files coordctl certs init wrote there,
# client certificates required; make cluster TLS=1 makes them in
# .cluster/tls).
set -euo pipefail
n=${1:-3}
case $n in 1|3|5|7) ;; *) echo "cluster: N must be 1, 3, 5 or 7" >&2; exit 2 ;; esac
bin=${BIN:-bin}
host=${CLUSTER_HOST:-127.0.0.1}
client_port=${CLIENT_PORT:-2181}
peer_port=${PEER_PORT:-2888}
dir=${CLUSTER_DIR:-.cluster}
metrics_port=${METRICS_PORT-9181}
peers=""
servers=""
for i in $(seq 1 "$n"); do
  peers+="${peers:+,}$i=$host:$((peer_port + i - 1))"
  servers+="${servers:+,}$host:$((client_port + i - 1))"
done
# Servers sharing this machine split its cores (scripts/procs.sh);
# stop_local_cluster and tls_server_flags come from scripts/local-cluster.sh.
. "$(dirname "$0")/procs.sh"
. "$(dirname "$0")/local-cluster.sh"
procs=$(server_procs "$n")
tls_flags=()
if [ -n "${TLS_DIR:-}" ]; then
  tls_server_flags "$TLS_DIR"
fi
console_flags=()
if [ -n "$metrics_port" ] && [ "${CONSOLE:-1}" = 1 ]; then
  console_flags=(--console)
  if [ "${CONSOLE_WRITES:-}" = 1 ]; then console_flags+=(--console-writes); fi
  # With client certificates required, the console presents the client's.
  if [ -n "${TLS_DIR:-}" ]; then console_flags+=(--console-cert "$TLS_DIR/client.crt" --console-key "$TLS_DIR/client.key"); fi
fi
pids=()   # the servers running, as far as the last look found
ids=()    # ids[k] is the id of the server whose pid is pids[k]
tick=""   # the pid of the monitor loop's sleep
stopped=0 # servers the stop ended before it could look (Ctrl-C reaches them too)

# reap drops the servers that are gone from pids and ids, saying how each
# exited; with "stopping", one that exited cleanly was stopped by the same
# Ctrl-C as this script, and is counted instead. "wait PID" gives a
# server's status also when bash has noticed its end already.
reap() {
  local k status live=() live_ids=()
  for k in "${!pids[@]}"; do
    if kill -0 "${pids[$k]}" 2>/dev/null; then
      live+=("${pids[$k]}")
      live_ids+=("${ids[$k]}")
      continue
    fi
    status=0
    wait "${pids[$k]}" || status=$?
    if [ "${1:-}" = stopping ] && [ "$status" = 0 ]; then
      stopped=$((stopped + 1))
    else
      echo "server ${ids[$k]} exited (status $status)"
    fi
  done
  pids=(${live[@]+"${live[@]}"})
  ids=(${live_ids[@]+"${live_ids[@]}"})
}

# on_exit stops the servers still running and says how many it stopped.
on_exit() {
  trap - INT TERM HUP EXIT
  if [ -n "$tick" ]; then kill "$tick" 2>/dev/null || true; fi
  reap stopping
  local count=$((${#pids[@]} + stopped))
  stop_local_cluster
  case $count in
    0) echo "no server was running" ;;
    1) echo "stopped 1 server" ;;
    *) echo "stopped $count servers" ;;
  esac
}
# Each signal ends the script (bash runs a trap between commands, so the
# loop below waits in the background); Ctrl-C is how make cluster ends, so
# it exits 0, and make does not report it as its recipe's failure ("Error
# 130").
trap on_exit EXIT
trap 'exit 0' INT
trap 'exit 129' HUP
trap 'exit 143' TERM
for i in $(seq 1 "$n"); do
  mkdir -p "$dir/$i"
  # The prefixing sed reads a process substitution, so that $! is the
  # server itself (in a pipeline it would be the sed, and a signal would
  # stop only the seds); the sed ends when the server closes its output,
  # and ignores the signals, which Ctrl-C sends it too: a server whose
  # sed died first would die of SIGPIPE at its next line instead of
  # shutting down.
  GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/$i" \
    --client-addr "$host:$((client_port + i - 1))" --peer-addr "$host:$((peer_port + i - 1))" \
    --peers "$peers" --log-level "${LOG_LEVEL:-warn}" ${tls_flags[@]+"${tls_flags[@]}"} \
    ${metrics_port:+--metrics-addr "$host:$((metrics_port + i - 1))"} ${console_flags[@]+"${console_flags[@]}"} > >(trap '' INT TERM HUP; exec sed -u "s/^/[$i] /") 2>&1 &
  pids+=($!)
  ids+=("$i")
done
echo
echo "coordd: $n servers running (GOMAXPROCS=$procs each; pids ${pids[*]}). Use:"
echo "  export COORD_SERVERS=$servers"
if [ -n "${TLS_DIR:-}" ]; then
  echo "  export COORD_CACERT=$TLS_DIR/ca.crt COORD_CERT=$TLS_DIR/client.crt COORD_KEY=$TLS_DIR/client.key"
  echo "  (TLS on both ports, client certificates required; docs/security.md shows zkCli.sh and kazoo)"
fi
echo "  $bin/coordctl status"
if [ -n "$metrics_port" ]; then
  echo "Metrics and health: http://$host:$metrics_port/metrics (/livez, /readyz), ports $metrics_port-$((metrics_port + n - 1))."
  if [ ${#console_flags[@]} -gt 0 ]; then
    echo "Web console: http://$host:$metrics_port/ (each server's on its port; $([ "${CONSOLE_WRITES:-}" = 1 ] && echo "writes enabled" || echo "read-only: CONSOLE_WRITES=1 make cluster for writes"))."
  fi
fi
echo "Ctrl-C stops them all."

# bash reports a background job that a signal ends with a line of this
# script's source ("line 60: 1234 Killed  GOMAXPROCS=$procs ..."), on its
# own stderr: that goes to /dev/null, and reap says which server exited,
# and how, instead. (The servers write to the prefixing seds.)
exec 3>&2 2>/dev/null
while [ ${#pids[@]} -gt 0 ]; do
  sleep 1 &
  tick=$!
  wait "$tick" || true
  tick=""
  reap
done
trap - INT TERM HUP EXIT
echo "every server has exited" >&3
exit 1
