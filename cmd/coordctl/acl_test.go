package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestACLVerbs: digest, create -a, getacl, setacl (with -v), addauth in the
// shell, whoami, and --auth / $COORD_AUTH for one-shot commands; the
// password shows nowhere in the output, the errors included.
func TestACLVerbs(t *testing.T) {
	addr := ownServer(t)
	at := func(args ...string) result { return bare(t, append([]string{"--servers", addr}, args...)...) }
	const password = "pa55-w0rd"
	d := at("digest", "alice:"+password)
	if d.code != 0 || d.stdout != "alice:/5s/vTV2LF46Fp5MII1Hyor6FGo=\n" {
		t.Fatalf("digest: %+v", d)
	}
	digest := strings.TrimSpace(d.stdout)
	var out, errOut strings.Builder
	if code := runWith([]string{"digest", "-"}, strings.NewReader("alice:"+password+"\n"), &out, &errOut, nil); code != 0 || out.String() != d.stdout {
		t.Fatalf("digest -: exit %d, %q %q", code, out.String(), errOut.String())
	}
	if r := at("create", "-a", "digest:"+digest+":cdrwa,world:anyone:r", "/a", "x"); r.code != 0 {
		t.Fatalf("create -a: %+v", r)
	}
	if r := at("getacl", "/a"); r.code != 0 || r.stdout != "digest:alice:x:cdrwa\nworld:anyone:r\n" {
		t.Fatalf("getacl without ADMIN: %+v", r)
	}
	if r := at("set", "/a", "y"); r.code != 1 || !strings.Contains(r.stderr, "not authorized") {
		t.Fatalf("set without auth: %+v", r)
	}
	if r := at("-o", "json", "set", "/a", "y"); !strings.Contains(r.stderr, `"code":"NoAuth"`) {
		t.Fatalf("set without auth, json: %+v", r)
	}
	auth := "--auth=digest:alice:" + password
	if r := at(auth, "set", "/a", "y"); r.code != 0 {
		t.Fatalf("set with --auth: %+v", r)
	}
	if r := at(auth, "getacl", "/a"); r.code != 0 || r.stdout != "digest:"+digest+":cdrwa\nworld:anyone:r\n" {
		t.Fatalf("getacl with ADMIN: %+v", r)
	}
	t.Setenv(authEnv, "digest:alice:"+password)
	if r := at("-o", "json", "getacl", "/a"); r.code != 0 {
		t.Fatalf("getacl with $COORD_AUTH: %+v", r)
	} else {
		var got aclJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.ACL) != 2 || got.ACL[0].ID != digest || got.ACL[0].Perms != 31 || got.Stat.Aversion != 0 {
			t.Fatalf("getacl json: %s %v", r.stdout, err)
		}
	}
	if r := at("setacl", "-v", "1", "/a", "world:anyone:cdrwa"); r.code != 1 || !strings.Contains(r.stderr, "version does not match") {
		t.Fatalf("setacl with a stale version: %+v", r)
	}
	if r := at("setacl", "-s", "-v", "0", "/a", "world:anyone:cdrwa"); r.code != 0 || !strings.Contains(r.stdout, "aclVersion = 1") {
		t.Fatalf("setacl: %+v", r)
	}
	if r := at("whoami"); r.code != 0 || r.stdout != "ip:127.0.0.1\ndigest:alice\n" {
		t.Fatalf("whoami: %+v", r)
	}
	t.Setenv(authEnv, "")
	if r := at("setacl", "/a", "world:anyone:q"); r.code != 2 {
		t.Fatalf("setacl with a bad ACL: %+v", r)
	}
	if r := at("--auth", "nope:"+password, "ls", "/"); r.code != 1 || !strings.Contains(r.stderr, "authentication failed") {
		t.Fatalf("--auth with an unknown scheme: %+v", r)
	}
	// The shell: addauth holds for the rest of the session.
	var sout, serr strings.Builder
	script := "create -a auth::cdrwa /mine\naddauth digest bob:" + password + "\ncreate -a auth::cdrwa /mine\ngetacl /mine\nwhoami\naddauth foo bar\n"
	code := runWith([]string{"--servers", addr}, strings.NewReader(script), &sout, &serr, nil)
	want := "/mine\ndigest:bob:cWT0g1tmthghwxfR1iOs4ggvMGQ=:cdrwa\nip:127.0.0.1\ndigest:bob\n"
	if code != 1 || sout.String() != want || !strings.Contains(serr.String(), "InvalidACL") && !strings.Contains(serr.String(), "invalid ACL") {
		t.Fatalf("shell: exit %d\nstdout %q\nwant %q\nstderr %q", code, sout.String(), want, serr.String())
	}
	for _, s := range []string{sout.String(), serr.String()} {
		if strings.Contains(s, password) {
			t.Fatalf("the password shows: %q", s)
		}
	}
}
