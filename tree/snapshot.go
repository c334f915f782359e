package tree

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"unsafe"
)

// Snapshot format, versions 1 and 2. All integers are little-endian or
// encoding/binary varints (signed ones zig-zag); varints must be minimal.
//
//	header:  magic "coordtr\x00" (8 bytes), format version (1 byte),
//	         body length in bytes (uint64, 8 bytes)
//	body:    version 2 only: the ACL table, uvarint count, then count
//	         entries; then one record per znode, sorted by (parent path,
//	         name) bytewise, with the root first: all children of a node
//	         are contiguous and sorted by name, and every node comes after
//	         its parent
//	trailer: CRC-32C (Castagnoli) of header and body (uint32, 4 bytes)
//
//	record:  uvarint len, path bytes; kind (1 byte; 0x80 set when the data
//	         is null, which then has length 0);
//	         varint czxid, mzxid, pzxid, ctime, mtime, version, cversion;
//	         uvarint numChildren; varint seq; varint aux (ephemeral owner
//	         or TTL, else 0); version 2 only: uvarint acl (0: the open ACL
//	         with aversion 0, k: the table's k-th entry); uvarint len, data
//	         bytes
//	ACL table entry: varint aversion; uvarint n, then n times varint
//	         perms, uvarint len, scheme bytes, uvarint len, id bytes
//
// The table holds every (ACL, aversion) pair some node has other than the
// open ACL with aversion 0, each once, in the order the records first use
// them. A tree whose nodes all have the open ACL and aversion 0 is written
// in version 1, byte for byte what servers from before ACLs write and read.
// A tree without null data is written byte for byte as servers from before
// null data write it; those refuse a record with the null flag as a bad
// kind, rather than read its data as empty.
const (
	snapMagic     = "coordtr\x00"
	snapVersion   = 2
	snapVersionV1 = 1
	headerLen     = len(snapMagic) + 1 + 8
	// nullFlag is set in a record's kind byte when its data is null.
	nullFlag = 0x80
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// yieldEvery is how many records WriteTo and Read encode or decode between
// two yields of the processor: a few hundred microseconds of work.
const yieldEvery = 2048

// yielder returns a function to call once per record: every yieldEvery
// calls it lets the process's other runnable goroutines run first
// (runtime.Gosched). Encoding or decoding ten million znodes takes seconds
// of CPU; on a server with one processor (GOMAXPROCS=1, as three servers
// on two cores run) the goroutines that answer Raft's heartbeats and the
// sessions' pings would otherwise wait behind it for its time slices.
func yielder() func() {
	n := 0
	return func() {
		if n++; n == yieldEvery {
			n = 0
			gosched()
		}
	}
}

// gosched is runtime.Gosched; tests count the calls.
var gosched = runtime.Gosched

// appendRecordHead appends a snapshot record up to its data; acl is its
// ACL reference in the snapshot's table, or -1 in version 1.
func appendRecordHead(b []byte, r rec, acl int64) []byte {
	n := r.node()
	key := r.key()
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = appendPath(b, key)
	kind := byte(n.kind)
	if r.isNull() {
		kind |= nullFlag
	}
	b = append(b, kind)
	b = binary.AppendVarint(b, n.czxid)
	b = binary.AppendVarint(b, n.mzxid)
	b = binary.AppendVarint(b, n.pzxid)
	b = binary.AppendVarint(b, n.ctime)
	b = binary.AppendVarint(b, n.mtime)
	b = binary.AppendVarint(b, int64(n.version))
	b = binary.AppendVarint(b, int64(n.cversion))
	b = binary.AppendUvarint(b, uint64(n.numChildren))
	b = binary.AppendVarint(b, int64(n.seq))
	b = binary.AppendVarint(b, n.aux)
	if acl >= 0 {
		b = binary.AppendUvarint(b, uint64(acl))
	}
	b = binary.AppendUvarint(b, uint64(r.dataLen()))
	return b
}

func appendACLEntry(b []byte, e *aclEntry) []byte {
	b = binary.AppendVarint(b, int64(e.aversion))
	b = binary.AppendUvarint(b, uint64(len(e.acl)))
	for _, a := range e.acl {
		b = binary.AppendVarint(b, int64(a.Perms))
		b = binary.AppendUvarint(b, uint64(len(a.Scheme)))
		b = append(b, a.Scheme...)
		b = binary.AppendUvarint(b, uint64(len(a.ID)))
		b = append(b, a.ID...)
	}
	return b
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteTo writes a snapshot of t to w and returns the number of bytes
// written. The encoding is deterministic: trees with the same contents
// produce the same bytes. It only reads t, so it may run on a Clone while
// the original is being written. It yields the processor every
// yieldEvery records (see yielder).
func (t *Tree) WriteTo(w io.Writer) (int64, error) {
	yield := yielder()
	var scratch []byte
	var body uint64
	// The snapshot's ACL table: the tree's references renumbered in the
	// order the records first use them, so that the bytes depend on the
	// contents only, not on the order references were handed out.
	version := byte(snapVersionV1)
	var table []byte
	var index map[uint32]int64
	if t.Restricted() {
		version = snapVersion
		index = make(map[uint32]int64, t.acls.byRef.Len())
		var entries []byte
		t.nodes.Ascend(func(r rec) bool {
			yield()
			if ref := r.aclRef(); ref != openRef {
				if _, ok := index[ref]; !ok {
					index[ref] = int64(len(index) + 1)
					e, _ := t.acls.byRef.Get(aclItem{ref: ref})
					entries = appendACLEntry(entries, e.e)
				}
			}
			return true
		})
		table = append(binary.AppendUvarint(nil, uint64(len(index))), entries...)
		body = uint64(len(table))
	}
	aclIndex := func(r rec) int64 {
		if index == nil {
			return -1
		}
		return index[r.aclRef()] // 0 for openRef
	}
	t.nodes.Ascend(func(r rec) bool {
		yield()
		scratch = appendRecordHead(scratch[:0], r, aclIndex(r))
		body += uint64(len(scratch)) + uint64(r.dataLen())
		return true
	})

	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	crc := crc32.New(castagnoli)
	out := io.MultiWriter(bw, crc)

	var hdr [headerLen]byte
	copy(hdr[:], snapMagic)
	hdr[len(snapMagic)] = version
	binary.LittleEndian.PutUint64(hdr[len(snapMagic)+1:], body)
	if _, err := out.Write(hdr[:]); err != nil {
		return cw.n, err
	}
	if _, err := out.Write(table); err != nil {
		return cw.n, err
	}
	var err error
	t.nodes.Ascend(func(r rec) bool {
		yield()
		scratch = appendRecordHead(scratch[:0], r, aclIndex(r))
		if _, err = out.Write(scratch); err != nil {
			return false
		}
		if r.dataLen() > 0 {
			_, err = out.Write(r.data())
		}
		return err == nil
	})
	if err != nil {
		return cw.n, err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc.Sum32())
	if _, err := bw.Write(sum[:]); err != nil {
		return cw.n, err
	}
	err = bw.Flush()
	return cw.n, err
}

// decoder reads the fields of snapshot records with a sticky error.
type decoder struct {
	r     *bufio.Reader
	limit *io.LimitedReader
	err   error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrBadSnapshot}, args...)...)
	}
}

func (d *decoder) ioFail(err error) {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if d.err == nil {
		d.err = fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
}

// remaining is the number of body bytes not yet consumed.
func (d *decoder) remaining() int64 { return d.limit.N + int64(d.r.Buffered()) }

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	c, err := d.r.ReadByte()
	if err != nil {
		d.ioFail(err)
	}
	return c
}

func (d *decoder) uvarint() uint64 {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		c := d.byte()
		if d.err != nil {
			return 0
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			if c == 0 && i > 0 {
				d.fail("non-minimal varint")
				return 0
			}
			return x | uint64(c)<<s
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	d.fail("varint overflows 64 bits")
	return 0
}

func (d *decoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) int32(what string) int32 {
	x := d.varint()
	if x < math.MinInt32 || x > math.MaxInt32 {
		d.fail("%s %d out of range", what, x)
		return 0
	}
	return int32(x)
}

// length reads the length of a byte string of at most max bytes that the
// body still holds.
func (d *decoder) length(what string, max int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(max) {
		d.fail("%s length %d exceeds limit %d", what, n, max)
		return 0
	}
	if int64(n) > d.remaining() {
		d.ioFail(io.ErrUnexpectedEOF)
		return 0
	}
	return int(n)
}

// readFull fills b from the body.
func (d *decoder) readFull(b []byte) {
	if d.err != nil || len(b) == 0 {
		return
	}
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.ioFail(err)
	}
}

// bytes reads a length-prefixed byte string of at most max bytes into a
// new slice (nil when empty).
func (d *decoder) bytes(what string, max int) []byte {
	n := d.length(what, max)
	if d.err != nil || n == 0 {
		return nil
	}
	b := make([]byte, n)
	d.readFull(b)
	return b
}

// bytesInto reads a length-prefixed byte string of at most max bytes,
// appended to b (which it may reallocate).
func (d *decoder) bytesInto(b []byte, what string, max int) []byte {
	n := d.length(what, max)
	if d.err != nil {
		return b
	}
	b = slices.Grow(b, n)[:len(b)+n]
	d.readFull(b[len(b)-n:])
	return b
}

// Read decodes a snapshot written by WriteTo into a new tree configured by
// opts. It rejects anything that is not a complete, intact and consistent
// snapshot with an error wrapping ErrBadSnapshot: a bad header or checksum,
// truncation, data longer than opts allows, invalid or unordered paths, a
// missing parent, an ephemeral parent, wrong NumChildren, or a kind, owner
// or TTL that do not agree. It never panics, and it allocates in
// proportion to the bytes actually read (no length field is trusted
// beyond its bound). Read consumes exactly the snapshot's bytes from r.
func Read(r io.Reader, opts Options) (*Tree, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	if string(hdr[:len(snapMagic)]) != snapMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrBadSnapshot)
	}
	v := hdr[len(snapMagic)]
	if v != snapVersion && v != snapVersionV1 {
		return nil, fmt.Errorf("%w: unsupported format version %d", ErrBadSnapshot, v)
	}
	bodyLen := binary.LittleEndian.Uint64(hdr[len(snapMagic)+1:])
	if bodyLen > math.MaxInt64 {
		return nil, fmt.Errorf("%w: body length %d too large", ErrBadSnapshot, bodyLen)
	}
	crc := crc32.New(castagnoli)
	crc.Write(hdr[:])
	limit := &io.LimitedReader{R: r, N: int64(bodyLen)}
	d := &decoder{r: bufio.NewReaderSize(io.TeeReader(limit, crc), 64<<10), limit: limit}

	t, err := readBody(d, opts, v)
	if err != nil {
		return nil, err
	}
	return t, readTrailer(r, crc)
}

func readTrailer(r io.Reader, crc hash.Hash32) error {
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: checksum: %w", ErrBadSnapshot, err)
	}
	if got, want := binary.LittleEndian.Uint32(sum[:]), crc.Sum32(); got != want {
		return fmt.Errorf("%w: checksum mismatch", ErrBadSnapshot)
	}
	return nil
}

// readACLTable reads a version 2 snapshot's ACL table into t's, and
// returns the tree's reference of each entry (index k-1 for entry k).
func readACLTable(d *decoder, t *Tree) []uint32 {
	count := d.uvarint()
	if d.err != nil {
		return nil
	}
	// An entry takes at least 2 bytes: no more entries than bytes left.
	if int64(count) < 0 || int64(count) > d.remaining()/2 || count > maxACLRef {
		d.fail("ACL table of %d entries", count)
		return nil
	}
	refs := make([]uint32, 0, count)
	for i := uint64(0); i < count && d.err == nil; i++ {
		aversion := d.int32("aversion")
		n := d.uvarint()
		if d.err != nil {
			break
		}
		if int64(n) < 0 || int64(n) > d.remaining()/3 {
			d.fail("ACL of %d entries", n)
			break
		}
		acl := make([]ACL, 0, n)
		for j := uint64(0); j < n && d.err == nil; j++ {
			perms := d.int32("perms")
			scheme := d.bytes("scheme", MaxPathLength)
			id := d.bytes("id", MaxPathLength)
			acl = append(acl, ACL{Perms: Perms(perms), Scheme: string(scheme), ID: string(id)})
		}
		if d.err != nil {
			break
		}
		if aversion == 0 && IsOpen(acl) {
			d.fail("ACL table entry %d is the open ACL", i+1)
			break
		}
		key := aclKey(acl, aversion)
		if t.acls.byKey.Has(aclKeyItem{key: key}) {
			d.fail("ACL table entry %d repeats an earlier one", i+1)
			break
		}
		// Entries start with no use; the records add theirs.
		ref := uint32(i + 1)
		t.acls.add(ref, 0, &aclEntry{acl: acl, aversion: aversion, key: key})
		refs = append(refs, ref)
	}
	t.acls.next = uint32(len(refs) + 1)
	return refs
}

// useACL gives node n the table's k-th entry (0: the open ACL), counting
// the use; the entries must be used in order of first use.
func useACL(d *decoder, t *Tree, refs []uint32, n *node, k uint64, firstUnused *uint64) {
	if k == 0 {
		return
	}
	if k > uint64(len(refs)) {
		d.fail("ACL reference %d beyond the table's %d entries", k, len(refs))
		return
	}
	if k > *firstUnused {
		d.fail("ACL table entry %d used before entry %d", k, *firstUnused)
		return
	}
	if k == *firstUnused {
		*firstUnused++
	}
	it, _ := t.acls.byRef.Get(aclItem{ref: refs[k-1]})
	it.refs++
	t.acls.byRef.ReplaceOrInsert(it)
	n.acl = refs[k-1]
}

func readBody(d *decoder, opts Options, version byte) (*Tree, error) {
	t := newEmpty(opts)
	var refs []uint32
	firstUnused := uint64(1) // the next table entry a record may use first
	if version == snapVersion {
		refs = readACLTable(d, t)
		if d.err == nil && len(refs) == 0 {
			d.fail("version 2 snapshot with an empty ACL table")
		}
	}
	var (
		prevKey     string
		runDir      string // the part before NUL of the keys of the run's children
		runParent   node   // the parent whose children are being read
		runPath     string // and its path
		inRun       bool
		runCount    int64
		declaredSum int64 // sum of NumChildren over all nodes
		scratch     []byte
	)
	endRun := func() {
		if inRun && int64(runParent.numChildren) != runCount {
			d.fail("node %q declares %d children, has %d", runPath, runParent.numChildren, runCount)
		}
	}
	yield := yielder()
	for d.err == nil {
		yield()
		if _, err := d.r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			d.ioFail(err)
			break
		}
		scratch = d.bytesInto(scratch[:0], "path", MaxPathLength)
		kindByte := d.byte()
		null := kindByte&nullFlag != 0
		kind := Kind(kindByte &^ nullFlag)
		n := node{kind: kind}
		n.czxid = d.varint()
		n.mzxid = d.varint()
		n.pzxid = d.varint()
		n.ctime = d.varint()
		n.mtime = d.varint()
		n.version = d.int32("version")
		n.cversion = d.int32("cversion")
		nc := d.uvarint()
		n.seq = d.int32("seq")
		n.aux = d.varint()
		if version == snapVersion {
			useACL(d, t, refs, &n, d.uvarint(), &firstUnused)
		}
		dataLen := d.length("data", t.maxData)
		if d.err != nil {
			break
		}
		if null && dataLen != 0 {
			d.fail("null data of %d bytes", dataLen)
			break
		}
		if kind > TTL {
			d.fail("unknown node kind %d", kind)
			break
		}
		if nc > math.MaxInt32 {
			d.fail("numChildren %d out of range", nc)
			break
		}
		n.numChildren = int32(nc)
		// The path is scratch's until it is kept (an ephemeral's or a
		// reapable node's, in their indexes).
		path := unsafe.String(unsafe.SliceData(scratch), len(scratch))
		// The record, its key built in place and its data read into it.
		r, k, data := newRec(&n, len(path), dataLen, null)
		if path != "" && path[0] == '/' {
			appendKey(k[:0], path)
		}
		d.readFull(data)
		if d.err != nil {
			break
		}

		if t.nodes.Len() == 0 {
			if path != "/" {
				d.fail("first record is %q, not /", path)
				break
			}
			if kind != Persistent || n.aux != 0 {
				d.fail("root must be persistent")
				break
			}
			t.nodes.ReplaceOrInsert(r)
			t.size += int64(dataLen + 1)
			prevKey = rootKey
			declaredSum += int64(n.numChildren)
			continue
		}

		if err := ValidatePath(path); err != nil {
			d.fail("%w", err)
			break
		}
		var owner, ttl int64
		switch kind {
		case Ephemeral:
			owner = n.aux
		case TTL:
			ttl = n.aux
		default:
			if n.aux != 0 {
				d.fail("%s node %q with aux %d", kind, path, n.aux)
			}
		}
		if err := checkKind(kind, owner, ttl); err != nil {
			d.fail("node %q: %w", path, err)
			break
		}
		key := r.key()
		if key <= prevKey {
			d.fail("node %q out of order", path)
			break
		}
		prevKey = key
		if dir := key[:strings.IndexByte(key, 0)]; !inRun || dir != runDir {
			endRun()
			parentPath := parentOf(path)
			parent := t.lookup(parentPath)
			if !parent.ok() {
				d.fail("parent of %q missing", path)
				break
			}
			runDir, runParent, runPath, inRun, runCount = dir, parent.node(), strings.Clone(parentPath), true, 0
			if runParent.kind == Ephemeral {
				d.fail("ephemeral parent of %q", path)
				break
			}
		}
		runCount++
		t.nodes.ReplaceOrInsert(r)
		t.size += int64(dataLen + len(key))
		declaredSum += int64(n.numChildren)
		switch kind {
		case Ephemeral:
			t.eph.ReplaceOrInsert(ephItem{owner: owner, path: strings.Clone(path)})
		case Container, TTL:
			t.reap.ReplaceOrInsert(strings.Clone(path))
		}
	}
	if d.err == nil {
		endRun()
	}
	if d.err == nil && t.nodes.Len() == 0 {
		d.fail("no root")
	}
	if d.err == nil && declaredSum != int64(t.nodes.Len()-1) {
		d.fail("NumChildren total %d, but %d non-root nodes", declaredSum, t.nodes.Len()-1)
	}
	if d.err == nil && firstUnused != uint64(len(refs))+1 {
		d.fail("ACL table entry %d is used by no node", firstUnused)
	}
	if d.err == nil && d.limit.N != 0 {
		d.ioFail(io.ErrUnexpectedEOF)
	}
	if d.err != nil {
		return nil, d.err
	}
	t.rebuildQuotas()
	return t, nil
}
