#!/usr/bin/env bash
# make compare-zookeeper: coordd against ZooKeeper 3.8 on this machine. It
# starts a 3-node ZooKeeper ensemble (Debian's zookeeper package: clients on
# 127.0.0.1:2191-2193, quorum on 12881-12883, elections on 13881-13883) and a
# 3-node coordd cluster (scripts/local-cluster.sh: 2281-2283), both with
# their data in one temporary directory removed on exit, and runs
# test/cluster/zkcompare, which alternates the two on every workload and
# prints one table. Each cluster idles while the other is measured.
#
# Needs Java and Debian's zookeeper package (apt-get install zookeeper).
# Environment: BIN (default bin), COMPARE_DURATION (default 10s per run),
# COMPARE_ROUNDS (default 3), COMPARE_SWEEP (zkcompare's workload
# arguments), ZK_HEAP (default 1000m, the -Xmx of upstream's zkEnv.sh),
# GOMAXPROCS (of each coordd server; default cores / 3, at least 1), TMPDIR
# (where both keep their data: TMPDIR=/dev/shm takes the disk out of the
# comparison, to see what the rest costs).
set -euo pipefail
bin=${BIN:-bin}
go=${GO:-go}
duration=${COMPARE_DURATION:-10s}
rounds=${COMPARE_ROUNDS:-3}
sweep=${COMPARE_SWEEP:-"write:1,64,256 read:16,64 read-sync:16,64 create-eph:64 lock:16,64 session:64"}
zkjar=/usr/share/java/zookeeper.jar
if ! command -v java >/dev/null || [ ! -f "$zkjar" ]; then
  echo "compare-zookeeper: needs Java and Debian's zookeeper package: apt-get install zookeeper" >&2
  exit 1
fi

"$go" build -o "$bin/coordd" ./cmd/coordd
"$go" build -o "$bin/coordctl" ./cmd/coordctl
(cd test/cluster/zkcompare && "$go" build -o "$(cd ../../.. && cd "$bin" && pwd)/zkcompare" .)

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-compare.XXXXXX")
. "$(dirname "$0")/local-cluster.sh"
cleanup_on_exit "$dir"

# ZooKeeper as its documentation's replicated mode sets it up, with
# upstream's defaults otherwise (forceSync=yes: an fsync per batch of the
# transaction log), logging at WARN like the coordd servers here.
zkservers=""
zkpids=()
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
  zkpids+=($!)
  zkservers+="${zkservers:+,}127.0.0.1:$((2190 + i))"
done

start_local_cluster "$dir" || { echo "compare-zookeeper: no coordd cluster" >&2; exit 1; }

# srvr answers "Mode: leader" or "Mode: follower" once the ensemble has
# formed. Bash's /dev/tcp, so that no netcat is needed.
zkmode() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 1
  echo srvr >&3
  grep -m1 '^Mode:' <&3 || true
  exec 3<&- 3>&-
}
ready=0
for _ in $(seq 1 150); do
  n=0
  for i in 1 2 3; do
    if zkmode $((2190 + i)) 2>/dev/null | grep -q 'leader\|follower'; then n=$((n + 1)); fi
  done
  if [ $n = 3 ]; then ready=1; break; fi
  sleep 0.2
done
if [ $ready = 0 ]; then
  echo "compare-zookeeper: the ZooKeeper ensemble did not form in 30s; its logs:" >&2
  tail -n 20 "$dir"/zk*/out.log >&2
  exit 1
fi

rss() { ps -o rss= -p "$1" | awk '{printf "%.0f", $1 / 1024}'; }
echo "ZooKeeper $zkservers (java -Xmx${ZK_HEAP:-1000m}), coordd $servers (GOMAXPROCS=$procs each)"
# In the background, so that a TERM sent to this script runs its cleanup
# at once (bash runs traps only between commands), which stops it too.
# shellcheck disable=SC2086 # the sweep is a list of arguments
"$bin/zkcompare" --zk "$zkservers" --coordd "$servers" --coordctl "$bin/coordctl" \
  --duration "$duration" --rounds "$rounds" $sweep &
cmp=$!
pids+=("$cmp")
wait "$cmp"
echo
echo "resident memory after the runs (MB): ZooKeeper $(for p in "${zkpids[@]}"; do rss "$p"; echo -n " "; done)coordd $(for p in "${pids[@]}"; do [[ " ${zkpids[*]} $cmp " == *" $p "* ]] || { rss "$p"; echo -n " "; }; done)"
