package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/tlsutil"
)

var flagTLS = flag.Bool("chaos.tls", false, "run the servers with TLS on both ports (client certificates required) and rotate their certificates during the run")

// clusterTLS is a run's TLS material: one CA, a server certificate naming
// every node's address, a peer certificate per node naming its own, and
// the workloads' client certificate. The servers re-read their files, so
// rotate issues new ones while the faults run.
type clusterTLS struct {
	dir     string
	ca      *tlsutil.CA
	ips     []string
	client  *tls.Config
	rotated atomic.Int64
}

// helperTLSEnv names the directory of the TLS files in a helper client
// process's environment.
const helperTLSEnv = "COORDD_TLS_DIR"

// newClusterTLS writes the files for nodes on ips into dir.
func newClusterTLS(dir string, ips []string) (*clusterTLS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Minute)
	ca, err := tlsutil.NewCA("chaos CA", now, now.Add(24*time.Hour))
	if err != nil {
		return nil, err
	}
	if err := tlsutil.WriteFileAtomic(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	ct := &clusterTLS{dir: dir, ca: ca, ips: ips}
	if err := ct.issueServers(); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(tlsutil.Request{Kind: tlsutil.ClientCert, Name: "chaos", NotBefore: now, NotAfter: now.Add(24 * time.Hour)})
	if err != nil {
		return nil, err
	}
	if err := tlsutil.WritePair(dir, "client", certPEM, keyPEM); err != nil {
		return nil, err
	}
	if ct.client, err = loadClientTLS(dir); err != nil {
		return nil, err
	}
	return ct, nil
}

// issueServers writes a new server certificate and a new peer certificate
// for every node, each file replaced whole (certificate first, key after,
// as a rotation does).
func (ct *clusterTLS) issueServers() error {
	now := time.Now().Add(-time.Minute)
	issue := func(name string, kind tlsutil.CertKind, hosts []string) error {
		certPEM, keyPEM, err := ct.ca.Issue(tlsutil.Request{Kind: kind, Name: name, Hosts: hosts, NotBefore: now, NotAfter: now.Add(24 * time.Hour)})
		if err != nil {
			return err
		}
		return tlsutil.WritePair(ct.dir, name, certPEM, keyPEM)
	}
	if err := issue("server", tlsutil.ServerCert, ct.ips); err != nil {
		return err
	}
	for i, ip := range ct.ips {
		if err := issue(fmt.Sprintf("peer%d", i+1), tlsutil.PeerCert, []string{ip}); err != nil {
			return err
		}
	}
	return nil
}

// flags are node i's (0-based) TLS flags.
func (ct *clusterTLS) flags(i int) []string {
	in := func(name string) string { return filepath.Join(ct.dir, name) }
	return []string{
		"--cert-file", in("server.crt"), "--key-file", in("server.key"), "--trusted-ca-file", in("ca.crt"), "--client-cert-auth",
		"--peer-cert-file", in(fmt.Sprintf("peer%d.crt", i+1)), "--peer-key-file", in(fmt.Sprintf("peer%d.key", i+1)),
		"--peer-trusted-ca-file", in("ca.crt"),
	}
}

// rotateEvery issues new server and peer certificates every d until ctx
// ends: the servers must pick them up for new connections with no failed
// request (the workloads' checkers see any).
func (c *procCluster) rotateTLSEvery(ctx context.Context, d time.Duration, logf func(string, ...any)) {
	ct := c.tls
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.rotateTLS(); err != nil {
			logf("tls: rotating the certificates: %v", err)
			continue
		}
		logf("tls: rotated the server and peer certificates (#%d)", ct.rotated.Add(1))
	}
}

// startSettle is how long after a server starts its files stay as they
// are: it reads them first thing.
const startSettle = 5 * time.Second

// rotateTLS issues new certificates unless a server started lately (it
// may be reading its files), waiting for that to pass.
func (c *procCluster) rotateTLS() error {
	for {
		c.filesMu.Lock()
		if wait := startSettle - time.Since(c.lastStart); wait > 0 {
			c.filesMu.Unlock()
			time.Sleep(wait)
			continue
		}
		defer c.filesMu.Unlock()
		return c.tls.issueServers()
	}
}

// loadClientTLS is the workloads' TLS configuration from dir's files.
func loadClientTLS(dir string) (*tls.Config, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no CA in %s", dir)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// enableTLS makes c's servers and clients speak TLS, with files in dir.
func (c *procCluster) enableTLS(dir string) error {
	var ips []string
	for _, n := range c.nodes {
		ips = append(ips, n.ip)
	}
	ct, err := newClusterTLS(dir, ips)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	c.tls = ct
	return nil
}

// clientOptions are the options every client of the run connects with.
func (c *procCluster) clientOptions(opts ...client.Option) []client.Option {
	if c.tls != nil {
		opts = append(opts, client.WithTLS(c.tls.client))
	}
	return opts
}

// zkOptions are the options of every go-zookeeper connection of the run:
// with TLS, a dialer that speaks it. (Generic, since go-zookeeper does not
// export the type of its options.)
func zkOptions[O ~func(*zk.Conn)](c *procCluster, opts ...O) []O {
	if c.tls != nil {
		cfg := c.tls.client
		opts = append(opts, O(zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
		})))
	}
	return opts
}

// grpcCredentials are the status connections' transport credentials.
func (c *procCluster) grpcCredentials() grpc.DialOption {
	if c.tls != nil {
		return grpc.WithTransportCredentials(credentials.NewTLS(c.tls.client.Clone()))
	}
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

// helperEnv is what a helper client process needs to reach the servers.
func (c *procCluster) helperEnv() []string {
	env := []string{"COORDD_SERVERS=" + strings.Join(c.servers(), ",")}
	if c.tls != nil {
		env = append(env, helperTLSEnv+"="+c.tls.dir)
	}
	return env
}

// helperClientOptions are a helper process's TLS options, from its
// environment.
func helperClientOptions() ([]client.Option, error) {
	dir := os.Getenv(helperTLSEnv)
	if dir == "" {
		return nil, nil
	}
	cfg, err := loadClientTLS(dir)
	if err != nil {
		return nil, err
	}
	return []client.Option{client.WithTLS(cfg)}, nil
}
