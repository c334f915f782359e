package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/coordd/coordd/client"
)

// recordedConn keeps a copy of every byte a client connection sends and
// receives, to read its HTTP/2 frames afterwards.
type recordedConn struct {
	net.Conn
	mu        sync.Mutex
	sent, got bytes.Buffer
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recordedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.sent.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

// pings counts the PING frames (not their acknowledgements) in an HTTP/2
// byte stream, and all its frames.
func pings(t *testing.T, b []byte) (pings, frames int) {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	fr.SetMaxReadFrameSize(1 << 24)
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return pings, frames
		}
		if err != nil {
			t.Fatalf("frame %d: %v", frames, err)
		}
		frames++
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
		}
	}
}

// TestNoPingPerMessage: a session's requests and replies travel without
// HTTP/2 PINGs of their own. gRPC's bandwidth-delay-product probing, on
// unless the flow-control windows are set, answers almost every message it
// receives with a PING (and a window update), which costs each side a frame,
// a syscall and a wake-up per message; the server (rpc) and the client
// library both set static windows to turn it off.
func TestNoPingPerMessage(t *testing.T) {
	c := New(t, 1, Options{})
	var (
		mu    sync.Mutex
		conns []*recordedConn
	)
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		rc := &recordedConn{Conn: nc}
		mu.Lock()
		conns = append(conns, rc)
		mu.Unlock()
		return rc, nil
	})
	ctx := ctxT(t)
	cl, err := client.Connect(ctx, c.Servers(), client.WithDialOptions(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	if _, err := cl.Create(ctx, "/p", []byte("v"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	const ops = 100
	for i := 0; i < ops; i++ {
		if _, _, err := cl.Get(ctx, "/p"); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(conns) == 0 {
		t.Fatal("the client dialled no connection through the test's dialer")
	}
	for i, rc := range conns {
		rc.mu.Lock()
		sent := bytes.Clone(rc.sent.Bytes())
		got := bytes.Clone(rc.got.Bytes())
		rc.mu.Unlock()
		// A client connection opens with the 24-byte HTTP/2 preface.
		if len(sent) >= len(http2.ClientPreface) && string(sent[:len(http2.ClientPreface)]) == http2.ClientPreface {
			sent = sent[len(http2.ClientPreface):]
		}
		clientPings, clientFrames := pings(t, sent)
		serverPings, serverFrames := pings(t, got)
		t.Logf("connection %d: client sent %d frames (%d PINGs), server sent %d frames (%d PINGs)", i, clientFrames, clientPings, serverFrames, serverPings)
		// A few pings are fine (keepalive); one per message is not.
		if clientPings > ops/10 || serverPings > ops/10 {
			t.Errorf("connection %d: %d PINGs from the client and %d from the server for %d requests", i, clientPings, serverPings, ops)
		}
	}
}

// TestLargestValueThroughFollower: a value of the largest size allowed (1 MiB
// by default) is written through a follower, which forwards it to the leader
// on its peer connection, and read back from every server: the static
// flow-control windows hold a whole message on both links.
func TestLargestValueThroughFollower(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	f := c.Follower()
	cl := connect(t, c.Members[f].Cfg.ClientAddr)
	value := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if _, err := cl.Create(ctx, "/big", value, client.CreateMode{}); err != nil {
		t.Fatalf("create with %d bytes through a follower: %v", len(value), err)
	}
	if _, err := cl.Set(ctx, "/big", append(value[:len(value)-1:len(value)-1], 'X'), 0); err != nil {
		t.Fatalf("set with %d bytes through a follower: %v", len(value), err)
	}
	want := append(bytes.Clone(value[:len(value)-1]), 'X')
	for _, addr := range c.Servers() {
		r := connect(t, addr)
		if err := r.Sync(ctx, "/big"); err != nil {
			t.Fatal(err)
		}
		got, _, err := r.Get(ctx, "/big")
		if err != nil {
			t.Fatalf("get from %s: %v", addr, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("get from %s: %d bytes, not the %d written", addr, len(got), len(want))
		}
	}
}

// TestValueOverGRPCsDefaultLimit: with --max-data-size above gRPC's default
// limit on a received message (4 MiB), a value that large is written and
// read back by the Go client. The client accepts replies of any size; at
// gRPC's default it would drop the stream on the reply and resend the read
// on the next stream, until the caller gave up. One server: replicating
// 5 MiB entries while make test runs other packages on the same two cores
// took the three servers of the test harness (heartbeat 500 ms) through
// elections, and the test past its deadline, once in seven runs.
func TestValueOverGRPCsDefaultLimit(t *testing.T) {
	c := New(t, 1, Options{MaxDataSize: 6 << 20})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	value := bytes.Repeat([]byte("0123456789abcdef"), 5<<16) // 5 MiB
	if _, err := cl.Create(ctx, "/big", value, client.CreateMode{}); err != nil {
		t.Fatalf("create with %d bytes: %v", len(value), err)
	}
	got, _, err := cl.Get(ctx, "/big")
	if err != nil {
		t.Fatalf("get of %d bytes: %v", len(value), err)
	}
	if !bytes.Equal(got, value) {
		t.Fatalf("get: %d bytes, not the %d written", len(got), len(value))
	}
}

// TestOversizeWriteFailsAlone: a write larger than the server accepts fails
// at once with ErrBadArguments, whether its one value is too large or a
// multi's values are together, and the session goes on. The server says its
// limit when the session connects and the client checks before sending: one
// over gRPC's limit would end the stream, and the client resend it on every
// new one.
func TestOversizeWriteFailsAlone(t *testing.T) {
	c := New(t, 1, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	half := make([]byte, 512<<10)
	for name, write := range map[string]func() error{
		"create of 2 MiB": func() error {
			_, err := cl.Create(ctx, "/big", make([]byte, 2<<20), client.CreateMode{})
			return err
		},
		"set of 20 MiB": func() error {
			_, err := cl.Set(ctx, "/big", make([]byte, 20<<20), -1)
			return err
		},
		"multi of 3 x 512 KiB": func() error {
			_, err := cl.Multi(ctx, client.CreateOp("/a", half, client.CreateMode{}),
				client.CreateOp("/b", half, client.CreateMode{}), client.CreateOp("/c", half, client.CreateMode{}))
			return err
		},
	} {
		start := time.Now()
		err := write()
		if !errors.Is(err, client.ErrBadArguments) || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("%s: %v, want ErrBadArguments saying what it exceeds", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: failed after %v", name, d)
		}
	}
	if _, err := cl.Create(ctx, "/small", []byte("ok"), client.CreateMode{}); err != nil {
		t.Fatalf("create after the oversize writes: %v", err)
	}
	for _, p := range []string{"/big", "/a"} {
		if _, ok, err := cl.Exists(ctx, p); err != nil || ok {
			t.Errorf("%s after the refused writes: exists %v, %v", p, ok, err)
		}
	}
}

// TestRaisingMaxDataSizeOneServerAtATime: --max-data-size is raised by
// restarting one server at a time, so for a while the servers differ. A
// value over the old limit, admitted by a server with the new one, is
// applied alike by every server (the limit decides what a server admits,
// never what it applies), whether that server leads or forwards it to a
// leader with the old limit; and a server with the old limit restarts from
// a snapshot that holds it.
func TestRaisingMaxDataSizeOneServerAtATime(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	value := bytes.Repeat([]byte("0123456789abcdef"), 2<<16) // 2 MiB: over the default 1 MiB
	for step, i := range []int{c.Follower(), c.LeaderIndex()} {
		c.Stop(i)
		c.Members[i].Cfg.MaxDataSize = 4 << 20
		c.Start(i)
		c.WaitLeader(15 * time.Second)
		cl := connect(t, c.Members[i].Cfg.ClientAddr)
		path := fmt.Sprintf("/big%d", step)
		if _, err := cl.Create(ctx, path, value, client.CreateMode{}); err != nil {
			t.Fatalf("step %d: create of 2 MiB through server %s (4 MiB limit): %v", step, c.Members[i].ID, err)
		}
		for _, m := range c.Members {
			r := connect(t, m.Cfg.ClientAddr)
			if err := r.Sync(ctx, path); err != nil {
				t.Fatal(err)
			}
			got, _, err := r.Get(ctx, path)
			if err != nil || !bytes.Equal(got, value) {
				t.Fatalf("step %d: server %s (limit %d) holds %d bytes at %s, err %v; want the 2 MiB written", step, m.ID, m.Cfg.MaxDataSize, len(got), path, err)
			}
		}
	}
	// The one server left with the old limit restarts from a snapshot that
	// holds both values.
	old := -1
	for i, m := range c.Members {
		if m.Cfg.MaxDataSize == 0 {
			old = i
		}
	}
	if err := c.Members[old].Node().Snapshot(); err != nil {
		t.Fatalf("snapshot on server %s: %v", c.Members[old].ID, err)
	}
	c.Stop(old)
	c.Start(old)
	r := connect(t, c.Members[old].Cfg.ClientAddr)
	if got, _, err := r.Get(ctx, "/big1"); err != nil || !bytes.Equal(got, value) {
		t.Fatalf("server %s after restoring its snapshot: %d bytes at /big1, err %v", c.Members[old].ID, len(got), err)
	}
}
