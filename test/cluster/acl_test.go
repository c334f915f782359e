package cluster

// End-to-end tests of ZooKeeper's ACLs and authentication, through the Go
// client (gRPC) and through ZooKeeper's protocol (go-zookeeper, and the raw
// codec for what go-zookeeper does not send).
//
// The ZooKeeper-protocol half of TestACLMatrix also runs against a real
// ZooKeeper when COORDD_ACL_ZOOKEEPER names one (host:port) started with
// -Dzookeeper.DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=
// and -Dzookeeper.extendedTypesEnabled=true: the expected answers are
// ZooKeeper's own, and the one rule ZooKeeper 3.8.0 does not have (exists
// needs READ, since 3.8.4 and 3.9.2) is told apart.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// superDigest is the digest of super:secret.
const superDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4="

// aclOp is one operation of the matrix, run by an unauthenticated session
// on a node whose ACL grants world:anyone one permission.
type aclOp struct {
	name string
	// need is the permission the operation needs on the node (any of its
	// bits; 0: none).
	need client.Perm
	// absentOK: with the permission, the answer is NoNode (the operation
	// names a child that does not exist).
	absentOK bool
	// zk380 is what ZooKeeper 3.8.0 needs where it differs.
	zk380 *client.Perm
}

var noPerm client.Perm

// aclOps are the operations, with the permission each needs on the node n
// it is given (n's children: n/child exists, n/absent does not).
var aclOps = []aclOp{
	{name: "getData", need: client.PermRead},
	{name: "exists", need: client.PermRead, zk380: &noPerm},
	{name: "getChildren", need: client.PermRead},
	{name: "getChildren2", need: client.PermRead},
	{name: "getAllChildrenNumber", need: client.PermRead},
	{name: "getACL", need: client.PermRead | client.PermAdmin},
	{name: "setData", need: client.PermWrite},
	{name: "setACL", need: client.PermAdmin},
	{name: "create", need: client.PermCreate},
	{name: "create2", need: client.PermCreate},
	{name: "createEphemeral", need: client.PermCreate},
	{name: "createSequential", need: client.PermCreate},
	{name: "createContainer", need: client.PermCreate},
	{name: "createTTL", need: client.PermCreate},
	{name: "delete", need: client.PermDelete},
	{name: "deleteAbsent", need: client.PermDelete, absentOK: true},
	{name: "multiCheck", need: client.PermRead},
	{name: "multiCreate", need: client.PermCreate},
	{name: "multiSetData", need: client.PermWrite},
	{name: "multiDelete", need: client.PermDelete},
	{name: "multiReadGetData", need: client.PermRead},
	{name: "multiReadGetChildren", need: client.PermRead},
	{name: "sync", need: 0},
	{name: "addWatch", need: 0},
	{name: "getEphemerals", need: 0},
	{name: "whoAmI", need: 0},
}

// aclTarget runs the matrix's operations on one server over one protocol.
type aclTarget interface {
	// run runs op on node n as the unauthenticated session and returns
	// ZooKeeper's name of the outcome ("OK", "NoAuth", ...), or "" when
	// the protocol has no such operation.
	run(op string, n string) string
	// setup makes n with a child and the ACL world:anyone:perm, as super;
	// reset puts back what an operation took away.
	setup(n string, perm client.Perm)
	reset(n string, perm client.Perm)
}

// TestACLMatrix: every operation, on a node granting each single
// permission (and none), is allowed exactly when the permission is the one
// ZooKeeper requires: through the Go client and through ZooKeeper's
// protocol. A check missing or misplaced anywhere fails a cell.
func TestACLMatrix(t *testing.T) {
	c := New(t, 1, Options{SuperDigest: superDigest})
	targets := map[string]aclTarget{
		"grpc":      newGRPCTarget(t, c.Servers()),
		"zookeeper": newZKTarget(t, c.Servers()[0]),
	}
	real := os.Getenv("COORDD_ACL_ZOOKEEPER")
	if real != "" {
		targets["real-zookeeper-3.8.0"] = newZKTarget(t, real)
	}
	perms := []client.Perm{0, client.PermRead, client.PermWrite, client.PermCreate, client.PermDelete, client.PermAdmin}
	for name, tg := range targets {
		cells := 0
		root := fmt.Sprintf("/matrix-%d", time.Now().UnixNano())
		for _, p := range perms {
			n := fmt.Sprintf("%s-%s", root, permName(p))
			tg.setup(n, p)
			for _, op := range aclOps {
				need := op.need
				if name == "real-zookeeper-3.8.0" && op.zk380 != nil {
					need = *op.zk380
				}
				want := "NoAuth"
				switch {
				case need == 0 || p&need != 0:
					want = "OK"
					if op.absentOK {
						want = "NoNode"
					}
				}
				got := tg.run(op.name, n)
				if got == "" {
					continue // the protocol has no such operation
				}
				cells++
				if got != want {
					t.Errorf("%s: %s on a node granting %s: %s, want %s", name, op.name, permName(p), got, want)
				}
				tg.reset(n, p)
			}
		}
		t.Logf("%s: %d operations checked", name, cells)
	}
}

func permName(p client.Perm) string {
	if p == 0 {
		return "none"
	}
	return p.String()
}

// grpcTarget runs the matrix through the Go client.
type grpcTarget struct {
	t           testing.TB
	ctx         context.Context
	super, anon *client.Client
}

func newGRPCTarget(t testing.TB, servers []string) *grpcTarget {
	g := &grpcTarget{t: t, ctx: ctxT(t), super: connect(t, servers...), anon: connect(t, servers...)}
	if err := g.super.AddAuth(g.ctx, "digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *grpcTarget) setup(n string, perm client.Perm) {
	for _, p := range []string{n, n + "/child"} {
		if _, err := g.super.Create(g.ctx, p, nil, client.CreateMode{}); err != nil {
			g.t.Fatal(err)
		}
	}
	if _, err := g.super.SetACL(g.ctx, n, client.WorldACL(perm), -1); err != nil {
		g.t.Fatal(err)
	}
}

func (g *grpcTarget) reset(n string, perm client.Perm) {
	ctx := g.ctx
	if _, _, err := g.super.Get(ctx, n+"/child"); errors.Is(err, client.ErrNoNode) {
		if _, err := g.super.Create(ctx, n+"/child", nil, client.CreateMode{}); err != nil {
			g.t.Fatal(err)
		}
	}
	kids, _, err := g.super.Children(ctx, n)
	if err != nil {
		g.t.Fatal(err)
	}
	for _, k := range kids {
		if k != "child" {
			if err := g.super.Delete(ctx, n+"/"+k, -1); err != nil {
				g.t.Fatal(err)
			}
		}
	}
}

// outcome names a client error as ZooKeeper does.
func outcome(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{nil, "OK"}, {client.ErrNoAuth, "NoAuth"}, {client.ErrNoNode, "NoNode"}, {client.ErrInvalidACL, "InvalidACL"},
		{client.ErrBadVersion, "BadVersion"}, {client.ErrNodeExists, "NodeExists"}, {client.ErrAuthFailed, "AuthFailed"},
		{zk.ErrNoAuth, "NoAuth"}, {zk.ErrNoNode, "NoNode"}, {zk.ErrInvalidACL, "InvalidACL"}, {zk.ErrBadVersion, "BadVersion"},
		{zk.ErrNodeExists, "NodeExists"}, {zk.ErrAuthFailed, "AuthFailed"}} {
		if err == e.err || e.err != nil && errors.Is(err, e.err) {
			return e.name
		}
	}
	return "unexpected: " + err.Error()
}

func (g *grpcTarget) run(op, n string) string {
	ctx, a := g.ctx, g.anon
	var err error
	switch op {
	case "getData":
		_, _, err = a.Get(ctx, n)
	case "exists":
		_, _, err = a.Exists(ctx, n)
	case "getChildren":
		_, _, err = a.Children(ctx, n)
	case "getACL":
		_, _, err = a.GetACL(ctx, n)
	case "setData":
		_, err = a.Set(ctx, n, []byte("x"), -1)
	case "setACL":
		acl, _, gerr := g.super.GetACL(ctx, n)
		if gerr != nil {
			g.t.Fatal(gerr)
		}
		_, err = a.SetACL(ctx, n, acl, -1)
	case "create":
		_, err = a.Create(ctx, n+"/new", nil, client.CreateMode{})
	case "createEphemeral":
		_, err = a.Create(ctx, n+"/eph", nil, client.CreateMode{Kind: client.Ephemeral})
	case "createSequential":
		_, err = a.Create(ctx, n+"/seq-", nil, client.CreateMode{Sequential: true})
	case "createContainer":
		_, err = a.Create(ctx, n+"/box", nil, client.CreateMode{Kind: client.Container})
	case "createTTL":
		_, err = a.Create(ctx, n+"/ttl", nil, client.CreateMode{Kind: client.TTL, TTL: time.Hour})
	case "delete":
		err = a.Delete(ctx, n+"/child", -1)
	case "deleteAbsent":
		err = a.Delete(ctx, n+"/absent", -1)
	case "multiCheck":
		_, err = a.Multi(ctx, client.CheckOp(n, -1))
	case "multiCreate":
		_, err = a.Multi(ctx, client.CreateOp(n+"/m", nil, client.CreateMode{}))
	case "multiSetData":
		_, err = a.Multi(ctx, client.SetOp(n, nil, -1))
	case "multiDelete":
		_, err = a.Multi(ctx, client.DeleteOp(n+"/child", -1))
	case "sync":
		err = a.Sync(ctx, n)
	case "whoAmI":
		_, err = a.WhoAmI(ctx)
	default:
		return ""
	}
	return outcome(err)
}

// zkTarget runs the matrix through ZooKeeper's protocol: go-zookeeper,
// and the raw codec for what it does not send.
type zkTarget struct {
	t           testing.TB
	super, anon *zk.Conn
	raw         *aclWire
}

func connectZK(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatalf("no ZooKeeper session on %s", addr)
		}
	}
}

// quietZK drops go-zookeeper's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func newZKTarget(t testing.TB, addr string) *zkTarget {
	z := &zkTarget{t: t, super: connectZK(t, addr), anon: connectZK(t, addr), raw: dialACLWire(t, addr)}
	if err := z.super.AddAuth("digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	return z
}

func zkWorld(p client.Perm) []zk.ACL { return zk.WorldACL(int32(p)) }

func (z *zkTarget) setup(n string, perm client.Perm) {
	for _, p := range []string{n, n + "/child"} {
		if _, err := z.super.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			z.t.Fatalf("create %s: %v", p, err)
		}
	}
	if _, err := z.super.SetACL(n, zkWorld(perm), -1); err != nil {
		z.t.Fatal(err)
	}
}

func (z *zkTarget) reset(n string, perm client.Perm) {
	if ok, _, err := z.super.Exists(n + "/child"); err != nil {
		z.t.Fatal(err)
	} else if !ok {
		if _, err := z.super.Create(n+"/child", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			z.t.Fatal(err)
		}
	}
	kids, _, err := z.super.Children(n)
	if err != nil {
		z.t.Fatal(err)
	}
	for _, k := range kids {
		if k != "child" {
			if err := z.super.Delete(n+"/"+k, -1); err != nil {
				z.t.Fatal(err)
			}
		}
	}
}

// rawCode runs a request on the raw connection and names its outcome.
func (z *zkTarget) rawCode(op jute.OpCode, rec jute.Encoder) string {
	h, r := z.raw.call(op, rec)
	if h.Err != jute.CodeOK {
		return h.Err.String()
	}
	switch op {
	case jute.OpMultiRead:
		var m jute.MultiResponse
		if err := m.Decode(r); err != nil || len(m.Results) != 1 {
			z.t.Fatalf("multiRead: %+v %v", m, err)
		}
		if m.Results[0].Type == jute.OpError {
			return m.Results[0].Err.String()
		}
	}
	return "OK"
}

func (z *zkTarget) run(op, n string) string {
	a := z.anon
	var err error
	open := zk.WorldACL(zk.PermAll)
	switch op {
	case "getData":
		_, _, err = a.Get(n)
	case "exists":
		_, _, err = a.Exists(n)
	case "getChildren":
		_, _, err = a.Children(n)
	case "getChildren2":
		return z.rawCode(jute.OpGetChildren2, &jute.GetChildren2Request{Path: n})
	case "getAllChildrenNumber":
		return z.rawCode(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: n})
	case "getACL":
		_, _, err = a.GetACL(n)
	case "setData":
		_, err = a.Set(n, []byte("x"), -1)
	case "setACL":
		acl, _, gerr := z.super.GetACL(n)
		if gerr != nil {
			z.t.Fatal(gerr)
		}
		_, err = a.SetACL(n, acl, -1)
	case "create":
		_, err = a.Create(n+"/new", nil, 0, open)
	case "create2":
		return z.rawCode(jute.OpCreate2, &jute.CreateRequest{Path: n + "/new2", ACL: jute.OpenACL()})
	case "createEphemeral":
		_, err = a.Create(n+"/eph", nil, zk.FlagEphemeral, open)
	case "createSequential":
		_, err = a.Create(n+"/seq-", nil, zk.FlagSequence, open)
	case "createContainer":
		_, err = a.CreateContainer(n+"/box", nil, zk.FlagContainer, open)
	case "createTTL":
		_, err = a.CreateTTL(n+"/ttl", nil, zk.FlagTTL, open, time.Hour)
	case "delete":
		err = a.Delete(n+"/child", -1)
	case "deleteAbsent":
		err = a.Delete(n+"/absent", -1)
	case "multiCheck":
		_, err = a.Multi(&zk.CheckVersionRequest{Path: n, Version: -1})
	case "multiCreate":
		_, err = a.Multi(&zk.CreateRequest{Path: n + "/m", Acl: open})
	case "multiSetData":
		_, err = a.Multi(&zk.SetDataRequest{Path: n, Version: -1})
	case "multiDelete":
		_, err = a.Multi(&zk.DeleteRequest{Path: n + "/child", Version: -1})
	case "multiReadGetData":
		return z.rawCode(jute.OpMultiRead, &jute.MultiReadRequest{Ops: []jute.Op{{Type: jute.OpGetData, Request: &jute.GetDataRequest{Path: n}}}})
	case "multiReadGetChildren":
		return z.rawCode(jute.OpMultiRead, &jute.MultiReadRequest{Ops: []jute.Op{{Type: jute.OpGetChildren, Request: &jute.GetChildrenRequest{Path: n}}}})
	case "sync":
		_, err = a.Sync(n)
	case "addWatch":
		return z.rawCode(jute.OpAddWatch, &jute.AddWatchRequest{Path: n, Mode: jute.AddWatchPersistentRecursive})
	case "getEphemerals":
		return z.rawCode(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: n})
	case "whoAmI":
		return z.rawCode(jute.OpWhoAmI, nil)
	default:
		return ""
	}
	return outcome(err)
}

// TestACLOrderAndValidity: InvalidACL and the order of errors, through
// both protocols: what ZooKeeper 3.8 answers when more than one error
// applies, the ACLs it refuses, and the auth scheme.
func TestACLOrderAndValidity(t *testing.T) {
	c := New(t, 1, Options{SuperDigest: superDigest})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	z := connectZK(t, c.Servers()[0])
	if _, err := cl.Create(ctx, "/r", nil, client.CreateMode{ACL: client.ReadOnly()}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Create(ctx, "/r/child", nil, client.CreateMode{}); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("create under a read-only node: %v", err)
	}
	cases := []struct {
		name string
		acl  []client.ACL
		path string
		want string
	}{
		{"auth without an identity", client.CreatorAll(), "/x", "InvalidACL"},
		{"world:someone", []client.ACL{{Perms: 31, Scheme: "world", ID: "someone"}}, "/x", "InvalidACL"},
		{"digest without its hash", []client.ACL{{Perms: 31, Scheme: "digest", ID: "alice"}}, "/x", "InvalidACL"},
		{"ip /33", []client.ACL{{Perms: 31, Scheme: "ip", ID: "10.0.0.0/33"}}, "/x", "InvalidACL"},
		{"unknown scheme", []client.ACL{{Perms: 31, Scheme: "ldap", ID: "u"}}, "/x", "InvalidACL"},
		{"sasl, two @", []client.ACL{{Perms: 31, Scheme: "sasl", ID: "a@b@c"}}, "/x", "InvalidACL"},
		{"invalid ACL before no parent", client.CreatorAll(), "/none/x", "InvalidACL"},
		{"no parent before no auth", nil, "/none/x", "NoNode"},
		{"no auth before node exists", nil, "/r", "NodeExists"},
		{"no auth on the parent", nil, "/r/child", "NoAuth"},
	}
	for _, tc := range cases {
		_, err := cl.Create(ctx, tc.path, nil, client.CreateMode{ACL: tc.acl})
		if got := outcome(err); got != tc.want {
			t.Errorf("grpc: %s: %s, want %s", tc.name, got, tc.want)
		}
		acl := make([]zk.ACL, 0, len(tc.acl))
		for _, a := range tc.acl {
			acl = append(acl, zk.ACL{Perms: int32(a.Perms), Scheme: a.Scheme, ID: a.ID})
		}
		if len(acl) == 0 {
			acl = zk.WorldACL(zk.PermAll)
		}
		_, err = z.Create(tc.path, nil, 0, acl)
		if got := outcome(err); got != tc.want {
			t.Errorf("zookeeper: %s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// An empty ACL: InvalidACL on ZooKeeper's wire (the public API reads it
	// as the open ACL); in setACL, on both.
	if _, err := z.Create("/empty", nil, 0, nil); !errors.Is(err, zk.ErrInvalidACL) {
		t.Errorf("zookeeper: create with no ACL: %v", err)
	}
	if _, err := z.SetACL("/r", nil, -1); !errors.Is(err, zk.ErrInvalidACL) {
		t.Errorf("zookeeper: setACL with no ACL: %v", err)
	}
	if _, err := cl.SetACL(ctx, "/r", nil, -1); !errors.Is(err, client.ErrInvalidACL) {
		t.Errorf("grpc: setACL with no ACL: %v", err)
	}
	// setACL: NoNode before NoAuth before BadVersion; the aversion counts.
	if _, err := cl.SetACL(ctx, "/absent", client.OpenACL(), -1); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("setACL of an absent node: %v", err)
	}
	if _, err := cl.SetACL(ctx, "/r", client.OpenACL(), 7); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("setACL without ADMIN, bad version: %v", err)
	}
	if _, err := cl.Create(ctx, "/a", nil, client.CreateMode{ACL: client.WorldACL(client.PermAdmin | client.PermRead)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SetACL(ctx, "/a", client.OpenACL(), 1); !errors.Is(err, client.ErrBadVersion) {
		t.Errorf("setACL with a bad aversion: %v", err)
	}
	st, err := cl.SetACL(ctx, "/a", client.WorldACL(client.PermAdmin|client.PermRead), 0)
	if err != nil || st.Aversion != 1 {
		t.Fatalf("setACL: %+v %v", st, err)
	}
	if _, st, err := z.GetACL("/a"); err != nil || st.Aversion != 1 {
		t.Fatalf("zookeeper getACL: %+v %v", st, err)
	}
	if _, err := z.SetACL("/a", zk.WorldACL(zk.PermAll), 1); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := cl.GetACL(ctx, "/a"); st.Aversion != 2 {
		t.Fatalf("aversion %d, want 2", st.Aversion)
	}
	// The system subtree: ZooKeeper's ACLs; /zookeeper/config's lets
	// nobody but the super user change it.
	for p, want := range map[string]string{"/zookeeper": "world:anyone:cdrwa", "/zookeeper/config": "world:anyone:r", "/zookeeper/quota": "world:anyone:cdrwa"} {
		acl, _, err := cl.GetACL(ctx, p)
		if err != nil || len(acl) != 1 || acl[0].String() != want {
			t.Errorf("getACL %s: %v %v, want %s", p, acl, err, want)
		}
	}
	if _, err := cl.SetACL(ctx, "/zookeeper/config", client.OpenACL(), -1); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("setACL /zookeeper/config: %v", err)
	}
}

// TestACLMulti: a multi checks every op, each against the state the ops
// before it made, before any applies: one refusal fails all, with the
// per-op results ZooKeeper gives (ok-rolled-back, NoAuth,
// RuntimeInconsistency); through both protocols.
func TestACLMulti(t *testing.T) {
	c := New(t, 1, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	z := connectZK(t, c.Servers()[0])
	if _, err := cl.Create(ctx, "/ro", nil, client.CreateMode{ACL: client.ReadOnly()}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Multi(ctx,
		client.CreateOp("/g1", nil, client.CreateMode{}),
		client.SetOp("/ro", []byte("x"), -1),
		client.CreateOp("/g2", nil, client.CreateMode{}))
	if !errors.Is(err, client.ErrNoAuth) || len(res) != 3 || res[0].Err != nil || !errors.Is(res[1].Err, client.ErrNoAuth) || !errors.Is(res[2].Err, client.ErrRuntimeInconsistency) {
		t.Fatalf("grpc multi: %v %+v", err, res)
	}
	// A node made by an earlier op is checked with the ACL it was given.
	_, err = z.Multi(
		&zk.CreateRequest{Path: "/g3", Acl: zk.WorldACL(zk.PermRead)},
		&zk.CreateRequest{Path: "/g3/x", Acl: zk.WorldACL(zk.PermAll)})
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("zookeeper multi: %v", err)
	}
	for _, p := range []string{"/g1", "/g2", "/g3"} {
		if _, ok, err := cl.Exists(ctx, p); ok || err != nil {
			t.Fatalf("%s exists after a refused multi: %v", p, err)
		}
	}
	// With CREATE on the new node, the same multi goes through.
	if _, err := z.Multi(
		&zk.CreateRequest{Path: "/g3", Acl: zk.WorldACL(zk.PermRead | zk.PermCreate)},
		&zk.CreateRequest{Path: "/g3/x", Acl: zk.WorldACL(zk.PermAll)}); err != nil {
		t.Fatal(err)
	}
}

// TestACLSchemes: digest (addAuth, DigestACL), auth (CreatorAll), ip,
// super, the redacted getACL and whoAmI, through both protocols; an
// ephemeral's owner needs DELETE on the parent like anyone, and closing
// its session deletes it anyway.
func TestACLSchemes(t *testing.T) {
	c := New(t, 1, Options{SuperDigest: superDigest})
	ctx := ctxT(t)
	addr := c.Servers()[0]
	alice, anon, super := connect(t, addr), connect(t, addr), connect(t, addr)
	if err := alice.AddAuth(ctx, "digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if err := super.AddAuth(ctx, "digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	// auth: the creator's identities.
	if _, err := alice.Create(ctx, "/alice", []byte("a"), client.CreateMode{ACL: append(client.CreatorAll(), client.ReadOnly()...)}); err != nil {
		t.Fatal(err)
	}
	acl, _, err := alice.GetACL(ctx, "/alice")
	want := append(client.DigestACL(client.PermAll, "alice", "pw"), client.ReadOnly()...)
	if err != nil || fmt.Sprint(acl) != fmt.Sprint(want) {
		t.Fatalf("getACL as alice: %v %v, want %v", acl, err, want)
	}
	// Without ADMIN the digest's hash reads x.
	if acl, _, err := anon.GetACL(ctx, "/alice"); err != nil || acl[0].ID != "alice:x" {
		t.Fatalf("getACL as anyone: %v %v", acl, err)
	}
	if _, err := anon.Set(ctx, "/alice", []byte("b"), -1); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("anyone writes alice's node: %v", err)
	}
	if _, err := super.Set(ctx, "/alice", []byte("b"), -1); err != nil {
		t.Fatalf("super writes alice's node: %v", err)
	}
	if acl, _, err := super.GetACL(ctx, "/alice"); err != nil || acl[0] != want[0] {
		t.Fatalf("getACL as super: %v %v", acl, err)
	}
	// DigestACL: another session that authenticates as alice.
	other := connect(t, addr)
	if _, err := other.Set(ctx, "/alice", []byte("c"), -1); !errors.Is(err, client.ErrNoAuth) {
		t.Fatal(err)
	}
	if err := other.AddAuth(ctx, "digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Set(ctx, "/alice", []byte("c"), -1); err != nil {
		t.Fatalf("alice on another session: %v", err)
	}
	if err := other.AddAuth(ctx, "digest", []byte("alice:wrong")); err != nil {
		t.Fatal(err) // a wrong password is just another identity
	}
	// ip: the client's address.
	if _, err := super.Create(ctx, "/local", nil, client.CreateMode{ACL: []client.ACL{{Perms: client.PermAll, Scheme: "ip", ID: "127.0.0.0/8"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Create(ctx, "/remote", nil, client.CreateMode{ACL: []client.ACL{{Perms: client.PermAll, Scheme: "ip", ID: "10.0.0.0/8"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Set(ctx, "/local", nil, -1); err != nil {
		t.Fatalf("ip 127.0.0.0/8 from 127.0.0.1: %v", err)
	}
	if _, err := anon.Set(ctx, "/remote", nil, -1); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("ip 10.0.0.0/8 from 127.0.0.1: %v", err)
	}
	// whoAmI: the connection's ip, then the session's identities, a
	// digest by its user only.
	ids, err := super.WhoAmI(ctx)
	if err != nil || fmt.Sprint(ids) != "[{ip 127.0.0.1} {super } {digest super}]" {
		t.Fatalf("whoAmI: %v %v", ids, err)
	}
	// An unknown scheme: AuthFailed, and the session goes on.
	if err := anon.AddAuth(ctx, "foo", []byte("x")); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("addAuth foo: %v", err)
	}
	if err := anon.AddAuth(ctx, "x509", nil); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("addAuth x509 without a certificate: %v", err)
	}
	// A sasl identity comes only from a SASL exchange.
	if err := anon.AddAuth(ctx, "sasl", []byte("alice")); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("addAuth sasl: %v", err)
	}
	if _, _, err := anon.Get(ctx, "/alice"); err != nil {
		t.Fatalf("the session after AuthFailed: %v", err)
	}

	// The same through ZooKeeper's protocol.
	za := connectZK(t, addr)
	if err := za.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := za.Set("/alice", []byte("d"), -1); err != nil {
		t.Fatalf("go-zookeeper as alice: %v", err)
	}
	raw := dialACLWire(t, addr)
	if code := raw.auth("digest", "super:secret"); code != jute.CodeOK {
		t.Fatalf("raw auth: %v", code)
	}
	if got := fmt.Sprint(raw.whoAmI()); got != "[{ip 127.0.0.1} {super } {digest super}]" {
		t.Fatalf("whoAmI: %s", got)
	}

	// Ephemerals: the owner needs DELETE on the parent too; its session's
	// end deletes it regardless.
	if _, err := super.Create(ctx, "/c", nil, client.CreateMode{ACL: client.WorldACL(client.PermCreate | client.PermRead)}); err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Create(ctx, "/c/e", nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if err := anon.Delete(ctx, "/c/e", -1); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("owner deletes its ephemeral without DELETE on the parent: %v", err)
	}
	if err := anon.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := super.Exists(ctx, "/c/e"); ok || err != nil {
		t.Fatalf("the ephemeral outlived its session: %v", err)
	}
}

// TestZKAuthFailedClosesConnection: ZooKeeper answers an addAuth of an
// unknown scheme with AuthFailed and closes the connection; the session
// lives on, and resuming it finds it as it was.
func TestZKAuthFailedClosesConnection(t *testing.T) {
	c := New(t, 1, Options{})
	addr := c.Servers()[0]
	raw := dialACLWire(t, addr)
	if code := raw.auth("digest", "alice:pw"); code != jute.CodeOK {
		t.Fatal(code)
	}
	if code := raw.auth("ip", "ignored"); code != jute.CodeOK {
		t.Fatalf("addAuth ip: %v", code)
	}
	if code := raw.auth("foo", "x"); code != jute.CodeAuthFailed {
		t.Fatalf("addAuth foo: %v", code)
	}
	if !raw.closed(5 * time.Second) {
		t.Fatal("the connection stayed open after AuthFailed")
	}
	// go-zookeeper sees ErrAuthFailed, loses the connection, and resumes
	// the same session (sending its identities again, as ZooKeeper's
	// clients do: the session holds them already, so nothing changes).
	z, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	waitState := func(want zk.State) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case ev := <-events:
				if ev.State == want {
					return
				}
			case <-deadline:
				t.Fatalf("go-zookeeper never reached %v", want)
			}
		}
	}
	waitState(zk.StateHasSession)
	if err := z.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := z.Create("/a", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := z.SessionID()
	if err := z.AddAuth("foo", []byte("x")); !errors.Is(err, zk.ErrAuthFailed) {
		t.Fatalf("go-zookeeper addAuth foo: %v", err)
	}
	waitState(zk.StateDisconnected)
	waitState(zk.StateHasSession)
	if z.SessionID() != sid {
		t.Fatalf("session %x became %x", sid, z.SessionID())
	}
	if _, err := z.Set("/a", []byte("x"), -1); err != nil {
		t.Fatalf("after AuthFailed and a reconnect: %v", err)
	}
}

// TestWatchEventsNeedRead: a watch event reaches a session only if it may
// read the node the event is about (ZooKeeper 3.8.4 and 3.9.2,
// CVE-2024-23944): a recursive watch above a node the watcher may not read
// tells it nothing of that node.
func TestWatchEventsNeedRead(t *testing.T) {
	c := New(t, 1, Options{SuperDigest: superDigest})
	ctx := ctxT(t)
	addr := c.Servers()[0]
	owner := connect(t, addr)
	if err := owner.AddAuth(ctx, "digest", []byte("owner:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Create(ctx, "/w", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/w/secret", "/w/public"} {
		acl := client.CreatorAll()
		if p == "/w/public" {
			acl = append(acl, client.ReadOnly()...)
		}
		if _, err := owner.Create(ctx, p, nil, client.CreateMode{ACL: acl}); err != nil {
			t.Fatal(err)
		}
	}
	watcher := dialACLWire(t, addr)
	if h, _ := watcher.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/w", Mode: jute.AddWatchPersistentRecursive}); h.Err != jute.CodeOK {
		t.Fatal(h.Err)
	}
	for _, p := range []string{"/w/secret", "/w/public"} {
		if _, err := owner.Set(ctx, p, []byte("x"), -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.Create(ctx, "/w/public/end", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "the last event", func() bool {
		watcher.call(jute.OpPing, nil)
		return len(watcher.events) > 0 && watcher.events[len(watcher.events)-1].Path == "/w/public/end"
	})
	var got []string
	for _, ev := range watcher.events {
		got = append(got, ev.Type.String()+" "+ev.Path)
	}
	if want := "NodeDataChanged /w/public,NodeCreated /w/public/end"; strings.Join(got, ",") != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}

// TestACLsReplicated: ACLs and a session's identities are replicated
// state. A follower that missed them catches up by snapshot install and
// then decides alike (its reads and the writes it forwards); a session
// authenticated on one server keeps its identity on another without
// sending it again; and after every server restarts the same checks give
// the same answers.
func TestACLsReplicated(t *testing.T) {
	c := New(t, 3, Options{SnapshotThreshold: 64, TrailingLogs: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lead := c.LeaderIndex()
	var f1, f2 int
	for i := range c.Members {
		if i != lead {
			f1, f2 = f2, i
		}
	}
	c.Stop(f2)
	// alice authenticates on f1 only; f2 is down and never sees the entry.
	alice := connect(t, c.Members[f1].Cfg.ClientAddr, c.Members[f2].Cfg.ClientAddr)
	if err := alice.AddAuth(ctx, "digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Create(ctx, "/secure", []byte("s"), client.CreateMode{ACL: client.CreatorAll()}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Create(ctx, "/ro", nil, client.CreateMode{ACL: client.ReadOnly()}); err != nil {
		t.Fatal(err)
	}
	// Enough entries, and a snapshot on every running server, that f2 can
	// only catch up by installing one.
	for i := 0; i < 150; i++ {
		if _, err := alice.Create(ctx, fmt.Sprintf("/secure/n%03d", i), nil, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range c.Members {
		if n := m.Node(); n != nil && i != f2 {
			if err := n.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
				t.Fatalf("snapshot on %s: %v", m.ID, err)
			}
		}
	}
	c.Start(f2)
	c.WaitConverged(20*time.Second, alice.LastZxid())
	n2 := c.Members[f2].Node()
	c.Eventually(5*time.Second, "the follower to record the installed snapshot", func() bool {
		return n2.Raft().Stats()["last_snapshot_index"] != "0"
	})
	addr2 := c.Members[f2].Cfg.ClientAddr
	checkFollower := func(when, data string) {
		t.Helper()
		anon := connect(t, addr2)
		if _, _, err := anon.Get(ctx, "/secure"); !errors.Is(err, client.ErrNoAuth) {
			t.Errorf("%s: an anonymous read of /secure on %s: %v", when, c.Members[f2].ID, err)
		}
		if _, err := anon.Set(ctx, "/ro", nil, -1); !errors.Is(err, client.ErrNoAuth) {
			t.Errorf("%s: an anonymous write of /ro through %s: %v", when, c.Members[f2].ID, err)
		}
		if acl, st, err := anon.GetACL(ctx, "/secure/n000"); err != nil || len(acl) != 1 || acl[0].Scheme != "world" || st.Aversion != 0 {
			t.Errorf("%s: getACL of an open node: %v %+v %v", when, acl, st, err)
		}
		z := connectZK(t, addr2)
		if _, _, err := z.Get("/secure"); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s: go-zookeeper read of /secure: %v", when, err)
		}
		if err := z.AddAuth("digest", []byte("alice:pw")); err != nil {
			t.Fatal(err)
		}
		if got, _, err := z.Get("/secure"); err != nil || string(got) != data {
			t.Errorf("%s: go-zookeeper read of /secure as alice: %q %v, want %q", when, got, err, data)
		}
	}
	checkFollower("after snapshot install", "s")

	// alice's session moves to f2 and goes on as alice: her identity came
	// with the snapshot, and is not sent again.
	c.Stop(f1)
	Eventually(t, 20*time.Second, "alice's session on "+c.Members[f2].ID, func() bool {
		return alice.Server() == addr2 && alice.State() != client.StateDisconnected
	})
	if _, err := alice.Set(ctx, "/secure", []byte("t"), -1); err != nil {
		t.Fatalf("alice's write through %s: %v", c.Members[f2].ID, err)
	}
	if ids, err := alice.WhoAmI(ctx); err != nil || fmt.Sprint(ids) != "[{ip 127.0.0.1} {digest alice}]" {
		t.Fatalf("whoAmI on %s: %v %v", c.Members[f2].ID, ids, err)
	}
	c.Start(f1)

	// Every server restarts: the ACLs and identities come back from their
	// snapshots and logs.
	zxid := alice.LastZxid()
	c.StopAll()
	for i := range c.Members {
		c.Start(i)
	}
	c.WaitLeader(20 * time.Second)
	c.WaitConverged(20*time.Second, zxid)
	checkFollower("after every server restarted", "t")
	Eventually(t, 20*time.Second, "alice's session after the restart", func() bool {
		_, err := alice.Set(ctx, "/secure", []byte("u"), -1)
		return err == nil
	})
}
