package fsm

import (
	"errors"
	"strings"
	"testing"
)

// TestParseServerSpec: a reconfig's server lines as ZooKeeper 3.8 reads
// them (the cases probed on it), with coordd's additions: no election
// port, ids that are names.
func TestParseServerSpec(t *testing.T) {
	for _, c := range []struct {
		line string
		want ServerSpec
	}{
		{"server.100=0.0.0.0:2890:3890:observer;0.0.0.0:2190",
			ServerSpec{ID: "100", PeerAddress: "0.0.0.0:2890", ElectionPort: "3890", Observer: true, ClientAddress: "0.0.0.0:2190"}},
		// A bare client port is 0.0.0.0's, as ZooKeeper shows it.
		{"server.101=127.0.0.9:2891:3891:observer;2191",
			ServerSpec{ID: "101", PeerAddress: "127.0.0.9:2891", ElectionPort: "3891", Observer: true, ClientAddress: "0.0.0.0:2191"}},
		// No role: a participant.
		{"server.102=localhost:2892:3892;127.0.0.10:2192",
			ServerSpec{ID: "102", PeerAddress: "localhost:2892", ElectionPort: "3892", ClientAddress: "127.0.0.10:2192"}},
		{"server.106=[::1]:2896:3896:OBSERVER;[::1]:2196",
			ServerSpec{ID: "106", PeerAddress: "[::1]:2896", ElectionPort: "3896", Observer: true, ClientAddress: "[::1]:2196"}},
		{"  server.7 = h:02888:3888:Participant  ", ServerSpec{ID: "7", PeerAddress: "h:2888", ElectionPort: "3888"}},
		// coordd's additions: no election port, a name for an id, no client.
		{"server.4=h:2888:participant", ServerSpec{ID: "4", PeerAddress: "h:2888"}},
		{"server.4=h:2888;h:2181", ServerSpec{ID: "4", PeerAddress: "h:2888", ClientAddress: "h:2181"}},
		{"server.db-2=h:2888:0:observer", ServerSpec{ID: "db-2", PeerAddress: "h:2888", ElectionPort: "0", Observer: true}},
		// What /zookeeper/config shows reads back.
		{"server.3=[::1]:2888:0:observer;[::1]:2181", ServerSpec{ID: "3", PeerAddress: "[::1]:2888", ElectionPort: "0", Observer: true, ClientAddress: "[::1]:2181"}},
	} {
		got, err := ParseServerSpec(c.line)
		if err != nil || got != c.want {
			t.Errorf("ParseServerSpec(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, line := range []string{
		"some thing",       // kazoo's reconfig(joining='some thing')
		"server.100",       // no '='
		"server.100=",      // nothing after it
		"100=h:1:2",        // not server.ID
		"server.=h:1:2",    // no id
		"server.1=h:1:2=3", // two '='
		"server.103 = 127.0.0.11:2893:3893:observer ; 2193", // spaces inside (ZooKeeper: BadArguments)
		"server.100=0.0.0.0:2890:2890:observer;2190",        // the same two ports
		"server.100=0.0.0.0:2890:3890:boss;2190",            // no such role
		"server.100=h:1:2:3:observer",                       // a port too many
		"server.100=h",                                      // no port
		"server.100=:2888:3888",                             // no host
		"server.100=h:0:3888",                               // peer port 0
		"server.100=h:65536:3888",                           // out of range
		"server.100=h:-1:3888",
		"server.100=h:+80:3888",
		"server.100=h:x:3888",
		"server.100=h:2888:3888;h:0",      // client port 0
		"server.100=h:2888:3888;h:2181:1", // client HOST:PORT:PORT
		"server.100=h:2888:3888;",         // empty client part
		"server.100=h:2888:3888;a;b",      // two ';'
		"server.100=a:1:2|b:1:2",          // several addresses
		"server.100=[::1:2888:3888",       // unclosed bracket
		"server.100=[nonsense]:2888:3888",
		"server.100=[::1]2888:3888",
		"server.1,2=h:1:2",
		"server.1=h:1:2,server.2=h:3:4", // one line at a time
	} {
		if got, err := ParseServerSpec(line); !errors.Is(err, ErrBadServerSpec) {
			t.Errorf("ParseServerSpec(%q) = %+v, %v; want ErrBadServerSpec", line, got, err)
		}
	}
}

// FuzzParseServerSpec: no line panics the parser, and what it accepts
// renders into a line of /zookeeper/config that reads back the same.
func FuzzParseServerSpec(f *testing.F) {
	for _, s := range []string{"server.100=0.0.0.0:2890:3890:observer;0.0.0.0:2190", "server.1=[::1]:1:2;3", "server.a=h:1", "some thing"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		spec, err := ParseServerSpec(line)
		if err != nil {
			return
		}
		role := "participant"
		if spec.Observer {
			role = "observer"
		}
		text := renderConfig([]configServer{{id: spec.ID, addr: spec.PeerAddress, election: spec.ElectionPort, role: role, client: spec.ClientAddress}}, 1)
		first, _, _ := strings.Cut(string(text), "\n")
		again, err := ParseServerSpec(first)
		if spec.ElectionPort == "" {
			spec.ElectionPort = ElectionPort
		}
		if err != nil || again != spec {
			t.Fatalf("%q renders as %q, which reads back as %+v, %v", line, first, again, err)
		}
	})
}
