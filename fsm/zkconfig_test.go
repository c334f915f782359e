package fsm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

func configLog(index uint64, servers ...raft.Server) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{Servers: servers})}
}

func clientAddr(t *testing.T, index uint64, id, addr string) *raft.Log {
	l := logOf(t, &cmdpb.Command{TimeMs: int64(index), Cmd: &cmdpb.Command_ClientAddress{ClientAddress: &cmdpb.ClientAddress{ServerId: id, Address: addr}}})[0]
	l.Index = index
	return l
}

func voter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

// TestZooKeeperConfig: /zookeeper/config is replicated state: rendered from
// each configuration entry applied and each member's registered client
// address, the same on every server at the same index, with ZooKeeper's
// election port that differs from the quorum port (0), mzxid and
// "version=" the index of its last change, version -1 as ZooKeeper's; a
// registration that changes nothing, or names no member, changes nothing;
// a member that leaves takes its address along; a snapshot keeps it.
func TestZooKeeperConfig(t *testing.T) {
	logs := []*raft.Log{
		configLog(1, voter("1", "h1:2888"), voter("2", "h2:2888"), voter("10", "h10:2888")),
		clientAddr(t, 2, "2", "h2:2181"),
		clientAddr(t, 3, "1", "h1:2181"),
		clientAddr(t, 4, "1", "h1:2181"), // the same again
		clientAddr(t, 5, "9", "h9:2181"), // no member
		clientAddr(t, 6, "10", "h10:2181"),
		configLog(7, voter("1", "h1:2888"), voter("10", "h10:2888"), raft.Server{Suffrage: raft.Nonvoter, ID: "3", Address: "[::1]:2888"}),
		clientAddr(t, 8, "3", "[::1]:2181"),
		configLog(9, voter("1", "h1:2888"), voter("10", "h10:2888"), voter("3", "[::1]:2888"), voter("2", "h2:2888")),
	}
	want := map[uint64]string{
		1: "server.1=h1:2888:0:participant\nserver.2=h2:2888:0:participant\nserver.10=h10:2888:0:participant\nversion=1",
		2: "server.1=h1:2888:0:participant\nserver.2=h2:2888:0:participant;h2:2181\nserver.10=h10:2888:0:participant\nversion=2",
		3: "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant;h2:2181\nserver.10=h10:2888:0:participant\nversion=3",
		6: "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant;h2:2181\nserver.10=h10:2888:0:participant;h10:2181\nversion=6",
		7: "server.1=h1:2888:0:participant;h1:2181\nserver.3=[::1]:2888:0:observer\nserver.10=h10:2888:0:participant;h10:2181\nversion=7",
		8: "server.1=h1:2888:0:participant;h1:2181\nserver.3=[::1]:2888:0:observer;[::1]:2181\nserver.10=h10:2888:0:participant;h10:2181\nversion=8",
		9: "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant\nserver.3=[::1]:2888:0:participant;[::1]:2181\nserver.10=h10:2888:0:participant;h10:2181\nversion=9",
	}
	f := New(Options{})
	var events []tree.Event
	f.SetObserver(observerFunc(func(a *Applied) { events = append(events, a.Events...) }))
	for _, l := range logs {
		events = nil
		f.ApplyBatch([]*raft.Log{l})
		w := ""
		for i := l.Index; w == ""; i-- {
			w = want[i] // the last change's
		}
		f.Read(func(v View) {
			data, st, err := v.Tree.Get(tree.ConfigPath)
			if err != nil || string(data) != w {
				t.Fatalf("after entry %d: %q %v, want %q", l.Index, data, err, w)
			}
			if st.Version != -1 || st.Aversion != -1 {
				t.Errorf("after entry %d: %+v", l.Index, st)
			}
		})
		changed := len(events) == 1 && events[0].Type == tree.EventNodeDataChanged && events[0].Path == tree.ConfigPath && events[0].Zxid == int64(l.Index)
		if _, listed := want[l.Index]; listed != changed || (!listed && len(events) != 0) {
			t.Errorf("entry %d: events %+v", l.Index, events)
		}
	}
	if addr, member := ClientAddressOf(f.tree, "2"); addr != "" || !member {
		t.Errorf("server 2 came back: %q %v, want no address yet", addr, member)
	}
	g := New(Options{})
	for _, l := range logs {
		g.ApplyBatch([]*raft.Log{l})
	}
	if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, g)) {
		t.Fatal("the same log gives different states")
	}
	h := New(Options{})
	if err := h.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	h.Read(func(v View) {
		if data, _, _ := v.Tree.Get(tree.ConfigPath); string(data) != want[9] || !ConfigRecorded(v.Tree) {
			t.Fatalf("restored: %q", data)
		}
	})
	if ConfigRecorded(New(Options{}).tree) {
		t.Fatal("a new FSM records a membership")
	}
}

func memberSpec(t *testing.T, index uint64, id, addr, election string) *raft.Log {
	l := logOf(t, &cmdpb.Command{TimeMs: int64(index), Cmd: &cmdpb.Command_ClientAddress{ClientAddress: &cmdpb.ClientAddress{ServerId: id, Address: addr, ElectionPort: election}}})[0]
	l.Index = index
	return l
}

// TestZooKeeperConfigShowsWhatAReconfigGave: the election port and client
// address a reconfig gave for a member it added are shown back in its
// line, kept through its promotion and later configuration entries, and
// a snapshot; a registration replaces the client address and keeps the
// port; a port that is none changes nothing; a member that leaves and
// comes back has neither. A command without an election port is applied
// as before cluster level 2 (an empty address clears the listed one).
func TestZooKeeperConfigShowsWhatAReconfigGave(t *testing.T) {
	observer := func(id, addr string) raft.Server {
		return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
	}
	logs := []*raft.Log{
		configLog(1, voter("1", "h1:2888"), voter("2", "h2:2888")),
		clientAddr(t, 2, "1", "h1:2181"),
		configLog(3, voter("1", "h1:2888"), voter("2", "h2:2888"), observer("100", "0.0.0.0:2890")),
		memberSpec(t, 4, "100", "0.0.0.0:2190", "3890"),
		configLog(5, voter("1", "h1:2888"), voter("2", "h2:2888"), voter("100", "0.0.0.0:2890")),
		memberSpec(t, 6, "1", "", "3888"),
		clientAddr(t, 7, "100", "127.0.0.9:2190"),
		memberSpec(t, 8, "100", "", "not a port"),
		memberSpec(t, 9, "100", "", "3890"), // the same again
		clientAddr(t, 10, "1", ""),
		configLog(11, voter("1", "h1:2888"), voter("2", "h2:2888")),
		configLog(12, voter("1", "h1:2888"), voter("2", "h2:2888"), observer("100", "0.0.0.0:2890")),
	}
	want := map[uint64]string{
		1:  "server.1=h1:2888:0:participant\nserver.2=h2:2888:0:participant\nversion=1",
		2:  "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant\nversion=2",
		3:  "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:0:observer\nversion=3",
		4:  "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:3890:observer;0.0.0.0:2190\nversion=4",
		5:  "server.1=h1:2888:0:participant;h1:2181\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:3890:participant;0.0.0.0:2190\nversion=5",
		6:  "server.1=h1:2888:3888:participant;h1:2181\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:3890:participant;0.0.0.0:2190\nversion=6",
		7:  "server.1=h1:2888:3888:participant;h1:2181\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:3890:participant;127.0.0.9:2190\nversion=7",
		10: "server.1=h1:2888:3888:participant\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:3890:participant;127.0.0.9:2190\nversion=a",
		11: "server.1=h1:2888:3888:participant\nserver.2=h2:2888:0:participant\nversion=b",
		12: "server.1=h1:2888:3888:participant\nserver.2=h2:2888:0:participant\nserver.100=0.0.0.0:2890:0:observer\nversion=c",
	}
	f := New(Options{})
	for _, l := range logs {
		f.ApplyBatch([]*raft.Log{l})
		w := ""
		for i := l.Index; w == ""; i-- {
			w = want[i] // the last change's
		}
		f.Read(func(v View) {
			data, st, _ := v.Tree.Get(tree.ConfigPath)
			if string(data) != w || st.Version != -1 {
				t.Fatalf("after entry %d:\n%s\nwant\n%s", l.Index, data, w)
			}
		})
		if l.Index == 7 {
			// A snapshot keeps what the reconfig gave.
			g := New(Options{})
			if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
				t.Fatal(err)
			}
			g.ApplyBatch([]*raft.Log{configLog(100, voter("1", "h1:2888"), voter("2", "h2:2888"), voter("100", "0.0.0.0:2890"))})
			g.Read(func(v View) {
				if data, _, _ := v.Tree.Get(tree.ConfigPath); !strings.Contains(string(data), "server.100=0.0.0.0:2890:3890:participant;127.0.0.9:2190\n") {
					t.Fatalf("restored, then a configuration entry:\n%s", data)
				}
			})
		}
	}
}
