#!/usr/bin/env bash
# The node-reconnect suite of make compat: node-zookeeper-client (npm, the
# version package-lock.json pins) through reconnects of its session
# (reconnect.js says what it checks). It installs the client with `npm ci`
# into a scratch directory (never into the checkout), from npm's cache when
# it has it and from the registry otherwise, and runs reconnect.js with
# NODE_PATH pointing there.
#
#   COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 COMPAT_CTL=... test/compat/node/node_reconnect.sh [NAME...]
#
# Environment: COMPAT_SERVERS (the cluster's client addresses), COMPAT_CTL
# (the harness's "ctl kill HOST:PORT"), COMPAT_TMP (a scratch directory;
# default a temporary one, removed on exit), NODE (default node), NPM
# (default npm). Offline, the install needs the packages package-lock.json
# names in npm's cache (put there while online by a run of this suite, or by
# `npm cache add NAME@VERSION` for each); without them the suite fails and
# says so. It prints "ok NAME"
# or "FAIL NAME: why" per check and exits 1 if any failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

: "${COMPAT_SERVERS:?COMPAT_SERVERS is the list of client addresses}"
node=${NODE:-node}
npm=${NPM:-npm}
own_tmp=
tmp=${COMPAT_TMP:-}
if [ -z "$tmp" ]; then
	tmp=$(mktemp -d /tmp/node-reconnect.XXXXXX)
	own_tmp=$tmp
fi
trap '[ -z "$own_tmp" ] || rm -rf "$own_tmp"' EXIT

if ! command -v "$node" >/dev/null || ! command -v "$npm" >/dev/null; then
	echo "FAIL install: needs node and npm (Debian: apt-get install -y nodejs npm)"
	exit 1
fi
mod=$tmp/node-client
mkdir -p "$mod"
cp "$here/package.json" "$here/package-lock.json" "$mod/"
want=$(sed -n 's/.*"node-zookeeper-client": "\(.*\)".*/\1/p' "$here/package.json")
# From npm's cache alone first (no network at all), then from the registry;
# bounded, so an unreachable registry fails the suite in minutes, not hours.
if ! (cd "$mod" && { timeout 180 "$npm" ci --offline --no-audit --no-fund >npm.log 2>&1 ||
	timeout 180 "$npm" ci --prefer-offline --no-audit --no-fund --fetch-retries=1 >>npm.log 2>&1; }); then
	echo "FAIL install: npm ci could not install node-zookeeper-client $want into $mod: neither npm's cache nor the registry has it and its dependencies (npm's log: $mod/npm.log; online, a run of this suite fills the cache)"
	sed 's/^/npm: /' "$mod/npm.log" | tail -n 20 >&2
	exit 1
fi
COMPAT_TMP=$tmp NODE_PATH=$mod/node_modules "$node" "$here/reconnect.js" "$@"
