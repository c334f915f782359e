package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/coordd/coordd/cmd/coordd/console"
)

// consoleFlags are the web console's flags. The console is served on the
// admin address (--metrics-addr), and only when asked for (--console): it
// shows the tree, which the admin address otherwise never does.
type consoleFlags struct {
	on, writes        bool
	auth              string
	cacert, cert, key string
}

// consoleAuthEnv holds the console's identity when --console-auth is not
// given, so that a password need not be on the command line.
const consoleAuthEnv = "COORDD_CONSOLE_AUTH"

func (f *consoleFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "console", false, "serve the web console at / of --metrics-addr (read-only unless --console-writes): the cluster, the tree, sessions, locks and watch events in a browser")
	fs.BoolVar(&f.writes, "console-writes", false, "let the web console create, set and delete znodes (default: read-only)")
	fs.StringVar(&f.auth, "console-auth", "", "the identity the web console acts with, scheme:credentials such as digest:user:password (default $"+consoleAuthEnv+"; none: only its connection's own)")
	fs.StringVar(&f.cacert, "console-cacert", "", "web console with TLS on the client port: the CA bundle (PEM) that verifies this server's certificate (default --trusted-ca-file, else the system's)")
	fs.StringVar(&f.cert, "console-cert", "", "web console with TLS on the client port: the console's client certificate (PEM), needed with --client-cert-auth")
	fs.StringVar(&f.key, "console-key", "", "the private key of --console-cert (PEM)")
}

// check says what is wrong with the console's flags when the admin address
// is metricsAddr.
func (f *consoleFlags) check(fs *flag.FlagSet, metricsAddr string) error {
	var others []string
	fs.Visit(func(fl *flag.Flag) {
		if strings.HasPrefix(fl.Name, "console-") {
			others = append(others, "--"+fl.Name)
		}
	})
	switch {
	case f.on && metricsAddr == "":
		return errors.New("--console: the web console is served on --metrics-addr, which is not set")
	case !f.on && len(others) > 0:
		return fmt.Errorf("%s: the web console is off (--console turns it on)", strings.Join(others, ", "))
	}
	return nil
}

// consoleMode says what the console may do, for the start line.
func consoleMode(writes bool) string {
	if writes {
		return "writes enabled"
	}
	return "read-only"
}

// config is the console's configuration for a server whose client address
// is clientAddr; with TLS on the client port (tlsOn), it dials with the CA
// bundle and client certificate of the flags.
func (f *consoleFlags) config(clientAddr string, tlsOn, certAuth bool, trustedCA string, logger *slog.Logger) (console.Config, error) {
	cfg := console.Config{Server: dialable(clientAddr), Writes: f.writes, Auth: f.auth, Logger: logger}
	if cfg.Auth == "" {
		cfg.Auth = os.Getenv(consoleAuthEnv)
	}
	if cfg.Auth != "" {
		if err := console.CheckAuth(cfg.Auth); err != nil {
			return cfg, err
		}
	}
	if (f.cert == "") != (f.key == "") {
		return cfg, errors.New("--console-cert and --console-key go together")
	}
	if !tlsOn {
		if f.cacert != "" || f.cert != "" {
			return cfg, errors.New("--console-cacert, --console-cert and --console-key are for a client port with TLS (--cert-file)")
		}
		return cfg, nil
	}
	if certAuth && f.cert == "" {
		return cfg, errors.New("with --client-cert-auth the web console needs a client certificate: --console-cert and --console-key (or --console=false)")
	}
	cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	ca := f.cacert
	if ca == "" {
		ca = trustedCA
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return cfg, fmt.Errorf("the web console's CA bundle: %w", err)
		}
		cfg.TLS.RootCAs = x509.NewCertPool()
		if !cfg.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("the web console's CA bundle %s holds no PEM certificate", ca)
		}
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return cfg, fmt.Errorf("--console-cert, --console-key: %w", err)
		}
		cfg.TLS.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// dialable is addr with an unspecified host (0.0.0.0, ::) made loopback:
// the console dials its own server.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
