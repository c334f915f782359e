#!/usr/bin/env bash
# Enforces the package dependency direction of DESIGN.md: each package may
# import only the listed packages of this module.
set -euo pipefail
mod=$(go list -m)
fail=0

# allowed PKG "space separated allowed imports (module-relative)"
allowed() {
  local pkg=$1 allow=$2 imp rel ok a
  for imp in $(go list -f '{{join .Imports " "}}' "./$pkg"); do
    case $imp in "$mod"/*) ;; *) continue ;; esac
    rel=${imp#"$mod"/}
    ok=0
    for a in $allow; do [ "$rel" = "$a" ] && ok=1; done
    if [ $ok = 0 ]; then echo "deps: $pkg must not import $rel"; fail=1; fi
  done
}

allowed tree ""
allowed session ""
allowed watch "tree"
# ZooKeeper's authentication schemes and ACL checks: pure functions of the
# tree's ACLs and the session registry's identities.
allowed fsm/auth "tree session"
allowed fsm "tree session fsm/auth fsm/cmdpb"
# The session engine knows no wire and no Raft; each front-end is a codec
# in front of it; rpc wires them to Raft.
allowed rpc/engine "fsm fsm/auth fsm/cmdpb tree session watch"
allowed rpc/grpcapi "rpc/engine rpc/apipb tree"
allowed rpc/zk/jute ""
# SASL's mechanism and users file, and a client for tests: standard library
# only, like the codec.
allowed rpc/zk/sasl ""
allowed rpc/zk/sasl/sasltest ""
allowed rpc/zk "rpc/engine rpc/zk/jute rpc/zk/sasl tree"
allowed rpc/tlsutil ""
allowed rpc/backup "rpc/apipb"
# The metrics registry knows the engine's operations (it is the engine's
# Meter); the engine knows only that interface, not Prometheus.
allowed rpc/metrics "rpc/engine"
allowed rpc "fsm fsm/auth fsm/cmdpb tree session watch rpc/apipb rpc/backup rpc/peerpb rpc/engine rpc/grpcapi rpc/zk rpc/zk/jute rpc/zk/sasl rpc/tlsutil rpc/metrics"
allowed client "rpc/apipb"
allowed lockrecipe "client"
allowed cmd/coordd "rpc cmd/coordd/console"
# The web console reads through the public API, as a client does.
allowed cmd/coordd/console "client lockrecipe rpc/apipb"
# The backup file's format is read and written by coordctl too.
allowed cmd/coordctl "client lockrecipe rpc/apipb rpc/backup rpc/tlsutil cmd/coordctl/internal/bench"
# coordctl bench's engine drives the cluster as a client does (and through
# go-zookeeper, ZooKeeper's protocol).
allowed cmd/coordctl/internal/bench "client lockrecipe rpc/apipb"

# The engine and the front-ends count through engine.Meter: no exporter
# library below package rpc.
for pkg in rpc/engine rpc/grpcapi rpc/zk; do
  if go list -deps "./$pkg" | grep -q '^github.com/prometheus/'; then
    echo "deps: $pkg reaches github.com/prometheus (count through engine.Meter)"; fail=1
  fi
done

# The client, and the console that uses it, must not reach the server even
# transitively.
for pkg in ./client/... ./cmd/coordd/console ./cmd/coordctl/internal/bench; do
  if go list -deps $pkg | grep -E "^$mod/(fsm|tree|session|watch|rpc)(/|$)" | grep -vE 'pb$'; then
    echo "deps: $pkg reaches server packages"; fail=1
  fi
done
exit $fail
