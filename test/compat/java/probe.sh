#!/usr/bin/env bash
# probe.sh runs WatchProbe scripts against a throwaway standalone ZooKeeper
# server (Debian's zookeeper package) and prints what the probe saw.
#
#   test/compat/java/probe.sh [-p PORT] [-c CLASSES] [-s HOST:PORT] SCRIPT...
#
# -p PORT     the server's port on 127.0.0.1 (default 22181; must be free)
# -s ADDR     start no server: probe the ZooKeeper-protocol server at ADDR
#             (e.g. coordd's) instead
# -c CLASSES  a directory of classes put in front of zookeeper.jar, for the
#             server and the client alike (e.g. a patched build)
#
# The server's data directory and log live in a temporary directory that is
# removed, and the server (killed by its PID) stopped, when the script exits.
set -euo pipefail

port=22181
extra=
server=
while getopts p:c:s: opt; do
	case $opt in
	p) port=$OPTARG ;;
	s) server=$OPTARG ;;
	c) extra=$(cd "$OPTARG" && pwd) ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-p PORT] [-c CLASSES] [-s HOST:PORT] SCRIPT..." >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
jar=/usr/share/java/zookeeper.jar
[ -r $jar ] || { echo "probe: $jar missing: apt-get install -y zookeeper libzookeeper-java" >&2; exit 1; }
cp=$jar
[ -z "$extra" ] || cp=$extra:$cp

tmp=$(mktemp -d /tmp/zkprobe.XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "$tmp/classes"
javac -nowarn -cp "$cp" -d "$tmp/classes" "$here/WatchProbe.java"
probe() { java -cp "$cp:/usr/share/java/slf4j-nop.jar:$tmp/classes" WatchProbe --server "$1" "${@:2}"; }
if [ -n "$server" ]; then
	probe "$server" "$@"
	exit
fi

if ss -ltn "sport = :$port" | grep -q LISTEN; then
	echo "probe: port $port is in use" >&2
	exit 1
fi

mkdir -p "$tmp/data"
cat >"$tmp/zoo.cfg" <<EOF
tickTime=2000
dataDir=$tmp/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
EOF

java -cp "$cp:/usr/share/java/slf4j-simple.jar" org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/zoo.cfg" \
	>"$tmp/server.log" 2>&1 &
pid=$!

# Wait, bounded, until the server answers ruok.
for _ in $(seq 100); do
	if [ "$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf ruok >&3 && cat <&3" 2>/dev/null)" = imok ]; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
	sleep 0.1
done

status=0
probe "127.0.0.1:$port" "$@" || status=$?
if [ $status -ne 0 ]; then
	echo "probe: failed; the server's log:" >&2
	tail -n 40 "$tmp/server.log" >&2
fi
exit $status
