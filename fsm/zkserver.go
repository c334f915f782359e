package fsm

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// This file reads one server of ZooKeeper's dynamic configuration, the
// syntax of a reconfig's joining servers and of a line of
// /zookeeper/config (which renderConfig writes):
//
//	server.ID=HOST:PEERPORT[:ELECTIONPORT][:participant|observer][;[CLIENTHOST:]CLIENTPORT]
//
// ZooKeeper's own parser (QuorumPeer.QuorumServer) is the reference: the
// two sides of '=' and the whole are trimmed, a role is either word in
// any case, a bare client port stands for 0.0.0.0:PORT (as ZooKeeper then
// shows it), an IPv6 host is written in brackets, the election port must
// differ from the peer port, and several addresses joined by '|' are
// refused (ZooKeeper too refuses them unless zookeeper.multiAddress.enabled).
// Where coordd differs, it takes more: the election port may be left out
// (coordd has one peer port, and shows 0 for it), and an id need not be a
// number (coordd's are names).

// ErrBadServerSpec is wrapped by every error of ParseServerSpec.
var ErrBadServerSpec = errors.New("fsm: bad server spec")

// ServerSpec is one server of ZooKeeper's dynamic configuration.
type ServerSpec struct {
	// ID is the server's id, after "server.".
	ID string
	// PeerAddress is HOST:PEERPORT, where the other servers reach it
	// (Raft and forwarding; an IPv6 host in brackets).
	PeerAddress string
	// ElectionPort is ZooKeeper's second peer port, as given: coordd has
	// none, and only shows it back. Empty when not given.
	ElectionPort string
	// Observer is the role: an observer (a non-voter) or a participant
	// (a voter, the default).
	Observer bool
	// ClientAddress is CLIENTHOST:CLIENTPORT, where clients reach it;
	// empty when not given.
	ClientAddress string
}

// ParseServerSpec parses one server line (see above); its errors wrap
// ErrBadServerSpec and say what is wrong.
func ParseServerSpec(line string) (ServerSpec, error) {
	bad := func(format string, args ...any) (ServerSpec, error) {
		return ServerSpec{}, fmt.Errorf("%w: %q: %s", ErrBadServerSpec, clip(line), fmt.Sprintf(format, args...))
	}
	key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	id, isServer := strings.CutPrefix(key, "server.")
	if !ok || !isServer || id == "" || value == "" || strings.Contains(value, "=") {
		return bad("not a server line (server.ID=HOST:PORT:PORT[:ROLE][;[HOST:]PORT])")
	}
	if strings.ContainsAny(id, " \t\r\n,;:=|") {
		return bad("id %q holds a space or a separator", id)
	}
	if strings.ContainsAny(value, " \t\r\n,") {
		return bad("a space or a comma inside the line")
	}
	server, client, hasClient := strings.Cut(value, ";")
	if strings.Contains(server, "|") {
		return bad("several peer addresses ('|'): coordd has one per server")
	}
	spec := ServerSpec{ID: id}
	host, ports, err := splitHostPorts(server)
	if err != nil {
		return bad("%v", err)
	}
	if n := len(ports); n > 0 && isRole(ports[n-1]) {
		spec.Observer = strings.EqualFold(ports[n-1], "observer")
		ports = ports[:n-1]
	}
	switch len(ports) {
	case 1, 2:
		peer, err := port(ports[0], 1)
		if err != nil {
			return bad("peer port: %v", err)
		}
		spec.PeerAddress = net.JoinHostPort(host, peer)
		if len(ports) == 1 {
			break
		}
		if spec.ElectionPort, err = port(ports[1], 0); err != nil {
			return bad("election port: %v", err)
		}
		if spec.ElectionPort == peer {
			return bad("the election port must differ from the peer port")
		}
	default:
		return bad("want HOST:PEERPORT:ELECTIONPORT, then the role if any")
	}
	if hasClient {
		ch, cp, err := splitHostPorts(client)
		switch {
		case err != nil && strings.Contains(client, ":"):
			return bad("client address: %v", err)
		case err != nil: // a bare port
			ch, cp = "0.0.0.0", []string{client}
		}
		if len(cp) != 1 {
			return bad("client address: want [HOST:]PORT")
		}
		p, err := port(cp[0], 1)
		if err != nil {
			return bad("client port: %v", err)
		}
		spec.ClientAddress = net.JoinHostPort(ch, p)
	}
	return spec, nil
}

// splitHostPorts splits HOST:P1[:P2...] (an IPv6 host in brackets) into
// the host and the fields after it.
func splitHostPorts(s string) (string, []string, error) {
	var host, rest string
	if v6, ok := strings.CutPrefix(s, "["); ok {
		h, after, found := strings.Cut(v6, "]")
		if !found || h == "" || net.ParseIP(h) == nil || !strings.HasPrefix(after, ":") {
			return "", nil, fmt.Errorf("%q: want [IPV6]:PORT", s)
		}
		host, rest = h, after[1:]
	} else {
		h, after, found := strings.Cut(s, ":")
		if !found || h == "" {
			return "", nil, fmt.Errorf("%q: want HOST:PORT", s)
		}
		host, rest = h, after
	}
	if strings.ContainsAny(host, "[]") {
		return "", nil, fmt.Errorf("%q: a bracket in the host", s)
	}
	return host, strings.Split(rest, ":"), nil
}

// isRole reports whether s names a role (ZooKeeper takes either word in
// any case).
func isRole(s string) bool {
	return strings.EqualFold(s, "participant") || strings.EqualFold(s, "observer")
}

// port reads a port, digits only, from min to 65535, and returns it in
// decimal (without leading zeros, as ZooKeeper shows it).
func port(s string, min int) (string, error) {
	p, err := strconv.Atoi(s)
	if err != nil || s[0] == '+' || s[0] == '-' || p < min || p > 65535 {
		return "", fmt.Errorf("%q is not a port (%d-65535)", clip(s), min)
	}
	return strconv.Itoa(p), nil
}

// clip shortens what an error quotes of the input.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
