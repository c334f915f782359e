package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Making certificates: a CA and the server, peer and client certificates
// it signs, with ECDSA P-256 keys (fast handshakes; every TLS client of
// ZooKeeper's, Java's and Python's included, takes them), keys in PKCS #8
// PEM. Enough for a local cluster or a first deployment; an organisation
// with its own PKI issues its own.

// CertKind is what a certificate is for.
type CertKind int

const (
	// ServerCert serves the client port: server authentication, and the
	// hosts clients reach the server by.
	ServerCert CertKind = iota
	// PeerCert serves both sides of the peer port: server and client
	// authentication, and the host of the server's --peer-addr.
	PeerCert
	// ClientCert identifies a client: client authentication; its subject's
	// common name is the client's name.
	ClientCert
)

// CA is a certificate authority: its certificate and signing key.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named name, valid from notBefore to
// notAfter.
func NewCA(name string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"coordd"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// LoadCA reads a CA's certificate and key from PEM files.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("tlsutil: CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsutil: CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("tlsutil: %s holds no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tlsutil: %s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("tlsutil: %s is not a CA certificate", certFile)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("tlsutil: %s holds no PEM key", keyFile)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		if ek, eerr := x509.ParseECPrivateKey(kb.Bytes); eerr == nil {
			k = ek
		} else {
			return nil, fmt.Errorf("tlsutil: %s: %w", keyFile, err)
		}
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("tlsutil: %s: not a signing key", keyFile)
	}
	return &CA{Cert: cert, Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Request describes a certificate to issue.
type Request struct {
	Kind CertKind
	// Name is the subject's common name.
	Name string
	// Hosts are the IP addresses and DNS names the certificate names (its
	// subject alternative names).
	Hosts     []string
	NotBefore time.Time
	NotAfter  time.Time
}

// Issue makes a key and a certificate for r signed by ca, both PEM.
func (ca *CA) Issue(r Request) (certPEM, keyPEM []byte, err error) {
	if r.Name == "" {
		return nil, nil, errors.New("tlsutil: a certificate needs a name")
	}
	if r.Kind != ClientCert && len(r.Hosts) == 0 {
		return nil, nil, errors.New("tlsutil: a server or peer certificate needs at least one host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.Name, Organization: []string{"coordd"}},
		NotBefore:    r.NotBefore,
		NotAfter:     r.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	switch r.Kind {
	case ServerCert:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case PeerCert:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case ClientCert:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return nil, nil, fmt.Errorf("tlsutil: unknown certificate kind %d", r.Kind)
	}
	for _, h := range r.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WritePair writes dir/name.crt (0644) and dir/name.key (0600), and
// dir/name.pem (0600), the key followed by the certificate: the one-file
// form Java's PEM key stores (zookeeper.ssl.keyStore.type=PEM) and
// Python's ssl.load_cert_chain take. Each file is written to a temporary
// name and renamed, so that a server re-reading the files never sees half
// of one.
func WritePair(dir, name string, certPEM, keyPEM []byte) error {
	if err := WriteFileAtomic(filepath.Join(dir, name+".crt"), certPEM, 0o644); err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, name+".key"), keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, name+".pem"), append(append([]byte{}, keyPEM...), certPEM...), 0o600)
}

// WriteFileAtomic writes data to path through a temporary file renamed
// over it.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Local-cluster file names, in the directory WriteLocalCluster fills.
const (
	CAName     = "ca"     // ca.crt, ca.key: the CA
	ServerName = "server" // server.crt, server.key: the client port
	PeerName   = "peer"   // peer.crt, peer.key: the peer port
	ClientName = "client" // client.crt, client.key: coordctl and other clients
)

// WriteLocalCluster makes dir and, in it, a CA and a server, a peer and a
// client certificate signed by it, valid for validity from now (the CA for
// ten times as long): the server and peer certificates name hosts; the
// client certificate is named clientName. It refuses to overwrite an
// existing CA.
func WriteLocalCluster(dir string, hosts []string, clientName string, validity time.Duration) error {
	if len(hosts) == 0 {
		return errors.New("tlsutil: at least one host is needed")
	}
	if _, err := os.Stat(filepath.Join(dir, CAName+".crt")); err == nil {
		return fmt.Errorf("tlsutil: %s already holds a CA (%s.crt): remove it first, or issue more certificates from it", dir, CAName)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	now := time.Now().Add(-time.Minute) // a little slack for clocks
	ca, err := NewCA("coordd CA", now, now.Add(10*validity))
	if err != nil {
		return err
	}
	for _, r := range []struct {
		file string
		req  Request
	}{
		{ServerName, Request{Kind: ServerCert, Name: "coordd server", Hosts: hosts}},
		{PeerName, Request{Kind: PeerCert, Name: "coordd peer", Hosts: hosts}},
		{ClientName, Request{Kind: ClientCert, Name: clientName}},
	} {
		r.req.NotBefore, r.req.NotAfter = now, now.Add(validity)
		certPEM, keyPEM, err := ca.Issue(r.req)
		if err != nil {
			return err
		}
		if err := WritePair(dir, r.file, certPEM, keyPEM); err != nil {
			return err
		}
	}
	// The CA last: its presence says the directory is complete.
	if err := WriteFileAtomic(filepath.Join(dir, CAName+".key"), ca.KeyPEM, 0o600); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, CAName+".crt"), ca.CertPEM, 0o644)
}
