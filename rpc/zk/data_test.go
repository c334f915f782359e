package zk

import (
	"testing"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// TestNullAndEmptyData: as ZooKeeper, the server keeps null data (a create
// or setData that sends length -1) apart from empty data (length 0) and
// sends each back as it came, in getData and in a multiRead; the root and
// the system nodes have empty data.
func TestNullAndEmptyData(t *testing.T) {
	s := newTestServer(t, nil)
	z := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	acl := jute.OpenACL()
	ok := func(f []byte, what string) {
		t.Helper()
		var h jute.ReplyHeader
		if err := h.Decode(jute.NewReader(f)); err != nil || h.Err != jute.CodeOK {
			t.Fatalf("%s: %v %v", what, h.Err, err)
		}
	}
	create := func(path string, data []byte) {
		t.Helper()
		ok(z.call(jute.OpCreate, &jute.CreateRequest{Path: path, Data: data, ACL: acl}), "create "+path)
	}
	create("/null", nil)
	create("/empty", []byte{})
	create("/set-null", []byte("x"))
	create("/set-empty", nil)
	ok(z.call(jute.OpSetData, &jute.SetDataRequest{Path: "/set-null", Data: nil, Version: -1}), "setData /set-null")
	ok(z.call(jute.OpSetData, &jute.SetDataRequest{Path: "/set-empty", Data: []byte{}, Version: -1}), "setData /set-empty")
	ok(z.call(jute.OpMulti, &jute.MultiRequest{Ops: []jute.Op{
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/m-null", ACL: acl}},
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/m-empty", Data: []byte{}, ACL: acl}},
		{Type: jute.OpSetData, Request: &jute.SetDataRequest{Path: "/empty", Data: []byte{}, Version: -1}},
	}}), "multi")

	show := func(b []byte) string {
		if b == nil {
			return "null"
		}
		return "empty"
	}
	for path, want := range map[string]string{
		"/null": "null", "/empty": "empty", "/set-null": "null", "/set-empty": "empty",
		"/m-null": "null", "/m-empty": "empty",
		"/": "empty", "/zookeeper": "empty", "/zookeeper/quota": "empty",
	} {
		f := z.call(jute.OpGetData, &jute.GetDataRequest{Path: path})
		ok(f, "getData "+path)
		var r jute.GetDataResponse
		if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &r); err != nil {
			t.Fatal(err)
		}
		if got := show(r.Data); got != want || len(r.Data) != 0 || r.Stat.DataLength != 0 {
			t.Errorf("getData %s: %s (%d bytes, dataLength %d), want %s", path, got, len(r.Data), r.Stat.DataLength, want)
		}
	}

	f := z.call(jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.Op{
		{Type: jute.OpGetData, Request: &jute.GetDataRequest{Path: "/null"}},
		{Type: jute.OpGetData, Request: &jute.GetDataRequest{Path: "/empty"}},
	}})
	ok(f, "multiRead")
	var mr jute.MultiResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Results) != 2 || show(mr.Results[0].Data) != "null" || show(mr.Results[1].Data) != "empty" {
		t.Fatalf("multiRead: %+v", mr.Results)
	}
}
