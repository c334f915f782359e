package tlsutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Files names a port's PEM files: its certificate (the leaf first, then any
// intermediates), the certificate's private key, and the bundle of CA
// certificates that verifies the other side.
type Files struct {
	Cert string
	Key  string
	CA   string
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Role is what a certificate is for; Load checks that it can serve it.
type Role int

const (
	// RoleServer is the client port's certificate: it must allow server
	// authentication.
	RoleServer Role = iota
	// RolePeer is a peer port's certificate, presented both when a server
	// accepts a connection and when it dials one: it must allow server and
	// client authentication, chain to the peer CA, and name the host of the
	// server's peer address (Options.Host).
	RolePeer
)

// Flags are the names Load's errors give the three files (the flags that
// set them), so that a person knows which one to fix.
type Flags struct{ Cert, Key, CA string }

// Options configure Load.
type Options struct {
	Role Role
	// Host is, for RolePeer, the host of the server's peer address: its
	// certificate must name it, since the other servers check that a peer's
	// certificate names the address it connects from and the address they
	// dial.
	Host string
	// Flags name the files in errors (default "certificate", "key", "CA").
	Flags Flags
	// Port names the port in log messages ("client port", "peer port").
	Port string
	// Logger receives a line for every reload, and for every changed set
	// of files that could not be used (default: discard).
	Logger *slog.Logger
	// CheckInterval is the least time between two looks at the files
	// (default 1s): they are read again on the first handshake after it.
	CheckInterval time.Duration
	// Now is the clock certificates are checked against (default
	// time.Now).
	Now func() time.Time
}

// Source is a certificate, its key and a CA pool read from Files. It reads
// the files again, at most once per CheckInterval, on the handshake that
// asks for them, and uses them when their contents changed and they are
// good: a certificate and key that match, are valid now and fit the role,
// and a CA bundle with at least one certificate. Until then it keeps the
// ones it has, so a rotation that writes the certificate and the key one
// after the other is picked up once both are written, and a bad file never
// takes a working port down. Existing connections keep the certificates
// they were opened with.
type Source struct {
	files Files
	opts  Options

	mu       sync.Mutex
	checked  time.Time
	loaded   contents // the files of cert and pool
	rejected contents // the last files that could not be used
	cert     *tls.Certificate
	pool     *x509.CertPool
}

// contents are the bytes of the three files.
type contents struct{ cert, key, ca []byte }

func (c contents) equal(o contents) bool {
	return bytes.Equal(c.cert, o.cert) && bytes.Equal(c.key, o.key) && bytes.Equal(c.ca, o.ca)
}

// Load reads f and checks it for o.Role. Its error names the file to fix
// and says what is wrong with it.
func Load(f Files, o Options) (*Source, error) {
	if o.Flags.Cert == "" {
		o.Flags = Flags{Cert: "certificate", Key: "key", CA: "CA"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case f.Cert == "":
		return nil, fmt.Errorf("tlsutil: %s is required", o.Flags.Cert)
	case f.Key == "":
		return nil, fmt.Errorf("tlsutil: %s %s is given without %s", o.Flags.Cert, f.Cert, o.Flags.Key)
	case f.CA == "" && o.Role == RolePeer:
		return nil, fmt.Errorf("tlsutil: %s is required: peers verify each other's certificates", o.Flags.CA)
	}
	s := &Source{files: f, opts: o}
	c, err := s.read()
	if err != nil {
		return nil, err
	}
	cert, pool, err := s.parse(c)
	if err != nil {
		return nil, err
	}
	s.loaded, s.cert, s.pool, s.checked = c, cert, pool, o.Now()
	return s, nil
}

// Files returns the files the source reads.
func (s *Source) Files() Files { return s.files }

// Current returns the certificate and the CA pool (nil without a CA file)
// to use now, reading the files again first if CheckInterval has passed.
func (s *Source) Current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.opts.Now(); now.Sub(s.checked) >= s.opts.CheckInterval {
		s.checked = now
		s.reload()
	}
	return s.cert, s.pool
}

// reload reads the files and uses them if they changed and are good.
func (s *Source) reload() {
	c, err := s.read()
	if err != nil {
		s.opts.Logger.Warn(s.opts.Port+": cannot read the TLS files; keeping the loaded ones", "err", err)
		return
	}
	if c.equal(s.loaded) || c.equal(s.rejected) {
		return
	}
	cert, pool, err := s.parse(c)
	if err != nil {
		// A rotation that writes the certificate and the key one after the
		// other passes through this state; the next look finds both.
		s.rejected = c
		s.opts.Logger.Warn(s.opts.Port+": the changed TLS files cannot be used; keeping the loaded ones", "err", err)
		return
	}
	s.loaded, s.rejected, s.cert, s.pool = c, contents{}, cert, pool
	s.opts.Logger.Info(s.opts.Port+": reloaded the TLS certificate", "cert", s.files.Cert,
		"serial", cert.Leaf.SerialNumber.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

func (s *Source) read() (contents, error) {
	var c contents
	var err error
	if c.cert, err = readFile(s.opts.Flags.Cert, s.files.Cert); err != nil {
		return c, err
	}
	if c.key, err = readFile(s.opts.Flags.Key, s.files.Key); err != nil {
		return c, err
	}
	if s.files.CA != "" {
		if c.ca, err = readFile(s.opts.Flags.CA, s.files.CA); err != nil {
			return c, err
		}
	}
	return c, nil
}

func readFile(flag, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tlsutil: %s: %w", flag, err)
	}
	return b, nil
}

// parse checks the files' contents and returns the certificate and pool.
func (s *Source) parse(c contents) (*tls.Certificate, *x509.CertPool, error) {
	fl, f := s.opts.Flags, s.files
	cert, err := tls.X509KeyPair(c.cert, c.key)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "does not match"):
			return nil, nil, fmt.Errorf("tlsutil: %s %s is not the private key of %s %s (%v)", fl.Key, f.Key, fl.Cert, f.Cert, err)
		case strings.Contains(msg, "certificate input"):
			return nil, nil, fmt.Errorf("tlsutil: %s %s holds no PEM certificate (%v)", fl.Cert, f.Cert, err)
		case strings.Contains(msg, "key input"), strings.Contains(msg, "private key"):
			return nil, nil, fmt.Errorf("tlsutil: %s %s holds no usable PEM private key (%v)", fl.Key, f.Key, err)
		}
		return nil, nil, fmt.Errorf("tlsutil: %s %s and %s %s: %v", fl.Cert, f.Cert, fl.Key, f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("tlsutil: %s %s: %v", fl.Cert, f.Cert, err)
		}
		cert.Leaf = leaf
	}
	now := s.opts.Now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, nil, fmt.Errorf("tlsutil: %s %s expired at %s: issue a new one", fl.Cert, f.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, nil, fmt.Errorf("tlsutil: %s %s is not valid before %s (is this machine's clock right?)", fl.Cert, f.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	need := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if s.opts.Role == RolePeer {
		need = append(need, x509.ExtKeyUsageClientAuth)
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		for _, u := range need {
			if !slices.Contains(leaf.ExtKeyUsage, u) {
				return nil, nil, fmt.Errorf("tlsutil: %s %s does not allow %s (its extended key usage); %s", fl.Cert, f.Cert, usageName(u), roleNeeds(s.opts.Role))
			}
		}
	}
	var pool *x509.CertPool
	if f.CA != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.ca) {
			return nil, nil, fmt.Errorf("tlsutil: %s %s holds no PEM certificate", fl.CA, f.CA)
		}
	}
	if s.opts.Role == RolePeer {
		inter := x509.NewCertPool()
		for _, der := range cert.Certificate[1:] {
			if ic, err := x509.ParseCertificate(der); err == nil {
				inter.AddCert(ic)
			}
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return nil, nil, fmt.Errorf("tlsutil: %s %s is not signed by %s %s, so the other servers would refuse it (%v)", fl.Cert, f.Cert, fl.CA, f.CA, err)
		}
		if s.opts.Host != "" {
			if err := leaf.VerifyHostname(s.opts.Host); err != nil {
				return nil, nil, fmt.Errorf("tlsutil: %s %s does not name %s, the host of this server's peer address, so the other servers would refuse it: issue it with %s among its hosts (%v)",
					fl.Cert, f.Cert, s.opts.Host, s.opts.Host, err)
			}
		}
	}
	return &cert, pool, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client authentication"
	}
	return "server authentication"
}

func roleNeeds(r Role) string {
	if r == RolePeer {
		return "a peer certificate serves both sides of every connection between servers, so it needs both server and client authentication"
	}
	return "a server certificate needs server authentication"
}
