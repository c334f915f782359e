// Copyright (c) HashiCorp, Inc
// SPDX-License-Identifier: MPL-2.0

package metadb

// coordd: checksums for wal-meta.db. bbolt checksums only its meta pages,
// so a flipped bit in the page that holds the segment list or the stable
// store (CurrentTerm, LastVoteTerm, LastVoteCand) would be read back as a
// value. Every value now ends with a trailer, a marker and a CRC-32C of
// its bucket, key and value; and a record in the meta bucket lists every
// key the two buckets hold, written in the same transaction as any change
// to that set, so that a key lost to damage (a vote forgotten) is noticed
// too. Load checks all of it before anything is used. A file written
// before this (no trailers, no record) is upgraded by Load: its values are
// read once unverified, checked for what they must be, and rewritten with
// trailers and the record.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// RecordKey is the key, in MetaBucket, of the record of every key the
// buckets hold.
const RecordKey = "coordd.keys"

// trailerMagic marks a value that carries a trailer: the marker, then the
// CRC-32C (little-endian) of bucket, key, value and marker.
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

// recordName is a key's name in the record: bucket, a zero byte, key.
func recordName(bucket, key []byte) string {
	return string(bucket) + "\x00" + string(key)
}

// encodeRecord encodes the set of keys, sorted, each with its length.
func encodeRecord(keys map[string]bool) []byte {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var b []byte
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	return b
}

func decodeRecord(b []byte) (map[string]bool, bool) {
	keys := map[string]bool{}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		keys[string(b[k:k+int(n)])] = true
		b = b[k+int(n):]
	}
	return keys, true
}

// corrupt says what is wrong with the file.
func (db *BoltMetaDB) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", types.ErrCorrupt, filepath.Join(db.dir, FileName), fmt.Sprintf(format, args...))
}

// verify checks every value of both buckets against its trailer, and the
// set of keys against the record; a file without either is upgraded.
func (db *BoltMetaDB) verify() error {
	var legacy bool
	err := db.db.View(func(tx *bbolt.Tx) error {
		var err error
		legacy, err = db.check(tx)
		return err
	})
	if err != nil || !legacy {
		return err
	}
	return db.db.Update(db.upgrade)
}

// check verifies tx's buckets; it reports a file from before the trailers.
func (db *BoltMetaDB) check(tx *bbolt.Tx) (legacy bool, err error) {
	meta, stable := tx.Bucket([]byte(MetaBucket)), tx.Bucket([]byte(StableBucket))
	if meta == nil || stable == nil {
		return false, db.corrupt("a bucket is missing (%s or %s)", MetaBucket, StableBucket)
	}
	stored := meta.Get([]byte(RecordKey))
	if stored == nil {
		// No record: the file was written before it, unless some value
		// has a trailer, which only a writer of the record adds.
		for _, b := range []*bbolt.Bucket{meta, stable} {
			name := []byte(MetaBucket)
			if b == stable {
				name = []byte(StableBucket)
			}
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if _, ok := unseal(name, k, v); ok {
					return false, db.corrupt("the record of its keys is missing, but key %q of %s has a checksum", k, name)
				}
			}
		}
		return true, nil
	}
	rb, ok := unseal([]byte(MetaBucket), []byte(RecordKey), stored)
	if !ok {
		return false, db.corrupt("the record of its keys does not match its checksum")
	}
	keys, ok := decodeRecord(rb)
	if !ok {
		return false, db.corrupt("the record of its keys does not decode")
	}
	for _, name := range []string{MetaBucket, StableBucket} {
		c := tx.Bucket([]byte(name)).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if name == MetaBucket && string(k) == RecordKey {
				continue
			}
			if !keys[recordName([]byte(name), k)] {
				return false, db.corrupt("key %q of %s is not in the record of its keys", k, name)
			}
			delete(keys, recordName([]byte(name), k))
			if v == nil {
				return false, db.corrupt("key %q of %s is a bucket", k, name)
			}
			if _, ok := unseal([]byte(name), k, v); !ok {
				return false, db.corrupt("the value of key %q of %s does not match its checksum", k, name)
			}
		}
	}
	for k := range keys {
		bucket, key, _ := strings.Cut(k, "\x00")
		return false, db.corrupt("key %q of %s is missing (the record of its keys lists it)", key, bucket)
	}
	return false, nil
}

// upgrade adds trailers and the record to a file written before them. The
// values are checked as far as they can be: the segment list must parse.
func (db *BoltMetaDB) upgrade(tx *bbolt.Tx) error {
	keys := map[string]bool{}
	for _, name := range []string{MetaBucket, StableBucket} {
		b := tx.Bucket([]byte(name))
		type kv struct{ k, v []byte }
		var all []kv
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v == nil {
				return db.corrupt("key %q of %s is a bucket", k, name)
			}
			all = append(all, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
		}
		for _, e := range all {
			if name == MetaBucket && string(e.k) == MetaKey {
				if _, err := parseState(e.v); err != nil {
					return db.corrupt("%v", err)
				}
			}
			if err := b.Put(e.k, seal([]byte(name), e.k, e.v)); err != nil {
				return err
			}
			keys[recordName([]byte(name), e.k)] = true
		}
	}
	return putRecord(tx, keys)
}

// putRecord writes the record of keys.
func putRecord(tx *bbolt.Tx, keys map[string]bool) error {
	return tx.Bucket([]byte(MetaBucket)).Put([]byte(RecordKey), seal([]byte(MetaBucket), []byte(RecordKey), encodeRecord(keys)))
}

// recordKeys reads the record in tx (which verify checked).
func recordKeys(tx *bbolt.Tx) (map[string]bool, error) {
	stored := tx.Bucket([]byte(MetaBucket)).Get([]byte(RecordKey))
	rb, ok := unseal([]byte(MetaBucket), []byte(RecordKey), stored)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the record of its keys does not match its checksum", types.ErrCorrupt, FileName)
	}
	keys, ok := decodeRecord(rb)
	if !ok {
		return nil, fmt.Errorf("%w: %s: the record of its keys does not decode", types.ErrCorrupt, FileName)
	}
	return keys, nil
}

// putKey stores value at key in the bucket named name, with its trailer,
// and adds the key to the record if it is not there; a nil value deletes
// the key and takes it out of the record.
func putKey(tx *bbolt.Tx, name string, key, value []byte) error {
	keys, err := recordKeys(tx)
	if err != nil {
		return err
	}
	b := tx.Bucket([]byte(name))
	rn := recordName([]byte(name), key)
	if value == nil {
		if err := b.Delete(key); err != nil {
			return err
		}
		if !keys[rn] {
			return nil
		}
		delete(keys, rn)
		return putRecord(tx, keys)
	}
	if err := b.Put(key, seal([]byte(name), key, value)); err != nil {
		return err
	}
	if keys[rn] {
		return nil
	}
	keys[rn] = true
	return putRecord(tx, keys)
}
