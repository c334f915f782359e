package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc"
	"github.com/coordd/coordd/rpc/apipb"
)

// TestRestoreCommand: coordd restore seeds a data dir from a backup, and a
// coordd started on it serves the backup's data; bad input is refused with
// a clear message and the usual exit statuses.
func TestRestoreCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := rpc.NewNode(rpc.Config{ID: "1", DataDir: t.TempDir(), ClientAddr: freeAddr(t), PeerAddr: freeAddr(t),
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cl, err := client.Connect(ctx, []string{src.ClientAddr()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Create(ctx, "/kept", []byte("v"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(src.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := apipb.NewCoordClient(cc).SaveSnapshot(ctx, &apipb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		file.Write(c.Data)
	}
	_ = cl.Close(ctx)
	src.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "backup")
	truncated := filepath.Join(dir, "truncated")
	if os.WriteFile(good, file.Bytes(), 0o600) != nil || os.WriteFile(truncated, file.Bytes()[:file.Len()-1], 0o600) != nil {
		t.Fatal("writing the files")
	}

	dataDir := filepath.Join(t.TempDir(), "d1")
	peer := freeAddr(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"restore"}, 2, "missing the backup FILE"},
		{[]string{"restore", good, truncated}, 2, "unexpected argument"},
		{[]string{"restore", truncated, "--data-dir", dataDir}, 1, "truncated"},
		{[]string{"restore", filepath.Join(dir, "nothing"), "--data-dir", dataDir}, 1, "no such file"},
		{[]string{"restore", good, "--id", "2", "--peers", "1=" + peer, "--data-dir", dataDir}, 1, "not in the peers list"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, io.Discard, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("coordd %q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.msg)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"restore", "--data-dir", dataDir, "--id", "1", "--peer-addr", peer, good}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "restored "+good+" into "+dataDir+" for server 1") {
		t.Fatalf("restore: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if code := run([]string{"restore", good, "--data-dir", dataDir}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "needs an empty data dir") {
		t.Errorf("a second restore into the same dir: exit %d, %q", code, stderr.String())
	}

	addr := freeAddr(t)
	stop := make(chan os.Signal, 1)
	done := make(chan int, 1)
	var serr syncBuffer
	go func() {
		done <- runUntil([]string{"--data-dir", dataDir, "--client-addr", addr, "--peer-addr", peer,
			"--heartbeat-timeout", "200ms", "--election-timeout", "200ms"}, io.Discard, &serr, stop)
	}()
	defer func() {
		stop <- os.Interrupt
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("coordd did not stop; stderr:\n%s", serr.String())
		}
	}()
	rc, err := client.Connect(ctx, []string{addr})
	if err != nil {
		t.Fatalf("connecting to the restored server: %v; stderr:\n%s", err, serr.String())
	}
	defer rc.Close(context.Background())
	if data, _, err := rc.Get(ctx, "/kept"); err != nil || string(data) != "v" {
		t.Fatalf("/kept on the restored server: %q %v", data, err)
	}
}
