package fsm

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// ZooKeeper's dynamic configuration, the data of /zookeeper/config, is
// replicated state, as in ZooKeeper: the FSM renders it into the tree
// whenever a Raft configuration entry applies, and when a member registers
// its client address (a ClientAddress command). So every server holds the
// same text at the same index, and its "version=" (and the node's mzxid)
// is the index of the entry that last changed it. Membership stays Raft's
// configuration: this is a record of it, which decides nothing.
//
// One line per member, in id order,
//
//	server.ID=PEERHOST:PEERPORT:ELECTIONPORT:ROLE;CLIENTHOST:CLIENTPORT
//
// then "version=" and the version in hex. ROLE is participant (a voter) or
// observer (a non-voter); the client part is missing until the member has
// registered its client address, or a reconfig that added it gave one. ZooKeeper's line has a quorum port and an
// election port, and its parser (QuorumPeer.QuorumServer, which Curator's
// EnsembleTracker runs on this text) refuses a line without both or with
// the two equal. coordd has one peer port, so the election port is 0, no
// port, unless the reconfig that added the member gave one: it is shown
// back as given (a ClientAddress command records it, and the client
// address given with it), and means nothing to coordd. No client uses
// either port: clients connect only to the client address.

// ElectionPort is the election port of a line of /zookeeper/config whose
// member was given none (see above).
const ElectionPort = "0"

// configServer is one line of the configuration; election is "" for
// ElectionPort.
type configServer struct {
	id, addr, election, role, client string
}

// renderConfig writes the configuration's text.
func renderConfig(servers []configServer, version int64) []byte {
	sort.SliceStable(servers, func(i, j int) bool { return idLess(servers[i].id, servers[j].id) })
	var b strings.Builder
	for _, s := range servers {
		election := s.election
		if election == "" {
			election = ElectionPort
		}
		fmt.Fprintf(&b, "server.%s=%s:%s:%s", s.id, s.addr, election, s.role)
		if s.client != "" {
			b.WriteString(";" + s.client)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "version=%x", version)
	return []byte(b.String())
}

// idLess orders server ids numerically when both are numbers (ZooKeeper's
// are), else bytewise.
func idLess(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return x < y
	}
	if (errA == nil) != (errB == nil) {
		return errA == nil
	}
	return a < b
}

// parseConfig reads the server lines of a configuration's text; lines that
// are not such (the version, or what a super user wrote) are skipped.
func parseConfig(data []byte) []configServer {
	var out []configServer
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(line, "=")
		id, isServer := strings.CutPrefix(key, "server.")
		if !ok || !isServer || id == "" {
			continue
		}
		server, client, _ := strings.Cut(value, ";")
		i := strings.LastIndexByte(server, ':')
		if i < 0 {
			continue
		}
		role := server[i+1:]
		if role != "participant" && role != "observer" {
			continue
		}
		j := strings.LastIndexByte(server[:i], ':')
		if j <= 0 {
			continue
		}
		election := server[j+1 : i]
		if election == ElectionPort {
			election = ""
		}
		out = append(out, configServer{id: id, addr: server[:j], election: election, role: role, client: client})
	}
	return out
}

// serversOf returns the members of a Raft configuration, with what the
// text listed of each already (by id): its client address and election
// port.
func serversOf(c raft.Configuration, listed map[string]configServer) []configServer {
	out := make([]configServer, 0, len(c.Servers))
	for _, s := range c.Servers {
		role := "participant"
		if s.Suffrage != raft.Voter {
			role = "observer"
		}
		was := listed[string(s.ID)]
		out = append(out, configServer{id: string(s.ID), addr: string(s.Address), election: was.election, role: role, client: was.client})
	}
	return out
}

// configText returns the tree's /zookeeper/config data.
func configText(t *tree.Tree) []byte {
	data, _, _ := t.Get(tree.ConfigPath)
	return data
}

// decodeConfiguration decodes a configuration entry; ok is false for one
// that does not decode (Raft itself decoded it before the FSM saw it, so
// only a test's entry can be garbage).
func decodeConfiguration(data []byte) (c raft.Configuration, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return raft.DecodeConfiguration(data), true
}

// applyConfiguration renders the configuration of a Raft configuration
// entry into /zookeeper/config, keeping the client addresses and election
// ports of the members that stay.
func (f *FSM) applyConfiguration(tx *tree.Tx, data []byte) {
	c, ok := decodeConfiguration(data)
	if !ok {
		f.halt(tx.Zxid, errors.New("a configuration entry that cannot be decoded"))
		return
	}
	f.tree.SetConfig(renderConfig(serversOf(c, listedOf(configText(f.tree))), tx.Zxid), tx)
}

// listedOf returns the members a configuration's text lists, by id.
func listedOf(data []byte) map[string]configServer {
	listed := map[string]configServer{}
	for _, s := range parseConfig(data) {
		listed[s.id] = s
	}
	return listed
}

// setClientAddress records a member's client address and election port in
// /zookeeper/config; nothing when the id is no member there or nothing
// changes. A command with an election port (cluster level 2) leaves the
// client address as it is when it has none; one without is applied as
// servers before level 2 apply it, so that they and later ones agree.
func (f *FSM) setClientAddress(tx *tree.Tx, c *cmdpb.ClientAddress) {
	// Only the leader proposes the command, from a spec it parsed; a port
	// that is none is ignored all the same, never written into the text.
	election, err := port(c.ElectionPort, 0)
	if election == ElectionPort {
		election = ""
	}
	servers := parseConfig(configText(f.tree))
	changed := false
	for i := range servers {
		s := &servers[i]
		if s.id != c.ServerId {
			continue
		}
		if s.client != c.Address && (c.Address != "" || c.ElectionPort == "") {
			s.client, changed = c.Address, true
		}
		if err == nil && s.election != election {
			s.election, changed = election, true
		}
	}
	if changed {
		f.tree.SetConfig(renderConfig(servers, tx.Zxid), tx)
	}
}

// ClientAddressOf returns the client address /zookeeper/config lists for
// server id, and whether id is a member there.
func ClientAddressOf(t *tree.Tree, id string) (string, bool) {
	for _, s := range parseConfig(configText(t)) {
		if s.id == id {
			return s.client, true
		}
	}
	return "", false
}

// ConfigServers returns the members /zookeeper/config lists, as it lists
// them (ElectionPort empty where it shows 0).
func ConfigServers(t *tree.Tree) []ServerSpec {
	var out []ServerSpec
	for _, s := range parseConfig(configText(t)) {
		out = append(out, ServerSpec{ID: s.id, PeerAddress: s.addr, ElectionPort: s.election, Observer: s.role == "observer", ClientAddress: s.client})
	}
	return out
}

// ConfigMembers returns the ids /zookeeper/config lists.
func ConfigMembers(t *tree.Tree) []string {
	var ids []string
	for _, s := range parseConfig(configText(t)) {
		ids = append(ids, s.id)
	}
	return ids
}

// ConfigRecorded reports whether /zookeeper/config records a membership:
// false in a state from a snapshot taken before the FSM recorded it, until
// a configuration entry applies.
func ConfigRecorded(t *tree.Tree) bool { return len(parseConfig(configText(t))) > 0 }

// resetConfig renders c into the tree's /zookeeper/config with no client
// address (a restored backup's new cluster: its members register theirs).
func resetConfig(t *tree.Tree, c raft.Configuration, tx *tree.Tx) {
	t.SetConfig(renderConfig(serversOf(c, nil), tx.Zxid), tx)
}
