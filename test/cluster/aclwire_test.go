package cluster

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// aclWire is a ZooKeeper client made of the codec, for the requests
// go-zookeeper does not send (whoAmI, getAllChildrenNumber, multiRead,
// addWatch, getEphemerals, the Java client's auth xid): it sends exactly
// the frames a test writes and reads exactly what the server sends.
type aclWire struct {
	t      testing.TB
	c      net.Conn
	xid    int32
	events []jute.WatcherEvent // notifications read while waiting for replies
}

// dialACLWire opens a session on addr.
func dialACLWire(t testing.TB, addr string) *aclWire {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	z := &aclWire{t: t, c: c}
	z.write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}))
	var resp jute.ConnectResponse
	if err := jute.Unmarshal(z.frame(), &resp); err != nil || resp.SessionID == 0 {
		t.Fatalf("connect: %+v %v", resp, err)
	}
	return z
}

func (z *aclWire) write(b []byte) {
	z.t.Helper()
	_ = z.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := z.c.Write(b); err != nil {
		z.t.Fatal(err)
	}
}

func (z *aclWire) frame() []byte {
	z.t.Helper()
	_ = z.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := jute.ReadFrame(z.c, 64<<20)
	if err != nil {
		z.t.Fatal(err)
	}
	return f
}

// callXid sends a request with the given xid and returns its reply header
// and body, keeping the notifications that come first.
func (z *aclWire) callXid(xid int32, op jute.OpCode, rec jute.Encoder) (jute.ReplyHeader, *jute.Reader) {
	z.t.Helper()
	if rec == nil {
		rec = &jute.Empty{}
	}
	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: xid, Type: op}, rec))
	for {
		r := jute.NewReader(z.frame())
		var h jute.ReplyHeader
		if err := h.Decode(r); err != nil {
			z.t.Fatal(err)
		}
		if h.Xid == jute.XidNotification {
			var ev jute.WatcherEvent
			if err := ev.Decode(r); err != nil {
				z.t.Fatal(err)
			}
			z.events = append(z.events, ev)
			continue
		}
		if h.Xid != xid {
			z.t.Fatalf("reply xid %d, want %d", h.Xid, xid)
		}
		return h, r
	}
}

func (z *aclWire) call(op jute.OpCode, rec jute.Encoder) (jute.ReplyHeader, *jute.Reader) {
	z.t.Helper()
	z.xid++
	return z.callXid(z.xid, op, rec)
}

// auth sends an auth packet as the Java client does (xid -4).
func (z *aclWire) auth(scheme, cred string) jute.Code {
	z.t.Helper()
	h, _ := z.callXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: scheme, Auth: []byte(cred)})
	return h.Err
}

func (z *aclWire) whoAmI() []jute.ClientInfo {
	z.t.Helper()
	h, r := z.call(jute.OpWhoAmI, nil)
	var w jute.WhoAmIResponse
	if h.Err != jute.CodeOK || w.Decode(r) != nil {
		z.t.Fatalf("whoAmI: %v", h.Err)
	}
	return w.ClientInfo
}

// closed reports whether the server closed the connection (reading hits its
// end) within d.
func (z *aclWire) closed(d time.Duration) bool {
	_ = z.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, z.c)
	return err == nil // EOF ends Copy without an error; a deadline does not
}
