// Copyright (c) HashiCorp, Inc.
// SPDX-License-Identifier: MPL-2.0

package raftboltdb

import (
	"bytes"
	"encoding/binary"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// coordd: one handle per time format, shared, instead of a new handle per
// call, which made go-msgpack rebuild its per-type encoder cache for every
// log entry. A handle is safe for concurrent use once configured; the
// bytes are the same.
var (
	decodeHandle  = &codec.MsgpackHandle{}
	encodeHandles = [2]*codec.MsgpackHandle{
		{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}},
		{BasicHandle: codec.BasicHandle{TimeNotBuiltin: false}},
	}
)

// Decode reverses the encode operation on a byte slice input
func decodeMsgPack(buf []byte, out interface{}) error {
	r := bytes.NewBuffer(buf)
	dec := codec.NewDecoder(r, decodeHandle)
	return dec.Decode(out)
}

// Encode writes an encoded object to a new bytes buffer
func encodeMsgPack(in interface{}, useNewTimeFormat bool) (*bytes.Buffer, error) {
	buf := bytes.NewBuffer(nil)
	hd := encodeHandles[0]
	if useNewTimeFormat {
		hd = encodeHandles[1]
	}
	enc := codec.NewEncoder(buf, hd)
	err := enc.Encode(in)
	return buf, err
}

// Converts bytes to an integer
func bytesToUint64(b []byte) uint64 {
	return binary.BigEndian.Uint64(b)
}

// Converts a uint to a byte slice
func uint64ToBytes(u uint64) []byte {
	buf := make([]byte, 8)
	binary.BigEndian.PutUint64(buf, u)
	return buf
}
