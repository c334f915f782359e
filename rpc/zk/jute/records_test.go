package jute

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

var sampleStat = Stat{
	Czxid: 0x100000002, Mzxid: 0x100000003, Ctime: 1700000000000, Mtime: 1700000000001,
	Version: 4, Cversion: 5, Aversion: 6, EphemeralOwner: 0x1d00000abcdef01,
	DataLength: 7, NumChildren: 8, Pzxid: 0x100000009,
}

func ptr[T any](v T) *T { return &v }

// sampleRequests holds one request body of every opcode a client sends,
// with a value in every field.
func sampleRequests() map[OpCode]Record {
	acl := []ACL{{Perms: PermAll, ID: AnyoneID}, {Perms: PermRead | PermAdmin, ID: ID{"digest", "u:h"}}}
	return map[OpCode]Record{
		OpCreate:               &CreateRequest{Path: "/a", Data: []byte("d"), ACL: acl, Flags: ModeEphemeralSequential},
		OpCreate2:              &CreateRequest{Path: "/b", Data: []byte{}, ACL: acl[:1], Flags: ModePersistent},
		OpCreateContainer:      &CreateRequest{Path: "/c", Data: nil, ACL: acl, Flags: ModeContainer},
		OpCreateTTL:            &CreateTTLRequest{Path: "/t", Data: []byte("t"), ACL: acl, Flags: ModePersistentSequentialWithTTL, TTL: 1 << 40},
		OpDelete:               &DeleteRequest{Path: "/d", Version: -1},
		OpExists:               &ExistsRequest{Path: "/e", Watch: true},
		OpGetData:              &GetDataRequest{Path: "/g", Watch: true},
		OpSetData:              &SetDataRequest{Path: "/s", Data: []byte("new"), Version: 3},
		OpGetACL:               &GetACLRequest{Path: "/acl"},
		OpSetACL:               &SetACLRequest{Path: "/acl", ACL: acl, Version: 2},
		OpGetChildren:          &GetChildrenRequest{Path: "/", Watch: true},
		OpGetChildren2:         &GetChildren2Request{Path: "/p", Watch: false},
		OpSync:                 &SyncRequest{Path: "/sync"},
		OpCheck:                &CheckVersionRequest{Path: "/chk", Version: 9},
		OpPing:                 &Empty{},
		OpCloseSession:         &Empty{},
		OpWhoAmI:               &Empty{},
		OpReconfig:             &ReconfigRequest{JoiningServers: ptr("server.4=h:2888:3888;2181"), LeavingServers: ptr(""), NewMembers: nil, CurConfigID: -1},
		OpCheckWatches:         &CheckWatchesRequest{Path: "/w", Type: WatcherAny},
		OpRemoveWatches:        &RemoveWatchesRequest{Path: "/w", Type: WatcherPersistentRecursive},
		OpAuth:                 &AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("u:p")},
		OpSetWatches:           &SetWatches{RelativeZxid: 77, DataWatches: []string{"/a", "/b"}, ExistWatches: []string{}, ChildWatches: nil},
		OpSetWatches2:          &SetWatches2{RelativeZxid: 78, DataWatches: []string{"/a"}, ExistWatches: []string{"/e"}, ChildWatches: []string{"/"}, PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/r", "/s"}},
		OpSASL:                 &GetSASLRequest{Token: []byte{1, 2, 3}},
		OpGetEphemerals:        &GetEphemeralsRequest{PrefixPath: "/app"},
		OpGetAllChildrenNumber: &GetAllChildrenNumberRequest{Path: "/n"},
		OpAddWatch:             &AddWatchRequest{Path: "/aw", Mode: AddWatchPersistentRecursive},
		OpMulti: &MultiRequest{Ops: []Op{
			{Type: OpCheck, Request: &CheckVersionRequest{Path: "/m", Version: 1}},
			{Type: OpCreate, Request: &CreateRequest{Path: "/m/a", Data: []byte("x"), ACL: acl[:1], Flags: ModePersistent}},
			{Type: OpCreate2, Request: &CreateRequest{Path: "/m/b", ACL: acl[:1], Flags: ModeEphemeral}},
			{Type: OpCreateContainer, Request: &CreateRequest{Path: "/m/c", ACL: acl[:1], Flags: ModeContainer}},
			{Type: OpCreateTTL, Request: &CreateTTLRequest{Path: "/m/t", ACL: acl[:1], Flags: ModePersistentWithTTL, TTL: 5000}},
			{Type: OpSetData, Request: &SetDataRequest{Path: "/m", Data: []byte("y"), Version: -1}},
			{Type: OpDelete, Request: &DeleteRequest{Path: "/m/a", Version: 0}},
		}},
		OpMultiRead: &MultiReadRequest{Ops: []Op{
			{Type: OpGetData, Request: &GetDataRequest{Path: "/r1"}},
			{Type: OpGetChildren, Request: &GetChildrenRequest{Path: "/r2"}},
		}},
	}
}

// sampleResponses holds one reply body for every opcode, and the records
// that are no reply to an opcode.
func sampleResponses() map[OpCode]Record {
	return map[OpCode]Record{
		OpCreate:               &CreateResponse{Path: "/a0000000001"},
		OpCreate2:              &Create2Response{Path: "/b", Stat: sampleStat},
		OpCreateContainer:      &Create2Response{Path: "/c", Stat: sampleStat},
		OpCreateTTL:            &Create2Response{Path: "/t0000000002", Stat: sampleStat},
		OpExists:               &ExistsResponse{Stat: sampleStat},
		OpGetData:              &GetDataResponse{Data: []byte("data"), Stat: sampleStat},
		OpReconfig:             &GetDataResponse{Data: []byte("server.1=h:2888:3888;2181\nversion=100000000"), Stat: sampleStat},
		OpSetData:              &SetDataResponse{Stat: sampleStat},
		OpCheck:                &SetDataResponse{Stat: sampleStat},
		OpGetACL:               &GetACLResponse{ACL: OpenACL(), Stat: sampleStat},
		OpSetACL:               &SetACLResponse{Stat: sampleStat},
		OpGetChildren:          &GetChildrenResponse{Children: []string{"a", "b"}},
		OpGetChildren2:         &GetChildren2Response{Children: []string{"c"}, Stat: sampleStat},
		OpSync:                 &SyncResponse{Path: "/sync"},
		OpGetEphemerals:        &GetEphemeralsResponse{Ephemerals: []string{"/e1", "/x/e2"}},
		OpGetAllChildrenNumber: &GetAllChildrenNumberResponse{TotalNumber: 42},
		OpAddWatch:             &ErrorResponse{Err: CodeOK},
		OpWhoAmI:               &WhoAmIResponse{ClientInfo: []ClientInfo{{"ip", "127.0.0.1"}, {"digest", "u"}}},
		OpSASL:                 &SetSASLResponse{Token: []byte{9}},
		OpDelete:               &Empty{},
		OpMulti: &MultiResponse{Results: []OpResult{
			{Type: OpCreate, Path: "/m/a"},
			{Type: OpCreate2, Path: "/m/b", Stat: sampleStat},
			{Type: OpSetData, Stat: sampleStat},
			{Type: OpDelete},
			{Type: OpCheck},
			ErrorResult(CodeNoNode),
		}},
		OpMultiRead: &MultiResponse{Results: []OpResult{
			{Type: OpGetData, Data: []byte("r"), Stat: sampleStat},
			{Type: OpGetChildren, Children: []string{"x", "y"}},
			ErrorResult(CodeNoNode),
		}},
	}
}

func sampleOthers() []Record {
	return []Record{
		&ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 0x200000005, TimeOut: 30000, SessionID: 0x1d00000abcdef01, Passwd: []byte("0123456789abcdef"), ReadOnly: true, HasReadOnly: true},
		&ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)},
		&ConnectResponse{TimeOut: 4000, SessionID: 7, Passwd: []byte("0123456789abcdef"), HasReadOnly: true},
		&ConnectResponse{TimeOut: 4000, SessionID: 7, Passwd: []byte("0123456789abcdef")},
		&RequestHeader{Xid: 12, Type: OpGetData},
		&ReplyHeader{Xid: 12, Zxid: 0x300000001, Err: CodeNoNode},
		&WatcherEvent{Type: EventNodeDeleted, State: StateSyncConnected, Path: "/gone"},
		&ErrorResponse{Err: CodeBadVersion},
	}
}

func allSamples() []Record {
	var out []Record
	for _, m := range []map[OpCode]Record{sampleRequests(), sampleResponses()} {
		for _, r := range m {
			out = append(out, r)
		}
	}
	return append(out, sampleOthers()...)
}

// newLike returns a new zero record of rec's type.
func newLike(rec Record) Record {
	return reflect.New(reflect.TypeOf(rec).Elem()).Interface().(Record)
}

func TestEveryRecordRoundTrips(t *testing.T) {
	for _, rec := range allSamples() {
		t.Run(fmt.Sprintf("%T", rec), func(t *testing.T) {
			b := Marshal(rec)
			got := newLike(rec)
			r := NewReader(b)
			if err := got.Decode(r); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if r.Len() != 0 {
				t.Errorf("%d bytes left after decoding", r.Len())
			}
			if !reflect.DeepEqual(got, rec) {
				t.Errorf("round trip changed the record\n got %+v\nwant %+v", got, rec)
			}
		})
	}
}

func TestEveryRequestOpcodeDecodes(t *testing.T) {
	samples := sampleRequests()
	for op := OpCode(-20); op <= 120; op++ {
		rec, ok := NewRequest(op)
		sample, client := samples[op]
		if ok != client {
			t.Errorf("NewRequest(%v) ok = %v, want %v", op, ok, client)
			continue
		}
		if !ok {
			if _, err := DecodeRequest(op, nil); !errors.Is(err, ErrUnknownOp) {
				t.Errorf("DecodeRequest(%v) err = %v, want ErrUnknownOp", op, err)
			}
			continue
		}
		if reflect.TypeOf(rec) != reflect.TypeOf(sample) {
			t.Errorf("NewRequest(%v) = %T, want %T", op, rec, sample)
		}
		got, err := DecodeRequest(op, Marshal(sample))
		if err != nil {
			t.Errorf("DecodeRequest(%v): %v", op, err)
			continue
		}
		if !reflect.DeepEqual(got, sample) {
			t.Errorf("DecodeRequest(%v) = %+v, want %+v", op, got, sample)
		}
	}
}

func TestEveryResponseOpcode(t *testing.T) {
	samples := sampleResponses()
	for op := OpCode(-20); op <= 120; op++ {
		rec, ok := NewResponse(op)
		_, req := NewRequest(op)
		if ok != req {
			t.Errorf("NewResponse(%v) ok = %v, NewRequest's %v", op, ok, req)
		}
		if !ok {
			continue
		}
		want, has := samples[op]
		if !has {
			want = &Empty{} // the replies with no body
		}
		if reflect.TypeOf(rec) != reflect.TypeOf(want) {
			t.Errorf("NewResponse(%v) = %T, want %T", op, rec, want)
		}
	}
}

// Every strict prefix of an encoding fails to decode, with one of the
// decoding sentinels, except where ZooKeeper's record really ends earlier
// (the optional readOnly byte of ConnectRequest and ConnectResponse).
func TestTruncatedRecordsFailCleanly(t *testing.T) {
	for _, rec := range allSamples() {
		b := Marshal(rec)
		for n := 0; n < len(b); n++ {
			got := newLike(rec)
			err := got.Decode(NewReader(b[:n]))
			switch x := rec.(type) {
			case *ConnectRequest:
				if x.HasReadOnly && n == len(b)-1 {
					if err != nil || got.(*ConnectRequest).HasReadOnly {
						t.Errorf("ConnectRequest without readOnly: err %v, HasReadOnly %v", err, got.(*ConnectRequest).HasReadOnly)
					}
					continue
				}
			case *ConnectResponse:
				if x.HasReadOnly && n == len(b)-1 {
					if err != nil || got.(*ConnectResponse).HasReadOnly {
						t.Errorf("ConnectResponse without readOnly: err %v", err)
					}
					continue
				}
			}
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadLength) {
				t.Errorf("%T cut to %d of %d bytes: err = %v", rec, n, len(b), err)
			}
		}
	}
}

func TestDecodeRequestErrorNamesTheOp(t *testing.T) {
	_, err := DecodeRequest(OpGetData, []byte{0, 0, 0, 100, '/', 'a', 'b'})
	if !errors.Is(err, ErrBadLength) {
		t.Fatalf("err = %v, want ErrBadLength", err)
	}
	if want := "jute: getData request: ustring length 100 exceeds the 3 bytes left"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	_, err = DecodeRequest(OpCode(99), nil)
	if !errors.Is(err, ErrUnknownOp) || err.Error() != "jute: unknown request opcode 99" {
		t.Errorf("unknown op: %v", err)
	}
}

// ZooKeeper's server ignores bytes after a request's record.
func TestTrailingBytesAreIgnored(t *testing.T) {
	b := append(Marshal(&SyncRequest{Path: "/x"}), 1, 2, 3)
	got, err := DecodeRequest(OpSync, b)
	if err != nil || got.(*SyncRequest).Path != "/x" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestConnectRequestReadOnlyIsOptional(t *testing.T) {
	base := ConnectRequest{LastZxidSeen: 5, TimeOut: 6000, SessionID: 9, Passwd: make([]byte, 16)}
	goZK := Marshal(&base) // as go-zookeeper sends it: no trailing byte
	if len(goZK) != 44 {
		t.Fatalf("ConnectRequest without readOnly is %d bytes, want 44", len(goZK))
	}
	withRO := base
	withRO.ReadOnly, withRO.HasReadOnly = true, true
	java := Marshal(&withRO) // as the Java client and kazoo send it
	if len(java) != 45 || java[44] != 1 {
		t.Fatalf("ConnectRequest with readOnly: % x", java)
	}
	var a, b ConnectRequest
	if err := Unmarshal(goZK, &a); err != nil || a.HasReadOnly || a.ReadOnly {
		t.Errorf("go-zookeeper form: %+v %v", a, err)
	}
	if err := Unmarshal(java, &b); err != nil || !b.HasReadOnly || !b.ReadOnly {
		t.Errorf("Java form: %+v %v", b, err)
	}
	// A reused record forgets an earlier readOnly.
	if err := Unmarshal(goZK, &b); err != nil || b.HasReadOnly || b.ReadOnly {
		t.Errorf("reused record: %+v %v", b, err)
	}
}

func TestResponsesNeverSendNullLists(t *testing.T) {
	for _, rec := range []Record{
		&GetChildrenResponse{}, &GetChildren2Response{}, &GetEphemeralsResponse{},
		&GetACLResponse{}, &WhoAmIResponse{},
		&MultiResponse{Results: []OpResult{{Type: OpGetChildren}}},
	} {
		b := Marshal(rec)
		for i := 0; i+4 <= len(b); i++ {
			if b[i] == 0xff && b[i+1] == 0xff && b[i+2] == 0xff && b[i+3] == 0xff && !isMultiEnd(rec, b, i) {
				t.Errorf("%T with nil lists encodes a -1 at %d: % x", rec, i, b)
			}
		}
		got := newLike(rec)
		if err := Unmarshal(b, got); err != nil {
			t.Errorf("%T: %v", rec, err)
		}
	}
	// Requests keep null distinct from empty.
	var sw SetWatches
	if err := Unmarshal(Marshal(&SetWatches{DataWatches: []string{}}), &sw); err != nil {
		t.Fatal(err)
	}
	if sw.DataWatches == nil || sw.ExistWatches != nil {
		t.Errorf("request lists: data %#v exist %#v", sw.DataWatches, sw.ExistWatches)
	}
}

// isMultiEnd reports whether the -1 at i belongs to a multi's headers.
func isMultiEnd(rec Record, b []byte, i int) bool {
	_, ok := rec.(*MultiResponse)
	return ok && i >= len(b)-9
}
