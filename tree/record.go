package tree

import (
	"encoding/binary"
	"unsafe"
)

// How a znode is stored.
//
// Each znode is one record: a single allocation holding its header, its
// btree key (see keyOf) and its data, and the btree holds only a pointer to
// it (8 bytes an entry). A record holds no Go pointers, so the garbage
// collector never scans it: with ten million znodes it marks the btree's
// nodes, not ten million records. A record is immutable once it is in the
// btree (clones share it); a change replaces it with a new record.
//
// The header is a 16-byte prefix and up to four groups of 8-byte words,
// each present only when one of its fields differs from the value it
// defaults to (so most znodes carry two of them, and equal trees store
// equal records):
//
//	prefix: flags (1 byte), ACL reference (3 bytes), key length (uint32),
//	        data length (uint32), version (int32)
//	base:   czxid, ctime                      (both 0 by default)
//	mod:    mzxid, mtime                      (czxid and ctime by default)
//	par:    pzxid; cversion, numChildren; seq (czxid and zeros by default)
//	aux:    ephemeral owner or TTL            (0 by default)
//
// then the key and, but in a big record, the data. A record whose data is
// longer than maxInline is big: it is a bigRec, whose header is the same
// and whose key and data are Go strings and slices of their own, so that a
// change to its header (a parent's child count, on every create below it)
// never copies the data.
//
// A record of 100 bytes of data and a 16-byte key, never modified and
// without children, takes 32+16+100 = 148 bytes (the 160-byte size class);
// before records, the same znode took an 80-byte header, a 128-byte buffer
// for data and key and a 24-byte btree entry.
type rec struct{ p *byte }

// The flags byte of a record.
const (
	flagKind = 0x03 // the Kind
	flagNull = 0x04 // null data (the data length is 0)
	flagBig  = 0x08 // a bigRec
	flagBase = 0x10 // the base group is present
	flagMod  = 0x20 // the mod group
	flagPar  = 0x40 // the par group
	flagAux  = 0x80 // the aux group
)

// Where things are in a record.
const (
	prefixLen = 16
	offACL    = 1 // 3 bytes, little-endian
	offKeyLen = 4
	offDatLen = 8
	offVer    = 12
	// maxHeader is the longest header: the prefix and every group.
	maxHeader = prefixLen + 8*(2+2+3+1)
	// maxInline is the most data a record holds inline; more makes a
	// bigRec.
	maxInline = 1024
)

// groupWords[flags>>4] is the number of 8-byte words of the groups the
// flags say are present.
var groupWords = func() (w [16]byte) {
	for f := range w {
		w[f] = byte(2*(f&1) + 2*(f>>1&1) + 3*(f>>2&1) + (f >> 3 & 1))
	}
	return w
}()

// bigRec is a record whose data is longer than maxInline. head is laid out
// as a small record's header; rec.p points to it (the start of the
// struct), so the collector sees key and data through the struct's type.
type bigRec struct {
	head [maxHeader]byte
	key  string
	data []byte
}

// emptyData is the data of every node with empty (not null) data: a
// non-nil empty slice that points into no record.
var emptyData = []byte{}

// node is a record's header, decoded: what writes read and change before
// they build the node's next record.
type node struct {
	czxid       int64
	mzxid       int64
	pzxid       int64
	ctime       int64
	mtime       int64
	aux         int64 // ephemeral owner for Ephemeral, TTL for TTL, else 0
	version     int32
	cversion    int32
	numChildren int32
	seq         int32 // children ever created: the next sequential suffix
	acl         uint32
	kind        Kind
}

// flags returns the group flags n's header needs, and its kind.
func (n *node) flags() byte {
	f := byte(n.kind) & flagKind
	if n.czxid != 0 || n.ctime != 0 {
		f |= flagBase
	}
	if n.mzxid != n.czxid || n.mtime != n.ctime {
		f |= flagMod
	}
	if n.pzxid != n.czxid || n.cversion != 0 || n.numChildren != 0 || n.seq != 0 {
		f |= flagPar
	}
	if n.aux != 0 {
		f |= flagAux
	}
	return f
}

func hdrLen(flags byte) int { return prefixLen + 8*int(groupWords[flags>>4]) }

// le is the byte order of record fields.
var le = binary.LittleEndian

// putHeader writes n's header with the given flags into b, which is at
// least hdrLen(flags) long.
func putHeader(b []byte, n *node, flags byte, keyLen, dataLen int) {
	b[0] = flags
	b[offACL] = byte(n.acl)
	b[offACL+1] = byte(n.acl >> 8)
	b[offACL+2] = byte(n.acl >> 16)
	le.PutUint32(b[offKeyLen:], uint32(keyLen))
	le.PutUint32(b[offDatLen:], uint32(dataLen))
	le.PutUint32(b[offVer:], uint32(n.version))
	o := prefixLen
	if flags&flagBase != 0 {
		le.PutUint64(b[o:], uint64(n.czxid))
		le.PutUint64(b[o+8:], uint64(n.ctime))
		o += 16
	}
	if flags&flagMod != 0 {
		le.PutUint64(b[o:], uint64(n.mzxid))
		le.PutUint64(b[o+8:], uint64(n.mtime))
		o += 16
	}
	if flags&flagPar != 0 {
		le.PutUint64(b[o:], uint64(n.pzxid))
		le.PutUint32(b[o+8:], uint32(n.cversion))
		le.PutUint32(b[o+12:], uint32(n.numChildren))
		le.PutUint32(b[o+16:], uint32(n.seq))
		le.PutUint32(b[o+20:], 0)
		o += 24
	}
	if flags&flagAux != 0 {
		le.PutUint64(b[o:], uint64(n.aux))
	}
}

// newRec returns a record of header n with room for a key of keyLen bytes
// and dataLen bytes of data (null when null), and the slices to fill them
// through: they must be filled before the record is used, and never
// written afterwards.
func newRec(n *node, keyLen, dataLen int, null bool) (r rec, key, data []byte) {
	flags := n.flags()
	if null {
		flags |= flagNull
		dataLen = 0
	}
	hl := hdrLen(flags)
	if dataLen > maxInline {
		b := &bigRec{}
		putHeader(b.head[:], n, flags|flagBig, keyLen, dataLen)
		key = make([]byte, keyLen)
		b.data = make([]byte, dataLen)
		b.key = unsafe.String(unsafe.SliceData(key), keyLen)
		return rec{&b.head[0]}, key, b.data
	}
	buf := make([]byte, hl+keyLen+dataLen)
	putHeader(buf, n, flags, keyLen, dataLen)
	return rec{&buf[0]}, buf[hl : hl+keyLen], buf[hl+keyLen:]
}

// makeRec returns a record of header n, key and data (copied; nil is null
// data).
func makeRec(n *node, key string, data []byte) rec {
	r, k, d := newRec(n, len(key), len(data), data == nil)
	copy(k, key)
	copy(d, data)
	return r
}

// probe returns a record that holds only key, to search the btree with.
func probe(key string) rec {
	buf := make([]byte, prefixLen+len(key))
	le.PutUint32(buf[offKeyLen:], uint32(len(key)))
	copy(buf[prefixLen:], key)
	return rec{&buf[0]}
}

// probePath returns probe(keyOf(path)) in one allocation.
func probePath(path string) rec {
	buf := appendKey(make([]byte, prefixLen, prefixLen+len(path)), path)
	le.PutUint32(buf[offKeyLen:], uint32(len(buf)-prefixLen))
	return rec{&buf[0]}
}

// ok reports whether r is a record (the zero rec is none: a lookup that
// found nothing).
func (r rec) ok() bool { return r.p != nil }

func (r rec) flags() byte { return *r.p }

// head returns the record's header bytes.
func (r rec) head() []byte { return unsafe.Slice(r.p, hdrLen(r.flags())) }

func (r rec) big() *bigRec { return (*bigRec)(unsafe.Pointer(r.p)) }

func (r rec) keyLen() int {
	return int(le.Uint32(unsafe.Slice(r.p, prefixLen)[offKeyLen:]))
}

// key returns the record's btree key, shared with the record.
func (r rec) key() string {
	f := r.flags()
	if f&flagBig != 0 {
		return r.big().key
	}
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(r.p), hdrLen(f))), r.keyLen())
}

// dataLen returns the length of the node's data (0 when null): its
// Stat.DataLength.
func (r rec) dataLen() int32 {
	return int32(le.Uint32(unsafe.Slice(r.p, prefixLen)[offDatLen:]))
}

// data returns the node's data: nil when it is null, a non-nil slice
// (empty or not) otherwise. The slice is shared: it must not be modified.
func (r rec) data() []byte {
	f := r.flags()
	switch {
	case f&flagNull != 0:
		return nil
	case f&flagBig != 0:
		return r.big().data
	}
	n := int(r.dataLen())
	if n == 0 {
		return emptyData
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(r.p), hdrLen(f)+r.keyLen())), n)
}

// isNull reports whether the node's data is null.
func (r rec) isNull() bool { return r.flags()&flagNull != 0 }

// kind returns the node's kind.
func (r rec) kind() Kind { return Kind(r.flags() & flagKind) }

// aclRef returns the node's reference into its tree's ACL table.
func (r rec) aclRef() uint32 {
	b := unsafe.Slice(r.p, prefixLen)
	return uint32(b[offACL]) | uint32(b[offACL+1])<<8 | uint32(b[offACL+2])<<16
}

// setACL sets the ACL reference (< 1<<24) of a record not yet in a tree.
func (r rec) setACL(ref uint32) {
	b := unsafe.Slice(r.p, prefixLen)
	b[offACL], b[offACL+1], b[offACL+2] = byte(ref), byte(ref>>8), byte(ref>>16)
}

// node decodes the record's header.
func (r rec) node() node {
	b := r.head()
	f := b[0]
	n := node{
		kind:    Kind(f & flagKind),
		acl:     r.aclRef(),
		version: int32(le.Uint32(b[offVer:])),
	}
	o := prefixLen
	if f&flagBase != 0 {
		n.czxid = int64(le.Uint64(b[o:]))
		n.ctime = int64(le.Uint64(b[o+8:]))
		o += 16
	}
	n.mzxid, n.mtime, n.pzxid = n.czxid, n.ctime, n.czxid
	if f&flagMod != 0 {
		n.mzxid = int64(le.Uint64(b[o:]))
		n.mtime = int64(le.Uint64(b[o+8:]))
		o += 16
	}
	if f&flagPar != 0 {
		n.pzxid = int64(le.Uint64(b[o:]))
		n.cversion = int32(le.Uint32(b[o+8:]))
		n.numChildren = int32(le.Uint32(b[o+12:]))
		n.seq = int32(le.Uint32(b[o+16:]))
		o += 24
	}
	if f&flagAux != 0 {
		n.aux = int64(le.Uint64(b[o:]))
	}
	return n
}

// with returns a record of the same key and data as r with header n.
func (r rec) with(n *node) rec {
	if r.flags()&flagBig != 0 {
		// The key and data are immutable: share them.
		src := r.big()
		b := &bigRec{key: src.key, data: src.data}
		putHeader(b.head[:], n, n.flags()|flagBig|r.flags()&flagNull, len(src.key), len(src.data))
		return rec{&b.head[0]}
	}
	return makeRec(n, r.key(), r.data())
}

func recLess(a, b rec) bool { return a.key() < b.key() }
