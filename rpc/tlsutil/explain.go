package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
)

// Refusal is why a server refused a connection, in words a person can act
// on. Kind is short and stable (it keys the rate limit of the server's log);
// Text says what happened and what to do.
type Refusal struct {
	Kind string
	Text string
}

// Refusal kinds.
const (
	KindPlaintext   = "plaintext"    // a plaintext client on a TLS port
	KindNotTLSPort  = "tls-on-plain" // a TLS client on a plaintext port
	KindUnknownCA   = "unknown-ca"
	KindExpired     = "expired"
	KindNoCert      = "no-certificate"
	KindAddress     = "address"
	KindRemote      = "refused-by-remote"
	KindVersion     = "version"
	KindTimeout     = "timeout"
	KindClosed      = "closed"
	KindBadUsage    = "key-usage"
	KindHandshake   = "handshake"
	KindNameMissing = "name"
)

// Explain says why the handshake of a connection a server accepted failed;
// peer says it came to the peer port (another server), not the client port.
func Explain(err error, peer bool) Refusal {
	ca, certFlags := "--trusted-ca-file", "--cert"
	if peer {
		ca, certFlags = "--peer-trusted-ca-file", "--peer-cert-file"
	}
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		addr     *AddressError
		header   tls.RecordHeaderError
		nerr     net.Error
	)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case errors.As(err, &unknown):
		return Refusal{KindUnknownCA, "its certificate is not signed by a CA in this server's " + ca + " (" + msg + ")"}
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return Refusal{KindExpired, "its certificate has expired or is not valid yet (" + msg + ")"}
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return Refusal{KindBadUsage, "its certificate does not allow client authentication (" + msg + ")"}
	case errors.As(err, &addr):
		return Refusal{KindAddress, addr.Error()[len("tlsutil: "):] + ": issue its certificate with the host of its --peer-addr"}
	case errors.As(err, &hostname):
		return Refusal{KindNameMissing, "its certificate does not name the host it was reached at (" + msg + ")"}
	case strings.Contains(msg, "didn't provide a certificate"), strings.Contains(msg, "certificate required"):
		if peer {
			return Refusal{KindNoCert, "it presented no certificate: every server needs " + certFlags + " when peer TLS is on"}
		}
		return Refusal{KindNoCert, "it presented no client certificate, and this server requires one (--client-cert-auth): the client needs --cert and --key"}
	case strings.Contains(msg, "remote error"):
		return Refusal{KindRemote, "it refused this server's certificate or offer (" + msg + "): check that it trusts the CA that signed this server's certificate and that the certificate names the host it dialed"}
	case strings.Contains(msg, "protocol version"), strings.Contains(msg, "no mutual"):
		return Refusal{KindVersion, "it offered nothing this server accepts; coordd speaks TLS 1.2 and 1.3 with Go's default cipher suites (" + msg + ")"}
	case errors.As(err, &header):
		return Refusal{KindPlaintext, "it does not speak TLS (" + msg + ")"}
	case errors.As(err, &nerr) && nerr.Timeout():
		return Refusal{KindTimeout, "it did not finish the TLS handshake in time"}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), strings.Contains(msg, "connection reset"):
		return Refusal{KindClosed, "it closed the connection during the TLS handshake (does it trust this server's certificate?)"}
	}
	return Refusal{KindHandshake, "TLS handshake failed: " + msg}
}
