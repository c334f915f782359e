package tree

import (
	"strings"
	"unsafe"

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

// node is one znode. Nodes are immutable once they are in the btree (clones
// share them): a change replaces the node with a modified copy.
//
// The node's data and its btree key share one allocation, the data first
// and the key right after it (see newItem): the node points at its start
// and the item's key string into it. That saves an allocation, and the
// size-class rounding of one, per znode, and keeps the header at 80 bytes
// (a []byte would make it 96). A copy of the header (a parent's new child
// count, say) shares the buffer, so it never copies the data.
//
// The node's ACL and aversion are interned in the tree's ACL table (see
// aclTable); the node holds a 24-bit reference to them in the three bytes
// after kind that would otherwise be padding.
type node struct {
	buf         *byte // data then key; nil only in a node not yet in a tree
	czxid       int64
	mzxid       int64
	pzxid       int64
	ctime       int64
	mtime       int64
	aux         int64 // ephemeral owner for Ephemeral, TTL for TTL, else 0
	version     int32
	cversion    int32
	numChildren int32
	seq         int32 // children ever created: the next sequential suffix
	dataLen     int32
	kind        Kind
	aclHi       uint8  // the ACL reference's high 8 bits
	aclLo       uint16 // and its low 16 bits
}

// aclRef returns the node's reference into its tree's ACL table.
func (n *node) aclRef() uint32 { return uint32(n.aclHi)<<16 | uint32(n.aclLo) }

// setACLRef sets the node's ACL reference (< 1<<24).
func (n *node) setACLRef(ref uint32) { n.aclHi, n.aclLo = uint8(ref>>16), uint16(ref) }

// data returns the node's data, nil when empty. The slice is shared: it
// must not be modified.
func (n *node) data() []byte {
	if n.dataLen == 0 {
		return nil
	}
	return unsafe.Slice(n.buf, n.dataLen)
}

// newItem returns the btree item of a node with the header fields of h
// (but for buf and dataLen), the given data (copied) and key.
func newItem(key string, data []byte, h node) item {
	return packItem(append(append(make([]byte, 0, len(data)+len(key)), data...), key...), len(data), h)
}

// packItem returns the btree item of a node with the header fields of h
// (but for buf and dataLen) whose buffer b holds dataLen bytes of data then
// the key (at least one byte). b becomes the node's and must not be
// modified afterwards.
func packItem(b []byte, dataLen int, h node) item {
	h.buf = unsafe.SliceData(b)
	h.dataLen = int32(dataLen)
	return item{key: unsafe.String(&b[dataLen], len(b)-dataLen), n: &h}
}

// stat returns n's Stat, its aversion read from t's ACL table.
func (t *Tree) stat(n *node) Stat {
	s := Stat{
		Czxid:       n.czxid,
		Mzxid:       n.mzxid,
		Pzxid:       n.pzxid,
		Ctime:       n.ctime,
		Mtime:       n.mtime,
		Version:     n.version,
		Cversion:    n.cversion,
		DataLength:  n.dataLen,
		NumChildren: n.numChildren,
		Kind:        n.kind,
	}
	if ref := n.aclRef(); ref != openRef {
		_, s.Aversion = t.acls.get(ref)
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
func (n *node) reapable(now int64) bool {
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

// item is a btree entry: a node under its key (see keyOf). In the btree the
// key points into the node's buffer (see newItem); a key used only to
// search may be any string.
type item struct {
	key string
	n   *node
}

func itemLess(a, b item) bool { return a.key < b.key }

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
	nodes   *btree.BTreeG[item]    // every znode, by key
	eph     *btree.BTreeG[ephItem] // ephemerals by (owner, path)
	reap    *btree.BTreeG[string]  // paths of container and TTL nodes
	acls    aclTable               // the nodes' ACLs and aversions, interned
	maxData int
	// size is the sum of every node's path and data lengths
	// (ApproximateDataSize).
	size int64
}

func newEmpty(opts Options) *Tree {
	return &Tree{
		nodes:   btree.NewG(btreeDegree, itemLess),
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
	t.nodes.ReplaceOrInsert(newItem(rootKey, nil, node{}))
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
	}
}

// lookup returns the node at path and its key (the one in the btree, which
// shares the node's buffer), or nil. Paths that are not valid are simply not
// found.
func (t *Tree) lookup(path string) (string, *node) {
	if path == "" || path[0] != '/' {
		return "", nil
	}
	it, ok := t.nodes.Get(item{key: keyOf(path)})
	if !ok {
		return "", nil
	}
	return it.key, it.n
}

// Get returns the data and Stat of the node at path, or ErrNoNode. The
// returned slice is shared with the tree: the caller must not modify it.
// The tree never modifies it either (a later SetData stores a new slice), so
// it stays valid after the call. Empty data is returned as nil.
func (t *Tree) Get(path string) ([]byte, Stat, error) {
	_, n := t.lookup(path)
	if n == nil {
		return nil, Stat{}, ErrNoNode
	}
	return n.data(), t.stat(n), nil
}

// Exists returns the Stat of the node at path, or ErrNoNode.
func (t *Tree) Exists(path string) (Stat, error) {
	_, n := t.lookup(path)
	if n == nil {
		return Stat{}, ErrNoNode
	}
	return t.stat(n), nil
}

// Children returns the names (not full paths) of the direct children of the
// node at path, sorted bytewise, and the node's Stat; or ErrNoNode.
func (t *Tree) Children(path string) ([]string, Stat, error) {
	_, n := t.lookup(path)
	if n == nil {
		return nil, Stat{}, ErrNoNode
	}
	names := make([]string, 0, n.numChildren)
	if n.numChildren > 0 {
		prefix := childPrefix(path)
		t.nodes.AscendGreaterOrEqual(item{key: prefix}, func(it item) bool {
			if !strings.HasPrefix(it.key, prefix) {
				return false
			}
			if it.key != rootKey {
				names = append(names, it.key[len(prefix):])
			}
			return true
		})
	}
	return names, t.stat(n), nil
}

// Descendants returns how many nodes lie below the node at path (children,
// their children and so on; ZooKeeper's getAllChildrenNumber), or ErrNoNode.
// It costs O(log n + k) for k descendants.
func (t *Tree) Descendants(path string) (int, error) {
	_, n := t.lookup(path)
	if n == nil {
		return 0, ErrNoNode
	}
	if path == "/" {
		return t.nodes.Len() - 1, nil
	}
	count := 0
	// A descendant's key starts with path+"\x00" (a child) or path+"/" (a
	// deeper node, whose parent's path starts so).
	for _, prefix := range []string{path + "\x00", path + "/"} {
		t.nodes.AscendGreaterOrEqual(item{key: prefix}, func(it item) bool {
			if !strings.HasPrefix(it.key, prefix) {
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
		if _, n := t.lookup(p); n != nil && n.reapable(now) {
			paths = append(paths, p)
		}
		return true
	})
	if !stopped {
		return paths, ""
	}
	return paths, last
}
