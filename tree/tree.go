package tree

import (
	"strings"

	"github.com/google/btree"
)

// DefaultMaxDataSize is the largest znode data, in bytes, accepted when
// Options.MaxDataSize is 0 (ZooKeeper's default jute.maxbuffer is about the
// same).
const DefaultMaxDataSize = 1 << 20

// MaxTTL is the largest TTL, in milliseconds, of a TTL node (2^40-1, as in
// ZooKeeper).
const MaxTTL = 1<<40 - 1

// btreeDegree is the degree of the btrees. Small enough that copying a
// btree node after a Clone is cheap, large enough to keep the tree shallow.
const btreeDegree = 16

// Options configures a Tree.
type Options struct {
	// MaxDataSize is the largest data, in bytes, a znode may hold. 0 (or a
	// negative value) means DefaultMaxDataSize.
	MaxDataSize int
}

func (o Options) maxDataSize() int {
	if o.MaxDataSize <= 0 {
		return DefaultMaxDataSize
	}
	return o.MaxDataSize
}

// stat returns the Stat of record r, its aversion read from t's ACL table.
func (t *Tree) stat(r rec) Stat {
	n := r.node()
	s := Stat{
		Czxid:       n.czxid,
		Mzxid:       n.mzxid,
		Pzxid:       n.pzxid,
		Ctime:       n.ctime,
		Mtime:       n.mtime,
		Version:     n.version,
		Cversion:    n.cversion,
		DataLength:  r.dataLen(),
		NumChildren: n.numChildren,
		Kind:        n.kind,
	}
	if n.acl != openRef {
		_, s.Aversion = t.acls.get(n.acl)
	}
	switch n.kind {
	case Ephemeral:
		s.EphemeralOwner = n.aux
	case TTL:
		s.TTL = n.aux
	}
	return s
}

// reapable reports whether the node may be reaped at time now.
func (r rec) reapable(now int64) bool {
	n := r.node()
	if n.numChildren != 0 {
		return false
	}
	switch n.kind {
	case Container:
		return n.cversion > 0
	case TTL:
		const maxInt64 = 1<<63 - 1
		return n.mtime <= maxInt64-n.aux && n.mtime+n.aux < now
	}
	return false
}

// ephItem is an entry of the ephemeral index.
type ephItem struct {
	owner int64
	path  string
}

func ephLess(a, b ephItem) bool {
	if a.owner != b.owner {
		return a.owner < b.owner
	}
	return a.path < b.path
}

// Tree is the znode namespace. Create one with New or Read; the zero value
// is not usable.
//
// A Tree is not safe for concurrent use: writes (Create, Delete, SetData,
// Multi, the Reap methods and Clone) must be serialised by the caller, and
// must not run concurrently with reads; reads may run concurrently with
// each other. A Clone is independent of its original and may be used on
// another goroutine.
type Tree struct {
	nodes   *btree.BTreeG[rec]     // every znode, by key
	eph     *btree.BTreeG[ephItem] // ephemerals by (owner, path)
	reap    *btree.BTreeG[string]  // paths of container and TTL nodes
	acls    aclTable               // the nodes' ACLs and aversions, interned
	maxData int
	// size is the sum of every node's path and data lengths
	// (ApproximateDataSize).
	size int64
	// quotas holds the paths with a quota (see system.go). Shared with
	// clones: replaced on change, never modified.
	quotas map[string]struct{}
	// undo logs the changes of a running Multi (undo.go); nil otherwise.
	undo *undoLog
}

func newEmpty(opts Options) *Tree {
	return &Tree{
		nodes:   btree.NewG(btreeDegree, recLess),
		eph:     btree.NewG(btreeDegree, ephLess),
		reap:    btree.NewOrderedG[string](btreeDegree),
		acls:    newACLTable(),
		maxData: opts.maxDataSize(),
	}
}

// New returns a tree holding only the root "/", whose Stat fields are all
// zero.
func New(opts Options) *Tree {
	t := newEmpty(opts)
	t.nodes.ReplaceOrInsert(makeRec(&node{}, rootKey, []byte{})) // empty data, as ZooKeeper's root
	t.size = 1
	return t
}

// MaxDataSize returns the largest data, in bytes, a znode of t may hold.
func (t *Tree) MaxDataSize() int { return t.maxData }

// Len returns the number of znodes, the root included.
func (t *Tree) Len() int { return t.nodes.Len() }

// Ephemerals returns the number of ephemeral nodes.
func (t *Tree) Ephemerals() int { return t.eph.Len() }

// ApproximateDataSize returns the sum of the lengths of every node's path
// and data, as ZooKeeper's approximateDataSize counts them.
func (t *Tree) ApproximateDataSize() int64 { return t.size }

// Clone returns a copy of t in O(1). The copy shares t's nodes copy-on-write:
// later writes to either do not show in the other. Clone is a write on t (it
// must not run concurrently with t's other writes); once it returns, t and
// the clone may be used concurrently from different goroutines, e.g. t
// written by the FSM while the clone is encoded with WriteTo.
func (t *Tree) Clone() *Tree {
	return &Tree{
		nodes:   t.nodes.Clone(),
		eph:     t.eph.Clone(),
		reap:    t.reap.Clone(),
		acls:    t.acls.clone(),
		maxData: t.maxData,
		size:    t.size,
		quotas:  t.quotas,
	}
}

// lookup returns the record of the node at path, or the zero rec (!ok()).
// Paths that are not valid are simply not found.
func (t *Tree) lookup(path string) rec {
	if path == "" || path[0] != '/' {
		return rec{}
	}
	r, _ := t.nodes.Get(probePath(path))
	return r
}

// Get returns the data and Stat of the node at path, or ErrNoNode. The
// returned slice is shared with the tree: the caller must not modify it.
// The tree never modifies it either (a later SetData stores a new slice), so
// it stays valid after the call. Null data is returned as nil, empty data
// as a non-nil empty slice.
func (t *Tree) Get(path string) ([]byte, Stat, error) {
	r := t.lookup(path)
	if !r.ok() {
		return nil, Stat{}, ErrNoNode
	}
	return r.data(), t.stat(r), nil
}

// Exists returns the Stat of the node at path, or ErrNoNode.
func (t *Tree) Exists(path string) (Stat, error) {
	r := t.lookup(path)
	if !r.ok() {
		return Stat{}, ErrNoNode
	}
	return t.stat(r), nil
}

// Children returns the names (not full paths) of the direct children of the
// node at path, sorted bytewise, and the node's Stat; or ErrNoNode.
func (t *Tree) Children(path string) ([]string, Stat, error) {
	r := t.lookup(path)
	if !r.ok() {
		return nil, Stat{}, ErrNoNode
	}
	st := t.stat(r)
	names := make([]string, 0, st.NumChildren)
	if st.NumChildren > 0 {
		prefix := childPrefix(path)
		t.nodes.AscendGreaterOrEqual(probe(prefix), func(c rec) bool {
			key := c.key()
			if !strings.HasPrefix(key, prefix) {
				return false
			}
			if key != rootKey {
				names = append(names, key[len(prefix):])
			}
			return true
		})
	}
	return names, st, nil
}

// Descendants returns how many nodes lie below the node at path (children,
// their children and so on; ZooKeeper's getAllChildrenNumber), or ErrNoNode.
// It costs O(log n + k) for k descendants.
func (t *Tree) Descendants(path string) (int, error) {
	if !t.lookup(path).ok() {
		return 0, ErrNoNode
	}
	if path == "/" {
		return t.nodes.Len() - 1, nil
	}
	count := 0
	// A descendant's key starts with path+"\x00" (a child) or path+"/" (a
	// deeper node, whose parent's path starts so).
	for _, prefix := range []string{path + "\x00", path + "/"} {
		t.nodes.AscendGreaterOrEqual(probe(prefix), func(r rec) bool {
			if !strings.HasPrefix(r.key(), prefix) {
				return false
			}
			count++
			return true
		})
	}
	return count, nil
}

// EphemeralsOf returns the full paths of the ephemeral nodes owned by the
// session owner, sorted bytewise (nil when there are none). It costs
// O(log n + k) for k results.
func (t *Tree) EphemeralsOf(owner int64) []string {
	var paths []string
	t.eph.AscendGreaterOrEqual(ephItem{owner: owner}, func(e ephItem) bool {
		if e.owner != owner {
			return false
		}
		paths = append(paths, e.path)
		return true
	})
	return paths
}

// ReapCandidates returns up to limit paths of container and TTL nodes that
// are reapable at time now (see ReapContainer and ReapTTL), in path order,
// starting strictly after the path after ("" starts from the beginning).
// It walks only the index of container and TTL nodes and looks at no more
// than 10*limit entries per call. next is the cursor to pass as after in
// the following call, or "" when the index is exhausted. A limit <= 0
// returns (nil, after).
func (t *Tree) ReapCandidates(now int64, after string, limit int) (paths []string, next string) {
	if limit <= 0 {
		return nil, after
	}
	budget := limit * 10
	if budget < limit { // overflow
		budget = limit
	}
	examined := 0
	last := ""
	stopped := false
	t.reap.AscendGreaterOrEqual(after, func(p string) bool {
		if p == after {
			return true
		}
		if examined >= budget || len(paths) >= limit {
			stopped = true
			return false
		}
		examined++
		last = p
		if r := t.lookup(p); r.ok() && r.reapable(now) {
			paths = append(paths, p)
		}
		return true
	})
	if !stopped {
		return paths, ""
	}
	return paths, last
}
