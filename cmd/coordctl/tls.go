package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
)

// TLS to the servers: --cacert, --cert and --key (or COORD_CACERT,
// COORD_CERT and COORD_KEY), and failures said in words a person can act
// on, a plaintext coordctl meeting a TLS server first.

// tlsSettings are the TLS flags of an invocation.
type tlsSettings struct {
	cacert, cert, key string
}

// tlsConfig builds the client's TLS configuration, or nil when no flag is
// given (plaintext). --cert and --key go together; --cacert alone verifies
// the servers, --cert and --key alone use the system's roots.
func (s tlsSettings) tlsConfig() (*tls.Config, error) {
	if s.cacert == "" && s.cert == "" && s.key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.cacert != "" {
		b, err := os.ReadFile(s.cacert)
		if err != nil {
			return nil, usagef("", "--cacert: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, usagef("", "--cacert %s holds no PEM certificate", s.cacert)
		}
	}
	switch {
	case s.cert != "" && s.key == "":
		return nil, usagef("", "--cert needs --key (the certificate's private key)")
	case s.key != "" && s.cert == "":
		return nil, usagef("", "--key needs --cert")
	case s.cert != "":
		pair, err := tls.LoadX509KeyPair(s.cert, s.key)
		if err != nil {
			if strings.Contains(err.Error(), "does not match") {
				return nil, usagef("", "--key %s is not the private key of --cert %s", s.key, s.cert)
			}
			return nil, usagef("", "--cert %s, --key %s: %v", s.cert, s.key, err)
		}
		// Present it whatever CAs the server says it accepts, so that a
		// server that does not trust it says so (rather than "no
		// certificate").
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return cfg, nil
}

// clientOptions are the options of every session coordctl opens.
func (c *cli) clientOptions(extra ...client.Option) []client.Option {
	opts := []client.Option{client.WithSessionTimeout(c.sessionTimeout)}
	if c.tls != nil {
		opts = append(opts, client.WithTLS(c.tls))
	}
	return append(opts, extra...)
}

// grpcCredentials are the transport credentials of coordctl's unary calls.
func (c *cli) grpcCredentials() grpc.DialOption {
	if c.tls != nil {
		return grpc.WithTransportCredentials(credentials.NewTLS(c.tls.Clone()))
	}
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

// Why a TLS connection failed, in words: the patterns of Go's TLS and X.509
// errors (which gRPC passes on as text) and what to do.
var tlsFailures = []struct{ match, reason string }{
	{"certificate signed by unknown authority", "its certificate is not signed by a CA in --cacert"},
	{"certificate has expired", "its certificate has expired or is not valid yet"},
	{"certificate is not valid", "its certificate does not name the host dialled (use a name or address it has, or reissue it)"},
	{"certificate is valid for", "its certificate does not name the host dialled (use a name or address it has, or reissue it)"},
	{"certificate required", "it requires a client certificate: pass --cert and --key"},
	{"tls: bad certificate", "it refused the client certificate (--cert): it must be signed by a CA in the server's --trusted-ca-file"},
	{"tls: unknown certificate authority", "it refused the client certificate (--cert): it must be signed by a CA in the server's --trusted-ca-file"},
	{"tls: expired certificate", "it refused the client certificate (--cert): expired"},
	{"first record does not look like a TLS handshake", "it does not speak TLS: is TLS on for its client port? (without it, drop --cacert, --cert and --key)"},
}

// tlsProbe remembers which servers speak TLS, asked at most once each.
type tlsProbe struct {
	mu        sync.Mutex
	known     map[string]bool
	diagnosed map[string]string
}

// speaksTLS reports whether addr answers a TLS ClientHello with a
// certificate.
func (p *tlsProbe) speaksTLS(addr string, d time.Duration) bool {
	p.mu.Lock()
	if v, ok := p.known[addr]; ok {
		p.mu.Unlock()
		return v
	}
	p.mu.Unlock()
	saw := false
	cfg := &tls.Config{
		InsecureSkipVerify: true, // only asking whether it speaks TLS
		VerifyConnection:   func(tls.ConnectionState) error { saw = true; return nil },
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	d2 := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	if c, err := d2.DialContext(ctx, "tcp", addr); err == nil {
		c.Close()
	}
	p.mu.Lock()
	if p.known == nil {
		p.known = map[string]bool{}
	}
	p.known[addr] = saw
	p.mu.Unlock()
	return saw
}

// matchTLSFailure finds the words for a TLS error's text.
func matchTLSFailure(msg string) (string, bool) {
	for _, f := range tlsFailures {
		if strings.Contains(msg, f.match) {
			return f.reason, true
		}
	}
	return "", false
}

// diagnose runs a TLS handshake with addr on cfg and waits briefly for the
// server's first word: the error text of a refusal, or "" if the server
// accepted (it then waits for the client to speak). Asked at most once per
// server.
func (p *tlsProbe) diagnose(addr string, cfg *tls.Config, d time.Duration) string {
	p.mu.Lock()
	if v, ok := p.diagnosed[addr]; ok {
		p.mu.Unlock()
		return v
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	result := ""
	td := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	c, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		result = err.Error()
	} else {
		_ = c.SetReadDeadline(time.Now().Add(d / 4))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				result = err.Error()
			}
		}
		c.Close()
	}
	p.mu.Lock()
	if p.diagnosed == nil {
		p.diagnosed = map[string]string{}
	}
	p.diagnosed[addr] = result
	p.mu.Unlock()
	return result
}

// expectsTLS is the reason a plaintext coordctl gives for a TLS server.
const expectsTLS = "expects TLS: pass --cacert (and --cert and --key if it requires client certificates), or set COORD_CACERT"

// tlsReason says why addr failed, when it is TLS's doing: a server that
// expects TLS from a plaintext coordctl, or a TLS handshake that failed.
// Such a failure does not go away by waiting.
func (c *cli) tlsReason(addr string, err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	if c.tls == nil {
		if ordinaryFailure(err) {
			return "", false
		}
		if c.probe.speaksTLS(addr, probeTimeout) {
			return expectsTLS, true
		}
		return "", false
	}
	if r, ok := matchTLSFailure(msg); ok {
		return r, true
	}
	if ordinaryFailure(err) {
		return "", false
	}
	// A server that refuses the client certificate says so in an alert
	// that a TLS 1.3 client reads only after its handshake; gRPC may have
	// met a broken pipe first. Ask once more, and read the answer.
	if r, ok := matchTLSFailure(c.probe.diagnose(addr, c.tls, probeTimeout)); ok {
		return r, true
	}
	if strings.Contains(msg, "handshake failed: EOF") || strings.Contains(msg, "handshake failed: read") {
		return "it closed the connection during the TLS handshake: it may not have TLS on (then drop --cacert, --cert and --key), or it refused the client certificate", true
	}
	return "", false
}

// ordinaryFailure says whether err is a failure to reach a server at all
// (refused, timed out, no route, unknown host, no leader), which TLS has
// nothing to do with.
func ordinaryFailure(err error) bool {
	switch failureReason(err) {
	case "connection refused", "timed out", "unknown host", "no route to the host":
		return true
	}
	return strings.HasPrefix(failureReason(err), "unavailable:")
}

// explainTLS rewrites the reasons of servers whose failure was TLS's.
func (c *cli) explainTLS(out []serverFailure, errs func(addr string) error) []serverFailure {
	for i := range out {
		if errs == nil {
			continue
		}
		if reason, ok := c.tlsReason(out[i].Address, errs(out[i].Address)); ok {
			out[i].Error = reason
		}
	}
	return out
}
