package watch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/coordd/coordd/tree"
)

type reg struct {
	session int64
	path    string
	kind    Kind
}

func ev(t tree.EventType, path string, zxid int64) tree.Event {
	return tree.Event{Type: t, Path: path, Zxid: zxid}
}

func note(s int64, e tree.Event) Notification { return Notification{Session: s, Event: e} }

// withoutKinds clears the Kinds of notifications, for the tests written
// before Notification had them (persistent_test.go checks Kinds).
func withoutKinds(ns []Notification) []Notification {
	for i := range ns {
		ns[i].Kinds = 0
	}
	return ns
}

// checkInvariants verifies that both indexes and the count agree.
func checkInvariants(t *testing.T, m *Manager) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for path, pw := range m.byPath {
		if pw.path != path {
			t.Fatalf("byPath[%q].path = %q", path, pw.path)
		}
		sessions := map[int64]Kind{}
		if pw.many != nil {
			for s, k := range pw.many {
				sessions[s] = k
			}
		} else if pw.oneK != 0 {
			sessions[pw.one] = pw.oneK
		}
		if len(sessions) == 0 || len(sessions) != pw.count {
			t.Fatalf("path %q: %d sessions, count %d", path, len(sessions), pw.count)
		}
		for s, k := range sessions {
			if k == 0 || k&^Any != 0 {
				t.Fatalf("path %q session %d: kind %d", path, s, k)
			}
			if got := m.bySession[s][path]; got != k {
				t.Fatalf("path %q session %d: byPath %v, bySession %v", path, s, k, got)
			}
			n += popcount(k)
		}
	}
	for s, sm := range m.bySession {
		if len(sm) == 0 {
			t.Fatalf("session %d: empty map kept", s)
		}
		for path, k := range sm {
			pw := m.byPath[path]
			if pw == nil || pw.get(s) != k {
				t.Fatalf("session %d path %q: in bySession only", s, path)
			}
		}
	}
	if n != m.n {
		t.Fatalf("n = %d, counted %d", m.n, n)
	}
}

func TestTrigger(t *testing.T) {
	const (
		created  = tree.EventNodeCreated
		deleted  = tree.EventNodeDeleted
		changed  = tree.EventNodeDataChanged
		children = tree.EventNodeChildrenChanged
	)
	tests := []struct {
		name   string
		regs   []reg
		events []tree.Event
		want   []Notification
		left   []reg // registrations left afterwards
	}{
		{
			name:   "created fires data (exists) watch",
			regs:   []reg{{1, "/a", Data}},
			events: []tree.Event{ev(created, "/a", 7)},
			want:   []Notification{note(1, ev(created, "/a", 7))},
		},
		{
			name:   "created does not fire child watch",
			regs:   []reg{{1, "/a", Child}},
			events: []tree.Event{ev(created, "/a", 7)},
			left:   []reg{{1, "/a", Child}},
		},
		{
			name:   "data changed fires data watch",
			regs:   []reg{{1, "/a", Data}},
			events: []tree.Event{ev(changed, "/a", 8)},
			want:   []Notification{note(1, ev(changed, "/a", 8))},
		},
		{
			name:   "data changed does not fire child watch",
			regs:   []reg{{1, "/a", Child}},
			events: []tree.Event{ev(changed, "/a", 8)},
			left:   []reg{{1, "/a", Child}},
		},
		{
			name:   "deleted fires data watch",
			regs:   []reg{{1, "/a", Data}},
			events: []tree.Event{ev(deleted, "/a", 9)},
			want:   []Notification{note(1, ev(deleted, "/a", 9))},
		},
		{
			name:   "deleted fires child watch",
			regs:   []reg{{1, "/a", Child}},
			events: []tree.Event{ev(deleted, "/a", 9)},
			want:   []Notification{note(1, ev(deleted, "/a", 9))},
		},
		{
			name:   "deleted with data and child watch: one notification",
			regs:   []reg{{1, "/a", Data}, {1, "/a", Child}},
			events: []tree.Event{ev(deleted, "/a", 9)},
			want:   []Notification{note(1, ev(deleted, "/a", 9))},
		},
		{
			name:   "children changed fires child watch",
			regs:   []reg{{1, "/a", Child}},
			events: []tree.Event{ev(children, "/a", 10)},
			want:   []Notification{note(1, ev(children, "/a", 10))},
		},
		{
			name:   "children changed does not fire data watch",
			regs:   []reg{{1, "/a", Data}},
			events: []tree.Event{ev(children, "/a", 10)},
			left:   []reg{{1, "/a", Data}},
		},
		{
			name:   "exists + getData: one notification",
			regs:   []reg{{1, "/a", Data}, {1, "/a", Data}},
			events: []tree.Event{ev(changed, "/a", 8)},
			want:   []Notification{note(1, ev(changed, "/a", 8))},
		},
		{
			name:   "child's data change does not fire parent's child watch",
			regs:   []reg{{1, "/a", Child}},
			events: []tree.Event{ev(changed, "/a/b", 8)},
			left:   []reg{{1, "/a", Child}},
		},
		{
			name: "data watch and child watch on one path, only one fires",
			regs: []reg{{1, "/a", Data}, {1, "/a", Child}},
			events: []tree.Event{
				ev(children, "/a", 10),
			},
			want: []Notification{note(1, ev(children, "/a", 10))},
			left: []reg{{1, "/a", Data}},
		},
		{
			name:   "one-shot within one batch",
			regs:   []reg{{1, "/a", Data}},
			events: []tree.Event{ev(changed, "/a", 8), ev(changed, "/a", 8), ev(deleted, "/a", 8)},
			want:   []Notification{note(1, ev(changed, "/a", 8))},
		},
		{
			name:   "sessions in ascending order, events in order",
			regs:   []reg{{30, "/a", Data}, {10, "/a", Data}, {20, "/a", Child}, {5, "/b", Data}, {40, "/a", Data}},
			events: []tree.Event{ev(changed, "/b", 11), ev(deleted, "/a", 11)},
			want: []Notification{
				note(5, ev(changed, "/b", 11)),
				note(10, ev(deleted, "/a", 11)),
				note(20, ev(deleted, "/a", 11)),
				note(30, ev(deleted, "/a", 11)),
				note(40, ev(deleted, "/a", 11)),
			},
		},
		{
			name: "session close deleting ephemerals",
			regs: []reg{
				{2, "/locks", Child}, {3, "/locks/x", Data}, {4, "/locks/y", Data}, {3, "/locks/y", Data},
				{4, "/other", Data},
			},
			events: []tree.Event{
				ev(deleted, "/locks/x", 20), ev(children, "/locks", 20),
				ev(deleted, "/locks/y", 20), ev(children, "/locks", 20),
			},
			want: []Notification{
				note(3, ev(deleted, "/locks/x", 20)),
				note(2, ev(children, "/locks", 20)),
				note(3, ev(deleted, "/locks/y", 20)),
				note(4, ev(deleted, "/locks/y", 20)),
			},
			left: []reg{{4, "/other", Data}},
		},
		{
			name:   "deleted then re-created in one multi",
			regs:   []reg{{1, "/a", Data}, {2, "/a", Data}},
			events: []tree.Event{ev(deleted, "/a", 12), ev(created, "/a", 12)},
			want:   []Notification{note(1, ev(deleted, "/a", 12)), note(2, ev(deleted, "/a", 12))},
		},
		{
			name:   "unknown event type ignored",
			regs:   []reg{{1, "/a", Data}},
			events: []tree.Event{{Type: 0, Path: "/a"}, {Type: 99, Path: "/a"}},
			left:   []reg{{1, "/a", Data}},
		},
		{
			name:   "no events",
			regs:   []reg{{1, "/a", Data}},
			events: nil,
			left:   []reg{{1, "/a", Data}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			for _, r := range tc.regs {
				m.Add(r.session, r.path, r.kind)
			}
			got := withoutKinds(m.Trigger(tc.events))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Trigger =\n  %v\nwant\n  %v", got, tc.want)
			}
			checkInvariants(t, m)
			left := 0
			for _, r := range tc.left {
				d, c := m.Watches(r.session)
				if !slices.Contains(map[Kind][]string{Data: d, Child: c}[r.kind], r.path) {
					t.Errorf("watch %+v is gone", r)
				}
				left++
			}
			if m.Len() != left {
				t.Errorf("Len = %d, want %d", m.Len(), left)
			}
			// One-shot: the same events again fire only what was left.
			for _, n := range withoutKinds(m.Trigger(tc.events)) {
				if slices.Contains(tc.want, n) {
					t.Errorf("fired twice: %v", n)
				}
			}
		})
	}
}

func TestAddLenWatches(t *testing.T) {
	m := NewManager()
	m.Add(1, "/b", Data)
	m.Add(1, "/a", Data)
	m.Add(1, "/a", Data) // idempotent
	m.Add(1, "/c", Child)
	m.Add(1, "/a", Child)
	m.Add(1, "/d", Any)
	m.Add(1, "/e", 0) // nothing
	m.Add(2, "/a", Data)
	if got := m.Len(); got != 7 {
		t.Fatalf("Len = %d, want 7", got)
	}
	d, c := m.Watches(1)
	if want := []string{"/a", "/b", "/d"}; !slices.Equal(d, want) {
		t.Errorf("data = %v, want %v", d, want)
	}
	if want := []string{"/a", "/c", "/d"}; !slices.Equal(c, want) {
		t.Errorf("child = %v, want %v", c, want)
	}
	if d, c := m.Watches(3); d != nil || c != nil {
		t.Errorf("Watches(unknown) = %v, %v", d, c)
	}
	checkInvariants(t, m)
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name      string
		regs      []reg
		remove    reg
		want      bool
		wantData  []string
		wantChild []string
	}{
		{"data only", []reg{{1, "/a", Data}, {1, "/a", Child}}, reg{1, "/a", Data}, true, nil, []string{"/a"}},
		{"child only", []reg{{1, "/a", Data}, {1, "/a", Child}}, reg{1, "/a", Child}, true, []string{"/a"}, nil},
		{"any", []reg{{1, "/a", Data}, {1, "/a", Child}, {1, "/b", Data}}, reg{1, "/a", Any}, true, []string{"/b"}, nil},
		{"any with one kind", []reg{{1, "/a", Child}}, reg{1, "/a", Any}, true, nil, nil},
		{"absent kind", []reg{{1, "/a", Data}}, reg{1, "/a", Child}, false, []string{"/a"}, nil},
		{"absent path", []reg{{1, "/a", Data}}, reg{1, "/b", Any}, false, []string{"/a"}, nil},
		{"other session", []reg{{1, "/a", Data}, {2, "/a", Data}}, reg{3, "/a", Data}, false, []string{"/a"}, nil},
		{"kind none", []reg{{1, "/a", Data}}, reg{1, "/a", 0}, false, []string{"/a"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			for _, r := range tc.regs {
				m.Add(r.session, r.path, r.kind)
			}
			if got := m.Remove(tc.remove.session, tc.remove.path, tc.remove.kind); got != tc.want {
				t.Errorf("Remove = %v, want %v", got, tc.want)
			}
			d, c := m.Watches(1)
			if !slices.Equal(d, tc.wantData) || !slices.Equal(c, tc.wantChild) {
				t.Errorf("Watches = %v, %v; want %v, %v", d, c, tc.wantData, tc.wantChild)
			}
			checkInvariants(t, m)
		})
	}
}

func TestRemoveSession(t *testing.T) {
	m := NewManager()
	m.Add(1, "/a", Data)
	m.Add(1, "/a", Child)
	m.Add(1, "/b", Data)
	m.Add(2, "/a", Data)
	m.Add(2, "/c", Child)
	if got := m.RemoveSession(1); got != 3 {
		t.Fatalf("RemoveSession = %d, want 3", got)
	}
	checkInvariants(t, m)
	if got := m.RemoveSession(1); got != 0 {
		t.Fatalf("second RemoveSession = %d, want 0", got)
	}
	if got := m.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
	got := withoutKinds(m.Trigger([]tree.Event{ev(tree.EventNodeDeleted, "/a", 5), ev(tree.EventNodeDeleted, "/b", 5)}))
	if want := []Notification{note(2, ev(tree.EventNodeDeleted, "/a", 5))}; !slices.Equal(got, want) {
		t.Fatalf("Trigger = %v, want %v", got, want)
	}
	checkInvariants(t, m)
}

func TestReset(t *testing.T) {
	m := NewManager()
	m.Add(1, "/a", Any)
	m.Add(2, "/b", Data)
	m.Reset()
	if m.Len() != 0 {
		t.Fatalf("Len after Reset = %d", m.Len())
	}
	if got := m.Trigger([]tree.Event{ev(tree.EventNodeDeleted, "/a", 1)}); got != nil {
		t.Fatalf("Trigger after Reset = %v", got)
	}
	checkInvariants(t, m)
	m.Add(1, "/a", Data) // usable afterwards
	if m.Len() != 1 {
		t.Fatalf("Len = %d", m.Len())
	}
}

// fakeTree is a StatReader over a map.
type fakeTree map[string]tree.Stat

var errOther = errors.New("some other failure")

func (f fakeTree) Exists(path string) (tree.Stat, error) {
	if path == "/broken" {
		return tree.Stat{}, errOther
	}
	s, ok := f[path]
	if !ok {
		return tree.Stat{}, fmt.Errorf("exists %s: %w", path, tree.ErrNoNode)
	}
	return s, nil
}

func TestReregister(t *testing.T) {
	const rel = 100
	st := fakeTree{
		"/old":      {Czxid: 10, Mzxid: 50, Pzxid: 60},
		"/modified": {Czxid: 10, Mzxid: 150, Pzxid: 60},
		"/kids":     {Czxid: 10, Mzxid: 50, Pzxid: 120},
		"/atrel":    {Czxid: 10, Mzxid: rel, Pzxid: rel},
		"/new":      {Czxid: 130, Mzxid: 130, Pzxid: 130},
	}
	const (
		created  = tree.EventNodeCreated
		deleted  = tree.EventNodeDeleted
		changed  = tree.EventNodeDataChanged
		children = tree.EventNodeChildrenChanged
	)
	tests := []struct {
		name               string
		pre                []reg // registrations of session 1 before the call
		data, exist, child []string
		want               []Notification
		wantData           []string
		wantChild          []string
	}{
		{name: "data absent", data: []string{"/gone"}, want: []Notification{note(1, ev(deleted, "/gone", 0))}},
		{name: "data other error counts as absent", data: []string{"/broken"}, want: []Notification{note(1, ev(deleted, "/broken", 0))}},
		{name: "data modified", data: []string{"/modified"}, want: []Notification{note(1, ev(changed, "/modified", 150))}},
		{name: "data recreated", data: []string{"/new"}, want: []Notification{note(1, ev(changed, "/new", 130))}},
		{name: "data unchanged", data: []string{"/old", "/atrel"}, wantData: []string{"/atrel", "/old"}},
		{name: "data unchanged though children changed", data: []string{"/kids"}, wantData: []string{"/kids"}},
		{name: "exist present", exist: []string{"/old"}, want: []Notification{note(1, ev(created, "/old", 10))}},
		{name: "exist present new", exist: []string{"/new"}, want: []Notification{note(1, ev(created, "/new", 130))}},
		{name: "exist absent", exist: []string{"/gone"}, wantData: []string{"/gone"}},
		{name: "child absent", child: []string{"/gone"}, want: []Notification{note(1, ev(deleted, "/gone", 0))}},
		{name: "child changed", child: []string{"/kids"}, want: []Notification{note(1, ev(children, "/kids", 120))}},
		{name: "child unchanged", child: []string{"/old", "/atrel", "/modified"}, wantChild: []string{"/atrel", "/modified", "/old"}},
		{
			name: "data and child absent: one NodeDeleted",
			data: []string{"/gone"}, child: []string{"/gone"},
			want: []Notification{note(1, ev(deleted, "/gone", 0))},
		},
		{
			name: "duplicates in a list",
			data: []string{"/modified", "/modified", "/old", "/old"},
			want: []Notification{note(1, ev(changed, "/modified", 150))}, wantData: []string{"/old"},
		},
		{
			name: "order: data, exist, child",
			data: []string{"/gone", "/modified", "/old"}, exist: []string{"/new", "/nope"}, child: []string{"/kids", "/old", "/gone2"},
			want: []Notification{
				note(1, ev(deleted, "/gone", 0)),
				note(1, ev(changed, "/modified", 150)),
				note(1, ev(created, "/new", 130)),
				note(1, ev(children, "/kids", 120)),
				note(1, ev(deleted, "/gone2", 0)),
			},
			wantData:  []string{"/nope", "/old"},
			wantChild: []string{"/old"},
		},
		{
			name: "a firing consumes an existing registration of the session",
			pre:  []reg{{1, "/modified", Data}, {1, "/modified", Child}, {1, "/gone", Any}, {1, "/x", Data}},
			data: []string{"/modified", "/gone"},
			want: []Notification{
				note(1, ev(changed, "/modified", 150)),
				note(1, ev(deleted, "/gone", 0)),
			},
			wantData:  []string{"/x"},
			wantChild: []string{"/modified"},
		},
		{
			name: "a firing consumes a re-sent watch of the same kind",
			data: []string{"/old"}, exist: []string{"/old"}, child: []string{"/old"},
			want:      []Notification{note(1, ev(created, "/old", 10))},
			wantChild: []string{"/old"},
		},
		{
			name:     "re-sending a registered watch is idempotent",
			pre:      []reg{{1, "/old", Data}},
			data:     []string{"/old"},
			wantData: []string{"/old"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager()
			for _, r := range tc.pre {
				m.Add(r.session, r.path, r.kind)
			}
			m.Add(2, "/old", Any) // another session, untouched
			got := withoutKinds(m.Reregister(1, rel, tc.data, tc.exist, tc.child, st))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Reregister =\n  %v\nwant\n  %v", got, tc.want)
			}
			d, c := m.Watches(1)
			if !slices.Equal(d, tc.wantData) || !slices.Equal(c, tc.wantChild) {
				t.Errorf("Watches = %v, %v; want %v, %v", d, c, tc.wantData, tc.wantChild)
			}
			if d, c := m.Watches(2); !slices.Equal(d, []string{"/old"}) || !slices.Equal(c, []string{"/old"}) {
				t.Errorf("other session's watches = %v, %v", d, c)
			}
			checkInvariants(t, m)
		})
	}
}

// model is the reference: a plain list of registrations.
type model []reg

func (md *model) add(s int64, path string, k Kind) {
	for _, kk := range []Kind{Data, Child} {
		if k&kk != 0 && !slices.Contains(*md, reg{s, path, kk}) {
			*md = append(*md, reg{s, path, kk})
		}
	}
}

func (md *model) remove(s int64, path string, k Kind) bool {
	n := len(*md)
	*md = slices.DeleteFunc(*md, func(r reg) bool { return r.session == s && r.path == path && r.kind&k != 0 })
	return len(*md) != n
}

func (md *model) removeSession(s int64) int {
	n := len(*md)
	*md = slices.DeleteFunc(*md, func(r reg) bool { return r.session == s })
	return n - len(*md)
}

func (md *model) trigger(events []tree.Event) []Notification {
	var out []Notification
	for _, e := range events {
		var kinds []Kind
		switch e.Type {
		case tree.EventNodeCreated, tree.EventNodeDataChanged:
			kinds = []Kind{Data}
		case tree.EventNodeChildrenChanged:
			kinds = []Kind{Child}
		case tree.EventNodeDeleted:
			kinds = []Kind{Data, Child}
		}
		var sessions []int64
		*md = slices.DeleteFunc(*md, func(r reg) bool {
			if r.path == e.Path && slices.Contains(kinds, r.kind) {
				if !slices.Contains(sessions, r.session) {
					sessions = append(sessions, r.session)
				}
				return true
			}
			return false
		})
		slices.Sort(sessions)
		for _, s := range sessions {
			out = append(out, Notification{Session: s, Event: e})
		}
	}
	return out
}

func (md model) watches(s int64) (data, child []string) {
	for _, r := range md {
		if r.session == s {
			if r.kind == Data {
				data = append(data, r.path)
			} else {
				child = append(child, r.path)
			}
		}
	}
	slices.Sort(data)
	slices.Sort(child)
	return data, child
}

func TestAgainstModel(t *testing.T) {
	paths := []string{"/", "/a", "/a/b", "/c"}
	types := []tree.EventType{tree.EventNodeCreated, tree.EventNodeDeleted, tree.EventNodeDataChanged, tree.EventNodeChildrenChanged}
	kinds := []Kind{Data, Child, Any}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 42))
		m := NewManager()
		var md model
		nsessions := 1 + r.IntN(6)
		for step := range 300 {
			s := int64(1 + r.IntN(nsessions))
			p := paths[r.IntN(len(paths))]
			switch op := r.IntN(20); {
			case op < 10:
				k := kinds[r.IntN(len(kinds))]
				m.Add(s, p, k)
				md.add(s, p, k)
			case op < 12:
				k := kinds[r.IntN(len(kinds))]
				if got, want := m.Remove(s, p, k), md.remove(s, p, k); got != want {
					t.Fatalf("seed %d step %d: Remove(%d, %s, %v) = %v, want %v", seed, step, s, p, k, got, want)
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
				got, want := withoutKinds(m.Trigger(events)), md.trigger(events)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: Trigger(%v) =\n  %v\nwant\n  %v", seed, step, events, got, want)
				}
			}
			if got, want := m.Len(), len(md); got != want {
				t.Fatalf("seed %d step %d: Len = %d, want %d", seed, step, got, want)
			}
			for s := range int64(nsessions) {
				gd, gc := m.Watches(s + 1)
				wd, wc := md.watches(s + 1)
				if !slices.Equal(gd, wd) || !slices.Equal(gc, wc) {
					t.Fatalf("seed %d step %d: Watches(%d) = %v %v, want %v %v", seed, step, s+1, gd, gc, wd, wc)
				}
			}
		}
		checkInvariants(t, m)
	}
}

// TestConcurrent exercises the lock under -race; each session's watches are
// private to one goroutine, so the totals are predictable.
func TestConcurrent(t *testing.T) {
	m := NewManager()
	const workers, perWorker = 8, 200
	var wg sync.WaitGroup
	fired := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := int64(w + 1)
			for i := range perWorker {
				p := fmt.Sprintf("/w%d/%d", w, i)
				m.Add(s, p, Any)
				fired[w] += len(m.Trigger([]tree.Event{{Type: tree.EventNodeDeleted, Path: p, Zxid: int64(i)}}))
				m.Add(s, p, Data)
				m.Watches(s)
				m.Len()
			}
			if got := m.RemoveSession(s); got != perWorker {
				t.Errorf("worker %d: RemoveSession = %d, want %d", w, got, perWorker)
			}
		}()
	}
	wg.Wait()
	for w, n := range fired {
		if n != perWorker {
			t.Errorf("worker %d: %d notifications, want %d", w, n, perWorker)
		}
	}
	if m.Len() != 0 {
		t.Errorf("Len = %d", m.Len())
	}
	checkInvariants(t, m)
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{0: "none", Data: "data", Child: "child", Any: "any"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
