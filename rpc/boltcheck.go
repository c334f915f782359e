package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// This file checks a bbolt file (raft-boltdb's raft.db, raft-wal's
// wal-meta.db) before bbolt opens it.
//
// bbolt checksums only its two meta pages, and falls back silently to the
// older one when the newer does not verify: a flipped bit there would turn
// back the last transaction (a vote, a segment added), and a torn write of
// one cannot happen (its fields lie in one sector, written at once). It
// trusts every other page, through a memory map: a damaged page can send
// it past the end of the file (a fault that kills the process) or into a
// loop, and its own check (Tx.Check) runs some of its walk on a goroutine
// it does not recover. So checkBoltFile reads the file itself, with
// bounds-checked reads: both meta pages must verify, the file must hold
// every page the newer one counts, and every page reachable from its root
// must be a branch or leaf page that says its own id, referenced once,
// with its elements inside it and its keys in order; the freelist, when
// the file keeps one, must list only pages that exist and nothing
// reachable. What it does not check, the values, the stores check with
// checksums of their own (the coordd.patch of each fork).

// bbolt's on-disk format (go.etcd.io/bbolt/internal/common).
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeader     = 16 // id u64, flags u16, count u16, overflow u32
	boltElement        = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	boltMetaLen        = 56 // the meta fields the checksum covers (magic to txid)
	boltBranchPage     = 0x01
	boltLeafPage       = 0x02
	boltFreelistPage   = 0x10
	boltBucketLeafFlag = 0x01
	boltInBucketLen    = 16 // root pgid u64, sequence u64
	boltNoFreelist     = ^uint64(0)
	// boltMaxPageSize bounds the page size a meta page may claim.
	boltMaxPageSize = 1 << 24
)

// errBolt is what checkBoltFile finds wrong, at an offset of the file.
type errBolt struct {
	off    int64
	format string
	args   []any
}

func (e *errBolt) Error() string {
	return fmt.Sprintf("offset %d: %s", e.off, fmt.Sprintf(e.format, e.args...))
}

// boltMeta is a meta page's fields.
type boltMeta struct {
	pageSize, flags     uint32
	root                uint64
	freelist, pgid, txn uint64
}

// checkBoltFile checks the bbolt file at path as described above. A
// missing file is fs.ErrNotExist; damage is ErrDataDirDamaged, naming the
// file and the offset.
func checkBoltFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("rpc: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("rpc: %w", err)
	}
	c := &boltChecker{r: &blockReader{r: f, blocks: map[int64][]byte{}}, size: st.Size()}
	if err := c.check(); err != nil {
		var eb *errBolt
		if errors.As(err, &eb) {
			return fmt.Errorf("%w: %s: %v", ErrDataDirDamaged, path, err)
		}
		return fmt.Errorf("rpc: %s: %w", path, err)
	}
	return nil
}

type boltChecker struct {
	r        io.ReaderAt
	size     int64
	pageSize int64
	hwm      uint64
	seen     []uint64 // a bit per page: reached
	// onValue, if set, is told where each value of each bucket lies in the
	// file (for tests).
	onValue func(bucket, key []byte, off int64)
}

func (c *boltChecker) check() error {
	m0, err := c.readMeta(0, 0)
	if err != nil {
		return err
	}
	c.pageSize = int64(m0.pageSize)
	m1, err := c.readMeta(c.pageSize, 1)
	if err != nil {
		return err
	}
	if m1.pageSize != m0.pageSize {
		return &errBolt{c.pageSize, "meta page 1 says pages of %d bytes, meta page 0 %d", []any{m1.pageSize, m0.pageSize}}
	}
	m := m0
	if m1.txn > m0.txn {
		m = m1
	}
	c.hwm = m.pgid
	if c.hwm < 3 || c.hwm > uint64(c.size/c.pageSize) {
		return &errBolt{c.size, "the file holds %d pages of %d bytes, its meta page counts %d: truncated", []any{c.size / c.pageSize, c.pageSize, c.hwm}}
	}
	c.seen = make([]uint64, (c.hwm+63)/64)
	c.mark(0)
	c.mark(1)
	var free []uint64
	if m.freelist != boltNoFreelist {
		if free, err = c.readFreelist(m.freelist); err != nil {
			return err
		}
	}
	if err := c.walk(m.root, nil, nil, nil, 0); err != nil {
		return err
	}
	dup := map[uint64]bool{}
	for _, id := range free {
		switch {
		case id < 2 || id >= c.hwm:
			return &errBolt{int64(m.freelist) * c.pageSize, "the freelist lists page %d, outside the file's pages 2..%d", []any{id, c.hwm - 1}}
		case c.reached(id):
			return &errBolt{int64(m.freelist) * c.pageSize, "the freelist lists page %d, which is in use", []any{id}}
		case dup[id]:
			return &errBolt{int64(m.freelist) * c.pageSize, "the freelist lists page %d twice", []any{id}}
		}
		dup[id] = true
	}
	return nil
}

// readMeta reads and verifies meta page n at off.
func (c *boltChecker) readMeta(off int64, n int) (boltMeta, error) {
	var b [boltPageHeader + boltMetaLen + 8]byte
	if _, err := c.r.ReadAt(b[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			return boltMeta{}, &errBolt{off, "the file ends before meta page %d", []any{n}}
		}
		return boltMeta{}, err
	}
	mb := b[boltPageHeader:]
	h := fnv.New64a()
	h.Write(mb[:boltMetaLen])
	if binary.LittleEndian.Uint32(mb[0:]) != boltMagic || binary.LittleEndian.Uint32(mb[4:]) != boltVersion ||
		binary.LittleEndian.Uint64(mb[boltMetaLen:]) != h.Sum64() {
		return boltMeta{}, &errBolt{off, "meta page %d does not match its checksum", []any{n}}
	}
	m := boltMeta{
		pageSize: binary.LittleEndian.Uint32(mb[8:]),
		flags:    binary.LittleEndian.Uint32(mb[12:]),
		root:     binary.LittleEndian.Uint64(mb[16:]),
		freelist: binary.LittleEndian.Uint64(mb[32:]),
		pgid:     binary.LittleEndian.Uint64(mb[40:]),
		txn:      binary.LittleEndian.Uint64(mb[48:]),
	}
	if m.pageSize < 512 || m.pageSize > boltMaxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, &errBolt{off, "meta page %d says pages of %d bytes", []any{n, m.pageSize}}
	}
	return m, nil
}

// readPage reads page id whole (with its overflow pages) and marks it
// reached; a page reached twice, outside the file, or not saying its own
// id is damage.
func (c *boltChecker) readPage(id uint64) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, &errBolt{int64(min(id, c.hwm)) * c.pageSize, "a reference to page %d, outside the file's pages 2..%d", []any{id, c.hwm - 1}}
	}
	off := int64(id) * c.pageSize
	head, err := c.read(off, c.pageSize)
	if err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint64(head); got != id {
		return nil, &errBolt{off, "page %d says it is page %d (not written, or written elsewhere)", []any{id, got}}
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))
	if overflow >= c.hwm-id {
		return nil, &errBolt{off, "page %d runs %d pages past the file's last page", []any{id, overflow}}
	}
	for i := id; i <= id+overflow; i++ {
		if c.reached(i) {
			return nil, &errBolt{int64(i) * c.pageSize, "page %d is referenced twice", []any{i}}
		}
		c.mark(i)
	}
	if overflow == 0 {
		return head, nil
	}
	return c.read(off, int64(overflow+1)*c.pageSize)
}

func (c *boltChecker) mark(id uint64)         { c.seen[id/64] |= 1 << (id % 64) }
func (c *boltChecker) reached(id uint64) bool { return c.seen[id/64]&(1<<(id%64)) != 0 }

// read returns n bytes at off: a slice of a cached block when they lie in
// one (never written to), else a copy.
func (c *boltChecker) read(off, n int64) ([]byte, error) {
	if br, ok := c.r.(*blockReader); ok {
		if b, err := br.slice(off, n); b != nil || err != nil {
			return b, err
		}
	}
	b := make([]byte, n)
	if _, err := c.r.ReadAt(b, off); err != nil {
		return nil, err
	}
	return b, nil
}

// blockReader reads a file in blocks of boltBlock bytes, keeping the last
// few: the walk reads a log's pages roughly in file order, so a block
// serves many pages for one read.
type blockReader struct {
	r      io.ReaderAt
	blocks map[int64][]byte
	order  []int64 // blocks kept, oldest first
	spare  []byte  // the last block dropped, for the next read
}

const (
	boltBlock      = 1 << 20
	boltBlocksKept = 8
)

func (b *blockReader) ReadAt(p []byte, off int64) (int, error) { return b.r.ReadAt(p, off) }

// slice returns the n bytes at off if they lie within one block, else nil.
// The slice is good until boltBlocksKept other blocks have been read: a
// block dropped is read over.
func (b *blockReader) slice(off, n int64) ([]byte, error) {
	blk := off / boltBlock
	if (off+n-1)/boltBlock != blk {
		return nil, nil
	}
	data, ok := b.blocks[blk]
	if !ok {
		if len(b.order) == boltBlocksKept {
			b.spare = b.blocks[b.order[0]][:0]
			delete(b.blocks, b.order[0])
			b.order = b.order[1:]
		}
		data = b.spare[:cap(b.spare)]
		b.spare = nil
		if len(data) < boltBlock {
			data = make([]byte, boltBlock)
		}
		k, err := b.r.ReadAt(data, blk*boltBlock)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		data = data[:k]
		b.blocks[blk] = data
		b.order = append(b.order, blk)
	}
	start := off - blk*boltBlock
	if start+n > int64(len(data)) {
		return nil, io.ErrUnexpectedEOF
	}
	return data[start : start+n : start+n], nil
}

func (c *boltChecker) readFreelist(id uint64) ([]uint64, error) {
	p, err := c.readPage(id)
	if err != nil {
		return nil, err
	}
	off := int64(id) * c.pageSize
	if flags := binary.LittleEndian.Uint16(p[8:]); flags != boltFreelistPage {
		return nil, &errBolt{off, "the freelist page %d is not a freelist page (flags %#x)", []any{id, flags}}
	}
	idx, n := 0, uint64(binary.LittleEndian.Uint16(p[10:]))
	if n == 0xFFFF {
		idx, n = 1, binary.LittleEndian.Uint64(p[boltPageHeader:])
	}
	if n > uint64(len(p)-boltPageHeader)/8-uint64(idx) {
		return nil, &errBolt{off, "the freelist page %d lists %d pages, more than it holds", []any{id, n}}
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(p[boltPageHeader+8*(idx+i):])
	}
	return ids, nil
}

// walk checks the tree of bucket (nil: the root bucket) rooted at page
// id, every key within [lo, hi) (nil: no bound); depth bounds nested
// buckets.
func (c *boltChecker) walk(id uint64, bucket, lo, hi []byte, depth int) error {
	if depth > 64 {
		return &errBolt{int64(id) * c.pageSize, "buckets nested more than 64 deep", nil}
	}
	p, err := c.readPage(id)
	if err != nil {
		return err
	}
	return c.walkPage(p, p, int64(id)*c.pageSize, id, bucket, lo, hi, depth)
}

// walkPage checks page p, read as part of buf, which lies at file offset
// bufOff (p is buf but for an inline page); id is 0 for an inline page.
func (c *boltChecker) walkPage(p, buf []byte, bufOff int64, id uint64, bucket, lo, hi []byte, depth int) error {
	off := bufOff + int64(cap(buf)-cap(p))
	if len(p) < boltPageHeader {
		return &errBolt{off, "an inline bucket of %d bytes", []any{len(p)}}
	}
	flags := binary.LittleEndian.Uint16(p[8:])
	count := int(binary.LittleEndian.Uint16(p[10:]))
	if boltPageHeader+count*boltElement > len(p) {
		return &errBolt{off, "page %d has %d elements, more than it holds", []any{id, count}}
	}
	elem := func(i int) []byte { return p[boltPageHeader+i*boltElement:] }
	// span returns the bytes at pos..pos+n after element i, or nil.
	span := func(i int, pos, n uint32) []byte {
		start := int64(boltPageHeader+i*boltElement) + int64(pos)
		if end := start + int64(n); end > int64(len(p)) {
			return nil
		}
		return p[start : start+int64(n)]
	}
	var prev []byte
	inOrder := func(i int, key []byte) error {
		if (prev != nil && bytes.Compare(prev, key) >= 0) || (lo != nil && bytes.Compare(key, lo) < 0) || (hi != nil && bytes.Compare(key, hi) >= 0) {
			return &errBolt{off, "page %d: key %d (%x) is out of order", []any{id, i, key}}
		}
		prev = key
		return nil
	}
	switch {
	case flags == boltBranchPage && id != 0:
		if count == 0 {
			return &errBolt{off, "branch page %d is empty", []any{id}}
		}
		// Its children's reads may recycle the block it lies in.
		p = bytes.Clone(p)
		keys := make([][]byte, count)
		for i := range count {
			e := elem(i)
			k := span(i, binary.LittleEndian.Uint32(e[0:]), binary.LittleEndian.Uint32(e[4:]))
			if k == nil {
				return &errBolt{off, "page %d: element %d lies outside the page", []any{id, i}}
			}
			if err := inOrder(i, k); err != nil {
				return err
			}
			keys[i] = k
		}
		for i := range count {
			next := hi
			if i+1 < count {
				next = keys[i+1]
			}
			if err := c.walk(binary.LittleEndian.Uint64(elem(i)[8:]), bucket, keys[i], next, depth); err != nil {
				return err
			}
		}
		return nil
	case flags == boltLeafPage:
		for i := range count {
			if binary.LittleEndian.Uint32(elem(i))&boltBucketLeafFlag != 0 {
				// Walking a bucket below may recycle the block it lies in.
				start := cap(buf) - cap(p)
				own := make([]byte, cap(buf))
				copy(own, buf[:cap(buf)])
				buf, p = own, own[start:start+len(p)]
				break
			}
		}
		for i := range count {
			e := elem(i)
			eflags, pos := binary.LittleEndian.Uint32(e[0:]), binary.LittleEndian.Uint32(e[4:])
			ksize, vsize := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
			kv := span(i, pos, ksize+vsize)
			if kv == nil || ksize+vsize < ksize {
				return &errBolt{off, "page %d: element %d lies outside the page", []any{id, i}}
			}
			k, v := kv[:ksize], kv[ksize:]
			if err := inOrder(i, k); err != nil {
				return err
			}
			if eflags&boltBucketLeafFlag == 0 {
				if c.onValue != nil && len(v) > 0 {
					c.onValue(bucket, k, bufOff+int64(cap(buf)-cap(v)))
				}
				continue
			}
			if len(v) < boltInBucketLen {
				return &errBolt{off, "page %d: bucket %q has a header of %d bytes", []any{id, k, len(v)}}
			}
			if root := binary.LittleEndian.Uint64(v); root != 0 {
				if err := c.walk(root, k, nil, nil, depth+1); err != nil {
					return err
				}
			} else if err := c.walkPage(v[boltInBucketLen:], buf, bufOff, 0, k, nil, nil, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return &errBolt{off, "page %d is not a branch or leaf page (flags %#x)", []any{id, flags}}
}
