package watch

import (
	"math/bits"
	"slices"
	"sync"

	"github.com/coordd/coordd/tree"
)

// Kind selects a watch table. Kinds are bits and may be combined.
type Kind uint8

// The watch kinds. Exists-watches are Data watches, as in ZooKeeper's server.
const (
	// Data watches are set by getData and exists; they fire on NodeCreated,
	// NodeDataChanged and NodeDeleted.
	Data Kind = 1 << iota
	// Child watches are set by getChildren; they fire on NodeChildrenChanged
	// and NodeDeleted.
	Child
	// Any is both kinds, for Remove.
	Any = Data | Child
)

// String returns "data", "child", "any" or "none".
func (k Kind) String() string {
	switch k & Any {
	case Data:
		return "data"
	case Child:
		return "child"
	case Any:
		return "any"
	}
	return "none"
}

// Notification is an event to deliver to one session.
type Notification struct {
	Session int64
	Event   tree.Event
}

// StatReader is the part of the tree Reregister needs. Exists returns the
// node's stat, or an error (wrapping tree.ErrNoNode) when the node is absent.
type StatReader interface {
	Exists(path string) (tree.Stat, error)
}

// Manager is a server's table of one-shot watches. It is safe for concurrent
// use. The zero value is not usable; call NewManager.
type Manager struct {
	mu sync.Mutex
	// byPath maps a path to the watch kinds each session holds on it.
	byPath map[string]*pathWatches
	// bySession maps a session to the watch kinds it holds on each path. The
	// path strings are shared with byPath's entries.
	bySession map[int64]map[string]Kind
	n         int // registrations; a watch of both kinds counts twice
}

// pathWatches are the watches on one path. Most watched paths have a single
// watcher, which is kept inline; the map is made only for a second one.
type pathWatches struct {
	path  string // the interned path, shared with the bySession keys
	one   int64  // the only session, when many is nil and oneK != 0
	oneK  Kind
	many  map[int64]Kind // every session, once a path has had two watchers
	count int            // sessions watching this path
}

func (pw *pathWatches) get(s int64) Kind {
	if pw.many != nil {
		return pw.many[s]
	}
	if pw.oneK != 0 && pw.one == s {
		return pw.oneK
	}
	return 0
}

// set stores kind k (nonzero) for session s.
func (pw *pathWatches) set(s int64, k Kind) {
	if pw.many != nil {
		if _, ok := pw.many[s]; !ok {
			pw.count++
		}
		pw.many[s] = k
		return
	}
	if pw.oneK == 0 || pw.one == s {
		if pw.oneK == 0 {
			pw.count++
		}
		pw.one, pw.oneK = s, k
		return
	}
	pw.many = map[int64]Kind{pw.one: pw.oneK, s: k}
	pw.oneK = 0
	pw.count++
}

// del removes session s, which must be present.
func (pw *pathWatches) del(s int64) {
	pw.count--
	if pw.many != nil {
		delete(pw.many, s)
		return
	}
	pw.oneK = 0
}

// NewManager returns an empty Manager.
func NewManager() *Manager {
	return &Manager{
		byPath:    make(map[string]*pathWatches),
		bySession: make(map[int64]map[string]Kind),
	}
}

func popcount(k Kind) int { return bits.OnesCount8(uint8(k & Any)) }

// setLocked sets session s's watches on path to exactly k (possibly 0),
// keeping both indexes and the count in step.
func (m *Manager) setLocked(s int64, path string, k Kind) {
	k &= Any
	pw := m.byPath[path]
	var old Kind
	if pw != nil {
		old = pw.get(s)
	}
	if old == k {
		return
	}
	m.n += popcount(k) - popcount(old)
	if k == 0 {
		pw.del(s)
		if pw.count == 0 {
			delete(m.byPath, path)
		}
		sm := m.bySession[s]
		delete(sm, path)
		if len(sm) == 0 {
			delete(m.bySession, s)
		}
		return
	}
	if pw == nil {
		pw = &pathWatches{path: path}
		m.byPath[path] = pw
	}
	pw.set(s, k)
	sm := m.bySession[s]
	if sm == nil {
		sm = make(map[string]Kind)
		m.bySession[s] = sm
	}
	sm[pw.path] = k
}

// Add registers a watch of the given kind (Data or Child; Any registers both)
// by session on path. Adding a watch the session already has does nothing.
//
// Add must be called in the same critical section as the read that sets the
// watch (see the package documentation); the node's existence is the
// caller's business (getData and getChildren on an absent node register
// nothing; exists registers a Data watch either way).
func (m *Manager) Add(session int64, path string, kind Kind) {
	kind &= Any
	if kind == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var old Kind
	if pw := m.byPath[path]; pw != nil {
		old = pw.get(session)
	}
	m.setLocked(session, path, old|kind)
}

// Remove removes session's watches of the given kind (Any: both) on path and
// reports whether it removed anything.
func (m *Manager) Remove(session int64, path string, kind Kind) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pw := m.byPath[path]
	if pw == nil {
		return false
	}
	old := pw.get(session)
	if old&kind == 0 {
		return false
	}
	m.setLocked(session, path, old&^kind)
	return true
}

// Paths returns the number of paths watched, and Sessions the number of
// sessions holding watches (for ZooKeeper's wchs).
func (m *Manager) Paths() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byPath)
}

// Sessions returns the number of sessions holding watches.
func (m *Manager) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.bySession)
}

// Has reports whether session holds a watch of any of the given kinds on
// path.
func (m *Manager) Has(session int64, path string, kind Kind) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pw := m.byPath[path]
	return pw != nil && pw.get(session)&kind != 0
}

// RemoveSession removes every watch of session and returns how many
// registrations it removed (a path watched with both kinds counts twice).
// It costs O(the session's watches).
func (m *Manager) RemoveSession(session int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	sm := m.bySession[session]
	removed := 0
	for path, k := range sm {
		removed += popcount(k)
		pw := m.byPath[path]
		pw.del(session)
		if pw.count == 0 {
			delete(m.byPath, path)
		}
	}
	delete(m.bySession, session)
	m.n -= removed
	return removed
}

// fires returns the watch kinds an event of type t fires, or 0 for an
// unknown type.
func fires(t tree.EventType) Kind {
	switch t {
	case tree.EventNodeCreated, tree.EventNodeDataChanged:
		return Data
	case tree.EventNodeChildrenChanged:
		return Child
	case tree.EventNodeDeleted:
		return Any
	}
	return 0
}

// Trigger fires and removes the watches the events fire, taking the events in
// order, and returns the notifications to deliver, in order: for each event,
// one notification per session whose watches it fired, sessions in ascending
// id order. Each Notification carries the event unchanged (including its
// Zxid).
//
//   - NodeCreated and NodeDataChanged fire the Data watches on the path;
//   - NodeChildrenChanged fires the Child watches on the path;
//   - NodeDeleted fires both kinds on the path (one notification per session
//     even if it held both).
//
// Events of unknown type are ignored. Trigger costs O(watchers of the events'
// paths), independent of the size of the table. It returns nil when nothing
// fires.
func (m *Manager) Trigger(events []tree.Event) []Notification {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Notification
	var sessions []int64
	for _, ev := range events {
		mask := fires(ev.Type)
		pw := m.byPath[ev.Path]
		if mask == 0 || pw == nil {
			continue
		}
		sessions = sessions[:0]
		if pw.many == nil {
			if pw.oneK&mask != 0 {
				sessions = append(sessions, pw.one)
			}
		} else {
			for s, k := range pw.many {
				if k&mask != 0 {
					sessions = append(sessions, s)
				}
			}
			slices.Sort(sessions)
		}
		path := pw.path // pw may be deleted below
		for _, s := range sessions {
			m.setLocked(s, path, pw.get(s)&^mask)
			out = append(out, Notification{Session: s, Event: ev})
		}
	}
	return out
}

// Reset drops every watch, as after a snapshot restore (whose clients must
// reconnect and re-send their watches).
func (m *Manager) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byPath = make(map[string]*pathWatches)
	m.bySession = make(map[int64]map[string]Kind)
	m.n = 0
}

// Len returns the number of registrations (a path watched with both kinds by
// one session counts twice).
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// Watches returns the paths session watches with a Data watch and with a
// Child watch, each sorted. It costs O(the session's watches).
func (m *Manager) Watches(session int64) (data, child []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for path, k := range m.bySession[session] {
		if k&Data != 0 {
			data = append(data, path)
		}
		if k&Child != 0 {
			child = append(child, path)
		}
	}
	slices.Sort(data)
	slices.Sort(child)
	return data, child
}

// Reregister implements ZooKeeper's SetWatches: a client that moved to this
// server re-sends its pending watches with relZxid, the last zxid it saw. The
// watches whose node changed after relZxid fire at once (and are returned);
// the rest are registered. As in ZooKeeper's DataTree.setWatches:
//
//   - data path: absent -> NodeDeleted; Mzxid > relZxid -> NodeDataChanged
//     (Zxid = Mzxid); else a Data watch is registered;
//   - exist path: present -> NodeCreated (Zxid = Czxid); else a Data watch is
//     registered;
//   - child path: absent -> NodeDeleted; Pzxid > relZxid -> NodeChildrenChanged
//     (Zxid = Pzxid); else a Child watch is registered.
//
// A NodeDeleted produced here carries Zxid 0: the zxid of the delete is not
// known any more. Any error from st.Exists counts as absent.
//
// Notifications come in the order data, exist, child paths, at most one per
// (event type, path): a path absent in both the data and the child list gives
// one NodeDeleted. A notification consumes the session's watches it covers on
// its path, as a Trigger would — both those being re-sent in this call and
// any already registered here — so a watch never fires twice.
//
// Reregister reads st before taking the Manager's lock; the caller must keep
// the tree from changing until it returns (see the package documentation).
func (m *Manager) Reregister(session int64, relZxid int64, data, exist, child []string, st StatReader) []Notification {
	type key struct {
		t    tree.EventType
		path string
	}
	var out []Notification
	fired := make(map[key]bool)
	consumed := make(map[string]Kind) // path -> kinds fired on it
	fire := func(t tree.EventType, path string, zxid int64) {
		k := key{t, path}
		if fired[k] {
			return
		}
		fired[k] = true
		consumed[path] |= fires(t)
		out = append(out, Notification{Session: session, Event: tree.Event{Type: t, Path: path, Zxid: zxid}})
	}
	type reg struct {
		path string
		kind Kind
	}
	var regs []reg
	exists := func(path string) (tree.Stat, bool) {
		s, err := st.Exists(path)
		return s, err == nil
	}
	for _, p := range data {
		switch s, ok := exists(p); {
		case !ok:
			fire(tree.EventNodeDeleted, p, 0)
		case s.Mzxid > relZxid:
			fire(tree.EventNodeDataChanged, p, s.Mzxid)
		default:
			regs = append(regs, reg{p, Data})
		}
	}
	for _, p := range exist {
		if s, ok := exists(p); ok {
			fire(tree.EventNodeCreated, p, s.Czxid)
		} else {
			regs = append(regs, reg{p, Data})
		}
	}
	for _, p := range child {
		switch s, ok := exists(p); {
		case !ok:
			fire(tree.EventNodeDeleted, p, 0)
		case s.Pzxid > relZxid:
			fire(tree.EventNodeChildrenChanged, p, s.Pzxid)
		default:
			regs = append(regs, reg{p, Child})
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	for path, k := range consumed {
		if pw := m.byPath[path]; pw != nil {
			m.setLocked(session, path, pw.get(session)&^k)
		}
	}
	for _, r := range regs {
		if r.kind&consumed[r.path] != 0 {
			continue
		}
		var old Kind
		if pw := m.byPath[r.path]; pw != nil {
			old = pw.get(session)
		}
		m.setLocked(session, r.path, old|r.kind)
	}
	return out
}
