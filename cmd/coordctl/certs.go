package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/coordd/coordd/rpc/tlsutil"
)

// certs makes a CA and certificates for a cluster, with Go's crypto/x509
// (package rpc/tlsutil): no openssl needed. It runs locally and opens no
// session.

var certsVerb = &verb{
	name:     "certs",
	synopsis: "certs init DIR | certs issue DIR",
	summary:  "make a CA and server, peer and client certificates for TLS",
	detail: `
certs init DIR makes DIR and writes in it a new CA (ca.crt, ca.key) and three
certificates it signs, each as NAME.crt, NAME.key and NAME.pem (the key and
the certificate in one file, as Java's and Python's clients like them):

  server   the client port's (coordd --cert-file, --key-file), for --hosts
  peer     the peer port's (coordd --peer-cert-file, --peer-key-file), for
           --hosts: a peer certificate must name the host of the server's
           --peer-addr, and serves both server and client authentication
  client   a client's (coordctl --cert, --key), named --client-name

ca.crt is every --trusted-ca-file, --peer-trusted-ca-file and --cacert. It
refuses a DIR that already holds a CA.

certs issue DIR --kind server|peer|client --name NAME [--hosts ...] signs one
more certificate with DIR's CA, as DIR/NAME.{crt,key,pem}: one per server when
servers run on different hosts (each peer certificate naming its own host).

Keys are ECDSA P-256. Flags:
  --hosts h,...     IP addresses and DNS names (default 127.0.0.1,localhost,::1)
  --days N          validity of the certificates (default 365; the CA's is ten
                    times as long)
  --client-name N   the client certificate's common name (init; default coordctl)`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		hosts := fs.String("hosts", "127.0.0.1,localhost,::1", "")
		days := fs.Int("days", 365, "")
		clientName := fs.String("client-name", "coordctl", "")
		kind := fs.String("kind", "", "")
		name := fs.String("name", "", "")
		return func(x *cmd, args []string) error {
			// Flags may also follow the subcommand and the directory.
			args, err := parseInterleaved(fs, args)
			if errors.Is(err, flag.ErrHelp) {
				printVerbUsage(x.stdout, x.verb)
				return errHelp
			}
			if err != nil {
				return x.usage("%v", err)
			}
			if len(args) == 0 {
				return x.usage("missing init or issue")
			}
			if *days <= 0 {
				return x.usage("--days must be positive")
			}
			validity := time.Duration(*days) * 24 * time.Hour
			var hostList []string
			for _, h := range strings.Split(*hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hostList = append(hostList, h)
				}
			}
			switch args[0] {
			case "init":
				if err := x.nargs(args, 2, 2); err != nil {
					return err
				}
				dir := args[1]
				if err := tlsutil.WriteLocalCluster(dir, hostList, *clientName, validity); err != nil {
					return fmt.Errorf("certs: %w", err)
				}
				return x.emitCerts(dir, []string{tlsutil.CAName, tlsutil.ServerName, tlsutil.PeerName, tlsutil.ClientName}, true)
			case "issue":
				if err := x.nargs(args, 2, 2); err != nil {
					return err
				}
				dir := args[1]
				k, ok := map[string]tlsutil.CertKind{"server": tlsutil.ServerCert, "peer": tlsutil.PeerCert, "client": tlsutil.ClientCert}[*kind]
				if !ok {
					return x.usage("--kind must be server, peer or client")
				}
				if *name == "" || strings.ContainsAny(*name, `/\`) {
					return x.usage("--name must name the files (no slashes)")
				}
				ca, err := tlsutil.LoadCA(filepath.Join(dir, tlsutil.CAName+".crt"), filepath.Join(dir, tlsutil.CAName+".key"))
				if err != nil {
					return fmt.Errorf("certs: %w", err)
				}
				now := time.Now().Add(-time.Minute)
				certPEM, keyPEM, err := ca.Issue(tlsutil.Request{Kind: k, Name: *name, Hosts: hostList, NotBefore: now, NotAfter: now.Add(validity)})
				if err != nil {
					return fmt.Errorf("certs: %w", err)
				}
				if err := tlsutil.WritePair(dir, *name, certPEM, keyPEM); err != nil {
					return fmt.Errorf("certs: %w", err)
				}
				return x.emitCerts(dir, []string{*name}, false)
			}
			return x.usage("unknown subcommand %q (want init or issue)", args[0])
		}
	},
}

// emitCerts reports the files certs wrote and, with usage, how to use
// them.
func (x *cmd) emitCerts(dir string, names []string, usage bool) error {
	var files []string
	for _, n := range names {
		exts := []string{".crt", ".key", ".pem"}
		if n == tlsutil.CAName {
			exts = exts[:2]
		}
		for _, e := range exts {
			files = append(files, filepath.Join(dir, n+e))
		}
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	return x.out.emit(struct {
		Dir   string   `json:"dir"`
		Files []string `json:"files"`
	}{dir, files}, func(w io.Writer) {
		for _, f := range files {
			fmt.Fprintln(w, f)
		}
		if !usage {
			return
		}
		fmt.Fprintf(w, "\nServers (each also --id, --peers, ...):\n  coordd --cert-file %s --key-file %s --trusted-ca-file %s --client-cert-auth \\\n    --peer-cert-file %s --peer-key-file %s --peer-trusted-ca-file %s\n",
			in("server.crt"), in("server.key"), in("ca.crt"), in("peer.crt"), in("peer.key"), in("ca.crt"))
		fmt.Fprintf(w, "Clients:\n  export COORD_CACERT=%s COORD_CERT=%s COORD_KEY=%s\n", in("ca.crt"), in("client.crt"), in("client.key"))
	})
}

// parseInterleaved parses args with fs, flags and positional arguments in
// any order, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
