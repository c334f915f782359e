package rpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// upstreamEncode encodes a log entry as upstream raft-boltdb does (a new
// handle per call, the old time format, which coordd uses).
func upstreamEncode(t *testing.T, l *raft.Log) []byte {
	t.Helper()
	var buf bytes.Buffer
	h := codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}}
	if err := codec.NewEncoder(&buf, &h).Encode(l); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testLogs(first, n int) []*raft.Log {
	var logs []*raft.Log
	for i := first; i < first+n; i++ {
		logs = append(logs, &raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("entry %d %0100d", i, i)), AppendedAt: time.Unix(1700000000, int64(i)).UTC()})
	}
	return logs
}

func openLogStore(t *testing.T, path string) *raftboltdb.BoltStore {
	t.Helper()
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLogStoreWritesUpstreamsFormat: coordd's raft-boltdb
// (rpc/third_party/raft-boltdb) writes the bytes upstream writes, and reads
// entries upstream wrote, so data dirs move freely between the two.
func TestLogStoreWritesUpstreamsFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openLogStore(t, path)
	logs := testLogs(1, 20)
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Compare the stored bytes, and add an entry as upstream would write it.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	extra := testLogs(21, 1)[0]
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		for _, l := range logs {
			key := binary.BigEndian.AppendUint64(nil, l.Index)
			if got, want := b.Get(key), upstreamEncode(t, l); !bytes.Equal(got, want) {
				return fmt.Errorf("entry %d: stored %x, upstream writes %x", l.Index, got, want)
			}
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, extra.Index), upstreamEncode(t, extra))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = openLogStore(t, path)
	defer s.Close()
	for _, want := range append(logs, extra) {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if got.Index != want.Index || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("entry %d read back as %+v, want %+v", want.Index, got, want)
		}
	}
}

// TestLogStorePagesAreFull: the log's pages are filled before they split
// (rpc/third_party/raft-boltdb), not left half empty as with bbolt's default,
// which made raft.db, and its share of a server's memory, twice the size.
func TestLogStorePagesAreFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openLogStore(t, path)
	for first := 1; first <= 5000; first += 50 {
		if err := s.StoreLogs(testLogs(first, 50)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var st bbolt.BucketStats
	if err := db.View(func(tx *bbolt.Tx) error {
		st = tx.Bucket([]byte("logs")).Stats()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fill := float64(st.LeafInuse) / float64(st.LeafAlloc); fill < 0.8 {
		t.Fatalf("log leaf pages %.0f%% full (%d of %d bytes), want at least 80%%", 100*fill, st.LeafInuse, st.LeafAlloc)
	}
}
