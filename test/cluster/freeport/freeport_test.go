package freeport

import (
	"net"
	"testing"
)

// Addresses handed out are distinct, on 127.0.0.1, below the ephemeral
// range, and free: a server can listen on each.
func TestAddrDistinctAndFree(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		a := Addr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" || port < "20000" || len(port) != 5 || port > "31999" {
			t.Fatalf("Addr returned %q", a)
		}
	}
	for a := range seen {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			// Another process may have taken it since; one is enough.
			continue
		}
		ln.Close()
		return
	}
	t.Fatal("not one of 500 addresses handed out could be listened on")
}
