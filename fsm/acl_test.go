package fsm

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

func entry(p tree.Perms, scheme, id string) tree.ACL {
	return tree.ACL{Perms: p, Scheme: scheme, ID: id}
}

// TestDigest: the digest of user:password is ZooKeeper's, byte for byte
// (the values are what ZooKeeper 3.8 computes and stores).
func TestDigest(t *testing.T) {
	for in, want := range map[string]string{
		"super:secret": "super:lK75jTNcA+U9vtVEw5vB51mj/w4=",
		"alice:pw":     "alice:V55/p2T0OpjQ+low3NVAH4aLvm0=",
	} {
		if got := Digest([]byte(in)); got != want {
			t.Errorf("Digest(%q) = %q, want %q", in, got, want)
		}
	}
	// Without a ':' the whole string is the user.
	if got := Digest([]byte("nocolon")); got[:len("nocolon:")] != "nocolon:" {
		t.Errorf("Digest(nocolon) = %q", got)
	}
	if err := ValidSuperDigest("super:lK75jTNcA+U9vtVEw5vB51mj/w4="); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "super", "super:secret", ":lK75jTNcA+U9vtVEw5vB51mj/w4="} {
		if ValidSuperDigest(bad) == nil {
			t.Errorf("ValidSuperDigest(%q) accepted", bad)
		}
	}
}

// TestFixup: which ACLs ZooKeeper 3.8 accepts and what it stores for them
// (each case was sent to ZooKeeper 3.8.0 and its answer noted).
func TestFixup(t *testing.T) {
	alice := &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "alice:h"}, {Scheme: "super"}}}
	anon := &Requester{Conn: Conn{IP: netip.MustParseAddr("127.0.0.1")}}
	cert := &Requester{Conn: Conn{IP: netip.MustParseAddr("127.0.0.1"), X509: "CN=c,O=o"}, IDs: alice.IDs}
	saslBob := &Requester{IDs: []session.Identity{{Scheme: "sasl", ID: "bob"}}}
	open := entry(31, "world", "anyone")
	cases := []struct {
		name string
		r    *Requester
		in   []tree.ACL
		want []tree.ACL // nil: InvalidACL
	}{
		{"world anyone", anon, []tree.ACL{open}, []tree.ACL{open}},
		{"world someone", anon, []tree.ACL{entry(31, "world", "someone")}, nil},
		{"world, empty id", anon, []tree.ACL{entry(31, "world", "")}, nil},
		{"empty scheme", anon, []tree.ACL{entry(31, "", "anyone")}, nil},
		{"auth without identity", anon, []tree.ACL{entry(31, "auth", "")}, nil},
		{"auth, the ip does not count", anon, []tree.ACL{entry(31, "auth", "x")}, nil},
		{"auth, digest (super skipped)", alice, []tree.ACL{entry(5, "auth", "")}, []tree.ACL{entry(5, "digest", "alice:h")}},
		{"auth, certificate then digest", cert, []tree.ACL{entry(1, "auth", "")}, []tree.ACL{entry(1, "x509", "CN=c,O=o"), entry(1, "digest", "alice:h")}},
		{"digest", anon, []tree.ACL{entry(31, "digest", "a:b")}, []tree.ACL{entry(31, "digest", "a:b")}},
		{"digest without colon", anon, []tree.ACL{entry(31, "digest", "alice")}, nil},
		{"digest, three parts", anon, []tree.ACL{entry(31, "digest", "a:b:c")}, nil},
		{"digest, trailing colon", anon, []tree.ACL{entry(31, "digest", "a:b:")}, []tree.ACL{entry(31, "digest", "a:b:")}},
		{"digest, leading colon", anon, []tree.ACL{entry(31, "digest", ":b")}, []tree.ACL{entry(31, "digest", ":b")}},
		{"digest, colons only", anon, []tree.ACL{entry(31, "digest", "::")}, nil},
		{"ip", anon, []tree.ACL{entry(31, "ip", "10.0.0.1")}, []tree.ACL{entry(31, "ip", "10.0.0.1")}},
		{"ip cidr", anon, []tree.ACL{entry(31, "ip", "10.0.0.0/8")}, []tree.ACL{entry(31, "ip", "10.0.0.0/8")}},
		{"ip /33", anon, []tree.ACL{entry(31, "ip", "10.0.0.0/33")}, nil},
		{"ip /", anon, []tree.ACL{entry(31, "ip", "10.0.0.0/")}, nil},
		{"ip v6", anon, []tree.ACL{entry(31, "ip", "::1")}, nil},
		{"ip, three parts", anon, []tree.ACL{entry(31, "ip", "10.0.0")}, nil},
		{"ip with a sign", anon, []tree.ACL{entry(31, "ip", "+10.0.0.1")}, []tree.ACL{entry(31, "ip", "+10.0.0.1")}},
		{"ip part over 255", anon, []tree.ACL{entry(31, "ip", "10.0.0.256")}, nil},
		{"x509", anon, []tree.ACL{entry(1, "x509", "CN=a")}, []tree.ACL{entry(1, "x509", "CN=a")}},
		{"x509 not a name", anon, []tree.ACL{entry(1, "x509", "a")}, nil},
		{"unknown scheme", anon, []tree.ACL{entry(31, "foo", "bar")}, nil},
		{"super is no ACL scheme", anon, []tree.ACL{entry(31, "super", "")}, nil},
		{"sasl", anon, []tree.ACL{entry(31, "sasl", "bob")}, []tree.ACL{entry(31, "sasl", "bob")}},
		{"sasl principal", anon, []tree.ACL{entry(31, "sasl", "zk/host@EXAMPLE.COM")}, []tree.ACL{entry(31, "sasl", "zk/host@EXAMPLE.COM")}},
		{"sasl user@realm", anon, []tree.ACL{entry(31, "sasl", "bob@REALM")}, []tree.ACL{entry(31, "sasl", "bob@REALM")}},
		{"sasl, empty realm", anon, []tree.ACL{entry(31, "sasl", "bob@")}, []tree.ACL{entry(31, "sasl", "bob@")}},
		{"sasl, only @", anon, []tree.ACL{entry(31, "sasl", "@")}, []tree.ACL{entry(31, "sasl", "@")}},
		{"sasl, slashes without realm", anon, []tree.ACL{entry(31, "sasl", "a/b/c")}, []tree.ACL{entry(31, "sasl", "a/b/c")}},
		{"sasl, two @", anon, []tree.ACL{entry(31, "sasl", "a@b@c")}, nil},
		{"sasl, two / before @", anon, []tree.ACL{entry(31, "sasl", "a/b/c@R")}, nil},
		{"sasl, / in the realm", anon, []tree.ACL{entry(31, "sasl", "a@R/x")}, nil},
		{"auth, sasl", saslBob, []tree.ACL{entry(31, "auth", "")}, []tree.ACL{entry(31, "sasl", "bob")}},
		{"any perms are kept", anon, []tree.ACL{entry(0, "world", "anyone"), entry(32, "world", "anyone"), entry(-1, "world", "anyone")},
			[]tree.ACL{entry(0, "world", "anyone"), entry(32, "world", "anyone"), entry(-1, "world", "anyone")}},
		{"repeats dropped", anon, []tree.ACL{open, open}, []tree.ACL{open}},
		{"different perms kept", anon, []tree.ACL{entry(1, "world", "anyone"), open}, []tree.ACL{entry(1, "world", "anyone"), open}},
		{"empty: open (entries from before ACLs)", anon, nil, []tree.ACL{open}},
	}
	for _, c := range cases {
		got, err := c.r.Fixup(c.in)
		switch {
		case c.want == nil && !errors.Is(err, tree.ErrInvalidACL):
			t.Errorf("%s: %v %v, want InvalidACL", c.name, got, err)
		case c.want != nil && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}

// TestAllowed: ZooKeeper's checkACL: any of perm's bits, world:anyone, the
// requester's identities per scheme, the super user, an empty ACL.
func TestAllowed(t *testing.T) {
	ip := func(s string) *Requester { return &Requester{Conn: Conn{IP: netip.MustParseAddr(s)}} }
	sasl := func(user string) *Requester { return &Requester{IDs: []session.Identity{{Scheme: "sasl", ID: user}}} }
	cases := []struct {
		name string
		r    *Requester
		acl  []tree.ACL
		perm tree.Perms
		want bool
	}{
		{"empty ACL", ip("10.1.1.1"), nil, tree.PermAdmin, true},
		{"world", ip("10.1.1.1"), []tree.ACL{entry(tree.PermRead, "world", "anyone")}, tree.PermRead, true},
		{"world, other perm", ip("10.1.1.1"), []tree.ACL{entry(tree.PermRead, "world", "anyone")}, tree.PermWrite, false},
		{"any bit of perm", ip("10.1.1.1"), []tree.ACL{entry(tree.PermAdmin, "world", "anyone")}, tree.PermRead | tree.PermAdmin, true},
		{"ip exact", ip("10.1.1.1"), []tree.ACL{entry(31, "ip", "10.1.1.1")}, tree.PermRead, true},
		{"ip other", ip("10.1.1.2"), []tree.ACL{entry(31, "ip", "10.1.1.1")}, tree.PermRead, false},
		{"ip cidr /8", ip("10.200.3.4"), []tree.ACL{entry(31, "ip", "10.0.0.0/8")}, tree.PermRead, true},
		{"ip cidr /12", ip("10.31.3.4"), []tree.ACL{entry(31, "ip", "10.16.0.0/12")}, tree.PermRead, true},
		{"ip outside /12", ip("10.32.3.4"), []tree.ACL{entry(31, "ip", "10.16.0.0/12")}, tree.PermRead, false},
		{"ip /0", ip("1.2.3.4"), []tree.ACL{entry(31, "ip", "9.9.9.9/0")}, tree.PermRead, true},
		{"ip mapped v4", ip("::ffff:10.1.1.1"), []tree.ACL{entry(31, "ip", "10.1.1.1")}, tree.PermRead, true},
		{"ip v6 never", ip("::1"), []tree.ACL{entry(31, "ip", "0.0.0.0/0")}, tree.PermRead, false},
		{"no ip known", &Requester{}, []tree.ACL{entry(31, "ip", "0.0.0.0/0")}, tree.PermRead, false},
		{"digest", &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "u:h"}}}, []tree.ACL{entry(31, "digest", "u:h")}, tree.PermRead, true},
		{"digest other", &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "u:h"}}}, []tree.ACL{entry(31, "digest", "u:x")}, tree.PermRead, false},
		{"digest of another scheme", &Requester{IDs: []session.Identity{{Scheme: "x509", ID: "u:h"}}}, []tree.ACL{entry(31, "digest", "u:h")}, tree.PermRead, false},
		{"x509", &Requester{Conn: Conn{X509: "CN=a"}}, []tree.ACL{entry(31, "x509", "CN=a")}, tree.PermRead, true},
		{"x509 other", &Requester{Conn: Conn{X509: "CN=b"}}, []tree.ACL{entry(31, "x509", "CN=a")}, tree.PermRead, false},
		{"no certificate", &Requester{}, []tree.ACL{entry(31, "x509", "")}, tree.PermRead, false},
		{"super", &Requester{IDs: []session.Identity{{Scheme: "super"}}}, []tree.ACL{entry(0, "digest", "u:h")}, tree.PermAdmin, true},
		{"sasl", sasl("bob"), []tree.ACL{entry(31, "sasl", "bob")}, tree.PermWrite, true},
		{"sasl other", sasl("bob"), []tree.ACL{entry(31, "sasl", "alice")}, tree.PermWrite, false},
		{"sasl's super matches every sasl entry", sasl("super"), []tree.ACL{entry(31, "sasl", "alice")}, tree.PermWrite, true},
		{"sasl's super matches no other scheme", sasl("super"), []tree.ACL{entry(31, "digest", "super:h"), entry(31, "x509", "CN=super")}, tree.PermWrite, false},
		{"sasl of another scheme", &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "bob"}}}, []tree.ACL{entry(31, "sasl", "bob")}, tree.PermRead, false},
		{"sasl in the other case", sasl("Bob"), []tree.ACL{entry(31, "sasl", "bob")}, tree.PermRead, false},
		{"auth is never matched", &Requester{IDs: []session.Identity{{Scheme: "auth"}}}, []tree.ACL{entry(31, "auth", "")}, tree.PermRead, false},
	}
	for _, c := range cases {
		if got := c.r.Allowed(c.acl, c.perm); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWhoAmI: a digest shows its user, never its hash; super has no user.
func TestWhoAmI(t *testing.T) {
	r := &Requester{Conn: Conn{IP: netip.MustParseAddr("::ffff:127.0.0.1"), X509: "CN=c"},
		IDs: []session.Identity{{Scheme: "super"}, {Scheme: "digest", ID: "super:h"}, {Scheme: "sasl", ID: "bob"}}}
	want := []session.Identity{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "x509", ID: "CN=c"}, {Scheme: "super"}, {Scheme: "digest", ID: "super"}, {Scheme: "sasl", ID: "bob"}}
	if got := r.WhoAmI(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
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
		w.Conn = ConnToPB(Conn{IP: netip.MustParseAddr(ip)})
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
