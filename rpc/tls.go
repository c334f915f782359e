package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/rpc/tlsutil"
)

// Transport security wraps the ports; it never forks the code behind them.
// With TLS on, a port's connection is handshaken first and then handled
// exactly as a plaintext one: the client port tells the protocols apart by
// the first decrypted bytes, the peer port reads its tag inside TLS, and the
// same gRPC servers, ZooKeeper front-end and Raft transport serve them. A
// port with TLS on is TLS-only.

// TLSFiles names a port's PEM files: certificate, key and CA bundle.
type TLSFiles = tlsutil.Files

// Flag names, for errors a person can act on.
var (
	clientTLSFlags = tlsutil.Flags{Cert: "--cert-file", Key: "--key-file", CA: "--trusted-ca-file"}
	peerTLSFlags   = tlsutil.Flags{Cert: "--peer-cert-file", Key: "--peer-key-file", CA: "--peer-trusted-ca-file"}
)

// checkTLS checks the TLS settings that do not need the files.
func (c *Config) checkTLS() error {
	if c.ClientCertAuth && (c.ClientTLS.Cert == "" || c.ClientTLS.CA == "") {
		return errors.New("rpc: --client-cert-auth needs --cert-file, --key-file and --trusted-ca-file (the CA that signs client certificates)")
	}
	if c.ClientTLS.Enabled() && c.ClientTLS.Cert == "" {
		return errors.New("rpc: --cert-file is required when --key-file or --trusted-ca-file is given")
	}
	if c.PeerTLS.Enabled() && (c.PeerTLS.Cert == "" || c.PeerTLS.Key == "" || c.PeerTLS.CA == "") {
		return errors.New("rpc: peer TLS needs all of --peer-cert-file, --peer-key-file and --peer-trusted-ca-file: peers always verify each other")
	}
	return nil
}

// loadTLS reads the certificates of the ports that have TLS on. A file
// that cannot be used stops the server with an error naming it.
func (n *Node) loadTLS() error {
	cfg := n.cfg
	if cfg.ClientTLS.Enabled() {
		src, err := tlsutil.Load(cfg.ClientTLS, tlsutil.Options{
			Role: tlsutil.RoleServer, Flags: clientTLSFlags, Port: "client port", Logger: n.log,
		})
		if err != nil {
			return fmt.Errorf("rpc: client port TLS: %w", err)
		}
		n.clientTLS = tlsutil.ServerConfig(src, cfg.ClientCertAuth)
	}
	if cfg.PeerTLS.Enabled() {
		host, _, err := net.SplitHostPort(cfg.PeerAddr)
		if err != nil {
			return fmt.Errorf("rpc: --peer-addr %s: %w", cfg.PeerAddr, err)
		}
		src, err := tlsutil.Load(cfg.PeerTLS, tlsutil.Options{
			Role: tlsutil.RolePeer, Host: host, Flags: peerTLSFlags, Port: "peer port", Logger: n.log,
		})
		if err != nil {
			return fmt.Errorf("rpc: peer TLS: %w", err)
		}
		n.peerTLS = src
	}
	return nil
}

// acceptTLS runs the server side of a TLS handshake on a connection a port
// accepted (its deadline already set). A connection that does not start
// with a TLS record, or whose handshake fails, is refused: refusals says
// why, and the connection is left for the caller to close.
func acceptTLS(c net.Conn, cfg *tls.Config, port string, peer bool, refusals *refusals) (*tls.Conn, bool) {
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return nil, false // closed or silent before saying anything: a port probe
	}
	if b[0] != tlsutil.RecordTypeHandshake {
		refusals.note(port, c.RemoteAddr(), plaintextRefusal(peer))
		return nil, false
	}
	tc := tls.Server(newPrefixConn(c, b[:]), cfg)
	if err := tc.Handshake(); err != nil {
		refusals.note(port, c.RemoteAddr(), tlsutil.Explain(err, peer))
		return nil, false
	}
	return tc, true
}

func plaintextRefusal(peer bool) tlsutil.Refusal {
	if peer {
		return tlsutil.Refusal{Kind: tlsutil.KindPlaintext,
			Text: "it speaks plaintext and peer TLS is on here: every server of a cluster needs --peer-cert-file, --peer-key-file and --peer-trusted-ca-file"}
	}
	return tlsutil.Refusal{Kind: tlsutil.KindPlaintext,
		Text: "it speaks plaintext and this port is TLS-only: the client needs TLS (coordctl --cacert, zkCli -Dzookeeper.client.secure=true, kazoo use_ssl=True)"}
}

func tlsOnPlainRefusal(peer bool) tlsutil.Refusal {
	if peer {
		return tlsutil.Refusal{Kind: tlsutil.KindNotTLSPort,
			Text: "it speaks TLS and peer TLS is off here: every server of a cluster needs the same --peer-* TLS flags"}
	}
	return tlsutil.Refusal{Kind: tlsutil.KindNotTLSPort,
		Text: "it speaks TLS and TLS is off on this port: start the server with --cert-file and --key-file, or connect without TLS"}
}

// refusalLogWindow is how long a refusal, once logged, is not logged again
// for the same port, remote host and reason. A client retrying in a loop
// would otherwise fill the log.
const refusalLogWindow = 10 * time.Minute

// maxRefusalKeys bounds the remembered refusals (a scan from many hosts).
const maxRefusalKeys = 4096

// refusals logs refused connections, once per port, remote host and reason
// within refusalLogWindow.
type refusals struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[refusalKey]*refusalSeen
}

type refusalKey struct{ port, host, kind string }

type refusalSeen struct {
	logged time.Time
	since  int // refusals not logged since
}

func newRefusals(log *slog.Logger) *refusals {
	return &refusals{log: log, now: time.Now, seen: make(map[refusalKey]*refusalSeen)}
}

// note records a refusal and logs it unless it was logged lately.
func (r *refusals) note(port string, remote net.Addr, why tlsutil.Refusal) {
	host := "unknown"
	if remote != nil {
		host = remote.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	k := refusalKey{port, host, why.Kind}
	r.mu.Lock()
	now := r.now()
	s := r.seen[k]
	if s != nil && now.Sub(s.logged) < refusalLogWindow {
		s.since++
		r.mu.Unlock()
		return
	}
	unlogged := 0
	if s != nil {
		unlogged = s.since
	}
	if len(r.seen) >= maxRefusalKeys {
		for key, v := range r.seen {
			if now.Sub(v.logged) >= refusalLogWindow {
				delete(r.seen, key)
			}
		}
		if len(r.seen) >= maxRefusalKeys {
			clear(r.seen)
		}
	}
	r.seen[k] = &refusalSeen{logged: now}
	r.mu.Unlock()
	attrs := []any{"remote", host, "reason", why.Kind}
	if unlogged > 0 {
		attrs = append(attrs, "refused_since_last_logged", unlogged)
	}
	r.log.Warn(fmt.Sprintf("%s: refused a connection from %s: %s (logged once per %s for this host and reason)", port, host, why.Text, refusalLogWindow), attrs...)
}

// clientCreds is the client port's gRPC transport security: handshaken
// with TLS on, none without.
func (n *Node) clientCreds() credentials.TransportCredentials {
	if n.clientTLS != nil {
		return handshaken{}
	}
	return insecure.NewCredentials()
}

// handshaken is the client port's gRPC transport security when TLS is on.
// routeClient ran the TLS handshake before it knew the connection was
// gRPC, so this only reports what the handshake established
// (credentials.TLSInfo, read by whatever wants the client's verified
// certificate from the call's peer) and refuses a connection without one.
type handshaken struct{}

// tlsStater is a connection that went through a TLS handshake.
type tlsStater interface {
	ConnectionState() tls.ConnectionState
}

func (handshaken) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("rpc: the client port's credentials only serve")
}

func (handshaken) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	ts, ok := c.(tlsStater)
	if !ok {
		return nil, nil, errors.New("rpc: a connection without TLS on a TLS port")
	}
	return c, credentials.TLSInfo{
		State:          ts.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}, nil
}

func (handshaken) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (h handshaken) Clone() credentials.TransportCredentials { return h }

func (handshaken) OverrideServerName(string) error { return nil }

// peerHandshakeError is a failed handshake with the peer at addr, with what
// to check when a certificate was refused (either way). A peer that is down
// or cut off fails as it would without TLS.
func peerHandshakeError(addr string, err error) error {
	var (
		verify  *tls.CertificateVerificationError
		addrErr *tlsutil.AddressError
	)
	if errors.As(err, &verify) || errors.As(err, &addrErr) || strings.Contains(err.Error(), "remote error: tls") {
		return fmt.Errorf("rpc: TLS with peer %s refused (every server's --peer-trusted-ca-file must hold the CA of every --peer-cert-file, and each peer certificate must name its server's --peer-addr host): %w", addr, err)
	}
	return fmt.Errorf("rpc: TLS with peer %s: %w", addr, err)
}
