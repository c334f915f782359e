#!/usr/bin/env bash
# coordd carries three forks, each an upstream module at the version go.mod
# requires plus one patch, coordd.patch, kept beside it (see FORK.md in each):
#   rpc/third_party/raft         github.com/hashicorp/raft
#   rpc/third_party/raft-boltdb  github.com/hashicorp/raft-boltdb/v2
#   rpc/third_party/raft-wal     github.com/hashicorp/raft-wal (the packages
#                                the WAL is built of; not its tools)
# This check rebuilds each from the upstream module and its patch, and fails
# if the committed copy differs in any way.
set -euo pipefail
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# missing MODULE VERSION FORK OUTPUT: the upstream module could not be had;
# say which, why, and how to get it, and fail.
missing() {
  local why
  why=$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$4" | sed 's/\\"/"/g')
  [ -n "$why" ] || why=$4
  cat <<MSG
raftfork: cannot get $1 $2, the upstream module that $3 is checked against:
raftfork:   $why
raftfork: it comes from the module cache (GOMODCACHE=$(go env GOMODCACHE)), else from the module proxy (GOPROXY=$(go env GOPROXY)).
raftfork: Online, fetch it once with: go mod download $1@$2
raftfork: The rest of make test runs without it: make fmt vet deps docs unit
MSG
  exit 1
}

# check MODULE DIR [EXTRA...]: DIR must be MODULE's LICENSE, go.mod, go.sum,
# top-level non-test .go files and the EXTRA files, plus DIR/coordd.patch.
check() {
  local mod=$1 fork=$2
  shift 2
  local ver dir want
  ver=$(awk -v m="$mod" '$1 == m && $2 ~ /^v/ { print $2; exit }' go.mod)
  [ -n "$ver" ] || { echo "raftfork: go.mod requires no version of $mod"; exit 1; }
  # Outside the module, so that go.sum is left alone. On failure go mod
  # download -json says why in its "Error" field (on stdout).
  local out
  if ! out=$(cd "$tmp" && go mod download -json "$mod@$ver" 2>&1); then
    missing "$mod" "$ver" "$fork" "$out"
  fi
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$out")
  [ -n "$dir" ] || missing "$mod" "$ver" "$fork" "$out"
  want=$tmp/$(basename "$fork")
  mkdir -p "$want"
  cp "$dir"/LICENSE "$dir"/go.mod "$dir"/go.sum "$want/"
  for f in "$dir"/*.go; do
    case $f in *_test.go) ;; *) cp "$f" "$want/" ;; esac
  done
  for f in "$@"; do
    mkdir -p "$want/$(dirname "$f")"
    cp "$dir/$f" "$want/$f"
  done
  chmod -R u+w "$want"
  (cd "$want" && git apply "$root/$fork/coordd.patch")
  if ! diff -r -x FORK.md -x coordd.patch "$want" "$fork"; then
    echo "raftfork: $fork is not $mod $ver plus $fork/coordd.patch"
    exit 1
  fi
  echo "raftfork: $mod $ver + coordd.patch"
}

check github.com/hashicorp/raft rpc/third_party/raft bench/bench.go
check github.com/hashicorp/raft-boltdb/v2 rpc/third_party/raft-boltdb
check github.com/hashicorp/raft-wal rpc/third_party/raft-wal \
  fs/file.go fs/fs.go metadb/metadb.go \
  metrics/atomic_collector.go metrics/gometrics_collector.go metrics/metrics.go \
  segment/crc.go segment/filer.go segment/format.go segment/reader.go segment/writer.go \
  types/buffer.go types/meta.go types/segment.go types/types.go types/vfs.go
