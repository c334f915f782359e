#!/usr/bin/env bash
# The end-to-end benchmark of make bench: builds coordd and coordctl, starts
# a cluster of BENCH_SERVERS servers (default 3) on 127.0.0.1 (clients on
# 2281 and up, peers on 2981 and up, data in a temporary directory, all
# removed on exit), waits for a leader and
# runs a short sweep of coordctl bench workloads, printing one table (the
# idle row is the servers' memory and CPU before any load).
#
# Environment: BIN (default bin), BENCH_DURATION (default 5s),
# BENCH_FORMAT (text or json, default text), BENCH_SWEEP (the workload
# arguments of coordctl bench, replacing the default sweep), BENCH_PROTOCOL
# (grpc, the default: coordd's Go client; zk: ZooKeeper's protocol through
# go-zookeeper, a connection per session), LOG_LEVEL, GOMAXPROCS (of each
# server; default cores / 3, at least 1).
set -euo pipefail
bin=${BIN:-bin}
duration=${BENCH_DURATION:-5s}
format=${BENCH_FORMAT:-text}
sweep=${BENCH_SWEEP:-"idle write:1,64 read:16,64 read-sync:64 create-eph:64 session:64 lock:16,64 watch:1000"}
protocol=${BENCH_PROTOCOL:-grpc}
nservers=${BENCH_SERVERS:-3}
go=${GO:-go}

# Static, as make release builds it (no C library mapped in: 1.5 MB less
# resident memory per server).
CGO_ENABLED=0 "$go" build -trimpath -o "$bin/coordd" ./cmd/coordd
"$go" build -o "$bin/coordctl" ./cmd/coordctl

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-bench.XXXXXX")
. "$(dirname "$0")/local-cluster.sh"
cleanup_on_exit "$dir"
start_local_cluster "$dir" "$nservers" || { echo "bench: no cluster" >&2; exit 1; }

ctl() { "$bin/coordctl" --servers "$servers" "$@"; }

ctl status
echo "servers: GOMAXPROCS=$procs each"
echo

# In the background, so that a TERM sent to this script runs its cleanup
# at once (bash runs traps only between commands), which stops it too.
# shellcheck disable=SC2086 # the sweep is a list of arguments
ctl -o "$format" bench $sweep --duration "$duration" --protocol "$protocol" &
pids+=($!)
wait $!
