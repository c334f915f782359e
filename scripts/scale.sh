#!/usr/bin/env bash
# make scale: coordd at scale, side by side with ZooKeeper 3.8, each as
# three real server processes on this machine with their data on disk, one
# system after the other (never both at once: each may need most of the
# memory). For each it starts the cluster, runs `compare scale`
# (test/cluster/compare/scale.go says what each figure is and how it is
# taken) and stops it; then `compare scale-table` prints one Markdown table.
#
#   ZooKeeper (Debian's zookeeper package; needs Java): clients on
#     127.0.0.1:2191-2193, quorum on 12881-12883, elections on 13881-13883,
#     forceSync=yes and snapCount 100000 as upstream ships it.
#   coordd (scripts/local-cluster.sh): clients on 127.0.0.1:2281-2283, its
#     defaults otherwise (GOMAXPROCS: scripts/procs.sh).
#
# Environment (a size of 0 skips its figure):
#   SCALE_SYSTEMS         "zookeeper coordd" (the default), or one of them
#   SCALE_ZNODES          znodes of 100 bytes below 100 parents (1000000)
#   SCALE_CHILDREN        znodes of 100 bytes below one parent (1000000)
#   SCALE_CATCHUP_WRITES  writes a stopped follower misses (1000000)
#   SCALE_WATCHES         one-shot watches (1000000)
#   SCALE_RECURSIVE       persistent recursive watches (100000)
#   SCALE_SESSIONS        ZooKeeper-protocol sessions held, each pinging on
#                         a connection of its own (50000: a server may
#                         hold ~19 000 connections where files are
#                         limited to 20 000 a process, as here)
#   SCALE_GRPC_SESSIONS   coordd only: sessions of its Go client held over
#                         shared connections (100000)
#   SCALE_WRITE_TIME      the write workload under snapshots (60s)
#   SCALE_HOLD            how long the sessions are held (60s)
#   SCALE_SETTLE          rest before each memory reading (15s)
#   ZK_HEAP               ZooKeeper's -Xmx (default: 1 GB plus 1.5 GB per
#                         million znodes and children, for the smallest
#                         heap that holds the load pass a smaller one)
#   SCALE_OUT             where the results go (default .scale/), one JSON
#                         file per system and table.md
#   TMPDIR                where the servers keep their data
# It exits 1 when a figure found what must not happen (a leader change, an
# expired session, a failed write): .ci/run runs a small one for that.
set -euo pipefail
bin=${BIN:-bin}
go=${GO:-go}
systems=${SCALE_SYSTEMS:-"zookeeper coordd"}
znodes=${SCALE_ZNODES:-1000000}
children=${SCALE_CHILDREN:-1000000}
catchup=${SCALE_CATCHUP_WRITES:-1000000}
watches=${SCALE_WATCHES:-1000000}
recursive=${SCALE_RECURSIVE:-100000}
sessions=${SCALE_SESSIONS:-50000}
grpcsessions=${SCALE_GRPC_SESSIONS:-100000}
writetime=${SCALE_WRITE_TIME:-60s}
hold=${SCALE_HOLD:-60s}
settle=${SCALE_SETTLE:-15s}
out=${SCALE_OUT:-.scale}
# coordd logs its snapshots and elections at info.
export LOG_LEVEL=${LOG_LEVEL:-info}
zkjar=/usr/share/java/zookeeper.jar
zkheap=${ZK_HEAP:-$((1024 + (znodes + children) * 3 / 2000))m}

for s in $systems; do
  case "$s" in
  zookeeper)
    if ! command -v java >/dev/null || [ ! -f "$zkjar" ]; then
      echo "scale: needs Java and Debian's zookeeper package: apt-get install zookeeper" >&2
      exit 1
    fi
    ;;
  coordd) ;;
  *)
    echo "scale: SCALE_SYSTEMS: unknown system $s (zookeeper, coordd)" >&2
    exit 2
    ;;
  esac
done

# Each ZooKeeper-protocol session is a connection, and each server holds a
# third of them (the sessions' side is split into processes of 15 000).
want=$((sessions / 3 + 1000))
if [ "$(ulimit -n)" -lt "$want" ]; then
  ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
  if [ "$(ulimit -n)" -lt "$want" ]; then
    echo "scale: $sessions sessions need $want files per server, and a process may open $(ulimit -n): fewer SCALE_SESSIONS" >&2
    exit 1
  fi
fi
# A source address has ~28 000 ports in all: each process of sessions
# opens them from an address of its own.
ips=127.0.0.1
for i in $(seq 1 $((sessions / 15000 + 1))); do ips+=",127.0.41.$i"; done

CGO_ENABLED=0 "$go" build -trimpath -o "$bin/coordd" ./cmd/coordd
"$go" build -o "$bin/coordctl" ./cmd/coordctl
(cd test/cluster/compare && "$go" build -o "$(cd ../../.. && cd "$bin" && pwd)/compare" .)
mkdir -p "$out"

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-scale.XXXXXX")
. "$(dirname "$0")/local-cluster.sh"
cleanup_on_exit "$dir"
restarted=$dir/restarted.pids
stop_on_exit 'if [ -f "$restarted" ]; then kill $(cat "$restarted") 2>/dev/null || true; fi; rm -rf "$cleanup_dir"'

zkmode() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 1
  echo srvr >&3
  grep -m1 '^Mode:' <&3 || true
  exec 3<&- 3>&-
}

start_zookeeper() {
  local i d n=0
  servers="" datadirs=""
  for i in 1 2 3; do
    d="$dir/zk$i"
    mkdir -p "$d"
    echo "$i" >"$d/myid"
    cat >"$d/zoo.cfg" <<CFG
tickTime=2000
initLimit=30
syncLimit=5
dataDir=$d
clientPort=$((2190 + i))
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,mntr
server.1=127.0.0.1:12881:13881
server.2=127.0.0.1:12882:13882
server.3=127.0.0.1:12883:13883
CFG
    java "-Xmx$zkheap" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -cp "$zkjar:/usr/share/java/slf4j-simple.jar" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >"$d/out.log" 2>&1 &
    pids+=($!)
    servers+="${servers:+,}127.0.0.1:$((2190 + i))"
    datadirs+="${datadirs:+,}$d"
  done
  for _ in $(seq 1 150); do
    n=0
    for i in 1 2 3; do
      if zkmode $((2190 + i)) 2>/dev/null | grep -q 'leader\|follower'; then n=$((n + 1)); fi
    done
    [ $n = 3 ] && return 0
    sleep 0.2
  done
  echo "scale: ZooKeeper did not form in 30s" >&2
  tail -n 20 "$dir"/zk*/out.log >&2
  return 1
}

start_coordd() {
  local i
  start_local_cluster "$dir/coordd" || return 1
  datadirs=""
  for i in 1 2 3; do datadirs+="${datadirs:+,}$dir/coordd/$i"; done
}

join() { local IFS=,; echo "$*"; }
status=0
files=()
for s in $systems; do
  pids=()
  case "$s" in
  zookeeper) name=ZooKeeper; start_zookeeper; echo "ZooKeeper $servers (java -Xmx$zkheap)" ;;
  coordd) name=coordd; start_coordd; echo "coordd $servers (GOMAXPROCS=$procs each)" ;;
  esac
  "$bin/compare" scale --system "$name" --servers "$servers" --pids "$(join "${pids[@]}")" \
    --data-dirs "$datadirs" --znodes "$znodes" --children "$children" --catchup-writes "$catchup" \
    --watches "$watches" --recursive "$recursive" --sessions "$sessions" --write-time "$writetime" \
    $([ "$s" = coordd ] && echo --grpc-sessions "$grpcsessions" --coordctl "$bin/coordctl") \
    --hold "$hold" --settle "$settle" --source-ips "$ips" --out "$out/$s.json" --pid-file "$restarted" &
  cmp=$!
  wait "$cmp" || status=1
  files+=("$out/$s.json")
  # Stop this system (restarted servers too) and drop its data before the next.
  stop_local_cluster
  if [ -f "$restarted" ]; then kill $(cat "$restarted") 2>/dev/null || true; rm -f "$restarted"; fi
  # The servers' logs stay with the results.
  mkdir -p "$out/$s-logs"
  for f in "$dir"/zk*/out.log; do [ -f "$f" ] && cp "$f" "$out/$s-logs/$(basename "$(dirname "$f")").log"; done
  cp "$dir"/coordd/*.log "$out/$s-logs/" 2>/dev/null || true
  rm -rf "$dir/zk1" "$dir/zk2" "$dir/zk3" "$dir/coordd"
  pids=()
done
"$bin/compare" scale-table "${files[@]}" | tee "$out/table.md"
exit $status
