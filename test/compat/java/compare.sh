#!/usr/bin/env bash
# compare.sh runs WatchProbe's scenarios against a running server and
# compares each output with its golden answer: the probe suite of make
# compat (scripts/compat.sh).
#
#   test/compat/java/compare.sh -s HOST:PORT -t coordd|zookeeper [-u] [-k CLASSES] [-c FIXES] [SCENARIO...]
#
# -s ADDR     the server to probe (one server of a cluster)
# -t TARGET   what runs there:
#             zookeeper: ZooKeeper 3.8.0 (Debian's); each output must equal
#               expected/zookeeper-3.8.0/NN.golden;
#             coordd: each output must equal expected/coordd/NN.golden, and
#               a scenario whose output differs from ZooKeeper 3.8.0's must
#               be listed, with the reason, in expected/coordd/DIFFERENCES
#               (and a listed one must still differ).
# -u          (coordd) rewrite expected/coordd/NN.golden from this run
# -k CLASSES  WatchProbe's compiled classes (default: compiled here)
# -c FIXES    run the probe's client with ZooKeeper's watch fixes of 3.9
#             (classes built by build-watch-fixes.sh) and compare with
#             expected/zookeeper-3.8.0-watch-fixes/ instead: ZooKeeper (run
#             with the same classes) must answer every scenario as there;
#             coordd too, but for scenarios DIFFERENCES lists (and one it
#             lists as a bug must still differ).
#
# Before each scenario it deletes everything but /zookeeper (through
# zkCli.sh), as the scenarios expect an empty tree. Outputs are compared
# after normalising what differs from run to run: the zxid a client sends in
# setWatches2 (rel=0x...), the order in which wchc/wchp list sessions and
# paths (ZooKeeper's is a hash set's), and the step in whose output the
# Disconnected calls after a drop come (the client notices it a little
# later, now and then after the next step).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
server=
target=
update=0
classes=
fixes=
while getopts s:t:uk:c: opt; do
	case $opt in
	s) server=$OPTARG ;;
	t) target=$OPTARG ;;
	u) update=1 ;;
	k) classes=$OPTARG ;;
	c) fixes=$(cd "$OPTARG" && pwd) ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $target in coordd | zookeeper) ;; *) echo "compare: -t coordd or -t zookeeper" >&2; exit 2 ;; esac
[ -n "$server" ] || { echo "compare: -s HOST:PORT" >&2; exit 2; }
if [ $update = 1 ] && { [ "$target" != coordd ] || [ -n "$fixes" ]; }; then
	echo "compare: -u rewrites coordd's goldens (of Debian's client); not with -t zookeeper or -c" >&2
	exit 2
fi

jar=/usr/share/java/zookeeper.jar
zkcli=${ZKCLI:-/usr/share/zookeeper/bin/zkCli.sh}
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d /tmp/zkcompare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export ZOO_LOG_DIR=$tmp
if [ -z "$classes" ]; then
	classes=$tmp/classes
	javac -nowarn -cp $jar -d "$classes" "$here/WatchProbe.java"
fi

scenarios=("$@")
if [ ${#scenarios[@]} = 0 ]; then
	for f in "$here"/scenarios/*.txt; do scenarios+=("$(basename "$f" .txt)"); done
fi

# normalize FILE: the output with what differs from run to run made equal.
normalize() {
	"$python" - "$1" <<'EOF'
import re, sys
out, block = [], None
def flush():
    global block
    if block is not None:
        # One entry per session: its line and the tab-indented paths after it.
        entries, cur = [], None
        for l in block:
            if l.startswith("\t") and cur is not None:
                cur.append(l)
            else:
                cur = [l]
                entries.append(cur)
        # Each entry's own lines in order too: ZooKeeper lists both in hash order.
        for e in sorted([e[0]] + sorted(e[1:]) for e in entries):
            out.extend(e)
    block = None
for line in open(sys.argv[1]).read().split("\n"):
    line = re.sub(r"rel=0x[0-9a-f]+", "rel=ZXID", line)
    if block is not None and (line.startswith(">") or line.startswith("  ") or line.startswith("## ") or line == ""):
        flush()
    if block is not None:
        block.append(line)
        continue
    out.append(line)
    if re.match(r"^> wch[a-z]  = ", line):
        block = []
flush()
# "S drop" returns before S's client notices that its connection is gone:
# the Disconnected calls may come in the output of the next step or two.
# They belong to the drop: put them right after it.
moved, res = {}, []
for line in out:
    m = re.match(r"^  (\S+) state Disconnected -> ", line)
    if m:
        moved.setdefault(m.group(1), []).append(line)
for line in out:
    if re.match(r"^  \S+ state Disconnected -> ", line):
        continue
    res.append(line)
    m = re.match(r"^> (\S+) drop  = ", line)
    if m:
        res.extend(moved.pop(m.group(1), []))
sys.stdout.write("\n".join(res))
EOF
}

# wipe: delete every top-level node but /zookeeper.
wipe() {
	local out kids k cmds=""
	out=$("$zkcli" -server "$server" ls / 2>&1) || true
	kids=$(sed -n 's/^\[\(.*\)\]$/\1/p' <<<"$out" | tail -n 1 | tr -d ' ' | tr , ' ')
	for k in $kids; do
		[ "$k" = zookeeper ] || cmds+="deleteall /$k"$'\n'
	done
	[ -z "$cmds" ] || printf '%squit\n' "$cmds" | "$zkcli" -server "$server" >/dev/null 2>&1
}

# listed NAME: the reason DIFFERENCES gives for NAME, if it lists it.
listed() {
	[ ! -f "$here/expected/coordd/DIFFERENCES" ] ||
		sed -n "s/^$1: *//p" "$here/expected/coordd/DIFFERENCES"
}

mkdir -p "$here/expected/coordd"
failed=0
for n in "${scenarios[@]}"; do
	wipe
	raw=$tmp/$n.raw
	if ! java -cp "${fixes:+$fixes:}$jar:/usr/share/java/slf4j-nop.jar:$classes" WatchProbe --server "$server" \
		"$here/scenarios/$n.txt" >"$raw" 2>"$tmp/$n.err"; then
		echo "FAIL $n: the probe failed: $(tail -n 3 "$tmp/$n.err" | tr '\n' ' ')"
		failed=$((failed + 1))
		continue
	fi
	normalize "$raw" >"$tmp/$n.out"
	if [ -n "$fixes" ]; then
		normalize "$here/expected/zookeeper-3.8.0-watch-fixes/$n.golden" >"$tmp/$n.zk"
		why=
		[ "$target" = zookeeper ] || why=$(listed "$n")
		if cmp -s "$tmp/$n.zk" "$tmp/$n.out"; then
			if [ "${why%%[ ,:]*}" = bug ]; then
				echo "FAIL $n: now as ZooKeeper with the 3.9 fixes answers it: is the bug DIFFERENCES lists fixed?"
				failed=$((failed + 1))
			else
				echo "ok   $n: as the golden answer of ZooKeeper 3.8.0 with the watch fixes of 3.9"
			fi
		elif [ -n "$why" ]; then
			echo "ok   $n: differs from ZooKeeper with the 3.9 fixes, as DIFFERENCES says ($why)"
		else
			echo "FAIL $n: differs from expected/zookeeper-3.8.0-watch-fixes/$n.golden:"
			diff -u "$tmp/$n.zk" "$tmp/$n.out" | sed 's/^/    /' || true
			failed=$((failed + 1))
		fi
		continue
	fi
	normalize "$here/expected/zookeeper-3.8.0/$n.golden" >"$tmp/$n.zk"
	if [ "$target" = zookeeper ]; then
		if diff -u "$tmp/$n.zk" "$tmp/$n.out" >"$tmp/$n.diff"; then
			echo "ok   $n: as the golden answer of ZooKeeper 3.8.0"
		else
			echo "FAIL $n: differs from expected/zookeeper-3.8.0/$n.golden:"
			sed 's/^/    /' "$tmp/$n.diff"
			failed=$((failed + 1))
		fi
		continue
	fi

	golden=$here/expected/coordd/$n.golden
	if [ $update = 1 ]; then
		cp "$tmp/$n.out" "$golden"
	fi
	why=$(listed "$n")
	if [ ! -f "$golden" ]; then
		echo "FAIL $n: no expected/coordd/$n.golden (make compat UPDATE=1 writes it)"
		failed=$((failed + 1))
	elif ! diff -u "$golden" "$tmp/$n.out" >"$tmp/$n.diff"; then
		echo "FAIL $n: coordd's answer changed from expected/coordd/$n.golden (if that is meant: make compat UPDATE=1):"
		sed 's/^/    /' "$tmp/$n.diff"
		failed=$((failed + 1))
	elif cmp -s "$tmp/$n.zk" "$tmp/$n.out"; then
		if [ -n "$why" ]; then
			echo "FAIL $n: now as ZooKeeper 3.8.0 answers it: take it off expected/coordd/DIFFERENCES"
			failed=$((failed + 1))
		else
			echo "ok   $n: as ZooKeeper 3.8.0"
		fi
	elif [ -n "$why" ]; then
		echo "ok   $n: as expected/coordd/$n.golden; differs from ZooKeeper 3.8.0 ($why)"
	else
		echo "FAIL $n: differs from ZooKeeper 3.8.0 and expected/coordd/DIFFERENCES does not say why:"
		diff -u "$tmp/$n.zk" "$tmp/$n.out" | sed 's/^/    /' || true
		failed=$((failed + 1))
	fi
done
echo "probe: $((${#scenarios[@]} - failed)) passed, $failed failed"
[ $failed = 0 ]
