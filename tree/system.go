package tree

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ZooKeeper's system nodes. Every ZooKeeper server's tree has them from the
// start, with all-zero stats and empty data: /zookeeper and
// /zookeeper/quota (world:anyone:cdrwa: clients create below them, and
// quotas live below /zookeeper/quota) and /zookeeper/config (the ensemble's
// dynamic configuration, world:anyone:r with aversion -1, so that only the
// super user writes it). None of the three may be deleted.
const (
	SystemRoot = "/zookeeper"
	QuotaRoot  = "/zookeeper/quota"
	ConfigPath = "/zookeeper/config"
)

// The names of a quota's nodes: QuotaRoot + path + "/" + QuotaLimitsNode
// holds the limits a client set (zkCli's setquota), QuotaRoot + path + "/" +
// QuotaStatsNode the tree's count of the nodes and bytes below path,
// which the tree keeps up to date.
const (
	QuotaLimitsNode = "zookeeper_limits"
	QuotaStatsNode  = "zookeeper_stats"
)

// configACL is ZooKeeper's READ_ACL_UNSAFE, the ACL of /zookeeper/config,
// which ZooKeeper sets with version -1 (so its aversion is -1).
var configACL = []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}}

// isSystemNode reports whether path is one of the nodes that may not be
// deleted: the root and ZooKeeper's system nodes (its isSpecialPath).
func isSystemNode(path string) bool {
	return path == "/" || path == SystemRoot || path == QuotaRoot || path == ConfigPath
}

// AddSystemNodes adds the system nodes the tree lacks (a new tree, or one
// from a snapshot of a server that answered for them without storing
// them): all-zero stats, empty data, their ACLs. As in ZooKeeper, adding a
// child does not count in its parent's cversion, pzxid or sequential
// counter, only in its number of children; so trees that had them added at
// different times are the same. It is a write.
func (t *Tree) AddSystemNodes() {
	for _, p := range []string{SystemRoot, QuotaRoot, ConfigPath} {
		if t.lookup(p).ok() {
			continue
		}
		parent := t.lookup(parentOf(p))
		if !parent.ok() || parent.kind() == Ephemeral {
			continue // only in a tree that was never a server's
		}
		h := node{}
		if p == ConfigPath {
			ref, err := t.acls.intern(configACL, -1)
			if err != nil {
				continue // a tree full of distinct ACLs
			}
			h.acl = ref
		}
		t.nodes.ReplaceOrInsert(makeRec(&h, keyOf(p), []byte{}))
		q := parent.node()
		q.numChildren++
		t.nodes.ReplaceOrInsert(parent.with(&q))
		t.size += int64(len(p))
	}
}

// Quotas, as ZooKeeper's DataTree keeps them. A path has a quota while
// QuotaRoot+path+"/"+QuotaLimitsNode exists (the tree's quotas set, rebuilt
// from the nodes when a snapshot is read). Every create, delete and setData
// of a node at or below such a path (the deepest one) updates the count
// and bytes in QuotaRoot+path+"/"+QuotaStatsNode's data, in place: no
// version, mzxid or event. Creating the stats node sets its data to the
// count and bytes below path at that moment. Limits are not enforced
// (ZooKeeper enforces none unless configured to).

// quotaOf returns the path a node of the quota subtree sets a quota on,
// if it is a limits or stats node (named so, below QuotaRoot): the part of
// its parent's path after QuotaRoot, or "/" for QuotaRoot itself.
func quotaOf(path string) (quota, name string, ok bool) {
	parent, name := parentOf(path), path[strings.LastIndexByte(path, '/')+1:]
	if name != QuotaLimitsNode && name != QuotaStatsNode {
		return "", "", false
	}
	if parent == QuotaRoot {
		return "/", name, true
	}
	rest, under := strings.CutPrefix(parent, QuotaRoot+"/")
	if !under {
		return "", "", false
	}
	return "/" + rest, name, true
}

// quotaFor returns the deepest path with a quota at or above path ("" when
// none). The root never has one (ZooKeeper keeps no quota on it).
func (t *Tree) quotaFor(path string) string {
	if len(t.quotas) == 0 {
		return ""
	}
	for p := path; p != "/"; p = parentOf(p) {
		if _, ok := t.quotas[p]; ok {
			return p
		}
	}
	return ""
}

// setQuota records (on) or forgets that path has a quota. The set is
// shared with clones, and so replaced, never modified.
func (t *Tree) setQuota(path string, on bool) {
	if path == "/" {
		return
	}
	if _, has := t.quotas[path]; has == on {
		return
	}
	q := maps.Clone(t.quotas)
	if q == nil {
		q = map[string]struct{}{}
	}
	if on {
		q[path] = struct{}{}
	} else {
		delete(q, path)
	}
	t.quotas = q
}

// created updates the quotas for a node just created at path with data.
func (t *Tree) quotaCreated(path string, data []byte) {
	if quota, name, ok := quotaOf(path); ok {
		if name == QuotaLimitsNode {
			t.setQuota(quota, true)
		} else {
			t.recountQuota(quota)
		}
	}
	if q := t.quotaFor(path); q != "" {
		t.updateQuotaStats(q, int64(len(data)), 1)
	}
}

// quotaRemoved updates the quotas for the node at path, with data, just
// deleted.
func (t *Tree) quotaRemoved(path string, data []byte) {
	if quota, name, ok := quotaOf(path); ok && name == QuotaLimitsNode {
		t.setQuota(quota, false)
	}
	if q := t.quotaFor(path); q != "" {
		t.updateQuotaStats(q, -int64(len(data)), -1)
	}
}

// quotaDataSet updates the quotas for the data of the node at path, set
// from old to data.
func (t *Tree) quotaDataSet(path string, old, data []byte) {
	if q := t.quotaFor(path); q != "" {
		t.updateQuotaStats(q, int64(len(data)-len(old)), 0)
	}
}

// recountQuota sets the stats node of the quota on path to the count and
// bytes of path's subtree (0 and 0 when path does not exist), as
// ZooKeeper's updateQuotaForPath.
func (t *Tree) recountQuota(path string) {
	var count, bytes int64
	if path != "/" {
		if r := t.lookup(path); r.ok() {
			count, bytes = 1, int64(r.dataLen())
			for _, prefix := range []string{path + "\x00", path + "/"} {
				t.nodes.AscendGreaterOrEqual(probe(prefix), func(r rec) bool {
					if !strings.HasPrefix(r.key(), prefix) {
						return false
					}
					count++
					bytes += int64(r.dataLen())
					return true
				})
			}
		}
	}
	t.setStatsData(quotaStatsPath(path), (&quotaStats{count: count, bytes: bytes}).String())
}

// updateQuotaStats adds to the count and bytes of the quota on path, as
// ZooKeeper's updateQuotaStat: nothing when the stats node is missing or
// its data is not a stats line.
func (t *Tree) updateQuotaStats(path string, bytesDiff, countDiff int64) {
	p := quotaStatsPath(path)
	r := t.lookup(p)
	if !r.ok() {
		return
	}
	st, ok := parseQuotaStats(string(r.data()))
	if !ok {
		return
	}
	st.count += countDiff
	st.bytes += bytesDiff
	t.setStatsData(p, st.String())
}

func quotaStatsPath(path string) string {
	if path == "/" {
		return QuotaRoot + "/" + QuotaStatsNode
	}
	return QuotaRoot + path + "/" + QuotaStatsNode
}

// setStatsData replaces the data of the node at p, which exists, keeping
// the rest of it.
func (t *Tree) setStatsData(p, data string) {
	r := t.lookup(p)
	if !r.ok() {
		return
	}
	t.size += int64(len(data)) - int64(r.dataLen())
	n := r.node()
	t.putRec(makeRec(&n, r.key(), []byte(data)))
}

// rebuildQuotas finds the quotas of a tree read from a snapshot: every
// limits node below QuotaRoot.
func (t *Tree) rebuildQuotas() {
	t.quotas = nil
	for _, prefix := range []string{QuotaRoot + "\x00", QuotaRoot + "/"} {
		t.nodes.AscendGreaterOrEqual(probe(prefix), func(r rec) bool {
			key := r.key()
			if !strings.HasPrefix(key, prefix) {
				return false
			}
			if p := pathOf(key); strings.HasSuffix(p, "/"+QuotaLimitsNode) {
				if quota, _, ok := quotaOf(p); ok {
					t.setQuota(quota, true)
				}
			}
			return true
		})
	}
}

// quotaStats is ZooKeeper's StatsTrack: "count=N,bytes=N" and, after an
// extra "=", other keys in order, each ";key=N" (a missing count or bytes
// is -1).
type quotaStats struct {
	count, bytes int64
	others       map[string]int64
}

// parseQuotaStats parses a StatsTrack line: pairs "key=N" separated by runs
// of ',' and ';' (a value may be followed by '=', and an empty one is -1).
func parseQuotaStats(s string) (quotaStats, bool) {
	st := quotaStats{count: -1, bytes: -1}
	if s == "" {
		return st, true
	}
	for _, pair := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		key, value, _ := strings.Cut(pair, "=")
		value, _, _ = strings.Cut(value, "=")
		v := int64(-1)
		if value != "" {
			var err error
			if v, err = strconv.ParseInt(value, 10, 64); err != nil {
				return quotaStats{}, false
			}
		}
		switch key {
		case "count":
			st.count = v
		case "bytes":
			st.bytes = v
		default:
			if st.others == nil {
				st.others = map[string]int64{}
			}
			st.others[key] = v
		}
	}
	return st, true
}

// String formats the stats as ZooKeeper's StatsTrack.toString does.
func (s *quotaStats) String() string {
	out := fmt.Sprintf("count=%d,bytes=%d", s.count, s.bytes)
	if len(s.others) > 0 {
		out += "="
		for _, k := range slices.Sorted(maps.Keys(s.others)) {
			out += fmt.Sprintf(";%s=%d", k, s.others[k])
		}
	}
	return out
}

// SetConfig sets /zookeeper/config's data as ZooKeeper's servers do when a
// configuration takes effect (ZKDatabase.initConfigInZKDatabase): version
// -1, mzxid and mtime from tx, NodeDataChanged; no permission is checked.
// It does nothing when the node is missing or already holds exactly data,
// and reports whether it changed the node.
func (t *Tree) SetConfig(data []byte, tx *Tx) bool {
	old := t.lookup(ConfigPath)
	if !old.ok() || (string(old.data()) == string(data) && !old.isNull()) {
		return false
	}
	m := old.node()
	m.version = -1
	m.mzxid = tx.Zxid
	m.mtime = tx.Now
	r := makeRec(&m, old.key(), data)
	t.nodes.ReplaceOrInsert(r)
	t.size += int64(len(data)) - int64(old.dataLen())
	tx.Events = append(tx.Events, Event{Type: EventNodeDataChanged, Path: ConfigPath, Zxid: tx.Zxid, ACL: t.aclPtr(r)})
	return true
}
