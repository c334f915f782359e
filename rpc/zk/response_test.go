package zk

import (
	"bytes"
	"testing"

	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/tree"
)

// testStat has a distinct value in every field, so that a field copied
// into another, or dropped, shows.
var testStat = tree.Stat{
	Czxid: 1, Mzxid: 2, Pzxid: 3, Ctime: 4, Mtime: 5, Version: 6, Cversion: 7, Aversion: 8,
	EphemeralOwner: 9, DataLength: 10, NumChildren: 11, Kind: tree.TTL, TTL: 12,
}

// TestStatOf pins the conversion field by field.
func TestStatOf(t *testing.T) {
	want := jute.Stat{
		Czxid: 1, Mzxid: 2, Ctime: 4, Mtime: 5, Version: 6, Cversion: 7, Aversion: 8,
		EphemeralOwner: 9, DataLength: 10, NumChildren: 11, Pzxid: 3,
	}
	st := testStat
	if got := statOf(&st); got != want {
		t.Fatalf("statOf = %+v\nwant %+v", got, want)
	}
	if got := statOf(nil); got != (jute.Stat{}) {
		t.Fatalf("statOf(nil) = %+v, want a zero stat", got)
	}
}

// TestWireCodes: every engine code is a code ZooKeeper's clients know, with
// the same number, except Unavailable, which they know as ConnectionLoss.
func TestWireCodes(t *testing.T) {
	codes := engine.Codes()
	if len(codes) < 30 {
		t.Fatalf("only %d engine codes", len(codes))
	}
	for _, c := range codes {
		got := wireCode(c)
		switch {
		case c == engine.Unavailable:
			if got != jute.CodeConnectionLoss {
				t.Errorf("Unavailable goes on the wire as %v, want ConnectionLoss", got)
			}
		case !got.Known():
			t.Errorf("%v (%d) goes on the wire as %d, which ZooKeeper does not know", c, int32(c), int32(got))
		case int32(got) != int32(c):
			t.Errorf("%v (%d) goes on the wire as %v (%d)", c, int32(c), got, int32(got))
		}
	}
}

// frame is the frame a ZooKeeper server sends for a reply header and body.
func frame(h jute.ReplyHeader, body jute.Encoder) []byte {
	if body == nil {
		return jute.AppendFrame(nil, &h)
	}
	return jute.AppendFrame(nil, &h, body)
}

func noBad(p pending) pending { p.badOp = -1; return p }

// TestReplyCreates: create answers with the path, create2,
// createContainer and createTTL with the path and the stat; in a multi
// likewise (create2-shaped results for all but create, as ZooKeeper 3.8.4
// and later report them).
func TestReplyCreates(t *testing.T) {
	st := testStat
	resp := &engine.Response{Zxid: 0x21, Path: "/a", Stat: &st}
	for _, tc := range []struct {
		op   jute.OpCode
		want jute.Encoder
	}{
		{jute.OpCreate, &jute.CreateResponse{Path: "/a"}},
		{jute.OpCreate2, &jute.Create2Response{Path: "/a", Stat: statOf(&st)}},
		{jute.OpCreateContainer, &jute.Create2Response{Path: "/a", Stat: statOf(&st)}},
		{jute.OpCreateTTL, &jute.Create2Response{Path: "/a", Stat: statOf(&st)}},
	} {
		got := reply(nil, noBad(pending{xid: 5, op: tc.op}), resp)
		want := frame(jute.ReplyHeader{Xid: 5, Zxid: 0x21}, tc.want)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: got %x\nwant %x", tc.op, got, want)
		}
	}
	ops := []jute.OpCode{jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL}
	multi := &engine.Response{Zxid: 0x22}
	for range ops {
		multi.Results = append(multi.Results, engine.Response{Path: "/a", Stat: &st})
	}
	got := reply(nil, noBad(pending{xid: 6, op: jute.OpMulti, ops: ops}), multi)
	want := frame(jute.ReplyHeader{Xid: 6, Zxid: 0x22}, &jute.MultiResponse{Results: []jute.OpResult{
		{Type: jute.OpCreate, Path: "/a"},
		{Type: jute.OpCreate2, Path: "/a", Stat: statOf(&st)},
		{Type: jute.OpCreate2, Path: "/a", Stat: statOf(&st)},
		{Type: jute.OpCreate2, Path: "/a", Stat: statOf(&st)},
	}})
	if !bytes.Equal(got, want) {
		t.Errorf("multi of creates: got %x\nwant %x", got, want)
	}
}

// TestReplyFailedMulti: a multi that failed in an op is answered with
// header error 0 and every op's result, byte for byte what ZooKeeper sends
// (the codec's golden TestGoldenFailedMulti).
func TestReplyFailedMulti(t *testing.T) {
	r := &engine.Response{Zxid: 0x100000009, Code: engine.NodeExists, Results: []engine.Response{
		{Code: engine.OK}, {Code: engine.NodeExists}, {Code: engine.RuntimeInconsistency},
	}}
	p := noBad(pending{xid: 7, op: jute.OpMulti, ops: []jute.OpCode{jute.OpCreate, jute.OpCreate, jute.OpSetData}})
	got := reply(nil, p, r)
	want := unhex(t, `
		00000040 00000007 0000000100000009 00000000
		ffffffff 00 00000000 00000000
		ffffffff 00 ffffff92 ffffff92
		ffffffff 00 fffffffe fffffffe
		ffffffff 01 ffffffff`)
	if !bytes.Equal(got, want) {
		t.Fatalf("failed multi\n got %x\nwant %x", got, want)
	}
}

// TestReplyMultiRefusedOp: a multi whose op the front-end refused (an
// empty ACL) gets per-op results too, as ZooKeeper 3.8 answers it
// (probed: create, create without ACL, create gives [0, -114, -2]).
func TestReplyMultiRefusedOp(t *testing.T) {
	r := &engine.Response{Code: engine.InvalidACL, Zxid: 9}
	p := pending{xid: 3, op: jute.OpMulti, ops: []jute.OpCode{jute.OpCreate, jute.OpCreate, jute.OpCreate}, badOp: 1}
	got := reply(nil, p, r)
	want := frame(jute.ReplyHeader{Xid: 3, Zxid: 9}, &jute.MultiResponse{Results: jute.FailedMultiResults(3, 1, jute.CodeInvalidACL)})
	if !bytes.Equal(got, want) {
		t.Fatalf("multi with a refused op\n got %x\nwant %x", got, want)
	}
}

// TestReplyMultiFailedWhole: a multi that failed as a whole (this server
// could not serve it, or refused it for a limit) has its error in the
// header and no body.
func TestReplyMultiFailedWhole(t *testing.T) {
	ops := []jute.OpCode{jute.OpCreate, jute.OpDelete}
	for _, tc := range []struct {
		code engine.Code
		bad  int
		want jute.Code
	}{
		{engine.Unavailable, -1, jute.CodeConnectionLoss},
		{engine.Unavailable, 0, jute.CodeConnectionLoss},
		{engine.BadArguments, -1, jute.CodeBadArguments},
		{engine.SessionExpired, -1, jute.CodeSessionExpired},
	} {
		got := reply(nil, pending{xid: 4, op: jute.OpMulti, ops: ops, badOp: tc.bad}, &engine.Response{Code: tc.code, Zxid: 8})
		want := frame(jute.ReplyHeader{Xid: 4, Zxid: 8, Err: tc.want}, nil)
		if !bytes.Equal(got, want) {
			t.Errorf("%v: got %x\nwant %x", tc.code, got, want)
		}
	}
}

// TestReplyErrors: a failed request other than multi has its error in
// the header and no body; exists of an absent node is NoNode in the header
// (ZooKeeper's clients turn that into "no stat").
func TestReplyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   jute.OpCode
		r    engine.Response
		want jute.Code
	}{
		{"exists of an absent node", jute.OpExists, engine.Response{Zxid: 3}, jute.CodeNoNode},
		{"getData of an absent node", jute.OpGetData, engine.Response{Zxid: 3, Code: engine.NoNode}, jute.CodeNoNode},
		{"setData with a stale version", jute.OpSetData, engine.Response{Zxid: 3, Code: engine.BadVersion}, jute.CodeBadVersion},
		{"create unavailable", jute.OpCreate, engine.Response{Zxid: 3, Code: engine.Unavailable}, jute.CodeConnectionLoss},
	} {
		got := reply(nil, noBad(pending{xid: 2, op: tc.op}), &tc.r)
		want := frame(jute.ReplyHeader{Xid: 2, Zxid: 3, Err: tc.want}, nil)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got %x\nwant %x", tc.name, got, want)
		}
	}
	st := testStat
	got := reply(nil, noBad(pending{xid: 2, op: jute.OpExists}), &engine.Response{Zxid: 3, Stat: &st})
	want := frame(jute.ReplyHeader{Xid: 2, Zxid: 3}, &jute.ExistsResponse{Stat: statOf(&st)})
	if !bytes.Equal(got, want) {
		t.Errorf("exists of a node: got %x\nwant %x", got, want)
	}
}
