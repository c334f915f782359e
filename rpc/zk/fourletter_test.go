package zk

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
)

var testStats = Stats{
	Version: "v9", Mode: "leader", Zxid: 0x2a, Znodes: 17, Ephemerals: 3, DataSize: 1234,
	Watches: 5, WatchedPaths: 4, WatchingSessions: 2, Followers: 2, SyncedFollowers: 1,
	Connections: 1, GlobalSessions: 6, Received: 2, Sent: 2, Outstanding: 0,
	MinLatency: time.Millisecond, AvgLatency: 1500 * time.Microsecond, MaxLatency: 3 * time.Millisecond,
	Config:       [][2]string{{"clientPort", "2181"}, {"dataDir", "/var/lib/coordd"}},
	DataDirBytes: 4096, OpenFiles: 40, MaxFiles: 1024,
}

// TestFourLetterWordsWithAClient: the words that report connections list
// a connected client as ZooKeeper does; the others report the server's
// figures (Stats: the server counts the requests of both protocols), each
// in ZooKeeper's format.
func TestFourLetterWordsWithAClient(t *testing.T) {
	s := newTestServer(t, func() Stats { return testStats })
	z := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	z.call(jute.OpGetData, &jute.GetDataRequest{Path: "/"})
	local := z.c.LocalAddr().String()

	// The connect request and one request received; the connect response
	// and one reply sent, as ZooKeeper counts them. The server counts a
	// reply once written, so it may count it just after the client read
	// it: ask until it has.
	re := regexp.MustCompile(`^ /` + regexp.QuoteMeta(local) + `\[1\]\(queued=0,recved=2,sent=2,sid=0x([0-9a-f]+),lop=GETD,est=\d+,to=4000\)\n\n$`)
	var cons string
	for deadline := time.Now().Add(10 * time.Second); ; {
		cons = s.ask(t, "cons")
		if re.MatchString(cons) || time.Now().After(deadline) {
			break
		}
	}
	m := re.FindStringSubmatch(cons)
	if m == nil {
		t.Fatalf("cons: %q", cons)
	}
	if m[1] != fmt.Sprintf("%x", z.cr.SessionID) {
		t.Errorf("cons: sid=%s, want %x", m[1], z.cr.SessionID)
	}

	stat := s.ask(t, "stat")
	for _, want := range []string{
		"Zookeeper version: 3.8.4-coordd-v9, built on coordd\n",
		"Clients:\n /" + local + "[1](queued=0,recved=2,sent=2)\n\n",
		"Connections: 1\n", "Outstanding: 0\n", "Zxid: 0x2a\n", "Mode: leader\n", "Node count: 17\n",
	} {
		if !strings.Contains(stat, want) {
			t.Errorf("stat lacks %q:\n%s", want, stat)
		}
	}
	if !strings.Contains(stat, "\nLatency min/avg/max: 1/1.5000/3\nReceived: 2\nSent: 2\n") {
		t.Errorf("stat's figures:\n%s", stat)
	}
	if srvr := s.ask(t, "srvr"); strings.Contains(srvr, "Clients:") {
		t.Errorf("srvr lists clients:\n%s", srvr)
	}

	mntr := s.ask(t, "mntr")
	keys := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(mntr, "\n"), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("mntr line %q is not key<TAB>value", line)
		}
		keys[k] = v
	}
	for k, v := range map[string]string{
		"zk_version": "3.8.4-coordd-v9", "zk_server_state": "leader", "zk_num_alive_connections": "1",
		"zk_outstanding_requests": "0", "zk_znode_count": "17", "zk_watch_count": "5",
		"zk_ephemerals_count": "3", "zk_approximate_data_size": "1234",
		"zk_open_file_descriptor_count": "40", "zk_max_file_descriptor_count": "1024",
		"zk_followers": "2", "zk_synced_followers": "1", "zk_pending_syncs": "0",
		"zk_packets_received": "2", "zk_packets_sent": "2", "zk_global_sessions": "6", "zk_local_sessions": "1",
		"zk_min_latency": "1", "zk_avg_latency": "1.5000", "zk_max_latency": "3",
	} {
		if keys[k] != v {
			t.Errorf("mntr %s = %q, want %q", k, keys[k], v)
		}
	}
	for _, k := range []string{"zk_uptime"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("mntr lacks %s", k)
		}
	}

	for word, want := range map[string]string{
		"envi": "Environment:\nzookeeper.version=3.8.4-coordd-v9, built on coordd\ncoordd.version=v9\ncoordd.clientPort=2181\ncoordd.dataDir=/var/lib/coordd\n",
		"conf": "clientPort=2181\ndataDir=/var/lib/coordd\n",
		"wchs": "2 connections watching 4 paths\nTotal watches:5\n",
		"isro": "rw",
		"dirs": "datadir_size: 4096\nlogdir_size: 0\n",
		"ruok": "imok",
	} {
		if got := s.ask(t, word); got != want {
			t.Errorf("%s: %q, want %q", word, got, want)
		}
	}
}

// TestFourLetterWordsFollower: a follower's mntr has no leader figures.
func TestFourLetterWordsFollower(t *testing.T) {
	st := testStats
	st.Mode = "follower"
	s := newTestServer(t, func() Stats { return st })
	mntr := s.ask(t, "mntr")
	if !strings.Contains(mntr, "zk_server_state\tfollower\n") || strings.Contains(mntr, "zk_followers") {
		t.Fatalf("follower's mntr:\n%s", mntr)
	}
	if got := s.ask(t, "cons"); got != "\n" {
		t.Fatalf("cons with no client: %q", got)
	}
}

// TestWireReplies: requests over a connection get ZooKeeper's bytes:
// exists of an absent node, a failed multi (header error 0, per-op
// results), a multi with an op refused before the engine.
func TestWireReplies(t *testing.T) {
	s := newTestServer(t, nil)
	z := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	acl := jute.OpenACL()
	hdr := func(f []byte) jute.ReplyHeader {
		var h jute.ReplyHeader
		if err := h.Decode(jute.NewReader(f)); err != nil {
			t.Fatal(err)
		}
		return h
	}

	f := z.call(jute.OpExists, &jute.ExistsRequest{Path: "/absent"})
	if h := hdr(f); h.Err != jute.CodeNoNode || len(f) != jute.ReplyHeaderSize {
		t.Fatalf("exists of an absent node: %x", f)
	}
	if h := hdr(z.call(jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: acl})); h.Err != jute.CodeOK {
		t.Fatalf("create /a: %v", h.Err)
	}

	f = z.call(jute.OpMulti, &jute.MultiRequest{Ops: []jute.Op{
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/b", ACL: acl}},
		{Type: jute.OpCheck, Request: &jute.CheckVersionRequest{Path: "/a", Version: 9}},
		{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/nope", Version: -1}},
	}})
	h := hdr(f)
	want := jute.AppendFrame(nil, &jute.ReplyHeader{Xid: z.xid, Zxid: h.Zxid},
		&jute.MultiResponse{Results: jute.FailedMultiResults(3, 1, jute.CodeBadVersion)})[4:]
	if !bytes.Equal(f, want) {
		t.Fatalf("failed multi\n got %x\nwant %x", f, want)
	}

	f = z.call(jute.OpMulti, &jute.MultiRequest{Ops: []jute.Op{
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/c", ACL: acl}},
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/d"}},
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/e", ACL: acl}},
	}})
	h = hdr(f)
	want = jute.AppendFrame(nil, &jute.ReplyHeader{Xid: z.xid, Zxid: h.Zxid},
		&jute.MultiResponse{Results: jute.FailedMultiResults(3, 1, jute.CodeInvalidACL)})[4:]
	if !bytes.Equal(f, want) {
		t.Fatalf("multi with an op without ACL\n got %x\nwant %x", f, want)
	}
	f = z.call(jute.OpExists, &jute.ExistsRequest{Path: "/c"})
	if h := hdr(f); h.Err != jute.CodeNoNode {
		t.Fatalf("/c after a refused multi: %v", h.Err)
	}
}
