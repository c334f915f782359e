package engine

import (
	"testing"

	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// TestClosingSessionReadsItsOwnEphemeralsDeletion: a session that closes
// (or expires) while connected here is sent the deletion of its own
// digest-protected ephemeral: the identities it added count for its final
// events, though the close takes them out of the registry. ZooKeeper 3.8
// does the same (its connection keeps its auth info until it is gone).
// Another session without the identity still sees nothing of the node.
func TestClosingSessionReadsItsOwnEphemeralsDeletion(t *testing.T) {
	acl := []tree.ACL{{Perms: tree.PermAll, Scheme: "digest", ID: auth.Digest([]byte("alice:pw"))}}
	for _, expire := range []bool{false, true} {
		name := "close"
		if expire {
			name = "expiry"
		}
		t.Run(name, func(t *testing.T) {
			e, c := testEngine(t)
			a, b := connectTest(t, e, ConnectRequest{}), connectTest(t, e, ConnectRequest{})
			b.ok(Request{Op: OpCreate, Path: "/p"})
			a.ok(Request{Op: OpAddAuth, AuthScheme: "digest", Auth: []byte("alice:pw")})
			a.ok(Request{Op: OpCreate, Path: "/p/n", ACL: acl, Create: Create{Kind: tree.Ephemeral}})
			a.ok(Request{Op: OpGetData, Path: "/p/n", Watch: true})
			a.ok(Request{Op: OpAddWatch, Path: "/p", Recursive: true})
			// b may not read /p/n: its recursive watch must stay silent
			// about it, and see /p's own change.
			b.ok(Request{Op: OpAddWatch, Path: "/p", Recursive: true})
			b.ok(Request{Op: OpGetChildren, Path: "/p", Watch: true})

			var evs []Event
			if expire {
				c.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: a.s.ID(), Expired: true, Term: 1}}})
				for {
					m := a.next()
					if m.Event != nil {
						evs = append(evs, *m.Event)
						continue
					}
					if m.Final == nil || m.Final.Code != SessionExpired {
						t.Fatalf("expired session got %+v, want its end with SessionExpired", m)
					}
					break
				}
			} else {
				var r *Response
				r, evs = a.do(Request{Op: OpClose})
				if r.Code != OK {
					t.Fatalf("close: %v %s", r.Code, r.Message)
				}
			}
			if len(evs) != 1 || evs[0].Type != tree.EventNodeDeleted || evs[0].Path != "/p/n" {
				t.Fatalf("closing session was sent %+v, want one NodeDeleted /p/n (its own digest-protected ephemeral)", evs)
			}
			if m := b.next(); m.Event == nil || m.Event.Type != tree.EventNodeChildrenChanged || m.Event.Path != "/p" {
				t.Fatalf("other session got %+v, want only NodeChildrenChanged /p (it may not read /p/n)", m)
			}
			// Nothing else queued for b: a sync's reply comes next.
			if _, evs := b.do(Request{Op: OpSync, Path: "/"}); len(evs) != 0 {
				t.Fatalf("other session was sent %+v about a node it may not read", evs)
			}
		})
	}
}

// TestReregisterFiresOnlyReadable: the watches a resume (or setWatches)
// re-registers fire at once only for nodes the session may READ, as live
// events do: a session that may not read a node learns neither that it was
// created nor when it last changed. Its watch is consumed as a live
// trigger's would be; those on nodes it may read fire as before.
func TestReregisterFiresOnlyReadable(t *testing.T) {
	acl := []tree.ACL{{Perms: tree.PermAll, Scheme: "digest", ID: auth.Digest([]byte("alice:pw"))}}
	e, _ := testEngine(t)
	o, a := connectTest(t, e, ConnectRequest{}), connectTest(t, e, ConnectRequest{})
	a.ok(Request{Op: OpAddAuth, AuthScheme: "digest", Auth: []byte("alice:pw")})
	a.ok(Request{Op: OpCreate, Path: "/open"})
	rel := a.ok(Request{Op: OpSync, Path: "/"}).Zxid
	o.s.Detach()
	// While o is away: a protected node appears (o had an exists watch on
	// it), and so does an open one.
	a.ok(Request{Op: OpCreate, Path: "/secret", ACL: acl})
	a.ok(Request{Op: OpCreate, Path: "/open2"})
	a.ok(Request{Op: OpSetData, Path: "/open", Data: []byte("v"), Version: -1})

	lists := Watches{RelZxid: rel, Exist: []string{"/secret", "/open2"}, Data: []string{"/open"}, Child: []string{"/secret"}}
	r := connectTest(t, e, ConnectRequest{SessionID: o.s.ID(), Password: o.connected.Password, Watches: lists})
	got := map[string]tree.EventType{}
	for i := 0; i < 2; i++ {
		m := r.next()
		if m.Event == nil {
			t.Fatalf("message %d after the resume is %+v, want an event", i, m)
		}
		got[m.Event.Path] = m.Event.Type
	}
	if len(got) != 2 || got["/open2"] != tree.EventNodeCreated || got["/open"] != tree.EventNodeDataChanged {
		t.Fatalf("resume fired %v, want NodeCreated /open2 and NodeDataChanged /open only", got)
	}
	if _, evs := r.do(Request{Op: OpSync, Path: "/"}); len(evs) != 0 {
		t.Fatalf("resume fired %+v about a node the session may not read", evs)
	}
	// The same through setWatches on the live connection.
	_, evs := r.do(Request{Op: OpSetWatches, Watches: Watches{RelZxid: rel, Exist: []string{"/secret"}, Data: []string{"/secret"}}})
	if _, more := r.do(Request{Op: OpSync, Path: "/"}); len(evs)+len(more) != 0 {
		t.Fatalf("setWatches fired %+v %+v about a node the session may not read", evs, more)
	}
	// The secret's later changes are filtered as live events.
	a.ok(Request{Op: OpSetData, Path: "/secret", Data: []byte("x"), Version: -1})
	if _, evs := r.do(Request{Op: OpSync, Path: "/"}); len(evs) != 0 {
		t.Fatalf("session was sent %+v about a node it may not read", evs)
	}
}
