package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClassify: a write counts as during a snapshot when it overlaps one.
func TestClassify(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	samples := []writeSample{
		{at(0), 5 * time.Millisecond},    // before
		{at(95), 10 * time.Millisecond},  // ends inside
		{at(150), 1 * time.Millisecond},  // inside
		{at(199), 30 * time.Millisecond}, // starts inside
		{at(300), 2 * time.Millisecond},  // after
	}
	quiet, snap := classify(samples, []interval{{at(100), at(200)}})
	if len(quiet) != 2 || len(snap) != 3 {
		t.Fatalf("quiet %v, during %v", quiet, snap)
	}
	if p := percentile(snap, 0.99); p != 30 {
		t.Errorf("p99 %v", p)
	}
	if p := percentile(nil, 0.99); p != 0 {
		t.Errorf("p99 of nothing %v", p)
	}
}

// TestBeyondData: the mean growth per server, per znode, less its 100
// bytes.
func TestBeyondData(t *testing.T) {
	if got := beyondData([]float64{10, 20}, []float64{10 + 200.0/1024, 20 + 200.0/1024}, 1024); got != 100 {
		t.Errorf("beyondData = %v, want 100", got)
	}
	if got := beyondData(nil, nil, 5); got != 0 {
		t.Errorf("nothing measured: %v", got)
	}
}

// TestSnapFiles finds both systems' snapshots and the time in a Raft
// snapshot's name.
func TestSnapFiles(t *testing.T) {
	dir := t.TempDir()
	raftSnap := filepath.Join(dir, "snapshots", "2-8597-1795851004692.tmp")
	zkSnap := filepath.Join(dir, "version-2", "snapshot.1a2b")
	for _, d := range []string{raftSnap, filepath.Dir(zkSnap)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(zkSnap, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := snapFiles(dir)
	if len(got) != 2 || got[0] != raftSnap || got[1] != zkSnap {
		t.Fatalf("snapFiles = %v", got)
	}
	if snapState(raftSnap) != filepath.Join(raftSnap, "state.bin") || snapState(zkSnap) != zkSnap {
		t.Error("snapState")
	}
	if at, ok := raftSnapTime(raftSnap); !ok || at.UnixMilli() != 1795851004692 {
		t.Errorf("raftSnapTime = %v %v", at, ok)
	}
	if _, ok := raftSnapTime(zkSnap); ok {
		t.Error("a ZooKeeper snapshot has no time in its name")
	}
}

// TestWipe empties a coordd data dir, and only version-2 of ZooKeeper's.
func TestWipe(t *testing.T) {
	coordd, zk := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(coordd, "wal", "a"), filepath.Join(coordd, "server-id"),
		filepath.Join(zk, "myid"), filepath.Join(zk, "zoo.cfg"), filepath.Join(zk, "version-2", "log.1")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{coordd, zk} {
		if err := wipe(d); err != nil {
			t.Fatal(err)
		}
	}
	if e, _ := os.ReadDir(coordd); len(e) != 0 {
		t.Errorf("coordd's data dir still holds %v", e)
	}
	e, _ := os.ReadDir(zk)
	var names []string
	for _, x := range e {
		names = append(names, x.Name())
	}
	if strings.Join(names, ",") != "myid,zoo.cfg" {
		t.Errorf("ZooKeeper's data dir holds %v, want myid and zoo.cfg", names)
	}
}

// fakeZK answers one connection as a ZooKeeper server would the minimal
// session: the connect, pings, getData and addWatch (each followed by a
// notification), closeSession.
func fakeZK(t *testing.T, ln net.Listener) {
	conn, err := ln.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	frame := func(b []byte) {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
		if _, err := conn.Write(append(out, b...)); err != nil {
			t.Error(err)
		}
	}
	req, err := readFrame(r, nil)
	if err != nil || len(req) < 44 {
		t.Errorf("connect request: %v (%d bytes)", err, len(req))
		return
	}
	// ConnectResponse: version, timeout (as asked), session 7, password.
	resp := binary.BigEndian.AppendUint32(nil, 0)
	resp = binary.BigEndian.AppendUint32(resp, binary.BigEndian.Uint32(req[12:]))
	resp = binary.BigEndian.AppendUint64(resp, 7)
	resp = binary.BigEndian.AppendUint32(resp, 16)
	frame(append(resp, make([]byte, 16)...))
	header := func(xid int32) []byte {
		h := binary.BigEndian.AppendUint32(nil, uint32(xid))
		h = binary.BigEndian.AppendUint64(h, 1)
		return binary.BigEndian.AppendUint32(h, 0)
	}
	for {
		req, err := readFrame(r, nil)
		if err != nil {
			return
		}
		xid, op := int32(binary.BigEndian.Uint32(req)), int32(binary.BigEndian.Uint32(req[4:]))
		frame(header(xid))
		switch op {
		case opGetData, opAddWatch:
			frame(append(header(xidNotify), make([]byte, 12)...))
		case -11:
			return
		}
	}
}

// TestRawSession: the minimal session connects, pipelines watches, counts
// replies and notifications, pings, and closes.
func TestRawSession(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go fakeZK(t, ln)
	s, err := dialRaw(ln.Addr().String(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.id != 7 || s.timeout != 30*time.Second {
		t.Fatalf("session %d, timeout %v", s.id, s.timeout)
	}
	for _, p := range []string{"/a", "/b"} {
		if err := s.getDataWatch(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.addRecursiveWatch("/c"); err != nil {
		t.Fatal(err)
	}
	if err := s.waitReplies(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.ping(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for (s.pongs.Load() < 1 || s.notified.Load() < 3) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s.pongs.Load() != 1 || s.notified.Load() != 3 || !s.alive() {
		t.Fatalf("pongs %d, notifications %d, alive %v", s.pongs.Load(), s.notified.Load(), s.alive())
	}
	s.closeSession()
	if s.alive() {
		t.Error("alive after closeSession")
	}
}

// TestScaleTable prints both systems side by side, the ratio of the
// second to the first, and "-" for what one did not measure.
func TestScaleTable(t *testing.T) {
	rs := []scaleResult{
		{System: "ZooKeeper", Znodes: 1000, LoadS: 4, BeyondDataHeap: 400, GetChildrenResult: "ok"},
		{System: "coordd", Znodes: 1000, LoadS: 2, GRPCSessions: 10},
	}
	var b bytes.Buffer
	writeScaleTable(&b, rs)
	out := b.String()
	for _, want := range []string{
		"| | ZooKeeper | coordd | coordd/ZooKeeper |",
		"|   loading them (s) | 4.0 | 2.0 | 0.50 |",
		"|   bytes per znode beyond its data, live heap after a full GC | 400 | - | |",
		"| 10 sessions of coordd's Go client (shared connections): failed | - | 0 | |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
