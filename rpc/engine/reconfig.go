package engine

import (
	"fmt"
	"strings"

	"github.com/coordd/coordd/fsm"
)

// This file checks a reconfig before anything asks whether the caller may
// make it, in the order of ZooKeeper's PrepRequestProcessor: a request
// that could never be made is answered as such (BadVersion,
// BadArguments) whoever asks, and NoAuth is the answer only to a request
// that could (kazoo's reconfig(joining='some thing') without rights is
// BadArguments on ZooKeeper, not NoAuth).

// checkReconfig checks r against this server's state, in ZooKeeper's
// order: the configuration's version (BadVersion), a whole new membership
// (BadArguments: coordd takes incremental changes only), the joining
// servers' lines, then what the change would make of the membership that
// /zookeeper/config records (BadArguments): an id or peer address joining
// that a member has, an id leaving that no member has, no voter left. The
// leader checks the membership again when it makes the change (the record
// here may be a moment behind); ZooKeeper's own checks on the leader
// before the rights (ReconfigInProgress, NewConfigNoQuorum) come after
// them here. It returns an *Error, or nil.
func checkReconfig(v fsm.View, r Reconfig) error {
	bad := func(format string, args ...any) error {
		return &Error{Code: BadArguments, Message: "reconfig: " + fmt.Sprintf(format, args...)}
	}
	if r.FromConfig != -1 {
		// The version a getConfig shows: /zookeeper/config's mzxid, the
		// index of its last change (a membership change, or what the
		// leader recorded of a member).
		st, _ := v.Tree.Exists(systemConfig)
		if st.Mzxid != r.FromConfig {
			return &Error{Code: BadVersion, Message: fmt.Sprintf("reconfig: the configuration is version %x, not %x", st.Mzxid, r.FromConfig)}
		}
	}
	if r.NewMembers != "" {
		return bad("coordd takes incremental reconfigurations only (joining and leaving servers), not a new member list")
	}
	joining, leaving, err := r.Parse()
	if err != nil {
		return bad("%v", err)
	}
	if !fsm.ConfigRecorded(v.Tree) {
		return nil // a state from before the record: the leader checks
	}
	members := map[string]fsm.ServerSpec{}
	peers := map[string]string{}
	voters := 0
	for _, m := range fsm.ConfigServers(v.Tree) {
		members[m.ID], peers[m.PeerAddress] = m, m.ID
		if !m.Observer {
			voters++
		}
	}
	for _, s := range joining {
		if m, ok := members[s.ID]; ok {
			return bad("server %s is a member already (peer address %s): remove it first", s.ID, m.PeerAddress)
		}
		if id, ok := peers[s.PeerAddress]; ok {
			return bad("peer address %s is server %s's", s.PeerAddress, id)
		}
		peers[s.PeerAddress] = s.ID
		if !s.Observer {
			voters++
		}
	}
	for _, id := range leaving {
		m, ok := members[id]
		if !ok {
			return bad("no member has id %q", clipped(id))
		}
		if !m.Observer {
			voters--
		}
	}
	if voters <= 0 {
		return bad("the change would leave no voter")
	}
	return nil
}

// Parse returns the servers joining (their lines parsed; an id given
// twice is refused) and the ids leaving (without repeats), from the
// comma-separated lists.
func (r Reconfig) Parse() (joining []fsm.ServerSpec, leaving []string, err error) {
	seen := map[string]bool{}
	for _, line := range reconfigList(r.Joining) {
		spec, err := fsm.ParseServerSpec(line)
		if err != nil {
			return nil, nil, err
		}
		if seen[spec.ID] {
			return nil, nil, fmt.Errorf("server %s joins twice", spec.ID)
		}
		seen[spec.ID] = true
		joining = append(joining, spec)
	}
	seen = map[string]bool{}
	for _, id := range reconfigList(r.Leaving) {
		if !seen[id] {
			seen[id] = true
			leaving = append(leaving, id)
		}
	}
	return joining, leaving, nil
}

// reconfigList splits a reconfig's list at commas, trimmed, without the
// empty items (ZooKeeper's StringUtils.split).
func reconfigList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// clipped shortens what an error message quotes of a request.
func clipped(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
