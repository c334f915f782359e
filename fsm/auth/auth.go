// Package auth is ZooKeeper's authentication schemes and ACL checks, as
// pure functions of who asks (ZooKeeperServer.checkACL,
// PrepRequestProcessor.fixupACL, the ip, digest, x509 and sasl providers of
// ZooKeeper 3.8): the FSM runs them in apply for writes, and a server runs
// the same ones for the reads it serves. The ACLs themselves are the
// tree's (tree.ACL, kept interned with each node); the identities a
// session authenticated as are the session registry's (session.Identity).
// SASL's wire mechanism is the ZooKeeper front-end's (rpc/zk/sasl): this
// package knows only the sasl scheme's identities.
package auth

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

// The ACL schemes.
const (
	SchemeWorld  = "world"
	SchemeAuth   = "auth"
	SchemeDigest = "digest"
	SchemeIP     = "ip"
	SchemeX509   = "x509"
	SchemeSASL   = "sasl"
	SchemeSuper  = "super" // an identity, never an ACL's scheme
)

// Conn is what the server a client is connected to knows of the
// connection itself: the identities ZooKeeper gives a connection (the ip
// scheme's address; the x509 scheme's certificate subject, when the server
// verified the client's certificate).
type Conn struct {
	IP   netip.Addr // invalid when unknown
	X509 string     // "" without a verified client certificate
}

// Requester is who a request comes from, as ZooKeeper's checks see it:
// its connection's identities and the identities its session authenticated
// as. It is a tree.Authorizer. Its methods are pure functions of it and
// their arguments.
type Requester struct {
	Conn Conn
	// IDs are the session's identities (addAuth), from the replicated
	// session registry; shared, not modified.
	IDs []session.Identity
}

// Super reports whether the requester authenticated as the super user.
func (r *Requester) Super() bool {
	for _, id := range r.IDs {
		if id.Scheme == SchemeSuper {
			return true
		}
	}
	return false
}

// Allowed reports whether the requester holds perm on a node whose ACL is
// acl, exactly as ZooKeeper's checkACL decides: an empty ACL allows
// everything, so does the super user; otherwise an entry granting one of
// perm's bits must be world:anyone or match one of the requester's
// identities of the entry's scheme (digest: equal; ip: the connection's
// IPv4 address within the entry's address or CIDR; x509: the certificate
// subject equal; sasl: the SASL user's name equal, or the user named
// "super", whom ZooKeeper's SASLAuthenticationProvider lets match every
// sasl entry, though no other).
func (r *Requester) Allowed(acl []tree.ACL, perm tree.Perms) bool {
	if len(acl) == 0 || r.Super() {
		return true
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		switch a.Scheme {
		case SchemeWorld:
			if a.ID == "anyone" {
				return true
			}
		case SchemeDigest:
			for _, id := range r.IDs {
				if id.Scheme == SchemeDigest && id.ID == a.ID {
					return true
				}
			}
		case SchemeIP:
			if r.Conn.IP.IsValid() && ipMatches(r.Conn.IP.Unmap().String(), a.ID) {
				return true
			}
		case SchemeX509:
			if r.Conn.X509 != "" && r.Conn.X509 == a.ID {
				return true
			}
		case SchemeSASL:
			for _, id := range r.IDs {
				if id.Scheme == SchemeSASL && (id.ID == a.ID || id.ID == "super") {
					return true
				}
			}
		}
	}
	return false
}

// Fixup turns the ACL a create or setACL asked for into the one stored, as
// ZooKeeper's fixupACL does: exact repeats are dropped; world must be
// world:anyone; auth grants its permissions to each of the requester's
// authenticated identities (x509, digest and sasl, not ip), and is invalid
// without one; digest, ip, x509 and sasl entries must be well formed; any other
// scheme is invalid. An empty ACL is the open one (a create logged before
// ACLs carries none; the ZooKeeper front-end refuses an empty ACL before
// it is logged, as ZooKeeper does).
func (r *Requester) Fixup(acl []tree.ACL) ([]tree.ACL, error) {
	if len(acl) == 0 {
		return tree.OpenACL(), nil
	}
	uniq := make([]tree.ACL, 0, len(acl))
	for _, a := range acl {
		if !slices.Contains(uniq, a) {
			uniq = append(uniq, a)
		}
	}
	out := make([]tree.ACL, 0, len(uniq))
	for _, a := range uniq {
		switch a.Scheme {
		case SchemeWorld:
			if a.ID != "anyone" {
				return nil, invalidACL("world's only id is anyone, not %q", a.ID)
			}
			out = append(out, a)
		case SchemeAuth:
			n := len(out)
			for _, id := range r.Authenticated() {
				out = append(out, tree.ACL{Perms: a.Perms, Scheme: id.Scheme, ID: id.ID})
			}
			if len(out) == n {
				return nil, invalidACL("the auth scheme needs an authenticated identity (addAuth first)")
			}
		default:
			if err := ValidACLID(a.Scheme, a.ID); err != nil {
				return nil, err
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// Authenticated returns the requester's identities that the auth scheme
// stands for: those of ZooKeeper's providers that authenticate (x509,
// digest and sasl; not ip, and super is no scheme of an ACL).
func (r *Requester) Authenticated() []session.Identity {
	var out []session.Identity
	if r.Conn.X509 != "" {
		out = append(out, session.Identity{Scheme: SchemeX509, ID: r.Conn.X509})
	}
	for _, id := range r.IDs {
		if id.Scheme == SchemeDigest || id.Scheme == SchemeX509 || id.Scheme == SchemeSASL {
			out = append(out, id)
		}
	}
	return out
}

// WhoAmI returns the requester's identities as ZooKeeper's whoAmI reports
// them (scheme and user: a digest's user name, never its hash): the
// connection's first, then the session's in the order added.
func (r *Requester) WhoAmI() []session.Identity {
	var out []session.Identity
	if r.Conn.IP.IsValid() {
		out = append(out, session.Identity{Scheme: SchemeIP, ID: r.Conn.IP.Unmap().String()})
	}
	if r.Conn.X509 != "" {
		out = append(out, session.Identity{Scheme: SchemeX509, ID: r.Conn.X509})
	}
	for _, id := range r.IDs {
		user := id.ID
		switch id.Scheme {
		case SchemeDigest:
			user, _, _ = strings.Cut(id.ID, ":")
		case SchemeSuper:
			user = ""
		}
		out = append(out, session.Identity{Scheme: id.Scheme, ID: user})
	}
	return out
}

// ValidACLID reports whether id is a well-formed id of an ACL entry of
// scheme, by ZooKeeper's providers' isValid: digest "user:hash" (Java's
// split on ':' gives two parts, trailing empty ones dropped); ip an IPv4
// address, optionally /bits (0..32); x509 a distinguished name; sasl a
// name that Kerberos's syntax allows (KerberosName: without '@', or
// primary[/instance]@REALM with no other '/' or '@'). Other schemes (world,
// auth and super included) are not ids of an entry. The error wraps
// tree.ErrInvalidACL.
func ValidACLID(scheme, id string) error {
	switch scheme {
	case SchemeDigest:
		if len(javaSplit(id, ":")) != 2 {
			return invalidACL("a digest id is user:base64(sha1(user:password)), not %q", id)
		}
	case SchemeIP:
		if !ipValid(id) {
			return invalidACL("an ip id is an IPv4 address, optionally /bits, not %q", id)
		}
	case SchemeX509:
		if !strings.Contains(id, "=") {
			return invalidACL("an x509 id is a certificate subject such as CN=name,O=org, not %q", id)
		}
	case SchemeSASL:
		if !saslValid(id) {
			return invalidACL("a sasl id is a user name, or a Kerberos principal name/instance@REALM, not %q", id)
		}
	default:
		return invalidACL("unknown scheme %q (world, auth, digest, ip, x509, sasl)", scheme)
	}
	return nil
}

func invalidACL(format string, args ...any) error {
	return fmt.Errorf("%w: %s", tree.ErrInvalidACL, fmt.Sprintf(format, args...))
}

// saslValid reports whether id is a valid sasl id, as ZooKeeper's
// SASLAuthenticationProvider.isValid decides it: KerberosName(id) accepts
// a name without '@', and one that matches ([^/@]*)(/([^/@]*))?@([^/@]*).
func saslValid(id string) bool {
	name, realm, ok := strings.Cut(id, "@")
	if !ok {
		return true
	}
	primary, instance, _ := strings.Cut(name, "/")
	return !strings.ContainsAny(realm, "/@") && !strings.ContainsAny(primary, "/@") && !strings.ContainsAny(instance, "/@")
}

// javaSplit splits s around sep as Java's String.split(sep) does: without
// a match the result is s alone, and trailing empty strings are dropped.
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	if len(parts) == 1 {
		return parts
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// v4Bytes parses an IPv4 address as ZooKeeper's IPAuthenticationProvider
// does: four parts split on '.', each an integer 0..255 as Java's
// Integer.parseInt reads it (a sign and leading zeros allowed).
func v4Bytes(addr string) ([]byte, bool) {
	parts := strings.Split(addr, ".")
	if len(parts) != 4 {
		return nil, false
	}
	b := make([]byte, 4)
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 255 {
			return nil, false
		}
		b[i] = byte(v)
	}
	return b, true
}

// prefixBits parses the /bits of an ip id (ok false when malformed).
func prefixBits(s string) (int, bool) {
	bits, err := strconv.Atoi(s)
	return bits, err == nil && bits >= 0 && bits <= 32
}

func ipValid(id string) bool {
	addr, bits, hasBits := strings.Cut(id, "/")
	if _, ok := v4Bytes(addr); !ok {
		return false
	}
	if hasBits {
		if _, ok := prefixBits(bits); !ok {
			return false
		}
	}
	return true
}

// mask keeps the first bits bits of b (ZooKeeper's mask).
func mask(b []byte, bits int) {
	start := bits / 8
	m := ^byte((1 << (8 - bits%8)) - 1)
	for ; start < len(b); start++ {
		b[start] &= m
		m = 0
	}
}

// ipMatches reports whether the address id is within the ip ACL id expr.
func ipMatches(id, expr string) bool {
	addr, bitsStr, hasBits := strings.Cut(expr, "/")
	want, ok := v4Bytes(addr)
	if !ok {
		return false
	}
	bits := 32
	if hasBits {
		if bits, ok = prefixBits(bitsStr); !ok {
			return false
		}
	}
	got, ok := v4Bytes(id)
	if !ok {
		return false
	}
	mask(want, bits)
	mask(got, bits)
	return slices.Equal(want, got)
}

// Digest returns the digest scheme's id of "user:password", as ZooKeeper's
// DigestAuthenticationProvider.generateDigest computes it:
// user:base64(sha1(user:password)), the user being everything before the
// first ':' (the whole string without one). The input is read as UTF-8,
// each invalid byte replaced by U+FFFD, as Java's String does.
func Digest(userPassword []byte) string {
	var s []byte
	if utf8.Valid(userPassword) {
		s = userPassword
	} else {
		for _, r := range string(userPassword) {
			s = utf8.AppendRune(s, r)
		}
	}
	sum := sha1.Sum(s)
	user, _, _ := strings.Cut(string(s), ":")
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// ValidSuperDigest reports whether d looks like a digest id
// ("user:base64(sha1(user:password))"), as --superdigest takes it.
func ValidSuperDigest(d string) error {
	user, hash, ok := strings.Cut(d, ":")
	if !ok || user == "" {
		return fmt.Errorf("a super digest is user:base64(sha1(user:password)), without the password")
	}
	if b, err := base64.StdEncoding.DecodeString(hash); err != nil || len(b) != sha1.Size {
		return fmt.Errorf("the part after %q: is not a base64 SHA-1 digest", user)
	}
	return nil
}
