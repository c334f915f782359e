#!/usr/bin/env bash
# make compat: ZooKeeper's own clients, unchanged, against a 3-node cluster
# this script starts, suite by suite, then a summary; exits 1 if a suite
# failed (2 on a usage error or a missing prerequisite).
#
#   make compat                        coordd (built from this checkout)
#   make compat TARGET=zookeeper       the same suites against ZooKeeper 3.8
#                                      (Debian's), to prove them on ZooKeeper
#   make compat UPDATE=1               rewrite coordd's WatchProbe goldens
#                                      (test/compat/java/expected/coordd/)
#   make compat SUITES="zkcli kazoo"   some suites only (zkcli java curator
#                                      kazoo sasl probe)
#   make compat WATCH_FIXES=DIR        the probe with ZooKeeper's watch fixes of
#                                      3.9 built in (DIR: a clone of
#                                      apache/zookeeper; see below)
#
# The suites (test/compat/README.md says what each checks):
#   zkcli    zkCli.sh scripted through its shell   test/compat/zkcli/zkcli.sh
#   java     ZooKeeper's Java client               test/compat/javaclient/ClientSuite.java
#   curator  Curator's recipes                     test/compat/javaclient/CuratorSuite.java
#   kazoo    Python's kazoo                        test/compat/kazoo/kazoo_suite.py
#   fourletter  zktop, nc and a plain socket asking four-letter words
#                                                  test/compat/fourletter/fourletter_suite.py
#   sasl     the Java client with SASL DIGEST-MD5  test/compat/javaclient/SaslSuite.java
#   probe    WatchProbe's scenarios, compared with golden answers
#                                                  test/compat/java/compare.sh
#   kazoo-reconnect, java-reconnect, curator-reconnect, c-reconnect,
#   node-reconnect: each client through reconnects of its session (a dropped
#            socket, 20 in a row, its server killed, a resumed session;
#            issue 35)                             test/compat/README.md
#   reconnect  all five of them
#   kazoo-lockdelay, curator-lockdelay (coordd only: ZooKeeper has no
#            lock-delay) kazoo's Lock and Curator's InterProcessMutex with a
#            holder process stopped (SIGSTOP) past its session timeout
#                                                  test/compat/lockdelay/
#
# It installs what it needs from Debian's packages (zookeeper,
# libzookeeper-java, the three libcurator-*-java, python3-kazoo,
# python3-pure-sasl, a JDK; zktop and netcat-openbsd for the fourletter suite;
# gcc and libzookeeper-mt-dev for c-reconnect, nodejs and npm for
# node-reconnect) with apt-get when run as root, and otherwise says what to
# install. node-reconnect installs node-zookeeper-client with npm, into the
# run's directory.
#
# The cluster: coordd on 127.0.200.11-13, with --lock-delay $COMPAT_LOCK_DELAY
# (default /lockdelay=4s: only the lockdelay suites create nodes there)
# (TARGET=zookeeper: 127.0.201.11-13;
# COMPAT_NET changes the first three bytes), clients on port 2181 of each,
# peers on 2888 (ZooKeeper: 2888 and 3888), data and logs in a temporary
# directory; SASL DIGEST-MD5 served to the users super (adminsecret, the SASL
# super user) and bob (bobsecret), from the JAAS file ZooKeeper reads. Before each suite, a server a suite killed (the session-move
# checks kill the server their session is on, through the helper COMPAT_CTL
# names) is restarted and every node but /zookeeper deleted. Every suite has
# a time limit (COMPAT_SUITE_TIMEOUT seconds, default 600); on exit,
# interrupted or not, every process started here is killed by its PID. The
# directory is removed after a clean run and kept (its path printed) after
# a failure.
#
# WATCH_FIXES: test/compat/java/build-watch-fixes.sh builds the watch fixes
# of ZooKeeper 3.9 from that clone; the probe's client runs with them and is
# compared with expected/zookeeper-3.8.0-watch-fixes/ (and ZooKeeper's
# servers, with TARGET=zookeeper, run with them too): the semantics coordd
# follows, with both sides' client the same.
#
# Environment: TARGET, SUITES, UPDATE, WATCH_FIXES, COMPAT_NET, COMPAT_SUITE_TIMEOUT, COMPAT_LOCK_DELAY, BIN
# (default bin), GO (default go), LDFLAGS (of the build), PYTHON (default /usr/bin/python3, the one
# python3-kazoo installs for).
set -euo pipefail
cd "$(dirname "$0")/.."

target=${TARGET:-coordd}
# The suites of both targets, and those of coordd only (ZooKeeper has no
# lock-delay). reconnect names the five *-reconnect suites.
reconnect="kazoo-reconnect java-reconnect curator-reconnect c-reconnect node-reconnect"
common_suites="zkcli java curator kazoo sasl fourletter probe reconnect"
coordd_suites="kazoo-lockdelay curator-lockdelay"
if [ "$target" = coordd ]; then
	default_suites="$common_suites $coordd_suites"
else
	default_suites="$common_suites"
fi
suites=
for s in ${SUITES:-$default_suites}; do
	[ "$s" = reconnect ] && suites+=" $reconnect" || suites+=" $s"
done
lock_delay=${COMPAT_LOCK_DELAY:-/lockdelay=4s}
update=${UPDATE:-0}
[ "$update" != 0 ] || update=
bin=${BIN:-bin}
go=${GO:-go}
python=${PYTHON:-/usr/bin/python3}
suite_timeout=${COMPAT_SUITE_TIMEOUT:-600}
zkjar=/usr/share/java/zookeeper.jar
zkcli=/usr/share/zookeeper/bin/zkCli.sh
curator=/usr/share/java/curator-framework.jar:/usr/share/java/curator-recipes.jar:/usr/share/java/curator-client.jar

usage() {
	echo "compat: $1" >&2
	echo "usage: make compat [TARGET=coordd|zookeeper] [SUITES=\"$common_suites $coordd_suites\"] [UPDATE=1]" >&2
	exit 2
}
case $target in
coordd) net=${COMPAT_NET:-127.0.200} ;;
zookeeper) net=${COMPAT_NET:-127.0.201} ;;
*) usage "TARGET is coordd or zookeeper, not $target" ;;
esac
for s in $suites; do
	case " zkcli java curator kazoo sasl fourletter probe $reconnect $coordd_suites " in
	*" $s "*) ;;
	*) usage "no suite $s" ;;
	esac
	case " $coordd_suites " in
	*" $s "*) [ "$target" = coordd ] || usage "$s is coordd's only: ZooKeeper has no lock-delay" ;;
	esac
done
if [ -n "$update" ] && [ "$target" != coordd ]; then
	usage "UPDATE=1 rewrites coordd's goldens: not with TARGET=$target"
fi
watch_fixes=${WATCH_FIXES:-}
if [ -n "$update" ] && [ -n "$watch_fixes" ]; then
	usage "UPDATE=1 rewrites coordd's goldens of Debian's client: not with WATCH_FIXES"
fi

# Nothing may listen on the cluster's addresses yet: the readiness check
# would take another cluster there (another run's, on the same COMPAT_NET)
# for this one, whose servers cannot bind.
for i in 1 2 3; do
	for port in 2181 2888; do
		if timeout 2 bash -c "exec 3<>/dev/tcp/$net.$((10 + i))/$port" 2>/dev/null; then
			echo "compat: $net.$((10 + i)):$port is in use (another run on these addresses?); set COMPAT_NET to other ones" >&2
			exit 2
		fi
	done
done

# --- what the suites need, from Debian's packages.
need=()
want() { [ -e "$1" ] || need+=("$2"); }
want "$zkjar" libzookeeper-java
want "$zkcli" zookeeper
want /usr/share/java/curator-framework.jar libcurator-framework-java
want /usr/share/java/curator-recipes.jar libcurator-recipes-java
want /usr/share/java/curator-client.jar libcurator-client-java
want /usr/share/java/slf4j-simple.jar libslf4j-java
command -v javac >/dev/null || need+=(default-jdk-headless)
case " $suites " in *" c-reconnect "*)
	want /usr/include/zookeeper/zookeeper.h libzookeeper-mt-dev
	command -v gcc >/dev/null || need+=(gcc) ;;
esac
case " $suites " in *" node-reconnect "*) # it installs node-zookeeper-client with npm itself
	command -v node >/dev/null || need+=(nodejs)
	command -v npm >/dev/null || need+=(npm) ;;
esac
{ [ -x "$python" ] && "$python" -c 'import kazoo' 2>/dev/null; } || need+=(python3-kazoo)
{ [ -x "$python" ] && "$python" -c 'import puresasl' 2>/dev/null; } || need+=(python3-pure-sasl)
if [[ " $suites " == *" fourletter "* ]]; then
	want /usr/lib/python3/dist-packages/zktop.py zktop
	command -v nc >/dev/null || need+=(netcat-openbsd)
fi
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		echo "compat: needs Debian's packages ${need[*]}; as root: apt-get install -y ${need[*]}" >&2
		exit 2
	fi
	echo "compat: installing ${need[*]} (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -q "${need[@]}" >/tmp/coordd-compat-apt.log 2>&1; then
		apt-get update -q >>/tmp/coordd-compat-apt.log 2>&1
		apt-get install -y -q "${need[@]}" >>/tmp/coordd-compat-apt.log 2>&1 ||
			{ echo "compat: apt-get failed; see /tmp/coordd-compat-apt.log" >&2; exit 2; }
	fi
fi

if [ "$target" = coordd ]; then
	"$go" build -ldflags "${LDFLAGS:-}" -o "$bin/coordd" ./cmd/coordd
	"$go" build -ldflags "${LDFLAGS:-}" -o "$bin/coordctl" ./cmd/coordctl
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-compat.XXXXXX")
mkdir -p "$dir/pid"
fixes=
if [ -n "$watch_fixes" ]; then
	fixes=$dir/fixes
	bash test/compat/java/build-watch-fixes.sh "$watch_fixes" "$fixes" >"$dir/fixes.log" 2>&1 ||
		{ echo "compat: cannot build the watch fixes from $watch_fixes:" >&2; tail -n 5 "$dir/fixes.log" >&2; rm -rf "$dir"; exit 2; }
fi
export ZOO_LOG_DIR=$dir # zkCli.sh's log (Debian's default directory needs root)
failed_suites=0
declare -a pids=()
suite_pid=

# alive PID: the process runs (a killed child not yet reaped is a zombie).
alive() {
	local s
	s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $s != Z* ]]
}

cleanup() {
	trap - INT TERM HUP EXIT
	local p
	[ -z "$suite_pid" ] || kill "$suite_pid" 2>/dev/null || true
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	[ -z "$suite_pid" ] || wait "$suite_pid" 2>/dev/null || true
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
	done
	if [ "$failed_suites" = 0 ] && [ "${1:-}" = ok ]; then
		rm -rf "$dir"
	else
		echo "compat: servers' and clients' logs kept in $dir"
	fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# SASL: the servers' users (ZooKeeper's Server section, read by coordd's
# --sasl-users and by ZooKeeper's java.security.auth.login.config) and the
# sasl suite's client sections.
cat >"$dir/server-jaas.conf" <<'EOF'
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="adminsecret"
    user_bob="bobsecret";
};
EOF
cat >"$dir/client-jaas.conf" <<'EOF'
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="bob"
    password="bobsecret";
};
WrongPassword {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="bob"
    password="not bob's";
};
Super {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="super"
    password="adminsecret";
};
EOF
# The super user, super:secret, on both targets (the kazoo suite's reconfig).
superdigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=

host() { echo "$net.$((10 + $1))"; }
addr() { echo "$(host "$1"):2181"; }
servers="$(addr 1),$(addr 2),$(addr 3)"

# --- the cluster.
if [ "$target" = coordd ]; then
	. scripts/procs.sh
	procs=$(server_procs 3)
	peers="1=$(host 1):2888,2=$(host 2):2888,3=$(host 3):2888"
else
	for i in 1 2 3; do
		mkdir -p "$dir/node$i"
		echo "$i" >"$dir/node$i/myid"
		# Each server's client address in its server line, as coordd lists
		# them in /zookeeper/config; TTL nodes on (coordd's default) and
		# containers checked every second (coordd's --reap-interval);
		# reconfig on (coordd's is), for the super user.
		cat >"$dir/node$i/zoo.cfg" <<EOF
reconfigEnabled=true
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$dir/node$i
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
server.1=$(host 1):2888:3888;$(addr 1)
server.2=$(host 2):2888:3888;$(addr 2)
server.3=$(host 3):2888:3888;$(addr 3)
EOF
	done
fi

start_node() {
	local i=$1
	if [ "$target" = coordd ]; then
		GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/node$i" \
			--client-addr "$(addr "$i")" --peer-addr "$(host "$i"):2888" --peers "$peers" \
			--4lw-commands '*' --sasl-users "$dir/server-jaas.conf" --sasl-super-user super \
			--superdigest "$superdigest" --lock-delay "$lock_delay" --log-level warn >>"$dir/node$i.log" 2>&1 &
	else
		java -Xmx256m -Dzookeeper.extendedTypesEnabled=true -Dznode.container.checkIntervalMs=1000 \
			-Djava.security.auth.login.config="$dir/server-jaas.conf" -Dzookeeper.superUser=super \
			-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider \
			-Dzookeeper.DigestAuthenticationProvider.superDigest="$superdigest" \
			-Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "${fixes:+$fixes:}$zkjar:/usr/share/java/slf4j-simple.jar" \
			org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/node$i/zoo.cfg" >>"$dir/node$i.log" 2>&1 &
	fi
	pids[i]=$!
	# Disowned: the suites kill servers, and bash would report each death.
	disown "$!"
	echo "$!" >"$dir/pid/$(addr "$i")"
}

# ready: every server serves (coordd: a leader and every member reachable;
# ZooKeeper: each says it is leader or follower).
ready() {
	if [ "$target" = coordd ]; then
		"$bin/coordctl" --servers "$servers" --timeout 2s status >/dev/null 2>&1
	else
		local i mode
		for i in 1 2 3; do
			mode=$(timeout 3 bash -c "exec 3<>/dev/tcp/$(host "$i")/2181 && printf srvr >&3 && cat <&3" 2>/dev/null | grep '^Mode:') || return 1
			[[ $mode == *leader* || $mode == *follower* ]] || return 1
		done
	fi
}

wait_ready() {
	local i deadline=$((SECONDS + 90))
	until ready; do
		for i in 1 2 3; do
			alive "${pids[i]}" || { echo "compat: server $i exited; its log:" >&2; tail -n 20 "$dir/node$i.log" >&2; exit 1; }
		done
		[ $SECONDS -lt $deadline ] || { echo "compat: the cluster did not form in 90s" >&2; tail -n 5 "$dir"/node*.log >&2; exit 1; }
		sleep 0.2
	done
}

# heal: restart the servers the last suite killed.
heal() {
	local i
	for i in 1 2 3; do
		if ! alive "${pids[i]}"; then
			echo "(restarting server $i, killed by the last suite)"
			start_node "$i"
		fi
	done
	wait_ready
}

# wipe: delete every top-level node but /zookeeper.
wipe() {
	local out kids k cmds=""
	out=$("$zkcli" -server "$servers" ls / 2>&1) || true
	kids=$(sed -n 's/^\[\(.*\)\]$/\1/p' <<<"$out" | tail -n 1 | tr -d ' ' | tr , ' ')
	for k in $kids; do
		[ "$k" = zookeeper ] || cmds+="deleteall /$k"$'\n'
	done
	[ -z "$cmds" ] || printf '%squit\n' "$cmds" | "$zkcli" -server "$servers" >/dev/null 2>&1
}

# The suites' way to kill a server: "ctl kill HOST:PORT" (SIGKILL).
cat >"$dir/ctl" <<EOF
#!/usr/bin/env bash
# ctl kill HOST:PORT: kill -9 the compat cluster's server at that client address.
set -eu
[ "\${1:-}" = kill ] && [ -n "\${2:-}" ] || { echo "usage: ctl kill HOST:PORT" >&2; exit 2; }
f="$dir/pid/\$2"
[ -f "\$f" ] || { echo "ctl: no server at \$2" >&2; exit 2; }
kill -9 "\$(cat "\$f")"
echo "(killed the server at \$2)"
EOF
chmod +x "$dir/ctl"

for i in 1 2 3; do start_node "$i"; done
wait_ready
version=$(timeout 3 bash -c "exec 3<>/dev/tcp/$(host 1)/2181 && printf srvr >&3 && cat <&3" 2>/dev/null | sed -n 's/^Zookeeper version: *//p')
echo "compat: $target ($version), 3 servers on $servers"

classes=$dir/classes
javac -nowarn -cp "$zkjar:$curator" -d "$classes" test/compat/javaclient/*.java test/compat/lockdelay/*.java
javac -nowarn -cp "$zkjar" -d "$dir/probe" test/compat/java/WatchProbe.java
java_cmd=(java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$zkjar:$curator:/usr/share/java/slf4j-simple.jar:$classes")

export COMPAT_SERVERS=$servers COMPAT_CTL=$dir/ctl COMPAT_TARGET=$target COMPAT_TMP=$dir/tmp PYTHON=$python COMPAT_LOCK_DELAY=$lock_delay
summary=()
run_suite() {
	local name=$1 t0=$SECONDS rc=0 verdict
	echo
	echo "== $name"
	heal
	wipe
	case $name in
	zkcli) set -- bash test/compat/zkcli/zkcli.sh ;;
	java) set -- "${java_cmd[@]}" ClientSuite ;;
	curator) set -- "${java_cmd[@]}" CuratorSuite ;;
	kazoo) set -- "$python" test/compat/kazoo/kazoo_suite.py ;;
	fourletter) set -- "$python" test/compat/fourletter/fourletter_suite.py ;;
	sasl) set -- "${java_cmd[0]}" -Djava.security.auth.login.config="$dir/client-jaas.conf" "${java_cmd[@]:1}" SaslSuite ;;
	kazoo-reconnect) set -- "$python" test/compat/kazoo/kazoo_reconnect.py ;;
	java-reconnect) set -- "${java_cmd[@]}" ReconnectSuite ;;
	curator-reconnect) set -- "${java_cmd[@]}" CuratorReconnect ;;
	c-reconnect) set -- bash test/compat/c/c_reconnect.sh ;;
	node-reconnect) set -- bash test/compat/node/node_reconnect.sh ;;
	kazoo-lockdelay) set -- "$python" test/compat/lockdelay/kazoo_lockdelay.py ;;
	curator-lockdelay) set -- "${java_cmd[@]}" CuratorLockDelay ;;
	probe) set -- bash test/compat/java/compare.sh -s "$(addr 1)" -t "$target" -k "$dir/probe" ${update:+-u} ${fixes:+-c "$fixes"} ;;
	esac
	# In the background, so that a signal to this script runs its cleanup
	# at once; its output is shown as it comes.
	: >"$dir/$name.out"
	timeout -k 10 "$suite_timeout" "$@" >"$dir/$name.out" 2>"$dir/$name.log" &
	suite_pid=$!
	tail -n +1 -f --pid="$suite_pid" "$dir/$name.out" &
	local tailer=$!
	wait "$suite_pid" || rc=$?
	suite_pid=
	wait "$tailer" 2>/dev/null || true
	local checks
	checks="$(grep -c '^ok ' "$dir/$name.out" || true) ok, $(grep -c '^FAIL ' "$dir/$name.out" || true) failed"
	if [ $rc = 0 ]; then
		verdict=PASS
	else
		verdict=FAIL
		failed_suites=$((failed_suites + 1))
		[ $rc != 124 ] || echo "compat: $name did not finish within ${suite_timeout}s"
		if [ -s "$dir/$name.log" ]; then
			echo "compat: $name's stderr (the end of $dir/$name.log):"
			{ grep -v '^\s*at \|INFO' "$dir/$name.log" || true; } | tail -n 15 | sed 's/^/    /'
		fi
	fi
	summary+=("$(printf '%-17s %s  %-22s %4ds' "$name" "$verdict" "($checks)" $((SECONDS - t0)))")
}

for s in $suites; do run_suite "$s"; done

echo
echo "compat summary ($target, $servers):"
printf '  %s\n' "${summary[@]}"
if [ "$failed_suites" -gt 0 ]; then
	echo "compat: $failed_suites suite(s) failed"
	exit 1
fi
cleanup ok
