package fsm

import (
	"net/netip"

	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// This file converts ACLs and a connection's identities to and from the
// log's records (cmdpb); the checks themselves are package auth's.

// ConnToPB converts a connection's identities for the log (nil when it has
// none).
func ConnToPB(c auth.Conn) *cmdpb.Conn {
	if !c.IP.IsValid() && c.X509 == "" {
		return nil
	}
	pc := &cmdpb.Conn{X509: c.X509}
	if c.IP.IsValid() {
		pc.Ip = c.IP.Unmap().AsSlice()
	}
	return pc
}

// ConnFromPB converts a write's connection identities back.
func ConnFromPB(pc *cmdpb.Conn) auth.Conn {
	if pc == nil {
		return auth.Conn{}
	}
	c := auth.Conn{X509: pc.X509}
	c.IP, _ = netip.AddrFromSlice(pc.Ip)
	return c
}

// ACLToPB converts an ACL for the log.
func ACLToPB(acl []tree.ACL) []*cmdpb.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]*cmdpb.ACL, len(acl))
	for i, a := range acl {
		out[i] = &cmdpb.ACL{Perms: int32(a.Perms), Scheme: a.Scheme, Id: a.ID}
	}
	return out
}

// ACLFromPB converts a logged ACL back.
func ACLFromPB(acl []*cmdpb.ACL) []tree.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]tree.ACL, len(acl))
	for i, a := range acl {
		out[i] = tree.ACL{Perms: tree.Perms(a.Perms), Scheme: a.Scheme, ID: a.Id}
	}
	return out
}
