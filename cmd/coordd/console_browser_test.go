//go:build browser

// The web console in a real browser: headless Chromium (Debian's chromium
// package) driven by chromedp against three coordd processes. Run it with
// make console-test, which installs Chromium and writes the screenshots of
// each view into docs/console; by hand:
//
//	go test -tags browser -run TestConsoleInBrowser ./cmd/coordd/ -args -screenshots=$PWD/docs/console
//
// The build tag keeps chromedp out of every binary and of go test ./...
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/rpc/apipb"
)

var (
	screenshots = flag.String("screenshots", "", "write the console's screenshots into this directory (default: a temporary one)")
	chromium    = flag.String("chromium", "/usr/bin/chromium", "the Chromium binary")
)

// server is one coordd process of the test.
type server struct {
	id, client, admin string
	cmd               *exec.Cmd
}

// startServers runs n coordd processes (this test binary as coordd) with
// the console on their admin addresses, writes enabled.
func startServers(t *testing.T, n int) []*server {
	t.Helper()
	bin := filepath.Join(coorddBin(t), "coordd")
	var servers []*server
	var peers []string
	peerAddrs := make([]string, n)
	for i := range n {
		peerAddrs[i] = freeAddr(t)
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, peerAddrs[i]))
	}
	for i := range n {
		s := &server{id: strconv.Itoa(i + 1), client: freeAddr(t), admin: freeAddr(t)}
		s.cmd = exec.Command(bin, "--id", s.id, "--data-dir", t.TempDir(), "--client-addr", s.client,
			"--peer-addr", peerAddrs[i], "--peers", strings.Join(peers, ","),
			"--metrics-addr", s.admin, "--console", "--console-writes", "--log-level", "error")
		s.cmd.Env = append(os.Environ(), asCoordd+"=1", "GOMAXPROCS=1")
		s.cmd.Stderr = testWriter{t, s.id}
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.kill()
		}
	})
	return servers
}

// chartFills reports whether "W of S" (the chart's and its section's
// widths, in pixels) says the chart spans its section.
func chartFills(widths string) bool {
	var w, s float64
	if _, err := fmt.Sscanf(widths, "%g of %g", &w, &s); err != nil || s == 0 {
		return false
	}
	return w >= s-2
}

// kill ends the process at once (SIGKILL) and waits for it.
func (s *server) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		_ = s.cmd.Wait()
	}
}

type testWriter struct {
	t  *testing.T
	id string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("[%s] %s", w.id, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// leaderOf asks addr for the leader's id.
func leaderOf(ctx context.Context, addr string) (string, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer cc.Close()
	resp, err := apipb.NewCoordClient(cc).Status(ctx, &apipb.StatusRequest{})
	if err != nil {
		return "", err
	}
	return resp.GetLeader(), nil
}

// page drives one browser tab.
type page struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// until waits for the JavaScript expression cond to hold on the page.
func (p *page) until(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 70*time.Second)
	defer cancel()
	var err error
	for range 5 {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
		// A poll does not survive a navigation: the page's first load may
		// replace the context it started in. Poll again then.
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") {
			break
		}
	}
	if err != nil {
		body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
		p.t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, body)
	}
}

func (p *page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// shot saves a screenshot of the page as name.png.
func (p *page) shot(name string) {
	p.t.Helper()
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// TestConsoleInBrowser opens the console of a follower of a three-server
// cluster in headless Chromium: the cluster view with its leader and
// traffic, the tree (a node whose data and name are markup shows as text),
// an edit behind a confirmation and a concurrent change refused with
// BadVersion, creating and deleting, the sessions, a lock handing over from
// holder to waiter, the events feed, and the leader killed and replaced.
func TestConsoleInBrowser(t *testing.T) {
	if _, err := os.Stat(*chromium); err != nil {
		t.Fatalf("no Chromium at %s (apt-get install chromium; make console-test does): %v", *chromium, err)
	}
	shots := *screenshots
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	servers := startServers(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var all []string
	for _, s := range servers {
		all = append(all, s.client)
	}

	// The cluster is up once it has a leader; the page goes to a follower's
	// console, so that killing the leader keeps the page's server.
	var leader string
	if !waitUntil(60*time.Second, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		leader, _ = leaderOf(cctx, servers[0].client)
		return leader != ""
	}) {
		t.Fatal("no leader")
	}
	var home *server
	for _, s := range servers {
		if s.id != leader {
			home = s
			break
		}
	}
	url := "http://" + home.admin + "/"
	if !waitUntil(20*time.Second, func() bool {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}) {
		t.Fatalf("no console at %s", url)
	}

	cl, err := client.Connect(ctx, all, client.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	mustCreate := func(path, data string) {
		if _, err := cl.Create(ctx, path, []byte(data), client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate("/app", "")
	mustCreate("/app/config", `{"replicas":3,"note":"<script>window.__xss=1</script><img src=x onerror=window.__xss=2>"}`)
	mustCreate("/app/<img src=x onerror=window.__xss=3>", "markup in a name")
	mustCreate("/app/workers", "")
	for i := range 3 {
		mustCreate(fmt.Sprintf("/app/workers/w%d", i+1), fmt.Sprintf("worker %d", i+1))
	}
	ops := make([]client.Op, 0, 120)
	for i := range 120 {
		ops = append(ops, client.CreateOp(fmt.Sprintf("/app/big-%03d", i), nil, client.CreateMode{}))
	}
	if _, err := cl.Multi(ctx, ops...); err != nil {
		t.Fatal(err)
	}

	// Traffic for the chart: a few writes and reads a second, bounded.
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		mustCreate("/traffic", "")
		for i := 0; i < 3000 && trafficCtx.Err() == nil; i++ {
			_, _ = cl.Set(trafficCtx, "/traffic", []byte(strconv.Itoa(i)), -1)
			for range 3 {
				_, _, _ = cl.Get(trafficCtx, "/traffic")
			}
			select {
			case <-trafficCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	defer func() { stopTraffic(); wg.Wait() }()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(*chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 860))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer bcancel()
	// The first action starts the browser, for as long as bctx lasts (a
	// timeout on it would end the browser too).
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	p := &page{t: t, ctx: bctx, shots: shots}

	// Cluster: three members, the leader marked, numbers and chart live.
	p.do("open the cluster view", chromedp.Navigate(url+"#cluster"))
	// The leader marked: one row, the member the summary names and whose own
	// role is leader (a leader change meanwhile on a busy machine is fine).
	const leaderRow = `(() => {
		const rows = document.querySelectorAll('#members tr.leader');
		const l = rows.length === 1 ? rows[0] : null;
		return l && l.cells[1].textContent === 'leader' &&
			document.querySelector('#cluster-summary').textContent.startsWith('leader ' + l.dataset.member + ',') ? l.dataset.member : '';
	})()`
	p.until("three members, the leader marked", `document.querySelectorAll('#members tbody tr').length === 3 && `+leaderRow+` !== ''`)
	// The chart's history is the console's, from before the page opened
	// (it used to start with the first page).
	p.until("the chart's history predates the page", `chart.samples.length > 0 && chart.samples[0].t < performance.timeOrigin`)
	p.until("the traffic chart has half a minute of points", `chart.samples.filter(s => s.writes > 0 && s.reads > 0).length >= 25`)
	p.until("the rates show", `[...document.querySelectorAll('#members tbody td')].some(td => /^[1-9]/.test(td.textContent) && td.cellIndex === 8)`)
	if got := p.eval(`(() => { const c = document.querySelector('#chart'), s = document.querySelector('#view-cluster'); return c.getBoundingClientRect().width + ' of ' + s.getBoundingClientRect().width; })()`); !chartFills(got) {
		t.Errorf("the chart is %s pixels wide: it does not fill the width", got)
	}
	p.shot("cluster")

	// Tree: a node's data as pretty JSON, markup shown as text only.
	p.do("open /app/config", chromedp.Navigate(url+"#tree:/app/config"))
	p.until("the data as JSON", `document.querySelector('#node-data').textContent.includes('"replicas": 3')`)
	p.until("the tree shows /app's first 100 children, its count, and how many more", `document.querySelector('.tree .name[data-path="/app/big-000"]') !== null &&
		document.querySelector('.tree .name[data-path="/app"]').parentElement.textContent.includes('(123)') &&
		document.querySelector('.tree .more')?.textContent.includes('23 of 123 left')`)
	p.do("show more", chromedp.Click(`.tree .more`))
	p.until("the rest of /app's children", `document.querySelector('.tree .name[data-path="/app/workers"]') !== null && document.querySelector('.tree .more') === null`)
	if got := p.eval(`String(window.__xss) + ' ' + document.querySelectorAll('main script, main img, #tree img').length`); got != "undefined 0" {
		t.Errorf("markup from the tree ran or was inserted: %s", got)
	}
	if got := p.eval(`document.querySelector('#node-data').textContent`); !strings.Contains(got, "<script>window.__xss=1</script>") {
		t.Errorf("the data is not shown as text: %q", got)
	}
	if got := p.eval(`[...document.querySelectorAll('.tree .name')].map(n => n.textContent).join('|')`); !strings.Contains(got, "<img src=x onerror=window.__xss=3>") {
		t.Errorf("the node named with markup is not shown as text: %q", got)
	}
	p.do("show hex", chromedp.Click(`#data-tabs button[data-mode="hex"]`))
	p.until("the hex dump", `document.querySelector('#node-data').textContent.startsWith('00000000  7b 22')`)
	p.do("show JSON", chromedp.Click(`#data-tabs button[data-mode="json"]`))
	p.shot("tree")

	// Edit: behind a confirmation, with the version read.
	edited := `{"replicas":5}`
	p.do("edit and save", chromedp.SetValue(`#node-edit`, edited), chromedp.Click(`#node-save`))
	p.until("the confirmation", `document.querySelector('#confirm').open`)
	p.shot("edit")
	p.do("confirm", chromedp.Click(`#confirm-ok`))
	p.until("the new version", `[...document.querySelectorAll('#stat tr')].some(tr => tr.textContent === 'dataVersion1')`)
	if data, _, err := cl.Get(ctx, "/app/config"); err != nil || string(data) != edited {
		t.Fatalf("after the edit /app/config holds %q, %v", data, err)
	}
	// A change made elsewhere meanwhile: the page's set fails with BadVersion.
	if _, err := cl.Set(ctx, "/app/config", []byte(`{"replicas":7}`), 1); err != nil {
		t.Fatal(err)
	}
	p.do("save a stale edit", chromedp.SetValue(`#node-edit`, `{"replicas":6}`), chromedp.Click(`#node-save`))
	p.until("the confirmation", `document.querySelector('#confirm').open`)
	p.do("confirm", chromedp.Click(`#confirm-ok`))
	p.until("BadVersion", `document.querySelector('#node-error').textContent.startsWith('BadVersion')`)
	p.shot("badversion")
	if data, _, _ := cl.Get(ctx, "/app/config"); string(data) != `{"replicas":7}` {
		t.Fatalf("a stale edit overwrote /app/config: %q", data)
	}

	// Create a child and delete a node, each behind a confirmation.
	p.do("open /app/workers", chromedp.Navigate(url+"#tree:/app/workers"))
	p.until("its data", `document.querySelector('#node-path').textContent === '/app/workers' && !document.querySelector('#node-body').hidden`)
	p.do("create", chromedp.Click(`#node-create`))
	p.until("the create dialog", `document.querySelector('#confirm').open`)
	p.do("fill it in", chromedp.SetValue(`#create-name`, "w4"), chromedp.SetValue(`#create-data`, "worker 4"), chromedp.Click(`#confirm-ok`))
	p.until("the new node shown", `document.querySelector('#node-path').textContent === '/app/workers/w4' && document.querySelector('#node-data').textContent === 'worker 4'`)
	if data, _, err := cl.Get(ctx, "/app/workers/w4"); err != nil || string(data) != "worker 4" {
		t.Fatalf("created /app/workers/w4: %q, %v", data, err)
	}
	p.do("delete it", chromedp.Click(`#node-delete`))
	p.until("the delete confirmation", `document.querySelector('#confirm').open`)
	p.do("confirm", chromedp.Click(`#confirm-ok`))
	p.until("back on the parent", `document.querySelector('#node-path').textContent === '/app/workers'`)
	if _, ok, err := cl.Exists(ctx, "/app/workers/w4"); ok || err != nil {
		t.Fatalf("/app/workers/w4 after its deletion: exists %v, %v", ok, err)
	}

	// Locks: the view opens on the locks and elections there are; none yet,
	// so it says how to make one.
	p.do("open the locks view", chromedp.Navigate(url+"#locks:"))
	p.until("no locks yet, and what makes one", `!document.querySelector('#recipes-empty').hidden && document.querySelector('#recipes-empty').textContent.includes('coordctl lock /locks/NAME -- CMD')`)

	// A holder with its fencing token, two waiters, then a handoff.
	var mus []*lockrecipe.Mutex
	var sessions []string
	for range 3 {
		c, err := client.Connect(ctx, all, client.WithSessionTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		sessions = append(sessions, fmt.Sprintf("0x%x", c.SessionID()))
		mus = append(mus, lockrecipe.NewMutex(lockrecipe.NewSession(c), "/locks/job"))
	}
	tok, err := mus[0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mus[1:] {
		go func() { _, _ = m.Lock(ctx) }()
	}
	// The list shows it (it refreshes every few seconds); the lock opens
	// from it.
	p.until("the lock listed, held, two waiting", `(r => r && r.cells[1].textContent === 'lock' && r.cells[2].textContent === '1' && r.cells[3].textContent === '2')(document.querySelector('#recipes tr[data-path="/locks/job"]'))`)
	p.shot("locks-list")
	p.do("open the lock from the list", chromedp.Click(`#recipes tr[data-path="/locks/job"] a`))
	p.until("the holder and two waiters", fmt.Sprintf(
		`document.querySelector('#holders tbody')?.textContent.includes(%q) && document.querySelector('#holders tbody').textContent.includes(%q) && document.querySelectorAll('#waiting tbody tr').length === 2`,
		sessions[0], strconv.FormatInt(int64(tok), 10)))
	if err := mus[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p.until("the handoff", `document.querySelectorAll('#waiting tbody tr').length === 1 && document.querySelectorAll('#handoffs li').length === 2`)
	if got := p.eval(`document.querySelector('#holders tbody').textContent`); !strings.Contains(got, sessions[1]) && !strings.Contains(got, sessions[2]) {
		t.Errorf("after the handoff the holder row is %q", got)
	}
	p.shot("locks")

	// Sessions: the lock holders' among them.
	p.do("open sessions", chromedp.Navigate(url+"#sessions"))
	p.until("the sessions", fmt.Sprintf(`document.querySelector('#sessions tbody').textContent.includes(%q)`, sessions[2]))
	p.shot("sessions")

	// Events: changes under /app/workers as they happen.
	p.do("open events", chromedp.Navigate(url+"#events:/app/workers"))
	p.until("the feed is live", `document.querySelector('#events-live').textContent.startsWith('live')`)
	p.until("the empty feed says what brings events", `!document.querySelector('#events-empty').hidden && document.querySelector('#events-empty').textContent.includes('coordctl create /app/workers/demo hello')`)
	mustCreate("/app/workers/w5", "five")
	if _, err := cl.Set(ctx, "/app/workers/w1", []byte("busy"), -1); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, "/app/workers/w5", -1); err != nil {
		t.Fatal(err)
	}
	p.until("three events in order", `[...document.querySelectorAll('#events tbody tr')].map(tr => tr.cells[1].textContent + ' ' + tr.cells[2].textContent).join(',') ===
		'NodeDeleted /app/workers/w5,NodeDataChanged /app/workers/w1,NodeCreated /app/workers/w5'`)
	if p.eval(`String(document.querySelector('#events-empty').hidden)`) != "true" {
		t.Error("the feed still says it is empty after three events")
	}
	p.shot("events")

	// The leader dies: the page shows it unreachable and the new leader.
	p.do("open the cluster view", chromedp.Navigate(url+"#cluster"))
	p.until("the leader marked", leaderRow+` !== ''`)
	leader = p.eval(leaderRow)
	if leader == home.id {
		// Leadership moved to the page's own server meanwhile: move it away
		// (killing it would take the page down too).
		cc, err := grpc.NewClient(home.client, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		if _, err := apipb.NewCoordClient(cc).TransferLeadership(ctx, &apipb.TransferLeadershipRequest{}); err != nil {
			t.Fatalf("moving leadership away from the page's server: %v", err)
		}
		p.until("another leader marked", fmt.Sprintf(`(l => l !== '' && l !== %q)(%s)`, home.id, leaderRow))
		leader = p.eval(leaderRow)
	}
	for _, s := range servers {
		if s.id == leader {
			s.kill()
		}
	}
	p.until("a new leader, the old one unreachable", fmt.Sprintf(
		`(l => l && l.dataset.member !== %[1]q)(document.querySelector('#members tr.leader')) && document.querySelector('#members tr[data-member=%[1]q]')?.classList.contains('unreachable')`, leader))
	p.shot("failover")
}
