package console_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/cmd/coordd/console"
	"github.com/coordd/coordd/rpc"
	"github.com/coordd/coordd/test/cluster"
)

// cuttable is a go-zookeeper dialer whose connections the test cuts, as a
// frozen process's: the session then expires.
type cuttable struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cuttable) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("cut by the test")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cuttable) cutAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		conn.Close()
	}
}

// TestLockDelayShown: a go-zookeeper Lock's holder whose session expires
// under --lock-delay stays the holder in the locks view, marked with the end
// of its lock-delay (though no node changed when its session ended), and
// its node's stat shows lockDelayUntil.
func TestLockDelayShown(t *testing.T) {
	e := newEnvWith(t, 1, cluster.Options{LockDelays: []rpc.LockDelay{{Prefix: "/locks", Delay: 5 * time.Second}}}, console.Config{}, 0)
	d := &cuttable{}
	zc, _, err := zk.Connect(e.c.Servers(), time.Second, zk.WithDialer(d.dial), zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	if err := zk.NewLock(zc, "/locks/job", zk.WorldACL(zk.PermAll)).Lock(); err != nil {
		t.Fatal(err)
	}
	s := e.stream(t, "/api/locks?path=/locks/job")
	var v locksView
	s.next(t, "contenders", &v, func() bool { return len(v.Holders) == 1 && v.Holders[0].LockDelayUntil == "" })
	session, node := v.Holders[0].Session, v.Holders[0].Node
	d.cutAll()
	s.next(t, "contenders", &v, func() bool { return len(v.Holders) == 1 && v.Holders[0].LockDelayUntil != "" })
	until, err := time.Parse(time.RFC3339Nano, v.Holders[0].LockDelayUntil)
	if err != nil || v.Holders[0].Session != session || time.Until(until) <= 0 || time.Until(until) > 5*time.Second {
		t.Fatalf("holder %+v (until %v, %v)", v.Holders[0], until, err)
	}
	var n nodeAnswer
	e.getJSON("/api/node?path=/locks/job/"+node, &n)
	found := false
	for _, f := range n.Stat {
		if f.Name == "lockDelayUntil" {
			found = true
			if !strings.HasPrefix(f.Title, strconv.FormatInt(until.UnixMilli(), 10)+" ms") || f.Value != until.UTC().Format("Mon Jan 02 15:04:05 MST 2006") {
				t.Errorf("lockDelayUntil %+v, want %v", f, until)
			}
		}
	}
	if !found {
		t.Errorf("no lockDelayUntil in the stat %+v", n.Stat)
	}
	// Once released, nobody holds.
	s.next(t, "contenders", &v, func() bool { return len(v.Holders) == 0 })
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
