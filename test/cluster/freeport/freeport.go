// Package freeport hands tests 127.0.0.1 addresses to start servers on. A
// server's address is chosen before it listens (a cluster's members must
// know each other's), so a test cannot simply listen on port 0; and a port
// that the kernel gave one probe and took back may be given to the next, so
// two addresses picked that way for one cluster can be the same (Raft then
// refuses its configuration: "found duplicate address"). Addr never returns
// a port twice in a process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// handedOut holds the ports Addr has returned in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// Addr returns an unused 127.0.0.1 address whose port lies below the
// kernel's ephemeral range (32768 and up on Linux), so that no outgoing
// connection can be holding it when a stopped server binds it again. It
// never returns a port it returned before in this process (until most of
// the range has been handed out).
func Addr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil || len(handedOut.ports) > 9000 {
		handedOut.ports = map[int]bool{}
	}
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut.ports[port] = true
		return ln.Addr().String()
	}
	t.Fatal("no free port in 20000-31999 on 127.0.0.1")
	return ""
}
