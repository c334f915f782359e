package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// ErrCorrupt reports bytes that [ReadRegistry] cannot accept: bad magic or version,
// a bound exceeded, an ordering violated, a non-canonical varint, truncation (also
// wrapping io.ErrUnexpectedEOF) or a checksum mismatch.
var ErrCorrupt = errors.New("session: corrupt registry encoding")

// The encoding, written by WriteTo and read by ReadRegistry:
//
//	magic    "CDSR" then the format version: 0x04 when a session has a connection
//	         epoch or a cached reply a digest, or a node is kept for a lock-delay,
//	         else 0x03, or 0x02 when no session holds an identity either
//	count    uvarint, number of sessions
//	count times, in strictly increasing ID order:
//	  id        varint
//	  timeoutMs varint
//	  pwLen     uvarint (<= MaxPasswordLen), then pwLen bytes
//	  ownerLen  uvarint (<= MaxOwnerLen), then ownerLen bytes
//	  floor     varint (ack floor)
//	  nReplies  uvarint (<= MaxCachedReplies)
//	  nReplies times, in strictly increasing xid order, every xid >= floor:
//	    xid     varint
//	    digest  version 4 only: 8 bytes big-endian
//	    len     uvarint (<= MaxReplyLen), then len bytes
//	  versions 3 and 4:
//	  nIds      uvarint (<= MaxIdentities)
//	  nIds times, distinct, in the order added:
//	    scheme  uvarint len, then len bytes
//	    id      uvarint len, then len bytes (scheme and id <= MaxIdentityLen)
//	  version 4 only:
//	  epoch     varint (>= 0)
//	  seq       varint (>= 0; 0 when epoch is 0)
//	version 4 only, the nodes kept for a lock-delay:
//	nDelays  uvarint
//	nDelays times, in strictly increasing path order:
//	  path      uvarint len (1 to MaxLockDelayPathLen), then len bytes
//	  session   varint
//	  until     varint
//	crc      4 bytes big-endian CRC-32C of everything before it
//
// Varints are encoding/binary's, and must be minimal (canonical), so that a registry
// state has exactly one encoding.
//
// Version 1, written before sessions had owners, is the same without ownerLen and its
// bytes; ReadRegistry still reads it (every owner is then ""). Version 2, written
// before sessions had identities, is version 3 without them; a registry in which no
// session holds an identity is still written in version 2, byte for byte as servers
// from before identities write and read it. Version 4 adds the connection epochs, the
// replies' digests and the lock-delays, which only a cluster at command level 2 records
// (the FSM's SetLevel): until then the registry is written as before, so that a server
// of an older version can read a snapshot of a newer one during a rolling upgrade.
var magic = [5]byte{'C', 'D', 'S', 'R', 4}

// magicV3 starts the encoding of format version 3.
var magicV3 = [5]byte{'C', 'D', 'S', 'R', 3}

// magicV2 starts the encoding of format version 2.
var magicV2 = [5]byte{'C', 'D', 'S', 'R', 2}

// magicV1 starts the encoding of format version 1.
var magicV1 = [5]byte{'C', 'D', 'S', 'R', 1}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const flushAt = 32 << 10

type encoder struct {
	w   io.Writer
	buf []byte
	n   int64
	crc uint32
	err error
}

// write checksums and writes b.
func (e *encoder) write(b []byte) {
	if e.err != nil || len(b) == 0 {
		return
	}
	e.crc = crc32.Update(e.crc, castagnoli, b)
	n, err := e.w.Write(b)
	e.n += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	e.err = err
}

func (e *encoder) flush() {
	e.write(e.buf)
	e.buf = e.buf[:0]
}

func (e *encoder) maybeFlush() {
	if len(e.buf) >= flushAt {
		e.flush()
	}
}

// bytes appends a length-prefixed byte string; a long one is written straight from b.
func (e *encoder) bytes(b []byte) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(b)))
	if len(b) < flushAt {
		e.buf = append(e.buf, b...)
		e.maybeFlush()
		return
	}
	e.flush()
	e.write(b)
}

// WriteTo writes r's deterministic encoding to w: two registries holding the same
// sessions, passwords, ack floors and cached replies produce the same bytes, however
// they were built. It returns the number of bytes written.
func (r *Registry) WriteTo(w io.Writer) (int64, error) { return r.writeTo(w, true) }

// writeTo writes the oldest format version that holds r (see magic), or version 1
// (without owners or identities) for the tests of the reading of old snapshots.
func (r *Registry) writeTo(w io.Writer, owners bool) (int64, error) {
	e := &encoder{w: w, buf: make([]byte, 0, flushAt+64)}
	ids, v4 := false, false
	if owners {
		r.tree.Ascend(func(it item) bool {
			ids = ids || len(it.e.ids) > 0
			v4 = v4 || it.e.level2()
			return !v4
		})
		v4 = v4 || r.LockDelays() > 0
		ids = ids || v4
	}
	switch {
	case v4:
		e.buf = append(e.buf, magic[:]...)
	case ids:
		e.buf = append(e.buf, magicV3[:]...)
	case owners:
		e.buf = append(e.buf, magicV2[:]...)
	default:
		e.buf = append(e.buf, magicV1[:]...)
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(r.tree.Len()))
	r.tree.Ascend(func(it item) bool {
		s := it.e
		e.buf = binary.AppendVarint(e.buf, s.info.ID)
		e.buf = binary.AppendVarint(e.buf, s.info.TimeoutMs)
		e.bytes(s.info.Password)
		if owners {
			e.bytes([]byte(s.info.Owner))
		}
		e.buf = binary.AppendVarint(e.buf, s.floor)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(s.replies)))
		for _, rp := range s.replies {
			e.buf = binary.AppendVarint(e.buf, rp.xid)
			if v4 {
				e.buf = binary.BigEndian.AppendUint64(e.buf, rp.digest)
			}
			e.bytes(rp.data)
		}
		if ids {
			e.buf = binary.AppendUvarint(e.buf, uint64(len(s.ids)))
			for _, x := range s.ids {
				e.bytes([]byte(x.Scheme))
				e.bytes([]byte(x.ID))
			}
		}
		if v4 {
			e.buf = binary.AppendVarint(e.buf, s.epoch)
			e.buf = binary.AppendVarint(e.buf, s.seq)
		}
		e.maybeFlush()
		return e.err == nil
	})
	if v4 {
		e.buf = binary.AppendUvarint(e.buf, uint64(r.LockDelays()))
		r.delays.byPath.Ascend(func(d LockDelay) bool {
			e.bytes([]byte(d.Path))
			e.buf = binary.AppendVarint(e.buf, d.Session)
			e.buf = binary.AppendVarint(e.buf, d.Until)
			e.maybeFlush()
			return e.err == nil
		})
	}
	e.flush()
	if e.err != nil {
		return e.n, fmt.Errorf("session: writing registry: %w", e.err)
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], e.crc)
	e.write(sum[:])
	if e.err != nil {
		return e.n, fmt.Errorf("session: writing registry: %w", e.err)
	}
	return e.n, nil
}

type decoder struct {
	r   io.Reader
	br  io.ByteReader // r, if it is one
	crc uint32
	// owners: the format has each session's owner (version 2 and up);
	// ids: its identities (version 3 and up); v4: its epoch and its
	// replies' digests (version 4).
	owners, ids, v4 bool
	one             [1]byte
	vb              [binary.MaxVarintLen64]byte
}

// fail converts a read error: running out of input is corruption (truncation).
func fail(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated: %w", ErrCorrupt, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("session: reading registry: %w", err)
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func (d *decoder) readByte() (byte, error) {
	if d.br != nil {
		return d.br.ReadByte()
	}
	if _, err := io.ReadFull(d.r, d.one[:]); err != nil {
		return 0, err
	}
	return d.one[0], nil
}

// uvarint reads a minimal uvarint.
func (d *decoder) uvarint() (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := d.readByte()
		if err != nil {
			return 0, fail(err)
		}
		d.vb[i] = b
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				return 0, corrupt("varint overflows 64 bits")
			}
			if i > 0 && b == 0 {
				return 0, corrupt("non-minimal varint")
			}
			d.crc = crc32.Update(d.crc, castagnoli, d.vb[:i+1])
			return x | uint64(b)<<s, nil
		}
		x |= uint64(b&0x7f) << s
		s += 7
	}
	return 0, corrupt("varint overflows 64 bits")
}

// varint reads a minimal zig-zag varint.
func (d *decoder) varint() (int64, error) {
	ux, err := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, err
}

// length reads a uvarint length and checks it against limit.
func (d *decoder) length(what string, limit int) (int, error) {
	n, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(limit) {
		return 0, corrupt("%s %d exceeds %d", what, n, limit)
	}
	return int(n), nil
}

// full reads exactly len(b) bytes.
func (d *decoder) full(b []byte) error {
	if _, err := io.ReadFull(d.r, b); err != nil {
		return fail(err)
	}
	d.crc = crc32.Update(d.crc, castagnoli, b)
	return nil
}

// chunk bounds a single allocation made on the word of a length prefix: a longer
// payload is read chunk by chunk, so memory grows only with the input actually there.
const chunk = 64 << 10

// bytes reads a length-prefixed byte string of at most limit bytes; empty is nil.
func (d *decoder) bytes(what string, limit int) ([]byte, error) {
	n, err := d.length(what, limit)
	if err != nil || n == 0 {
		return nil, err
	}
	if n <= chunk {
		b := make([]byte, n)
		return b, d.full(b)
	}
	b := make([]byte, 0, chunk)
	for len(b) < n {
		m := min(n-len(b), chunk)
		b = slices.Grow(b, m)
		if err := d.full(b[len(b) : len(b)+m]); err != nil {
			return nil, err
		}
		b = b[:len(b)+m]
	}
	return b, nil
}

// ReadRegistry decodes a registry written by [Registry.WriteTo]. It reads exactly the
// bytes WriteTo wrote and never past them, so the registry can be embedded in a larger
// stream; it reads byte by byte unless rd is an io.ByteReader, so pass a buffered
// reader (bufio.Reader, bytes.Reader) for speed.
//
// Bytes that are not a valid encoding — truncated, over a bound, out of order,
// non-canonical, or failing the checksum — yield an error wrapping [ErrCorrupt]; it
// never panics, and no allocation exceeds a fixed bound before the input backing it has
// been read.
func ReadRegistry(rd io.Reader) (*Registry, error) {
	return readRegistry(rd, true)
}

// readRegistry is ReadRegistry with an optional checksum check (off only in fuzzing,
// so that mutated inputs reach the structural checks).
func readRegistry(rd io.Reader, verify bool) (*Registry, error) {
	d := &decoder{r: rd}
	d.br, _ = rd.(io.ByteReader)
	var m [len(magic)]byte
	if err := d.full(m[:]); err != nil {
		return nil, err
	}
	if m != magic && m != magicV3 && m != magicV2 && m != magicV1 {
		return nil, corrupt("bad magic or version %q", m[:])
	}
	d.owners, d.ids, d.v4 = m != magicV1, m == magic || m == magicV3, m == magic
	anyIDs, anyV4 := false, false
	count, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	r := NewRegistry()
	var prev int64
	for i := uint64(0); i < count; i++ {
		s, err := d.session()
		if err != nil {
			return nil, err
		}
		anyIDs = anyIDs || len(s.ids) > 0
		anyV4 = anyV4 || s.level2()
		if i > 0 && s.info.ID <= prev {
			return nil, corrupt("session %d after %d: not in increasing order", s.info.ID, prev)
		}
		prev = s.info.ID
		s.owner = r.tok
		r.put(s)
	}
	if d.v4 {
		if err := d.lockDelays(r); err != nil {
			return nil, err
		}
	}
	switch {
	case d.v4 && !anyV4 && r.LockDelays() == 0:
		return nil, corrupt("version 4 with no epoch, digest or lock-delay (an older version is written then)")
	case d.ids && !d.v4 && !anyIDs:
		return nil, corrupt("version 3 with no identities (version 2 is written then)")
	}
	want := d.crc
	var sum [4]byte
	if _, err := io.ReadFull(d.r, sum[:]); err != nil {
		return nil, fail(err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); verify && got != want {
		return nil, corrupt("checksum %08x, want %08x", got, want)
	}
	return r, nil
}

func (d *decoder) session() (*entry, error) {
	var s entry
	var err error
	if s.info.ID, err = d.varint(); err != nil {
		return nil, err
	}
	if s.info.TimeoutMs, err = d.varint(); err != nil {
		return nil, err
	}
	if s.info.Password, err = d.bytes("password length", MaxPasswordLen); err != nil {
		return nil, err
	}
	if d.owners {
		owner, err := d.bytes("owner length", MaxOwnerLen)
		if err != nil {
			return nil, err
		}
		s.info.Owner = string(owner)
	}
	if s.floor, err = d.varint(); err != nil {
		return nil, err
	}
	n, err := d.length("reply count", MaxCachedReplies)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		s.replies = make([]reply, 0, n) // n <= MaxCachedReplies
	}
	for i := 0; i < n; i++ {
		var rp reply
		if rp.xid, err = d.varint(); err != nil {
			return nil, err
		}
		if rp.xid < s.floor {
			return nil, corrupt("session %d: reply xid %d below floor %d", s.info.ID, rp.xid, s.floor)
		}
		if i > 0 && rp.xid <= s.replies[i-1].xid {
			return nil, corrupt("session %d: reply xid %d not increasing", s.info.ID, rp.xid)
		}
		if d.v4 {
			var b [8]byte
			if err := d.full(b[:]); err != nil {
				return nil, err
			}
			rp.digest = binary.BigEndian.Uint64(b[:])
		}
		if rp.data, err = d.bytes("reply length", MaxReplyLen); err != nil {
			return nil, err
		}
		s.replies = append(s.replies, rp)
	}
	if d.ids {
		if s.ids, err = d.identities(s.info.ID); err != nil {
			return nil, err
		}
	}
	if d.v4 {
		if s.epoch, err = d.varint(); err != nil {
			return nil, err
		}
		if s.seq, err = d.varint(); err != nil {
			return nil, err
		}
		if s.epoch < 0 || s.seq < 0 || (s.epoch == 0 && s.seq != 0) {
			return nil, corrupt("session %d: epoch %d with request number %d", s.info.ID, s.epoch, s.seq)
		}
	}
	return &s, nil
}

// level2 reports whether the session holds anything only format version 4
// encodes: a connection epoch or a reply's digest.
func (e *entry) level2() bool {
	if e.epoch != 0 || e.seq != 0 {
		return true
	}
	for _, rp := range e.replies {
		if rp.digest != 0 {
			return true
		}
	}
	return false
}

func (d *decoder) identities(sid int64) ([]Identity, error) {
	n, err := d.length("identity count", MaxIdentities)
	if err != nil || n == 0 {
		return nil, err
	}
	ids := make([]Identity, 0, n)
	for i := 0; i < n; i++ {
		scheme, err := d.bytes("scheme length", MaxIdentityLen)
		if err != nil {
			return nil, err
		}
		id, err := d.bytes("identity length", MaxIdentityLen-len(scheme))
		if err != nil {
			return nil, err
		}
		x := Identity{Scheme: string(scheme), ID: string(id)}
		if slices.Contains(ids, x) {
			return nil, corrupt("session %d: identity %d repeats an earlier one", sid, i)
		}
		ids = append(ids, x)
	}
	return ids, nil
}

// lockDelays reads the nodes kept for a lock-delay (version 4) into r.
func (d *decoder) lockDelays(r *Registry) error {
	n, err := d.uvarint()
	if err != nil {
		return err
	}
	prev := ""
	for i := uint64(0); i < n; i++ {
		p, err := d.bytes("lock-delay path length", MaxLockDelayPathLen)
		if err != nil {
			return err
		}
		ld := LockDelay{Path: string(p)}
		if ld.Path == "" {
			return corrupt("lock-delay %d: empty path", i)
		}
		if i > 0 && ld.Path <= prev {
			return corrupt("lock-delay path %q after %q: not in increasing order", ld.Path, prev)
		}
		prev = ld.Path
		if ld.Session, err = d.varint(); err != nil {
			return err
		}
		if ld.Until, err = d.varint(); err != nil {
			return err
		}
		if err := r.AddLockDelay(ld); err != nil {
			return corrupt("%v", err)
		}
	}
	return nil
}
