package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/test/cluster"
)

// TestCopy copies from a coordd cluster, as a ZooKeeper ensemble over
// ZooKeeper's protocol, into the test server: data, nesting, sequential
// names (and the counter past them), ephemerals left out, /zookeeper left
// out; then the conflict modes, and bad input.
func TestCopy(t *testing.T) {
	src := cluster.New(t, 1, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, err := client.Connect(ctx, src.Servers())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(context.Background())
	mk := func(p, data string, mode client.CreateMode) string {
		t.Helper()
		name, err := sc.Create(ctx, p, []byte(data), mode)
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	mk("/app", "root data", client.CreateMode{})
	mk("/app/config", `{"a":1}`, client.CreateMode{})
	mk("/app/config/deep", "", client.CreateMode{})
	mk("/app/queue", "", client.CreateMode{})
	var jobs []string
	for i := range 12 {
		jobs = append(jobs, mk("/app/queue/job-", fmt.Sprint("job ", i), client.CreateMode{Sequential: true}))
	}
	for _, j := range jobs[:9] { // consumed: the queue holds 0000000009..11
		if err := sc.Delete(ctx, j, -1); err != nil {
			t.Fatal(err)
		}
	}
	mk("/app/live", "", client.CreateMode{Kind: client.Ephemeral})
	mk("/app/lock-", "", client.CreateMode{Kind: client.Ephemeral, Sequential: true})
	mk("/other", "x", client.CreateMode{})
	zkServers := strings.Join(src.Servers(), ",")

	fresh(t, "/copied")
	fresh(t, "/whole")
	var out copyJSON
	if err := json.Unmarshal([]byte(ok(t, "copy", "-o", "json", zkServers, "/app", "/copied/app")), &out); err != nil {
		t.Fatal(err)
	}
	if out.Copied != 7 || out.Ephemeral != 2 || out.Existing != 0 || out.SeqRaised != 1 || len(out.Warnings) != 0 {
		t.Fatalf("copy summary %+v", out)
	}
	for p, want := range map[string]string{"/copied/app": "root data", "/copied/app/config": `{"a":1}`, "/copied/app/config/deep": "",
		"/copied/app/queue/job-0000000011": "job 11", "/copied/app/queue/job-0000000009": "job 9"} {
		if got := ok(t, "get", p); got != want+"\n" {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	if got := ok(t, "ls", "/copied/app"); got != "config\nqueue\n" {
		t.Errorf("ls /copied/app (the ephemerals left out): %q", got)
	}
	// The queue's counter goes on past the copied names.
	if got := ok(t, "create", "-s", "/copied/app/queue/job-", "new"); got != "/copied/app/queue/job-0000000012\n" {
		t.Errorf("a sequential create after the copy made %q", got)
	}

	// Conflicts: fail (the default), skip, overwrite.
	r := ctl(t, "-o", "json", "copy", zkServers, "/app", "/copied/app")
	wantRefusal(t, r, "NodeExists", "--on-conflict skip")
	if err := json.Unmarshal([]byte(ok(t, "copy", "-o", "json", "--on-conflict", "skip", zkServers, "/app", "/copied/app")), &out); err != nil {
		t.Fatal(err)
	}
	if out.Copied != 0 || out.Existing != 7 || out.Overwritten != 0 {
		t.Fatalf("copy --on-conflict skip: %+v", out)
	}
	if _, err := sc.Set(ctx, "/app/config", []byte(`{"a":2}`), -1); err != nil {
		t.Fatal(err)
	}
	mk("/app/config/added", "new at the source", client.CreateMode{})
	if err := json.Unmarshal([]byte(ok(t, "copy", "-o", "json", "--on-conflict=overwrite", zkServers, "/app", "/copied/app")), &out); err != nil {
		t.Fatal(err)
	}
	if out.Copied != 1 || out.Existing != 7 || out.Overwritten != 1 {
		t.Fatalf("copy --on-conflict overwrite: %+v", out)
	}
	if got := ok(t, "get", "/copied/app/config"); got != `{"a":2}`+"\n" {
		t.Errorf("overwritten data %q", got)
	}

	// The whole tree: / holds /zookeeper too, which is never copied.
	text := ok(t, "copy", zkServers, "/", "/whole")
	if !strings.HasPrefix(text, "copied 10 znodes from / to /whole: 2 ephemerals left out") {
		t.Errorf("copy / printed %q", text)
	}
	if got := ok(t, "ls", "/whole"); got != "app\nother\n" {
		t.Errorf("ls /whole: %q", got)
	}

	for _, args := range [][]string{{"copy"}, {"copy", zkServers}, {"copy", "--on-conflict", "merge", zkServers, "/a"}, {"copy", zkServers, "a"}, {"copy", zkServers, "/a/", "/b"}, {"copy", ":::", "/a"}} {
		if r := ctl(t, args...); r.code != 2 {
			t.Errorf("coordctl %q: exit %d, want 2 (%q)", args, r.code, r.stderr)
		}
	}
	r = ctl(t, "-o", "json", "--timeout", "1s", "copy", freeAddr(t), "/app", "/nowhere")
	wantRefusal(t, r, "ConnectionFailed", "no session with ZooKeeper")

	// ACLs: a protected subtree needs an identity to read it, and arrives
	// with its ACLs; a node whose ACL shows hidden digests is refused.
	if err := sc.AddAuth(ctx, "digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	alice := client.DigestACL(client.PermAll, "alice", "pw")
	mk("/sec", "secret", client.CreateMode{ACL: alice})
	mk("/sec/child", "open child", client.CreateMode{})
	mk("/sec/guarded", "", client.CreateMode{ACL: append(client.ReadOnly(), alice...)})
	fresh(t, "/copied-sec")
	r = ctl(t, "-o", "json", "copy", zkServers, "/sec", "/copied-sec")
	wantRefusal(t, r, "NoAuth", "--from-auth")
	if err := json.Unmarshal([]byte(ok(t, "copy", "-o", "json", "--from-auth", "digest:alice:pw", "--on-conflict", "skip", zkServers, "/sec", "/copied-sec")), &out); err != nil {
		t.Fatal(err)
	}
	if out.ACLsSet != 2 {
		t.Fatalf("copy of /sec: %+v", out)
	}
	tc, err := client.Connect(ctx, []string{server(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(context.Background())
	if _, _, err := tc.Get(ctx, "/copied-sec"); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("the copied /sec without alice's identity: %v, want NoAuth", err)
	}
	if err := tc.AddAuth(ctx, "digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string][]client.ACL{"/copied-sec": alice, "/copied-sec/child": client.OpenACL(), "/copied-sec/guarded": append(client.ReadOnly(), alice...)} {
		acl, _, err := tc.GetACL(ctx, p)
		if err != nil || fmt.Sprint(acl) != fmt.Sprint(want) {
			t.Errorf("ACL of %s: %v (%v), want %v", p, acl, err, want)
		}
	}
	if data, _, err := tc.Get(ctx, "/copied-sec"); err != nil || string(data) != "secret" {
		t.Errorf("/copied-sec: %q %v", data, err)
	}
	fresh(t, "/copied-guarded")
	r = ctl(t, "-o", "json", "copy", zkServers, "/sec/guarded", "/copied-guarded")
	wantRefusal(t, r, "NoAuth", "digests hidden")
}
