package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// TestKazooWorkerCatchesCachedReplies runs the zk-renumber workload against
// a one-process stand-in for a server (fakeZK), once answering writes from
// a reply cache keyed by the client's xids as coordd did before issue 35,
// and once answering every request for itself. The first must fail the
// workload's checks with wrong replies (a create answered with a setData's
// reply, a write with another's version); the second must pass them all,
// the session resumed on many connections.
func TestKazooWorkerCatchesCachedReplies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		xidCache bool
	}{
		{"replies cached by the client's xid", true},
		{"every request answered for itself", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFakeZK(t, tc.xidCache)
			e := &env{c: &procCluster{nodes: []*procNode{{clientAddr: srv.addr()}}}, start: time.Now(), tl: &timeline{}, outDir: t.TempDir(), logf: t.Logf}
			r := newRegisters(e, 3, 0, 3)
			srv.createKeys(r.keys)
			z := newZKRenumber(r, 3, 2)
			z.maxOps, z.gap = 1200, 0
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			z.run(ctx)
			zv := &verdict{pass: true}
			z.verify(srv.children(), zv)
			t.Logf("zk-renumber: pass %v %v (%d problems)", zv.pass, zv.notes, len(zv.problems))
			resumes := z.conns.Load() - z.sessions.Load()
			if resumes < 5 {
				t.Fatalf("the session was resumed %d times: too few to check anything", resumes)
			}
			if tc.xidCache {
				for _, p := range z.problems[wrongReply] {
					t.Log(p)
				}
				if zv.pass || z.count(wrongReply) == 0 {
					t.Fatalf("replies of other requests went unnoticed: pass %v, %d wrong replies", zv.pass, z.count(wrongReply))
				}
				return
			}
			// (With the cache, refused writes are of unknown outcome, and
			// so many of them make porcupine slow: it checks this run only.)
			rv := &verdict{pass: true}
			r.check(ctx, rv, 20*time.Second)
			if !zv.pass || !rv.pass || z.count(refusedReq) != 0 {
				t.Fatalf("a correct server failed the checks: registers %v, zk-renumber %v", rv.problems, zv.problems)
			}
			if len(z.acked) == 0 {
				t.Fatal("no create was acknowledged")
			}
		})
	}
}

// fakeZK answers the few requests of the zk-renumber workload (connect,
// ping, auth, sync, getData, setData, create, closeSession) from a map of
// nodes, one request at a time. With xidCache it answers writes as coordd
// did before issue 35: per session, the reply of the last write is kept
// under the client's xid and returned to the next write with that xid,
// and a write with a lower xid is refused with SystemError as a stale
// retry.
type fakeZK struct {
	t        testing.TB
	ln       net.Listener
	xidCache bool

	mu       sync.Mutex
	zxid     int64
	sessions map[int64]*fakeSession
	nodes    map[string]*jute.Stat
	data     map[string][]byte
	created  int32 // creates under zkCreateDir (the sequence counter)
}

type fakeSession struct {
	passwd []byte
	// With xidCache: the last write's xid and reply (code and body); the
	// reply is cached even when it has no body.
	lastXid int32
	lastErr jute.Code
	last    jute.Encoder
}

func startFakeZK(t testing.TB, xidCache bool) *fakeZK {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeZK{t: t, ln: ln, xidCache: xidCache, sessions: map[int64]*fakeSession{},
		nodes: map[string]*jute.Stat{}, data: map[string][]byte{}}
	f.nodes[zkCreateDir] = &jute.Stat{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				f.serve(nc)
			}()
		}
	}()
	return f
}

func (f *fakeZK) addr() string { return f.ln.Addr().String() }

func (f *fakeZK) createKeys(keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.nodes[k] = &jute.Stat{}
		f.data[k] = []byte("init")
	}
}

// children lists zkCreateDir.
func (f *fakeZK) children() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for p := range f.nodes {
		if name, ok := strings.CutPrefix(p, zkCreateDir+"/"); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (f *fakeZK) serve(nc net.Conn) {
	br := bufio.NewReader(nc)
	frame, err := jute.ReadFrame(br, 1<<20)
	if err != nil {
		return
	}
	var creq jute.ConnectRequest
	if err := jute.Unmarshal(frame, &creq); err != nil {
		return
	}
	f.mu.Lock()
	id := creq.SessionID
	s, ok := f.sessions[id]
	switch {
	case id == 0:
		id = int64(len(f.sessions) + 1)
		s = &fakeSession{passwd: []byte(fmt.Sprintf("password-%08d", id))}
		f.sessions[id] = s
	case !ok || string(s.passwd) != string(creq.Passwd):
		id = 0
	}
	f.mu.Unlock()
	resp := jute.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: creq.HasReadOnly}
	if id != 0 {
		resp.TimeOut, resp.SessionID, resp.Passwd = creq.TimeOut, id, s.passwd
	}
	if _, err := nc.Write(jute.AppendFrame(nil, &resp)); err != nil || id == 0 {
		return
	}
	for {
		frame, err := jute.ReadFrame(br, 1<<20)
		if err != nil {
			return
		}
		r := jute.NewReader(frame)
		var h jute.RequestHeader
		if h.Decode(r) != nil {
			return
		}
		code, body := f.answer(s, h, frame[jute.RequestHeaderSize:])
		f.mu.Lock()
		out := jute.AppendFrame(nil, &jute.ReplyHeader{Xid: h.Xid, Zxid: f.zxid, Err: code}, body)
		f.mu.Unlock()
		if _, err := nc.Write(out); err != nil || h.Type == jute.OpCloseSession {
			return
		}
	}
}

// answer runs one request and returns its reply's code and body (nil:
// none).
func (f *fakeZK) answer(s *fakeSession, h jute.RequestHeader, b []byte) (jute.Code, jute.Encoder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch h.Type {
	case jute.OpPing, jute.OpAuth, jute.OpCloseSession:
		return jute.CodeOK, nil
	case jute.OpSync:
		var req jute.SyncRequest
		if jute.Unmarshal(b, &req) != nil {
			return jute.CodeMarshallingError, nil
		}
		return jute.CodeOK, &jute.SyncResponse{Path: req.Path}
	case jute.OpGetData:
		var req jute.GetDataRequest
		if jute.Unmarshal(b, &req) != nil {
			return jute.CodeMarshallingError, nil
		}
		st, ok := f.nodes[req.Path]
		if !ok {
			return jute.CodeNoNode, nil
		}
		return jute.CodeOK, &jute.GetDataResponse{Data: f.data[req.Path], Stat: *st}
	case jute.OpSetData, jute.OpCreate:
		if f.xidCache {
			switch {
			case s.lastXid != 0 && h.Xid == s.lastXid:
				return s.lastErr, s.last
			case h.Xid < s.lastXid:
				return jute.CodeSystemError, nil
			}
		}
		code, body := f.write(h.Type, b)
		s.lastXid, s.lastErr, s.last = h.Xid, code, body
		return code, body
	}
	return jute.CodeUnimplemented, nil
}

// write applies a setData or a create and returns its reply.
func (f *fakeZK) write(op jute.OpCode, b []byte) (jute.Code, jute.Encoder) {
	if op == jute.OpSetData {
		var req jute.SetDataRequest
		if jute.Unmarshal(b, &req) != nil {
			return jute.CodeMarshallingError, nil
		}
		st, ok := f.nodes[req.Path]
		switch {
		case !ok:
			return jute.CodeNoNode, nil
		case req.Version != -1 && req.Version != st.Version:
			return jute.CodeBadVersion, nil
		}
		f.zxid++
		st.Version++
		st.Mzxid = f.zxid
		f.data[req.Path] = req.Data
		return jute.CodeOK, &jute.SetDataResponse{Stat: *st}
	}
	var req jute.CreateRequest
	if jute.Unmarshal(b, &req) != nil {
		return jute.CodeMarshallingError, nil
	}
	if !strings.HasPrefix(req.Path, zkCreateDir+"/") {
		return jute.CodeNoNode, nil
	}
	path := req.Path
	if req.Flags.IsSequential() {
		path += fmt.Sprintf("%010d", f.created)
	}
	if _, ok := f.nodes[path]; ok {
		return jute.CodeNodeExists, nil
	}
	f.zxid++
	f.created++
	f.nodes[path] = &jute.Stat{Czxid: f.zxid, Mzxid: f.zxid}
	f.data[path] = req.Data
	return jute.CodeOK, &jute.CreateResponse{Path: path}
}
