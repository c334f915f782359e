#!/usr/bin/env bash
# The end-to-end benchmark of make bench: builds coordd and coordctl, starts
# a 3-node cluster on 127.0.0.1 (clients on 2281-2283, peers on 2981-2983,
# data in a temporary directory, all removed on exit), waits for a leader and
# runs a short sweep of coordctl bench workloads, printing one table (the
# idle row is the servers' memory and CPU before any load).
#
# Environment: BIN (default bin), BENCH_DURATION (default 5s),
# BENCH_FORMAT (text or json, default text), BENCH_SWEEP (the workload
# arguments of coordctl bench, replacing the default sweep), LOG_LEVEL,
# GOMAXPROCS (of each server; default cores / 3, at least 1).
set -euo pipefail
bin=${BIN:-bin}
duration=${BENCH_DURATION:-5s}
format=${BENCH_FORMAT:-text}
sweep=${BENCH_SWEEP:-"idle write:1,64 read:16,64 read-sync:64 create-eph:64 session:64 lock:16,64 watch:1000"}
go=${GO:-go}

"$go" build -o "$bin/coordd" ./cmd/coordd
"$go" build -o "$bin/coordctl" ./cmd/coordctl

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-bench.XXXXXX")
peers=""
servers=""
for i in 1 2 3; do
  peers+="${peers:+,}$i=127.0.0.1:$((2980 + i))"
  servers+="${servers:+,}127.0.0.1:$((2280 + i))"
done
# Servers sharing this machine split its cores (scripts/procs.sh).
. "$(dirname "$0")/procs.sh"
procs=$(server_procs 3)
pids=()
stop() {
  trap - INT TERM EXIT
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for i in 1 2 3; do
  mkdir -p "$dir/$i"
  GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/$i" \
    --client-addr "127.0.0.1:$((2280 + i))" --peer-addr "127.0.0.1:$((2980 + i))" \
    --peers "$peers" --log-level "${LOG_LEVEL:-warn}" >"$dir/$i.log" 2>&1 &
  pids+=($!)
done

ctl() { "$bin/coordctl" --servers "$servers" "$@"; }

# A leader, and every member reachable, within 30s.
ready=0
for _ in $(seq 1 150); do
  for pid in "${pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "bench: a server exited; its log:" >&2
      tail -n 20 "$dir"/*.log >&2
      exit 1
    fi
  done
  if st=$(ctl --timeout 2s status 2>/dev/null) &&
     grep -q '^leader: [^n]' <<<"$st" && ! grep -q unreachable <<<"$st"; then
    ready=1
    break
  fi
  sleep 0.2
done
if [ $ready = 0 ]; then
  echo "bench: no leader after 30s" >&2
  tail -n 20 "$dir"/*.log >&2
  exit 1
fi
ctl status
echo "servers: GOMAXPROCS=$procs each"
echo

# shellcheck disable=SC2086 # the sweep is a list of arguments
ctl -o "$format" bench $sweep --duration "$duration"
