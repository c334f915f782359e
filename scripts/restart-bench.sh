#!/usr/bin/env bash
# make restart-bench: how long a coordd server killed with SIGKILL and
# started again takes, on busy cores, to be caught up, to show as reachable
# in coordctl status (asked of another server) and to serve a session.
#
# The load, named and bounded: RESTART_BURNERS CPU burners (default: one
# per core, each a busy loop at the servers' priority, as a database sharing
# the machine would be) and a write load (coordctl bench write with
# RESTART_WRITERS sessions, default 16, spread over the servers) run for the
# whole benchmark. Then, RESTART_ROUNDS times (default 5): a follower
# (RESTART_KILL=leader: the leader) is killed with SIGKILL and stays down
# RESTART_DOWN seconds (default 30), while a health check asks the other
# servers for coordctl status every half second; it is started again, and
# the script polls every 100 ms, for at most RESTART_WAIT seconds (default
# 120), until
#
#   caught     the server's own status answers with its applied zxid at
#              least the leader's commit index when it was started again
#              (Raft has replicated to it what it missed);
#   reachable  coordctl status asked of another server lists it with a role
#              (not "unreachable"), and exits 0;
#   serving    a session opened on that server alone (coordctl get /) works.
#
# Each is printed in seconds since the restart, then the lag of reachable and
# serving behind caught; the last lines give the median and the maximum.
# Exit status 1 if a round timed out.
#
# The cluster: 3 servers on RESTART_NET.11-13 (default 127.0.205), clients
# on port 2181, peers on 2888, data and logs in a temporary directory, kept
# (and its path printed) when a round fails. Every process started here is
# killed by its PID on exit, interrupted or not.
#
# Environment: RESTART_ROUNDS, RESTART_DOWN, RESTART_WAIT, RESTART_KILL,
# RESTART_BURNERS, RESTART_WRITERS, RESTART_NET, RESTART_LOG_LEVEL (the
# servers', default warn), RESTART_KEEP (1: keep the directory), BIN
# (default bin), GO (default go), LDFLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${RESTART_ROUNDS:-5}
down=${RESTART_DOWN:-30}
wait_max=${RESTART_WAIT:-120}
kill_role=${RESTART_KILL:-follower}
burners=${RESTART_BURNERS:-$(getconf _NPROCESSORS_ONLN)}
writers=${RESTART_WRITERS:-16}
net=${RESTART_NET:-127.0.205}
log_level=${RESTART_LOG_LEVEL:-warn}
bin=${BIN:-bin}
go=${GO:-go}
case $kill_role in follower | leader) ;; *) echo "restart-bench: RESTART_KILL is follower or leader, not $kill_role" >&2; exit 2 ;; esac
command -v jq >/dev/null || { echo "restart-bench: needs jq (apt-get install jq)" >&2; exit 2; }

"$go" build -ldflags "${LDFLAGS:-}" -o "$bin/coordd" ./cmd/coordd
"$go" build -ldflags "${LDFLAGS:-}" -o "$bin/coordctl" ./cmd/coordctl

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordd-restart.XXXXXX")
declare -a pids=() load=()
ok=
cleanup() {
	trap - INT TERM HUP EXIT
	local p
	# The load runs under timeout, which passes a TERM on to what it runs.
	for p in "${load[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${load[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$ok" ] && [ -z "${RESTART_KEEP:-}" ]; then rm -rf "$dir"; else echo "restart-bench: logs kept in $dir"; fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

host() { echo "$net.$((10 + $1))"; }
addr() { echo "$(host "$1"):2181"; }
peers="1=$(host 1):2888,2=$(host 2):2888,3=$(host 3):2888"
servers="$(addr 1),$(addr 2),$(addr 3)"
. scripts/procs.sh
procs=$(server_procs 3)

start_node() {
	local i=$1
	GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/node$i" \
		--client-addr "$(addr "$i")" --peer-addr "$(host "$i"):2888" --peers "$peers" \
		--log-level "$log_level" >>"$dir/node$i.log" 2>&1 &
	pids[i]=$!
}

ctl() { "$bin/coordctl" --timeout 2s "$@"; }
# status SERVERS: coordctl status -o json asked of SERVERS, or nothing (it
# exits 3, its JSON printed all the same, while a member is unreachable).
status() { ctl --servers "$1" -o json status 2>/dev/null || true; }
# now: seconds since the epoch, to the millisecond.
now() { date +%s.%3N; }
since() { echo "$(now) - $1" | bc; }

for i in 1 2 3; do start_node "$i"; done
deadline=$((SECONDS + 60))
until ctl --servers "$servers" status >/dev/null 2>&1; do
	[ $SECONDS -lt $deadline ] || { echo "restart-bench: the cluster did not form in 60s" >&2; exit 1; }
	sleep 0.2
done

# The load, for at most the benchmark's longest possible run.
budget=$((rounds * (down + wait_max + 30) + 60))
for _ in $(seq "$burners"); do
	timeout "$budget" sh -c 'while :; do :; done' &
	load+=($!)
done
timeout "$budget" "$bin/coordctl" --servers "$servers" bench "write:$writers" --duration "${budget}s" --path /restart-bench >"$dir/bench.log" 2>&1 &
load+=($!)
echo "restart-bench: 3 servers on $servers; load: $burners CPU burners, coordctl bench write:$writers; $rounds rounds, $kill_role killed, down ${down}s"
sleep 3

# member ROLE: the id of a member with that role (leader, or a follower).
member() {
	status "$servers" | jq -r --arg r "$1" '[.members[]? | select(.role == $r) | .id] | first // empty' 2>/dev/null || true
}

printf '%-6s %-6s %9s %10s %9s %14s %12s\n' round killed caught reachable serving reach-caught serve-caught
results=()
failed=0
for round in $(seq "$rounds"); do
	victim=
	for _ in $(seq 50); do
		victim=$(member "$kill_role")
		[ -z "$victim" ] || break
		sleep 0.2
	done
	[ -n "$victim" ] || { echo "restart-bench: no $kill_role to kill" >&2; exit 1; }
	others=
	for i in 1 2 3; do [ "$i" = "$victim" ] || others+="${others:+,}$(addr "$i")"; done
	kill -9 "${pids[victim]}"
	wait "${pids[victim]}" 2>/dev/null || true
	# While it is down, the health check goes on asking (as whoever runs
	# coordctl status to watch the outage does).
	t=$(now)
	while [ "$(echo "$(since "$t") < $down" | bc)" = 1 ]; do
		ctl --servers "$others" status >/dev/null 2>&1 || true
		sleep 0.5
	done
	# The leader's commit index when the server comes back: what it missed.
	target=$(status "$others" | jq -r '[.members[]? | select(.role == "leader") | .applied] | first // 0' 2>/dev/null || true)
	t0=$(now)
	start_node "$victim"
	caught= reach= serve=
	while [ -z "$caught" ] || [ -z "$reach" ] || [ -z "$serve" ]; do
		if [ -z "$caught" ]; then
			a=$(status "$(addr "$victim")" | jq -r --arg id "$victim" '[.members[]? | select(.id == $id) | .applied] | first // empty' 2>/dev/null || true)
			if [ -n "$a" ] && [ "$a" -ge "${target:-0}" ]; then caught=$(since "$t0"); fi
		fi
		if [ -z "$reach" ] && ctl --servers "$others" status >/dev/null 2>&1; then
			reach=$(since "$t0")
		fi
		if [ -z "$serve" ] && ctl --timeout 1s --servers "$(addr "$victim")" get / >/dev/null 2>&1; then
			serve=$(since "$t0")
		fi
		if [ "$(echo "$(since "$t0") > $wait_max" | bc)" = 1 ]; then
			echo "restart-bench: round $round: server $victim not caught up, reachable and serving within ${wait_max}s (caught ${caught:--}, reachable ${reach:--}, serving ${serve:--})" >&2
			failed=1
			break
		fi
		sleep 0.1
	done
	[ "$failed" = 0 ] || break
	rc=$(echo "$reach - $caught" | bc)
	sc=$(echo "$serve - $caught" | bc)
	printf '%-6s %-6s %9.2f %10.2f %9.2f %14.2f %12.2f\n' "$round" "$victim" "$caught" "$reach" "$serve" "$rc" "$sc"
	results+=("$caught $reach $serve $rc $sc")
done
[ "$failed" = 0 ] || exit 1

# col N: the Nth column of the results, sorted.
col() { printf '%s\n' "${results[@]}" | awk -v c="$1" '{print $c}' | sort -g; }
median() { col "$1" | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
maxof() { col "$1" | tail -n 1; }
printf '%-13s %9.2f %10.2f %9.2f %14.2f %12.2f\n' median "$(median 1)" "$(median 2)" "$(median 3)" "$(median 4)" "$(median 5)"
printf '%-13s %9.2f %10.2f %9.2f %14.2f %12.2f\n' max "$(maxof 1)" "$(maxof 2)" "$(maxof 3)" "$(maxof 4)" "$(maxof 5)"
ok=1
