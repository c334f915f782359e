package tree

import (
	"fmt"
)

// Create describes a node to create.
type Create struct {
	// Path of the node; for a sequential node, the prefix to which the
	// %010d suffix is appended (it may end in '/').
	Path string
	// Data is copied; the caller may reuse the slice afterwards. nil is
	// ZooKeeper's null data, which reads back as nil; a non-nil empty
	// slice reads back as a non-nil empty slice.
	Data []byte
	Kind Kind
	// Sequential appends the parent's count of children ever created,
	// formatted %010d, to Path.
	Sequential bool
	// Owner is the owning session: non-zero iff Kind is Ephemeral.
	Owner int64
	// TTL in ms: 1..MaxTTL iff Kind is TTL, else 0.
	TTL int64
	// ACL is the node's ACL as asked for: tx.Auth's Fixup turns it into
	// the one stored (without an Authorizer, empty is OpenACL).
	ACL []ACL
}

// Create creates a node. It returns the node's actual path (with the
// sequential suffix, if any) and its Stat. On success it appends
// NodeCreated(path) and NodeChildrenChanged(parent) to tx.Events. It
// needs CREATE on the parent, checked before the sequential suffix is
// chosen.
//
// Errors, in this order: ErrBadArguments (invalid path, kind, owner, TTL
// or data too large), ErrInvalidACL (from tx.Auth's Fixup), ErrNoNode (no
// parent), ErrNoAuth (no CREATE on the parent), ErrNodeExists (including
// for "/"), ErrNoChildrenForEphemerals (ephemeral parent).
func (t *Tree) Create(c Create, tx *Tx) (string, Stat, error) {
	path, r, err := t.create(c.Path, c.Data, c.Kind, c.Sequential, c.Owner, c.TTL, c.ACL, tx)
	if err != nil {
		return "", Stat{}, err
	}
	return path, t.stat(r), nil
}

func (t *Tree) checkData(data []byte) error {
	if len(data) > t.maxData {
		return fmt.Errorf("%w: data length %d exceeds limit %d", ErrBadArguments, len(data), t.maxData)
	}
	return nil
}

func checkKind(kind Kind, owner, ttl int64) error {
	switch kind {
	case Persistent, Container:
		if owner != 0 {
			return fmt.Errorf("%w: %s node with ephemeral owner %d", ErrBadArguments, kind, owner)
		}
		if ttl != 0 {
			return fmt.Errorf("%w: %s node with TTL %d", ErrBadArguments, kind, ttl)
		}
	case Ephemeral:
		if owner == 0 {
			return fmt.Errorf("%w: ephemeral node without owner", ErrBadArguments)
		}
		if ttl != 0 {
			return fmt.Errorf("%w: ephemeral node with TTL %d", ErrBadArguments, ttl)
		}
	case TTL:
		if owner != 0 {
			return fmt.Errorf("%w: ttl node with ephemeral owner %d", ErrBadArguments, owner)
		}
		if ttl < 1 || ttl > MaxTTL {
			return fmt.Errorf("%w: TTL %d out of range 1..%d", ErrBadArguments, ttl, int64(MaxTTL))
		}
	default:
		return fmt.Errorf("%w: unknown node kind %d", ErrBadArguments, kind)
	}
	return nil
}

func (t *Tree) create(path string, data []byte, kind Kind, seq bool, owner, ttl int64, acl []ACL, tx *Tx) (string, rec, error) {
	if seq {
		if err := ValidatePath(path + "1"); err != nil {
			return "", rec{}, err
		}
	} else if err := ValidatePath(path); err != nil {
		return "", rec{}, err
	}
	if err := checkKind(kind, owner, ttl); err != nil {
		return "", rec{}, err
	}
	if err := t.checkData(data); err != nil {
		return "", rec{}, err
	}
	acl, err := fixup(tx, acl)
	if err != nil {
		return "", rec{}, err
	}
	if !seq && path == "/" {
		return "", rec{}, fmt.Errorf("%w: %s", ErrNodeExists, path)
	}
	parentPath := parentOf(path)
	parent := t.lookup(parentPath)
	if !parent.ok() {
		return "", rec{}, fmt.Errorf("%w: parent of %s", ErrNoNode, path)
	}
	if err := t.allowed(tx, parent, PermCreate, parentPath); err != nil {
		return "", rec{}, err
	}
	p := parent.node()
	if seq {
		path = fmt.Sprintf("%s%010d", path, p.seq)
		if len(path) > MaxPathLength {
			return "", rec{}, fmt.Errorf("%w: path length %d exceeds limit %d", ErrBadArguments, len(path), MaxPathLength)
		}
	}
	var aux int64
	switch kind {
	case Ephemeral:
		aux = owner
	case TTL:
		aux = ttl
	}
	h := node{
		czxid: tx.Zxid, mzxid: tx.Zxid, pzxid: tx.Zxid,
		ctime: tx.Now, mtime: tx.Now,
		aux:  aux,
		kind: kind,
	}
	// The new node's record holds its key: build the key in place, and
	// fill in the data once the node is known to be new.
	r, key, dst := newRec(&h, len(path), len(data), data == nil)
	appendKey(key[:0], path)
	if t.nodes.Has(r) {
		return "", rec{}, fmt.Errorf("%w: %s", ErrNodeExists, path)
	}
	if p.kind == Ephemeral {
		return "", rec{}, fmt.Errorf("%w: %s", ErrNoChildrenForEphemerals, path)
	}
	ref, err := t.internACL(acl, 0)
	if err != nil {
		return "", rec{}, err
	}
	r.setACL(ref)
	copy(dst, data)
	p.cversion++
	p.pzxid = tx.Zxid
	p.numChildren++
	p.seq++
	newParent := parent.with(&p)
	t.putRec(newParent)
	t.putRec(r)
	t.size += int64(len(path) + len(data))
	switch kind {
	case Ephemeral:
		t.putEph(ephItem{owner: owner, path: path})
	case Container, TTL:
		t.putReap(path)
	}
	t.quotaCreated(path, data)
	tx.Events = append(tx.Events,
		Event{Type: EventNodeCreated, Path: path, Zxid: tx.Zxid, ACL: t.aclPtr(r)},
		Event{Type: EventNodeChildrenChanged, Path: parentPath, Zxid: tx.Zxid, ACL: t.aclPtr(newParent)})
	return path, r, nil
}

// Delete deletes the node at path if its version is version (-1: any). On
// success it appends NodeDeleted(path) and NodeChildrenChanged(parent) to
// tx.Events. It needs DELETE on the parent, checked before the node is
// looked up (so a missing node under a parent the writer may not delete
// from is ErrNoAuth, as in ZooKeeper).
//
// Errors, in this order: ErrBadArguments (invalid path, "/", or one of
// ZooKeeper's system nodes: SystemRoot, QuotaRoot, ConfigPath), ErrNoNode
// (no parent), ErrNoAuth, ErrNoNode, ErrBadVersion, ErrNotEmpty.
func (t *Tree) Delete(path string, version int32, tx *Tx) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	if isSystemNode(path) {
		return fmt.Errorf("%w: cannot delete %s", ErrBadArguments, path)
	}
	if tx.Auth != nil {
		parentPath := parentOf(path)
		parent := t.lookup(parentPath)
		if !parent.ok() {
			return fmt.Errorf("%w: parent of %s", ErrNoNode, path)
		}
		if err := t.allowed(tx, parent, PermDelete, parentPath); err != nil {
			return err
		}
	}
	r := t.lookup(path)
	if !r.ok() {
		return fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	n := r.node()
	if version != -1 && version != n.version {
		return fmt.Errorf("%w: %s has version %d, not %d", ErrBadVersion, path, n.version, version)
	}
	if n.numChildren != 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, path)
	}
	t.remove(path, r, &n, tx)
	return nil
}

// remove deletes a childless, non-root node known to exist: record r,
// whose header is n.
func (t *Tree) remove(path string, r rec, n *node, tx *Tx) {
	parentPath := parentOf(path)
	parent := t.lookup(parentPath)
	p := parent.node()
	p.cversion++
	p.pzxid = tx.Zxid
	p.numChildren--
	newParent := parent.with(&p)
	t.delRec(r)
	t.putRec(newParent)
	t.size -= int64(len(path)) + int64(r.dataLen())
	acl := t.aclPtr(r) // stays valid: entries are immutable
	t.releaseACL(n.acl)
	switch n.kind {
	case Ephemeral:
		t.delEph(ephItem{owner: n.aux, path: path})
	case Container, TTL:
		t.delReap(path)
	}
	t.quotaRemoved(path, r.data())
	tx.Events = append(tx.Events,
		Event{Type: EventNodeDeleted, Path: path, Zxid: tx.Zxid, ACL: acl},
		Event{Type: EventNodeChildrenChanged, Path: parentPath, Zxid: tx.Zxid, ACL: t.aclPtr(newParent)})
}

// SetData replaces the data of the node at path if its version is version
// (-1: any), increments the version (wrapping at int32 overflow, as
// ZooKeeper does) and sets mzxid and mtime from tx. It returns the new Stat
// and appends NodeDataChanged(path) to tx.Events. The data is copied; nil
// is null data, as in Create. It needs WRITE on the node.
//
// Errors, in this order: ErrBadArguments (invalid path, data too large),
// ErrNoNode, ErrNoAuth, ErrBadVersion.
func (t *Tree) SetData(path string, data []byte, version int32, tx *Tx) (Stat, error) {
	r, err := t.setData(path, data, version, tx)
	if err != nil {
		return Stat{}, err
	}
	return t.stat(r), nil
}

func (t *Tree) setData(path string, data []byte, version int32, tx *Tx) (rec, error) {
	if err := ValidatePath(path); err != nil {
		return rec{}, err
	}
	if err := t.checkData(data); err != nil {
		return rec{}, err
	}
	old := t.lookup(path)
	if !old.ok() {
		return rec{}, fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	if err := t.allowed(tx, old, PermWrite, path); err != nil {
		return rec{}, err
	}
	m := old.node()
	if version != -1 && version != m.version {
		return rec{}, fmt.Errorf("%w: %s has version %d, not %d", ErrBadVersion, path, m.version, version)
	}
	m.version++
	m.mzxid = tx.Zxid
	m.mtime = tx.Now
	r := makeRec(&m, old.key(), data)
	t.putRec(r)
	t.size += int64(len(data)) - int64(old.dataLen())
	t.quotaDataSet(path, old.data(), data)
	tx.Events = append(tx.Events, Event{Type: EventNodeDataChanged, Path: path, Zxid: tx.Zxid, ACL: t.aclPtr(r)})
	return r, nil
}

// ReapContainer deletes the node at path iff it is a container that has had
// a child (Cversion > 0) and has none now. Otherwise it returns an error
// wrapping ErrNotReapable (and also ErrNoNode when there is no such node)
// and changes nothing. Events are those of Delete.
func (t *Tree) ReapContainer(path string, tx *Tx) error {
	return t.reapNode(path, Container, tx)
}

// ReapTTL deletes the node at path iff it is a TTL node without children
// whose TTL has run out since its last data change (Mtime+TTL < tx.Now).
// Otherwise it returns an error wrapping ErrNotReapable (and also ErrNoNode
// when there is no such node) and changes nothing. Events are those of
// Delete.
func (t *Tree) ReapTTL(path string, tx *Tx) error {
	return t.reapNode(path, TTL, tx)
}

// reapNode is the server's own delete: no ACL applies.
func (t *Tree) reapNode(path string, kind Kind, tx *Tx) error {
	r := t.lookup(path)
	if !r.ok() {
		return fmt.Errorf("%w: %w: %s", ErrNotReapable, ErrNoNode, path)
	}
	n := r.node()
	if n.kind != kind {
		return fmt.Errorf("%w: %s is a %s node, not %s", ErrNotReapable, path, n.kind, kind)
	}
	if !r.reapable(tx.Now) {
		return fmt.Errorf("%w: %s", ErrNotReapable, path)
	}
	t.remove(path, r, &n, tx)
	return nil
}

// OpType is the type of one operation of a Multi.
type OpType uint8

// The operation types of a Multi.
const (
	// OpCheck checks that a node exists with the given version (-1: any).
	OpCheck OpType = iota + 1
	// OpCreate creates a node, as Create.
	OpCreate
	// OpDelete deletes a node, as Delete.
	OpDelete
	// OpSetData sets a node's data, as SetData.
	OpSetData
)

// String returns the operation type's name.
func (o OpType) String() string {
	switch o {
	case OpCheck:
		return "check"
	case OpCreate:
		return "create"
	case OpDelete:
		return "delete"
	case OpSetData:
		return "setData"
	}
	return fmt.Sprintf("OpType(%d)", uint8(o))
}

// Op is one operation of a Multi. Fields that do not apply to Type are
// ignored: Version applies to check, delete and setData; Data to create and
// setData; Kind, Sequential, Owner, TTL and ACL to create.
type Op struct {
	Type       OpType
	Path       string
	Data       []byte
	Version    int32
	Kind       Kind
	Sequential bool
	Owner      int64
	TTL        int64
	ACL        []ACL
}

// OpResult is the outcome of one operation of a Multi. On success Err is
// nil; a create reports the created Path and its Stat, a setData its new
// Stat; check and delete report neither.
type OpResult struct {
	Type OpType
	Path string
	Stat Stat
	Err  error
}

// Multi applies ops atomically, each seeing the effects of the earlier
// ones (their ACL checks too: a node created by an earlier op is checked
// with the ACL it was given), all with tx's zxid, time and Authorizer.
// Either all succeed, and their events
// are appended to tx.Events in op order, or none is applied: if op k fails,
// the tree and tx.Events are left unchanged, results before k have Err
// ErrRolledBack, result k has op k's error, results after k have Err
// ErrRuntimeInconsistency, and Multi returns op k's error. There is always
// one result per op; an empty multi succeeds.
func (t *Tree) Multi(ops []Op, tx *Tx) ([]OpResult, error) {
	results := make([]OpResult, len(ops))
	if len(ops) == 0 {
		return results, nil
	}
	// One op undoes its own partial changes (apply changes nothing when
	// it fails); more are logged, to be undone on failure (undo.go).
	if len(ops) > 1 {
		t.beginUndo()
	}
	sub := Tx{Zxid: tx.Zxid, Now: tx.Now, Auth: tx.Auth}
	for i, op := range ops {
		r, err := t.apply(op, &sub)
		if err == nil {
			results[i] = r
			continue
		}
		if len(ops) > 1 {
			t.endUndo(true)
		}
		for j := range ops {
			results[j] = OpResult{Type: ops[j].Type}
			switch {
			case j < i:
				results[j].Err = ErrRolledBack
			case j == i:
				results[j].Err = err
			default:
				results[j].Err = ErrRuntimeInconsistency
			}
		}
		return results, err
	}
	if len(ops) > 1 {
		t.endUndo(false)
	}
	tx.Events = append(tx.Events, sub.Events...)
	return results, nil
}

// apply runs one op; on error it has changed nothing.
func (t *Tree) apply(op Op, tx *Tx) (OpResult, error) {
	r := OpResult{Type: op.Type}
	switch op.Type {
	case OpCheck:
		if err := ValidatePath(op.Path); err != nil {
			return r, err
		}
		n := t.lookup(op.Path)
		if !n.ok() {
			return r, fmt.Errorf("%w: %s", ErrNoNode, op.Path)
		}
		if err := t.allowed(tx, n, PermRead, op.Path); err != nil {
			return r, err
		}
		if v := n.node().version; op.Version != -1 && op.Version != v {
			return r, fmt.Errorf("%w: %s has version %d, not %d", ErrBadVersion, op.Path, v, op.Version)
		}
	case OpCreate:
		path, n, err := t.create(op.Path, op.Data, op.Kind, op.Sequential, op.Owner, op.TTL, op.ACL, tx)
		if err != nil {
			return r, err
		}
		r.Path, r.Stat = path, t.stat(n)
	case OpDelete:
		if err := t.Delete(op.Path, op.Version, tx); err != nil {
			return r, err
		}
	case OpSetData:
		n, err := t.setData(op.Path, op.Data, op.Version, tx)
		if err != nil {
			return r, err
		}
		r.Stat = t.stat(n)
	default:
		return r, fmt.Errorf("%w: unknown op type %d", ErrBadArguments, uint8(op.Type))
	}
	return r, nil
}
