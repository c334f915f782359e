package tlsutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// MinVersion is the oldest TLS version any coordd port speaks. Cipher
// suites are Go's defaults.
const MinVersion = tls.VersionTLS12

// RecordTypeHandshake is the first byte of every TLS connection (the
// record that carries the ClientHello). No plaintext protocol on coordd's
// ports starts with it: a jute frame starts with the high byte of a length
// under 16 MiB, HTTP/2 with "P", a four-letter word with a letter, a peer
// connection with its tag.
const RecordTypeHandshake = 0x16

// ServerConfig returns the configuration of a client port that presents
// src's certificate. With requireClientCert every client must present a
// certificate that src's CA bundle verifies (etcd's --client-cert-auth);
// without it a client's certificate is verified if it presents one and src
// has a CA bundle, and not asked for otherwise. The certificate and the CA
// bundle are src's current ones at each handshake. ALPN selects "h2" when
// the client offers it (gRPC's client requires that) and nothing otherwise
// (ZooKeeper clients offer none).
func ServerConfig(src *Source, requireClientCert bool) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := src.Current()
			c := &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{*cert}, ClientCAs: pool}
			switch {
			case requireClientCert:
				c.ClientAuth = tls.RequireAndVerifyClientCert
			case pool != nil:
				c.ClientAuth = tls.VerifyClientCertIfGiven
			}
			if slices.Contains(hello.SupportedProtos, "h2") {
				c.NextProtos = []string{"h2"}
			}
			return c, nil
		},
	}
}

// PeerServerConfig returns the configuration of a peer port that presents
// src's certificate and accepts only a peer whose certificate src's CA
// bundle verifies and that names the address the connection comes from
// (VerifyPeerAddress).
func PeerServerConfig(src *Source) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := src.Current()
			var remote net.Addr
			if hello.Conn != nil {
				remote = hello.Conn.RemoteAddr()
			}
			return &tls.Config{
				MinVersion:   MinVersion,
				Certificates: []tls.Certificate{*cert},
				ClientCAs:    pool,
				ClientAuth:   tls.RequireAndVerifyClientCert,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 {
						return nil // refused by ClientAuth already
					}
					return VerifyPeerAddress(cs.PeerCertificates[0], remote)
				},
			}, nil
		},
	}
}

// PeerClientConfig returns the configuration for dialing the peer at addr
// (host:port): src's certificate is presented, and the peer's must be
// verified by src's CA bundle and name addr's host.
func PeerClientConfig(src *Source, addr string) *tls.Config {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	cert, pool := src.Current()
	return &tls.Config{
		MinVersion: MinVersion,
		RootCAs:    pool,
		ServerName: host,
		// Present the certificate whatever CAs the peer says it accepts,
		// so that a peer with another CA refuses it for what it is (and
		// says so) instead of seeing no certificate at all.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil },
	}
}

// AddressError means a peer's certificate does not name the address its
// connection comes from.
type AddressError struct {
	Remote string   // the connection's source address
	Names  []string // what the certificate names
}

// Error says what the certificate names and where the connection came
// from.
func (e *AddressError) Error() string {
	names := "nothing"
	if len(e.Names) > 0 {
		names = strings.Join(e.Names, ", ")
	}
	return fmt.Sprintf("tlsutil: the peer's certificate names %s, not %s, the address it connects from", names, e.Remote)
}

// lookupTimeout bounds the resolution of a certificate's DNS names.
const lookupTimeout = 2 * time.Second

// VerifyPeerAddress checks that cert names remote's IP address, as etcd
// checks its peers: an IP address in the certificate must equal it, or one
// of its DNS names must resolve to it. coordd dials its peers from the host
// of its own peer address, so a peer certificate that names that host
// passes both this check and the dialer's check of the name it dialed.
func VerifyPeerAddress(cert *x509.Certificate, remote net.Addr) error {
	if remote == nil {
		return &AddressError{Remote: "an unknown address", Names: certNames(cert)}
	}
	host, _, err := net.SplitHostPort(remote.String())
	if err != nil {
		host = remote.String()
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return &AddressError{Remote: host, Names: certNames(cert)}
	}
	for _, a := range cert.IPAddresses {
		if a.Equal(ip) {
			return nil
		}
	}
	for _, name := range cert.DNSNames {
		if strings.HasPrefix(name, "*") {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, name)
		cancel()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if a.IP.Equal(ip) {
				return nil
			}
		}
	}
	return &AddressError{Remote: host, Names: certNames(cert)}
}

func certNames(cert *x509.Certificate) []string {
	var out []string
	for _, a := range cert.IPAddresses {
		out = append(out, a.String())
	}
	return append(out, cert.DNSNames...)
}
