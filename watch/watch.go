package watch

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/coordd/coordd/tree"
)

// Kind is a set of watch kinds. Kinds are bits and may be combined.
type Kind uint8

// The watch kinds. Exists-watches are Data watches, as in ZooKeeper's server.
const (
	// Data watches are one-shot, set by getData and exists; they fire on
	// NodeCreated, NodeDataChanged and NodeDeleted of their path.
	Data Kind = 1 << iota
	// Child watches are one-shot, set by getChildren; they fire on
	// NodeChildrenChanged and NodeDeleted of their path.
	Child
	// Persistent watches are set by addWatch(PERSISTENT); they fire on all
	// four event types of their path and stay registered.
	Persistent
	// PersistentRecursive watches are set by addWatch(PERSISTENT_RECURSIVE);
	// they fire on NodeCreated, NodeDataChanged and NodeDeleted of their path
	// and of every path below it, never on NodeChildrenChanged, and stay
	// registered.
	PersistentRecursive
)

// Any is both one-shot kinds, Data and Child, as Add and Remove have always
// taken it. ZooKeeper's WatcherType Any, which also covers the persistent
// kinds, is [WatcherAny].
const Any = Data | Child

// AllKinds is every kind.
const AllKinds = Data | Child | Persistent | PersistentRecursive

// String returns the kinds' names joined by "|" ("data", "child",
// "persistent", "persistentRecursive"; the two one-shot kinds together are
// "any"), or "none".
func (k Kind) String() string {
	var parts []string
	switch k & Any {
	case Data:
		parts = append(parts, "data")
	case Child:
		parts = append(parts, "child")
	case Any:
		parts = append(parts, "any")
	}
	if k&Persistent != 0 {
		parts = append(parts, "persistent")
	}
	if k&PersistentRecursive != 0 {
		parts = append(parts, "persistentRecursive")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// WatcherType is ZooKeeper's Watcher.WatcherType, the argument of
// removeWatches and checkWatches, with ZooKeeper's numbers (they travel on
// the wire).
type WatcherType int32

// The watcher types. Each selects exactly the kinds [WatcherType.Kinds] says.
const (
	WatcherChildren            WatcherType = 1 // one-shot Child watches only
	WatcherData                WatcherType = 2 // one-shot Data watches only (exists-watches included)
	WatcherAny                 WatcherType = 3 // every kind, the persistent ones included
	WatcherPersistent          WatcherType = 4 // Persistent watches only
	WatcherPersistentRecursive WatcherType = 5 // PersistentRecursive watches only
)

// Kinds returns the kinds t selects, or 0 if ZooKeeper defines no such type.
func (t WatcherType) Kinds() Kind {
	switch t {
	case WatcherChildren:
		return Child
	case WatcherData:
		return Data
	case WatcherAny:
		return AllKinds
	case WatcherPersistent:
		return Persistent
	case WatcherPersistentRecursive:
		return PersistentRecursive
	}
	return 0
}

// String returns ZooKeeper's name for the type, or "WatcherType(n)".
func (t WatcherType) String() string {
	switch t {
	case WatcherChildren:
		return "Children"
	case WatcherData:
		return "Data"
	case WatcherAny:
		return "Any"
	case WatcherPersistent:
		return "Persistent"
	case WatcherPersistentRecursive:
		return "PersistentRecursive"
	}
	return fmt.Sprintf("WatcherType(%d)", int32(t))
}

// Errors of RemoveWatches and CheckWatches. They are returned wrapped with the
// path and type; match them with errors.Is.
var (
	// ErrNoWatcher: the session has no watch of the selected kinds on the
	// path (ZooKeeper's NoWatcher, -121).
	ErrNoWatcher = errors.New("watch: no watcher")
	// ErrUnknownWatcherType: the type is not one of ZooKeeper's five
	// (ZooKeeper 3.9 answers such a request with MarshallingError, -5).
	ErrUnknownWatcherType = errors.New("watch: unknown watcher type")
)

// Notification is an event to deliver to one session.
type Notification struct {
	Session int64
	Event   tree.Event
	// Kinds are the kinds of the session's watches the event matched: Data
	// and Child on the event's path (now removed), Persistent on the path,
	// PersistentRecursive on the path or an ancestor (both still
	// registered). A client library dispatches the notification to its
	// watchers of these kinds, as ZooKeeper's Java client does from its own
	// tables.
	Kinds Kind
}

// StatReader is the part of the tree Reregister needs. Exists returns the
// node's stat, or an error (wrapping tree.ErrNoNode) when the node is absent.
type StatReader interface {
	Exists(path string) (tree.Stat, error)
}

// Manager is a server's watch table. It is safe for concurrent use. The zero
// value is not usable; call NewManager.
type Manager struct {
	mu sync.Mutex
	// byPath maps a path to the watch kinds each session holds on it.
	byPath map[string]*pathWatches
	// bySession maps a session to the watch kinds it holds on each path. The
	// path strings are shared with byPath's entries.
	bySession map[int64]map[string]Kind
	// rec maps a path to the sessions holding a PersistentRecursive watch on
	// it (each with kind PersistentRecursive): the only index an event's
	// ancestors are looked up in. The keys are byPath's strings.
	rec  map[string]*pathWatches
	nrec int // PersistentRecursive registrations; 0 skips the ancestor walk
	n    int // registrations: one per (session, path, kind)
	// byKind counts the registrations of each kind, by the kind's bit
	// (Data, Child, Persistent, PersistentRecursive).
	byKind [4]int

	matches []match // Trigger's scratch space, reused under mu
}

// match is one session's share of an event, while Trigger collects them.
type match struct {
	session int64
	kinds   Kind
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

// appendMatches appends, for each session on the path, the kinds an event
// of type t fires among its watches there, when there are any.
func (pw *pathWatches) appendMatches(dst []match, t tree.EventType) []match {
	if pw.many == nil {
		if k := firesAt(t, pw.oneK); k != 0 {
			dst = append(dst, match{pw.one, k})
		}
		return dst
	}
	for s, k := range pw.many {
		if k = firesAt(t, k); k != 0 {
			dst = append(dst, match{s, k})
		}
	}
	return dst
}

// NewManager returns an empty Manager.
func NewManager() *Manager {
	return &Manager{
		byPath:    make(map[string]*pathWatches),
		bySession: make(map[int64]map[string]Kind),
		rec:       make(map[string]*pathWatches),
	}
}

func popcount(k Kind) int { return bits.OnesCount8(uint8(k & AllKinds)) }

// countKinds adds d to the count of each kind in k.
func (m *Manager) countKinds(k Kind, d int) {
	for i := range m.byKind {
		if k&(1<<i) != 0 {
			m.byKind[i] += d
		}
	}
}

// setLocked sets session s's watches on path to exactly k (possibly 0),
// keeping the indexes and the counts in step.
func (m *Manager) setLocked(s int64, path string, k Kind) {
	k &= AllKinds
	pw := m.byPath[path]
	var old Kind
	if pw != nil {
		old = pw.get(s)
	}
	if old == k {
		return
	}
	m.n += popcount(k) - popcount(old)
	m.countKinds(old&^k, -1)
	m.countKinds(k&^old, 1)
	if pw == nil {
		pw = &pathWatches{path: path}
		m.byPath[path] = pw
	}
	if (old^k)&PersistentRecursive != 0 {
		m.setRecLocked(s, pw.path, k&PersistentRecursive != 0)
	}
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
	pw.set(s, k)
	sm := m.bySession[s]
	if sm == nil {
		sm = make(map[string]Kind)
		m.bySession[s] = sm
	}
	sm[pw.path] = k
}

// setRecLocked adds or removes session s in the recursive index of path,
// which must be byPath's interned string.
func (m *Manager) setRecLocked(s int64, path string, on bool) {
	rw := m.rec[path]
	if on {
		if rw == nil {
			rw = &pathWatches{path: path}
			m.rec[path] = rw
		}
		rw.set(s, PersistentRecursive)
		m.nrec++
		return
	}
	rw.del(s)
	if rw.count == 0 {
		delete(m.rec, path)
	}
	m.nrec--
}

// kindsLocked returns session's kinds on path.
func (m *Manager) kindsLocked(session int64, path string) Kind {
	if pw := m.byPath[path]; pw != nil {
		return pw.get(session)
	}
	return 0
}

// Add registers watches of the given kinds by session on path: any
// combination of Data, Child, Persistent and PersistentRecursive (Any is
// Data and Child). Adding a watch the session already has does nothing; a
// session holds each kind on a path at most once, and its kinds on one path
// are independent of one another (a one-shot watch next to a persistent one
// on the same path fires and goes without touching it).
//
// Add must be called in the same critical section as the read that sets the
// watch (see the package documentation); the node's existence is the
// caller's business (getData and getChildren on an absent node register
// nothing; exists and addWatch register either way).
func (m *Manager) Add(session int64, path string, kind Kind) {
	kind &= AllKinds
	if kind == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(session, path, m.kindsLocked(session, path)|kind)
}

// Remove removes session's watches of the given kinds on path (Any: both
// one-shot kinds; the persistent kinds only when named) and reports whether
// it removed anything. ZooKeeper's removeWatches is [Manager.RemoveWatches].
func (m *Manager) Remove(session int64, path string, kind Kind) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.kindsLocked(session, path)
	if old&kind == 0 {
		return false
	}
	m.setLocked(session, path, old&^kind)
	return true
}

// RemoveWatches implements ZooKeeper's removeWatches: it removes session's
// watches on path of the kinds t selects — Children: the one-shot child
// watch; Data: the one-shot data watch (set by getData or by exists, on a
// present or an absent node); Persistent; PersistentRecursive; Any: every
// kind — and leaves its other kinds alone. It returns an error wrapping
// ErrNoWatcher, and changes nothing, when the session has no watch of those
// kinds there, and one wrapping ErrUnknownWatcherType for a type ZooKeeper
// does not define.
func (m *Manager) RemoveWatches(session int64, path string, t WatcherType) error {
	kinds := t.Kinds()
	if kinds == 0 {
		return fmt.Errorf("%w %d", ErrUnknownWatcherType, int32(t))
	}
	if !m.Remove(session, path, kinds) {
		return fmt.Errorf("%w of type %v on %s", ErrNoWatcher, t, path)
	}
	return nil
}

// CheckWatches implements ZooKeeper's checkWatches: nil if session has a
// watch on path of a kind t selects (as for RemoveWatches), else an error
// wrapping ErrNoWatcher or ErrUnknownWatcherType. It changes nothing: a
// client that removes one of its watcher objects asks this and drops the
// object itself, and the server keeps the watch.
func (m *Manager) CheckWatches(session int64, path string, t WatcherType) error {
	kinds := t.Kinds()
	if kinds == 0 {
		return fmt.Errorf("%w %d", ErrUnknownWatcherType, int32(t))
	}
	m.mu.Lock()
	has := m.kindsLocked(session, path)&kinds != 0
	m.mu.Unlock()
	if !has {
		return fmt.Errorf("%w of type %v on %s", ErrNoWatcher, t, path)
	}
	return nil
}

// RemoveSession removes every watch of session, of every kind, and returns
// how many registrations it removed (as Len counts them). It costs O(the
// session's watches).
func (m *Manager) RemoveSession(session int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	sm := m.bySession[session]
	removed := 0
	for path, k := range sm {
		removed += popcount(k)
		m.countKinds(k, -1)
		if k&PersistentRecursive != 0 {
			m.setRecLocked(session, path, false)
		}
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

// fires returns the one-shot kinds an event of type t fires, or 0 for an
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

// firesAt returns the kinds an event of type t fires among kinds k held on
// the event's own path, or 0 for an unknown type.
func firesAt(t tree.EventType, k Kind) Kind {
	f := fires(t)
	if f == 0 {
		return 0
	}
	f |= Persistent
	if t != tree.EventNodeChildrenChanged {
		f |= PersistentRecursive
	}
	return f & k
}

// parent returns the parent of an absolute path ("/" for "/a"), and false
// for "/" and for what is not an absolute path.
func parent(p string) (string, bool) {
	if len(p) < 2 || p[0] != '/' {
		return "", false
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", true
	}
	return p[:i], true
}

func sessionOrder(a, b match) int { return cmp.Compare(a.session, b.session) }

// Trigger fires the watches the events match, taking the events in order,
// and returns the notifications to deliver, in order: for each event, one
// notification per session with at least one matching watch — however many
// of its watches, of however many kinds, on the path and its ancestors, the
// event matches — sessions in ascending id order. This is what ZooKeeper
// sends (one notification per session per event; its Java client then
// dispatches it to every one of its watchers that matches);
// [Notification.Kinds] says which kinds matched. Each Notification carries
// the event unchanged (including its Zxid).
//
//   - NodeCreated and NodeDataChanged match Data watches on the path;
//   - NodeChildrenChanged matches Child watches on the path;
//   - NodeDeleted matches Data and Child watches on the path;
//   - every event type matches Persistent watches on the path;
//   - NodeCreated, NodeDataChanged and NodeDeleted match PersistentRecursive
//     watches on the path and on each of its ancestors ("/" included);
//     NodeChildrenChanged never does.
//
// Matched Data and Child watches are removed (one-shot); Persistent and
// PersistentRecursive ones stay. Events of unknown type are ignored.
//
// Cost per event: one map lookup for the path plus the watchers on it, and,
// only while some PersistentRecursive watch exists, one map lookup per
// ancestor of the path in an index holding only recursive watches, plus the
// recursive watchers found there: O(watchers on the path + depth + matched
// recursive watchers), independent of the number of watches in the table.
// Trigger returns nil when nothing fires.
func (m *Manager) Trigger(events []tree.Event) []Notification {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Notification
	for _, ev := range events {
		if fires(ev.Type) == 0 {
			continue
		}
		ms := m.matches[:0]
		pw := m.byPath[ev.Path]
		if pw != nil {
			ms = pw.appendMatches(ms, ev.Type)
		}
		if m.nrec > 0 && ev.Type != tree.EventNodeChildrenChanged {
			for a, ok := parent(ev.Path); ok; a, ok = parent(a) {
				if rw := m.rec[a]; rw != nil {
					ms = rw.appendMatches(ms, ev.Type)
				}
			}
		}
		if len(ms) > 1 {
			slices.SortFunc(ms, sessionOrder)
			j := 0
			for _, x := range ms[1:] {
				if x.session == ms[j].session {
					ms[j].kinds |= x.kinds
					continue
				}
				j++
				ms[j] = x
			}
			ms = ms[:j+1]
		}
		for _, x := range ms {
			if oneShot := x.kinds & Any; oneShot != 0 {
				path := pw.path // pw may be deleted by setLocked
				m.setLocked(x.session, path, pw.get(x.session)&^oneShot)
			}
			out = append(out, Notification{Session: x.session, Event: ev, Kinds: x.kinds})
		}
		m.matches = ms[:0]
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
	m.rec = make(map[string]*pathWatches)
	m.nrec = 0
	m.n = 0
	m.byKind = [4]int{}
}

// Len returns the number of registrations: one per (session, path, kind),
// so a path watched by one session with a Data and a Persistent watch counts
// twice, and an exists and a getData watch on one path (both Data) once.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// Stats are the sizes of the watch table (ZooKeeper's wchs).
type Stats struct {
	Sessions int // sessions holding at least one watch
	Paths    int // paths with at least one watch
	Watches  int // registrations, as Len counts them
	// The registrations of each kind; they add up to Watches.
	Data, Child, Persistent, PersistentRecursive int
}

// Stats returns the sizes of the table, in O(1).
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{
		Sessions: len(m.bySession), Paths: len(m.byPath), Watches: m.n,
		Data: m.byKind[0], Child: m.byKind[1], Persistent: m.byKind[2], PersistentRecursive: m.byKind[3],
	}
}

// Watches returns the paths session watches with a Data watch and with a
// Child watch, each sorted. It costs O(the session's watches). For every
// kind, see [Manager.SessionWatches].
func (m *Manager) Watches(session int64) (data, child []string) {
	w := m.SessionWatches(session)
	return w.Data, w.Child
}

// Paths lists a session's watched paths by kind, each list sorted; a path
// is in as many lists as the session has kinds of watch on it.
type Paths struct {
	Data                []string // one-shot data watches (getData and exists)
	Child               []string // one-shot child watches (getChildren)
	Persistent          []string
	PersistentRecursive []string
}

// SessionWatches returns every watch of session, by kind. It costs O(the
// session's watches · log of their number). A client re-registering its
// watches elsewhere sends the Data paths as its data or exist lists (the
// server does not keep which of the two set a Data watch; Reregister treats
// them alike on a present node unless it changed).
func (m *Manager) SessionWatches(session int64) Paths {
	m.mu.Lock()
	defer m.mu.Unlock()
	var w Paths
	for path, k := range m.bySession[session] {
		if k&Data != 0 {
			w.Data = append(w.Data, path)
		}
		if k&Child != 0 {
			w.Child = append(w.Child, path)
		}
		if k&Persistent != 0 {
			w.Persistent = append(w.Persistent, path)
		}
		if k&PersistentRecursive != 0 {
			w.PersistentRecursive = append(w.PersistentRecursive, path)
		}
	}
	slices.Sort(w.Data)
	slices.Sort(w.Child)
	slices.Sort(w.Persistent)
	slices.Sort(w.PersistentRecursive)
	return w
}

// Registration is one session's watches on one path.
type Registration struct {
	Session int64
	Path    string
	Kinds   Kind
}

// Registrations returns every (session, path) that holds a watch of one of
// kinds, with the session's kinds there (all of them, not only those
// asked for), by session then path. It costs O(n log n) in the number of
// (session, path) pairs of the table, under the table's lock: a dump for
// people (ZooKeeper's wchc and wchp, which ZooKeeper too warns are
// expensive), not for a busy path.
func (m *Manager) Registrations(kinds Kind) []Registration {
	m.mu.Lock()
	out := make([]Registration, 0, len(m.byPath))
	for s, paths := range m.bySession {
		for p, k := range paths {
			if k&kinds != 0 {
				out = append(out, Registration{Session: s, Path: p, Kinds: k})
			}
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Registration) int {
		if c := cmp.Compare(a.Session, b.Session); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// Reregister implements ZooKeeper's SetWatches: a client that moved to this
// server re-sends its pending one-shot watches with relZxid, the last zxid it
// saw. It is [Manager.ReregisterAll] without persistent watches; see there.
func (m *Manager) Reregister(session int64, relZxid int64, data, exist, child []string, st StatReader) []Notification {
	return m.ReregisterAll(session, SetWatches{RelZxid: relZxid, Data: data, Exist: exist, Child: child}, st)
}

// SetWatches is what a client re-sends on reconnecting (ZooKeeper's
// SetWatches2 record): the last zxid it saw and its watched paths by the
// call that set them.
type SetWatches struct {
	RelZxid             int64
	Data                []string // getData watches
	Exist               []string // exists watches
	Child               []string // getChildren watches
	Persistent          []string // addWatch(PERSISTENT)
	PersistentRecursive []string // addWatch(PERSISTENT_RECURSIVE)
}

// ReregisterAll implements ZooKeeper's SetWatches2. The one-shot watches
// whose node changed after sw.RelZxid fire at once (and are returned); the
// rest are registered. As in ZooKeeper's DataTree.setWatches:
//
//   - data path: absent -> NodeDeleted; Mzxid > RelZxid -> NodeDataChanged
//     (Zxid = Mzxid); else a Data watch is registered;
//   - exist path: present -> NodeCreated (Zxid = Czxid); else a Data watch is
//     registered;
//   - child path: absent -> NodeDeleted; Pzxid > RelZxid -> NodeChildrenChanged
//     (Zxid = Pzxid); else a Child watch is registered;
//   - persistent and persistent recursive paths are registered, present or
//     not, and fire nothing now, whatever changed meanwhile (ZooKeeper 3.8
//     and 3.9 alike: a client that must not miss a change re-reads).
//
// A NodeDeleted produced here carries Zxid 0: the zxid of the delete is not
// known any more. Any error from st.Exists counts as absent.
//
// Notifications come in the order data, exist, child paths, at most one per
// (event type, path): a path absent in both the data and the child list gives
// one NodeDeleted (ZooKeeper sends two; its client dispatches the second to
// nobody). A notification consumes the session's one-shot watches it covers
// on its path, as a Trigger would — both those being re-sent in this call and
// any already registered here — so a one-shot watch never fires twice; it
// never consumes a persistent watch. Its Kinds are the one-shot kinds it
// consumed plus the persistent kinds of the session (after this call) that
// match it, so a client dispatches it as ZooKeeper's Java client does.
//
// ReregisterAll reads st before taking the Manager's lock; the caller must
// keep the tree from changing until it returns (see the package
// documentation).
func (m *Manager) ReregisterAll(session int64, sw SetWatches, st StatReader) []Notification {
	type key struct {
		t    tree.EventType
		path string
	}
	var out []Notification
	fired := make(map[key]bool)
	resent := make(map[string]Kind) // one-shot kinds re-sent per path
	for _, p := range sw.Data {
		resent[p] |= Data
	}
	for _, p := range sw.Exist {
		resent[p] |= Data
	}
	for _, p := range sw.Child {
		resent[p] |= Child
	}
	fire := func(t tree.EventType, path string, zxid int64) {
		k := key{t, path}
		if fired[k] {
			return
		}
		fired[k] = true
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
	for _, p := range sw.Data {
		switch s, ok := exists(p); {
		case !ok:
			fire(tree.EventNodeDeleted, p, 0)
		case s.Mzxid > sw.RelZxid:
			fire(tree.EventNodeDataChanged, p, s.Mzxid)
		default:
			regs = append(regs, reg{p, Data})
		}
	}
	for _, p := range sw.Exist {
		if s, ok := exists(p); ok {
			fire(tree.EventNodeCreated, p, s.Czxid)
		} else {
			regs = append(regs, reg{p, Data})
		}
	}
	for _, p := range sw.Child {
		switch s, ok := exists(p); {
		case !ok:
			fire(tree.EventNodeDeleted, p, 0)
		case s.Pzxid > sw.RelZxid:
			fire(tree.EventNodeChildrenChanged, p, s.Pzxid)
		default:
			regs = append(regs, reg{p, Child})
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	consumed := make(map[string]Kind) // path -> one-shot kinds fired on it
	for i := range out {
		ev := out[i].Event
		f := fires(ev.Type)
		out[i].Kinds = f & (resent[ev.Path] | m.kindsLocked(session, ev.Path)) &^ consumed[ev.Path]
		consumed[ev.Path] |= f
	}
	for path, k := range consumed {
		if old := m.kindsLocked(session, path); old&k != 0 {
			m.setLocked(session, path, old&^k)
		}
	}
	for _, r := range regs {
		if r.kind&consumed[r.path] != 0 {
			continue
		}
		m.setLocked(session, r.path, m.kindsLocked(session, r.path)|r.kind)
	}
	for _, p := range sw.Persistent {
		m.setLocked(session, p, m.kindsLocked(session, p)|Persistent)
	}
	for _, p := range sw.PersistentRecursive {
		m.setLocked(session, p, m.kindsLocked(session, p)|PersistentRecursive)
	}
	for i := range out {
		ev := out[i].Event
		out[i].Kinds |= firesAt(ev.Type, m.kindsLocked(session, ev.Path)&^Any)
		if ev.Type != tree.EventNodeChildrenChanged && m.nrec > 0 {
			for a, ok := parent(ev.Path); ok; a, ok = parent(a) {
				if rw := m.rec[a]; rw != nil && rw.get(session) != 0 {
					out[i].Kinds |= PersistentRecursive
					break
				}
			}
		}
	}
	return out
}
