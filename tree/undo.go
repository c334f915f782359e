package tree

// Rolling back a failed Multi.
//
// A multi that fails at its k-th op must leave the tree as it found it. The
// tree used to take a Clone before the first op and put it back on
// failure; but a Clone shares every btree node between the two trees, so
// every later write copied the nodes it touched, whether the multi failed
// or not: a multi of 100 creates copied about a hundred btree leaves, and
// loading a million znodes that way left a third of the heap as holes
// between live btree nodes (TestMultiLeavesNoHoles). Instead, while a
// multi runs, every change to the indexes is logged with what it replaced,
// and a failure undoes the log backwards. The ACL table, which most multis
// never touch, is cloned on the first change a multi makes to it.

// undoLog is what a running Multi changed.
type undoLog struct {
	nodes []undoNode
	eph   []undoEph
	reap  []undoReap
	acls  *aclTable // the table before the multi's first change to it
	size  int64
	// quotas is replaced, never modified (see setQuota): keeping the
	// pointer keeps the set.
	quotas map[string]struct{}
}

// undoNode: rec was put or deleted; old is what its key held before, if
// had.
type undoNode struct {
	rec, old rec
	had      bool
}

type undoEph struct {
	e        ephItem
	inserted bool // else deleted
}

type undoReap struct {
	path     string
	inserted bool
}

// putRec puts r in the btree in place of the record of its key, if any.
func (t *Tree) putRec(r rec) {
	old, had := t.nodes.ReplaceOrInsert(r)
	if t.undo != nil {
		t.undo.nodes = append(t.undo.nodes, undoNode{r, old, had})
	}
}

// delRec deletes the record of r's key.
func (t *Tree) delRec(r rec) {
	old, had := t.nodes.Delete(r)
	if t.undo != nil && had {
		t.undo.nodes = append(t.undo.nodes, undoNode{r, old, true})
	}
}

func (t *Tree) putEph(e ephItem) {
	if _, had := t.eph.ReplaceOrInsert(e); t.undo != nil && !had {
		t.undo.eph = append(t.undo.eph, undoEph{e, true})
	}
}

func (t *Tree) delEph(e ephItem) {
	if _, had := t.eph.Delete(e); t.undo != nil && had {
		t.undo.eph = append(t.undo.eph, undoEph{e, false})
	}
}

func (t *Tree) putReap(p string) {
	if _, had := t.reap.ReplaceOrInsert(p); t.undo != nil && !had {
		t.undo.reap = append(t.undo.reap, undoReap{p, true})
	}
}

func (t *Tree) delReap(p string) {
	if _, had := t.reap.Delete(p); t.undo != nil && had {
		t.undo.reap = append(t.undo.reap, undoReap{p, false})
	}
}

// internACL is t.acls.intern, logged.
func (t *Tree) internACL(acl []ACL, aversion int32) (uint32, error) {
	if aversion != 0 || !IsOpen(acl) {
		t.saveACLs()
	}
	return t.acls.intern(acl, aversion)
}

// releaseACL is t.acls.release, logged.
func (t *Tree) releaseACL(ref uint32) {
	if ref != openRef {
		t.saveACLs()
	}
	t.acls.release(ref)
}

// saveACLs keeps the ACL table as it was before the running multi's first
// change to it.
func (t *Tree) saveACLs() {
	if t.undo != nil && t.undo.acls == nil {
		c := t.acls.clone()
		t.undo.acls = &c
	}
}

// beginUndo starts logging changes.
func (t *Tree) beginUndo() {
	t.undo = &undoLog{size: t.size, quotas: t.quotas}
}

// endUndo stops logging; with rollback it first undoes every change
// logged, last first.
func (t *Tree) endUndo(rollback bool) {
	u := t.undo
	t.undo = nil
	if !rollback {
		return
	}
	for i := len(u.nodes) - 1; i >= 0; i-- {
		if x := u.nodes[i]; x.had {
			t.nodes.ReplaceOrInsert(x.old)
		} else {
			t.nodes.Delete(x.rec)
		}
	}
	for i := len(u.eph) - 1; i >= 0; i-- {
		if x := u.eph[i]; x.inserted {
			t.eph.Delete(x.e)
		} else {
			t.eph.ReplaceOrInsert(x.e)
		}
	}
	for i := len(u.reap) - 1; i >= 0; i-- {
		if x := u.reap[i]; x.inserted {
			t.reap.Delete(x.path)
		} else {
			t.reap.ReplaceOrInsert(x.path)
		}
	}
	if u.acls != nil {
		t.acls = *u.acls
	}
	t.size, t.quotas = u.size, u.quotas
}
