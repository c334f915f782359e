package rpc

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// reachedPages returns the pages checkBoltFile reaches in the file at path
// (which must pass it), and how many pages the file counts.
func reachedPages(t *testing.T, path string) ([]uint64, uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	c := &boltChecker{r: f, size: st.Size()}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for id := uint64(0); id < c.hwm; id++ {
		if c.reached(id) {
			ids = append(ids, id)
		}
	}
	return ids, c.hwm
}

// TestBoltCheckZeroedPages: zeroing any page bbolt reaches from its newest
// meta page (a meta page, a branch, a leaf, an overflow page, the freelist)
// is found by checkBoltFile, in raft.db and in wal-meta.db, with the
// offset; zeroing a free page is harmless, and passes.
func TestBoltCheckZeroedPages(t *testing.T) {
	for _, kind := range []string{RaftLogBolt, RaftLogWAL} {
		t.Run(kind, func(t *testing.T) {
			tmpl, s, _ := newDataDir(t, kind)
			s.Close()
			name := boltFile
			if kind == RaftLogWAL {
				name = filepath.Join(walDir, "wal-meta.db")
			}
			ids, hwm := reachedPages(t, filepath.Join(tmpl, name))
			reached := map[uint64]bool{}
			for _, id := range ids {
				reached[id] = true
			}
			path := filepath.Join(t.TempDir(), "copy.db")
			orig, err := os.ReadFile(filepath.Join(tmpl, name))
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for id := uint64(0); id < hwm; id++ {
				b := append([]byte(nil), orig...)
				clear(b[id*4096 : (id+1)*4096])
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
				err := checkBoltFile(path)
				switch {
				case reached[id] && !errors.Is(err, ErrDataDirDamaged):
					t.Fatalf("page %d (in use) zeroed: %v", id, err)
				case !reached[id] && err != nil:
					t.Fatalf("page %d (free) zeroed: %v", id, err)
				}
				if err != nil {
					found++
				}
			}
			t.Logf("%s: %d pages, %d in use, each zeroed in turn: %d found", name, hwm, len(ids), found)
		})
	}
}

// TestBoltCheckLargeFile: a file larger than the checker's read-ahead
// (boltBlocksKept blocks of boltBlock bytes), whose root page names a
// second bucket after a large one, passes; and damage to that second
// bucket, reached after the large one's walk read over the blocks before,
// is found.
func TestBoltCheckLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "large.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	db.NoSync = true
	val := make([]byte, 3000) // one to a page
	err = db.Update(func(tx *bbolt.Tx) error {
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		for i := range uint64(boltBlocksKept*boltBlock/4096 + 200) {
			if err := a.Put(binary.BigEndian.AppendUint64(nil, i), val); err != nil {
				return err
			}
		}
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range uint64(20) {
			if err := b.Put(binary.BigEndian.AppendUint64(nil, i), val); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() <= boltBlocksKept*boltBlock {
		t.Fatalf("the file is %d bytes, not larger than the read-ahead", st.Size())
	}
	if err := checkBoltFile(path); err != nil {
		t.Fatal(err)
	}
	flipBit(t, path, boltValueAt(t, path, []byte("b"), binary.BigEndian.AppendUint64(nil, 0))-2)
	if err := checkBoltFile(path); !errors.Is(err, ErrDataDirDamaged) {
		t.Fatalf("a key of the second bucket flipped: %v", err)
	}
}
