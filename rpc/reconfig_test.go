package rpc

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// superDigest is the digest of super:secret.
const superDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4="

// reconfigConfig is a server's configuration for these tests: the super
// user is super:secret, and a session may last 10 s. A reconfig holds the
// session's later requests, go-zookeeper's pings too, until it is done
// (adding a server takes a few round trips to the leader and a read
// index), and go-zookeeper gives up on a connection that has answered
// nothing for two thirds of the session's timeout.
func reconfigConfig(c *Config) {
	c.SuperDigest = superDigest
	c.MaxSessionTimeout = 10 * time.Second
}

// gozk opens a go-zookeeper session on addr, authenticated as super when
// asked, and waits until it has one.
func gozk(t *testing.T, addr string, super bool) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(10 * time.Second)
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-deadline:
			t.Fatal("no session")
		}
	}
	if super {
		if err := conn.AddAuth("digest", []byte("super:secret")); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// zkConfig reads /zookeeper/config on conn's server, after a sync.
func zkConfig(t *testing.T, conn *zk.Conn) (string, *zk.Stat) {
	t.Helper()
	if _, err := conn.Sync("/zookeeper/config"); err != nil {
		t.Fatal(err)
	}
	data, st, err := conn.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	return string(data), st
}

// TestZKReconfigChecksBeforeRights: a reconfig from a client without the
// rights is checked first, in ZooKeeper's order, and refused for what is
// wrong with it: a line that is none is BadArguments, a version from the
// future BadVersion (before the line), an id that is no member
// BadArguments; NoAuth is only for a request that could be made. Nothing
// changes. (go-zookeeper, as kazoo and ZooKeeper 3.8 in make compat.)
func TestZKReconfigChecksBeforeRights(t *testing.T) {
	nodes, leader := threeNodes(t, reconfigConfig)
	waitClientAddrs(t, nodes...)
	conn := gozk(t, leader.ClientAddr(), false)
	before, st := zkConfig(t, conn)
	future := st.Mzxid + 1000
	for _, c := range []struct {
		name             string
		joining, leaving []string
		version          int64
		want             error
	}{
		{"a line that is none", []string{"some thing"}, nil, -1, zk.ErrBadArguments},
		{"a version from the future", nil, []string{"3"}, future, zk.ErrBadVersion},
		{"a line that is none, from the future", []string{"some thing"}, nil, future, zk.ErrBadVersion},
		{"the same two ports", []string{"server.100=0.0.0.0:2890:2890:observer;2190"}, nil, -1, zk.ErrBadArguments},
		{"no member leaving", nil, []string{"99"}, -1, zk.ErrBadArguments},
		{"every voter leaving", nil, []string{"1", "2", "3"}, -1, zk.ErrBadArguments},
		{"a member leaving", nil, []string{"3"}, -1, zk.ErrNoAuth},
		{"a member leaving, at this version", nil, []string{"3"}, st.Mzxid, zk.ErrNoAuth},
		{"a server joining", []string{"server.100=0.0.0.0:2890:3890:observer;0.0.0.0:2190"}, nil, -1, zk.ErrNoAuth},
	} {
		if _, err := conn.IncrementalReconfig(c.joining, c.leaving, c.version); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := conn.Reconfig([]string{"server.1=" + leader.cfg.PeerAddr + ":3888"}, -1); !errors.Is(err, zk.ErrBadArguments) {
		t.Errorf("a new member list: %v, want %v", err, zk.ErrBadArguments)
	}
	if after, _ := zkConfig(t, conn); after != before {
		t.Fatalf("the configuration changed:\n%s\nwas\n%s", after, before)
	}
}

// TestZKReconfigShowsTheServerAsGiven: a server a reconfig adds is shown in
// the new configuration as the reconfig gave it, with its election port
// (once every server records one: cluster level 2) and its client
// address, on every server; the leader does not replace that client
// address with one that agrees with it. Before, the line was
// server.100=0.0.0.0:P1:0:observer, the client address dropped.
func TestZKReconfigShowsTheServerAsGiven(t *testing.T) {
	nodes, leader := threeNodes(t, reconfigConfig)
	waitClientAddrs(t, nodes...)
	waitLevel(t, nodes...)
	var follower *Node
	for _, n := range nodes {
		if n != leader {
			follower = n
		}
	}
	// Asked of a follower: the answer shows the change there too.
	conn := gozk(t, follower.ClientAddr(), true)
	p1, p2, p3 := port(t, freeAddr(t)), port(t, freeAddr(t)), port(t, freeAddr(t))
	line := fmt.Sprintf("server.100=0.0.0.0:%s:%s:observer;0.0.0.0:%s", p1, p2, p3)
	st, err := conn.IncrementalReconfig([]string{line}, nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, got, err := conn.Get("/zookeeper/config")
	if err != nil || got.Mzxid != st.Mzxid || !strings.Contains(string(data), "\n"+line+"\n") {
		t.Fatalf("after adding %s (version %x): %v, version %x\n%s", line, st.Mzxid, err, got.Mzxid, data)
	}
	for _, n := range nodes {
		if text, _ := zkConfig(t, gozk(t, n.ClientAddr(), false)); text != string(data) {
			t.Fatalf("server %s shows\n%s\nnot\n%s", n.ID(), text, data)
		}
	}
	// A wildcard client address agrees with the server's own (the same
	// port): the leader keeps what was given.
	if !clientAddrAgrees("0.0.0.0:"+p3, "127.0.0.9:"+p3) || clientAddrAgrees("0.0.0.0:"+p3, "127.0.0.9:1") || clientAddrAgrees("127.0.0.8:"+p3, "127.0.0.9:"+p3) {
		t.Fatal("clientAddrAgrees")
	}
	if _, err := conn.IncrementalReconfig(nil, []string{"100"}, st.Mzxid); err != nil {
		t.Fatal(err)
	}
	if text, _ := zkConfig(t, conn); strings.Contains(text, "server.100=") {
		t.Fatalf("server 100 left, and is still shown:\n%s", text)
	}
}

// TestZKReconfigShowsTheClientAddressBeforeLevel2: while a server of the
// cluster may not record an election port (before cluster level 2), a
// reconfig's server is shown with the client address it gave, and the
// election port 0 as before.
func TestZKReconfigShowsTheClientAddressBeforeLevel2(t *testing.T) {
	// A server that reports level 1 keeps the cluster there.
	n := newTestNodeWith(t, "1", reconfigConfig, func(c *Config) { c.reportLevel = 1 })
	waitLeader(t, n)
	waitClientAddrs(t, n)
	conn := gozk(t, n.ClientAddr(), true)
	p1, p3 := port(t, freeAddr(t)), port(t, freeAddr(t))
	if _, err := conn.IncrementalReconfig([]string{fmt.Sprintf("server.100=0.0.0.0:%s:3888:observer;%s", p1, p3)}, nil, -1); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("\nserver.100=0.0.0.0:%s:0:observer;0.0.0.0:%s\n", p1, p3)
	if text, _ := zkConfig(t, conn); !strings.Contains(text, want) {
		t.Fatalf("want a line %q in\n%s", want, text)
	}
}

// port returns the port of host:port.
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
