// Package cluster runs coordd clusters inside tests: in-process servers
// built exactly as cmd/coordd builds them (rpc.NewNode on 127.0.0.1 ports),
// with a peer network that can cut links, and real coordd processes for
// faults only a process shows (SIGKILL, SIGSTOP).
//
// It owns no server logic; it only starts, stops, partitions and observes
// servers, and holds the multi-node tests.
package cluster
