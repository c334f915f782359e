package watch

// The oracle of these tests is ZooKeeper itself: the rules were observed with
// test/compat/java/WatchProbe against Debian's ZooKeeper 3.8.0 and against
// the same server with upstream's watch fixes of 3.9 (ZOOKEEPER-4466, -4471,
// -4472, -4475; see docs/zookeeper-watches.md). A comment "probe NN: X -> Y"
// cites scenario NN of test/compat/java/scenarios, step X, output line Y.

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coordd/coordd/tree"
)

const (
	created  = tree.EventNodeCreated
	deleted  = tree.EventNodeDeleted
	changed  = tree.EventNodeDataChanged
	children = tree.EventNodeChildrenChanged
)

var kinds4 = []Kind{Data, Child, Persistent, PersistentRecursive}

func kn(s int64, k Kind, e tree.Event) Notification {
	return Notification{Session: s, Event: e, Kinds: k}
}

// checkTable verifies that the indexes and the counts agree, for every kind.
func checkTable(t *testing.T, m *Manager) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	members := func(pw *pathWatches) map[int64]Kind {
		out := map[int64]Kind{}
		if pw.many != nil {
			for s, k := range pw.many {
				out[s] = k
			}
		} else if pw.oneK != 0 {
			out[pw.one] = pw.oneK
		}
		return out
	}
	n, nrec := 0, 0
	var byKind [4]int
	for path, pw := range m.byPath {
		if pw.path != path {
			t.Fatalf("byPath[%q].path = %q", path, pw.path)
		}
		ss := members(pw)
		if len(ss) == 0 || len(ss) != pw.count {
			t.Fatalf("path %q: %d sessions, count %d", path, len(ss), pw.count)
		}
		for s, k := range ss {
			if k == 0 || k&^AllKinds != 0 {
				t.Fatalf("path %q session %d: kind %d", path, s, k)
			}
			if got := m.bySession[s][path]; got != k {
				t.Fatalf("path %q session %d: byPath %v, bySession %v", path, s, k, got)
			}
			n += popcount(k)
			for i := range byKind {
				if k&(1<<i) != 0 {
					byKind[i]++
				}
			}
			if k&PersistentRecursive != 0 {
				nrec++
				rw := m.rec[path]
				if rw == nil || rw.get(s) != PersistentRecursive {
					t.Fatalf("path %q session %d: recursive watch missing from the index", path, s)
				}
			}
		}
	}
	for path, rw := range m.rec {
		ss := members(rw)
		if len(ss) == 0 || len(ss) != rw.count {
			t.Fatalf("rec %q: %d sessions, count %d", path, len(ss), rw.count)
		}
		for s := range ss {
			if m.byPath[path] == nil || m.byPath[path].get(s)&PersistentRecursive == 0 {
				t.Fatalf("rec %q session %d: in the recursive index only", path, s)
			}
		}
	}
	for s, sm := range m.bySession {
		if len(sm) == 0 {
			t.Fatalf("session %d: empty map kept", s)
		}
		for path, k := range sm {
			if pw := m.byPath[path]; pw == nil || pw.get(s) != k {
				t.Fatalf("session %d path %q: in bySession only", s, path)
			}
		}
	}
	if n != m.n || nrec != m.nrec {
		t.Fatalf("n, nrec = %d, %d; counted %d, %d", m.n, m.nrec, n, nrec)
	}
	if byKind != m.byKind {
		t.Fatalf("registrations by kind (data, child, persistent, recursive) = %v; counted %v", m.byKind, byKind)
	}
}

// TestStatsByKind: Stats counts the registrations of each kind as they are
// added, fired, removed and reset, and they add up to Watches.
func TestStatsByKind(t *testing.T) {
	m := NewManager()
	want := func(data, child, persistent, recursive int) {
		t.Helper()
		checkTable(t, m)
		st := m.Stats()
		got := [4]int{st.Data, st.Child, st.Persistent, st.PersistentRecursive}
		if got != [4]int{data, child, persistent, recursive} {
			t.Fatalf("by kind (data, child, persistent, recursive) = %v, want %v", got, [4]int{data, child, persistent, recursive})
		}
		if sum := data + child + persistent + recursive; st.Watches != sum {
			t.Fatalf("Watches = %d, the kinds add up to %d", st.Watches, sum)
		}
	}
	want(0, 0, 0, 0)
	m.Add(1, "/a", Data|Child)
	m.Add(2, "/a", Persistent)
	m.Add(2, "/", PersistentRecursive)
	m.Add(3, "/b", Data)
	want(2, 1, 1, 1)
	m.Trigger([]tree.Event{{Type: changed, Path: "/a", Zxid: 5}}) // session 1's data watch fires
	want(1, 1, 1, 1)
	m.Trigger([]tree.Event{{Type: deleted, Path: "/a", Zxid: 6}}) // and its child watch
	want(1, 0, 1, 1)
	if !m.Remove(2, "/a", Persistent) {
		t.Fatal("Remove(2, /a, Persistent) found nothing")
	}
	want(1, 0, 0, 1)
	m.RemoveSession(2)
	want(1, 0, 0, 0)
	m.Add(4, "/c", AllKinds)
	want(2, 1, 1, 1)
	m.Reset()
	want(0, 0, 0, 0)
}

// TestEveryKindEveryEvent: one watch of each kind on /w, one event of each
// type on /w, on a child, a grandchild, the parent and a sibling whose name
// starts like it.
func TestEveryKindEveryEvent(t *testing.T) {
	type row struct {
		kind  Kind
		typ   tree.EventType
		path  string
		fires bool
		probe string
	}
	rows := []row{
		// Data (getData, exists): its own path's created, changed, deleted.
		{Data, created, "/w", true, `probe 06: "s1 exists /q/c/new" then "s3 create /q/c/new" -> "exists:/q/c/new"`},
		{Data, changed, "/w", true, `probe 04: "s2 set /m v1" -> "getData:/m"`},
		{Data, children, "/w", false, `probe 06: "s3 create /q/d" -> only getChildren:/q and recursive fire`},
		{Data, deleted, "/w", true, `probe 04: "s2 delete /m" -> "getData:/m"`},
		{Data, created, "/w/c", false, "one-shot watches see their own path only"},
		{Data, changed, "/w/c", false, `probe 01: a watch on /p ignores "s2 set /p/c v1"`},
		{Data, deleted, "/w/c", false, "one-shot watches see their own path only"},
		{Data, changed, "/", false, "nor their parent"},
		{Data, changed, "/wx", false, "nor a sibling"},
		// Child (getChildren): its own path's children changed and deleted.
		{Child, created, "/w", false, "a child watch is set on an existing node; NodeCreated is a data event"},
		{Child, changed, "/w", false, `probe 04: "s2 set /m v1" -> not getChildren:/m`},
		{Child, children, "/w", true, `probe 04: "s2 create /m/c" -> "getChildren:/m"`},
		{Child, deleted, "/w", true, `probe 04: "s2 delete /m" -> "getChildren:/m"`},
		{Child, children, "/w/c", false, "one-shot watches see their own path only"},
		{Child, deleted, "/w/c", false, "the child's NodeDeleted is not the parent's event (its NodeChildrenChanged is)"},
		{Child, children, "/", false, "nor their parent"},
		// Persistent: every type on its own path, nothing below it.
		{Persistent, created, "/w", true, `probe 01: "s2 create /p" -> "s1 wire NodeCreated /p"`},
		{Persistent, changed, "/w", true, `probe 01: "s2 set /p v1" -> "s1 wire NodeDataChanged /p"`},
		{Persistent, children, "/w", true, `probe 01: "s2 create /p/c" -> "s1 wire NodeChildrenChanged /p"`},
		{Persistent, deleted, "/w", true, `probe 01: "s2 delete /p" -> "s1 wire NodeDeleted /p"`},
		{Persistent, created, "/w/c", false, `probe 01: "s2 create /p/c" -> only NodeChildrenChanged /p`},
		{Persistent, changed, "/w/c", false, `probe 01: "s2 set /p/c v1" -> nothing`},
		{Persistent, children, "/w/c", false, `probe 01: "s2 create /p/c/g" -> nothing`},
		{Persistent, deleted, "/w/c", false, `probe 01: "s2 delete /p/c" -> only NodeChildrenChanged /p`},
		{Persistent, changed, "/w/c/g", false, `probe 01: "s2 set /p/c/g v1" -> nothing`},
		{Persistent, changed, "/", false, "nor its parent"},
		{Persistent, created, "/wx", false, "nor a sibling"},
		// PersistentRecursive: created, changed, deleted on its path and below; never children.
		{PersistentRecursive, created, "/w", true, `probe 02: "s2 create /r" -> "s1 wire NodeCreated /r"`},
		{PersistentRecursive, changed, "/w", true, `probe 02: "s2 set /r v1" -> "s1 wire NodeDataChanged /r"`},
		{PersistentRecursive, children, "/w", false, `probe 02: "s2 create /r/c" -> only "s1 wire NodeCreated /r/c"`},
		{PersistentRecursive, deleted, "/w", true, `probe 02: "s2 delete /r" -> "s1 wire NodeDeleted /r"`},
		{PersistentRecursive, created, "/w/c", true, `probe 02: "s2 create /r/c" -> "s1 wire NodeCreated /r/c"`},
		{PersistentRecursive, changed, "/w/c", true, `probe 02: "s2 set /r/c v1" -> "s1 wire NodeDataChanged /r/c"`},
		{PersistentRecursive, children, "/w/c", false, `probe 02: "s2 create /r/c/g" -> only "s1 wire NodeCreated /r/c/g"`},
		{PersistentRecursive, deleted, "/w/c", true, `probe 02: "s2 delete /r/c" -> "s1 wire NodeDeleted /r/c"`},
		{PersistentRecursive, created, "/w/c/g", true, `probe 02: "s2 create /r/c/g" -> "s1 wire NodeCreated /r/c/g"`},
		{PersistentRecursive, changed, "/w/c/g", true, `probe 02: "s2 set /r/c/g v1" -> "s1 wire NodeDataChanged /r/c/g"`},
		{PersistentRecursive, children, "/w/c/g", false, "probe 02: no NodeChildrenChanged ever"},
		{PersistentRecursive, deleted, "/w/c/g", true, `probe 02: "s2 delete /r/c/g" -> "s1 wire NodeDeleted /r/c/g"`},
		{PersistentRecursive, changed, "/", false, "not its parent"},
		{PersistentRecursive, created, "/wx", false, `probe 02: "s2 create /rx" -> nothing`},
		{PersistentRecursive, changed, "/wx", false, `probe 02: "s2 set /rx v1" -> nothing`},
		{PersistentRecursive, deleted, "/wx", false, `probe 02: "s2 delete /rx" -> nothing`},
		{PersistentRecursive, created, "/wx/c", false, "nor below a sibling"},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%v/%v/%s", r.kind, r.typ, r.path), func(t *testing.T) {
			m := NewManager()
			m.Add(1, "/w", r.kind)
			m.Add(2, "/other", AllKinds) // an unrelated session, never fired
			e := ev(r.typ, r.path, 7)
			var want []Notification
			if r.fires {
				want = []Notification{kn(1, r.kind, e)}
			}
			if got := m.Trigger([]tree.Event{e}); !slices.Equal(got, want) {
				t.Fatalf("Trigger = %v, want %v (%s)", got, want, r.probe)
			}
			checkTable(t, m)
			// A fired one-shot watch is gone; everything else stays.
			stays := !r.fires || r.kind&(Persistent|PersistentRecursive) != 0
			left := m.SessionWatches(1)
			has := len(left.Data)+len(left.Child)+len(left.Persistent)+len(left.PersistentRecursive) == 1
			if has != stays {
				t.Fatalf("after firing: watches %+v, want the watch kept: %v", left, stays)
			}
			if got := m.Trigger([]tree.Event{e}); r.fires && stays != slices.Equal(got, want) {
				t.Fatalf("second Trigger = %v (persistent: %v)", got, stays)
			}
			if m.Len() != 4+map[bool]int{true: 1}[stays] {
				t.Fatalf("Len = %d", m.Len())
			}
		})
	}
}

// TestOneNotificationPerSession: however many of a session's watches an
// event matches, ZooKeeper sends the session one notification (its client
// dispatches it to each matching watcher); Kinds says which kinds matched.
func TestOneNotificationPerSession(t *testing.T) {
	tests := []struct {
		name   string
		regs   []reg
		events []tree.Event
		want   []Notification
		left   []reg
	}{
		{
			// probe 04: "s2 set /m v1" -> one "s1 wire NodeDataChanged /m",
			// dispatched to exists:/m, getData:/m, persistent:/m.
			name:   "data and persistent on the path, data changed",
			regs:   []reg{{1, "/m", Persistent}, {1, "/m", Data}, {1, "/m", Child}},
			events: []tree.Event{ev(changed, "/m", 5)},
			want:   []Notification{kn(1, Data|Persistent, ev(changed, "/m", 5))},
			left:   []reg{{1, "/m", Persistent}, {1, "/m", Child}},
		},
		{
			// probe 04 (3.9): "s2 set /m v2" -> "s1 wire NodeDataChanged /m" -> persistent:/m only.
			name:   "the one-shot is gone, the persistent one fires alone",
			regs:   []reg{{1, "/m", Persistent}, {1, "/m", Data}},
			events: []tree.Event{ev(changed, "/m", 5), ev(changed, "/m", 6)},
			want:   []Notification{kn(1, Data|Persistent, ev(changed, "/m", 5)), kn(1, Persistent, ev(changed, "/m", 6))},
			left:   []reg{{1, "/m", Persistent}},
		},
		{
			// probe 04: "s2 create /m/c" -> one NodeChildrenChanged /m to getChildren:/m and persistent:/m.
			name:   "child and persistent on the path, children changed",
			regs:   []reg{{1, "/m", Persistent}, {1, "/m", Data}, {1, "/m", Child}},
			events: []tree.Event{ev(children, "/m", 5)},
			want:   []Notification{kn(1, Child|Persistent, ev(children, "/m", 5))},
			left:   []reg{{1, "/m", Persistent}, {1, "/m", Data}},
		},
		{
			// probe 04: "s2 delete /m" -> one NodeDeleted /m to getData:/m, getChildren:/m and persistent:/m.
			name:   "everything on the path, deleted",
			regs:   []reg{{1, "/m", AllKinds}},
			events: []tree.Event{ev(deleted, "/m", 5)},
			want:   []Notification{kn(1, AllKinds, ev(deleted, "/m", 5))},
			left:   []reg{{1, "/m", Persistent}, {1, "/m", PersistentRecursive}},
		},
		{
			// probe 05 (3.9): after addWatch PERSISTENT and PERSISTENT_RECURSIVE on /o,
			// "s2 create /o/c" -> "s1 wire NodeCreated /o/c" (recursive) and
			// "s1 wire NodeChildrenChanged /o" (persistent), two events, one notification each.
			name:   "persistent and recursive on one path, a child created",
			regs:   []reg{{1, "/o", Persistent}, {1, "/o", PersistentRecursive}},
			events: []tree.Event{ev(created, "/o/c", 5), ev(children, "/o", 5)},
			want:   []Notification{kn(1, PersistentRecursive, ev(created, "/o/c", 5)), kn(1, Persistent, ev(children, "/o", 5))},
			left:   []reg{{1, "/o", Persistent}, {1, "/o", PersistentRecursive}},
		},
		{
			// probe 05: "s2 set /o v3" -> one "s1 wire NodeDataChanged /o" to persistent:/o and recursive:/o.
			name:   "persistent and recursive on one path, data changed",
			regs:   []reg{{1, "/o", Persistent}, {1, "/o", PersistentRecursive}},
			events: []tree.Event{ev(changed, "/o", 5)},
			want:   []Notification{kn(1, Persistent|PersistentRecursive, ev(changed, "/o", 5))},
			left:   []reg{{1, "/o", Persistent}, {1, "/o", PersistentRecursive}},
		},
		{
			// probe 06: "s3 set /q/c v1" -> s1 one notification (getData:/q/c, recursive:/q), s2 one.
			name:   "recursive on an ancestor and one-shot on the path, two sessions",
			regs:   []reg{{1, "/q", PersistentRecursive}, {1, "/q/c", Data}, {1, "/q/c", Child}, {2, "/q/c", Data}},
			events: []tree.Event{ev(changed, "/q/c", 5)},
			want:   []Notification{kn(1, Data|PersistentRecursive, ev(changed, "/q/c", 5)), kn(2, Data, ev(changed, "/q/c", 5))},
			left:   []reg{{1, "/q", PersistentRecursive}, {1, "/q/c", Child}},
		},
		{
			// probe 06: "s3 create /q/c/new" -> "s1 wire NodeCreated /q/c/new"
			// (recursive:/q, exists:/q/c/new) then "s1 wire NodeChildrenChanged /q/c"
			// (getChildren:/q/c only, in 3.9: ZOOKEEPER-4475).
			name:   "a create under a recursive watch with one-shot watches below",
			regs:   []reg{{1, "/q", PersistentRecursive}, {1, "/q/c", Child}, {1, "/q/c/new", Data}},
			events: []tree.Event{ev(created, "/q/c/new", 5), ev(children, "/q/c", 5)},
			want:   []Notification{kn(1, Data|PersistentRecursive, ev(created, "/q/c/new", 5)), kn(1, Child, ev(children, "/q/c", 5))},
			left:   []reg{{1, "/q", PersistentRecursive}},
		},
		{
			// probe 07: s1 holds recursive / and /t and persistent /t/u; s2 recursive /t and /t/u.
			// "s3 set /t/u v" -> one notification each.
			name: "overlapping recursive watches of two sessions",
			regs: []reg{
				{1, "/", PersistentRecursive}, {1, "/t", PersistentRecursive}, {1, "/t/u", Persistent},
				{2, "/t", PersistentRecursive}, {2, "/t/u", PersistentRecursive},
			},
			events: []tree.Event{ev(changed, "/t/u", 5), ev(children, "/t/u", 6), ev(created, "/t", 7)},
			want: []Notification{
				kn(1, Persistent|PersistentRecursive, ev(changed, "/t/u", 5)),
				kn(2, PersistentRecursive, ev(changed, "/t/u", 5)),
				// probe 07: "s3 create /t/u/w" -> s1 gets NodeChildrenChanged /t/u (persistent); s2 nothing of it.
				kn(1, Persistent, ev(children, "/t/u", 6)),
				kn(1, PersistentRecursive, ev(created, "/t", 7)),
				kn(2, PersistentRecursive, ev(created, "/t", 7)),
			},
			left: []reg{
				{1, "/", PersistentRecursive}, {1, "/t", PersistentRecursive}, {1, "/t/u", Persistent},
				{2, "/t", PersistentRecursive}, {2, "/t/u", PersistentRecursive},
			},
		},
		{
			// probe 03: a recursive watch on / sees every path, / itself included.
			name:   "recursive on the root",
			regs:   []reg{{1, "/", PersistentRecursive}},
			events: []tree.Event{ev(created, "/top", 5), ev(children, "/", 5), ev(changed, "/", 6), ev(deleted, "/top/k", 7)},
			want: []Notification{
				kn(1, PersistentRecursive, ev(created, "/top", 5)),
				kn(1, PersistentRecursive, ev(changed, "/", 6)),
				kn(1, PersistentRecursive, ev(deleted, "/top/k", 7)),
			},
			left: []reg{{1, "/", PersistentRecursive}},
		},
		{
			// probe 10: s1 closes; its ephemeral /e/n is deleted: s2 (recursive /e,
			// getChildren /e) gets NodeDeleted /e/n and NodeChildrenChanged /e.
			name:   "a closing session's ephemeral",
			regs:   []reg{{2, "/e", PersistentRecursive}, {2, "/e", Child}},
			events: []tree.Event{ev(deleted, "/e/n", 9), ev(children, "/e", 9)},
			want:   []Notification{kn(2, PersistentRecursive, ev(deleted, "/e/n", 9)), kn(2, Child, ev(children, "/e", 9))},
			left:   []reg{{2, "/e", PersistentRecursive}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			for _, r := range tc.regs {
				m.Add(r.session, r.path, r.kind)
			}
			if got := m.Trigger(tc.events); !slices.Equal(got, tc.want) {
				t.Fatalf("Trigger =\n  %v\nwant\n  %v", got, tc.want)
			}
			checkTable(t, m)
			want := map[int64]Paths{}
			for _, r := range tc.left {
				w := want[r.session]
				for _, k := range kinds4 {
					if r.kind&k != 0 {
						*w.list(k) = append(*w.list(k), r.path)
					}
				}
				want[r.session] = w
			}
			for _, s := range []int64{1, 2} {
				if got := m.SessionWatches(s); !samePaths(got, want[s]) {
					t.Errorf("session %d keeps %+v, want %+v", s, got, want[s])
				}
			}
		})
	}
}

// list returns the list of kind k (one of the four).
func (w *Paths) list(k Kind) *[]string {
	switch k {
	case Data:
		return &w.Data
	case Child:
		return &w.Child
	case Persistent:
		return &w.Persistent
	}
	return &w.PersistentRecursive
}

func samePaths(a, b Paths) bool {
	for _, k := range kinds4 {
		x, y := slices.Clone(*a.list(k)), slices.Clone(*b.list(k))
		slices.Sort(x)
		slices.Sort(y)
		if !slices.Equal(x, y) {
			return false
		}
	}
	return true
}

// TestRemoveAndCheckWatches: each WatcherType selects exactly its kinds.
// The oracle is probe 08-remove-raw on ZooKeeper with its 3.9 watch fixes:
// the "registered / check 1..5 / remove T / check after" table of
// docs/zookeeper-watches.md.
func TestRemoveAndCheckWatches(t *testing.T) {
	registrations := []struct {
		name string
		kind Kind
	}{
		{"getData", Data},
		{"exists (absent or present node)", Data},
		{"getChildren", Child},
		{"persistent", Persistent},
		{"recursive", PersistentRecursive},
		{"persistent+getData", Persistent | Data},
		{"persistent+getChildren", Persistent | Child},
		{"recursive+getData", PersistentRecursive | Data},
		{"every kind", AllKinds},
	}
	types := []WatcherType{WatcherChildren, WatcherData, WatcherAny, WatcherPersistent, WatcherPersistentRecursive}
	selects := map[WatcherType]Kind{
		WatcherChildren:            Child,
		WatcherData:                Data,
		WatcherAny:                 AllKinds,
		WatcherPersistent:          Persistent,
		WatcherPersistentRecursive: PersistentRecursive,
	}
	for _, r := range registrations {
		for _, typ := range types {
			t.Run(fmt.Sprintf("%s/%v", r.name, typ), func(t *testing.T) {
				m := NewManager()
				m.Add(1, "/rm", r.kind)
				m.Add(2, "/rm", AllKinds) // another session's watches are not the session's
				has := r.kind&selects[typ] != 0
				if err := m.CheckWatches(1, "/rm", typ); has != (err == nil) || (!has && !errors.Is(err, ErrNoWatcher)) {
					t.Fatalf("CheckWatches = %v, want a watch: %v", err, has)
				}
				if m.Len() != popcount(r.kind)+4 {
					t.Fatalf("CheckWatches changed the table: Len %d", m.Len())
				}
				err := m.RemoveWatches(1, "/rm", typ)
				if has != (err == nil) || (!has && !errors.Is(err, ErrNoWatcher)) {
					t.Fatalf("RemoveWatches = %v, want a watch: %v", err, has)
				}
				left := r.kind &^ selects[typ]
				if got := m.kinds(1, "/rm"); got != left {
					t.Fatalf("left %v, want %v", got, left)
				}
				for _, c := range types {
					want := left&selects[c] != 0
					if err := m.CheckWatches(1, "/rm", c); want != (err == nil) {
						t.Errorf("after: CheckWatches(%v) = %v, want a watch: %v", c, err, want)
					}
				}
				if m.kinds(2, "/rm") != AllKinds {
					t.Fatalf("the other session's watches changed: %v", m.kinds(2, "/rm"))
				}
				checkTable(t, m)
			})
		}
	}

	t.Run("nothing registered", func(t *testing.T) {
		// probe 08: "s1 raw removeWatches /rm 3  = NOWATCHER (-121)", also for checkWatches.
		m := NewManager()
		m.Add(2, "/rm", Data)
		for _, typ := range types {
			if err := m.RemoveWatches(1, "/rm", typ); !errors.Is(err, ErrNoWatcher) {
				t.Errorf("RemoveWatches(%v) = %v", typ, err)
			}
			if err := m.CheckWatches(1, "/rm", typ); !errors.Is(err, ErrNoWatcher) {
				t.Errorf("CheckWatches(%v) = %v", typ, err)
			}
		}
		// probe 08 (3.9): "s1 raw checkWatches /rm 2 = NOWATCHER" while only s2 watches /rm.
		if err := m.CheckWatches(1, "/rm", WatcherData); !errors.Is(err, ErrNoWatcher) {
			t.Errorf("another session's watch counted: %v", err)
		}
	})
	t.Run("unknown type", func(t *testing.T) {
		// probe 08: types 0 and 6 -> MARSHALLINGERROR (-5); nothing changes.
		m := NewManager()
		m.Add(1, "/rm", AllKinds)
		for _, typ := range []WatcherType{0, 6, -1} {
			if err := m.RemoveWatches(1, "/rm", typ); !errors.Is(err, ErrUnknownWatcherType) {
				t.Errorf("RemoveWatches(%d) = %v", typ, err)
			}
			if err := m.CheckWatches(1, "/rm", typ); !errors.Is(err, ErrUnknownWatcherType) {
				t.Errorf("CheckWatches(%d) = %v", typ, err)
			}
		}
		if m.Len() != 4 {
			t.Fatalf("Len = %d", m.Len())
		}
	})
	t.Run("removal stops the firing, the rest keeps firing", func(t *testing.T) {
		// probe 08b (3.9): "s1 removeAll /c PersistentRecursive" leaves getData:/c,
		// and "s2 set /c v5" fires it alone.
		m := NewManager()
		m.Add(1, "/c", PersistentRecursive|Data)
		if err := m.RemoveWatches(1, "/c", WatcherPersistentRecursive); err != nil {
			t.Fatal(err)
		}
		want := []Notification{kn(1, Data, ev(changed, "/c", 3))}
		if got := m.Trigger([]tree.Event{ev(changed, "/c", 3), ev(created, "/c/x", 3)}); !slices.Equal(got, want) {
			t.Fatalf("Trigger = %v, want %v", got, want)
		}
		checkTable(t, m)
	})
}

func (m *Manager) kinds(session int64, path string) Kind {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kindsLocked(session, path)
}

func TestReregisterPersistent(t *testing.T) {
	const rel = 100
	st := fakeTree{
		"/old":      {Czxid: 10, Mzxid: 50, Pzxid: 60},
		"/modified": {Czxid: 10, Mzxid: 150, Pzxid: 160},
		"/r":        {Czxid: 10, Mzxid: 50, Pzxid: 60},
		"/r/k":      {Czxid: 130, Mzxid: 130, Pzxid: 130},
	}
	tests := []struct {
		name string
		pre  []reg
		sw   SetWatches
		want []Notification
		left Paths
	}{
		{
			// probe 09: "setWatches2 ... persistent=[/p, /same] recursive=[/r]": /p and /r/k
			// changed meanwhile, and nothing fired for them; later changes fire.
			name: "persistent paths are registered and fire nothing",
			sw:   SetWatches{RelZxid: rel, Persistent: []string{"/modified", "/gone"}, PersistentRecursive: []string{"/r", "/gone2"}},
			left: Paths{Persistent: []string{"/gone", "/modified"}, PersistentRecursive: []string{"/gone2", "/r"}},
		},
		{
			// probe 09: "s1 let" -> "s1 wire NodeDataChanged /same" dispatched to getData:/same
			// and persistent:/same; "s2 set /same v2" later fires persistent:/same alone.
			name: "a one-shot firing does not consume the persistent watch on its path",
			sw:   SetWatches{RelZxid: rel, Data: []string{"/modified"}, Persistent: []string{"/modified"}},
			want: []Notification{kn(1, Data|Persistent, ev(changed, "/modified", 150))},
			left: Paths{Persistent: []string{"/modified"}},
		},
		{
			name: "nor a persistent watch already registered",
			pre:  []reg{{1, "/modified", Persistent | Child}},
			sw:   SetWatches{RelZxid: rel, Data: []string{"/modified"}},
			want: []Notification{kn(1, Data|Persistent, ev(changed, "/modified", 150))},
			left: Paths{Child: []string{"/modified"}, Persistent: []string{"/modified"}},
		},
		{
			name: "a recursive watch on an ancestor is named in Kinds",
			sw:   SetWatches{RelZxid: rel, Exist: []string{"/r/k"}, Child: []string{"/r/k"}, PersistentRecursive: []string{"/r"}},
			want: []Notification{
				kn(1, Data|PersistentRecursive, ev(created, "/r/k", 130)),
				kn(1, Child, ev(children, "/r/k", 130)),
			},
			left: Paths{PersistentRecursive: []string{"/r"}},
		},
		{
			// probe 09: "s2 delete /gone" while s1 had getData and getChildren on it.
			name: "data and child absent: one NodeDeleted with both kinds",
			sw:   SetWatches{RelZxid: rel, Data: []string{"/gone"}, Child: []string{"/gone"}, Persistent: []string{"/gone"}},
			want: []Notification{kn(1, Data|Child|Persistent, ev(deleted, "/gone", 0))},
			left: Paths{Persistent: []string{"/gone"}},
		},
		{
			name: "a second event on a consumed path names no one-shot kind",
			sw:   SetWatches{RelZxid: rel, Data: []string{"/modified"}, Exist: []string{"/modified"}},
			want: []Notification{
				kn(1, Data, ev(changed, "/modified", 150)),
				kn(1, 0, ev(created, "/modified", 10)),
			},
		},
		{
			name: "unchanged one-shot watches next to persistent ones",
			sw:   SetWatches{RelZxid: rel, Data: []string{"/old"}, Child: []string{"/old"}, Persistent: []string{"/old"}, PersistentRecursive: []string{"/old"}},
			left: Paths{Data: []string{"/old"}, Child: []string{"/old"}, Persistent: []string{"/old"}, PersistentRecursive: []string{"/old"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			for _, r := range tc.pre {
				m.Add(r.session, r.path, r.kind)
			}
			m.Add(2, "/r", PersistentRecursive) // another session, untouched
			got := m.ReregisterAll(1, tc.sw, st)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ReregisterAll =\n  %v\nwant\n  %v", got, tc.want)
			}
			if w := m.SessionWatches(1); !samePaths(w, tc.left) {
				t.Errorf("watches %+v, want %+v", w, tc.left)
			}
			if m.kinds(2, "/r") != PersistentRecursive {
				t.Errorf("the other session's watch changed")
			}
			checkTable(t, m)
		})
	}
	t.Run("re-registering is idempotent", func(t *testing.T) {
		m := NewManager()
		sw := SetWatches{RelZxid: rel, Persistent: []string{"/old"}, PersistentRecursive: []string{"/old", "/r"}}
		m.ReregisterAll(1, sw, st)
		m.ReregisterAll(1, sw, st)
		if m.Len() != 3 {
			t.Fatalf("Len = %d, want 3", m.Len())
		}
		checkTable(t, m)
	})
}

func TestPersistentSessionLifecycle(t *testing.T) {
	m := NewManager()
	m.Add(1, "/a", AllKinds)
	m.Add(1, "/a/b", PersistentRecursive)
	m.Add(1, "/c", Data)
	m.Add(2, "/a", PersistentRecursive)
	m.Add(2, "/", Persistent)
	// Len counts one per (session, path, kind).
	if got := m.Len(); got != 4+1+1+1+1 {
		t.Fatalf("Len = %d, want 8", got)
	}
	if got, want := m.Stats(), (Stats{Sessions: 2, Paths: 4, Watches: 8, Data: 2, Child: 1, Persistent: 2, PersistentRecursive: 3}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	want := Paths{Data: []string{"/a", "/c"}, Child: []string{"/a"}, Persistent: []string{"/a"}, PersistentRecursive: []string{"/a", "/a/b"}}
	if got := m.SessionWatches(1); !slices.Equal(got.Data, want.Data) || !slices.Equal(got.Child, want.Child) ||
		!slices.Equal(got.Persistent, want.Persistent) || !slices.Equal(got.PersistentRecursive, want.PersistentRecursive) {
		t.Fatalf("SessionWatches(1) = %+v, want %+v", got, want)
	}
	if d, c := m.Watches(1); !slices.Equal(d, want.Data) || !slices.Equal(c, want.Child) {
		t.Fatalf("Watches(1) = %v, %v", d, c)
	}
	if got := m.SessionWatches(3); !samePaths(got, Paths{}) {
		t.Fatalf("SessionWatches(unknown) = %+v", got)
	}
	// probe 10: a session's close removes all its watches ("wchc" after "close s1").
	if got := m.RemoveSession(1); got != 6 {
		t.Fatalf("RemoveSession = %d, want 6", got)
	}
	checkTable(t, m)
	got := m.Trigger([]tree.Event{ev(changed, "/a/b", 4)})
	if want := []Notification{kn(2, PersistentRecursive, ev(changed, "/a/b", 4))}; !slices.Equal(got, want) {
		t.Fatalf("Trigger = %v, want %v", got, want)
	}
	m.Reset()
	if m.Len() != 0 || m.Stats() != (Stats{}) {
		t.Fatalf("after Reset: Len %d, Stats %+v", m.Len(), m.Stats())
	}
	if got := m.Trigger([]tree.Event{ev(changed, "/a/b", 5)}); got != nil {
		t.Fatalf("Trigger after Reset = %v", got)
	}
	checkTable(t, m)
	m.Add(1, "/x", PersistentRecursive) // usable afterwards
	if got := m.Trigger([]tree.Event{ev(created, "/x/y", 6)}); len(got) != 1 {
		t.Fatalf("Trigger = %v", got)
	}
	checkTable(t, m)
}

func TestKindAndWatcherTypeNames(t *testing.T) {
	for k, want := range map[Kind]string{
		Persistent:                  "persistent",
		PersistentRecursive:         "persistentRecursive",
		Data | Persistent:           "data|persistent",
		AllKinds:                    "any|persistent|persistentRecursive",
		Child | PersistentRecursive: "child|persistentRecursive",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
	// ZooKeeper's numbers travel on the wire: pin them.
	for typ, want := range map[WatcherType]struct {
		n    int32
		name string
	}{
		WatcherChildren:            {1, "Children"},
		WatcherData:                {2, "Data"},
		WatcherAny:                 {3, "Any"},
		WatcherPersistent:          {4, "Persistent"},
		WatcherPersistentRecursive: {5, "PersistentRecursive"},
		7:                          {7, "WatcherType(7)"},
	} {
		if int32(typ) != want.n || typ.String() != want.name {
			t.Errorf("%d %q, want %d %q", int32(typ), typ.String(), want.n, want.name)
		}
	}
}

func TestParent(t *testing.T) {
	for p, want := range map[string]string{"/a/b/c": "/a/b", "/a": "/", "/": "", "": "", "a/b": ""} {
		got, ok := parent(p)
		if got != want || ok != (want != "") {
			t.Errorf("parent(%q) = %q, %v; want %q", p, got, ok, want)
		}
	}
}

// fullModel is the reference for every kind: a plain list of registrations,
// matched against each event by scanning all of them.
type fullModel []reg

func (md *fullModel) add(s int64, path string, k Kind) {
	for _, kk := range kinds4 {
		if k&kk != 0 && !slices.Contains(*md, reg{s, path, kk}) {
			*md = append(*md, reg{s, path, kk})
		}
	}
}

func (md *fullModel) remove(s int64, path string, k Kind) bool {
	n := len(*md)
	*md = slices.DeleteFunc(*md, func(r reg) bool { return r.session == s && r.path == path && r.kind&k != 0 })
	return len(*md) != n
}

func (md fullModel) has(s int64, path string, k Kind) bool {
	return slices.ContainsFunc(md, func(r reg) bool { return r.session == s && r.path == path && r.kind&k != 0 })
}

func (md *fullModel) removeSession(s int64) int {
	n := len(*md)
	*md = slices.DeleteFunc(*md, func(r reg) bool { return r.session == s })
	return n - len(*md)
}

// below reports whether p is path or a descendant of it.
func below(p, path string) bool {
	return p == path || path == "/" || strings.HasPrefix(p, path+"/")
}

func (md *fullModel) trigger(events []tree.Event) []Notification {
	var out []Notification
	for _, e := range events {
		got := map[int64]Kind{}
		*md = slices.DeleteFunc(*md, func(r reg) bool {
			var hit bool
			switch r.kind {
			case Data:
				hit = r.path == e.Path && e.Type != children
			case Child:
				hit = r.path == e.Path && (e.Type == children || e.Type == deleted)
			case Persistent:
				hit = r.path == e.Path
			case PersistentRecursive:
				hit = below(e.Path, r.path) && e.Type != children
			}
			if hit {
				got[r.session] |= r.kind
			}
			return hit && r.kind&Any != 0
		})
		for _, s := range slices.Sorted(maps.Keys(got)) {
			out = append(out, Notification{Session: s, Event: e, Kinds: got[s]})
		}
	}
	return out
}

func (md fullModel) watches(s int64) Paths {
	var w Paths
	for _, r := range md {
		if r.session == s {
			*w.list(r.kind) = append(*w.list(r.kind), r.path)
		}
	}
	for _, k := range kinds4 {
		slices.Sort(*w.list(k))
	}
	return w
}

func TestAgainstFullModel(t *testing.T) {
	paths := []string{"/", "/a", "/a/b", "/a/b/c", "/ab", "/c"}
	types := []tree.EventType{created, deleted, changed, children}
	wtypes := []WatcherType{WatcherChildren, WatcherData, WatcherAny, WatcherPersistent, WatcherPersistentRecursive}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 23))
		m := NewManager()
		var md fullModel
		nsessions := 1 + r.IntN(5)
		for step := range 300 {
			s := int64(1 + r.IntN(nsessions))
			p := paths[r.IntN(len(paths))]
			switch op := r.IntN(24); {
			case op < 10:
				k := Kind(1 + r.IntN(int(AllKinds)))
				m.Add(s, p, k)
				md.add(s, p, k)
			case op < 12:
				wt := wtypes[r.IntN(len(wtypes))]
				want := md.has(s, p, wt.Kinds())
				if err := m.CheckWatches(s, p, wt); (err == nil) != want {
					t.Fatalf("seed %d step %d: CheckWatches(%d, %s, %v) = %v, want %v", seed, step, s, p, wt, err, want)
				}
				md.remove(s, p, wt.Kinds())
				if err := m.RemoveWatches(s, p, wt); (err == nil) != want {
					t.Fatalf("seed %d step %d: RemoveWatches(%d, %s, %v) = %v, want %v", seed, step, s, p, wt, err, want)
				}
			case op < 13:
				if got, want := m.RemoveSession(s), md.removeSession(s); got != want {
					t.Fatalf("seed %d step %d: RemoveSession(%d) = %d, want %d", seed, step, s, got, want)
				}
			default:
				events := make([]tree.Event, r.IntN(5))
				for i := range events {
					events[i] = tree.Event{Type: types[r.IntN(len(types))], Path: paths[r.IntN(len(paths))], Zxid: int64(step)}
				}
				got, want := m.Trigger(events), md.trigger(events)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: Trigger(%v) =\n  %v\nwant\n  %v", seed, step, events, got, want)
				}
			}
			if got, want := m.Len(), len(md); got != want {
				t.Fatalf("seed %d step %d: Len = %d, want %d", seed, step, got, want)
			}
			for s := range int64(nsessions) {
				if got, want := m.SessionWatches(s+1), md.watches(s+1); !samePaths(got, want) {
					t.Fatalf("seed %d step %d: SessionWatches(%d) = %+v, want %+v", seed, step, s+1, got, want)
				}
			}
		}
		checkTable(t, m)
	}
}

// TestConcurrentRecursive exercises the recursive index under -race: each
// worker's session watches its own subtree recursively, and every event in
// it reaches that session alone.
func TestConcurrentRecursive(t *testing.T) {
	m := NewManager()
	const workers, perWorker = 6, 150
	var wg sync.WaitGroup
	fired := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := int64(w + 1)
			root := fmt.Sprintf("/w%d", w)
			m.Add(s, root, PersistentRecursive)
			for i := range perWorker {
				p := fmt.Sprintf("%s/%d/x", root, i)
				m.Add(s, p, Data)
				for _, n := range m.Trigger([]tree.Event{{Type: tree.EventNodeDataChanged, Path: p, Zxid: int64(i)}}) {
					if n.Session != s || n.Kinds != Data|PersistentRecursive {
						t.Errorf("worker %d: %v", w, n)
					}
					fired[w]++
				}
				m.SessionWatches(s)
				m.Stats()
			}
			if got := m.RemoveSession(s); got != 1 {
				t.Errorf("worker %d: RemoveSession = %d, want 1", w, got)
			}
		}()
	}
	wg.Wait()
	for w, n := range fired {
		if n != perWorker {
			t.Errorf("worker %d: %d notifications, want %d", w, n, perWorker)
		}
	}
	checkTable(t, m)
	if m.Len() != 0 {
		t.Errorf("Len = %d", m.Len())
	}
}

// TestRegistrations: the dump lists each (session, path) holding a watch of
// the kinds asked for, with all its kinds there, by session then path.
func TestRegistrations(t *testing.T) {
	m := NewManager()
	m.Add(2, "/e", PersistentRecursive|Child)
	m.Add(1, "/e/n", Data)
	m.Add(1, "/e", PersistentRecursive)
	m.Add(1, "/c", Child)
	m.Add(3, "/p", Persistent)
	dataTable := Data | Persistent | PersistentRecursive
	want := []Registration{
		{1, "/e", PersistentRecursive}, {1, "/e/n", Data},
		{2, "/e", PersistentRecursive | Child},
		{3, "/p", Persistent},
	}
	if got := m.Registrations(dataTable); !slices.Equal(got, want) {
		t.Fatalf("Registrations(data table) = %v, want %v", got, want)
	}
	if got := m.Registrations(Child); !slices.Equal(got, []Registration{{1, "/c", Child}, {2, "/e", PersistentRecursive | Child}}) {
		t.Fatalf("Registrations(Child) = %v", got)
	}
	if got := NewManager().Registrations(AllKinds); len(got) != 0 {
		t.Fatalf("empty table: %v", got)
	}
}
