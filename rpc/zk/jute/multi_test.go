package jute

import (
	"errors"
	"reflect"
	"testing"
)

// encodeMulti writes ops with arbitrary types, as a misbehaving client might.
func encodeMulti(ops ...Op) []byte { return Marshal(&MultiRequest{Ops: ops}) }

func TestMultiRefusesOpsItMayNotCarry(t *testing.T) {
	get := Op{Type: OpGetData, Request: &GetDataRequest{Path: "/a"}}
	create := Op{Type: OpCreate, Request: &CreateRequest{Path: "/a", ACL: OpenACL()}}
	tests := []struct {
		name string
		op   OpCode
		body []byte
	}{
		{"multi with a getData", OpMulti, encodeMulti(create, get)},
		{"multi with a ping", OpMulti, encodeMulti(Op{Type: OpPing, Request: &Empty{}})},
		{"multi with a nested multi", OpMulti, encodeMulti(Op{Type: OpMulti, Request: &MultiRequest{}})},
		{"multi with an error op", OpMulti, encodeMulti(Op{Type: OpError, Request: &Empty{}})},
		{"multiRead with a create", OpMultiRead, encodeMulti(get, create)},
		{"multiRead with a getChildren2", OpMultiRead, encodeMulti(Op{Type: OpGetChildren2, Request: &GetChildren2Request{Path: "/"}})},
		{"multi create with an invalid mode", OpMulti, encodeMulti(Op{Type: OpCreate2, Request: &CreateRequest{Path: "/a", Flags: 7}})},
		{"multi createContainer with a negative mode", OpMulti, encodeMulti(Op{Type: OpCreateContainer, Request: &CreateRequest{Path: "/a", Flags: -1}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := DecodeRequest(tc.op, tc.body)
			if !errors.Is(err, ErrBadMulti) {
				t.Fatalf("got %+v, err %v; want ErrBadMulti", rec, err)
			}
		})
	}
	// A TTL create is not checked for its mode when decoded, as in ZooKeeper
	// (the server checks it when it applies the op).
	if _, err := DecodeRequest(OpMulti, encodeMulti(Op{Type: OpCreateTTL, Request: &CreateTTLRequest{Path: "/t", Flags: 9, TTL: 1}})); err != nil {
		t.Errorf("createTTL with mode 9: %v", err)
	}
}

func TestMultiErrorMessage(t *testing.T) {
	_, err := DecodeRequest(OpMultiRead, encodeMulti(Op{Type: OpDelete, Request: &DeleteRequest{Path: "/a"}}))
	if want := "jute: multiRead request: a multiRead may not carry op type 2 (delete)"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
}

func TestEmptyMulti(t *testing.T) {
	body := Marshal(&MultiRequest{}) // only the closing header, as go-zookeeper sends Multi()
	if len(body) != 9 {
		t.Fatalf("empty multi is %d bytes", len(body))
	}
	rec, err := DecodeRequest(OpMulti, body)
	if err != nil || len(rec.(*MultiRequest).Ops) != 0 {
		t.Fatalf("got %+v, %v", rec, err)
	}
	var resp MultiResponse
	if err := Unmarshal(Marshal(&MultiResponse{}), &resp); err != nil || len(resp.Results) != 0 {
		t.Fatalf("empty response: %+v, %v", resp, err)
	}
}

func TestMultiWithoutEndFails(t *testing.T) {
	body := encodeMulti(Op{Type: OpDelete, Request: &DeleteRequest{Path: "/a"}})
	body = body[:len(body)-9] // drop the closing header
	if _, err := DecodeRequest(OpMulti, body); !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
}

// The done flag ends a multi whatever the header's type and err say, as in
// ZooKeeper's MultiOperationRecord.deserialize.
func TestMultiEndsOnDone(t *testing.T) {
	w := NewWriter(nil)
	(&multiHeader{Type: OpDelete, Err: -1}).encode(w)
	(&DeleteRequest{Path: "/a", Version: 1}).Encode(w)
	(&multiHeader{Type: OpCreate, Done: true, Err: 0}).encode(w)
	rec, err := DecodeRequest(OpMulti, w.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := &MultiRequest{Ops: []Op{{Type: OpDelete, Request: &DeleteRequest{Path: "/a", Version: 1}}}}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("got %+v", rec)
	}
}

func TestFailedMultiResults(t *testing.T) {
	got := FailedMultiResults(4, 2, CodeBadVersion)
	want := []OpResult{
		{Type: OpError, Err: CodeOK},
		{Type: OpError, Err: CodeOK},
		{Type: OpError, Err: CodeBadVersion},
		{Type: OpError, Err: CodeRuntimeInconsistency},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if got := FailedMultiResults(1, 0, CodeNoNode); len(got) != 1 || got[0].Err != CodeNoNode {
		t.Errorf("single op: %+v", got)
	}
}

func TestResultType(t *testing.T) {
	want := map[OpCode]OpCode{
		OpCreate: OpCreate, OpCreate2: OpCreate2, OpCreateContainer: OpCreate2, OpCreateTTL: OpCreate2,
		OpDelete: OpDelete, OpSetData: OpSetData, OpCheck: OpCheck,
		OpGetData: OpGetData, OpGetChildren: OpGetChildren,
	}
	for op, res := range want {
		if got := ResultType(op); got != res {
			t.Errorf("ResultType(%v) = %v, want %v", op, got, res)
		}
	}
}

func TestMultiResponseWithABadResultTypeStaysReadable(t *testing.T) {
	resp := &MultiResponse{Results: []OpResult{{Type: OpCreate, Path: "/a"}, {Type: OpSync, Path: "/x"}}}
	var back MultiResponse
	if err := Unmarshal(Marshal(resp), &back); err != nil {
		t.Fatal(err)
	}
	want := []OpResult{{Type: OpCreate, Path: "/a"}, ErrorResult(CodeMarshallingError)}
	if !reflect.DeepEqual(back.Results, want) {
		t.Errorf("got %+v, want %+v", back.Results, want)
	}
}

func TestMultiResponseRefusesUnknownResult(t *testing.T) {
	w := NewWriter(nil)
	(&multiHeader{Type: OpSync}).encode(w)
	w.Ustring("/x")
	multiEnd.encode(w)
	var resp MultiResponse
	if err := Unmarshal(w.Bytes(), &resp); !errors.Is(err, ErrBadMulti) || resp.Results != nil {
		t.Fatalf("got %+v, %v; want ErrBadMulti", resp, err)
	}
}

// The error code of a failed op is the one in its body, as ZooKeeper's client
// reads it; the header's is informational.
func TestMultiResponseErrorFromBody(t *testing.T) {
	w := NewWriter(nil)
	(&multiHeader{Type: OpError, Err: 0}).encode(w)
	w.Int(int32(CodeNoNode))
	multiEnd.encode(w)
	var resp MultiResponse
	if err := Unmarshal(w.Bytes(), &resp); err != nil || resp.Results[0].Err != CodeNoNode {
		t.Fatalf("got %+v, %v", resp, err)
	}
}
