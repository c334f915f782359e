package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/test/cluster"
)

// ctlAt runs coordctl against the given servers.
func ctlAt(t *testing.T, servers []string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--servers", strings.Join(servers, ",")}, args...)
	code := runWith(full, strings.NewReader(""), &out, &errOut, nil)
	r := result{out.String(), errOut.String(), code}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Fatalf("coordctl %q crashed:\n%s", args, r.stderr)
	}
	return r
}

// members decodes member list -o json.
func members(t *testing.T, out string) membersJSON {
	t.Helper()
	var m membersJSON
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("decoding %q: %v", out, err)
	}
	return m
}

func voterSets(m membersJSON) (v, nv string) {
	var vs, nvs []string
	for _, x := range m.Members {
		if x.Voter {
			vs = append(vs, x.ID)
		} else {
			nvs = append(nvs, x.ID)
		}
	}
	return strings.Join(vs, ","), strings.Join(nvs, ",")
}

// wantRefusal checks a failed run: exit 1 and, with -o json, the code.
func wantRefusal(t *testing.T, r result, code, substr string) {
	t.Helper()
	var e errorJSON
	if r.code != 1 || json.Unmarshal([]byte(r.stderr), &e) != nil || e.Error.Code != code || !strings.Contains(e.Error.Message, substr) {
		t.Fatalf("exit %d, stderr %q; want exit 1, code %s, message containing %q", r.code, r.stderr, code, substr)
	}
}

// TestMemberVerbs: member list, add (as a non-voter, then promoted),
// promote, remove, leader transfer, status's voter column, and each
// refusal with its code and no change.
func TestMemberVerbs(t *testing.T) {
	c := cluster.New(t, 3, cluster.Options{})
	servers := c.Servers()[:3]
	ctl := func(args ...string) result { t.Helper(); return ctlAt(t, servers, args...) }
	okAt := func(args ...string) string {
		t.Helper()
		r := ctl(args...)
		if r.code != 0 {
			t.Fatalf("coordctl %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		return r.stdout
	}

	m := members(t, okAt("member", "list", "-o", "json"))
	if v, nv := voterSets(m); v != "1,2,3" || nv != "" || m.Leader == "" || m.ConfigIndex == 0 {
		t.Fatalf("member list: %+v", m)
	}
	text := okAt("member", "list")
	if !strings.HasPrefix(text, "ID  PEER ") || !strings.Contains(text, " VOTER ") || !strings.Contains(text, "leader: "+m.Leader+", configuration index: ") {
		t.Fatalf("member list printed:\n%s", text)
	}

	i4 := c.AddJoiner("4")
	peer4 := c.Members[i4].Cfg.PeerAddr
	m = members(t, okAt("member", "add", "4", peer4, "--non-voter", "-o", "json"))
	if v, nv := voterSets(m); v != "1,2,3" || nv != "4" {
		t.Fatalf("after member add --non-voter: %+v", m)
	}
	status := okAt("status")
	if !strings.Contains(status, " VOTER ") || !regexpLine(status, `^4 .* no +follower `) {
		t.Fatalf("status does not show 4 as a non-voter:\n%s", status)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(okAt("status", "-o", "json")), &st); err != nil || len(st.Members) != 4 || st.Members[3].Voter || !st.Members[0].Voter {
		t.Fatalf("status -o json: %+v (%v)", st, err)
	}

	wantRefusal(t, ctl("-o", "json", "member", "add", "4", "127.0.0.1:1"), "MemberExists", "id 4 is already a member")
	wantRefusal(t, ctl("-o", "json", "member", "add", "9", peer4), "MemberExists", "is already member 4's")
	wantRefusal(t, ctl("-o", "json", "member", "remove", "9"), "NoMember", "no member with id 9")
	wantRefusal(t, ctl("-o", "json", "leader", "transfer", "4"), "NotVoter", "not a voter")
	wantRefusal(t, ctl("-o", "json", "member", "promote", "1"), "AlreadyVoter", "voter already")

	m = members(t, okAt("member", "promote", "4", "-o", "json"))
	if v, nv := voterSets(m); v != "1,2,3,4" || nv != "" {
		t.Fatalf("after member promote: %+v", m)
	}
	if out := okAt("leader", "transfer", "4"); out != "leader: 4\n" {
		t.Fatalf("leader transfer 4 printed %q", out)
	}
	c.Eventually(10*time.Second, "server 4 to lead", func() bool { return c.LeaderIndex() == i4 })
	var lt struct{ Leader string }
	if err := json.Unmarshal([]byte(okAt("leader", "transfer", "-o", "json")), &lt); err != nil || lt.Leader == "" || lt.Leader == "4" {
		t.Fatalf("leader transfer to any: %+v (%v)", lt, err)
	}

	// One change at a time: while an add waits for a server that never
	// catches up (nothing runs at its address), another change is refused.
	i5 := c.AddJoiner("5")
	peer5 := c.Members[i5].Cfg.PeerAddr
	c.Stop(i5)
	addDone := make(chan result, 1)
	go func() { addDone <- ctlAt(t, servers, "-o", "json", "member", "add", "5", peer5, "--catch-up", "8s") }()
	c.Eventually(10*time.Second, "server 5 added as a non-voter", func() bool {
		r := ctl("member", "list", "-o", "json")
		return r.code == 0 && strings.Contains(r.stdout, `"id":"5"`)
	})
	wantRefusal(t, ctl("-o", "json", "member", "remove", "4"), "ReconfigInProgress", "in progress")
	wantRefusal(t, <-addDone, "NotCaughtUp", "member promote 5")
	m = members(t, okAt("member", "remove", "5", "-o", "json"))
	if v, nv := voterSets(m); v != "1,2,3,4" || nv != "" {
		t.Fatalf("after removing 5: %+v", m)
	}

	// Usage errors exit 2.
	for _, args := range [][]string{{"member"}, {"member", "add", "6"}, {"member", "drop", "1"}, {"member", "remove", "1", "--non-voter"}, {"leader"}, {"leader", "transfer", "1", "2"}} {
		if r := ctl(args...); r.code != 2 {
			t.Errorf("coordctl %q: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}

	// A removal that would leave no reachable majority of the voters: with
	// two of four down, removing a third live one leaves 1 of 3.
	m = members(t, okAt("member", "remove", "4", "-o", "json"))
	if v, _ := voterSets(m); v != "1,2,3" {
		t.Fatalf("after removing 4: %+v", m)
	}
	leader := c.WaitLeader(15 * time.Second)
	down, other := -1, -1
	for i := 0; i < 3; i++ {
		switch {
		case i == leader:
		case down < 0:
			down = i
		default:
			other = i
		}
	}
	downID, downAddr := c.Members[down].ID, c.Members[down].Cfg.ClientAddr
	c.Eventually(10*time.Second, "the leader to register every client address", func() bool {
		r := ctl("member", "list", "-o", "json")
		return r.code == 0 && strings.Contains(r.stdout, `"clientAddress":"`+downAddr+`"`)
	})
	c.Stop(down)
	live := []string{c.Members[leader].Cfg.ClientAddr, c.Members[other].Cfg.ClientAddr}
	// A member that is down shows the address it had, and "-" for what
	// only it could say.
	r := ctlAt(t, live, "status")
	if r.code != exitUnhealthy || !regexpLine(r.stdout, `^`+downID+` +`+regexp.QuoteMeta(downAddr)+` +yes +unreachable +- +-$`) {
		t.Fatalf("status with member %s down: exit %d\n%s", downID, r.code, r.stdout)
	}
	r = ctlAt(t, live, "member", "list")
	if r.code != 0 || !regexpLine(r.stdout, `^`+downID+` +\S+ +`+regexp.QuoteMeta(downAddr)+` +yes +unreachable +-$`) {
		t.Fatalf("member list with member %s down: exit %d\n%s", downID, r.code, r.stdout)
	}
	wantRefusal(t, ctlAt(t, live, "-o", "json", "member", "remove", c.Members[other].ID), "NewConfigNoQuorum", "not a majority")
	m = members(t, ctlAt(t, live, "member", "list", "-o", "json").stdout)
	if v, _ := voterSets(m); v != "1,2,3" {
		t.Fatalf("a refused removal changed the membership: %+v", m)
	}

	// With no leader at all, a change is asked again until --timeout, then
	// refused as Unavailable.
	c.Stop(leader)
	start := time.Now()
	wantRefusal(t, ctlAt(t, live[1:], "-o", "json", "--timeout", "1500ms", "member", "remove", c.Members[down].ID), "Unavailable", "leader")
	if took := time.Since(start); took < time.Second {
		t.Errorf("the refusal came after %v: the change was not asked again until --timeout", took)
	}
}

// TestRemoveLastVoterVerb: the only voter cannot be removed.
func TestRemoveLastVoterVerb(t *testing.T) {
	wantRefusal(t, ctl(t, "-o", "json", "member", "remove", "1"), "LastVoter", "last voter")
	if r := ctl(t, "member", "remove", "1"); r.code != 1 || !strings.Contains(r.stderr, "coordctl: member remove: member 1 is the last voter") {
		t.Fatalf("text refusal: exit %d, stderr %q", r.code, r.stderr)
	}
}

// regexpLine reports whether a line of s matches the regular expression.
func regexpLine(s, expr string) bool {
	return regexp.MustCompile("(?m)" + expr).MatchString(s)
}
