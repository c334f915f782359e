package jute

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// Golden bytes, derived by hand from ZooKeeper's serialization: the field
// order of zookeeper.jute, BinaryOutputArchive's encodings (big-endian int
// and long, one byte per boolean, buffers/ustrings/vectors as a 4-byte
// length then the contents, -1 for null), the framing of ClientCnxn and
// ServerCnxn (a 4-byte length before each message), and MultiResponse.
// serialize for multi. Each line is one field.

// unhex reads a golden: hex digits, with spaces and "//" comments ignored.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var digits strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatalf("bad golden: %v", err)
	}
	return b
}

// goldenStat is the Stat in the goldens below, and its encoding.
var goldenStat = Stat{
	Czxid: 0x100000002, Mzxid: 0x100000003, Ctime: 1700000000000, Mtime: 1700000000001,
	Version: 1, DataLength: 2, Pzxid: 0x100000002,
}

const goldenStatHex = `
	0000000100000002 // czxid
	0000000100000003 // mzxid
	0000018bcfe56800 // ctime 1700000000000
	0000018bcfe56801 // mtime 1700000000001
	00000001         // version 1
	00000000         // cversion 0
	00000000         // aversion 0
	0000000000000000 // ephemeralOwner 0
	00000002         // dataLength 2
	00000000         // numChildren 0
	0000000100000002 // pzxid
`

func TestGoldenFrames(t *testing.T) {
	tests := []struct {
		name   string
		frame  []Encoder // the records of one frame, in order
		golden string
	}{
		{
			name: "ConnectRequest of the Java client (with readOnly)",
			frame: []Encoder{&ConnectRequest{
				TimeOut: 30000, Passwd: make([]byte, 16), HasReadOnly: true,
			}},
			golden: `
				0000002d                         // frame length 45
				00000000                         // protocolVersion 0
				0000000000000000                 // lastZxidSeen 0
				00007530                         // timeOut 30000 ms
				0000000000000000                 // sessionId 0: a new session
				00000010                         // passwd: 16 bytes
				00000000000000000000000000000000 //   all zero
				00                               // readOnly false
			`,
		},
		{
			name: "ConnectRequest of go-zookeeper (no readOnly), resuming a session",
			frame: []Encoder{&ConnectRequest{
				LastZxidSeen: 0x100000009, TimeOut: 4000, SessionID: 0x1d00000abcdef01,
				Passwd: []byte("0123456789abcdef"),
			}},
			golden: `
				0000002c                         // frame length 44
				00000000                         // protocolVersion 0
				0000000100000009                 // lastZxidSeen
				00000fa0                         // timeOut 4000 ms
				01d00000abcdef01                 // sessionId
				00000010                         // passwd: 16 bytes
				30313233343536373839616263646566 //   "0123456789abcdef"
			`,
		},
		{
			name: "ConnectResponse mirroring a readOnly request",
			frame: []Encoder{&ConnectResponse{
				TimeOut: 4000, SessionID: 0x1d00000abcdef01, Passwd: []byte("0123456789abcdef"),
				HasReadOnly: true,
			}},
			golden: `
				00000025                         // frame length 37
				00000000                         // protocolVersion 0
				00000fa0                         // timeOut 4000 ms (negotiated)
				01d00000abcdef01                 // sessionId
				00000010                         // passwd: 16 bytes
				30313233343536373839616263646566
				00                               // readOnly false: not a read-only server
			`,
		},
		{
			name:  "ConnectResponse for an expired session, to a client without readOnly",
			frame: []Encoder{&ConnectResponse{Passwd: make([]byte, 16)}},
			golden: `
				00000024                         // frame length 36
				00000000                         // protocolVersion 0
				00000000                         // timeOut 0
				0000000000000000                 // sessionId 0: expired
				00000010                         // passwd: 16 zero bytes (ZooKeeper's new byte[16])
				00000000000000000000000000000000
			`,
		},
		{
			name:  "getData request",
			frame: []Encoder{&RequestHeader{Xid: 5, Type: OpGetData}, &GetDataRequest{Path: "/a", Watch: true}},
			golden: `
				0000000f // frame length 15
				00000005 // xid 5
				00000004 // type getData
				00000002 // path: 2 bytes
				2f61     //   "/a"
				01       // watch true
			`,
		},
		{
			name: "getData reply",
			frame: []Encoder{
				&ReplyHeader{Xid: 5, Zxid: 0x100000003, Err: CodeOK},
				&GetDataResponse{Data: []byte("hi"), Stat: goldenStat},
			},
			golden: `
				0000005a         // frame length 90 = 16 + 6 + 68
				00000005         // xid 5
				0000000100000003 // zxid
				00000000         // err 0
				00000002 6869    // data "hi"
			` + goldenStatHex,
		},
		{
			name:  "error reply: no body follows",
			frame: []Encoder{&ReplyHeader{Xid: 6, Zxid: 0x100000003, Err: CodeNoNode}},
			golden: `
				00000010         // frame length 16
				00000006         // xid 6
				0000000100000003 // zxid
				ffffff9b         // err -101 NoNode
			`,
		},
		{
			name:  "ping reply",
			frame: []Encoder{&ReplyHeader{Xid: XidPing, Zxid: 0x100000003}},
			golden: `
				00000010         // frame length 16
				fffffffe         // xid -2
				0000000100000003 // zxid
				00000000         // err 0
			`,
		},
		{
			name: "watch notification",
			frame: []Encoder{
				&ReplyHeader{Xid: XidNotification, Zxid: 0x100000004},
				&WatcherEvent{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/a"},
			},
			golden: `
				0000001e         // frame length 30
				ffffffff         // xid -1: a notification
				0000000100000004 // zxid of the change
				00000000         // err 0
				00000003         // type NodeDataChanged
				00000003         // state SyncConnected
				00000002 2f61    // path "/a"
			`,
		},
		{
			name: "create of an ephemeral sequential node with OPEN_ACL_UNSAFE",
			frame: []Encoder{
				&RequestHeader{Xid: 9, Type: OpCreate2},
				&CreateRequest{Path: "/l/n-", Data: []byte{}, ACL: OpenACL(), Flags: ModeEphemeralSequential},
			},
			golden: `
				00000034            // frame length 52
				00000009            // xid 9
				0000000f            // type create2
				00000005 2f6c2f6e2d // path "/l/n-"
				00000000            // data: empty
				00000001            // acl: 1 entry
				0000001f            //   perms ALL (31)
				00000005 776f726c64 //   scheme "world"
				00000006 616e796f6e65 // id "anyone"
				00000003            // flags EPHEMERAL_SEQUENTIAL
			`,
		},
		{
			name: "setWatches on reconnect, as the Java client sends it",
			frame: []Encoder{
				&RequestHeader{Xid: XidSetWatches, Type: OpSetWatches},
				&SetWatches{RelativeZxid: 0x100000009, DataWatches: []string{"/a"}, ExistWatches: []string{}, ChildWatches: []string{"/", "/b"}},
			},
			golden: `
				0000002d         // frame length 45
				fffffff8         // xid -8
				00000065         // type setWatches (101)
				0000000100000009 // relativeZxid
				00000001         // dataWatches: 1
				00000002 2f61    //   "/a"
				00000000         // existWatches: 0
				00000002         // childWatches: 2
				00000001 2f      //   "/"
				00000002 2f62    //   "/b"
			`,
		},
		{
			name:  "addWatch reply: an ErrorResponse body",
			frame: []Encoder{&ReplyHeader{Xid: 3, Zxid: 8}, &ErrorResponse{Err: CodeOK}},
			golden: `
				00000014         // frame length 20
				00000003         // xid
				0000000000000008 // zxid
				00000000         // err 0
				00000000         // ErrorResponse.err 0
			`,
		},
		// The SASL frames below were recorded between ZooKeeper 3.8's Java
		// client and server.
		{
			name:  "sasl request: the Java client's first, empty token",
			frame: []Encoder{&RequestHeader{Xid: 1, Type: OpSASL}, &GetSASLRequest{Token: []byte{}}},
			golden: `
				0000000c // frame length 12
				00000001 // xid 1
				00000066 // type 102: sasl
				00000000 // token: 0 bytes
			`,
		},
		{
			name:  "sasl reply: the server's last token",
			frame: []Encoder{&ReplyHeader{Xid: 2}, &SetSASLResponse{Token: []byte("rspauth=84e118c857a4fab40257c3f10aab2db2")}},
			golden: `
				0000003c         // frame length 60
				00000002         // xid 2
				0000000000000000 // zxid 0 (ZooKeeper's; coordd sends its own)
				00000000         // err 0
				00000028         // token: 40 bytes
				727370617574683d3834653131386338353761346661623430323537633366313061616232646232
			`,
		},
		{
			name:  "sasl reply to a failed step: AuthFailed and a null token",
			frame: []Encoder{&ReplyHeader{Xid: 2, Err: CodeAuthFailed}, &SetSASLResponse{}},
			golden: `
				00000014         // frame length 20
				00000002         // xid 2
				0000000000000000 // zxid 0
				ffffff8d         // err -115: AuthFailed
				ffffffff         // token: null
			`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.golden)
			got := AppendFrame(nil, tc.frame...)
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding differs\n got %x\nwant %x", got, want)
			}
			// And the golden decodes back to the records.
			payload, err := ReadFrame(bytes.NewReader(want), DefaultMaxBuffer)
			if err != nil {
				t.Fatal(err)
			}
			r := NewReader(payload)
			for _, enc := range tc.frame {
				rec := newLike(enc.(Record))
				r.Record(rec)
				if !reflect.DeepEqual(rec, enc) {
					t.Errorf("decoded %+v, want %+v", rec, enc)
				}
			}
			if r.Err() != nil || r.Len() != 0 {
				t.Errorf("err %v, %d bytes left", r.Err(), r.Len())
			}
		})
	}
}

// The partial-failure encoding of a multi, which Kafka reads: its controller
// sends check(controller epoch) + writes in one multi, and tells from the
// per-op results which op failed. Here op 1 (a create) fails with NodeExists:
// op 0 was rolled back (an error result with code 0), op 2 was not attempted
// (RuntimeInconsistency). ZooKeeper (DataTree.processTxn and
// FinalRequestProcessor) sends these with err 0 in the reply header.
func TestGoldenFailedMulti(t *testing.T) {
	golden := unhex(t, `
		00000040         // frame length 64 = 16 + 3*(9+4) + 9
		00000007         // reply header: xid 7
		0000000100000009 //   zxid
		00000000         //   err 0: the failure is in the results
		ffffffff 00 00000000 // op 0: header type -1 (error), done false, err 0
		00000000             //   ErrorResponse err 0: rolled back
		ffffffff 00 ffffff92 // op 1: header type -1, done false, err -110 NodeExists
		ffffff92             //   ErrorResponse err -110
		ffffffff 00 fffffffe // op 2: header type -1, done false, err -2 RuntimeInconsistency
		fffffffe             //   ErrorResponse err -2
		ffffffff 01 ffffffff // end: type -1, done true, err -1
	`)
	results := FailedMultiResults(3, 1, CodeNodeExists)
	got := AppendFrame(nil, &ReplyHeader{Xid: 7, Zxid: 0x100000009}, &MultiResponse{Results: results})
	if !bytes.Equal(got, golden) {
		t.Fatalf("failed multi differs\n got %x\nwant %x", got, golden)
	}
	var back MultiResponse
	if err := Unmarshal(golden[4+ReplyHeaderSize:], &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Results, results) {
		t.Errorf("decoded %+v, want %+v", back.Results, results)
	}
}

func TestGoldenMultiSuccessAndMultiRead(t *testing.T) {
	multi := unhex(t, `
		00000001 00 00000000 // create result: header type 1, done false, err 0
		00000002 2f61        //   path "/a"
		0000000f 00 00000000 // create2 result (a create2, createContainer or createTTL op)
		00000002 2f62        //   path "/b"
	`+goldenStatHex+`
		00000005 00 00000000 // setData result
	`+goldenStatHex+`
		00000002 00 00000000 // delete result: no body
		0000000d 00 00000000 // check result: no body
		ffffffff 01 ffffffff // end
	`)
	got := Marshal(&MultiResponse{Results: []OpResult{
		{Type: OpCreate, Path: "/a"},
		{Type: OpCreate2, Path: "/b", Stat: goldenStat},
		{Type: OpSetData, Stat: goldenStat},
		{Type: OpDelete},
		{Type: OpCheck},
	}})
	if !bytes.Equal(got, multi) {
		t.Errorf("multi response differs\n got %x\nwant %x", got, multi)
	}

	multiRead := unhex(t, `
		00000004 00 00000000 // getData result
		00000002 6869        //   data "hi"
	`+goldenStatHex+`
		00000008 00 00000000 // getChildren result
		00000002             //   2 children
		00000001 78          //   "x"
		00000001 79          //   "y"
		ffffffff 00 ffffff9b // error result: err -101 NoNode
		ffffff9b
		ffffffff 01 ffffffff // end
	`)
	got = Marshal(&MultiResponse{Results: []OpResult{
		{Type: OpGetData, Data: []byte("hi"), Stat: goldenStat},
		{Type: OpGetChildren, Children: []string{"x", "y"}},
		ErrorResult(CodeNoNode),
	}})
	if !bytes.Equal(got, multiRead) {
		t.Errorf("multiRead response differs\n got %x\nwant %x", got, multiRead)
	}
}

func TestGoldenMultiRequest(t *testing.T) {
	// As the Java client's MultiOperationRecord.serialize writes it: each op's
	// header carries err -1.
	golden := unhex(t, `
		0000000d 00 ffffffff // check: header type 13, done false, err -1
		00000002 2f61        //   path "/a"
		00000003             //   version 3
		00000002 00 ffffffff // delete
		00000002 2f62        //   path "/b"
		ffffffff             //   version -1
		00000005 00 ffffffff // setData
		00000002 2f63        //   path "/c"
		ffffffff             //   data: null
		00000000             //   version 0
		ffffffff 01 ffffffff // end
	`)
	want := &MultiRequest{Ops: []Op{
		{Type: OpCheck, Request: &CheckVersionRequest{Path: "/a", Version: 3}},
		{Type: OpDelete, Request: &DeleteRequest{Path: "/b", Version: -1}},
		{Type: OpSetData, Request: &SetDataRequest{Path: "/c", Data: nil, Version: 0}},
	}}
	if got := Marshal(want); !bytes.Equal(got, golden) {
		t.Errorf("multi request differs\n got %x\nwant %x", got, golden)
	}
	got, err := DecodeRequest(OpMulti, golden)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}
