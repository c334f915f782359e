#!/usr/bin/env bash
# Builds the release (make release): for each OS/ARCH argument, coordd and
# coordctl built static (CGO_ENABLED=0) with -trimpath and the version
# stamped ($LDFLAGS, -X main.version=$VERSION), packed with README.md and
# the docs/ pages it links to (and, for Linux, deploy/systemd) as
# $DIST/coordd-$VERSION-$OS-$ARCH.tar.gz; then $DIST/SHA256SUMS over the
# archives. $DIST is emptied first.
#
# The archives are byte-for-byte reproducible from the same commit and Go
# version: sorted entries, owner 0, and every mtime set to
# $SOURCE_DATE_EPOCH (default: the commit's time).
set -euo pipefail
GO=${GO:-go}
DIST=${DIST:-dist}
: "${VERSION:?release: VERSION is required}"
LDFLAGS=${LDFLAGS:-"-X main.version=$VERSION"}
if [[ ! $VERSION =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]]; then
  echo "release: VERSION $VERSION: want letters, digits and . _ + - only (it names files)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  echo "usage: release.sh OS/ARCH..." >&2
  exit 2
fi
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

rm -rf "$DIST"
mkdir -p "$DIST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in "$@"; do
  os=${p%%/*} arch=${p#*/}
  if [ -z "$os" ] || [ -z "$arch" ] || [ "$os/$arch" != "$p" ]; then
    echo "release: bad platform $p: want OS/ARCH, e.g. linux/amd64" >&2
    exit 2
  fi
  name=coordd-$VERSION-$os-$arch
  dir=$tmp/$name
  mkdir -p "$dir"
  for cmd in coordd coordctl; do
    echo "release: $name/$cmd"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$dir/$cmd" "./cmd/$cmd"
  done
  cp README.md "$dir/"
  cp -R docs "$dir/docs"
  if [ "$os" = linux ]; then
    mkdir -p "$dir/systemd"
    cp deploy/systemd/* "$dir/systemd/"
  fi
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
    -C "$tmp" -cf - "$name" | gzip -9n > "$DIST/$name.tar.gz"
done
(cd "$DIST" && sha256sum -- *.tar.gz > SHA256SUMS)
echo "release: $DIST/"
ls -l "$DIST"
