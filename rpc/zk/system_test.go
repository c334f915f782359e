package zk

import (
	"reflect"
	"testing"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// TestSystemNodes: ZooKeeper's /zookeeper subtree answers writes as
// ZooKeeper's does: creates below /zookeeper and /zookeeper/quota succeed
// (zkCli's setquota makes its nodes there, and the server counts the
// quota's nodes and bytes), /zookeeper/config is world:anyone:r (a write
// or a create below it is NoAuth), and none of the three may be deleted
// (BadArguments).
func TestSystemNodes(t *testing.T) {
	s := newTestServer(t, nil)
	z := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	acl := jute.OpenACL()
	code := func(f []byte) jute.Code {
		t.Helper()
		var h jute.ReplyHeader
		if err := h.Decode(jute.NewReader(f)); err != nil {
			t.Fatal(err)
		}
		return h.Err
	}
	expect := func(want jute.Code, what string, op jute.OpCode, rec jute.Encoder) []byte {
		t.Helper()
		f := z.call(op, rec)
		if got := code(f); got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
		return f
	}
	create := func(path, data string) *jute.CreateRequest {
		return &jute.CreateRequest{Path: path, Data: []byte(data), ACL: acl}
	}

	expect(jute.CodeOK, "create /zookeeper/x", jute.OpCreate, create("/zookeeper/x", "hi"))
	expect(jute.CodeNoAuth, "set /zookeeper/config", jute.OpSetData, &jute.SetDataRequest{Path: "/zookeeper/config", Data: []byte("x"), Version: -1})
	expect(jute.CodeNoAuth, "create /zookeeper/config/x", jute.OpCreate, create("/zookeeper/config/x", ""))
	expect(jute.CodeNoAuth, "setACL /zookeeper/config", jute.OpSetACL, &jute.SetACLRequest{Path: "/zookeeper/config", ACL: acl, Version: -1})
	expect(jute.CodeNodeExists, "create /zookeeper/config", jute.OpCreate, create("/zookeeper/config", ""))
	for _, p := range []string{"/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		expect(jute.CodeBadArguments, "delete "+p, jute.OpDelete, &jute.DeleteRequest{Path: p, Version: -1})
	}
	f := expect(jute.CodeOK, "ls /zookeeper", jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/zookeeper"})
	var kids jute.GetChildrenResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &kids); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(kids.Children, []string{"config", "quota", "x"}) {
		t.Errorf("children of /zookeeper: %q", kids.Children)
	}
	f = expect(jute.CodeOK, "getACL /zookeeper/config", jute.OpGetACL, &jute.GetACLRequest{Path: "/zookeeper/config"})
	var ga jute.GetACLResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &ga); err != nil {
		t.Fatal(err)
	}
	if len(ga.ACL) != 1 || ga.ACL[0] != (jute.ACL{Perms: 1, ID: jute.ID{Scheme: "world", ID: "anyone"}}) || ga.Stat.Aversion != -1 {
		t.Errorf("getACL /zookeeper/config: %+v", ga)
	}
	expect(jute.CodeOK, "delete /zookeeper/x", jute.OpDelete, &jute.DeleteRequest{Path: "/zookeeper/x", Version: -1})

	// zkCli's setquota -n 5 /q, then a node more below /q.
	expect(jute.CodeOK, "create /q", jute.OpCreate, create("/q", "ab"))
	expect(jute.CodeOK, "create /zookeeper/quota/q", jute.OpCreate, &jute.CreateRequest{Path: "/zookeeper/quota/q", ACL: acl})
	expect(jute.CodeOK, "create the limits", jute.OpCreate, create("/zookeeper/quota/q/zookeeper_limits", "count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1"))
	expect(jute.CodeOK, "create the stats", jute.OpCreate, create("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0"))
	expect(jute.CodeOK, "create /q/a", jute.OpCreate, create("/q/a", "cde"))
	f = expect(jute.CodeOK, "get the stats", jute.OpGetData, &jute.GetDataRequest{Path: "/zookeeper/quota/q/zookeeper_stats"})
	var gd jute.GetDataResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &gd); err != nil {
		t.Fatal(err)
	}
	if string(gd.Data) != "count=2,bytes=5" {
		t.Errorf("quota stats of /q: %q, want count=2,bytes=5", gd.Data)
	}
}
