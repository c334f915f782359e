package client

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/coordd/coordd/rpc/apipb"
)

// Perm is a set of permissions of an ACL entry, ZooKeeper's bits.
type Perm int32

// The permissions, and what each allows on a node (as ZooKeeper checks
// them).
const (
	// PermRead: getData, getChildren, exists, getACL, and a Multi's check.
	PermRead Perm = 1 << iota
	// PermWrite: setData.
	PermWrite
	// PermCreate: create a child.
	PermCreate
	// PermDelete: delete a child.
	PermDelete
	// PermAdmin: setACL (and getACL, with digests shown in full).
	PermAdmin
	// PermAll is every permission ("cdrwa").
	PermAll = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// permLetters are the permissions in zkCli's order and letters.
var permLetters = []struct {
	p Perm
	c byte
}{{PermCreate, 'c'}, {PermDelete, 'd'}, {PermRead, 'r'}, {PermWrite, 'w'}, {PermAdmin, 'a'}}

// String returns the permissions as zkCli writes them ("cdrwa", "r"; ""
// for none).
func (p Perm) String() string {
	var b []byte
	for _, l := range permLetters {
		if p&l.p != 0 {
			b = append(b, l.c)
		}
	}
	return string(b)
}

// ParsePerm reads permissions written as zkCli writes them: any of the
// letters c, d, r, w, a.
func ParsePerm(s string) (Perm, error) {
	var p Perm
	for i := 0; i < len(s); i++ {
		found := false
		for _, l := range permLetters {
			if s[i] == l.c {
				p |= l.p
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("client: permission %q: letters are c (create), d (delete), r (read), w (write), a (admin)", s[i:i+1])
		}
	}
	return p, nil
}

// ACL is one entry of a node's access control list: Perms granted to the
// identity ID of Scheme. The schemes:
//
//   - world: ID "anyone", everyone.
//   - auth: in Create or SetACL only, every identity the session has
//     authenticated as (AddAuth); the server stores those instead.
//   - digest: ID "user:base64(sha1(user:password))" (see Digest); a session
//     has it after AddAuth("digest", "user:password").
//   - ip: ID an IPv4 address or address/bits; matches the client's address.
//   - x509: ID the subject of a client certificate the server verified.
type ACL struct {
	Perms  Perm   `json:"perms"`
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

// String returns the entry as zkCli's setAcl takes it: scheme:id:perms.
func (a ACL) String() string { return a.Scheme + ":" + a.ID + ":" + a.Perms.String() }

// ParseACL reads an ACL written as zkCli's setAcl takes it: entries
// separated by commas, each scheme:id:perms (the id may itself hold colons,
// as a digest does; world:anyone:r, digest:bob:hash=:cdrwa, ip:10.0.0.0/8:r,
// auth::cdrwa).
func ParseACL(s string) ([]ACL, error) {
	var out []ACL
	for _, e := range strings.Split(s, ",") {
		scheme, rest, ok := strings.Cut(e, ":")
		i := strings.LastIndexByte(rest, ':')
		if !ok || i < 0 {
			return nil, fmt.Errorf("client: ACL entry %q is not scheme:id:perms", e)
		}
		perms, err := ParsePerm(rest[i+1:])
		if err != nil {
			return nil, err
		}
		out = append(out, ACL{Perms: perms, Scheme: scheme, ID: rest[:i]})
	}
	return out, nil
}

// OpenACL is world:anyone with every permission (ZooKeeper's
// OPEN_ACL_UNSAFE): the ACL of a node created without one.
func OpenACL() []ACL { return []ACL{{Perms: PermAll, Scheme: "world", ID: "anyone"}} }

// CreatorAll gives every permission to the identities the creating session
// has authenticated as, and to no one else (ZooKeeper's CREATOR_ALL_ACL,
// auth::cdrwa). Creating with it fails with ErrInvalidACL before AddAuth.
func CreatorAll() []ACL { return []ACL{{Perms: PermAll, Scheme: "auth"}} }

// ReadOnly lets everyone read and no one change (ZooKeeper's
// READ_ACL_UNSAFE, world:anyone:r).
func ReadOnly() []ACL { return []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}} }

// WorldACL gives perms to everyone.
func WorldACL(perms Perm) []ACL { return []ACL{{Perms: perms, Scheme: "world", ID: "anyone"}} }

// DigestACL gives perms to whoever authenticates as user with password
// (AddAuth("digest", "user:password")). The password itself is not in the
// ACL, only its digest.
func DigestACL(perms Perm, user, password string) []ACL {
	return []ACL{{Perms: perms, Scheme: "digest", ID: Digest(user, password)}}
}

// Digest returns the digest scheme's id of user and password, as
// ZooKeeper computes it: user:base64(sha1(user:password)).
func Digest(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// Identity is one identity of the session, as WhoAmI reports it: a scheme
// and a user (a digest's user name, not its hash).
type Identity struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

func aclToPB(acl []ACL) []*apipb.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]*apipb.ACL, len(acl))
	for i, a := range acl {
		out[i] = &apipb.ACL{Perms: int32(a.Perms), Scheme: a.Scheme, Id: a.ID}
	}
	return out
}

func aclFromPB(acl []*apipb.ACL) []ACL {
	out := make([]ACL, len(acl))
	for i, a := range acl {
		out[i] = ACL{Perms: Perm(a.Perms), Scheme: a.Scheme, ID: a.Id}
	}
	return out
}

// AddAuth adds an identity to the session, for the rest of its life: with
// scheme "digest" and auth "user:password", the session then holds the
// permissions ACLs give digest:user:base64(sha1(user:password)) (and is the
// super user if that is the servers' --superdigest). The identity is
// replicated with the session, so it holds on every server and across
// reconnects: there is nothing to send again after a failover. The
// password is sent to the server once, over the connection (use TLS), and
// kept nowhere. ErrAuthFailed: an unknown scheme (digest, ip, x509), or
// x509 without a verified client certificate; the session goes on.
func (c *Client) AddAuth(ctx context.Context, scheme string, auth []byte) error {
	_, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_AddAuth{AddAuth: &apipb.AddAuthRequest{Scheme: scheme, Auth: auth}}}, true, nil)
	return err
}

// GetACL returns a node's ACL and stat (Stat.Aversion counts its changes).
// It needs READ or ADMIN on the node; without ADMIN each digest id reads
// user:x.
func (c *Client) GetACL(ctx context.Context, path string) ([]ACL, Stat, error) {
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_GetAcl{GetAcl: &apipb.GetACLRequest{Path: path}}}, false, nil)
	if err != nil {
		return nil, Stat{}, err
	}
	g := resp.GetGetAcl()
	return aclFromPB(g.GetAcl()), statFromPB(g.GetStat()), nil
}

// SetACL replaces a node's ACL if its aversion is version (-1: any), and
// returns its new stat. It needs ADMIN on the node.
func (c *Client) SetACL(ctx context.Context, path string, acl []ACL, version int32) (Stat, error) {
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_SetAcl{SetAcl: &apipb.SetACLRequest{Path: path, Acl: aclToPB(acl), Version: version}}}, true, nil)
	if err != nil {
		return Stat{}, err
	}
	return statFromPB(resp.GetSetAcl().GetStat()), nil
}

// WhoAmI returns the session's identities: its connection's (ip, and x509
// with a verified client certificate), then those AddAuth added.
func (c *Client) WhoAmI(ctx context.Context) ([]Identity, error) {
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_WhoAmI{WhoAmI: &apipb.WhoAmIRequest{}}}, false, nil)
	if err != nil {
		return nil, err
	}
	ids := resp.GetWhoAmI().GetIdentities()
	out := make([]Identity, len(ids))
	for i, id := range ids {
		out[i] = Identity{Scheme: id.Scheme, ID: id.Id}
	}
	return out, nil
}
