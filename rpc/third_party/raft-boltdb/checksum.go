// Copyright (c) HashiCorp, Inc.
// SPDX-License-Identifier: MPL-2.0

package raftboltdb

// coordd: checksums for raft.db. bbolt checksums only its meta pages, so a
// flipped bit in a page of the log or of the stable store (CurrentTerm,
// LastVoteTerm, LastVoteCand) would be read back as data. Every value now
// ends with a trailer: a marker and a CRC-32C of its bucket, key and value.
// A record in the conf bucket, rewritten in the same transaction as every
// change, holds the log's first and last index and the stable store's keys,
// so that an entry or a key lost to damage (the last entries, a vote) is
// noticed too: bbolt's pages say nothing of what they should hold. New
// checks all of it before the store is used. A file written before this
// (no trailers, no record) is upgraded by New, in one transaction: its
// values are read once unverified (the log's must be whole, in order, each
// under its own index) and rewritten with trailers and the record.
//
// The trailer follows the value, so upstream's decoder, which stops at the
// end of the msgpack it reads, still reads the entries this writes, and
// its GetUint64 the terms (the first eight bytes); LastVoteCand it would
// read with the trailer on.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// ErrCorrupt means raft.db holds damage: a value that does not match its
// checksum, an entry or a key missing, entries out of order.
var ErrCorrupt = errors.New("raft-boltdb: store damaged")

// recordKey is the record's key in the conf bucket.
var recordKey = []byte("coordd.record")

var trailerMagic = [4]byte{'c', 'd', 'c', '1'}

const trailerLen = len(trailerMagic) + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func trailerCRC(bucket, key, value []byte) uint32 {
	c := crc32.Update(0, castagnoli, bucket)
	c = crc32.Update(c, castagnoli, []byte{0})
	c = crc32.Update(c, castagnoli, key)
	c = crc32.Update(c, castagnoli, []byte{0})
	c = crc32.Update(c, castagnoli, value)
	return crc32.Update(c, castagnoli, trailerMagic[:])
}

// seal returns value with its trailer.
func seal(bucket, key, value []byte) []byte {
	out := make([]byte, 0, len(value)+trailerLen)
	out = append(out, value...)
	out = append(out, trailerMagic[:]...)
	return binary.LittleEndian.AppendUint32(out, trailerCRC(bucket, key, value))
}

// unseal returns the value stored with its trailer, and whether the
// trailer is there and right.
func unseal(bucket, key, stored []byte) ([]byte, bool) {
	if len(stored) < trailerLen {
		return nil, false
	}
	v, t := stored[:len(stored)-trailerLen], stored[len(stored)-trailerLen:]
	if !bytes.Equal(t[:4], trailerMagic[:]) || binary.LittleEndian.Uint32(t[4:]) != trailerCRC(bucket, key, v) {
		return nil, false
	}
	return v, true
}

// record is what the conf bucket records of the store.
type record struct {
	first, last uint64          // the log's (0, 0: empty)
	keys        map[string]bool // the conf bucket's keys, the record's aside
}

func (r record) encode() []byte {
	b := binary.AppendUvarint(nil, r.first)
	b = binary.AppendUvarint(b, r.last)
	names := make([]string, 0, len(r.keys))
	for k := range r.keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	return b
}

func decodeRecord(b []byte) (record, bool) {
	r := record{keys: map[string]bool{}}
	var n int
	if r.first, n = binary.Uvarint(b); n <= 0 {
		return r, false
	}
	b = b[n:]
	if r.last, n = binary.Uvarint(b); n <= 0 {
		return r, false
	}
	b = b[n:]
	for len(b) > 0 {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return r, false
		}
		r.keys[string(b[k:k+int(l)])] = true
		b = b[k+int(l):]
	}
	return r, true
}

func (b *BoltStore) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, b.path, fmt.Sprintf(format, args...))
}

// readRecord reads tx's record.
func (b *BoltStore) readRecord(tx *bbolt.Tx) (record, error) {
	stored := tx.Bucket(dbConf).Get(recordKey)
	if stored == nil {
		return record{}, b.corrupt("the record of its log and keys is missing")
	}
	rb, ok := unseal(dbConf, recordKey, stored)
	if !ok {
		return record{}, b.corrupt("the record of its log and keys does not match its checksum")
	}
	r, ok := decodeRecord(rb)
	if !ok {
		return record{}, b.corrupt("the record of its log and keys does not decode")
	}
	return r, nil
}

// writeRecord rewrites tx's record with the log's bounds as tx has them
// and the keys given.
func writeRecord(tx *bbolt.Tx, keys map[string]bool) error {
	r := record{keys: keys}
	c := tx.Bucket(dbLogs).Cursor()
	if k, _ := c.First(); k != nil {
		r.first = bytesToUint64(k)
		k, _ = c.Last()
		r.last = bytesToUint64(k)
	}
	return tx.Bucket(dbConf).Put(recordKey, seal(dbConf, recordKey, r.encode()))
}

// verify checks the whole store (see above), or upgrades one written
// before the checksums; read-only, it only checks, and reads an old store
// as it is.
func (b *BoltStore) verify(readOnly bool) error {
	var legacy bool
	err := b.conn.View(func(tx *bbolt.Tx) error {
		var err error
		legacy, err = b.check(tx)
		return err
	})
	if err != nil {
		return err
	}
	b.sealed = !legacy
	if !legacy || readOnly {
		return nil
	}
	if err := b.conn.Update(b.upgrade); err != nil {
		return err
	}
	b.sealed = true
	return nil
}

// check verifies tx; it reports a store written before the checksums.
func (b *BoltStore) check(tx *bbolt.Tx) (legacy bool, err error) {
	logs, conf := tx.Bucket(dbLogs), tx.Bucket(dbConf)
	if logs == nil || conf == nil {
		return false, b.corrupt("a bucket is missing (%s or %s)", dbLogs, dbConf)
	}
	if conf.Get(recordKey) == nil {
		// No record: written before it, unless some value has a trailer,
		// which only a writer of the record adds.
		for _, bk := range []struct {
			name []byte
			b    *bbolt.Bucket
		}{{dbConf, conf}, {dbLogs, logs}} {
			c := bk.b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if _, ok := unseal(bk.name, k, v); ok {
					return false, b.corrupt("the record of its log and keys is missing, but key %x of %s has a checksum", k, bk.name)
				}
			}
		}
		return true, nil
	}
	r, err := b.readRecord(tx)
	if err != nil {
		return false, err
	}
	c := conf.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if bytes.Equal(k, recordKey) {
			continue
		}
		if !r.keys[string(k)] {
			return false, b.corrupt("key %q of %s is not in its record", k, dbConf)
		}
		delete(r.keys, string(k))
		if _, ok := unseal(dbConf, k, v); !ok {
			return false, b.corrupt("the value of key %q of %s does not match its checksum", k, dbConf)
		}
	}
	for k := range r.keys {
		return false, b.corrupt("key %q of %s is missing (its record lists it)", k, dbConf)
	}
	var first, next uint64
	c = logs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return false, b.corrupt("a key of %d bytes in %s", len(k), dbLogs)
		}
		idx := bytesToUint64(k)
		if first == 0 {
			first = idx
		} else if idx != next {
			return false, b.corrupt("entry %d follows entry %d", idx, next-1)
		}
		next = idx + 1
		if _, ok := unseal(dbLogs, k, v); !ok {
			return false, b.corrupt("entry %d does not match its checksum", idx)
		}
	}
	last := uint64(0)
	if first != 0 {
		last = next - 1
	}
	if first != r.first || last != r.last {
		return false, b.corrupt("the log holds entries %d..%d, its record says %d..%d", first, last, r.first, r.last)
	}
	return false, nil
}

// upgrade adds trailers and the record to a store written before them.
func (b *BoltStore) upgrade(tx *bbolt.Tx) error {
	keys := map[string]bool{}
	conf := tx.Bucket(dbConf)
	type kv struct{ k, v []byte }
	var all []kv
	c := conf.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		all = append(all, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
	}
	for _, e := range all {
		if err := conf.Put(e.k, seal(dbConf, e.k, e.v)); err != nil {
			return err
		}
		keys[string(e.k)] = true
	}
	logs := tx.Bucket(dbLogs)
	logs.FillPercent = 1.0
	var next uint64
	all = all[:0]
	c = logs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return b.corrupt("a key of %d bytes in %s", len(k), dbLogs)
		}
		idx := bytesToUint64(k)
		if next != 0 && idx != next {
			return b.corrupt("entry %d follows entry %d", idx, next-1)
		}
		next = idx + 1
		var l raft.Log
		if err := decodeMsgPack(v, &l); err != nil || l.Index != idx {
			return b.corrupt("entry %d does not decode as itself", idx)
		}
		all = append(all, kv{append([]byte(nil), k...), seal(dbLogs, k, v)})
	}
	for _, e := range all {
		if err := logs.Put(e.k, e.v); err != nil {
			return err
		}
	}
	return writeRecord(tx, keys)
}

// unsealValue returns a stored value, checked against its trailer if the
// store has them.
func (b *BoltStore) unsealValue(bucket, key, stored []byte) ([]byte, error) {
	if !b.sealed {
		return stored, nil
	}
	v, ok := unseal(bucket, key, stored)
	if !ok {
		return nil, b.corrupt("the value of key %x of %s does not match its checksum", key, bucket)
	}
	return v, nil
}

// sealValue returns value as the store keeps it: with its trailer.
func (b *BoltStore) sealValue(bucket, key, value []byte) []byte {
	if !b.sealed {
		return value
	}
	return seal(bucket, key, value)
}

// updateRecord rewrites the record in tx after a change: the log's bounds,
// and, with addKey, key among the conf bucket's keys.
func (b *BoltStore) updateRecord(tx *bbolt.Tx, key []byte, addKey bool) error {
	if !b.sealed {
		return nil
	}
	r, err := b.readRecord(tx)
	if err != nil {
		return err
	}
	if addKey {
		r.keys[string(key)] = true
	}
	return writeRecord(tx, r.keys)
}
