package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proxyMark is the socket mark of the slow-link proxy's own connections to
// the nodes, which the nat redirect rules skip.
const proxyMark = 0xc0dd

// tagPrefix starts the comment of every iptables rule a run adds.
const tagPrefix = "coordd-chaos-"

// iptables manages the tagged rules of one run.
type iptables struct {
	tag string
	log func(string, ...any)

	mu    sync.Mutex
	rules map[string][]string // key -> rule spec (table first)
}

// iptablesUsable says why partitions cannot be made here, or "".
func iptablesUsable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return "no iptables binary (apt-get install -y iptables)"
	}
	if out, err := exec.Command("iptables", "-w", "5", "-S", "OUTPUT").CombinedOutput(); err != nil {
		return fmt.Sprintf("iptables -S OUTPUT failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// natUsable says why the slow-link redirects cannot be made here, or "".
func natUsable() string {
	if out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", "OUTPUT").CombinedOutput(); err != nil {
		return fmt.Sprintf("iptables -t nat -S OUTPUT failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

func newIptables(logf func(string, ...any)) *iptables {
	return &iptables{tag: fmt.Sprintf("%s%d", tagPrefix, os.Getpid()), log: logf, rules: map[string][]string{}}
}

func runIptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// add appends a tagged rule (spec: table, chain, match..., target) under key.
func (ip *iptables) add(key, table string, spec ...string) error {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if _, ok := ip.rules[key]; ok {
		return nil
	}
	full := append([]string{"-t", table, "-A", "OUTPUT"}, spec...)
	full = append(full, "-m", "comment", "--comment", ip.tag)
	// The target goes last.
	full = moveTarget(full)
	if err := runIptables(full...); err != nil {
		return err
	}
	ip.rules[key] = full
	return nil
}

// moveTarget moves "-j TARGET args..." to the end of a rule spec.
func moveTarget(spec []string) []string {
	for i, s := range spec {
		if s == "-j" {
			j := i + 2
			for j < len(spec) && strings.HasPrefix(spec[j], "--") && spec[j] != "--comment" {
				j += 2
			}
			if j > len(spec) {
				j = len(spec)
			}
			target := append([]string{}, spec[i:j]...)
			rest := append(append([]string{}, spec[:i]...), spec[j:]...)
			return append(rest, target...)
		}
	}
	return spec
}

// del removes the rule under key.
func (ip *iptables) del(key string) error {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	full, ok := ip.rules[key]
	if !ok {
		return nil
	}
	d := append([]string{}, full...)
	for i, s := range d {
		if s == "-A" {
			d[i] = "-D"
		}
	}
	delete(ip.rules, key)
	return runIptables(d...)
}

// delPrefix removes every rule whose key starts with prefix.
func (ip *iptables) delPrefix(prefix string) error {
	ip.mu.Lock()
	var keys []string
	for k := range ip.rules {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	ip.mu.Unlock()
	var errs []error
	for _, k := range keys {
		errs = append(errs, ip.del(k))
	}
	return errors.Join(errs...)
}

// removeAll deletes every rule of this run, then sweeps any rule still
// carrying this run's tag.
func (ip *iptables) removeAll() error {
	err := ip.delPrefix("")
	removeTagged(func(pid int) bool { return pid == os.Getpid() }, ip.log)
	return err
}

var tagRE = regexp.MustCompile(`--comment "?` + tagPrefix + `(\d+)"?`)

// removeTagged deletes the OUTPUT rules (filter and nat) tagged by a run
// whose pid matches.
func removeTagged(match func(pid int) bool, logf func(string, ...any)) {
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-w", "5", "-t", table, "-S", "OUTPUT").Output()
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			line := sc.Text()
			m := tagRE.FindStringSubmatch(line)
			if m == nil || !strings.HasPrefix(line, "-A OUTPUT ") {
				continue
			}
			pid, _ := strconv.Atoi(m[1])
			if !match(pid) {
				continue
			}
			args := append([]string{"-t", table, "-D"}, splitRule(strings.TrimPrefix(line, "-A "))...)
			if err := runIptables(args...); err != nil {
				logf("could not remove stale rule %q: %v", line, err)
			} else if pid != os.Getpid() {
				logf("removed stale rule of dead run %d: %s", pid, line)
			}
		}
	}
}

// splitRule splits an iptables -S line, honouring double quotes.
func splitRule(s string) []string {
	var out []string
	var cur strings.Builder
	inQ := false
	for _, r := range s {
		switch {
		case r == '"':
			inQ = !inQ
		case r == ' ' && !inQ:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// pidAlive reports whether a process with this pid exists.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// cleanStaleRules removes the rules left behind by chaos runs that died.
func cleanStaleRules(logf func(string, ...any)) {
	removeTagged(func(pid int) bool { return pid != os.Getpid() && !pidAlive(pid) }, logf)
}

// network applies partitions and slow links between the nodes of a run.
type network struct {
	c   *procCluster
	ipt *iptables // nil: no iptables, no network faults
	px  *slowProxy
}

// cutKey names the rules of a cut between i and j.
func cutKey(i, j int) string {
	if i > j {
		i, j = j, i
	}
	return fmt.Sprintf("cut/%d-%d", i, j)
}

// cut drops every packet between nodes i and j, both directions (direct
// and through the proxy, whose node-side leg uses the source's address).
func (nw *network) cut(i, j int) error {
	a, b := nw.c.nodes[i].ip, nw.c.nodes[j].ip
	k := cutKey(i, j)
	if err := nw.ipt.add(k+"/ab", "filter", "-s", a, "-d", b, "-j", "DROP"); err != nil {
		return err
	}
	return nw.ipt.add(k+"/ba", "filter", "-s", b, "-d", a, "-j", "DROP")
}

// partition cuts every link between the two sides.
func (nw *network) partition(side1, side2 []int) error {
	for _, i := range side1 {
		for _, j := range side2 {
			if err := nw.cut(i, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// heal removes every cut.
func (nw *network) heal() error { return nw.ipt.delPrefix("cut/") }

// slowProxy forwards each peer link i->j with a configurable delay.
type slowProxy struct {
	c     *procCluster
	log   func(string, ...any)
	lns   []net.Listener
	delay [][]atomic.Int64 // ns, [i][j]
	wg    sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// proxyIP is the listen address of link i->j's proxy in slot s.
func proxyIP(slot, i, j int) string { return fmt.Sprintf("127.0.%d.%d", slot, 100+10*(i+1)+(j+1)) }

// startProxy listens for every ordered pair and installs the redirects.
func startProxy(c *procCluster, ipt *iptables, logf func(string, ...any)) (*slowProxy, error) {
	n := len(c.nodes)
	p := &slowProxy{c: c, log: logf, conns: map[net.Conn]struct{}{}}
	p.delay = make([][]atomic.Int64, n)
	for i := range p.delay {
		p.delay[i] = make([]atomic.Int64, n)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			addr := fmt.Sprintf("%s:%d", proxyIP(c.slot, i, j), peerPort)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				p.close()
				return nil, err
			}
			p.lns = append(p.lns, ln)
			p.wg.Add(1)
			go p.accept(ln, i, j)
			err = ipt.add(fmt.Sprintf("nat/%d-%d", i, j), "nat",
				"-p", "tcp", "-s", c.nodes[i].ip, "-d", c.nodes[j].ip, "--dport", fmt.Sprint(peerPort),
				"-m", "mark", "!", "--mark", fmt.Sprint(proxyMark),
				"-j", "DNAT", "--to-destination", addr)
			if err != nil {
				p.close()
				return nil, err
			}
		}
	}
	return p, nil
}

// setDelay sets link i->j's one-way delay.
func (p *slowProxy) setDelay(i, j int, d time.Duration) { p.delay[i][j].Store(int64(d)) }

// clearDelays sets every delay back to zero.
func (p *slowProxy) clearDelays() {
	for i := range p.delay {
		for j := range p.delay[i] {
			p.delay[i][j].Store(0)
		}
	}
}

func (p *slowProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *slowProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *slowProxy) accept(ln net.Listener, i, j int) {
	defer p.wg.Done()
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(in)
			d := net.Dialer{
				Timeout:   2 * time.Second,
				LocalAddr: &net.TCPAddr{IP: net.ParseIP(p.c.nodes[i].ip)},
				Control: func(_, _ string, rc syscall.RawConn) error {
					var serr error
					if err := rc.Control(func(fd uintptr) {
						serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, proxyMark)
					}); err != nil {
						return err
					}
					return serr
				},
			}
			out, err := d.Dial("tcp", p.c.nodes[j].peerAddr)
			if err != nil {
				return
			}
			if !p.track(out) {
				return
			}
			defer p.untrack(out)
			done := make(chan struct{}, 2)
			go func() { p.pipe(out, in, &p.delay[i][j]); done <- struct{}{} }()
			go func() { p.pipe(in, out, &p.delay[j][i]); done <- struct{}{} }()
			<-done
		}()
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, holding each chunk until its due time (arrival
// plus the link's delay at arrival), in order. It closes both on error.
func (p *slowProxy) pipe(dst, src net.Conn, delay *atomic.Int64) {
	q := make(chan chunk, 256)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{buf[:n], time.Now().Add(time.Duration(delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		dst.Close()
		src.Close()
		for range q {
		}
	}()
	for ch := range q {
		if w := time.Until(ch.due); w > 0 {
			time.Sleep(w)
		}
		if _, err := dst.Write(ch.b); err != nil {
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// close stops listening and drops every proxied connection.
func (p *slowProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	for _, ln := range p.lns {
		ln.Close()
	}
	ch := make(chan struct{})
	go func() { p.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		p.log("slow-link proxy: goroutines still running 5s after close")
	}
}

// slotLock holds an exclusive claim on an address slot (127.0.S.x) for the
// run, so that concurrent runs on one machine never share addresses.
type slotLock struct{ f *os.File }

func claimSlot(ctx context.Context) (int, *slotLock, error) {
	for s := 0; s < 64; s++ {
		if ctx.Err() != nil {
			break
		}
		f, err := os.OpenFile(fmt.Sprintf("%s/coordd-chaos-slot-%d.lock", os.TempDir(), s), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		// Also make sure nothing else listens on the slot's client port.
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", nodeIP(s, 0), clientPort))
		if err != nil {
			f.Close()
			continue
		}
		ln.Close()
		return s, &slotLock{f}, nil
	}
	return 0, nil, errors.New("no free address slot 127.0.0..63.x")
}

func (l *slotLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
	}
}
