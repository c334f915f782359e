package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cmd/coordd/console"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// env is a console of one server of a cluster, served by httptest.
type env struct {
	t   *testing.T
	c   *cluster.Cluster
	con *console.Console
	srv *httptest.Server
	cl  *client.Client // another client of the cluster
	tok string
}

func newEnv(t *testing.T, n int, cfg console.Config, member int) *env {
	t.Helper()
	return newEnvWith(t, n, cluster.Options{}, cfg, member)
}

// newEnvWith is newEnv on a cluster started with opts.
func newEnvWith(t *testing.T, n int, opts cluster.Options, cfg console.Config, member int) *env {
	t.Helper()
	c := cluster.New(t, n, opts)
	if member < 0 {
		member = c.Follower()
	}
	cfg.Server = c.Members[member].Cfg.ClientAddr
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	con, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		con.Close()
	})
	e := &env{t: t, c: c, con: con, srv: srv, cl: connect(t, c.Servers()...)}
	var info struct{ Token string }
	e.getJSON("/api/info", &info)
	e.tok = info.Token
	return e
}

func connect(t *testing.T, servers ...string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := client.Connect(ctx, servers, client.WithSessionTimeout(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Close(ctx)
	})
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// get fetches path and returns the response, its body read.
func (e *env) get(path string) (*http.Response, []byte) {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	resp, b := e.get(path)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

// post sends a write as the console's page does; edit changes the request
// first (nil: none).
func (e *env) post(path string, body any, edit func(*http.Request)) (int, errorAnswer, []byte) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Console-Token", e.tok)
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var ea errorAnswer
	_ = json.Unmarshal(out, &ea)
	return resp.StatusCode, ea, out
}

type errorAnswer struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

type nodeAnswer struct {
	Path    string `json:"path"`
	Version int32  `json:"version"`
	Data    string `json:"data"`
	Stat    []struct {
		Name, Value, Title string
	} `json:"stat"`
	NumChildren int32 `json:"numChildren"`
}

func (n nodeAnswer) data() string {
	b, _ := base64.StdEncoding.DecodeString(n.Data)
	return string(b)
}

// TestPageAndHeaders: the page and its files are served from the binary
// with a strict Content-Security-Policy; there is no listing of the files,
// and an unknown call is a JSON 404.
func TestPageAndHeaders(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	for _, tc := range []struct{ path, ctype, has string }{
		{"/", "text/html", `<script src="static/app.js"`},
		{"/static/app.js", "javascript", "textContent"},
		{"/static/app.css", "text/css", "body"},
	} {
		resp, b := e.get(tc.path)
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) || !bytes.Contains(b, []byte(tc.has)) {
			t.Errorf("GET %s: %s %q, %d bytes", tc.path, resp.Status, resp.Header.Get("Content-Type"), len(b))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline or eval", tc.path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tc.path)
		}
	}
	for _, p := range []string{"/static/", "/static/nothing.js", "/nothing"} {
		if resp, _ := e.get(p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
	resp, b := e.get("/api/nothing")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		t.Errorf("GET /api/nothing: %s %s", resp.Status, b)
	}
	// A write endpoint is POST only.
	if resp, _ := e.get("/api/create"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/create: %s, want 405", resp.Status)
	}
}

// TestPageInsertsNoMarkup: the page's script never turns data into markup:
// no innerHTML, outerHTML, insertAdjacentHTML, document.write or eval, no
// inline handlers in the page, and no link to another origin.
func TestPageInsertsNoMarkup(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	_, js := e.get("/static/app.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if bytes.Contains(js, []byte(bad)) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	_, page := e.get("/")
	if m := regexp.MustCompile(`(?i)\son[a-z]+=|<script>|<style>|https?://`).Find(page); m != nil {
		t.Errorf("index.html has %q: inline code or another origin", m)
	}
}

// TestMarkupInDataStaysData: a node whose name and data are markup comes
// back in JSON that carries no markup at all (data in base64, names with
// < and > escaped), with a JSON content type and nosniff.
func TestMarkupInDataStaysData(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	ctx := ctxT(t)
	const evil = "<script>alert(1)</script>"
	if _, err := e.cl.Create(ctx, "/x", []byte(evil), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.Create(ctx, "/x/<img src=x onerror=alert(1)>", []byte(evil), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/node?path=/x", "/api/children?path=/x"} {
		resp, b := e.get(p)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: %s %q", p, resp.Status, resp.Header.Get("Content-Type"))
		}
		if bytes.ContainsAny(b, "<>") {
			t.Errorf("GET %s: markup in the answer: %s", p, b)
		}
	}
	var n nodeAnswer
	e.getJSON("/api/node?path=/x", &n)
	if n.data() != evil {
		t.Errorf("data %q, want %q", n.data(), evil)
	}
	var kids struct {
		Children []struct{ Name string }
	}
	e.getJSON("/api/children?path=/x", &kids)
	if len(kids.Children) != 1 || kids.Children[0].Name != "<img src=x onerror=alert(1)>" {
		t.Errorf("children %+v", kids)
	}
}

// TestReadOnlyRefusesWrites: without Writes, the console's server side
// refuses every write, whatever the page does, and nothing changes.
func TestReadOnlyRefusesWrites(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	ctx := ctxT(t)
	if _, err := e.cl.Create(ctx, "/ro", []byte("v"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		body any
	}{
		{"/api/create", map[string]any{"path": "/new", "data": "x"}},
		{"/api/set", map[string]any{"path": "/ro", "data": "changed", "version": -1}},
		{"/api/delete", map[string]any{"path": "/ro", "version": -1}},
	} {
		code, ea, b := e.post(tc.path, tc.body, nil)
		if code != http.StatusForbidden || ea.Code != "ReadOnly" || !strings.Contains(ea.Error, "--console-writes") {
			t.Errorf("POST %s: %d %s, want 403 ReadOnly naming --console-writes", tc.path, code, b)
		}
	}
	if _, ok, _ := e.cl.Exists(ctx, "/new"); ok {
		t.Error("a read-only console created /new")
	}
	if data, _, err := e.cl.Get(ctx, "/ro"); err != nil || string(data) != "v" {
		t.Errorf("/ro after refused writes: %q %v", data, err)
	}
	var info struct {
		Writes bool
		Token  string
	}
	e.getJSON("/api/info", &info)
	if info.Writes || info.Token != "" {
		t.Errorf("info of a read-only console: %+v", info)
	}
}

// TestWritesComeOnlyFromThePage: a write needs the console's token, a
// same-origin request and a JSON body; then create, set and delete work.
func TestWritesComeOnlyFromThePage(t *testing.T) {
	e := newEnv(t, 1, console.Config{Writes: true}, 0)
	ctx := ctxT(t)
	body := map[string]any{"path": "/w", "data": "hello"}
	for _, tc := range []struct {
		name   string
		edit   func(*http.Request)
		status int
		code   string
	}{
		{"no token", func(r *http.Request) { r.Header.Del("X-Console-Token") }, 403, "BadToken"},
		{"wrong token", func(r *http.Request) { r.Header.Set("X-Console-Token", "guess") }, 403, "BadToken"},
		{"cross-site fetch", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403, "CrossOrigin"},
		{"other origin", func(r *http.Request) {
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "http://evil.example")
		}, 403, "CrossOrigin"},
		{"form body", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, 415, "BadRequest"},
	} {
		code, ea, b := e.post("/api/create", body, tc.edit)
		if code != tc.status || ea.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, b, tc.status, tc.code)
		}
	}
	if _, ok, _ := e.cl.Exists(ctx, "/w"); ok {
		t.Fatal("a refused write created /w")
	}
	if code, _, b := e.post("/api/create", body, nil); code != 200 {
		t.Fatalf("create: %d %s", code, b)
	}
	if data, _, err := e.cl.Get(ctx, "/w"); err != nil || string(data) != "hello" {
		t.Fatalf("/w after create: %q %v", data, err)
	}
	code, _, b := e.post("/api/create", map[string]any{"path": "/w/seq-", "data": "AAEC", "encoding": "base64", "sequential": true}, nil)
	var made nodeAnswer
	if err := json.Unmarshal(b, &made); code != 200 || err != nil || made.Path != "/w/seq-0000000000" {
		t.Fatalf("sequential create: %d %s", code, b)
	}
	if data, _, _ := e.cl.Get(ctx, made.Path); !bytes.Equal(data, []byte{0, 1, 2}) {
		t.Errorf("base64 data written as %v", data)
	}
	if code, ea, b := e.post("/api/create", map[string]any{"path": "/w", "data": ""}, nil); code != http.StatusConflict || ea.Code != "NodeExists" {
		t.Errorf("create an existing node: %d %s", code, b)
	}
	if code, ea, b := e.post("/api/create", map[string]any{"path": "/e", "kind": "ephemeral"}, nil); code != 400 || ea.Code != "BadArguments" {
		t.Errorf("create an ephemeral node: %d %s, want 400", code, b)
	}
	if code, ea, b := e.post("/api/create", map[string]any{"path": "/w2", "unknown": 1}, nil); code != 400 || ea.Code != "BadArguments" {
		t.Errorf("an unknown field: %d %s, want 400", code, b)
	}
	if code, _, b := e.post("/api/set", map[string]any{"path": "/w", "data": "again", "version": 0}, nil); code != 200 {
		t.Fatalf("set: %d %s", code, b)
	}
	if code, ea, b := e.post("/api/set", map[string]any{"path": "/w", "data": "again"}, nil); code != 400 || !strings.Contains(ea.Error, "version") {
		t.Errorf("set without a version: %d %s, want 400", code, b)
	}
	if code, ea, b := e.post("/api/delete", map[string]any{"path": "/w", "version": -1}, nil); code != http.StatusConflict || ea.Code != "NotEmpty" {
		t.Errorf("delete a parent: %d %s, want 409 NotEmpty", code, b)
	}
	if code, _, b := e.post("/api/delete", map[string]any{"path": made.Path, "version": 0}, nil); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if _, ok, _ := e.cl.Exists(ctx, made.Path); ok {
		t.Error("deleted node still there")
	}
}

// TestStaleSetIsBadVersion: a set or delete with the version the page read
// fails with BadVersion when the node changed meanwhile, and changes
// nothing.
func TestStaleSetIsBadVersion(t *testing.T) {
	e := newEnv(t, 1, console.Config{Writes: true}, 0)
	ctx := ctxT(t)
	if _, err := e.cl.Create(ctx, "/cas", []byte("one"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	var n nodeAnswer
	e.getJSON("/api/node?path=/cas", &n)
	if _, err := e.cl.Set(ctx, "/cas", []byte("two"), n.Version); err != nil { // someone else, meanwhile
		t.Fatal(err)
	}
	code, ea, b := e.post("/api/set", map[string]any{"path": "/cas", "data": "mine", "version": n.Version}, nil)
	if code != http.StatusConflict || ea.Code != "BadVersion" || !strings.Contains(ea.Error, "changed since") {
		t.Errorf("stale set: %d %s, want 409 BadVersion", code, b)
	}
	code, ea, b = e.post("/api/delete", map[string]any{"path": "/cas", "version": n.Version}, nil)
	if code != http.StatusConflict || ea.Code != "BadVersion" {
		t.Errorf("stale delete: %d %s, want 409 BadVersion", code, b)
	}
	if data, _, err := e.cl.Get(ctx, "/cas"); err != nil || string(data) != "two" {
		t.Errorf("/cas after stale writes: %q %v, want the other writer's", data, err)
	}
	// With the version read again, it works.
	e.getJSON("/api/node?path=/cas", &n)
	if code, _, b := e.post("/api/set", map[string]any{"path": "/cas", "data": "mine", "version": n.Version}, nil); code != 200 {
		t.Errorf("set with the current version: %d %s", code, b)
	}
}

// TestNodeStatAsZkCli: the Stat is laid out as zkCli prints it, zxids and
// the owner in hex.
func TestNodeStatAsZkCli(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	ctx := ctxT(t)
	_, st, err := e.cl.CreateStat(ctx, "/s", []byte("abc"), client.CreateMode{Kind: client.Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	var n nodeAnswer
	e.getJSON("/api/node?path=/s", &n)
	var names []string
	vals := map[string]string{}
	for _, f := range n.Stat {
		names = append(names, f.Name)
		vals[f.Name] = f.Value
	}
	want := "cZxid ctime mZxid mtime pZxid cversion dataVersion aclVersion ephemeralOwner dataLength numChildren"
	if strings.Join(names, " ") != want {
		t.Errorf("stat fields %v, want %s", names, want)
	}
	for name, v := range map[string]string{
		"cZxid": fmt.Sprintf("0x%x", st.Czxid), "mZxid": fmt.Sprintf("0x%x", st.Mzxid),
		"ephemeralOwner": fmt.Sprintf("0x%x", e.cl.SessionID()), "dataLength": "3", "dataVersion": "0",
		"ctime": time.UnixMilli(st.Ctime).UTC().Format("Mon Jan 02 15:04:05 MST 2006"),
	} {
		if vals[name] != v {
			t.Errorf("%s = %q, want %q", name, vals[name], v)
		}
	}
	resp, b := e.get("/api/node?path=/missing")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"NoNode"`) {
		t.Errorf("a missing node: %s %s", resp.Status, b)
	}
	if resp, _ := e.get("/api/node?path=relative"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a relative path: %s", resp.Status)
	}
}

// TestChildrenInPages: a large directory comes a page at a time, in name
// order, with each child's counts and the total.
func TestChildrenInPages(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	ctx := ctxT(t)
	if _, err := e.cl.Create(ctx, "/big", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	const n = 250
	ops := make([]client.Op, 0, n)
	for i := range n {
		ops = append(ops, client.CreateOp(fmt.Sprintf("/big/c%03d", i), []byte(strings.Repeat("x", i%7)), client.CreateMode{}))
	}
	if _, err := e.cl.Multi(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.Create(ctx, "/big/c007/grandchild", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Total, Offset int
		Children      []struct {
			Name        string
			NumChildren int32
			DataLength  int32
		}
	}
	e.getJSON("/api/children?path=/big", &page)
	if page.Total != n || len(page.Children) != 100 || page.Children[0].Name != "c000" || page.Children[7].NumChildren != 1 || page.Children[6].DataLength != 6 {
		t.Fatalf("first page: total %d, %d children, %+v", page.Total, len(page.Children), page.Children[:8])
	}
	e.getJSON("/api/children?path=/big&offset=200&limit=100", &page)
	if page.Total != n || page.Offset != 200 || len(page.Children) != 50 || page.Children[49].Name != "c249" {
		t.Fatalf("last page: %+v", page)
	}
	e.getJSON("/api/children?path=/big&offset=9999", &page)
	if page.Offset != n || len(page.Children) != 0 {
		t.Fatalf("past the end: %+v", page)
	}
	var root nodeAnswer
	e.getJSON("/api/node?path=/big", &root)
	if root.NumChildren != n {
		t.Errorf("numChildren %d, want %d", root.NumChildren, n)
	}
	if resp, _ := e.get("/api/children?path=/big&limit=-1"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a negative limit: %s", resp.Status)
	}
}

// sse reads a Server-Sent Events stream.
type sse struct {
	events chan sseEvent
	cancel context.CancelFunc
}

type sseEvent struct {
	name string
	data []byte
}

func (e *env) stream(t *testing.T, path string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET %s: %s %q", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &sse{events: make(chan sseEvent, 1000), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = []byte(strings.TrimPrefix(line, "data: "))
			case line == "" && ev.name != "":
				s.events <- ev
				ev = sseEvent{}
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

// next waits for the next event named name (skipping others) for which
// match, decoding into v, holds.
func (s *sse) next(t *testing.T, name string, v any, match func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the %s stream ended", name)
			}
			if ev.name != name {
				continue
			}
			if err := json.Unmarshal(ev.data, v); err != nil {
				t.Fatalf("event %s: %v in %s", name, err, ev.data)
			}
			if match == nil || match() {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event as wanted", name)
		}
	}
}

type clusterView struct {
	Server, Leader string
	Term           uint64
	Members        []struct {
		ID, Role               string
		Leader, Voter          bool
		Term                   uint64
		Commit, Applied        int64
		LastContactMs          int64
		Reads, Writes          *float64
		ClientAddress, Version string
	}
	Sample *struct {
		Reads, Writes float64
		LatencyMs     *float64
	}
	Error string
}

// TestClusterViewLive: the cluster stream shows every member with its role,
// term, indexes and last contact, the leader marked; the indexes move as
// writes happen, with the traffic they make; a stopped leader shows as
// unreachable and the new leader is marked.
func TestClusterViewLive(t *testing.T) {
	e := newEnv(t, 3, console.Config{}, -1)
	ctx := ctxT(t)
	s := e.stream(t, "/api/cluster")
	var history []any
	s.next(t, "history", &history, nil)
	lead := e.c.LeaderIndex()
	var v clusterView
	s.next(t, "cluster", &v, func() bool { return len(v.Members) == 3 && v.Leader == e.c.Members[lead].ID })
	var commit int64
	for _, m := range v.Members {
		if m.Leader != (m.ID == v.Leader) || m.Term != v.Term || !m.Voter || m.Commit < m.Applied || m.ClientAddress == "" {
			t.Errorf("member %+v (leader %s, term %d)", m, v.Leader, v.Term)
		}
		if m.ID == v.Leader && (m.Role != "leader" || m.LastContactMs != 0) {
			t.Errorf("leader %+v", m)
		}
		commit = max(commit, m.Commit)
	}
	// Writes and reads move the indexes and the rates (traffic until the
	// rates show, bounded).
	for i := range 20 {
		if _, err := e.cl.Create(ctx, fmt.Sprintf("/n%d", i), nil, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		for i := 0; i < 5000 && trafficCtx.Err() == nil; i++ {
			_, _ = e.cl.Set(trafficCtx, "/n0", []byte{byte(i)}, -1)
			_, _, _ = e.cl.Get(trafficCtx, "/n0")
		}
	}()
	defer func() { stopTraffic(); <-trafficDone }()
	s.next(t, "cluster", &v, func() bool {
		for _, m := range v.Members {
			if m.Commit < commit+20 || m.Applied < commit+20 {
				return false
			}
		}
		return true
	})
	s.next(t, "cluster", &v, func() bool {
		return v.Sample != nil && v.Sample.Writes > 0 && v.Sample.Reads > 0 && v.Sample.LatencyMs != nil && *v.Sample.LatencyMs > 0
	})
	stopTraffic()
	<-trafficDone

	// The leader stops: it is unreachable, and another leads in a new term.
	old := v.Leader
	oldTerm := v.Term
	e.c.Stop(lead)
	s.next(t, "cluster", &v, func() bool {
		if v.Leader == "" || v.Leader == old || v.Term <= oldTerm {
			return false
		}
		for _, m := range v.Members {
			if m.ID == old && m.Role != "unreachable" {
				return false
			}
		}
		return true
	})
	// A page that opens now gets the chart's history at once.
	var later []struct{ T int64 }
	e.stream(t, "/api/cluster").next(t, "history", &later, nil)
	if len(later) == 0 {
		t.Error("no history for a page that opens later")
	}
}

// TestClusterHistoryFromStart: the console polls its cluster from its
// start, with no page open, so the first page to open gets the chart's
// history at once (it used to start when the first page opened, the chart
// saying "last minute" after 14 minutes up), and its first view shows the
// members' rates, 0 on an idle cluster, not "none yet".
func TestClusterHistoryFromStart(t *testing.T) {
	e := newEnv(t, 3, console.Config{History: 2 * time.Second}, -1)
	// No page: the history grows anyway, until it spans History.
	var info struct{ HistorySeconds, HistoryFrom int64 }
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.getJSON("/api/info", &info)
		if info.HistoryFrom != 0 && time.Since(time.UnixMilli(info.HistoryFrom)) >= time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with no page open, the console kept no history (info %+v)", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	opened := time.Now()
	s := e.stream(t, "/api/cluster")
	var history []struct{ T int64 }
	s.next(t, "history", &history, nil)
	// Samples from before the first page opened, back to when the history
	// began: however slowly a loaded machine polls, not a count.
	if len(history) < 2 || !time.UnixMilli(history[0].T).Before(opened.Add(-500*time.Millisecond)) {
		first := int64(0)
		if len(history) > 0 {
			first = history[0].T
		}
		t.Fatalf("the first page's history has %d samples from %d, want samples from before the page opened (%d; history from %d)",
			len(history), first, opened.UnixMilli(), info.HistoryFrom)
	}
	var v clusterView
	s.next(t, "cluster", &v, nil) // the first view the page gets
	for _, m := range v.Members {
		if m.Role != "unreachable" && (m.Reads == nil || m.Writes == nil) {
			t.Errorf("member %s in the first view: reads %v, writes %v; want rates (0 when idle)", m.ID, m.Reads, m.Writes)
		}
	}
}

// TestRecipesList: the Locks view's list: the locks and elections under
// /locks and /elections, each with its kind, holders and waiters; a path
// nobody holds is listed free; none when neither exists.
func TestRecipesList(t *testing.T) {
	e := newEnv(t, 1, console.Config{}, 0)
	ctx := ctxT(t)
	var out struct {
		Roots   []string
		Recipes []struct {
			Path, Kind       string
			Holders, Waiting int
		}
		More int
	}
	e.getJSON("/api/recipes", &out)
	if len(out.Recipes) != 0 || strings.Join(out.Roots, " ") != "/locks /elections" {
		t.Fatalf("before any lock: %+v", out)
	}
	session := func() *lockrecipe.Session { return lockrecipe.NewSession(connect(t, e.c.Servers()...)) }
	if _, err := lockrecipe.NewMutex(session(), "/locks/job").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := lockrecipe.NewMutex(session(), "/locks/job")
	go func() { _, _ = waiter.Lock(ctx) }()
	if _, err := lockrecipe.NewRWMutex(session(), "/locks/rw").RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lockrecipe.NewSemaphore(session(), "/locks/pool", 2).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lockrecipe.NewElection(session(), "/elections/scheduler").Campaign(ctx, "host-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.Create(ctx, "/locks/free", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	want := "/locks/free lock 0 0, /locks/job lock 1 1, /locks/pool semaphore 1 0, /locks/rw read/write lock 1 0, /elections/scheduler election 1 0"
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for got != want { // until the waiter's node is there
		e.getJSON("/api/recipes", &out)
		var rows []string
		for _, r := range out.Recipes {
			rows = append(rows, fmt.Sprintf("%s %s %d %d", r.Path, r.Kind, r.Holders, r.Waiting))
		}
		got = strings.Join(rows, ", ")
		if time.Now().After(deadline) {
			t.Fatalf("the list: %s\nwant:     %s", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionsList: the sessions with their server, timeout, ephemerals
// and watches; the console's own is marked.
func TestSessionsList(t *testing.T) {
	e := newEnv(t, 3, console.Config{}, -1)
	ctx := ctxT(t)
	other := connect(t, e.c.Members[e.c.LeaderIndex()].Cfg.ClientAddr)
	if _, err := other.Create(ctx, "/eph", nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := other.GetW(ctx, "/eph"); err != nil {
		t.Fatal(err)
	}
	var n nodeAnswer
	e.getJSON("/api/node?path=/eph", &n) // opens the console's session
	type sess struct {
		ID, Server            string
		TimeoutMs, Ephemerals int64
		Watches               int64
		Console               bool
	}
	var out struct{ Sessions []sess }
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.getJSON("/api/sessions", &out)
		found := map[string]sess{}
		consoles := 0
		for _, s := range out.Sessions {
			found[s.ID] = s
			if s.Console {
				consoles++
			}
		}
		o := found[fmt.Sprintf("0x%x", other.SessionID())]
		if o.Ephemerals == 1 && o.Watches == 1 && o.TimeoutMs == 4000 && o.Server == e.c.Members[e.c.LeaderIndex()].ID && consoles == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions %+v", out.Sessions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type locksView struct {
	Holders, Waiting []struct {
		Node, Session, Token, TokenHex, Value, LockDelayUntil string
	}
}

// TestLocksFollowHandoffs: the locks stream shows the holder with its
// fencing token and the waiters in order, again at each handoff.
func TestLocksFollowHandoffs(t *testing.T) {
	e := newEnv(t, 3, console.Config{}, -1)
	ctx := ctxT(t)
	s := e.stream(t, "/api/locks?path=/locks/job")
	var v locksView
	s.next(t, "contenders", &v, func() bool { return len(v.Holders) == 0 })
	var mus []*lockrecipe.Mutex
	for range 3 {
		mus = append(mus, lockrecipe.NewMutex(lockrecipe.NewSession(connect(t, e.c.Servers()...)), "/locks/job"))
	}
	tok, err := mus[0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mus[1:] {
		go func() { _, _ = m.Lock(ctx) }()
	}
	s.next(t, "contenders", &v, func() bool { return len(v.Holders) == 1 && len(v.Waiting) == 2 })
	if v.Holders[0].Token != fmt.Sprint(int64(tok)) || v.Holders[0].TokenHex != fmt.Sprintf("0x%x", int64(tok)) {
		t.Errorf("holder %+v, want token %d", v.Holders[0], tok)
	}
	next := v.Waiting[0].Session
	if err := mus[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	s.next(t, "contenders", &v, func() bool { return len(v.Holders) == 1 && len(v.Waiting) == 1 })
	if v.Holders[0].Session != next {
		t.Errorf("after the handoff the holder is %s, want the first waiter %s", v.Holders[0].Session, next)
	}
	// A bad path ends the stream with a failure.
	var f errorAnswer
	e.stream(t, "/api/locks?path=/bad/").next(t, "failure", &f, nil)
	if f.Code != "BadArguments" {
		t.Errorf("a bad path: %+v", f)
	}
}

// TestIdentityActsWithItsPermissions: the console acts with the identity
// it is given and no more: it reads a node only that identity may read, a
// console without it or with another is refused; the node's ACL is shown;
// the password is never echoed.
func TestIdentityActsWithItsPermissions(t *testing.T) {
	c := cluster.New(t, 1, cluster.Options{})
	ctx := ctxT(t)
	owner := connect(t, c.Servers()...)
	if _, err := owner.Create(ctx, "/secret", []byte("s3cret data"), client.CreateMode{ACL: client.DigestACL(client.PermAll, "alice", "pw-alice")}); err != nil {
		t.Fatal(err)
	}
	open := func(auth string) *httptest.Server {
		con, err := console.New(console.Config{Server: c.Servers()[0], Auth: auth})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(con)
		t.Cleanup(func() { srv.Close(); con.Close() })
		return srv
	}
	get := func(srv *httptest.Server, path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	alice := open("digest:alice:pw-alice")
	code, body := get(alice, "/api/node?path=/secret")
	var n struct {
		Data string
		ACL  []string
	}
	if err := json.Unmarshal([]byte(body), &n); code != 200 || err != nil || len(n.ACL) != 1 || !strings.HasPrefix(n.ACL[0], "digest:alice:") || !strings.HasSuffix(n.ACL[0], ":cdrwa") {
		t.Fatalf("alice reads /secret: %d %s", code, body)
	}
	for _, auth := range []string{"", "digest:bob:pw-bob", "digest:alice:wrong"} {
		if code, body := get(open(auth), "/api/node?path=/secret"); code != http.StatusForbidden || !strings.Contains(body, `"NoAuth"`) {
			t.Errorf("console with %q reads /secret: %d %s", auth, code, body)
		}
	}
	_, info := get(alice, "/api/info")
	if !strings.Contains(info, `"identity":"digest:alice"`) || strings.Contains(info, "pw-alice") {
		t.Errorf("info %s", info)
	}
	var root struct{ ACL []string }
	_, body = get(alice, "/api/node?path=/")
	if err := json.Unmarshal([]byte(body), &root); err != nil || len(root.ACL) != 1 || root.ACL[0] != "world:anyone:cdrwa" {
		t.Errorf("the root's ACL: %s", body)
	}
	for _, auth := range []string{"nonsense", "digest:", ":x"} {
		if _, err := console.New(console.Config{Server: "127.0.0.1:1", Auth: auth}); err == nil {
			t.Errorf("Auth %q accepted", auth)
		}
	}
	if _, err := console.New(console.Config{}); err == nil {
		t.Error("a console without a server")
	}
}

type watchEvent struct {
	Type, Path, Zxid, Note string
}

// TestEventsFeed: the events stream reports every change at or below the
// path, in order, with its zxid, and nothing outside it; the watch goes
// when the page does.
func TestEventsFeed(t *testing.T) {
	e := newEnv(t, 3, console.Config{}, -1)
	ctx := ctxT(t)
	if _, err := e.cl.Create(ctx, "/app", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	s := e.stream(t, "/api/watch?path=/app")
	var w struct{ Path, How string }
	s.next(t, "watching", &w, nil)
	if w.Path != "/app" || !strings.Contains(w.How, "recursive") {
		t.Errorf("watching %+v", w)
	}
	if _, err := e.cl.Create(ctx, "/outside", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.Create(ctx, "/app/a", []byte("1"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.Create(ctx, "/app/a/b", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	st, err := e.cl.Set(ctx, "/app/a", []byte("<b>2</b>"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cl.Delete(ctx, "/app/a/b", -1); err != nil {
		t.Fatal(err)
	}
	var got []string
	var ev watchEvent
	for range 4 {
		s.next(t, "event", &ev, nil)
		got = append(got, ev.Type+" "+ev.Path)
		if ev.Type == "NodeDataChanged" && ev.Zxid != fmt.Sprintf("0x%x", st.Mzxid) {
			t.Errorf("NodeDataChanged zxid %s, want 0x%x", ev.Zxid, st.Mzxid)
		}
	}
	want := []string{"NodeCreated /app/a", "NodeCreated /app/a/b", "NodeDataChanged /app/a", "NodeDeleted /app/a/b"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("events %q, want %q", got, want)
	}
	// The page goes: the console's session no longer watches.
	s.cancel()
	var out struct {
		Sessions []struct {
			Console bool
			Watches int64
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.getJSON("/api/sessions", &out)
		left := int64(-1)
		for _, s := range out.Sessions {
			if s.Console {
				left = s.Watches
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console's session still holds %d watches", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
