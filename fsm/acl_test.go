package fsm

import (
	"bytes"
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

func entry(p tree.Perms, scheme, id string) tree.ACL {
	return tree.ACL{Perms: p, Scheme: scheme, ID: id}
}

func addAuth(ms, sess, xid int64, ids ...*cmdpb.Identity) *cmdpb.Command {
	return &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_AddAuth{AddAuth: &cmdpb.AddAuth{SessionId: sess, Xid: xid, Ids: ids}}}
}

// TestApplyChecksACLs: a write's checks use its session's replicated
// identities and the connection identities the write carries; addAuth is
// replicated, idempotent, and survives a snapshot; two FSMs fed the log
// agree.
func TestApplyChecksACLs(t *testing.T) {
	digest := []*cmdpb.ACL{{Perms: 31, Scheme: "digest", Id: "alice:h"}}
	setACL := func(path string, acl []*cmdpb.ACL, v int32) *cmdpb.Write {
		return &cmdpb.Write{Op: &cmdpb.Write_SetAcl{SetAcl: &cmdpb.SetACL{Path: path, Acl: acl, Version: v}}}
	}
	withConn := func(w *cmdpb.Write, ip string) *cmdpb.Write {
		w.Conn = ConnToPB(auth.Conn{IP: netip.MustParseAddr(ip)})
		return w
	}
	cmds := []*cmdpb.Command{
		open(1, "a"), // session 1: alice
		open(2, "b"), // session 2: anonymous
		addAuth(3, 1, 1, &cmdpb.Identity{Scheme: "digest", Id: "alice:h"}),
		addAuth(4, 1, 2, &cmdpb.Identity{Scheme: "digest", Id: "alice:h"}), // again: no change
		write(5, 1, 3, &cmdpb.Write{Op: &cmdpb.Write_Create{Create: &cmdpb.Create{Path: "/a", Acl: []*cmdpb.ACL{{Perms: 31, Scheme: "auth"}}}}}),
		write(6, 2, 1, create("/a/x", "", cmdpb.Kind_PERSISTENT, false)),                          // no CREATE
		write(7, 1, 4, create("/a/x", "", cmdpb.Kind_PERSISTENT, false)),                          // alice may
		write(8, 2, 2, setACL("/a", digest, -1)),                                                  // no ADMIN
		write(9, 1, 5, setACL("/a", []*cmdpb.ACL{{Perms: 4, Scheme: "ip", Id: "10.0.0.0/8"}}, 0)), // aversion 0 -> 1
		write(10, 2, 3, withConn(create("/a/y", "", cmdpb.Kind_PERSISTENT, false), "10.9.9.9")),   // from 10/8: CREATE
		write(11, 2, 4, withConn(create("/a/z", "", cmdpb.Kind_PERSISTENT, false), "11.9.9.9")),   // from elsewhere
		addAuth(12, 99, 1, &cmdpb.Identity{Scheme: "digest", Id: "x:y"}),                          // unknown session
	}
	logs := logOf(t, cmds...)
	f := New(Options{})
	var res []*cmdpb.Result
	for _, l := range logs {
		r, _ := f.Apply(l).(*cmdpb.Result)
		res = append(res, r)
	}
	want := map[int]cmdpb.Code{2: cmdpb.Code_OK, 3: cmdpb.Code_OK, 4: cmdpb.Code_OK, 5: cmdpb.Code_NO_AUTH, 6: cmdpb.Code_OK,
		7: cmdpb.Code_NO_AUTH, 8: cmdpb.Code_OK, 9: cmdpb.Code_OK, 10: cmdpb.Code_NO_AUTH, 11: cmdpb.Code_SESSION_EXPIRED}
	for i, code := range want {
		if res[i] == nil || res[i].Code != code {
			t.Errorf("entry %d: %v, want %v", i+1, res[i], code)
		}
	}
	if res[8].Stat.Aversion != 1 {
		t.Errorf("setACL stat %v", res[8].Stat)
	}
	f.Read(func(v View) {
		if ids := v.Sessions.Identities(1); !reflect.DeepEqual(ids, []session.Identity{{Scheme: "digest", ID: "alice:h"}}) {
			t.Errorf("identities %v", ids)
		}
	})
	// Another FSM fed the same log agrees, and so does one restored from a
	// snapshot, which then decides the next write alike.
	g := New(Options{})
	g.ApplyBatch(logs)
	snap := snapshotBytes(t, f)
	if !bytes.Equal(snap, snapshotBytes(t, g)) {
		t.Fatal("two FSMs fed the same log differ")
	}
	h := New(Options{})
	if err := h.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	next := logOf(t, append(cmds, write(13, 1, 6, setACL("/a", digest, -1)), write(14, 2, 5, setACL("/a", digest, -1)))...)[len(cmds):]
	for _, fs := range []*FSM{f, h} {
		r1, _ := fs.Apply(next[0]).(*cmdpb.Result)
		r2, _ := fs.Apply(next[1]).(*cmdpb.Result)
		// setACL needs ADMIN, which the ip entry does not grant: alice
		// has no ADMIN now either, and neither has the other session.
		if r1.Code != cmdpb.Code_NO_AUTH || r2.Code != cmdpb.Code_NO_AUTH {
			t.Errorf("after restore: %v %v", r1, r2)
		}
	}
	if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, h)) {
		t.Fatal("the restored FSM diverged")
	}
}

// TestSnapshotBeforeACLs: a snapshot written by a server from before ACLs
// and identities (testdata/snapshot-before-acls.bin; also from before
// session owners) still loads: its nodes are open to everyone with aversion
// 0, its sessions have no identities, and its tree is written again byte
// for byte.
func TestSnapshotBeforeACLs(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-before-acls.bin")
	if err != nil {
		t.Fatal(err)
	}
	f := New(Options{})
	if err := f.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
		t.Fatal(err)
	}
	f.Read(func(v View) {
		if v.Applied != 10 || v.Sessions.Len() != 2 {
			t.Fatalf("applied %d, %d sessions", v.Applied, v.Sessions.Len())
		}
		for _, p := range []string{"/", "/app", "/app/lock-0000000000", "/app/box", "/app/ttl"} {
			acl, st, err := v.Tree.GetACL(p)
			if err != nil || !tree.IsOpen(acl) || st.Aversion != 0 {
				t.Errorf("%s: %v %+v %v", p, acl, st, err)
			}
		}
		if data, _, err := v.Tree.Get("/app"); err != nil || string(data) != "config v2" {
			t.Errorf("/app: %q %v", data, err)
		}
		if ids := v.Sessions.Identities(2); ids != nil {
			t.Errorf("identities %v", ids)
		}
		if _, _, ok := v.Sessions.Reply(2, 1); !ok {
			t.Error("the cached replies are lost")
		}
	})
	// Its tree gains ZooKeeper's system nodes, which it lacked (the server
	// answered for them then), and nothing else: written again, it is the
	// old tree with them added.
	f.Read(func(v View) {
		if acl, st, err := v.Tree.GetACL("/zookeeper/config"); err != nil || len(acl) != 1 || acl[0].Perms != tree.PermRead || st.Aversion != -1 {
			t.Errorf("/zookeeper/config: %v %+v %v", acl, st, err)
		}
	})
	treeOf := func(b []byte) []byte { return b[bytes.Index(b, []byte("coordtr\x00")):] }
	oldTree, err := tree.Read(bytes.NewReader(treeOf(old)), tree.Options{})
	if err != nil {
		t.Fatal(err)
	}
	oldTree.AddSystemNodes()
	var want bytes.Buffer
	if _, err := oldTree.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(treeOf(snapshotBytes(t, f)), want.Bytes()) {
		t.Fatal("the restored tree is not the old one with the system nodes")
	}
	// And the state goes on: ACLs and identities from here.
	f.ApplyBatch([]*raft.Log{
		logAt(t, 11, addAuth(2_000_000_000_000, 2, 8, &cmdpb.Identity{Scheme: "digest", Id: "u:h"})),
		logAt(t, 12, write(2_000_000_000_001, 2, 9, &cmdpb.Write{Op: &cmdpb.Write_SetAcl{SetAcl: &cmdpb.SetACL{Path: "/app", Acl: []*cmdpb.ACL{{Perms: 1, Scheme: "auth"}}, Version: 0}}})),
	})
	f.Read(func(v View) {
		acl, st, _ := v.Tree.GetACL("/app")
		if !reflect.DeepEqual(acl, []tree.ACL{entry(1, "digest", "u:h")}) || st.Aversion != 1 {
			t.Fatalf("%v %+v", acl, st)
		}
	})
}

func logAt(t *testing.T, index uint64, c *cmdpb.Command) *raft.Log {
	l := logOf(t, c)[0]
	l.Index = index
	return l
}
