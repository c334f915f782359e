package tree

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/btree"
)

// Perms is a set of permissions: ZooKeeper's ZooDefs.Perms bits. An ACL
// entry may carry any int32 (ZooKeeper stores what it is given); only these
// bits mean something.
type Perms int32

// The permissions.
const (
	PermRead   Perms = 1 << iota // getData, getChildren, exists, getACL (or ADMIN), check
	PermWrite                    // setData
	PermCreate                   // create a child
	PermDelete                   // delete a child
	PermAdmin                    // setACL, getACL (or READ)
	// PermAll is every permission ("cdrwa").
	PermAll = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// String returns ZooKeeper's letters for the permissions, in zkCli's order
// ("cdrwa"); no permission at all is "".
func (p Perms) String() string {
	var b []byte
	for _, x := range []struct {
		p Perms
		c byte
	}{{PermCreate, 'c'}, {PermDelete, 'd'}, {PermRead, 'r'}, {PermWrite, 'w'}, {PermAdmin, 'a'}} {
		if p&x.p != 0 {
			b = append(b, x.c)
		}
	}
	return string(b)
}

// ACL is one entry of a znode's access control list: the permissions
// granted to an identity, named by a scheme and an id within it
// (world:anyone, digest:user:hash, ip:10.0.0.0/8, x509:CN=...).
type ACL struct {
	Perms  Perms
	Scheme string
	ID     string
}

// openACL is world:anyone with every permission, ZooKeeper's
// OPEN_ACL_UNSAFE: the ACL of the root and of every node created without
// one. Shared; never modified.
var openACL = []ACL{{Perms: PermAll, Scheme: "world", ID: "anyone"}}

// OpenACL returns world:anyone with every permission (ZooKeeper's
// OPEN_ACL_UNSAFE), the ACL of a node created without one.
func OpenACL() []ACL { return slices.Clone(openACL) }

// IsOpen reports whether acl is exactly OpenACL.
func IsOpen(acl []ACL) bool { return len(acl) == 1 && acl[0] == openACL[0] }

// Authorizer answers the ACL questions of one write, on behalf of whoever
// sent it: the tree knows which permission each operation needs on which
// node (ZooKeeper's rules), the Authorizer knows who the writer is. Both
// methods must be pure functions of their arguments and the writer (the
// FSM calls them in apply, and every server must decide alike).
type Authorizer interface {
	// Allowed reports whether the writer holds perm on a node whose ACL
	// is acl (an empty acl allows everything, as in ZooKeeper).
	Allowed(acl []ACL, perm Perms) bool
	// Fixup turns the ACL a create or setACL asked for into the one to
	// store (ZooKeeper's fixupACL: the auth scheme expanded to the
	// writer's identities), or returns an error wrapping ErrInvalidACL.
	Fixup(acl []ACL) ([]ACL, error)
}

// The bounds of an interned ACL reference: it lives in 24 bits of the node
// header (see node.acl).
const (
	maxACLRef = 1<<24 - 1
	// openRef is world:anyone:cdrwa with aversion 0, which most nodes
	// have; it is not in the table.
	openRef = 0
)

// aclEntry is one interned (ACL list, aversion) pair. Immutable.
type aclEntry struct {
	acl      []ACL
	aversion int32
	key      string // aclKey(acl, aversion)
}

// aclItem is an entry of aclTable.byRef: how many nodes refer to it.
type aclItem struct {
	ref  uint32
	refs int64
	e    *aclEntry
}

// aclKeyItem is an entry of aclTable.byKey.
type aclKeyItem struct {
	key string
	ref uint32
}

// aclTable interns the (ACL, aversion) pairs of the nodes, as ZooKeeper's
// ReferenceCountedACLCache does: a node holds a 24-bit reference rather
// than a list, nodes with the same ACL and aversion share one entry, and an
// entry goes when its last node does. Most nodes have the open ACL and
// aversion 0, which is the reference 0 and costs nothing.
//
// Both indexes are copy-on-write btrees, so a Clone of the tree gets the
// table in O(1) and the two never see each other's changes (a reference
// freed and reused on one side is still the old entry on the other).
type aclTable struct {
	byRef *btree.BTreeG[aclItem]
	byKey *btree.BTreeG[aclKeyItem]
	next  uint32 // where the search for a free reference starts
	// unreadable counts the entries that do not let everyone READ (see
	// ReadRestricted).
	unreadable int
}

func newACLTable() aclTable {
	return aclTable{
		byRef: btree.NewG(btreeDegree, func(a, b aclItem) bool { return a.ref < b.ref }),
		byKey: btree.NewG(btreeDegree, func(a, b aclKeyItem) bool { return a.key < b.key }),
		next:  1,
	}
}

func (t *aclTable) clone() aclTable {
	return aclTable{byRef: t.byRef.Clone(), byKey: t.byKey.Clone(), next: t.next, unreadable: t.unreadable}
}

// aclKey is the canonical encoding of an (ACL, aversion) pair.
func aclKey(acl []ACL, aversion int32) string {
	b := binary.AppendVarint(nil, int64(aversion))
	for _, a := range acl {
		b = binary.AppendVarint(b, int64(a.Perms))
		b = binary.AppendUvarint(b, uint64(len(a.Scheme)))
		b = append(b, a.Scheme...)
		b = binary.AppendUvarint(b, uint64(len(a.ID)))
		b = append(b, a.ID...)
	}
	return string(b)
}

// get returns the ACL and aversion behind ref. The slice is shared.
func (t *aclTable) get(ref uint32) ([]ACL, int32) {
	if ref == openRef {
		return openACL, 0
	}
	it, ok := t.byRef.Get(aclItem{ref: ref})
	if !ok {
		// Every reference a node holds is in the table; this is a bug.
		panic(fmt.Sprintf("tree: ACL reference %d not in the table", ref))
	}
	return it.e.acl, it.e.aversion
}

// intern returns a reference to (acl, aversion) holding one more use of it.
// acl is copied when it is new to the table.
func (t *aclTable) intern(acl []ACL, aversion int32) (uint32, error) {
	if aversion == 0 && IsOpen(acl) {
		return openRef, nil
	}
	key := aclKey(acl, aversion)
	if k, ok := t.byKey.Get(aclKeyItem{key: key}); ok {
		it, _ := t.byRef.Get(aclItem{ref: k.ref})
		it.refs++
		t.byRef.ReplaceOrInsert(it)
		return k.ref, nil
	}
	if t.byRef.Len() >= maxACLRef {
		return 0, fmt.Errorf("%w: %d distinct ACLs in use, the most a tree holds", ErrBadArguments, t.byRef.Len())
	}
	ref := t.next
	for ref == openRef || t.byRef.Has(aclItem{ref: ref}) {
		ref++
		if ref > maxACLRef {
			ref = 1
		}
	}
	t.next = ref + 1
	if t.next > maxACLRef {
		t.next = 1
	}
	e := &aclEntry{acl: slices.Clone(acl), aversion: aversion, key: key}
	t.add(ref, 1, e)
	return ref, nil
}

// add puts a new entry in the table.
func (t *aclTable) add(ref uint32, refs int64, e *aclEntry) {
	t.byRef.ReplaceOrInsert(aclItem{ref: ref, refs: refs, e: e})
	t.byKey.ReplaceOrInsert(aclKeyItem{key: e.key, ref: ref})
	if !worldReadable(e.acl) {
		t.unreadable++
	}
}

// worldReadable reports whether acl lets everyone READ: it has a
// world:anyone entry with READ, or is empty (which ZooKeeper's checks let
// through).
func worldReadable(acl []ACL) bool {
	if len(acl) == 0 {
		return true
	}
	for _, a := range acl {
		if a.Scheme == "world" && a.ID == "anyone" && a.Perms&PermRead != 0 {
			return true
		}
	}
	return false
}

// release drops one use of ref; the entry goes with its last use.
func (t *aclTable) release(ref uint32) {
	if ref == openRef {
		return
	}
	it, ok := t.byRef.Get(aclItem{ref: ref})
	if !ok {
		panic(fmt.Sprintf("tree: releasing ACL reference %d not in the table", ref))
	}
	it.refs--
	if it.refs > 0 {
		t.byRef.ReplaceOrInsert(it)
		return
	}
	t.byRef.Delete(it)
	t.byKey.Delete(aclKeyItem{key: it.e.key})
	if !worldReadable(it.e.acl) {
		t.unreadable--
	}
}

// ACLs returns the number of distinct (ACL, aversion) pairs the tree
// holds beyond the open ACL with aversion 0 (which every node has until
// one is set).
func (t *Tree) ACLs() int { return t.acls.byRef.Len() }

// Restricted reports whether any node has an ACL other than the open one
// (or an aversion other than 0). When it does not, every permission check
// passes, and a server may skip looking ACLs up.
func (t *Tree) Restricted() bool { return t.acls.byRef.Len() > 0 }

// ReadRestricted reports whether some node's ACL may refuse READ to
// someone: one that has no world:anyone entry with READ (the open ACL,
// and ZooKeeper's world:anyone:r of /zookeeper/config, do). When it does
// not, every READ check passes, and a server may skip looking ACLs up for
// reads.
func (t *Tree) ReadRestricted() bool { return t.acls.unreadable > 0 }

// GetACL returns the ACL of the node at path and its Stat (whose Aversion
// counts the ACL's changes), or ErrNoNode. The slice is shared with the
// tree and must not be modified; it stays valid after later writes.
func (t *Tree) GetACL(path string) ([]ACL, Stat, error) {
	r := t.lookup(path)
	if !r.ok() {
		return nil, Stat{}, ErrNoNode
	}
	acl, _ := t.acls.get(r.aclRef())
	return acl, t.stat(r), nil
}

// ACL returns the ACL of the node at path, shared as GetACL's, and whether
// the node exists. It is the cheap lookup a permission check needs.
func (t *Tree) ACL(path string) ([]ACL, bool) {
	r := t.lookup(path)
	if !r.ok() {
		return nil, false
	}
	acl, _ := t.acls.get(r.aclRef())
	return acl, true
}

// aclPtr returns a pointer to the ACL of r, which is immutable and stays
// valid after r's entry leaves the table.
func (t *Tree) aclPtr(r rec) *[]ACL {
	ref := r.aclRef()
	if ref == openRef {
		return &openACL
	}
	it, ok := t.acls.byRef.Get(aclItem{ref: ref})
	if !ok {
		panic(fmt.Sprintf("tree: ACL reference %d not in the table", ref))
	}
	return &it.e.acl
}

// aclOf returns the ACL of r (shared).
func (t *Tree) aclOf(r rec) []ACL {
	acl, _ := t.acls.get(r.aclRef())
	return acl
}

// allowed asks tx's Authorizer, if any, whether the writer holds perm on r.
func (t *Tree) allowed(tx *Tx, r rec, perm Perms, path string) error {
	if tx.Auth == nil || tx.Auth.Allowed(t.aclOf(r), perm) {
		return nil
	}
	return fmt.Errorf("%w: %s needs %s", ErrNoAuth, path, permName(perm))
}

// fixup turns the ACL a create or setACL asked for into the one stored.
// Without an Authorizer an empty ACL is the open one.
func fixup(tx *Tx, acl []ACL) ([]ACL, error) {
	if tx.Auth != nil {
		return tx.Auth.Fixup(acl)
	}
	if len(acl) == 0 {
		return openACL, nil
	}
	return acl, nil
}

func permName(p Perms) string {
	switch p {
	case PermRead:
		return "READ"
	case PermWrite:
		return "WRITE"
	case PermCreate:
		return "CREATE"
	case PermDelete:
		return "DELETE"
	case PermAdmin:
		return "ADMIN"
	}
	return "permission " + p.String()
}

// SetACL replaces the ACL of the node at path if its aversion is version
// (-1: any), and increments the aversion. It needs ADMIN on the node. It
// produces no event (ZooKeeper fires no watch for an ACL change).
//
// Errors, in ZooKeeper's order: ErrBadArguments (invalid path),
// ErrInvalidACL (from the Authorizer's Fixup), ErrNoNode, ErrNoAuth,
// ErrBadVersion.
func (t *Tree) SetACL(path string, acl []ACL, version int32, tx *Tx) (Stat, error) {
	if err := ValidatePath(path); err != nil {
		return Stat{}, err
	}
	acl, err := fixup(tx, acl)
	if err != nil {
		return Stat{}, err
	}
	r := t.lookup(path)
	if !r.ok() {
		return Stat{}, fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	if err := t.allowed(tx, r, PermAdmin, path); err != nil {
		return Stat{}, err
	}
	_, aversion := t.acls.get(r.aclRef())
	if version != -1 && version != aversion {
		return Stat{}, fmt.Errorf("%w: %s has ACL version %d, not %d", ErrBadVersion, path, aversion, version)
	}
	ref, err := t.acls.intern(acl, aversion+1)
	if err != nil {
		return Stat{}, err
	}
	t.acls.release(r.aclRef())
	m := r.node()
	m.acl = ref
	r = r.with(&m)
	t.nodes.ReplaceOrInsert(r)
	return t.stat(r), nil
}
