package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asCoordd is set in the environment of the processes that scripts start as
// bin/coordd: the test binary then runs coordd's main instead of the tests.
const asCoordd = "COORDD_TEST_AS_COORDD"

func TestMain(m *testing.M) {
	if os.Getenv(asCoordd) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// coorddBin returns a directory holding "coordd": this test binary, which
// runs as coordd when asCoordd is set (the caller sets it).
func coorddBin(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "coordd")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// freeRun finds n consecutive ports free on host for clients and n for
// peers, below the ephemeral range (so no outgoing connection holds one).
func freeRun(t *testing.T, host string, n int) (clientPort, peerPort int) {
	t.Helper()
	free := func(base int) bool {
		for i := 0; i < n; i++ {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(base+i)))
			if err != nil {
				return false
			}
			ln.Close()
		}
		return true
	}
	for attempt := 0; attempt < 200; attempt++ {
		c := 20000 + rand.IntN(6000)
		p := c + 6000
		if free(c) && free(p) {
			return c, p
		}
	}
	t.Fatalf("no free ports on %s", host)
	return 0, 0
}

// descendants lists the pids of every live descendant of pid (from /proc).
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// waitUntil polls cond every 20ms until it holds or d passes.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// TestClusterScriptStopsOnSignal: make cluster's script, stopped with TERM,
// INT or HUP, stops every server it started (its ports are free again) and
// exits: 0 for INT (Ctrl-C, its usual end, which make must not report as
// a failure), 128 + the signal for the others. Before that, one server is
// killed: the script says "server 3 exited (status 137)" (bash used to
// print a line of the script's source), and at the end it counts the two
// servers it stopped, not three.
func TestClusterScriptStopsOnSignal(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := coorddBin(t)
	// A shell cannot trap a signal it was started with ignored, as every
	// process under nohup is with SIGHUP, and the script would go on
	// running. Handled here while the test runs, the signals reach the
	// script's processes at their default again (a child gets the default
	// for a signal its parent handles), as from a terminal.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(caught)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			const n = 3
			host := fmt.Sprintf("127.0.0.%d", 100+rand.IntN(150))
			cport, pport := freeRun(t, host, n)
			cmd := exec.Command("bash", "scripts/cluster.sh", strconv.Itoa(n))
			cmd.Dir = root
			cmd.Env = append(os.Environ(), asCoordd+"=1", "BIN="+bin, "CLUSTER_HOST="+host,
				"CLIENT_PORT="+strconv.Itoa(cport), "PEER_PORT="+strconv.Itoa(pport),
				"CLUSTER_DIR="+t.TempDir(), "GOMAXPROCS=1", "LOG_LEVEL=error")
			// A pipe of our own, so that Wait reports the script's exit
			// whoever else (a server left behind) still holds the pipe.
			out, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			cmd.Stdout, cmd.Stderr = w, w
			// A process group of its own, as a terminal's foreground job.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			err = cmd.Start()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var started []int // every process the script started, once up
			t.Cleanup(func() {
				for _, p := range append(started, cmd.Process.Pid) {
					if alive(p) {
						syscall.Kill(p, syscall.SIGKILL)
					}
				}
			})
			lines := make(chan string, 1000)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					select {
					case lines <- sc.Text():
					default:
					}
				}
				close(lines)
			}()
			var log []string
			// expect reads lines until one holds want.
			expect := func(want string, d time.Duration) {
				t.Helper()
				for deadline := time.After(d); ; {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatalf("the script's output ended without %q:\n%s", want, strings.Join(log, "\n"))
						}
						log = append(log, l)
						if strings.Contains(l, want) {
							return
						}
					case <-deadline:
						// The servers still running print their goroutines
						// (SIGQUIT), so that a stop that hangs says where.
						for _, p := range descendants(cmd.Process.Pid) {
							if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.Contains(string(c), "coordd\x00--id") {
								_ = syscall.Kill(p, syscall.SIGQUIT)
							}
						}
						for more := time.After(3 * time.Second); ; {
							select {
							case l, ok := <-lines:
								if ok {
									log = append(log, l)
									continue
								}
							case <-more:
							}
							break
						}
						t.Fatalf("the script did not say %q:\n%s", want, strings.Join(log, "\n"))
					}
				}
			}
			ready := false
			for deadline := time.After(30 * time.Second); !ready; {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("the script ended before its servers were up:\n%s", strings.Join(log, "\n"))
					}
					log = append(log, l)
					ready = strings.Contains(l, "servers running")
				case <-deadline:
					t.Fatalf("the script did not start its servers:\n%s", strings.Join(log, "\n"))
				}
			}
			serving := func() bool {
				for i := 0; i < n; i++ {
					c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(cport+i)), time.Second)
					if err != nil {
						return false
					}
					c.Close()
				}
				return true
			}
			if !waitUntil(30*time.Second, serving) {
				t.Fatalf("the servers do not all listen:\n%s", strings.Join(log, "\n"))
			}
			started = descendants(cmd.Process.Pid)
			if len(started) < n {
				t.Fatalf("the script has %d processes, want at least %d servers", len(started), n)
			}

			// Server 3 dies.
			third := 0
			for _, p := range started {
				if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.Contains(string(c), "--id\x003\x00") {
					third = p
				}
			}
			if third == 0 {
				t.Fatal("no process of server 3 among the script's")
			}
			if err := syscall.Kill(third, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			expect("server 3 exited (status 137)", 30*time.Second)

			// Ctrl-C reaches the whole group, the servers and the seds that
			// prefix their lines too: the servers shut down and say so (a
			// sed that died first would have killed its server with
			// SIGPIPE). TERM and HUP come to the script alone, as kill sends
			// them.
			if sig == syscall.SIGINT {
				err = syscall.Kill(-cmd.Process.Pid, sig)
			} else {
				err = cmd.Process.Signal(sig)
			}
			if err != nil {
				t.Fatal(err)
			}
			expect("stopped 2 servers", 30*time.Second)
			want := 128 + int(sig)
			if sig == syscall.SIGINT {
				want = 0
			}
			select {
			case err := <-exited:
				if code := cmd.ProcessState.ExitCode(); code != want {
					t.Errorf("the script ended with %v, want exit status %d", err, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the script did not exit after %v", sig)
			}
			for l := range lines {
				log = append(log, l)
			}
			if sig == syscall.SIGINT {
				// A server still starting (a loaded machine) says it stops
				// while starting; one that serves, that it shuts down.
				for _, id := range []string{"1", "2"} {
					said := slices.ContainsFunc(log, func(l string) bool {
						return l == "["+id+"] coordd: interrupt: shutting down" || l == "["+id+"] coordd: interrupt while starting: stopping"
					})
					if !said {
						t.Errorf("server %s did not say it stops after Ctrl-C:\n%s", id, strings.Join(log, "\n"))
					}
				}
			}
			for _, l := range log {
				if strings.Contains(l, "Killed") || strings.Contains(l, "GOMAXPROCS=$procs") || strings.Contains(l, "cluster.sh: line") {
					t.Errorf("the script printed bash's job notice, or its own source: %q", l)
				}
			}
			gone := func() bool {
				for _, p := range started {
					if alive(p) {
						return false
					}
				}
				return true
			}
			if !waitUntil(15*time.Second, gone) {
				var left []string
				for _, p := range started {
					if alive(p) {
						c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
						left = append(left, fmt.Sprintf("%d %s", p, strings.ReplaceAll(string(c), "\x00", " ")))
					}
				}
				t.Fatalf("after %v of the script, these of its processes still run:\n%s", sig, strings.Join(left, "\n"))
			}
			for i := 0; i < n; i++ {
				for _, port := range []int{cport + i, pport + i} {
					ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
					if err != nil {
						t.Errorf("port %d still taken: %v", port, err)
						continue
					}
					ln.Close()
				}
			}
		})
	}
}
