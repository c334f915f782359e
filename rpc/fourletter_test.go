package rpc

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/tlsutil"
)

// TestFourLetterWordEndsCleanly: a four-letter word's answer arrives whole
// and the stream ends in a clean end of stream (FIN), never a reset,
// whatever the client sends after the word (nothing, zktop's "\n", "\r\n",
// more bytes) and whether or not it shuts its sending side (zktop does;
// `echo ruok | nc` does not), on a plaintext client port and on a TLS one.
// Over TLS the client reads to the end of the TCP stream under TLS too: a
// client that does not wait for TLS's close_notify must see FIN as well.
func TestFourLetterWordEndsCleanly(t *testing.T) {
	p := newTestPKI(t)
	server := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	plain := newTestNodeWith(t, "1")
	secure := newTestNodeWith(t, "1", func(c *Config) { c.ClientTLS = server })
	waitLeader(t, plain)
	waitLeader(t, secure)

	junk := strings.Repeat("not a request\n", 8<<10) // 112 KiB
	trailers := []struct{ name, text string }{
		{"nothing", ""}, {"newline", "\n"}, {"crlf", "\r\n"},
		{"more bytes", "\nsrvr\nmore"}, {"many bytes", "\n" + junk},
	}
	words := []struct {
		word  string
		check func(string) bool
	}{
		{"ruok", func(s string) bool { return s == "imok" }},
		{"stat", func(s string) bool {
			return strings.HasPrefix(s, "Zookeeper version: ") && strings.Contains(s, "\nMode: ") && strings.HasSuffix(s, "\n")
		}},
		{"wchc", func(s string) bool { return s == "wchc is not executed because it is not in the whitelist.\n" }},
	}
	for _, port := range []struct {
		name string
		n    *Node
		tls  *tls.Config
	}{{"plaintext", plain, nil}, {"tls", secure, p.clientTLS(nil)}} {
		for _, w := range words {
			for _, tr := range trailers {
				for _, shut := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/%s/shut=%v", port.name, w.word, tr.name, shut)
					t.Run(name, func(t *testing.T) {
						got, err := askWord(port.n.ClientAddr(), port.tls, w.word+tr.text, shut)
						if errors.Is(err, syscall.ECONNRESET) {
							t.Fatalf("reset after %q: %v", got, err)
						}
						if err != nil {
							t.Fatalf("after %q: %v", got, err)
						}
						if !w.check(got) {
							t.Fatalf("answer: %q", got)
						}
					})
				}
			}
		}
	}
}

// askWord sends text on a new connection to addr (over TLS when cfg is
// given), shuts its sending side if shut, and reads the answer to the end
// of the stream; over TLS, then to the end of the TCP stream under it. An
// error is the read's (ECONNRESET when the server reset the connection).
func askWord(addr string, cfg *tls.Config, text string, shut bool) (string, error) {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer raw.Close()
	tcp := raw.(*net.TCPConn)
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	var c net.Conn = raw
	var tc *tls.Conn
	if cfg != nil {
		tc = tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		c = tc
	}
	// The server may answer and close before the last of many bytes is
	// sent: write in the background, and judge by what is read.
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte(text))
		if err == nil && shut {
			if tc != nil {
				err = tc.CloseWrite()
			}
			if err == nil {
				err = tcp.CloseWrite()
			}
		}
		wrote <- err
	}()
	b, err := io.ReadAll(c)
	if err == nil && tc != nil {
		// TLS ended with close_notify; the TCP stream must end too.
		var rest []byte
		if rest, err = io.ReadAll(raw); err == nil && len(rest) > 0 {
			err = fmt.Errorf("%d bytes after close_notify", len(rest))
		}
	}
	if err == nil {
		err = <-wrote
	}
	return string(b), err
}
