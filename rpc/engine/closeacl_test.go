package engine

import (
	"testing"

	"github.com/coordd/coordd/fsm"
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
	acl := []tree.ACL{{Perms: tree.PermAll, Scheme: "digest", ID: fsm.Digest([]byte("alice:pw"))}}
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
