#!/usr/bin/env bash
# coordd carries two forks, each an upstream module at the version go.mod
# requires plus one patch, coordd.patch, kept beside it (see FORK.md in each):
#   rpc/third_party/raft         github.com/hashicorp/raft
#   rpc/third_party/raft-boltdb  github.com/hashicorp/raft-boltdb/v2
# This check rebuilds each from the upstream module and its patch, and fails
# if the committed copy differs in any way.
set -euo pipefail
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check MODULE DIR [EXTRA...]: DIR must be MODULE's LICENSE, go.mod, go.sum,
# top-level non-test .go files and the EXTRA files, plus DIR/coordd.patch.
check() {
  local mod=$1 fork=$2
  shift 2
  local ver dir want
  ver=$(awk -v m="$mod" '$1 == m && $2 ~ /^v/ { print $2; exit }' go.mod)
  [ -n "$ver" ] || { echo "raftfork: go.mod requires no version of $mod"; exit 1; }
  # Outside the module, so that go.sum is left alone.
  dir=$(cd "$tmp" && go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "raftfork: cannot download $mod@$ver"; exit 1; }
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
