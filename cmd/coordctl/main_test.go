package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc"
	"github.com/coordd/coordd/test/cluster/freeport"
	"github.com/coordd/coordd/watch"
)

// One single-node server serves every test of the package; each test works
// under its own path.
var (
	srvOnce sync.Once
	srvNode *rpc.Node
	srvErr  error
	srvDir  string
)

// cleanups run after every test, before the shared server stops.
var cleanups []func()

func TestMain(m *testing.M) {
	// The test binary started as a helper process (see startHelper).
	switch os.Getenv(helperEnv) {
	case "main":
		main()
	case "tied":
		tiedHelper()
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if srvNode != nil {
		srvNode.Close()
	}
	if srvDir != "" {
		os.RemoveAll(srvDir)
	}
	os.Exit(code)
}

// freeAddr returns a free 127.0.0.1 address, never the same twice in the
// test process (freeport.Addr): a port probed with port 0 and closed can be
// handed to the next probe, and a server's client and peer addresses must
// differ.
func freeAddr(t testing.TB) string { return freeport.Addr(t) }

// testServerVersion is the build version the shared server reports.
const testServerVersion = "v0.0.0-test"

// server returns the address of the shared server, starting it on first use
// and waiting until it leads.
func server(t *testing.T) string {
	t.Helper()
	srvOnce.Do(func() {
		srvDir, srvErr = os.MkdirTemp("", "coordctl-test-")
		if srvErr != nil {
			return
		}
		srvNode, srvErr = rpc.NewNode(rpc.Config{
			ID: "1", DataDir: srvDir, ClientAddr: freeAddr(t), PeerAddr: freeAddr(t),
			Tick: 100 * time.Millisecond, MaxSessionTimeout: 10 * time.Second,
			HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 150 * time.Millisecond, Version: testServerVersion,
		})
		if srvErr != nil {
			return
		}
		if !poll(10*time.Second, srvNode.IsLeader) {
			srvErr = fmt.Errorf("server did not become leader")
		}
	})
	if srvErr != nil {
		t.Fatalf("starting the server: %v", srvErr)
	}
	return srvNode.ClientAddr()
}

// poll reports whether cond became true before the deadline.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockedBuffer is a bytes.Buffer safe for a running coordctl and a polling
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type result struct {
	stdout, stderr string
	code           int
}

// ctl runs coordctl against the test server with empty stdin.
func ctl(t *testing.T, args ...string) result {
	t.Helper()
	return ctlIn(t, "", args...)
}

func ctlIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--servers", server(t)}, args...)
	code := runWith(full, strings.NewReader(stdin), &out, &errOut, nil)
	r := result{out.String(), errOut.String(), code}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Fatalf("coordctl %q crashed:\n%s", args, r.stderr)
	}
	return r
}

// fresh deletes what an earlier run (go test -count) left under path.
func fresh(t *testing.T, path string) {
	t.Helper()
	if r := ctl(t, "deleteall", path); r.code != 0 && !strings.Contains(r.stderr, "node does not exist") {
		t.Fatalf("deleteall %s: %s", path, r.stderr)
	}
}

// ok runs coordctl and fails the test unless it succeeds.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := ctl(t, args...)
	if r.code != 0 {
		t.Fatalf("coordctl %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

// background is a coordctl running in a goroutine, interruptible through sig.
type background struct {
	stdout, stderr lockedBuffer
	sig            chan os.Signal
	done           chan int
}

func start(t *testing.T, args ...string) *background {
	t.Helper()
	b := &background{sig: make(chan os.Signal, 1), done: make(chan int, 1)}
	full := append([]string{"--servers", server(t)}, args...)
	go func() { b.done <- runWith(full, strings.NewReader(""), &b.stdout, &b.stderr, b.sig) }()
	t.Cleanup(func() {
		select {
		case b.sig <- syscall.SIGTERM:
		default:
		}
		b.wait(t)
	})
	return b
}

// waitOutput waits until stdout (or stderr) contains s.
func (b *background) waitOutput(t *testing.T, stderr bool, s string) {
	t.Helper()
	buf := &b.stdout
	if stderr {
		buf = &b.stderr
	}
	if !poll(10*time.Second, func() bool { return strings.Contains(buf.String(), s) }) {
		t.Fatalf("no %q in output; stdout:\n%s\nstderr:\n%s", s, b.stdout.String(), b.stderr.String())
	}
}

// wait returns the exit status once the run ends (at most 10s).
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-b.done:
		b.done <- code
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("coordctl did not finish; stdout:\n%s\nstderr:\n%s", b.stdout.String(), b.stderr.String())
		return -1
	}
}

// decode parses one JSON object and checks its exact key set.
func decode(t *testing.T, s string, keys ...string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %q: %v", s, err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(keys)
	if !reflect.DeepEqual(got, keys) {
		t.Fatalf("JSON keys %v, want %v in %s", got, keys, s)
	}
	return m
}

var statKeys = []string{"czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeralOwner", "dataLength", "numChildren"}

func unmarshal[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

func TestTextOutput(t *testing.T) {
	fresh(t, "/text")
	if got := ok(t, "create", "/text", "hello"); got != "/text\n" {
		t.Errorf("create printed %q", got)
	}
	if got := ok(t, "get", "/text"); got != "hello\n" {
		t.Errorf("get printed %q", got)
	}
	if got := ok(t, "set", "/text", "world"); got != "" {
		t.Errorf("set printed %q", got)
	}
	ok(t, "create", "/text/b")
	ok(t, "create", "/text/a", "")
	if got := ok(t, "create", "-s", "/text/seq-"); got != "/text/seq-0000000002\n" {
		t.Errorf("create -s printed %q", got)
	}
	if got := ok(t, "ls", "/text"); got != "a\nb\nseq-0000000002\n" {
		t.Errorf("ls printed %q", got)
	}
	stat := ok(t, "stat", "/text")
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(stat, "\n"), "\n") {
		name, _, found := strings.Cut(line, " = ")
		if !found {
			t.Fatalf("stat line %q is not 'field = value'", line)
		}
		names = append(names, name)
	}
	want := []string{"cZxid", "ctime", "mZxid", "mtime", "pZxid", "cversion", "dataVersion", "aclVersion", "ephemeralOwner", "dataLength", "numChildren"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("stat fields %v, want %v", names, want)
	}
	for _, line := range []string{"dataVersion = 1\n", "numChildren = 3\n", "dataLength = 5\n", "ephemeralOwner = 0x0\n", "cversion = 3\n"} {
		if !strings.Contains(stat, line) {
			t.Errorf("stat lacks %q:\n%s", line, stat)
		}
	}
	if got := ok(t, "get", "-s", "/text"); !strings.HasPrefix(got, "world\ncZxid = 0x") {
		t.Errorf("get -s printed %q", got)
	}
	if got := ok(t, "set", "-s", "-v", "1", "/text", "again"); !strings.Contains(got, "dataVersion = 2\n") {
		t.Errorf("set -s printed %q", got)
	}
	if got := ok(t, "get", "-sync", "/text"); got != "again\n" {
		t.Errorf("get -sync printed %q", got)
	}
	if got := ok(t, "get", "-sync", "-s", "/text"); !strings.HasPrefix(got, "again\ncZxid = 0x") || !strings.Contains(got, "dataVersion = 2\n") {
		t.Errorf("get -sync -s printed %q", got)
	}
	if r := ctl(t, "get", "-sync", "/text/missing"); r.code == 0 || !strings.Contains(r.stderr, "/text/missing") {
		t.Errorf("get -sync of a missing node: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := ok(t, "sync", "/text"); got != "" {
		t.Errorf("sync printed %q", got)
	}
	if got := ok(t, "delete", "-v", "0", "/text/a"); got != "" {
		t.Errorf("delete printed %q", got)
	}
	if got := ok(t, "version"); !strings.HasPrefix(got, "coordctl ") {
		t.Errorf("version printed %q", got)
	}
	status := ok(t, "status")
	if !strings.Contains(status, srvNode.ClientAddr()) || !strings.Contains(status, "leader: 1\n") ||
		!strings.HasPrefix(status, "ID  ADDRESS ") || !strings.Contains(status, " VERSION\n") || !strings.Contains(status, " "+testServerVersion+"\n") {
		t.Errorf("status printed:\n%s", status)
	}
}

func TestJSONOutput(t *testing.T) {
	fresh(t, "/json")
	m := decode(t, ok(t, "-o", "json", "create", "/json", "hello"), "path")
	if p := unmarshal[string](t, m["path"]); p != "/json" {
		t.Errorf("create path %q", p)
	}
	// -o after the verb, and at the end of the line.
	for _, args := range [][]string{{"get", "-o", "json", "/json"}, {"get", "/json", "-o", "json"}} {
		m = decode(t, ok(t, args...), "path", "data", "text", "stat")
		data, err := base64.StdEncoding.DecodeString(unmarshal[string](t, m["data"]))
		if err != nil || string(data) != "hello" {
			t.Errorf("get data %s (%v)", m["data"], err)
		}
		if text := unmarshal[string](t, m["text"]); text != "hello" {
			t.Errorf("get text %q", text)
		}
		stat := decode(t, string(m["stat"]), statKeys...)
		if v := unmarshal[int](t, stat["dataLength"]); v != 5 {
			t.Errorf("dataLength %d", v)
		}
	}
	// Empty data is an empty base64 string (and text), not null.
	ok(t, "create", "/json/empty")
	m = decode(t, ok(t, "-o", "json", "get", "/json/empty"), "path", "data", "text", "stat")
	if string(m["data"]) != `""` || string(m["text"]) != `""` {
		t.Errorf("empty data encoded as %s, text %s", m["data"], m["text"])
	}
	// Text is there only when the data is UTF-8; data always is.
	for _, tc := range []struct {
		data string
		text bool
	}{{"héllo, wörld ✓", true}, {"line\nbreak\ttab \"quoted\"", true}, {"\xff\xfe binary", false}, {"caf\xe9", false}} {
		ok(t, "set", "/json/empty", tc.data)
		keys := []string{"path", "data", "stat"}
		if tc.text {
			keys = append(keys, "text")
		}
		m = decode(t, ok(t, "-o", "json", "get", "/json/empty"), keys...)
		if d, err := base64.StdEncoding.DecodeString(unmarshal[string](t, m["data"])); err != nil || string(d) != tc.data {
			t.Errorf("data of %q read back %q (%v)", tc.data, d, err)
		}
		if tc.text && unmarshal[string](t, m["text"]) != tc.data {
			t.Errorf("text of %q read back %s", tc.data, m["text"])
		}
	}

	m = decode(t, ok(t, "-o", "json", "set", "/json", "world"), "path", "stat")
	stat := decode(t, string(m["stat"]), statKeys...)
	if v := unmarshal[int](t, stat["version"]); v != 1 {
		t.Errorf("version after set %d", v)
	}
	m = decode(t, ok(t, "-o", "json", "stat", "/json"), "path", "stat")
	stat = decode(t, string(m["stat"]), statKeys...)
	if v := unmarshal[int](t, stat["numChildren"]); v != 1 {
		t.Errorf("numChildren %d", v)
	}
	if unmarshal[int64](t, stat["czxid"]) <= 0 || unmarshal[int64](t, stat["ctime"]) <= 0 {
		t.Errorf("stat %s", m["stat"])
	}

	m = decode(t, ok(t, "-o", "json", "ls", "/json"), "path", "children")
	if c := unmarshal[[]string](t, m["children"]); !reflect.DeepEqual(c, []string{"empty"}) {
		t.Errorf("ls children %v", c)
	}
	m = decode(t, ok(t, "-o", "json", "ls", "/json/empty"), "path", "children")
	if string(m["children"]) != "[]" {
		t.Errorf("no children encoded as %s", m["children"])
	}
	decode(t, ok(t, "-o", "json", "sync", "/json"), "path")
	decode(t, ok(t, "-o", "json", "delete", "/json/empty"), "path")

	m = decode(t, ok(t, "-o", "json", "status"), "leader", "level", "members")
	if l := unmarshal[string](t, m["leader"]); l != "1" {
		t.Errorf("leader %q", l)
	}
	var members []map[string]json.RawMessage
	if err := json.Unmarshal(m["members"], &members); err != nil || len(members) != 1 {
		t.Fatalf("members %s (%v)", m["members"], err)
	}
	mem := decode(t, mustMarshal(t, members[0]), "id", "address", "voter", "role", "applied", "version", "level")
	if unmarshal[string](t, mem["id"]) != "1" || unmarshal[string](t, mem["address"]) != srvNode.ClientAddr() ||
		unmarshal[string](t, mem["role"]) != "leader" || !unmarshal[bool](t, mem["voter"]) || unmarshal[int64](t, mem["applied"]) <= 0 ||
		unmarshal[string](t, mem["version"]) != testServerVersion || unmarshal[int64](t, mem["level"]) < 2 {
		t.Errorf("member %v", members[0])
	}

	decode(t, ok(t, "-o", "json", "sessions"), "sessions")
	decode(t, ok(t, "-o", "json", "version"), "version")
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestErrors(t *testing.T) {
	fresh(t, "/errs")
	ok(t, "create", "/errs", "x")
	ok(t, "create", "/errs/child")
	cases := []struct {
		args   []string
		code   int
		stderr string // a prefix of stderr (whole lines when it ends in a newline)
	}{
		{[]string{"get", "/errs/missing"}, 1, "coordctl: /errs/missing: node does not exist\n"},
		{[]string{"stat", "/errs/missing"}, 1, "coordctl: /errs/missing: node does not exist\n"},
		{[]string{"ls", "/errs/missing"}, 1, "coordctl: /errs/missing: node does not exist\n"},
		{[]string{"deleteall", "/errs/missing"}, 1, "coordctl: /errs/missing: node does not exist\n"},
		{[]string{"create", "/errs"}, 1, "coordctl: /errs: node already exists\n"},
		{[]string{"create", "/errs/no/such"}, 1, "coordctl: /errs/no/such: parent node /errs/no does not exist\n"},
		{[]string{"set", "-v", "7", "/errs", "y"}, 1, "coordctl: /errs: version does not match: it has version 0, not 7\n"},
		{[]string{"delete", "/errs"}, 1, "coordctl: /errs: node has children\n"},
		{[]string{"create", "relative"}, 1, "coordctl: relative: bad arguments: path must start with /\n"},
		{[]string{"delete", "-v", "3", "/errs/child"}, 1, "coordctl: /errs/child: version does not match: it has version 0, not 3\n"},
		{[]string{"create", "-e", "-c", "/errs/x"}, 2, "coordctl: create: -e, -c and -t exclude each other"},
		{[]string{"nosuchverb"}, 2, "coordctl: unknown verb \"nosuchverb\"\n"},
		{[]string{"get"}, 2, "coordctl: get: missing argument\nusage: get [-s] [-w] [-sync] PATH\n"},
		{[]string{"get", "/a", "/b"}, 2, "coordctl: get: unexpected argument \"/b\"\n"},
		{[]string{"set", "/errs"}, 2, "coordctl: set: missing argument\n"},
		{[]string{"get", "-x", "/errs"}, 2, "coordctl: get: unknown flag -x\nusage: get"},
		{[]string{"set", "-v", "abc", "/errs", "y"}, 2, "coordctl: set: invalid value \"abc\" for -v: want an integer\n"},
		{[]string{"-o", "yaml", "get", "/errs"}, 2, "coordctl: -o: unknown output format \"yaml\""},
		{[]string{"get", "-o", "yaml", "/errs"}, 2, "coordctl: -o: unknown output format \"yaml\""},
		{[]string{"--bogus", "get", "/errs"}, 2, "coordctl: unknown flag --bogus\n"},
		{[]string{"ls", "-R", "-w", "/errs"}, 2, "coordctl: ls: -R and -w exclude each other\n"},
		{[]string{"status", "extra"}, 2, "coordctl: status: unexpected argument"},
	}
	for _, tc := range cases {
		r := ctl(t, tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("coordctl %q: exit %d, stdout %q, stderr %q; want exit %d, stderr starting %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stderr)
		}
	}
	// An ephemeral cannot have children (in a shell, so that the ephemeral
	// is there).
	r := ctlIn(t, "create -e /errs/eph\ncreate /errs/eph/x\n", "shell")
	if r.code != 1 || !strings.Contains(r.stderr, "coordctl: /errs/eph/x: ephemeral nodes may not have children") {
		t.Errorf("child of ephemeral: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestConnectFailure(t *testing.T) {
	var out, errOut bytes.Buffer
	addr := freeAddr(t)
	code := runWith([]string{"--servers", addr, "--timeout", "300ms", "get", "/"}, strings.NewReader(""), &out, &errOut, nil)
	want := "coordctl: cannot connect: no server accepts connections:\n  " + addr + ": connection refused\n"
	if code != 1 || errOut.String() != want {
		t.Errorf("exit %d, stderr %q; want exit 1, stderr %q", code, errOut.String(), want)
	}
}

// bare runs coordctl with the given arguments (no default --servers).
func bare(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(args, strings.NewReader(""), &out, &errOut, nil)
	return result{out.String(), errOut.String(), code}
}

// loopbackHost is a 127.0.0.x address no other test of the package uses.
func loopbackHost(t *testing.T) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		host := fmt.Sprintf("127.0.0.%d", 100+rand.IntN(150))
		ln, err := net.Listen("tcp", host+":2181")
		if err == nil {
			ln.Close()
			return host
		}
	}
	t.Fatal("no 127.0.0.x with port 2181 free")
	return ""
}

// proxy listens on addr and relays every connection to the test server.
func proxy(t *testing.T, addr string) {
	t.Helper()
	target := server(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(s, c); s.Close() }()
			go func() { defer wg.Done(); io.Copy(c, s); c.Close() }()
		}
	}()
}

func TestNormalizeServer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1:2181"},
		{"127.0.0.1:2182", "127.0.0.1:2182"},
		{"localhost", "localhost:2181"},
		{"zk1.example.com:3000", "zk1.example.com:3000"},
		{"[::1]", "[::1]:2181"},
		{"[::1]:2182", "[::1]:2182"},
		{"::1", "[::1]:2181"},
		{"2001:db8::7", "[2001:db8::7]:2181"},
		{"[2001:db8::7]:2183", "[2001:db8::7]:2183"},
	} {
		got, err := normalizeServer(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("normalizeServer(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"host:abc", "host:0", "host:65536", ":2181", "[::1", "a:b:c", "[::1]x", "host:"} {
		if got, err := normalizeServer(in); err == nil {
			t.Errorf("normalizeServer(%q) = %q, want an error", in, got)
		}
	}
	if r := bare(t, "--servers", "127.0.0.1:x", "ls", "/"); r.code != 2 || !strings.HasPrefix(r.stderr, "coordctl: --servers: bad port in \"127.0.0.1:x\"\n") {
		t.Errorf("bad port: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestDefaultPort: a server given without a port is dialled on 2181, as a
// host, as an IPv4 address or in brackets (it was dialled on gRPC's
// default, 443).
func TestDefaultPort(t *testing.T) {
	host := loopbackHost(t)
	// Nothing there yet: the error names port 2181.
	r := bare(t, "--servers", host, "ls", "/")
	if r.code != 1 || !strings.Contains(r.stderr, "  "+host+":2181: connection refused\n") {
		t.Errorf("exit %d, stderr %q; want %s:2181 refused", r.code, r.stderr, host)
	}
	proxy(t, host+":2181")
	for _, s := range []string{host, "[" + host + "]", host + ":2181"} {
		if r := bare(t, "--servers", s, "ls", "/"); r.code != 0 {
			t.Errorf("--servers %s: exit %d, stderr %q", s, r.code, r.stderr)
		}
		if r := bare(t, "--servers", s, "status"); r.code != 0 {
			t.Errorf("--servers %s status: exit %d, stderr %q", s, r.code, r.stderr)
		}
	}
}

// TestUnreachableServers: when no server accepts a connection, coordctl
// fails at once (not after --timeout) and says why each server failed; a
// server that is up without a leader is named as such once --timeout has
// passed.
func TestUnreachableServers(t *testing.T) {
	a, b := freeAddr(t), freeAddr(t)
	start := time.Now()
	r := bare(t, "--servers", a+","+b, "--timeout", "1m", "ls", "/")
	want := "coordctl: cannot connect: no server accepts connections:\n  " + a + ": connection refused\n  " + b + ": connection refused\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v: waited for --timeout", d)
	}
	r = bare(t, "--servers", a, "--timeout", "1m", "status")
	if want := "coordctl: status: no server answered:\n  " + a + ": connection refused\n"; r.code != 1 || r.stderr != want {
		t.Errorf("status: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}

	n := leaderless(t)
	// A first attempt may come before the server knows it has no leader,
	// and wait for a session that never opens (the client gives an attempt
	// 2s); later ones are refused at once.
	r = bare(t, "--servers", n.ClientAddr()+","+a, "--timeout", "5s", "ls", "/")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "coordctl: cannot connect to any server within 5s:\n") ||
		!strings.Contains(r.stderr, "\n  "+n.ClientAddr()+": unavailable: server 1 has no leader\n") ||
		!strings.Contains(r.stderr, "\n  "+a+": connection refused\n") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	m := decode(t, strings.TrimSpace(bare(t, "--servers", n.ClientAddr(), "--timeout", "1s", "-o", "json", "ls", "/").stderr), "error")
	e := decode(t, string(m["error"]), "code", "message", "servers")
	servers := unmarshal[[]serverFailure](t, e["servers"])
	if unmarshal[string](t, e["code"]) != "ConnectionFailed" || unmarshal[string](t, e["message"]) != "cannot connect to any server within 1s" ||
		len(servers) != 1 || servers[0] != (serverFailure{Address: n.ClientAddr(), Error: "unavailable: server 1 has no leader"}) {
		t.Errorf("JSON error %s", m["error"])
	}
}

// leaderless starts a server of a 3-node cluster whose peers never come
// up: it has no leader, and its peers are unreachable.
func leaderless(t *testing.T) *rpc.Node {
	t.Helper()
	peer := freeAddr(t)
	n, err := rpc.NewNode(rpc.Config{
		ID: "1", DataDir: t.TempDir(), ClientAddr: freeAddr(t), PeerAddr: peer, Tick: 100 * time.Millisecond,
		Peers:            []rpc.Peer{{ID: "1", Addr: peer}, {ID: "2", Addr: freeAddr(t)}, {ID: "3", Addr: freeAddr(t)}},
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, Version: testServerVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// TestStatusHealthCheck: status exits 0 on a healthy cluster and 3 when a
// member is unreachable or there is no leader, still printing the members.
func TestStatusHealthCheck(t *testing.T) {
	if r := ctl(t, "status"); r.code != 0 || r.stderr != "" {
		t.Errorf("healthy: exit %d, stderr %q", r.code, r.stderr)
	}
	n := leaderless(t)
	r := bare(t, "--servers", n.ClientAddr(), "status")
	if r.code != 3 || r.stderr != "coordctl: status: member 2 is unreachable, member 3 is unreachable, there is no leader\n" {
		t.Errorf("no quorum: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"\n2   -  ", "unreachable", "leader: none\n", testServerVersion} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = bare(t, "--servers", n.ClientAddr(), "-o", "json", "status")
	if r.code != 3 {
		t.Errorf("JSON: exit %d", r.code)
	}
	decode(t, strings.TrimSpace(r.stdout), "leader", "level", "members")
	e := decode(t, string(decode(t, strings.TrimSpace(r.stderr), "error")["error"]), "code", "message")
	if unmarshal[string](t, e["code"]) != "Unhealthy" {
		t.Errorf("JSON error %s", r.stderr)
	}
}

// TestVersion: coordctl version prints the version make build stamps into
// main.version.
func TestVersion(t *testing.T) {
	old := version
	version = "v1.2.3-test"
	defer func() { version = old }()
	if got := ok(t, "version"); got != "coordctl v1.2.3-test\n" {
		t.Errorf("version printed %q", got)
	}
}

// TestJSONErrors: with -o json (global, or the verb's), errors are one JSON
// object on stderr: {"error": {"code": ..., "message": ...}}.
func TestJSONErrors(t *testing.T) {
	fresh(t, "/jerr")
	ok(t, "create", "/jerr", "x")
	ok(t, "create", "/jerr/c")
	for _, tc := range []struct {
		args    []string
		exit    int
		code    string
		message string
	}{
		{[]string{"-o", "json", "get", "/jerr/missing"}, 1, "NoNode", "/jerr/missing: node does not exist"},
		{[]string{"get", "-o", "json", "/jerr/missing"}, 1, "NoNode", "/jerr/missing: node does not exist"},
		{[]string{"get", "/jerr/missing", "-o", "json"}, 1, "NoNode", "/jerr/missing: node does not exist"},
		{[]string{"-o", "json", "create", "/jerr"}, 1, "NodeExists", "/jerr: node already exists"},
		{[]string{"-o", "json", "set", "-v", "9", "/jerr", "y"}, 1, "BadVersion", "/jerr: version does not match"},
		{[]string{"-o", "json", "delete", "/jerr"}, 1, "NotEmpty", "/jerr: node has children"},
		{[]string{"-o", "json", "create", "bad"}, 1, "BadArguments", "bad: bad arguments"},
		{[]string{"-o", "json", "get"}, 2, "Usage", "get: missing argument"},
		{[]string{"-o", "json", "nosuchverb"}, 2, "Usage", `unknown verb "nosuchverb"`},
		{[]string{"get", "-x", "-o", "json", "/jerr"}, 2, "Usage", "get: unknown flag -x"},
		{[]string{"-o", "json", "--bogus", "get", "/jerr"}, 2, "Usage", "unknown flag --bogus"},
	} {
		r := ctl(t, tc.args...)
		if r.code != tc.exit || r.stdout != "" {
			t.Errorf("coordctl %q: exit %d, stdout %q; want exit %d", tc.args, r.code, r.stdout, tc.exit)
		}
		m := decode(t, strings.TrimSuffix(r.stderr, "\n"), "error")
		e := decode(t, string(m["error"]), "code", "message")
		if c, msg := unmarshal[string](t, e["code"]), unmarshal[string](t, e["message"]); c != tc.code || !strings.HasPrefix(msg, tc.message) {
			t.Errorf("coordctl %q: code %q, message %q; want %q, %q...", tc.args, c, msg, tc.code, tc.message)
		}
	}
	// In the shell, each command's own -o decides.
	r := ctlIn(t, "get /jerr/missing\nget -o json /jerr/missing\n", "shell")
	lines := strings.Split(r.stderr, "\n")
	var errs []string
	for _, l := range lines {
		if strings.Contains(l, "/jerr/missing") {
			errs = append(errs, l)
		}
	}
	want := []string{"coordctl: /jerr/missing: node does not exist", `{"error":{"code":"NoNode","message":"/jerr/missing: node does not exist"}}`}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("shell errors %q, want %q", errs, want)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}} {
		r := ctl(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "  deleteall  delete a node") || !strings.Contains(r.stdout, "--servers") {
			t.Errorf("coordctl %q: exit %d, stdout:\n%s", args, r.code, r.stdout)
		}
	}
	for _, args := range [][]string{{"help", "create"}, {"create", "-h"}} {
		r := ctl(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: create [-e] [-s] [-c] [-t ttl_ms] [-a ACL] [-f FILE] PATH [DATA]") || !strings.Contains(r.stdout, "until it is interrupted") {
			t.Errorf("coordctl %q: exit %d, stdout:\n%s", args, r.code, r.stdout)
		}
	}
	if r := ctl(t, "help", "nope"); r.code != 2 {
		t.Errorf("help nope: exit %d", r.code)
	}
}

func TestDeleteallAndRecursiveLs(t *testing.T) {
	fresh(t, "/tree")
	for _, p := range []string{"/tree", "/tree/a", "/tree/a/x", "/tree/a/x/deep", "/tree/b", "/tree/a-b", "/tree/a/y"} {
		ok(t, "create", p)
	}
	want := []string{"/tree/a", "/tree/a-b", "/tree/a/x", "/tree/a/x/deep", "/tree/a/y", "/tree/b"}
	if got := ok(t, "ls", "-R", "/tree"); got != strings.Join(want, "\n")+"\n" {
		t.Errorf("ls -R printed %q", got)
	}
	m := decode(t, ok(t, "-o", "json", "ls", "-R", "/tree"), "path", "children")
	if c := unmarshal[[]string](t, m["children"]); !reflect.DeepEqual(c, want) {
		t.Errorf("ls -R children %v, want %v", c, want)
	}
	if got := ok(t, "deleteall", "/tree/a"); got != "" {
		t.Errorf("deleteall printed %q", got)
	}
	if got := ok(t, "ls", "-R", "/tree"); got != "/tree/a-b\n/tree/b\n" {
		t.Errorf("after deleteall /tree/a: %q", got)
	}
	decode(t, ok(t, "-o", "json", "deleteall", "/tree"), "path")
	if r := ctl(t, "stat", "/tree"); r.code != 1 {
		t.Errorf("/tree survived deleteall: %+v", r)
	}
}

// getData reads path's data through coordctl get -o json, checking that
// the text, if given, is the same data.
func getData(t *testing.T, path string) []byte {
	t.Helper()
	out := ok(t, "-o", "json", "get", path)
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not a JSON object: %q: %v", out, err)
	}
	keys := []string{"path", "data", "stat"}
	if _, ok := m["text"]; ok {
		keys = append(keys, "text")
	}
	decode(t, out, keys...)
	d, err := base64.StdEncoding.DecodeString(unmarshal[string](t, m["data"]))
	if err != nil {
		t.Fatal(err)
	}
	if text, ok := m["text"]; ok && unmarshal[string](t, text) != string(d) {
		t.Errorf("%s: text %s is not the data %q", path, text, d)
	}
	return d
}

// TestDataFromFile: create and set take their data from a file (-f FILE)
// or standard input (-f -), byte for byte, beyond what fits in an argument.
func TestDataFromFile(t *testing.T) {
	fresh(t, "/df")
	ok(t, "create", "/df")
	// 512 KiB of every byte value, newlines and NULs included (an argument
	// list holds at most 128 KiB per argument).
	data := make([]byte, 512<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, "create", "-f", file, "/df/a")
	if got := getData(t, "/df/a"); !bytes.Equal(got, data) {
		t.Errorf("create -f stored %d bytes, want the file's %d", len(got), len(data))
	}
	if r := ctlIn(t, "from stdin\x00\n", "set", "-f", "-", "/df/a"); r.code != 0 {
		t.Fatalf("set -f -: %+v", r)
	}
	if got := getData(t, "/df/a"); string(got) != "from stdin\x00\n" {
		t.Errorf("set -f - stored %q", got)
	}
	if r := ctlIn(t, string(data), "create", "-s", "-f", "-", "/df/s-"); r.code != 0 || r.stdout != "/df/s-0000000001\n" {
		t.Fatalf("create -f -: %+v", r)
	}
	if got := getData(t, "/df/s-0000000001"); !bytes.Equal(got, data) {
		t.Errorf("create -f - stored %d bytes", len(got))
	}
	ok(t, "set", "-v", "1", "-f", file, "/df/a")
	if got := getData(t, "/df/a"); !bytes.Equal(got, data) {
		t.Errorf("set -f stored %d bytes", len(got))
	}
	// An empty file is empty data.
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	ok(t, "create", "-f", empty, "/df/e")
	if got := getData(t, "/df/e"); len(got) != 0 {
		t.Errorf("empty file stored %q", got)
	}

	// Bad input: a clear error, and nothing changes.
	huge := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxFileData+1); err != nil { // sparse
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big") // over the server's 1 MiB
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"set", "-f", file, "/df/a", "x"}, 2, "coordctl: set: -f and DATA exclude each other\n"},
		{[]string{"create", "-f", file, "/df/b", "x"}, 2, "coordctl: create: -f and DATA exclude each other\n"},
		{[]string{"set", "/df/a"}, 2, "coordctl: set: missing argument\n"},
		{[]string{"set", "-f", filepath.Join(t.TempDir(), "none"), "/df/a"}, 1, "coordctl: -f: open "},
		{[]string{"set", "-f", huge, "/df/a"}, 1, fmt.Sprintf("coordctl: -f: %s: %d bytes, more than a znode may hold (64 MiB)\n", huge, maxFileData+1)},
		{[]string{"set", "-f", big, "/df/a"}, 1, "coordctl: /df/a: bad arguments"},
		{[]string{"create", "-f", big, "/df/b"}, 1, "coordctl: /df/b: bad arguments"},
	} {
		r := ctl(t, tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.stderr) {
			t.Errorf("coordctl %q: exit %d, stderr %q; want exit %d, stderr %q...", tc.args, r.code, r.stderr, tc.code, tc.stderr)
		}
	}
	if r := ctlIn(t, "set -f - /df/a\n", "shell"); r.code != 1 || !strings.Contains(r.stderr, "coordctl: set: -f -: standard input holds the shell's commands; give a file\n") {
		t.Errorf("set -f - in the shell: %+v", r)
	}
	if got := getData(t, "/df/a"); !bytes.Equal(got, data) {
		t.Errorf("a failed set changed the data (%d bytes)", len(got))
	}
	if r := ctl(t, "stat", "/df/b"); r.code != 1 {
		t.Errorf("a failed create made the node")
	}
}

// ownServer starts a single-node server of the test's own, for a test that
// changes the whole tree.
func ownServer(t *testing.T) string {
	t.Helper()
	n, err := rpc.NewNode(rpc.Config{
		ID: "1", DataDir: t.TempDir(), ClientAddr: freeAddr(t), PeerAddr: freeAddr(t),
		Tick: 100 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if !poll(10*time.Second, n.IsLeader) {
		t.Fatal("the server did not become leader")
	}
	return n.ClientAddr()
}

// terminalShell runs the shell as on a terminal (it may ask questions),
// reading stdin.
func terminalShell(t *testing.T, addr, stdin string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	c := newCLI(strings.NewReader(stdin), &out, &errOut, nil)
	c.terminal = true
	code := c.main([]string{"--servers", addr})
	return result{out.String(), errOut.String(), code}
}

// TestDeleteallRoot: deleteall / is refused without -force, except in an
// interactive shell, which asks; it spares the root and /zookeeper.
func TestDeleteallRoot(t *testing.T) {
	addr := ownServer(t)
	at := func(args ...string) result { return bare(t, append([]string{"--servers", addr}, args...)...) }
	// Every server has ZooKeeper's /zookeeper (and refuses writes to it).
	for _, p := range []string{"/a", "/a/b", "/c"} {
		if r := at("create", p); r.code != 0 {
			t.Fatalf("create %s: %+v", p, r)
		}
	}
	all := "a\nc\nzookeeper\n"
	if r := at("deleteall", "/"); r.code != 2 || !strings.HasPrefix(r.stderr, "coordctl: deleteall: deleteall / deletes every node: add -force to mean it\n") {
		t.Errorf("one-shot deleteall /: exit %d, stderr %q", r.code, r.stderr)
	}
	r := bare(t, "--servers", addr, "-o", "json", "deleteall", "/")
	if r.code != 2 || !strings.Contains(r.stderr, `"code":"Usage"`) {
		t.Errorf("one-shot deleteall / -o json: exit %d, stderr %q", r.code, r.stderr)
	}
	var out, errOut bytes.Buffer
	if code := runWith([]string{"--servers", addr}, strings.NewReader("deleteall /\nls /\n"), &out, &errOut, nil); code != 1 || out.String() != all {
		t.Errorf("deleteall / from a pipe: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if got := at("ls", "/").stdout; got != all {
		t.Fatalf("a refused deleteall / deleted nodes: ls / %q", got)
	}
	r = terminalShell(t, addr, "deleteall /\nno\nls /\n")
	if r.stdout != all || !strings.Contains(r.stderr, "coordctl: deleteall /: not confirmed; nothing deleted\n") {
		t.Errorf("answered no: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = terminalShell(t, addr, "deleteall /\ny\nls /\n")
	if r.stdout != "zookeeper\n" || r.code != 0 {
		t.Errorf("answered y: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{"/a", "/a/b", "/c"} {
		if r := at("create", p); r.code != 0 {
			t.Fatalf("create %s: %+v", p, r)
		}
	}
	if r := at("deleteall", "-force", "/"); r.code != 0 || r.stdout != "" {
		t.Errorf("deleteall -force /: %+v", r)
	}
	if got := at("ls", "/").stdout; got != "zookeeper\n" {
		t.Errorf("after deleteall -force /: ls / %q", got)
	}
}

func TestShellPipe(t *testing.T) {
	fresh(t, "/sh")
	script := strings.Join([]string{
		"create /sh 'a b'",
		`create -e /sh/eph "quoted \"data\""`,
		"# a comment",
		"",
		"get /sh",
		"get -o json /sh/eph",
		"stat -o json /sh/eph",
		"sessions -o json",
		"get /sh/missing", // fails; the shell goes on
		"ls /sh",
	}, "\n") + "\n"
	r := ctlIn(t, script)
	if r.code != 1 {
		t.Errorf("exit %d after a failed command, want 1; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "coordctl: /sh/missing: node does not exist\n") {
		t.Errorf("stderr lacks the failed command's error:\n%s", r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("stdout has %d lines:\n%s", len(lines), r.stdout)
	}
	if lines[0] != "/sh" || lines[1] != "/sh/eph" || lines[2] != "a b" || lines[6] != "eph" {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	g := decode(t, lines[3], "path", "data", "text", "stat")
	if d, _ := base64.StdEncoding.DecodeString(unmarshal[string](t, g["data"])); string(d) != `quoted "data"` {
		t.Errorf("data %q", d)
	}
	st := decode(t, lines[4], "path", "stat")
	var stat struct {
		EphemeralOwner int64 `json:"ephemeralOwner"`
	}
	if err := json.Unmarshal(st["stat"], &stat); err != nil || stat.EphemeralOwner == 0 {
		t.Fatalf("stat %s (%v)", st["stat"], err)
	}
	var sessions struct {
		Sessions []struct {
			ID         string `json:"id"`
			TimeoutMs  int64  `json:"timeoutMs"`
			Ephemerals int64  `json:"ephemerals"`
			Server     string `json:"server"`
		} `json:"sessions"`
	}
	decode(t, lines[5], "sessions")
	if err := json.Unmarshal([]byte(lines[5]), &sessions); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range sessions.Sessions {
		if s.ID == hexID(stat.EphemeralOwner) {
			found = true
			if s.Ephemerals != 1 || s.TimeoutMs <= 0 || s.Server != "1" {
				t.Errorf("session %+v", s)
			}
		}
	}
	if !found {
		t.Errorf("the shell's session %s (the ephemeral's owner) is not in %s", hexID(stat.EphemeralOwner), lines[5])
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("session %s", hexID(stat.EphemeralOwner))) {
		t.Errorf("the shell did not announce its session:\n%s", r.stderr)
	}
	// The shell closed its session at EOF: the ephemeral is gone.
	if r := ctl(t, "stat", "/sh/eph"); r.code != 1 {
		t.Errorf("ephemeral survived the shell: %+v", r)
	}

	// All commands succeeding gives 0; quit stops reading.
	r = ctlIn(t, "create /sh/ok\nquit\ncreate /sh/never\n", "shell")
	if r.code != 0 || r.stdout != "/sh/ok\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := ctl(t, "stat", "/sh/never"); r.code != 1 {
		t.Error("a command after quit ran")
	}
	// A usage error and an unterminated quote count as failures too; a
	// last line without a newline still runs.
	r = ctlIn(t, "get\nget 'oops\nls /sh", "shell")
	if r.code != 1 || r.stdout != "ok\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestShellWatches: in a shell reading a pipe, get -w, ls -w, stat -w and
// watch set their watches and the shell goes on (it used to wait for the
// next change, forever); every event that fires before the shell ends is
// printed as a WATCHER:: line (or the event's JSON).
func TestShellWatches(t *testing.T) {
	fresh(t, "/sw")
	script := strings.Join([]string{
		"create /sw v0",
		"get -w /sw",
		"set /sw v1",
		"ls -w /sw",
		"create /sw/c",
		"stat -w /sw/later",
		"create /sw/later",
		"watch /sw/w",
		"create /sw/w",
		"get -w -o json /sw/c",
		"delete /sw/c",
		"get /sw",
	}, "\n") + "\n"
	done := make(chan result, 1)
	go func() { done <- ctlIn(t, script, "shell") }()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the shell did not finish its script: a watch stopped it")
	}
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var results, events []string
	var jsonEvent map[string]json.RawMessage
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "WATCHER:: "):
			typ, rest, _ := strings.Cut(strings.TrimPrefix(l, "WATCHER:: "), " ")
			path, zxid, _ := strings.Cut(rest, " ")
			if !strings.HasPrefix(zxid, "zxid=0x") {
				t.Errorf("event line %q", l)
			}
			events = append(events, typ+" "+path)
		case strings.HasPrefix(l, `{"type":`):
			jsonEvent = decode(t, l, "type", "path", "zxid")
		default:
			results = append(results, l)
		}
	}
	sort.Strings(events)
	want := []string{"NodeChildrenChanged /sw", "NodeCreated /sw/later", "NodeCreated /sw/w", "NodeDataChanged /sw"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events %q, want %q; stdout:\n%s", events, want, r.stdout)
	}
	if jsonEvent == nil || unmarshal[string](t, jsonEvent["type"]) != "NodeDeleted" || unmarshal[string](t, jsonEvent["path"]) != "/sw/c" {
		t.Errorf("no NodeDeleted /sw/c event in JSON; stdout:\n%s", r.stdout)
	}
	// The results in order, the events aside (the JSON get's result is
	// one line starting {"path":).
	wantResults := []string{"/sw", "v0", "/sw/c", "/sw/later", "/sw/w"}
	if len(results) != 7 || !reflect.DeepEqual(results[:5], wantResults) || !strings.HasPrefix(results[5], `{"path":"/sw/c"`) || results[6] != "v1" {
		t.Errorf("results %q; stdout:\n%s", results, r.stdout)
	}
	for _, want := range []string{
		"coordctl: /sw/later: node does not exist; the watch reports its creation\n",
		"coordctl: /sw/w: node does not exist; waiting for its creation\n",
		"coordctl: watching /sw/w; until the shell ends\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestSplitLine(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  ls   /a  ", []string{"ls", "/a"}, false},
		{`set /a "b c"`, []string{"set", "/a", "b c"}, false},
		{`set /a 'b "c" d'`, []string{"set", "/a", `b "c" d`}, false},
		{`set /a "say \"hi\" \\ \n"`, []string{"set", "/a", `say "hi" \ \n`}, false},
		{`set /a x\ y`, []string{"set", "/a", "x y"}, false},
		{`set /a ""`, []string{"set", "/a", ""}, false},
		{`set /a pre'mid dle'post`, []string{"set", "/a", "premid dlepost"}, false},
		{"a\tb", []string{"a", "b"}, false},
		{`set /a "open`, nil, true},
		{`set /a 'open`, nil, true},
	}
	for _, tc := range cases {
		got, err := splitLine(tc.in)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitLine(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestGetWatch(t *testing.T) {
	fresh(t, "/gw")
	ok(t, "create", "/gw", "v1")
	b := start(t, "-o", "json", "get", "-w", "/gw")
	// The data is printed once the server has answered GetW, which registered
	// the watch.
	b.waitOutput(t, false, `"path":"/gw"`)
	ok(t, "set", "/gw", "v2")
	if code := b.wait(t); code != 0 {
		t.Fatalf("get -w: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(b.stdout.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("get -w printed:\n%s", b.stdout.String())
	}
	ev := decode(t, lines[1], "type", "path", "zxid")
	if unmarshal[string](t, ev["type"]) != "NodeDataChanged" || unmarshal[string](t, ev["path"]) != "/gw" || unmarshal[int64](t, ev["zxid"]) <= 0 {
		t.Errorf("event %s", lines[1])
	}

	// ls -w: a child's creation; text output.
	ok(t, "create", "/gw/first")
	b = start(t, "ls", "-w", "/gw")
	b.waitOutput(t, false, "first\n")
	ok(t, "create", "/gw/c")
	if code := b.wait(t); code != 0 {
		t.Fatalf("ls -w: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	if got := b.stdout.String(); !strings.HasPrefix(got, "first\nNodeChildrenChanged /gw zxid=0x") {
		t.Errorf("ls -w printed %q", got)
	}

	// stat -w on an absent node waits for its creation.
	b = start(t, "-o", "json", "stat", "-w", "/gw/later")
	b.waitOutput(t, true, "waiting for its creation")
	ok(t, "create", "/gw/later")
	if code := b.wait(t); code != 0 {
		t.Fatalf("stat -w: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	ev = decode(t, strings.TrimSpace(b.stdout.String()), "type", "path", "zxid")
	if unmarshal[string](t, ev["type"]) != "NodeCreated" {
		t.Errorf("stat -w printed %s", b.stdout.String())
	}

	// An interrupt ends the wait with status 0.
	b = start(t, "get", "-w", "/gw")
	b.waitOutput(t, false, "v2\n")
	b.sig <- syscall.SIGINT
	if code := b.wait(t); code != 0 {
		t.Errorf("interrupted get -w: exit %d", code)
	}
}

func TestWatchVerb(t *testing.T) {
	fresh(t, "/wv")
	ok(t, "create", "/wv")
	b := start(t, "-o", "json", "watch", "/wv")
	b.waitOutput(t, true, "coordctl: watching /wv;")
	ok(t, "set", "/wv", "x")
	b.waitOutput(t, false, `"NodeDataChanged"`)
	ok(t, "create", "/wv/c")
	b.waitOutput(t, false, `"NodeChildrenChanged"`)
	ok(t, "delete", "/wv/c")
	ok(t, "delete", "/wv")
	b.waitOutput(t, false, `"NodeDeleted"`)
	ok(t, "create", "/wv")
	b.waitOutput(t, false, `"NodeCreated"`)
	b.sig <- syscall.SIGINT
	if code := b.wait(t); code != 0 {
		t.Fatalf("watch: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	var types []string
	var last int64
	for _, line := range strings.Split(strings.TrimSuffix(b.stdout.String(), "\n"), "\n") {
		ev := decode(t, line, "type", "path", "zxid")
		types = append(types, unmarshal[string](t, ev["type"]))
		z := unmarshal[int64](t, ev["zxid"])
		if z < last {
			t.Errorf("zxid went backwards: %s", b.stdout.String())
		}
		last = z
	}
	// The deletion of /wv/c may or may not be seen, depending on whether the
	// child watch was re-armed in time; the deletion of /wv is reported once.
	want := []string{"NodeDataChanged", "NodeChildrenChanged", "NodeChildrenChanged", "NodeDeleted", "NodeCreated"}
	want2 := []string{"NodeDataChanged", "NodeChildrenChanged", "NodeDeleted", "NodeCreated"}
	if !reflect.DeepEqual(types, want) && !reflect.DeepEqual(types, want2) {
		t.Errorf("events %v", types)
	}
}

// watchesUnder lists the server's watch registrations on root and below.
func watchesUnder(root string) []watch.Registration {
	var out []watch.Registration
	for _, r := range srvNode.Watches().Registrations(watch.AllKinds) {
		if r.Path == root || strings.HasPrefix(r.Path, root+"/") {
			out = append(out, r)
		}
	}
	return out
}

// TestWatchRecursive: watch -R holds one recursive watch, whatever the size
// of the subtree, and prints every change below it, with the parent's
// NodeChildrenChanged after each creation and deletion.
func TestWatchRecursive(t *testing.T) {
	fresh(t, "/wr")
	ok(t, "create", "/wr")
	ok(t, "create", "/wr/c")
	ok(t, "create", "/wr/c/d")
	b := start(t, "watch", "-R", "/wr")
	b.waitOutput(t, true, "coordctl: watching /wr and its descendants;")
	if got := watchesUnder("/wr"); len(got) != 1 || got[0].Path != "/wr" || got[0].Kinds != watch.PersistentRecursive {
		t.Fatalf("watch -R holds %v, want one recursive watch on /wr", got)
	}
	ok(t, "set", "/wr/c/d", "x")
	b.waitOutput(t, false, "NodeDataChanged /wr/c/d zxid=")
	ok(t, "deleteall", "/wr/c")
	b.waitOutput(t, false, "NodeDeleted /wr/c zxid=")
	b.waitOutput(t, false, "NodeChildrenChanged /wr zxid=")
	b.sig <- syscall.SIGTERM
	if code := b.wait(t); code != 0 {
		t.Fatalf("watch -R: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	out := b.stdout.String()
	for _, want := range []string{"NodeDeleted /wr/c/d zxid=", "NodeChildrenChanged /wr/c zxid="} {
		if !strings.Contains(out, want) {
			t.Errorf("watch -R output lacks %q:\n%s", want, out)
		}
	}
	// Each event is printed once although two watches fired for it.
	if n := strings.Count(out, "NodeDeleted /wr/c zxid="); n != 1 {
		t.Errorf("NodeDeleted /wr/c printed %d times:\n%s", n, out)
	}
	if got := watchesUnder("/wr"); len(got) != 0 {
		t.Errorf("watches left after watch -R ended: %v", got)
	}
}

// TestWatchPersistent: watch -p holds one persistent watch and prints
// every event of the node, each change once, none lost however fast they
// come (a one-shot watch re-armed after each event would miss some); on an
// absent node it waits for its creation. -p and -R together are refused.
func TestWatchPersistent(t *testing.T) {
	fresh(t, "/wp")
	b := start(t, "-o", "json", "watch", "-p", "/wp")
	b.waitOutput(t, true, "coordctl: /wp: node does not exist; waiting for its creation")
	b.waitOutput(t, true, "coordctl: watching /wp;")
	if got := watchesUnder("/wp"); len(got) != 1 || got[0].Kinds != watch.Persistent {
		t.Fatalf("watch -p holds %v, want one persistent watch on /wp", got)
	}
	script := "create /wp\n"
	const sets = 20
	for i := 0; i < sets; i++ {
		script += fmt.Sprintf("set /wp v%d\n", i)
	}
	script += "create /wp/c\ndelete /wp/c\ndelete /wp\ncreate /wp\n"
	if r := ctlIn(t, script, "shell"); r.code != 0 {
		t.Fatalf("shell: %+v", r)
	}
	want := []string{"NodeCreated"}
	for i := 0; i < sets; i++ {
		want = append(want, "NodeDataChanged")
	}
	want = append(want, "NodeChildrenChanged", "NodeChildrenChanged", "NodeDeleted", "NodeCreated")
	if !poll(10*time.Second, func() bool { return strings.Count(b.stdout.String(), "\n") >= len(want) }) {
		t.Fatalf("watch -p printed:\n%s", b.stdout.String())
	}
	b.sig <- syscall.SIGINT
	if code := b.wait(t); code != 0 {
		t.Fatalf("watch -p: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	var types []string
	var last int64
	for _, line := range strings.Split(strings.TrimSuffix(b.stdout.String(), "\n"), "\n") {
		ev := decode(t, line, "type", "path", "zxid")
		types = append(types, unmarshal[string](t, ev["type"]))
		if p := unmarshal[string](t, ev["path"]); p != "/wp" {
			t.Errorf("event of %s", p)
		}
		z := unmarshal[int64](t, ev["zxid"])
		if z <= last {
			t.Errorf("zxid %d after %d", z, last)
		}
		last = z
	}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	if got := watchesUnder("/wp"); len(got) != 0 {
		t.Errorf("watches left after watch -p ended: %v", got)
	}
	if r := ctl(t, "watch", "-p", "-R", "/wp"); r.code != 2 || !strings.Contains(r.stderr, "-p and -R exclude each other") {
		t.Errorf("watch -p -R: %+v", r)
	}
}

// TestShellPersistentWatches: in a shell reading a pipe, watch -p and
// watch -R set their watch and the shell goes on; their events are printed
// as WATCHER:: lines until the shell ends.
func TestShellPersistentWatches(t *testing.T) {
	fresh(t, "/sp")
	fresh(t, "/sr")
	script := strings.Join([]string{
		"create /sp",
		"watch -p /sp",
		"set /sp v1",
		"set /sp v2",
		"watch -R /sr",
		"create /sr",
		"create /sr/a",
		"set /sr/a x",
		"get /sp",
	}, "\n") + "\n"
	r := ctlIn(t, script, "shell")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var events, results []string
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(l, "WATCHER:: "); ok {
			typ, rest, _ := strings.Cut(rest, " ")
			p, _, _ := strings.Cut(rest, " ")
			events = append(events, typ+" "+p)
			continue
		}
		results = append(results, l)
	}
	sort.Strings(events)
	want := []string{"NodeChildrenChanged /sr", "NodeCreated /sr", "NodeCreated /sr/a", "NodeDataChanged /sp", "NodeDataChanged /sp", "NodeDataChanged /sr/a"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events %q, want %q; stdout:\n%s", events, want, r.stdout)
	}
	if !reflect.DeepEqual(results, []string{"/sp", "/sr", "/sr/a", "v2"}) {
		t.Errorf("results %q", results)
	}
	for _, w := range []string{"coordctl: watching /sp; until the shell ends\n", "coordctl: /sr: node does not exist; waiting for its creation\n", "coordctl: watching /sr and its descendants; until the shell ends\n"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
}

func TestCreateEphemeralBlocks(t *testing.T) {
	fresh(t, "/ce")
	ok(t, "create", "/ce")
	b := start(t, "create", "-e", "/ce/eph", "data")
	b.waitOutput(t, false, "/ce/eph\n")
	b.waitOutput(t, true, "lives while this coordctl runs")
	m := decode(t, ok(t, "-o", "json", "stat", "/ce/eph"), "path", "stat")
	var stat struct {
		EphemeralOwner int64 `json:"ephemeralOwner"`
	}
	if err := json.Unmarshal(m["stat"], &stat); err != nil || stat.EphemeralOwner == 0 {
		t.Fatalf("stat %s (%v)", m["stat"], err)
	}
	select {
	case code := <-b.done:
		t.Fatalf("create -e returned %d without an interrupt", code)
	default:
	}
	b.sig <- syscall.SIGINT
	if code := b.wait(t); code != 0 {
		t.Fatalf("create -e: exit %d, stderr:\n%s", code, b.stderr.String())
	}
	if r := ctl(t, "stat", "/ce/eph"); r.code != 1 {
		t.Errorf("ephemeral survived its coordctl: %+v", r)
	}
}

// TestShellInterrupt: SIGINT ends a running watch in an interactive shell,
// not the shell; the next command runs on the same session.
func TestShellInterrupt(t *testing.T) {
	fresh(t, "/si")
	ok(t, "create", "/si")
	pr, pw := io.Pipe()
	defer pw.Close()
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	c := newCLI(pr, &stdout, &stderr, sig)
	c.terminal = true // watch waits on a terminal, until interrupted
	go func() {
		done <- c.main([]string{"--servers", server(t)})
	}()
	io.WriteString(pw, "create -e /si/e\nwatch /si\n")
	if !poll(10*time.Second, func() bool { return strings.Contains(stderr.String(), "watching /si") }) {
		t.Fatalf("watch did not start; stderr:\n%s", stderr.String())
	}
	sig <- syscall.SIGINT
	io.WriteString(pw, "stat /si/e\n")
	if !poll(10*time.Second, func() bool { return strings.Contains(stdout.String(), "ephemeralOwner = 0x") }) {
		t.Fatalf("the shell did not go on after the interrupt; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	pw.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("shell exit %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shell did not exit at EOF")
	}
}
