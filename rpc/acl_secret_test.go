package rpc

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// TestAuthSecretsStayOut: an addAuth's password, and the digest made of it,
// appear in no log line (at debug level), no file of the data dir (the Raft
// log, snapshots), no status or sessions answer and no four-letter word,
// whether the addAuth succeeds or fails, on either protocol; nor does the
// configured super digest.
func TestAuthSecretsStayOut(t *testing.T) {
	const (
		password = "s3cr3t-Pa55w0rd"
		digest   = "lK75jTNcA+U9vtVEw5vB51mj/w4" // super:secret's, the super digest
	)
	var logs syncBuffer
	var dataDir string
	n := newTestNodeWith(t, "1", func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.SuperDigest = "super:" + digest + "="
		c.FourLetterWords = []string{"*"}
		dataDir = c.DataDir
	})
	waitLeader(t, n)
	z := zkSession(t, n)
	for _, a := range []struct{ scheme, cred string }{
		{"digest", "alice:" + password}, {"digest", "super:secret"}, {"foo", password}} {
		z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidAuth, Type: jute.OpAuth}, &jute.AuthPacket{Scheme: a.scheme, Auth: []byte(a.cred)}))
		var h jute.ReplyHeader
		if err := h.Decode(jute.NewReader(z.frame())); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	for _, scheme := range []string{"digest", "nope"} {
		s.do(&apipb.Request{Op: &apipb.Request_AddAuth{AddAuth: &apipb.AddAuthRequest{Scheme: scheme, Auth: []byte("bob:" + password)}}})
	}
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/p", Acl: []*apipb.ACL{{Perms: 31, Scheme: "auth"}}}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("create: %v", r)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := n.status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := n.sessionList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var words strings.Builder
	for _, w := range []string{"cons", "dump", "stat", "srvr", "mntr", "envi", "conf", "wchc", "wchp"} {
		words.WriteString(fourLetter(t, n.ClientAddr(), w))
	}
	places := map[string]string{"logs": logs.String(), "status": st.String(), "sessions": ss.String(), "four-letter words": words.String()}
	for where, text := range places {
		for _, secret := range []string{password, digest} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s hold %q", where, secret)
			}
		}
	}
	if !strings.Contains(logs.String(), "session") {
		t.Fatal("no debug logs were written: the check saw nothing")
	}
	err = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(password)) {
			t.Errorf("%s holds the password", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fourLetter asks the server at addr a four-letter word and returns the
// answer.
func fourLetter(t *testing.T, addr, word string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
