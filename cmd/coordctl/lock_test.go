package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// The tests of lock, elect and locks. CMD is always a small sh script; its
// files are passed as $1, $2, ... (sh -c SCRIPT sh FILE...).

var (
	exitSupportOnce sync.Once
	exitSupportErr  string
)

// needExitStatus skips t unless main.go's report passes an
// exitStatusError's status through (and routes signals to the verb); see
// TestLockExitStatus, which fails instead.
func needExitStatus(t *testing.T) {
	t.Helper()
	exitSupportOnce.Do(func() {
		p := "/t/lock/probe"
		fresh(t, p)
		if r := ctl(t, "lock", p, "--", "sh", "-c", "exit 3"); r.code != 3 {
			exitSupportErr = "coordctl lock exits " + strconv.Itoa(r.code) + ", not CMD's status 3; stderr: " + r.stderr
		}
	})
	if exitSupportErr != "" {
		t.Skipf("needs main.go to honour exitStatusError and routeSignal: %s", exitSupportErr)
	}
}

func lockPath(t *testing.T, name string) string {
	t.Helper()
	p := "/t/lock/" + name
	fresh(t, p)
	return p
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// waitFile waits until the file at path contains s.
func waitFile(t *testing.T, path, s string) {
	t.Helper()
	if !poll(10*time.Second, func() bool { return strings.Contains(readFile(path), s) }) {
		t.Fatalf("%s never contained %q; it has %q", path, s, readFile(path))
	}
}

func contenders(t *testing.T, path string) locksJSON {
	t.Helper()
	var out locksJSON
	if err := json.Unmarshal([]byte(ok(t, "locks", "-o", "json", path)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitContenders waits until path has that many holders and waiters.
func waitContenders(t *testing.T, path string, holders, waiting int) locksJSON {
	t.Helper()
	var out locksJSON
	if !poll(10*time.Second, func() bool {
		out = contenders(t, path)
		return len(out.Holders) == holders && len(out.Waiting) == waiting
	}) {
		t.Fatalf("locks %s: want %d holders and %d waiting, have %+v", path, holders, waiting, out)
	}
	return out
}

// holdScript holds until signalled: it writes its token to $1, and runs
// its sleeps in the background so that its traps run at once.
const holdScript = `echo "$COORD_LOCK_TOKEN" > "$1.tmp"; mv "$1.tmp" "$1"; while :; do sleep 1 & wait $!; done`

// hold starts a lock on path whose CMD writes its token to a file and
// waits; it returns the run and the token.
func hold(t *testing.T, path string, flags ...string) (*background, int64) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	args := append(append([]string{"lock"}, flags...), path, "--", "sh", "-c", holdScript, "sh", f)
	b := start(t, args...)
	if !poll(10*time.Second, func() bool { return strings.HasSuffix(readFile(f), "\n") }) {
		t.Fatalf("the holder never ran; stderr:\n%s", b.stderr.String())
	}
	tok, err := strconv.ParseInt(strings.TrimSpace(readFile(f)), 10, 64)
	if err != nil || tok <= 0 {
		t.Fatalf("token %q: %v", readFile(f), err)
	}
	return b, tok
}

func TestLockExitStatus(t *testing.T) {
	p := lockPath(t, "exit")
	r := ctl(t, "lock", p, "--", "sh", "-c", `echo $COORD_LOCK_TOKEN; exit 3`)
	if r.code != 3 {
		t.Fatalf("lock -- sh -c 'exit 3': exit %d, want CMD's 3 (main.go's report must return an exitStatusError's code); stderr:\n%s", r.code, r.stderr)
	}
	if tok, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64); err != nil || tok <= 0 {
		t.Fatalf("COORD_LOCK_TOKEN = %q", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr: %q", r.stderr)
	}
	if r := ctl(t, "lock", p, "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("lock -- true: exit %d, stderr %q", r.code, r.stderr)
	}
	// Killed by a signal: 128+N, as a shell reports it.
	if r := ctl(t, "lock", p, "--", "sh", "-c", `kill -KILL $$`); r.code != 128+9 {
		t.Errorf("CMD killed by SIGKILL: exit %d, want 137", r.code)
	}
	if r := ctl(t, "lock", p, "--", "/nonexistent/cmd"); r.code != 127 {
		t.Errorf("CMD not found: exit %d, want 127; stderr %q", r.code, r.stderr)
	}
	// Flags after PATH; no "--".
	if r := ctl(t, "lock", p, "--wait", "5s", "sh", "-c", "exit 4"); r.code != 4 {
		t.Errorf("lock PATH --wait 5s CMD: exit %d, want 4; stderr %q", r.code, r.stderr)
	}
	// Nothing is left behind.
	if out := contenders(t, p); len(out.Holders)+len(out.Waiting) != 0 {
		t.Errorf("left behind: %+v", out)
	}
}

// TestLockNames: lock takes a bare name as /locks/NAME, and locks finds
// it by that name; a name that can be no path is a usage error, said
// without internal package names.
func TestLockNames(t *testing.T) {
	needExitStatus(t)
	const name = "coordctl-test-name"
	fresh(t, "/locks/"+name)
	holder, tok := hold(t, name)
	out := waitContenders(t, "/locks/"+name, 1, 0)
	if byName := contenders(t, name); byName.Path != "/locks/"+name || len(byName.Holders) != 1 || byName.Holders[0].Token != tok || byName.Holders[0].Value != "" {
		t.Errorf("locks %s: %+v; by path: %+v", name, byName, out)
	}
	// While an election of that name runs too, the name is ambiguous.
	fresh(t, "/elections/"+name)
	f := filepath.Join(t.TempDir(), "leader")
	leader := start(t, "elect", name, "--", "sh", "-c", `echo "$COORD_LEADER_TOKEN" > "$1"; while :; do sleep 1 & wait $!; done`, "sh", f)
	waitFile(t, f, "\n")
	want := `coordctl: locks: "` + name + `" names both the lock /locks/` + name + ` and the election /elections/` + name + `: give the path` + "\n"
	if r := ctl(t, "locks", name); r.code != 2 || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("locks %s with both in use: exit %d, stderr %q; want exit 2, %q", name, r.code, r.stderr, want)
	}
	leader.sig <- syscall.SIGTERM
	leader.wait(t)
	holder.sig <- syscall.SIGTERM
	holder.wait(t)

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"lock", "a//b", "--", "true"}, `coordctl: lock: invalid name or path "a//b": must not contain "//"` + "\n"},
		{[]string{"elect", "/x/", "--", "true"}, `coordctl: elect: invalid name or path "/x/": must not end with "/"` + "\n"},
		{[]string{"locks", "a//b"}, `coordctl: locks: invalid name or path "a//b": must not contain "//"` + "\n"},
	} {
		r := ctl(t, tc.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, tc.msg) || strings.Contains(r.stderr, "lockrecipe") {
			t.Errorf("coordctl %q: exit %d, stderr %q; want exit 2, %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}
}

func TestLockUsage(t *testing.T) {
	for _, args := range [][]string{
		{"lock"},
		{"lock", "/t/lock/u"},
		{"lock", "/t/lock/u", "--"},
		{"lock", "--try", "--wait", "1s", "/t/lock/u", "--", "true"},
		{"lock", "-s", "-1", "/t/lock/u", "--", "true"},
		{"elect", "x"},
		{"locks"},
	} {
		if r := ctl(t, args...); r.code != 2 {
			t.Errorf("coordctl %q: exit %d, want 2; stderr %q", args, r.code, r.stderr)
		}
	}
}

func TestLockMutualExclusion(t *testing.T) {
	needExitStatus(t)
	p := lockPath(t, "mutex")
	log := filepath.Join(t.TempDir(), "log")
	const script = `echo "start $COORD_LOCK_TOKEN" >> "$1"; sleep 0.2; echo "end $COORD_LOCK_TOKEN" >> "$1"`
	const n = 3
	var runs []*background
	for range n {
		runs = append(runs, start(t, "lock", p, "--", "sh", "-c", script, "sh", log))
	}
	for i, b := range runs {
		if code := b.wait(t); code != 0 {
			t.Fatalf("run %d: exit %d; stderr:\n%s", i, code, b.stderr.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(readFile(log)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("log:\n%s", readFile(log))
	}
	var last int64
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(s) != 2 || len(e) != 2 || s[0] != "start" || e[0] != "end" || s[1] != e[1] {
			t.Fatalf("overlapping holders; log:\n%s", readFile(log))
		}
		tok, err := strconv.ParseInt(s[1], 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("tokens not increasing; log:\n%s", readFile(log))
		}
		last = tok
	}
}

func TestLockTryAndWait(t *testing.T) {
	needExitStatus(t)
	p := lockPath(t, "try")
	b, _ := hold(t, p)

	began := time.Now()
	r := ctl(t, "lock", "--try", p, "--", "sh", "-c", "echo ran")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "held by another owner") {
		t.Fatalf("--try on a held lock: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("--try took %s", d)
	}

	r = ctl(t, "lock", "--wait", "300ms", p, "--", "sh", "-c", "echo ran")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "not acquired within 300ms") {
		t.Fatalf("--wait 300ms on a held lock: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The waiting nodes are gone: only the holder is left.
	waitContenders(t, p, 1, 0)

	// SIGTERM is forwarded; the script dies of it, so does coordctl's status.
	b.sig <- syscall.SIGTERM
	if code := b.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder: exit %d, want 143; stderr:\n%s", code, b.stderr.String())
	}
	waitContenders(t, p, 0, 0)
	if r := ctl(t, "lock", "--try", p, "--", "true"); r.code != 0 {
		t.Fatalf("--try on a free lock: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestLockSignalForwarding(t *testing.T) {
	needExitStatus(t)
	p := lockPath(t, "signals")
	dir := t.TempDir()
	ready, marks := filepath.Join(dir, "ready"), filepath.Join(dir, "marks")
	script := `trap 'echo usr1 >> "$2"' USR1; trap 'echo hup >> "$2"' HUP; trap 'echo term >> "$2"; exit 7' TERM; ` +
		`echo ready > "$1"; while :; do sleep 1 & wait $!; done`
	b := start(t, "lock", p, "--", "sh", "-c", script, "sh", ready, marks)
	waitFile(t, ready, "ready")
	b.sig <- syscall.SIGUSR1
	waitFile(t, marks, "usr1")
	b.sig <- syscall.SIGHUP
	waitFile(t, marks, "hup")
	b.sig <- syscall.SIGTERM
	if code := b.wait(t); code != 7 {
		t.Fatalf("exit %d, want the trap's 7; stderr:\n%s", code, b.stderr.String())
	}
	if got := readFile(marks); got != "usr1\nhup\nterm\n" {
		t.Fatalf("CMD saw %q", got)
	}
	waitContenders(t, p, 0, 0)
}

func TestLockInterruptWhileWaiting(t *testing.T) {
	needExitStatus(t)
	p := lockPath(t, "interrupt")
	holder, tok := hold(t, p)
	ran := filepath.Join(t.TempDir(), "ran")
	w1 := start(t, "lock", p, "--", "sh", "-c", `echo ran > "$1"`, "sh", ran)
	waitContenders(t, p, 1, 1)
	w2 := start(t, "lock", p, "--", "sh", "-c", `echo ran > "$1"`, "sh", ran)
	out := waitContenders(t, p, 1, 2)

	// locks: the holder and the waiters in queue order, with sessions,
	// server, time and token.
	if out.Path != p {
		t.Errorf("path %q", out.Path)
	}
	h := out.Holders[0]
	if h.Token != tok {
		t.Errorf("holder's token %d, CMD's COORD_LOCK_TOKEN %d", h.Token, tok)
	}
	all := append([]contenderJSON{h}, out.Waiting...)
	seen := map[string]bool{}
	for i, c := range all {
		if !strings.Contains(c.Node, "-lock-") || !strings.HasPrefix(c.Session, "0x") || c.Server != "1" {
			t.Errorf("contender %d: %+v", i, c)
		}
		if since, err := time.Parse(time.RFC3339, c.Since); err != nil || time.Since(since) > time.Minute {
			t.Errorf("contender %d: since %q: %v", i, c.Since, err)
		}
		if i > 0 && c.Token <= all[i-1].Token {
			t.Errorf("not in queue order: %+v", all)
		}
		if seen[c.Session] {
			t.Errorf("session %s twice: %+v", c.Session, all)
		}
		seen[c.Session] = true
	}
	text := ok(t, "locks", p)
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 4 ||
		!strings.HasPrefix(lines[0], "ROLE") || !strings.HasPrefix(lines[1], "holder ") ||
		!strings.HasPrefix(lines[2], "waiting ") || !strings.Contains(lines[1], strconv.FormatInt(tok, 10)) {
		t.Errorf("locks (text):\n%s", text)
	}

	w1.sig <- syscall.SIGINT
	if code := w1.wait(t); code != 130 {
		t.Fatalf("SIGINT while waiting: exit %d, want 130; stderr:\n%s", code, w1.stderr.String())
	}
	out = waitContenders(t, p, 1, 1)
	if out.Waiting[0].Session != all[2].Session {
		t.Errorf("the wrong waiter left: %+v", out)
	}
	w2.sig <- syscall.SIGTERM
	if code := w2.wait(t); code != 143 {
		t.Fatalf("SIGTERM while waiting: exit %d, want 143; stderr:\n%s", code, w2.stderr.String())
	}
	waitContenders(t, p, 1, 0)
	if _, err := os.Stat(ran); err == nil {
		t.Error("an interrupted waiter ran CMD")
	}
	holder.sig <- syscall.SIGTERM
	holder.wait(t)
}

func TestLockLost(t *testing.T) {
	needExitStatus(t)
	for _, tc := range []struct {
		name, trap string
		grace      string
	}{
		{"term", `trap 'echo term >> "$2"; exit 0' TERM`, "10s"},
		{"kill", `trap 'echo term >> "$2"' TERM`, "200ms"}, // survives SIGTERM
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lockPath(t, "lost-"+tc.name)
			dir := t.TempDir()
			ready, marks := filepath.Join(dir, "ready"), filepath.Join(dir, "marks")
			script := tc.trap + `; echo ready > "$1"; while :; do sleep 1 & wait $!; done`
			b := start(t, "lock", "--grace", tc.grace, p, "--", "sh", "-c", script, "sh", ready, marks)
			waitFile(t, ready, "ready")
			out := waitContenders(t, p, 1, 0)
			// Deleting the holder's node from another session loses the lock.
			ok(t, "delete", p+"/"+out.Holders[0].Node)
			if code := b.wait(t); code != exitLost {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLost, b.stderr.String())
			}
			if !strings.Contains(b.stderr.String(), "coordctl: lock lost\n") {
				t.Errorf("stderr:\n%s", b.stderr.String())
			}
			if got := readFile(marks); got != "term\n" {
				t.Errorf("CMD saw %q, want one SIGTERM", got)
			}
		})
	}
}

func TestLockSemaphore(t *testing.T) {
	needExitStatus(t)
	p := lockPath(t, "sem")
	a, ta := hold(t, p, "-s", "2")
	b, tb := hold(t, p, "-s", "2")
	if ta == tb {
		t.Errorf("both permits have token %d", ta)
	}
	f := filepath.Join(t.TempDir(), "third")
	c := start(t, "lock", "-s", "2", p, "--", "sh", "-c", holdScript, "sh", f)
	out := waitContenders(t, p, 2, 1)
	if toks := []int64{out.Holders[0].Token, out.Holders[1].Token}; toks[0] != ta || toks[1] != tb {
		t.Errorf("holders' tokens %v, want %d and %d", toks, ta, tb)
	}
	if r := ctl(t, "lock", "-s", "2", "--try", p, "--", "true"); r.code != 1 {
		t.Errorf("--try on a full semaphore: exit %d", r.code)
	}
	if _, err := os.Stat(f); err == nil {
		t.Fatal("a third holder ran")
	}
	a.sig <- syscall.SIGTERM
	a.wait(t)
	waitFile(t, f, "\n")
	waitContenders(t, p, 2, 0)
	b.sig <- syscall.SIGTERM
	c.sig <- syscall.SIGTERM
	b.wait(t)
	c.wait(t)
}

func TestElect(t *testing.T) {
	needExitStatus(t)
	name := "coordctl-test-elect"
	p := "/elections/" + name
	fresh(t, p)
	r := ctl(t, "elect", name, "--", "sh", "-c", `echo "$COORD_LEADER_TOKEN"; exit 5`)
	if r.code != 5 {
		t.Fatalf("exit %d, want 5; stderr %q", r.code, r.stderr)
	}
	if tok, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64); err != nil || tok <= 0 {
		t.Fatalf("COORD_LEADER_TOKEN = %q", r.stdout)
	}

	// A leader, then a candidate waiting behind it.
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "1"), filepath.Join(dir, "2")
	const script = `echo "$COORD_LEADER_TOKEN" > "$1"; while :; do sleep 1 & wait $!; done`
	l1 := start(t, "elect", "--value", "first", name, "--", "sh", "-c", script, "sh", f1)
	waitFile(t, f1, "\n")
	l2 := start(t, "elect", "--value", "second", name, "--", "sh", "-c", script, "sh", f2)
	out := waitContenders(t, p, 1, 1)
	if got := ok(t, "get", p+"/"+out.Holders[0].Node); got != "first\n" {
		t.Errorf("leader's value %q", got)
	}
	// locks takes the name elect took, and shows each candidate's value.
	byName := contenders(t, name)
	if byName.Path != p || len(byName.Holders) != 1 || byName.Holders[0].Value != "first" || len(byName.Waiting) != 1 || byName.Waiting[0].Value != "second" {
		t.Errorf("locks %s: %+v", name, byName)
	}
	if text := ok(t, "locks", name); !regexpLine(text, `^ROLE +NODE .* TOKEN +VALUE$`) || !regexpLine(text, `^holder .* first$`) || !regexpLine(text, `^waiting .* second$`) {
		t.Errorf("locks %s (text):\n%s", name, text)
	}
	if !strings.Contains(out.Holders[0].Node, "-elect-") || strconv.FormatInt(out.Holders[0].Token, 10) != strings.TrimSpace(readFile(f1)) {
		t.Errorf("leader %+v, token %q", out.Holders[0], readFile(f1))
	}
	l1.sig <- syscall.SIGTERM
	if code := l1.wait(t); code != 143 {
		t.Errorf("leader: exit %d", code)
	}
	waitFile(t, f2, "\n")
	// Leadership lost: the leader's node deleted.
	out = waitContenders(t, p, 1, 0)
	ok(t, "delete", p+"/"+out.Holders[0].Node)
	if code := l2.wait(t); code != exitLost || !strings.Contains(l2.stderr.String(), "coordctl: leadership lost") {
		t.Fatalf("exit %d, stderr:\n%s", code, l2.stderr.String())
	}
}

// TestValueText: a contender's value fits one cell of locks' table.
func TestValueText(t *testing.T) {
	long := strings.Repeat("é", maxValueText+5)
	for _, tc := range []struct{ in, want string }{
		{"", "-"},
		{"host-1:4242", "host-1:4242"},
		{"two words", `"two words"`},
		{"line\nbreak", `"line\nbreak"`},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{long, strings.Repeat("é", maxValueText) + "…"},
	} {
		if got := valueText(tc.in); got != tc.want {
			t.Errorf("valueText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLockDelayOutput: a contender kept for a lock-delay keeps its row, and
// a line after the table says until when; -o json has lockDelayUntil; stat
// prints it after ZooKeeper's fields.
func TestLockDelayOutput(t *testing.T) {
	until := time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)
	k := contenderJSONOf(lockrecipe.Contender{Node: "_c_x-lock-0000000001", Session: 0x1f, Token: 42, Created: until.Add(-time.Minute), LockDelayUntil: until})
	if k.LockDelayUntil != "2026-03-04T05:06:07.890Z" {
		t.Fatalf("lockDelayUntil %q", k.LockDelayUntil)
	}
	b, err := json.Marshal(k)
	if err != nil || !strings.Contains(string(b), `"lockDelayUntil":"2026-03-04T05:06:07.890Z"`) {
		t.Fatalf("json %s %v", b, err)
	}
	w := contenderJSONOf(lockrecipe.Contender{Node: "_c_y-lock-0000000002", Session: 0x20, Token: 43, Created: until})
	if b, _ := json.Marshal(w); strings.Contains(string(b), "lockDelayUntil") {
		t.Fatalf("a contender without a lock-delay: %s", b)
	}
	var out strings.Builder
	writeLocks(&out, locksJSON{Path: "/locks/m", Holders: []contenderJSON{k}, Waiting: []contenderJSON{w}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "holder ") || !strings.HasPrefix(lines[2], "waiting ") ||
		lines[3] != "_c_x-lock-0000000001: session 0x1f expired; the lock-delay keeps its node until 2026-03-04T05:06:07.890Z" {
		t.Fatalf("locks:\n%s", out.String())
	}
	out.Reset()
	writeStat(&out, client.Stat{EphemeralOwner: 0x1f, LockDelayUntil: time.Now().Add(3 * time.Second).UnixMilli()})
	if !regexp.MustCompile(`\nlockDelayUntil = .* \(the owner's session expired; the node is kept for a lock-delay until then, [23](\.\d)?s from now\)\n$`).MatchString(out.String()) {
		t.Fatalf("stat:\n%s", out.String())
	}
	out.Reset()
	writeStat(&out, client.Stat{EphemeralOwner: 0x1f})
	if strings.Contains(out.String(), "lockDelay") {
		t.Fatalf("stat of a live ephemeral:\n%s", out.String())
	}
}
