// Package tlsutil is coordd's transport security: it reads a port's
// certificate, private key and CA bundle from PEM files and re-reads them
// when a file changes, so that certificates rotate without a restart
// (Source); it builds the tls.Config of each side of each port (ServerConfig
// for the client port, PeerServerConfig and PeerClientConfig for the peer
// port, where both sides always verify each other); it turns a handshake's
// error into words a person can act on (Explain); and it makes a CA and the
// certificates of a local cluster (NewCA, CA.Issue, WriteLocalCluster).
//
// It imports nothing of coordd's, so that the server (rpc) and coordctl
// (coordctl certs) share it. It knows nothing of the protocols a port
// carries: a TLS connection is a TLS connection whichever protocol follows.
package tlsutil
