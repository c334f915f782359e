package client

import (
	"crypto/tls"
	"log/slog"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Option configures Connect.
type Option func(*options)

type options struct {
	sessionTimeout time.Duration
	dialTimeout    time.Duration
	logger         *slog.Logger
	dialOptions    []grpc.DialOption
	pool           *Pool         // shared connections, or nil for one of its own
	margin         time.Duration // suspension margin; 0: the default
	watchBuffer    int           // events a persistent watch's channel holds
}

// Flow-control windows of the client's gRPC connections: a stream's holds
// one largest reply (1 MiB of data plus headroom).
const (
	streamWindow = 1 << 20
	connWindow   = 2 << 20
)

func defaultOptions() options {
	return options{
		sessionTimeout: 10 * time.Second,
		dialTimeout:    2 * time.Second,
		watchBuffer:    DefaultWatchBuffer,
		logger:         slog.New(slog.DiscardHandler),
		dialOptions: []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// Static flow-control windows turn off gRPC's bandwidth-delay
			// probing, which would otherwise send a PING for nearly every
			// reply received (see rpc's streamWindow for the server side).
			grpc.WithInitialWindowSize(streamWindow),
			grpc.WithInitialConnWindowSize(connWindow),
			// Accept a reply of any size, as etcd's client does: the server
			// bounds its replies (16 MiB, or the largest znode if larger) and
			// answers a read over the bound with an error. gRPC's default,
			// 4 MiB, would end the stream on a larger getChildren listing or
			// znode, and the client would resend the read on the next one.
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		},
	}
}

// WithSessionTimeout sets the session timeout the client asks for (default
// 10s); the server negotiates the actual one (see Client.SessionTimeout).
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.sessionTimeout = d
		}
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithDialTimeout bounds each attempt to connect to one server, handshake
// included (default 2s).
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.dialTimeout = d
		}
	}
}

// WithDialOptions adds gRPC dial options (for example TLS credentials, which
// replace the default insecure ones, or a custom dialer).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) {
		o.dialOptions = append(o.dialOptions, opts...)
	}
}

// WithTLS makes the client speak TLS to the servers, with cfg: RootCAs
// verifies the servers' certificates (nil: the system's roots), and
// Certificates (or GetClientCertificate) is the client's certificate for a
// server that requires one (coordd --client-cert-auth). The name checked in
// a server's certificate is the host of its address, unless cfg.ServerName
// says otherwise. A nil cfg is an empty one. cfg is cloned; TLS 1.2 is the
// least version used.
func WithTLS(cfg *tls.Config) Option {
	c := &tls.Config{}
	if cfg != nil {
		c = cfg.Clone()
	}
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(c)))
}

// WithSuspendMargin sets the margin M by which the client suspends the
// session (StateSuspended) before the leader can expire it: at
// sent + T - V - M, sent being when the client sent the last request the
// leader confirmed, T the session timeout and V the server's vouch
// interval. The default, max(T/50, 50ms), covers the drift between the
// client's clock and the leader's and a late timer; raise it for clocks
// that are not disciplined by NTP, or for a program that needs time to
// stop what it does once the session is suspended.
func WithSuspendMargin(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.margin = d
		}
	}
}
