package auth

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

func entry(p tree.Perms, scheme, id string) tree.ACL {
	return tree.ACL{Perms: p, Scheme: scheme, ID: id}
}

// TestDigest: the digest of user:password is ZooKeeper's, byte for byte
// (the values are what ZooKeeper 3.8 computes and stores).
func TestDigest(t *testing.T) {
	for in, want := range map[string]string{
		"super:secret": "super:lK75jTNcA+U9vtVEw5vB51mj/w4=",
		"alice:pw":     "alice:V55/p2T0OpjQ+low3NVAH4aLvm0=",
	} {
		if got := Digest([]byte(in)); got != want {
			t.Errorf("Digest(%q) = %q, want %q", in, got, want)
		}
	}
	// Without a ':' the whole string is the user.
	if got := Digest([]byte("nocolon")); got[:len("nocolon:")] != "nocolon:" {
		t.Errorf("Digest(nocolon) = %q", got)
	}
	if err := ValidSuperDigest("super:lK75jTNcA+U9vtVEw5vB51mj/w4="); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "super", "super:secret", ":lK75jTNcA+U9vtVEw5vB51mj/w4="} {
		if ValidSuperDigest(bad) == nil {
			t.Errorf("ValidSuperDigest(%q) accepted", bad)
		}
	}
}

// TestFixup: which ACLs ZooKeeper 3.8 accepts and what it stores for them
// (each case was sent to ZooKeeper 3.8.0 and its answer noted).
func TestFixup(t *testing.T) {
	alice := &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "alice:h"}, {Scheme: "super"}}}
	anon := &Requester{Conn: Conn{IP: netip.MustParseAddr("127.0.0.1")}}
	cert := &Requester{Conn: Conn{IP: netip.MustParseAddr("127.0.0.1"), X509: "CN=c,O=o"}, IDs: alice.IDs}
	saslBob := &Requester{IDs: []session.Identity{{Scheme: "sasl", ID: "bob"}}}
	open := entry(31, "world", "anyone")
	cases := []struct {
		name string
		r    *Requester
		in   []tree.ACL
		want []tree.ACL // nil: InvalidACL
	}{
		{"world anyone", anon, []tree.ACL{open}, []tree.ACL{open}},
		{"world someone", anon, []tree.ACL{entry(31, "world", "someone")}, nil},
		{"world, empty id", anon, []tree.ACL{entry(31, "world", "")}, nil},
		{"empty scheme", anon, []tree.ACL{entry(31, "", "anyone")}, nil},
		{"auth without identity", anon, []tree.ACL{entry(31, "auth", "")}, nil},
		{"auth, the ip does not count", anon, []tree.ACL{entry(31, "auth", "x")}, nil},
		{"auth, digest (super skipped)", alice, []tree.ACL{entry(5, "auth", "")}, []tree.ACL{entry(5, "digest", "alice:h")}},
		{"auth, certificate then digest", cert, []tree.ACL{entry(1, "auth", "")}, []tree.ACL{entry(1, "x509", "CN=c,O=o"), entry(1, "digest", "alice:h")}},
		{"digest", anon, []tree.ACL{entry(31, "digest", "a:b")}, []tree.ACL{entry(31, "digest", "a:b")}},
		{"digest without colon", anon, []tree.ACL{entry(31, "digest", "alice")}, nil},
		{"digest, three parts", anon, []tree.ACL{entry(31, "digest", "a:b:c")}, nil},
		{"digest, trailing colon", anon, []tree.ACL{entry(31, "digest", "a:b:")}, []tree.ACL{entry(31, "digest", "a:b:")}},
		{"digest, leading colon", anon, []tree.ACL{entry(31, "digest", ":b")}, []tree.ACL{entry(31, "digest", ":b")}},
		{"digest, colons only", anon, []tree.ACL{entry(31, "digest", "::")}, nil},
		{"ip", anon, []tree.ACL{entry(31, "ip", "10.0.0.1")}, []tree.ACL{entry(31, "ip", "10.0.0.1")}},
		{"ip cidr", anon, []tree.ACL{entry(31, "ip", "10.0.0.0/8")}, []tree.ACL{entry(31, "ip", "10.0.0.0/8")}},
		{"ip /33", anon, []tree.ACL{entry(31, "ip", "10.0.0.0/33")}, nil},
		{"ip /", anon, []tree.ACL{entry(31, "ip", "10.0.0.0/")}, nil},
		{"ip v6", anon, []tree.ACL{entry(31, "ip", "::1")}, nil},
		{"ip, three parts", anon, []tree.ACL{entry(31, "ip", "10.0.0")}, nil},
		{"ip with a sign", anon, []tree.ACL{entry(31, "ip", "+10.0.0.1")}, []tree.ACL{entry(31, "ip", "+10.0.0.1")}},
		{"ip part over 255", anon, []tree.ACL{entry(31, "ip", "10.0.0.256")}, nil},
		{"x509", anon, []tree.ACL{entry(1, "x509", "CN=a")}, []tree.ACL{entry(1, "x509", "CN=a")}},
		{"x509 not a name", anon, []tree.ACL{entry(1, "x509", "a")}, nil},
		{"unknown scheme", anon, []tree.ACL{entry(31, "foo", "bar")}, nil},
		{"super is no ACL scheme", anon, []tree.ACL{entry(31, "super", "")}, nil},
		{"sasl", anon, []tree.ACL{entry(31, "sasl", "bob")}, []tree.ACL{entry(31, "sasl", "bob")}},
		{"sasl principal", anon, []tree.ACL{entry(31, "sasl", "zk/host@EXAMPLE.COM")}, []tree.ACL{entry(31, "sasl", "zk/host@EXAMPLE.COM")}},
		{"sasl user@realm", anon, []tree.ACL{entry(31, "sasl", "bob@REALM")}, []tree.ACL{entry(31, "sasl", "bob@REALM")}},
		{"sasl, empty realm", anon, []tree.ACL{entry(31, "sasl", "bob@")}, []tree.ACL{entry(31, "sasl", "bob@")}},
		{"sasl, only @", anon, []tree.ACL{entry(31, "sasl", "@")}, []tree.ACL{entry(31, "sasl", "@")}},
		{"sasl, slashes without realm", anon, []tree.ACL{entry(31, "sasl", "a/b/c")}, []tree.ACL{entry(31, "sasl", "a/b/c")}},
		{"sasl, two @", anon, []tree.ACL{entry(31, "sasl", "a@b@c")}, nil},
		{"sasl, two / before @", anon, []tree.ACL{entry(31, "sasl", "a/b/c@R")}, nil},
		{"sasl, / in the realm", anon, []tree.ACL{entry(31, "sasl", "a@R/x")}, nil},
		{"auth, sasl", saslBob, []tree.ACL{entry(31, "auth", "")}, []tree.ACL{entry(31, "sasl", "bob")}},
		{"any perms are kept", anon, []tree.ACL{entry(0, "world", "anyone"), entry(32, "world", "anyone"), entry(-1, "world", "anyone")},
			[]tree.ACL{entry(0, "world", "anyone"), entry(32, "world", "anyone"), entry(-1, "world", "anyone")}},
		{"repeats dropped", anon, []tree.ACL{open, open}, []tree.ACL{open}},
		{"different perms kept", anon, []tree.ACL{entry(1, "world", "anyone"), open}, []tree.ACL{entry(1, "world", "anyone"), open}},
		{"empty: open (entries from before ACLs)", anon, nil, []tree.ACL{open}},
	}
	for _, c := range cases {
		got, err := c.r.Fixup(c.in)
		switch {
		case c.want == nil && !errors.Is(err, tree.ErrInvalidACL):
			t.Errorf("%s: %v %v, want InvalidACL", c.name, got, err)
		case c.want != nil && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}

// TestAllowed: ZooKeeper's checkACL: any of perm's bits, world:anyone, the
// requester's identities per scheme, the super user, an empty ACL.
func TestAllowed(t *testing.T) {
	ip := func(s string) *Requester { return &Requester{Conn: Conn{IP: netip.MustParseAddr(s)}} }
	sasl := func(user string) *Requester { return &Requester{IDs: []session.Identity{{Scheme: "sasl", ID: user}}} }
	cases := []struct {
		name string
		r    *Requester
		acl  []tree.ACL
		perm tree.Perms
		want bool
	}{
		{"empty ACL", ip("10.1.1.1"), nil, tree.PermAdmin, true},
		{"world", ip("10.1.1.1"), []tree.ACL{entry(tree.PermRead, "world", "anyone")}, tree.PermRead, true},
		{"world, other perm", ip("10.1.1.1"), []tree.ACL{entry(tree.PermRead, "world", "anyone")}, tree.PermWrite, false},
		{"any bit of perm", ip("10.1.1.1"), []tree.ACL{entry(tree.PermAdmin, "world", "anyone")}, tree.PermRead | tree.PermAdmin, true},
		{"ip exact", ip("10.1.1.1"), []tree.ACL{entry(31, "ip", "10.1.1.1")}, tree.PermRead, true},
		{"ip other", ip("10.1.1.2"), []tree.ACL{entry(31, "ip", "10.1.1.1")}, tree.PermRead, false},
		{"ip cidr /8", ip("10.200.3.4"), []tree.ACL{entry(31, "ip", "10.0.0.0/8")}, tree.PermRead, true},
		{"ip cidr /12", ip("10.31.3.4"), []tree.ACL{entry(31, "ip", "10.16.0.0/12")}, tree.PermRead, true},
		{"ip outside /12", ip("10.32.3.4"), []tree.ACL{entry(31, "ip", "10.16.0.0/12")}, tree.PermRead, false},
		{"ip /0", ip("1.2.3.4"), []tree.ACL{entry(31, "ip", "9.9.9.9/0")}, tree.PermRead, true},
		{"ip mapped v4", ip("::ffff:10.1.1.1"), []tree.ACL{entry(31, "ip", "10.1.1.1")}, tree.PermRead, true},
		{"ip v6 never", ip("::1"), []tree.ACL{entry(31, "ip", "0.0.0.0/0")}, tree.PermRead, false},
		{"no ip known", &Requester{}, []tree.ACL{entry(31, "ip", "0.0.0.0/0")}, tree.PermRead, false},
		{"digest", &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "u:h"}}}, []tree.ACL{entry(31, "digest", "u:h")}, tree.PermRead, true},
		{"digest other", &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "u:h"}}}, []tree.ACL{entry(31, "digest", "u:x")}, tree.PermRead, false},
		{"digest of another scheme", &Requester{IDs: []session.Identity{{Scheme: "x509", ID: "u:h"}}}, []tree.ACL{entry(31, "digest", "u:h")}, tree.PermRead, false},
		{"x509", &Requester{Conn: Conn{X509: "CN=a"}}, []tree.ACL{entry(31, "x509", "CN=a")}, tree.PermRead, true},
		{"x509 other", &Requester{Conn: Conn{X509: "CN=b"}}, []tree.ACL{entry(31, "x509", "CN=a")}, tree.PermRead, false},
		{"no certificate", &Requester{}, []tree.ACL{entry(31, "x509", "")}, tree.PermRead, false},
		{"super", &Requester{IDs: []session.Identity{{Scheme: "super"}}}, []tree.ACL{entry(0, "digest", "u:h")}, tree.PermAdmin, true},
		{"sasl", sasl("bob"), []tree.ACL{entry(31, "sasl", "bob")}, tree.PermWrite, true},
		{"sasl other", sasl("bob"), []tree.ACL{entry(31, "sasl", "alice")}, tree.PermWrite, false},
		{"sasl's super matches every sasl entry", sasl("super"), []tree.ACL{entry(31, "sasl", "alice")}, tree.PermWrite, true},
		{"sasl's super matches no other scheme", sasl("super"), []tree.ACL{entry(31, "digest", "super:h"), entry(31, "x509", "CN=super")}, tree.PermWrite, false},
		{"sasl of another scheme", &Requester{IDs: []session.Identity{{Scheme: "digest", ID: "bob"}}}, []tree.ACL{entry(31, "sasl", "bob")}, tree.PermRead, false},
		{"sasl in the other case", sasl("Bob"), []tree.ACL{entry(31, "sasl", "bob")}, tree.PermRead, false},
		{"auth is never matched", &Requester{IDs: []session.Identity{{Scheme: "auth"}}}, []tree.ACL{entry(31, "auth", "")}, tree.PermRead, false},
	}
	for _, c := range cases {
		if got := c.r.Allowed(c.acl, c.perm); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWhoAmI: a digest shows its user, never its hash; super has no user.
func TestWhoAmI(t *testing.T) {
	r := &Requester{Conn: Conn{IP: netip.MustParseAddr("::ffff:127.0.0.1"), X509: "CN=c"},
		IDs: []session.Identity{{Scheme: "super"}, {Scheme: "digest", ID: "super:h"}, {Scheme: "sasl", ID: "bob"}}}
	want := []session.Identity{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "x509", ID: "CN=c"}, {Scheme: "super"}, {Scheme: "digest", ID: "super"}, {Scheme: "sasl", ID: "bob"}}
	if got := r.WhoAmI(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}
