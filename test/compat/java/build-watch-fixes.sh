#!/usr/bin/env bash
# build-watch-fixes.sh builds ZooKeeper 3.8.0 (Debian's) with upstream's
# watch fixes of 3.9, as a directory of classes to put in front of
# zookeeper.jar (probe.sh -c DIR), so that the probe can observe the
# semantics 3.9 has without a 3.9 server:
#
#   ZOOKEEPER-4466 different watch modes on one path (WatchStats)
#   ZOOKEEPER-4471 removeWatches(Data/Children) keeps persistent watches
#   ZOOKEEPER-4472 WatcherType Persistent (4) and PersistentRecursive (5)
#   ZOOKEEPER-4475 no NodeChildrenChanged for recursive watchers (client)
#
#   test/compat/java/build-watch-fixes.sh ZOOKEEPER_GIT_DIR OUT_DIR
#
# ZOOKEEPER_GIT_DIR is a clone (bare or not) of apache/zookeeper that has
# the tag release-3.8.0-1 and commit e8b2fbeb1 (ZOOKEEPER-4472). The server's
# watch package, Watcher, ZKWatchManager and RemoveWatchesCommand are taken
# as of e8b2fbeb1; DataTree is 3.8.0's with the DataTree hunks of the three
# server-side fixes applied.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 ZOOKEEPER_GIT_DIR OUT_DIR" >&2; exit 2; }
git=$1
out=$2
fixed=e8b2fbeb1
jar=/usr/share/java/zookeeper.jar
S=zookeeper-server/src/main/java/org/apache/zookeeper

src=$(mktemp -d /tmp/zkfixes.XXXXXX)
trap 'rm -rf "$src"' EXIT
mkdir -p "$out"
cd "$src"
git -C "$git" archive release-3.8.0-1 $S | tar -x
for c in a64dbf5b0 b8d458f5c e8b2fbeb1; do
	git -C "$git" show "$c" -- $S/server/DataTree.java | patch -s -p1 --fuzz=3
done
rm -f $S/server/watch/*.java
for f in $(git -C "$git" ls-tree --name-only $fixed $S/server/watch/); do
	git -C "$git" show "$fixed:$f" >"$f"
done
for f in Watcher.java ZKWatchManager.java cli/RemoveWatchesCommand.java; do
	git -C "$git" show "$fixed:$S/$f" >"$S/$f"
done
javac -nowarn -cp $jar -d "$out" $S/server/DataTree.java $S/server/watch/*.java \
	$S/Watcher.java $S/ZKWatchManager.java $S/cli/RemoveWatchesCommand.java
echo "built $(find "$out" -name '*.class' | wc -l) classes in $out"
