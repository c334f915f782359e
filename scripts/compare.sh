#!/usr/bin/env bash
# make compare-zookeeper / make compare-etcd: coordd against ZooKeeper 3.8 or
# etcd 3.4 on this machine. Usage: compare.sh zookeeper|etcd.
#
# It starts a 3-node cluster of the other system from Debian's package, and a
# 3-node coordd cluster (scripts/local-cluster.sh: 2281-2283), all with their
# data in one temporary directory removed on exit, and runs
# test/cluster/compare, which alternates the two on every workload and
# prints one table. Each cluster idles while the other is measured.
#   ZooKeeper (apt-get install zookeeper; needs Java): clients on
#     127.0.0.1:2191-2193, quorum on 12881-12883, elections on 13881-13883.
#   etcd (apt-get install etcd-server): clients on 127.0.0.1:2391-2393, peers
#     on 12391-12393.
#
# Environment: BIN (default bin), COMPARE_DURATION (default 10s per run),
# COMPARE_ROUNDS (default 3), COMPARE_SWEEP (the tool's workload
# arguments), COMPARE_PROTOCOL (zookeeper: zk, the default, drives coordd
# with go-zookeeper through its ZooKeeper protocol exactly as ZooKeeper is
# driven; grpc with coordctl bench, coordd's Go client; both: each, in one
# table; etcd: grpc only), COMPARE_MEMORY_ZNODES (zookeeper: default
# 100000, the znodes of 100 bytes of the memory figure; 0: no memory or
# catch-up figures), COMPARE_CATCHUP_WRITES (zookeeper: default 100000,
# the writes a stopped follower misses before it is restarted; 0: none),
# ZK_HEAP (default 1000m, the -Xmx of upstream's zkEnv.sh),
# GOMAXPROCS (of each coordd server; default cores / 3, at least 1; the
# other system keeps its own default), TMPDIR (where all keep their data:
# TMPDIR=/dev/shm takes the disk out of the comparison, to see what the rest
# costs), COMPARE_SHARE_CONNS=1 (etcd only: coordd's sessions and etcd's
# clients share one connection per server; by default every session has a
# connection of its own, as ZooKeeper's must), COMPARE_FAILOVER (zookeeper:
# the failover scenarios run after the workloads, default all: leader-kill,
# leader-term, rolling, follower-kill; none: no failover figures),
# COMPARE_FAILOVER_ROUNDS (default 1), COMPARE_FAILOVER_DURATION (default
# 30s per run), COMPARE_FAILOVER_CLIENTS (writers, and as many readers;
# default 64), COMPARE_FAILOVER_TRACE=1 (each run's throughput around
# each fault, per 250 ms). COMPARE_SWEEP=none runs no workload (the failover
# scenarios alone: make compare-failover).
set -euo pipefail
system=${1:-}
bin=${BIN:-bin}
go=${GO:-go}
duration=${COMPARE_DURATION:-10s}
rounds=${COMPARE_ROUNDS:-3}
sweep=${COMPARE_SWEEP:-"write:1,64,256 read:1,64,256 read-sync:1,64,256 create-eph:1,64,256 lock:1,16,64,256 session:1,64,256"}
zkjar=/usr/share/java/zookeeper.jar
memznodes=${COMPARE_MEMORY_ZNODES:-100000}
catchup=${COMPARE_CATCHUP_WRITES:-100000}
share=false
case "${COMPARE_SHARE_CONNS:-0}" in 0 | false | "") ;; *) share=true ;; esac
if [ "$share" = true ] && [ "$system" = zookeeper ]; then
  echo "compare: COMPARE_SHARE_CONNS is for etcd only: a ZooKeeper session has a connection of its own" >&2
  exit 2
fi
failover=${COMPARE_FAILOVER:-all}
if [ "$failover" = none ] || [ "$system" != zookeeper ]; then failover=""; fi
if [ "$sweep" = none ]; then
  sweep=""
  memznodes=0
fi
protocol=${COMPARE_PROTOCOL:-}
if [ -z "$protocol" ]; then
  if [ "$system" = zookeeper ]; then protocol=zk; else protocol=grpc; fi
fi
case "$system" in
zookeeper)
  if ! command -v java >/dev/null || [ ! -f "$zkjar" ]; then
    echo "compare: needs Java and Debian's zookeeper package: apt-get install zookeeper" >&2
    exit 1
  fi
  ;;
etcd)
  if ! command -v etcd >/dev/null; then
    echo "compare: needs etcd: apt-get install etcd-server" >&2
    exit 1
  fi
  ;;
*)
  echo "usage: compare.sh zookeeper|etcd" >&2
  exit 2
  ;;
esac

# Static, as make release builds it (no C library mapped in: 1.5 MB less
# resident memory per server).
CGO_ENABLED=0 "$go" build -trimpath -o "$bin/coordd" ./cmd/coordd
"$go" build -o "$bin/coordctl" ./cmd/coordctl
(cd test/cluster/compare && "$go" build -o "$(cd ../../.. && cd "$bin" && pwd)/compare" .)

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-compare.XXXXXX")
. "$(dirname "$0")/local-cluster.sh"
cleanup_on_exit "$dir"
# The catch-up figure stops a server and starts it again from the compare
# tool (its child then); their pids land in restarted.pids.
restarted=$dir/restarted.pids
stop_on_exit 'if [ -f "$restarted" ]; then kill $(cat "$restarted") 2>/dev/null || true; fi; rm -rf "$cleanup_dir"'

other=""
otherpids=()

# ZooKeeper as its documentation's replicated mode sets it up, with
# upstream's defaults otherwise (forceSync=yes: an fsync per batch of the
# transaction log), logging at WARN like the coordd servers here.
start_zookeeper() {
  local i d
  for i in 1 2 3; do
    d="$dir/zk$i"
    mkdir -p "$d"
    echo "$i" >"$d/myid"
    cat >"$d/zoo.cfg" <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$d
clientPort=$((2190 + i))
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr
server.1=127.0.0.1:12881:13881
server.2=127.0.0.1:12882:13882
server.3=127.0.0.1:12883:13883
CFG
    java "-Xmx${ZK_HEAP:-1000m}" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$zkjar:/usr/share/java/slf4j-simple.jar" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >"$d/out.log" 2>&1 &
    pids+=($!)
    otherpids+=($!)
    other+="${other:+,}127.0.0.1:$((2190 + i))"
  done
}

# srvr answers "Mode: leader" or "Mode: follower" once the ensemble has
# formed. Bash's /dev/tcp, so that no netcat is needed.
zkmode() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 1
  echo srvr >&3
  grep -m1 '^Mode:' <&3 || true
  exec 3<&- 3>&-
}

zookeeper_ready() {
  local i n=0
  for i in 1 2 3; do
    if zkmode $((2190 + i)) 2>/dev/null | grep -q 'leader\|follower'; then n=$((n + 1)); fi
  done
  [ $n = 3 ]
}

# etcd with its defaults (an fsync of its WAL per batch), logging at WARN,
# each server using all cores as Go does by default.
start_etcd() {
  local i cluster=""
  for i in 1 2 3; do
    cluster+="${cluster:+,}e$i=http://127.0.0.1:$((12390 + i))"
  done
  for i in 1 2 3; do
    mkdir -p "$dir/etcd$i"
    env -u GOMAXPROCS etcd --name "e$i" --data-dir "$dir/etcd$i/data" \
      --listen-client-urls "http://127.0.0.1:$((2390 + i))" \
      --advertise-client-urls "http://127.0.0.1:$((2390 + i))" \
      --listen-peer-urls "http://127.0.0.1:$((12390 + i))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((12390 + i))" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      --initial-cluster-token coordd-compare \
      --logger zap --log-level warn >"$dir/etcd$i/out.log" 2>&1 &
    pids+=($!)
    otherpids+=($!)
    other+="${other:+,}127.0.0.1:$((2390 + i))"
  done
}

# /health answers {"health":"true"} once the member has a leader.
etcd_ready() {
  local i n=0
  for i in 1 2 3; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$((2390 + i))" &&
        printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
        grep -q '"health":"true"' <&3) 2>/dev/null; then
      n=$((n + 1))
    fi
  done
  [ $n = 3 ]
}

"start_$system"
start_local_cluster "$dir" || { echo "compare: no coordd cluster" >&2; exit 1; }
ready=0
for _ in $(seq 1 150); do
  if "${system}_ready"; then ready=1; break; fi
  sleep 0.2
done
if [ $ready = 0 ]; then
  echo "compare: the $system cluster did not form in 30s; its logs:" >&2
  tail -n 20 "$dir"/{zk,etcd}*/out.log 2>/dev/null >&2 || true
  exit 1
fi

coorddpids=()
for p in "${pids[@]}"; do
  [[ " ${otherpids[*]} " == *" $p "* ]] || coorddpids+=("$p")
done
join() { local IFS=,; echo "$*"; }
case "$system" in
zookeeper) echo "ZooKeeper $other (java -Xmx${ZK_HEAP:-1000m}), coordd $servers (GOMAXPROCS=$procs each)" ;;
etcd) echo "etcd $(etcd --version | head -1 | awk '{print $3}') $other, coordd $servers (GOMAXPROCS=$procs each)" ;;
esac
if [ "$share" = true ]; then echo "sessions share one connection per server"; else echo "every session has a connection of its own"; fi
# In the background, so that a TERM sent to this script runs its cleanup
# at once (bash runs traps only between commands), which stops it too.
# shellcheck disable=SC2086 # the sweep is a list of arguments
"$bin/compare" --system "$system" --servers "$other" --coordd "$servers" --coordctl "$bin/coordctl" \
  --duration "$duration" --rounds "$rounds" --share-conns="$share" --protocol "$protocol" \
  --other-pids "$(join "${otherpids[@]}")" --coordd-pids "$(join "${coorddpids[@]}")" \
  --memory-znodes "$memznodes" --catchup-writes "$catchup" --pid-file "$restarted" \
  --failover "$failover" --failover-rounds "${COMPARE_FAILOVER_ROUNDS:-1}" \
  --failover-duration "${COMPARE_FAILOVER_DURATION:-30s}" --failover-clients "${COMPARE_FAILOVER_CLIENTS:-64}" \
  --failover-trace="${COMPARE_FAILOVER_TRACE:-false}" $sweep &
cmp=$!
pids+=("$cmp")
wait "$cmp"
