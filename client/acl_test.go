package client

import (
	"reflect"
	"testing"
)

// TestDigest: the digest is ZooKeeper's (values computed by ZooKeeper 3.8).
func TestDigest(t *testing.T) {
	if got := Digest("super", "secret"); got != "super:lK75jTNcA+U9vtVEw5vB51mj/w4=" {
		t.Fatalf("Digest = %q", got)
	}
	want := []ACL{{Perms: PermRead | PermWrite, Scheme: "digest", ID: "alice:V55/p2T0OpjQ+low3NVAH4aLvm0="}}
	if got := DigestACL(PermRead|PermWrite, "alice", "pw"); !reflect.DeepEqual(got, want) {
		t.Fatalf("DigestACL = %v", got)
	}
}

// TestParseACL: zkCli's scheme:id:perms, ids with colons, several entries.
func TestParseACL(t *testing.T) {
	got, err := ParseACL("world:anyone:r,digest:bob:abc=:cdrwa,ip:10.0.0.0/8:rw,auth::cdrwa")
	want := []ACL{
		{Perms: PermRead, Scheme: "world", ID: "anyone"},
		{Perms: PermAll, Scheme: "digest", ID: "bob:abc="},
		{Perms: PermRead | PermWrite, Scheme: "ip", ID: "10.0.0.0/8"},
		{Perms: PermAll, Scheme: "auth"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v %v", got, err)
	}
	for i, a := range want {
		if back, err := ParseACL(a.String()); err != nil || back[0] != want[i] {
			t.Errorf("%v does not read back: %v %v", a, back, err)
		}
	}
	for _, bad := range []string{"", "world", "world:anyone", "world:anyone:x", "world:anyone:r,"} {
		if _, err := ParseACL(bad); err == nil {
			t.Errorf("ParseACL(%q) accepted", bad)
		}
	}
	if PermAll.String() != "cdrwa" || Perm(0).String() != "" {
		t.Fatal(PermAll.String())
	}
	if !reflect.DeepEqual(CreatorAll(), []ACL{{Perms: PermAll, Scheme: "auth"}}) || ReadOnly()[0].Perms != PermRead || OpenACL()[0].Perms != PermAll {
		t.Fatal("helpers")
	}
}
