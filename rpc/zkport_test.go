package rpc

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestZooKeeperClientSmoke: go-zookeeper, unchanged, on the client port of
// one server: create, read, set, list, a watch, multi, delete.
func TestZooKeeperClientSmoke(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	conn, events, err := zk.Connect([]string{n.ClientAddr()}, 2*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.After(10 * time.Second)
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-deadline:
			t.Fatal("no session")
		}
	}
	path, err := conn.Create("/a", []byte("one"), 0, zk.WorldACL(zk.PermAll))
	if err != nil || path != "/a" {
		t.Fatalf("create: %q %v", path, err)
	}
	data, st, err := conn.Get("/a")
	if err != nil || string(data) != "one" || st.Version != 0 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	_, _, ch, err := conn.GetW("/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set("/a", []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/a" {
			t.Fatalf("watch: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	if _, err := conn.Set("/a", []byte("three"), 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("set with a stale version: %v", err)
	}
	kids, _, err := conn.Children("/")
	if err != nil || strings.Join(kids, ",") != "a,zookeeper" {
		t.Fatalf("children of /: %v %v", kids, err)
	}
	// A failed multi reports every op, as ZooKeeper does (Kafka and
	// Curator read them): the ops before the failing one ok-rolled-back,
	// the failing one its error, the rest RuntimeInconsistency;
	// go-zookeeper returns the first error among them.
	res, err := conn.Multi(
		&zk.CreateRequest{Path: "/b", Acl: zk.WorldACL(zk.PermAll)},
		&zk.CheckVersionRequest{Path: "/a", Version: 99},
		&zk.SetDataRequest{Path: "/a", Version: -1})
	if !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("failed multi: %v", err)
	}
	// (go-zookeeper has no sentinel for RuntimeInconsistency, -2.)
	if len(res) != 3 || res[0].Error != nil || !errors.Is(res[1].Error, zk.ErrBadVersion) ||
		res[2].Error == nil || res[2].Error.Error() != "unknown error: -2" {
		t.Fatalf("failed multi's results: %+v", res)
	}
	if ok, _, err := conn.Exists("/b"); ok || err != nil {
		t.Fatalf("/b after a failed multi: %v %v", ok, err)
	}
	if err := conn.Delete("/a", -1); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := conn.Exists("/a"); ok || err != nil {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
}

// TestFourLetterWords: ruok and srvr on the client port; a word not
// allowed gets ZooKeeper's answer.
func TestFourLetterWords(t *testing.T) {
	n := newTestNodeWith(t, "1", func(c *Config) { c.FourLetterWords = []string{"ruok", "srvr"} })
	waitLeader(t, n)
	ask := func(word string) string {
		c, err := net.Dial("tcp", n.ClientAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(word)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := ask("ruok"); got != "imok" {
		t.Fatalf("ruok: %q", got)
	}
	if got := ask("srvr"); !strings.HasPrefix(got, "Zookeeper version: 3.8.4-coordd-dev") || !strings.Contains(got, "Mode: standalone\n") {
		t.Fatalf("srvr: %q", got)
	}
	if got := ask("mntr"); got != "mntr is not executed because it is not in the whitelist.\n" {
		t.Fatalf("mntr, not allowed: %q", got)
	}
}
