package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
)

// Reaching the servers: the addresses of --servers, and why a server could
// not be used, said plainly.

// defaultPort is the client port a --servers address without one gets:
// coordd's default, and ZooKeeper's.
const defaultPort = "2181"

// normalizeServer gives addr ("host", "host:port", "IPv4", "IPv4:port",
// "[IPv6]", "[IPv6]:port" or a bare IPv6) the default port when it has none
// and checks the port.
func normalizeServer(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		switch {
		case strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]"):
			host = addr[1 : len(addr)-1]
		case strings.Count(addr, ":") > 1 && net.ParseIP(addr) != nil:
			host = addr // a bare IPv6 address
		case !strings.Contains(addr, ":") && !strings.ContainsAny(addr, "[]"):
			host = addr
		default:
			return "", fmt.Errorf("--servers: bad address %q (want host, host:port or [IPv6]:port)", addr)
		}
		port = defaultPort
	}
	if host == "" {
		return "", fmt.Errorf("--servers: %q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("--servers: bad port in %q", addr)
	}
	return net.JoinHostPort(host, port), nil
}

// serverFailure is why one server could not be used.
type serverFailure struct {
	Address string `json:"address"`
	Error   string `json:"error"`
}

// connectError says that no server could be used, and why each failed.
type connectError struct {
	what    string // "cannot connect to any server", "no server answered"
	after   time.Duration
	servers []serverFailure
}

func (e *connectError) Error() string {
	var b strings.Builder
	b.WriteString(e.what)
	if e.after > 0 {
		fmt.Fprintf(&b, " within %s", e.after)
	}
	b.WriteString(":")
	for _, s := range e.servers {
		fmt.Fprintf(&b, "\n  %s: %s", s.Address, s.Error)
	}
	return b.String()
}

// headline is the error's first line, without the servers.
func (e *connectError) headline() string {
	if e.after > 0 {
		return fmt.Sprintf("%s within %s", e.what, e.after)
	}
	return e.what
}

// failureReason turns why a server could not be used into a few plain
// words: "connection refused", "timed out", "unknown host", the server's
// own reason ("unavailable: server 2 has no leader"), ...
func failureReason(err error) string {
	var dns *net.DNSError
	switch {
	case err == nil:
		return "no answer"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "unknown host"
		}
		return "cannot resolve the host: " + dns.Err
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return "timed out"
	case errors.Is(err, client.ErrUnavailable):
		return "unavailable: " + serverReason(err, client.ErrUnavailable)
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return "timed out"
	}
	// gRPC flattens the dial error into the status text.
	if st, ok := status.FromError(err); ok {
		msg := st.Message()
		switch {
		case strings.Contains(msg, "connection refused"):
			return "connection refused"
		case strings.Contains(msg, "no such host"):
			return "unknown host"
		case strings.Contains(msg, "i/o timeout"), st.Code() == codes.DeadlineExceeded:
			return "timed out"
		case st.Code() == codes.Unimplemented:
			return "not a coordd server (" + msg + ")"
		}
		return fmt.Sprintf("%s (%s)", msg, strings.ToLower(st.Code().String()))
	}
	return errText(err)
}

// serverReason is the server's message in an error wrapping sentinel
// ("server 2 has no leader"), or the sentinel's own words.
func serverReason(err, sentinel error) string {
	s := err.Error()
	if i := strings.LastIndex(s, sentinel.Error()); i >= 0 {
		if rest := strings.TrimPrefix(s[i+len(sentinel.Error()):], ": "); rest != "" {
			return rest
		}
	}
	return strings.TrimPrefix(sentinel.Error(), "client: ")
}

// probe dials every server's TCP port at once, each for at most d, and
// returns the failure of each server that did not accept the connection.
func probe(ctx context.Context, servers []string, d time.Duration) map[string]error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu     sync.Mutex
		failed = map[string]error{}
		wg     sync.WaitGroup
		dialer net.Dialer
	)
	for _, addr := range servers {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			if err != nil {
				mu.Lock()
				failed[addr] = err
				mu.Unlock()
				return
			}
			conn.Close()
		}(addr)
	}
	wg.Wait()
	return failed
}

// connectFailures records the last reason each server gave the client for
// not opening the session: the client logs each failed attempt (at debug
// level, "client: connect failed", with the server and the error).
type connectFailures struct {
	mu   sync.Mutex
	last map[string]error
	// changed, if set, is signalled (without blocking) on each failure.
	changed chan struct{}
}

func (f *connectFailures) Enabled(context.Context, slog.Level) bool { return true }

func (f *connectFailures) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "client: connect failed" {
		return nil
	}
	var (
		addr string
		err  error
	)
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "server":
			addr = a.Value.String()
		case "err":
			err, _ = a.Value.Any().(error)
		}
		return true
	})
	if addr != "" && err != nil {
		f.mu.Lock()
		f.last[addr] = err
		f.mu.Unlock()
		if f.changed != nil {
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

func (f *connectFailures) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f *connectFailures) WithGroup(string) slog.Handler      { return f }

// get returns the last failure of addr, if any.
func (f *connectFailures) get(addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last[addr]
}

// failures lists, in the order of servers, why each failed: the latest
// reason, from later (nil or nil for the server: none) or else from failed.
func failures(servers []string, failed map[string]error, later func(addr string) error) []serverFailure {
	var out []serverFailure
	for _, addr := range servers {
		var err error
		if later != nil {
			err = later(addr)
		}
		if err == nil {
			err = failed[addr]
		}
		out = append(out, serverFailure{Address: addr, Error: failureReason(err)})
	}
	return out
}
