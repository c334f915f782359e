package jute

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// decodeErrors are the sentinels a decoding error may match.
var decodeErrors = []error{ErrTruncated, ErrBadLength, ErrUnknownOp, ErrBadMulti}

func isDecodeError(err error) bool {
	for _, e := range decodeErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader, as a peer could:
// it never panics, never returns a frame over the limit, and fails only with
// its sentinels (or io.EOF between frames).
func FuzzReadFrame(f *testing.F) {
	for _, rec := range allSamples() {
		f.Add(AppendFrame(nil, rec))
	}
	f.Add(AppendFrame(AppendFrame(nil, &RequestHeader{Xid: XidPing, Type: OpPing}), &ConnectRequest{Passwd: make([]byte, 16)}))
	f.Add([]byte("ruok"))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 0xc0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0x10, 0, 1, 2, 3})
	f.Add([]byte{0, 0})
	const limit = 4096
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 4 {
			_ = Classify([4]byte(data[:4]))
		}
		r := bytes.NewReader(data)
		for frames := 0; ; frames++ {
			if frames > len(data)/4+1 {
				t.Fatalf("%d frames from %d bytes", frames, len(data))
			}
			frame, err := ReadFrame(r, limit)
			if err != nil {
				if frame != nil {
					t.Fatalf("a frame with an error: %v", err)
				}
				if err != io.EOF && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrNegativeLength) && !errors.Is(err, ErrTruncatedFrame) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(frame) > limit {
				t.Fatalf("frame of %d bytes over the limit", len(frame))
			}
		}
	})
}

// FuzzDecodeRequest decodes arbitrary frame payloads the way a server does:
// as the first frame's ConnectRequest, and as a RequestHeader followed by the
// body of its opcode. Decoding never panics and fails only with the
// package's sentinels; whatever decodes re-encodes to at most as many bytes,
// and that encoding decodes to the same record.
func FuzzDecodeRequest(f *testing.F) {
	for op, rec := range sampleRequests() {
		f.Add(AppendFrame(nil, &RequestHeader{Xid: 1, Type: op}, rec)[4:])
	}
	for _, rec := range sampleOthers() {
		f.Add(Marshal(rec))
	}
	f.Add(Marshal(&RequestHeader{Xid: 1, Type: OpMulti}))
	f.Add(append(Marshal(&RequestHeader{Xid: 2, Type: OpMulti}), encodeMulti(Op{Type: OpGetData, Request: &GetDataRequest{Path: "/x"}})...))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var cr ConnectRequest
		if err := Unmarshal(payload, &cr); err != nil {
			if !isDecodeError(err) {
				t.Fatalf("ConnectRequest: unexpected error %v", err)
			}
		} else {
			roundTrip(t, &cr, len(payload), func(b []byte) (Record, error) {
				var again ConnectRequest
				return &again, Unmarshal(b, &again)
			})
		}

		var h RequestHeader
		if err := Unmarshal(payload, &h); err != nil {
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("RequestHeader: unexpected error %v", err)
			}
			return
		}
		body := payload[RequestHeaderSize:]
		rec, err := DecodeRequest(h.Type, body)
		if err != nil {
			if rec != nil || !isDecodeError(err) {
				t.Fatalf("%v: record %v, unexpected error %v", h.Type, rec, err)
			}
			return
		}
		roundTrip(t, rec, len(body), func(b []byte) (Record, error) { return DecodeRequest(h.Type, b) })
	})
}

// roundTrip checks that rec, decoded from n bytes, encodes to at most n bytes
// that decode to an equal record.
func roundTrip(t *testing.T, rec Record, n int, decode func([]byte) (Record, error)) {
	t.Helper()
	b := Marshal(rec)
	if len(b) > n {
		t.Fatalf("%T decoded from %d bytes encodes to %d", rec, n, len(b))
	}
	again, err := decode(b)
	if err != nil {
		t.Fatalf("%T: its own encoding does not decode: %v", rec, err)
	}
	if !reflect.DeepEqual(again, rec) {
		t.Fatalf("%T round trip changed it\n got %+v\nwant %+v", rec, again, rec)
	}
}

// FuzzDecodeResponse decodes arbitrary payloads the way a client does: a
// ConnectResponse, and a ReplyHeader followed by a notification or the body
// of the reply to op. Decoding never panics and fails only with the
// package's sentinels; whatever decodes has a stable encoding.
func FuzzDecodeResponse(f *testing.F) {
	for op, rec := range sampleResponses() {
		f.Add(int32(op), AppendFrame(nil, &ReplyHeader{Xid: 1, Zxid: 2}, rec)[4:])
	}
	f.Add(int32(0), AppendFrame(nil, &ReplyHeader{Xid: XidNotification, Zxid: 3}, &WatcherEvent{Type: EventNodeCreated, State: StateSyncConnected, Path: "/n"})[4:])
	f.Add(int32(OpGetChildren), append(Marshal(&ReplyHeader{Xid: 4}), 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, op int32, payload []byte) {
		var cr ConnectResponse
		if err := Unmarshal(payload, &cr); err == nil {
			stableEncoding(t, &cr)
		} else if !isDecodeError(err) {
			t.Fatalf("ConnectResponse: unexpected error %v", err)
		}
		r := NewReader(payload)
		var h ReplyHeader
		r.Record(&h)
		var rec Record = &WatcherEvent{}
		if h.Xid != XidNotification {
			var ok bool
			if rec, ok = NewResponse(OpCode(op)); !ok {
				return
			}
		}
		r.Record(rec)
		if err := r.Err(); err != nil {
			if !isDecodeError(err) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		stableEncoding(t, rec)
	})
}

// stableEncoding checks that rec's encoding decodes to a record with the same
// encoding (responses turn a null list into an empty one, so the records
// themselves may differ once).
func stableEncoding(t *testing.T, rec Record) {
	t.Helper()
	b := Marshal(rec)
	again := newLike(rec)
	if err := Unmarshal(b, again); err != nil {
		t.Fatalf("%T: its own encoding does not decode: %v", rec, err)
	}
	if b2 := Marshal(again); !bytes.Equal(b, b2) {
		t.Fatalf("%T encoding unstable\n%x\n%x", rec, b, b2)
	}
}
