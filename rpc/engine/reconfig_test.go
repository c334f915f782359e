package engine

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
)

// TestCheckReconfig: what a reconfig is refused for before anyone asks
// whether the caller may make it, with ZooKeeper's code, in ZooKeeper's
// order (the version first), against the membership /zookeeper/config
// records: voters 1, 2, 3 and observer 4, version 1.
func TestCheckReconfig(t *testing.T) {
	server := func(id, addr string, s raft.ServerSuffrage) raft.Server {
		return raft.Server{Suffrage: s, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
	}
	f := fsm.New(fsm.Options{})
	f.ApplyBatch([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{
		server("1", "h1:2888", raft.Voter), server("2", "h2:2888", raft.Voter), server("3", "h3:2888", raft.Voter), server("4", "h4:2888", raft.Nonvoter),
	}})}})
	const ok = Code(0)
	for _, c := range []struct {
		name string
		r    Reconfig
		want Code
	}{
		{"nothing", Reconfig{FromConfig: -1}, ok},
		{"a line that is none", Reconfig{Joining: "some thing", FromConfig: -1}, BadArguments},
		{"a version from the future", Reconfig{Leaving: "3", FromConfig: 0x100000000}, BadVersion},
		{"the version before the line", Reconfig{Joining: "some thing", FromConfig: 99}, BadVersion},
		{"the current version", Reconfig{Leaving: "3", FromConfig: 1}, ok},
		{"a new member list", Reconfig{NewMembers: "server.1=h1:2888:3888", FromConfig: -1}, BadArguments},
		{"a server joining", Reconfig{Joining: "server.100=0.0.0.0:2890:3890:observer;0.0.0.0:2190", FromConfig: -1}, ok},
		{"two joining", Reconfig{Joining: "server.5=h5:1:2;2181, server.6=h6:1:2:observer", FromConfig: -1}, ok},
		{"a member joining", Reconfig{Joining: "server.1=h9:2888:3888", FromConfig: -1}, BadArguments},
		{"a member's peer address", Reconfig{Joining: "server.5=h1:2888:3888", FromConfig: -1}, BadArguments},
		{"one peer address twice", Reconfig{Joining: "server.5=h5:1:2,server.6=h5:1:3", FromConfig: -1}, BadArguments},
		{"one id twice", Reconfig{Joining: "server.5=h5:1:2,server.5=h6:1:2", FromConfig: -1}, BadArguments},
		{"an election port like the peer port", Reconfig{Joining: "server.5=h5:1:1", FromConfig: -1}, BadArguments},
		{"no member leaving", Reconfig{Leaving: "9", FromConfig: -1}, BadArguments},
		{"an observer leaving", Reconfig{Leaving: "4", FromConfig: -1}, ok},
		{"spaces, repeats and empty items", Reconfig{Leaving: " 2 , ,2,", FromConfig: -1}, ok},
		{"every voter leaving", Reconfig{Leaving: "1,2,3", FromConfig: -1}, BadArguments},
		{"every voter leaving, one joining", Reconfig{Leaving: "1,2,3", Joining: "server.5=h5:1:2", FromConfig: -1}, ok},
		{"every voter leaving, an observer joining", Reconfig{Leaving: "1,2,3", Joining: "server.5=h5:1:2:observer", FromConfig: -1}, BadArguments},
	} {
		var err error
		f.Read(func(v fsm.View) { err = checkReconfig(v, c.r) })
		got := ok
		var ce *Error
		if errors.As(err, &ce) {
			got = ce.Code
		} else if err != nil {
			t.Errorf("%s: %v, not an *Error", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %v (%v), want %v", c.name, got, err, c.want)
		}
	}
	// A state from before /zookeeper/config recorded the membership: the
	// leader checks it when it makes the change.
	var err error
	fsm.New(fsm.Options{}).Read(func(v fsm.View) { err = checkReconfig(v, Reconfig{Leaving: "9", FromConfig: -1}) })
	if err != nil {
		t.Errorf("no membership recorded: %v", err)
	}
}
