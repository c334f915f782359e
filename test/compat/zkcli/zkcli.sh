#!/usr/bin/env bash
# The zkCli suite of make compat: ZooKeeper's own shell (zkCli.sh of Debian's
# zookeeper package, unchanged) scripted through its standard input and its
# one-command mode, with its output checked line by line.
#
#   COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 test/compat/zkcli/zkcli.sh
#
# Environment: COMPAT_SERVERS (the cluster's client addresses), ZKCLI
# (default /usr/share/zookeeper/bin/zkCli.sh), COMPAT_TMP (a scratch
# directory; default a temporary one, removed on exit). Everything it
# creates is under /zkcli, which must not exist. It prints "ok NAME" or
# "FAIL NAME: why" per check and exits 1 if any failed. Every wait is
# bounded (WAIT seconds, default 30); every process it starts is killed by
# its PID on exit.
set -uo pipefail

servers=${COMPAT_SERVERS:?COMPAT_SERVERS is the list of client addresses}
zkcli=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
wait_s=${WAIT:-30}
IFS=, read -r -a addrs <<<"$servers"
s1=${addrs[0]}
s2=${addrs[1]:-$s1}

own_tmp=
tmp=${COMPAT_TMP:-}
if [ -z "$tmp" ]; then
	tmp=$(mktemp -d /tmp/zkcli-suite.XXXXXX)
	own_tmp=$tmp
fi
mkdir -p "$tmp"
# zkCli.sh writes its log where ZOO_LOG_DIR says (Debian's default needs root).
export ZOO_LOG_DIR=$tmp

bg=()
cleanup() {
	local p
	for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${bg[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "$own_tmp" ] || rm -rf "$own_tmp"
}
trap cleanup EXIT

passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() {
	echo "FAIL $1: $2"
	failed=$((failed + 1))
}

# quiet: zkCli's output, both streams (it prints "Created ..." and its
# errors on stderr), without the logging library's chatter.
quiet() {
	grep -v '^SLF4J:'
	return 0
}

# zk SERVER CMD...: one command in zkCli's one-command mode; its output
# (both streams), its exit status zkCli's.
zk() {
	local server=$1
	shift
	"$zkcli" -server "$server" "$@" 2>&1 | quiet
	return "${PIPESTATUS[0]}"
}

# session SERVER < commands: one session running every command of stdin, in
# order (zkCli reads its standard input line by line when it is not a
# terminal), then quit.
session() {
	{
		cat
		echo quit
	} | "$zkcli" -server "$1" 2>&1 | quiet
}

# has OUTPUT LINE...: every LINE is a whole line of OUTPUT.
has() {
	local out=$1 line missing=()
	shift
	for line in "$@"; do
		grep -Fxq -- "$line" <<<"$out" || missing+=("$line")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		printf 'missing line: %s\n' "${missing[@]}"
		return 1
	fi
}

# events OUTPUT: the watch events zkCli printed, one "TYPE PATH" a line, in
# the order its event thread printed them (connection states left out).
events() {
	sed -n 's/^WatchedEvent state:[A-Za-z]* type:\([A-Za-z]*\) path:\(.*\)$/\1 \2/p' <<<"$1" | grep -v '^None '
}

# check NAME COMMAND...: ok if COMMAND succeeds, else FAIL with its output.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$name"
	else
		fail "$name" "$(echo "$out" | tr '\n' ';' | cut -c1-600)"
	fi
}

# wait_gone SERVER PATH: until PATH does not exist (bounded).
wait_gone() {
	local deadline=$((SECONDS + wait_s)) out
	while [ $SECONDS -lt $deadline ]; do
		out=$(zk "$1" stat "$2")
		if grep -Fxq "Node does not exist: $2" <<<"$out"; then return 0; fi
		sleep 0.5
	done
	echo "$2 still exists after ${wait_s}s"
	return 1
}

out=$(zk "$s1" stat /zkcli)
if ! grep -Fxq "Node does not exist: /zkcli" <<<"$out"; then
	echo "FAIL setup: /zkcli exists already, or $s1 does not answer"
	exit 1
fi

# --- one session: the everyday commands and what zkCli prints for them.
out=$(session "$s1" <<'EOF'
create /zkcli
create /zkcli/a hello
get /zkcli/a
set /zkcli/a world
get -s /zkcli/a
ls /zkcli
stat /zkcli/a
create /zkcli
create /zkcli/s
create -s /zkcli/s/n- one
create -s /zkcli/s/n- two
ls /zkcli/s
create -e /zkcli/eph e
stat /zkcli/eph
create -e /zkcli/eph/child x
create -c /zkcli/cont
create /zkcli/cont/x
delete /zkcli/cont/x
create -t 3000 /zkcli/ttl t
get /zkcli/ttl
getAcl /zkcli/a
sync /zkcli
config
whoami
getAllChildrenNumber /zkcli
getEphemerals /zkcli
delete -v 0 /zkcli/a
get /zkcli/a
delete -v 1 /zkcli/a
stat /zkcli/a
delete /zkcli/s
create /zkcli/missing/parent
EOF
)
echo "$out" >"$tmp/basic.out"
check "connect" has "$out" "WatchedEvent state:SyncConnected type:None path:null"
check "create" has "$out" "Created /zkcli" "Created /zkcli/a" "Node already exists: /zkcli"
check "get, set" has "$out" "hello" "world"
check "get -s" has "$out" "dataVersion = 1" "dataLength = 5" "numChildren = 0" "aclVersion = 0" "ephemeralOwner = 0x0"
check "ls" has "$out" "[a]" "[n-0000000000, n-0000000001]"
check "sequential" has "$out" "Created /zkcli/s/n-0000000000" "Created /zkcli/s/n-0000000001"
check "ephemeral" bash -c '
	has_owner=$(grep -c "^ephemeralOwner = 0x[0-9a-f]*[1-9a-f][0-9a-f]*$" <<<"$1")
	[ "$has_owner" -ge 1 ] || { echo "no ephemeralOwner other than 0x0"; exit 1; }
	grep -Fxq "Created /zkcli/eph" <<<"$1" || { echo "no Created /zkcli/eph"; exit 1; }
	grep -Fxq "Ephemerals cannot have children: /zkcli/eph/child" <<<"$1" || { echo "child of an ephemeral not refused"; exit 1; }' _ "$out"
check "container and TTL created" has "$out" "Created /zkcli/cont" "Created /zkcli/ttl" "t"
check "getAcl" has "$out" "'world,'anyone" ": cdrwa"
check "sync" has "$out" "Sync is OK"
check "config (getConfig)" bash -c '
	n=$(grep -cE "^server\.[0-9]+=[^:]+:[0-9]+:[0-9]+:participant" <<<"$1")
	[ "$n" = 3 ] || { echo "want 3 server.N=host:port:port:participant lines, got $n"; exit 1; }
	grep -qE "^version=[0-9a-f]+$" <<<"$1" || { echo "no version= line"; exit 1; }' _ "$out"
check "whoami" has "$out" "Auth scheme: User" "ip: 127.0.0.1"
check "getAllChildrenNumber" bash -c '
	grep -Fxq "7" <<<"$1" || { echo "want 7 descendants of /zkcli (a, s, s/n-0, s/n-1, eph, cont, ttl)"; exit 1; }' _ "$out"
check "getEphemerals" has "$out" "[/zkcli/eph]"
check "delete -v (CAS)" has "$out" "version No is not valid : /zkcli/a" "Node does not exist: /zkcli/a"
check "delete of a node with children" has "$out" "Node not empty: /zkcli/s"
check "create without a parent" has "$out" "Node does not exist: /zkcli/missing/parent"

# --- the one-command mode, its exit status, and a connection string of
# every server.
out=$(zk "$servers" get /zkcli/s/n-0000000000)
rc=$?
check "one-command mode, every server in -server" bash -c '[ "$1" = 0 ] && grep -Fxq one <<<"$2" || { echo "rc=$1 out=$2"; exit 1; }' _ "$rc" "$out"
out=$(zk "$s2" get /zkcli/nothing)
rc=$?
check "one-command mode fails with status 1" bash -c '[ "$1" = 1 ] && grep -Fxq "Node does not exist: /zkcli/nothing" <<<"$2" || { echo "rc=$1 out=$2"; exit 1; }' _ "$rc" "$out"

# --- the ephemeral went with its session, on every server.
for a in "${addrs[@]}"; do
	out=$(zk "$a" stat /zkcli/eph)
	check "ephemeral gone after its session, on $a" has "$out" "Node does not exist: /zkcli/eph"
done

# --- the emptied container and the TTL node are reaped (bounded wait).
check "container reaped once empty" wait_gone "$s2" /zkcli/cont
check "TTL node reaped after its TTL" wait_gone "$s2" /zkcli/ttl

# --- watches seen firing in one session (A, on server 1) for the changes
# another session (B, on server 2) makes. A reads commands from a FIFO so
# that the test decides when it runs each.
zk "$s1" create /zkcli/w >/dev/null
zk "$s1" create /zkcli/r >/dev/null
zk "$s1" create /zkcli/p >/dev/null
mkfifo "$tmp/a.in"
"$zkcli" -server "$s1" <"$tmp/a.in" >"$tmp/a.out" 2>&1 &
apid=$!
bg+=("$apid")
exec 7>"$tmp/a.in"
send() { printf '%s\n' "$@" >&7; }

# wait_out FILE LINE [N]: until FILE has LINE (as a whole line) N times.
wait_out() {
	local deadline=$((SECONDS + wait_s)) n=${3:-1}
	while [ $SECONDS -lt $deadline ]; do
		[ "$(grep -Fxc -- "$2" "$1")" -lt "$n" ] || return 0
		kill -0 "$apid" 2>/dev/null || break
		sleep 0.1
	done
	echo "no '$2' (x$n) in $1 within ${wait_s}s; it has:"
	tail -n 30 "$1"
	return 1
}

send "get -w /zkcli/w" "ls -w /zkcli/w" "stat -w /zkcli/nx" \
	"addWatch -m PERSISTENT_RECURSIVE /zkcli/r" "addWatch -m PERSISTENT /zkcli/p" \
	"create /zkcli/ready-1 ready-1" "get /zkcli/ready-1"
if wait_out "$tmp/a.out" ready-1; then
	session "$s2" >"$tmp/b1.out" <<'EOF'
set /zkcli/w v1
create /zkcli/w/c
create /zkcli/nx
create /zkcli/r/a
set /zkcli/r/a v
create /zkcli/r/a/b
delete /zkcli/r/a/b
set /zkcli/p v
create /zkcli/p/c
delete /zkcli/p/c
set /zkcli/w v2
create /zkcli/w/d
set /zkcli/p marker-1
EOF
	wait_out "$tmp/a.out" "WatchedEvent state:SyncConnected type:NodeDataChanged path:/zkcli/p" 2 >/dev/null
	send "removewatches /zkcli/r"
	if wait_out "$tmp/a.out" "WatchedEvent state:SyncConnected type:PersistentWatchRemoved path:/zkcli/r" >/dev/null; then
		session "$s2" >"$tmp/b2.out" <<'EOF'
set /zkcli/r/a after-remove
create /zkcli/r/z
set /zkcli/p marker-2
EOF
		wait_out "$tmp/a.out" "WatchedEvent state:SyncConnected type:NodeDataChanged path:/zkcli/p" 3 >/dev/null
	fi
fi
send quit
exec 7>&-
got=$(events "$(cat "$tmp/a.out")")
want="NodeDataChanged /zkcli/w
NodeChildrenChanged /zkcli/w
NodeCreated /zkcli/nx
NodeCreated /zkcli/r/a
NodeDataChanged /zkcli/r/a
NodeCreated /zkcli/r/a/b
NodeDeleted /zkcli/r/a/b
NodeDataChanged /zkcli/p
NodeChildrenChanged /zkcli/p
NodeChildrenChanged /zkcli/p
NodeDataChanged /zkcli/p
PersistentWatchRemoved /zkcli/r
NodeDataChanged /zkcli/p"
if [ "$got" = "$want" ]; then
	ok "watches: get -w, ls -w, stat -w, addWatch -m PERSISTENT_RECURSIVE / PERSISTENT, removewatches (events in order, one-shot fired once)"
else
	fail "watches" "events seen by the watching session differ (want | got):
$(diff <(echo "$want") <(echo "$got") | sed 's/^/    /')"
fi

# --- quotas (kept under /zookeeper/quota) and the read-only configuration.
out=$(session "$s2" <<'EOF'
setquota -n 5 /zkcli/w
listquota /zkcli/w
delquota /zkcli/w
listquota /zkcli/w
set /zookeeper/config x
EOF
)
check "setquota, listquota, delquota" has "$out" \
	"Output quota for /zkcli/w count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1" \
	"quota for /zkcli/w does not exist."
check "/zookeeper/config refuses writes as ZooKeeper does" has "$out" "Insufficient permission : /zookeeper/config"

# --- deleteall removes the whole subtree.
out=$(session "$s2" <<'EOF'
deleteall /zkcli
stat /zkcli
EOF
)
check "deleteall" has "$out" "Node does not exist: /zkcli"

echo "zkcli: $passed passed, $failed failed"
[ $failed = 0 ]
