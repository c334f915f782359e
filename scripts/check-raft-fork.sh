#!/usr/bin/env bash
# rpc/third_party/raft is hashicorp/raft at the version go.mod requires plus one
# patch, rpc/third_party/raft/coordd.patch (see rpc/third_party/raft/FORK.md). This check
# rebuilds it from the upstream module and the patch, and fails if the
# committed copy differs in any way.
set -euo pipefail
root=$(pwd)
fork=rpc/third_party/raft
ver=$(awk '$1 == "github.com/hashicorp/raft" && $2 ~ /^v/ { print $2; exit }' go.mod)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Outside the module, so that go.sum is left alone.
dir=$(cd "$tmp" && go mod download -json "github.com/hashicorp/raft@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "raftfork: cannot download github.com/hashicorp/raft@$ver"; exit 1; }
mkdir "$tmp/want" "$tmp/want/bench"
cp "$dir"/LICENSE "$dir"/go.mod "$dir"/go.sum "$tmp/want/"
for f in "$dir"/*.go; do
  case $f in *_test.go) ;; *) cp "$f" "$tmp/want/" ;; esac
done
cp "$dir"/bench/bench.go "$tmp/want/bench/"
chmod -R u+w "$tmp/want"
(cd "$tmp/want" && git apply "$root/$fork/coordd.patch")
if ! diff -r -x FORK.md -x coordd.patch "$tmp/want" "$fork"; then
  echo "raftfork: $fork is not hashicorp/raft $ver plus $fork/coordd.patch"
  exit 1
fi
echo "raftfork: hashicorp/raft $ver + coordd.patch"
