#!/usr/bin/env bash
# Starts N coordd servers in the foreground (make cluster), each server's
# log lines prefixed with its id. Ctrl-C, or a TERM, INT or HUP sent to
# this script, stops them all. Data persists between runs: remove the data
# directory to start afresh.
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
# Servers sharing this machine split its cores (scripts/procs.sh); pids and
# stop_on_exit come from scripts/local-cluster.sh.
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
pids=()
stop_on_exit 'echo "stopped ${#pids[@]} servers"'
for i in $(seq 1 "$n"); do
  mkdir -p "$dir/$i"
  # The prefixing sed reads a process substitution, so that $! is the
  # server itself (in a pipeline it would be the sed, and a signal would
  # stop only the seds); the sed ends when the server closes its output.
  GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/$i" \
    --client-addr "$host:$((client_port + i - 1))" --peer-addr "$host:$((peer_port + i - 1))" \
    --peers "$peers" --log-level "${LOG_LEVEL:-warn}" ${tls_flags[@]+"${tls_flags[@]}"} \
    ${metrics_port:+--metrics-addr "$host:$((metrics_port + i - 1))"} ${console_flags[@]+"${console_flags[@]}"} > >(sed -u "s/^/[$i] /") 2>&1 &
  pids+=($!)
done
echo
echo "coordd: $n servers running (GOMAXPROCS=$procs each; pids ${pids[*]}). Use:"
echo "  export COORD_SERVERS=$servers"
if [ -n "${TLS_DIR:-}" ]; then
  echo "  export COORD_CACERT=$TLS_DIR/ca.crt COORD_CERT=$TLS_DIR/client.crt COORD_KEY=$TLS_DIR/client.key"
  echo "  (TLS on both ports, client certificates required; the README shows zkCli.sh and kazoo)"
fi
echo "  $bin/coordctl status"
if [ -n "$metrics_port" ]; then
  echo "Metrics and health: http://$host:$metrics_port/metrics (/livez, /readyz), ports $metrics_port-$((metrics_port + n - 1))."
  if [ ${#console_flags[@]} -gt 0 ]; then
    echo "Web console: http://$host:$metrics_port/ (each server's on its port; $([ "${CONSOLE_WRITES:-}" = 1 ] && echo "writes enabled" || echo "read-only: CONSOLE_WRITES=1 make cluster for writes"))."
  fi
fi
echo "Ctrl-C stops them all."
wait
