package main

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/tlsutil"
)

// post sends a write to a console as its page would, with its token.
func post(t *testing.T, base, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/api/info")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	token := ""
	if _, rest, ok := strings.Cut(string(info), `"token":"`); ok {
		token, _, _ = strings.Cut(rest, `"`)
	}
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Console-Token", token)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleOnAdminAddr: with --console the web console is at / of
// --metrics-addr, read-only unless --console-writes, beside /metrics;
// without it the admin address serves no console; the start line says
// where it is.
func TestConsoleOnAdminAddr(t *testing.T) {
	ro := freeAddr(t)
	stderr := startCoordd(t, "--metrics-addr", ro, "--console")
	base := "http://" + ro
	waitFor(t, "the console's page", func() bool {
		code, body := get(base + "/")
		return code == 200 && strings.Contains(body, "coordd console")
	})
	if code, _ := get(base + "/metrics"); code != 200 {
		t.Errorf("/metrics beside the console: %d", code)
	}
	if code, body := post(t, base, "/api/create", `{"path":"/x"}`); code != http.StatusForbidden || !strings.Contains(body, "ReadOnly") {
		t.Errorf("a write to a read-only console: %d %s", code, body)
	}
	if !waitUntil(20*time.Second, func() bool { return strings.Contains(stderr.String(), "web console on http://"+ro+"/ (read-only)") }) {
		t.Errorf("start line: %q", stderr.String())
	}

	rw := freeAddr(t)
	startCoordd(t, "--metrics-addr", rw, "--console", "--console-writes")
	base = "http://" + rw
	waitFor(t, "/readyz", func() bool { code, _ := get(base + "/readyz"); return code == 200 })
	if code, body := post(t, base, "/api/create", `{"path":"/x","data":"made in the console"}`); code != 200 {
		t.Errorf("a write with --console-writes: %d %s", code, body)
	}
	if code, body := get(base + "/api/node?path=/x"); code != 200 || !strings.Contains(body, `"dataLength":19`) {
		t.Errorf("the node written: %d %s", code, body)
	}

	off := freeAddr(t)
	startCoordd(t, "--metrics-addr", off)
	waitFor(t, "/readyz", func() bool { code, _ := get("http://" + off + "/readyz"); return code == 200 })
	if code, _ := get("http://" + off + "/"); code != http.StatusNotFound {
		t.Errorf("without --console: / answers %d", code)
	}
}

// TestConsoleFlagErrors: console flags that cannot work are refused before
// the server starts, saying why.
func TestConsoleFlagErrors(t *testing.T) {
	dir := t.TempDir()
	if err := tlsutil.WriteLocalCluster(dir, []string{"127.0.0.1"}, "client", 24*3600e9); err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	tlsArgs := []string{"--cert-file", f("server.crt"), "--key-file", f("server.key"), "--trusted-ca-file", f("ca.crt")}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"a console without an admin address", []string{"--console"}, "served on --metrics-addr, which is not set"},
		{"writes without the console", []string{"--metrics-addr", "127.0.0.1:0", "--console-writes"}, "--console-writes: the web console is off"},
		{"an identity without the console", []string{"--console-auth", "digest:a:b"}, "the web console is off"},
		{"a malformed identity", []string{"--metrics-addr", "127.0.0.1:0", "--console", "--console-auth", "nonsense"}, "want scheme:credentials"},
		{"a certificate without its key", []string{"--metrics-addr", "127.0.0.1:0", "--console", "--console-cert", f("client.crt")}, "go together"},
		{"TLS flags without TLS", []string{"--metrics-addr", "127.0.0.1:0", "--console", "--console-cacert", f("ca.crt")}, "for a client port with TLS"},
		{"client certificates required, none given", append([]string{"--metrics-addr", "127.0.0.1:0", "--console", "--client-cert-auth"}, tlsArgs...), "needs a client certificate"},
		{"a CA bundle that is not one", append([]string{"--metrics-addr", "127.0.0.1:0", "--console", "--console-cacert", f("client.key")}, tlsArgs...), "holds no PEM certificate"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"--data-dir", t.TempDir(), "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, tc.args...)
		code := run(args, io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%s: exit %d, %q; want exit 2 and %q", tc.name, code, stderr.String(), tc.msg)
		}
		if strings.Contains(stderr.String(), ":b") && strings.Contains(tc.name, "identity") {
			t.Errorf("%s: the secret is echoed: %q", tc.name, stderr.String())
		}
	}
}

// TestConsoleOverTLS: on a client port with TLS and client certificates
// required, the console dials its server with the CA bundle and its own
// client certificate, and reads the tree.
func TestConsoleOverTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsutil.WriteLocalCluster(dir, []string{"127.0.0.1"}, "console", 24*3600e9); err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	admin := freeAddr(t)
	startCoordd(t, "--metrics-addr", admin, "--console", "--cert-file", f("server.crt"), "--key-file", f("server.key"),
		"--trusted-ca-file", f("ca.crt"), "--client-cert-auth", "--console-cert", f("client.crt"), "--console-key", f("client.key"))
	waitFor(t, "the console reading the root", func() bool {
		code, body := get("http://" + admin + "/api/node?path=/")
		return code == 200 && strings.Contains(body, `"path":"/"`)
	})
}
