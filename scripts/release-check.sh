#!/usr/bin/env bash
# Checks what make release built (make release-check), for the OS/ARCH
# arguments it was given:
#  - $DIST/SHA256SUMS lists exactly the expected archives and verifies;
#  - each archive holds coordd, coordctl, README.md and docs/ (and, for
#    Linux, the systemd files) under coordd-$VERSION-$OS-$ARCH/;
#  - every binary was built for its OS/ARCH with CGO_ENABLED=0 and -trimpath
#    (go version -m), holds $VERSION in main.version (scripts/binversion:
#    with -trimpath, go version -m does not show -ldflags), and `file` sees
#    a statically linked executable for Linux;
#  - on a linux/amd64 host, the linux/amd64 binaries print $VERSION, and
#    that coordd serves a write and a read from coordctl on 127.26.0.1 and
#    stops cleanly on SIGTERM (the time it took is printed).
set -euo pipefail
GO=${GO:-go}
DIST=${DIST:-dist}
: "${VERSION:?release-check: VERSION is required}"
fail() { echo "release-check: $*" >&2; exit 1; }

[ -f "$DIST/SHA256SUMS" ] || fail "$DIST/SHA256SUMS is missing (make release)"
want=""
for p in "$@"; do want+="coordd-$VERSION-${p%%/*}-${p#*/}.tar.gz"$'\n'; done
got=$(sed -E 's/^[0-9a-f]{64} [ *]//' "$DIST/SHA256SUMS" | sort)
[ "$got" = "$(printf %s "$want" | sort)" ] || fail "SHA256SUMS lists"$'\n'"$got"$'\n'"want"$'\n'"$want"
(cd "$DIST" && sha256sum --check --strict --quiet SHA256SUMS) || fail "checksums do not verify"
echo "release-check: SHA256SUMS verifies ($# archives)"

tmp=$(mktemp -d)
pid=""
"$GO" build -o "$tmp/binversion" ./scripts/binversion
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

for p in "$@"; do
  os=${p%%/*} arch=${p#*/}
  name=coordd-$VERSION-$os-$arch
  files="$name/README.md"$'\n'"$name/coordctl"$'\n'"$name/coordd"
  while IFS= read -r f; do files+=$'\n'"$name/$f"; done < <(find docs -type f)
  if [ "$os" = linux ]; then
    for f in deploy/systemd/*; do files+=$'\n'"$name/systemd/${f##*/}"; done
  fi
  listed=$(tar -tzf "$DIST/$name.tar.gz" | grep -v '/$' | sort)
  [ "$listed" = "$(sort <<<"$files")" ] || fail "$name.tar.gz holds"$'\n'"$listed"$'\n'"want"$'\n'"$files"
  tar -xzf "$DIST/$name.tar.gz" -C "$tmp"
  for cmd in coordd coordctl; do
    bin=$tmp/$name/$cmd
    info=$("$GO" version -m "$bin")
    for setting in "GOOS=$os" "GOARCH=$arch" "CGO_ENABLED=0" "-trimpath=true"; do
      grep -qxF -- $'\tbuild\t'"$setting" <<<"$info" || fail "$name/$cmd: go version -m shows no build setting $setting:"$'\n'"$info"
    done
    v=$("$tmp/binversion" "$bin")
    [ "${v#"$bin "}" = "$VERSION" ] || fail "$name/$cmd: main.version is \"${v#"$bin "}\", want \"$VERSION\""
    desc=$(file -b "$bin")
    case $os/$arch in
      linux/amd64) [[ $desc == *"ELF 64-bit"*"x86-64"*"statically linked"* ]] ;;
      linux/arm64) [[ $desc == *"ELF 64-bit"*"ARM aarch64"*"statically linked"* ]] ;;
      darwin/arm64) [[ $desc == *"Mach-O 64-bit"*"arm64"* ]] ;;
      *) true ;;
    esac || fail "$name/$cmd: file says: $desc"
    echo "release-check: $name/$cmd: $VERSION, $os/$arch, CGO off, -trimpath; $(cut -d, -f1-2 <<<"$desc")$(grep -o ', statically linked' <<<"$desc" || true)"
  done
done

if [ "$(uname -s)/$(uname -m)" != Linux/x86_64 ] || [[ " $* " != *" linux/amd64 "* ]]; then
  echo "release-check: not running the binaries (this host is not linux/amd64, or it was not built)"
  exit 0
fi
bin=$tmp/coordd-$VERSION-linux-amd64
out=$("$bin/coordd" --version)
[ "$out" = "coordd $VERSION" ] || fail "coordd --version printed \"$out\", want \"coordd $VERSION\""
out=$("$bin/coordctl" version)
[ "$out" = "coordctl $VERSION" ] || fail "coordctl version printed \"$out\", want \"coordctl $VERSION\""
echo "release-check: coordd --version and coordctl version print $VERSION"

# A single server on an address of its own; every wait is bounded.
addr=127.26.0.1
"$bin/coordd" --id 1 --data-dir "$tmp/data" --client-addr "$addr:2181" --peer-addr "$addr:2888" \
  2>"$tmp/coordd.log" &
pid=$!
export COORD_SERVERS=$addr:2181
up=""
for _ in $(seq 1 100); do
  if "$bin/coordctl" --timeout 2s create /release-check ok >/dev/null 2>&1; then up=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
[ -n "$up" ] || fail "coordd did not take a write within 20 s:"$'\n'"$(cat "$tmp/coordd.log")"
out=$("$bin/coordctl" --timeout 5s get /release-check)
[ "$out" = ok ] || fail "coordctl get /release-check printed \"$out\", want \"ok\""
start=$(date +%s%N)
kill -TERM "$pid"
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "coordd still running 30 s after SIGTERM"
code=0
wait "$pid" || code=$?
pid=""
[ "$code" = 0 ] || fail "coordd exited with status $code after SIGTERM:"$'\n'"$(cat "$tmp/coordd.log")"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "release-check: linux/amd64 coordd served a write and a read, and stopped cleanly ${ms} ms after SIGTERM"
