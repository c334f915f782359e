#!/usr/bin/env bash
# The c-reconnect suite of make compat: ZooKeeper's C client (Debian's
# libzookeeper-mt, 3.8) through reconnects of its session. It builds
# reconnect.c with gcc against the installed library, then runs a session
# resumed by a new process after the one that opened it exited without
# closing it, and its checks (a dropped connection, 20 in a row, the
# session's server killed); reconnect.c says what each checks.
#
#   COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 COMPAT_CTL=... test/compat/c/c_reconnect.sh
#
# Environment: COMPAT_SERVERS (the cluster's client addresses), COMPAT_CTL
# (the harness's "ctl kill HOST:PORT"), COMPAT_TMP (a scratch directory;
# default a temporary one, removed on exit), CC (default gcc). Everything it
# creates is under /c. It prints "ok NAME" or "FAIL NAME: why" per check and
# exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")"

servers=${COMPAT_SERVERS:?COMPAT_SERVERS is the list of client addresses}
cc=${CC:-gcc}
own_tmp=
tmp=${COMPAT_TMP:-}
if [ -z "$tmp" ]; then
	tmp=$(mktemp -d /tmp/c-reconnect.XXXXXX)
	own_tmp=$tmp
fi
mkdir -p "$tmp"
trap '[ -z "$own_tmp" ] || rm -rf "$own_tmp"' EXIT

if [ ! -e /usr/include/zookeeper/zookeeper.h ] || ! command -v "$cc" >/dev/null; then
	echo "FAIL build: needs $cc and Debian's libzookeeper-mt-dev (apt-get install -y gcc libzookeeper-mt-dev)"
	exit 1
fi
prog=$tmp/c-reconnect
if ! "$cc" -std=c11 -D_GNU_SOURCE -DTHREADED -O1 -Wall -Wextra -pthread -o "$prog" reconnect.c -lzookeeper_mt >&2; then
	echo "FAIL build: $cc could not build reconnect.c (its errors are on stderr)"
	exit 1
fi

rc=0
# The resume: the first process exits without closing its session. Before
# the checks, whose last kills a server (the harness restarts it after the
# suite).
if "$prog" "$servers" crash "$tmp/c-session"; then
	"$prog" "$servers" resume "$tmp/c-session" || rc=1
else
	echo "FAIL a new process resuming the session: the first process failed (its error is on stderr)"
	rc=1
fi
"$prog" "$servers" checks || rc=1
exit $rc
