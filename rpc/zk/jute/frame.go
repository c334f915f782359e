package jute

import (
	"encoding/binary"
	"errors"
	"io"
	"slices"
)

// Every message of ZooKeeper's client protocol, in both directions, is a
// frame: a 4-byte big-endian length, then that many bytes of records.

// frameChunk bounds the memory ReadFrame commits before the bytes arrive: a
// frame announced as large is read into a buffer that starts at this size and
// doubles as the peer's bytes actually arrive.
const frameChunk = 64 << 10

// ReadFrame reads one frame from r and returns its payload (the bytes after
// the length prefix), which is no longer than limit. A clean end of the
// stream before a frame starts is io.EOF. A length prefix over limit is
// ErrFrameTooLarge and a negative one ErrNegativeLength, both returned
// without reading further; a stream that ends inside the prefix or the
// payload is ErrTruncatedFrame. Any other error of r is returned as it is
// (a read deadline, a closed connection).
//
// ZooKeeper's server closes the connection in each of these cases.
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errorf(ErrTruncatedFrame, "stream ends inside a frame's length prefix")
		}
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(prefix[:]))
	if n < 0 {
		return nil, errorf(ErrNegativeLength, "frame length %d is negative", n)
	}
	if int64(n) > int64(limit) {
		return nil, errorf(ErrFrameTooLarge, "frame length %d exceeds the limit of %d bytes", n, limit)
	}
	size := int(n)
	buf := make([]byte, 0, min(size, frameChunk))
	for len(buf) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), size-len(buf)))
		}
		got, err := io.ReadFull(r, buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+got]
		if err != nil {
			return nil, truncated(err, len(buf), size)
		}
	}
	return buf, nil
}

// truncated turns an end of stream inside a payload into ErrTruncatedFrame.
func truncated(err error, got, size int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errorf(ErrTruncatedFrame, "stream ends after %d of the frame's %d bytes", got, size)
	}
	return err
}

// AppendFrame appends to dst one frame holding the encodings of recs, in
// order (nil entries are skipped), and returns the extended slice. A reply
// is AppendFrame(dst, &ReplyHeader{...}, body); a notification is
// AppendFrame(dst, &ReplyHeader{Xid: XidNotification, Zxid: z}, &event); a
// ConnectResponse is a frame of its own.
func AppendFrame(dst []byte, recs ...Encoder) []byte {
	w := NewWriter(dst)
	mark := w.BeginFrame()
	for _, rec := range recs {
		if rec != nil {
			rec.Encode(w)
		}
	}
	w.EndFrame(mark)
	return w.Bytes()
}

// Preface is what the first four bytes of a connection say it is.
type Preface int

// The kinds of connection a server on a ZooKeeper client port may see.
const (
	// PrefaceJute: a frame length; a ZooKeeper client's ConnectRequest
	// follows. Bytes that are no sensible length also classify as this: the
	// frame reader refuses them (ErrFrameTooLarge, ErrNegativeLength).
	PrefaceJute Preface = iota
	// PrefaceFourLetterWord: one of ZooKeeper's four-letter words
	// (FourLetterWords), to be answered in plain text before closing.
	PrefaceFourLetterWord
	// PrefaceHTTP2: the start of the HTTP/2 client preface ("PRI "), as a
	// gRPC client sends it over plaintext.
	PrefaceHTTP2
	// PrefaceTLS: a TLS record of type handshake (first byte 0x16), the
	// start of a ClientHello.
	PrefaceTLS
)

// String returns the kind's name.
func (p Preface) String() string {
	switch p {
	case PrefaceJute:
		return "jute"
	case PrefaceFourLetterWord:
		return "four-letter word"
	case PrefaceHTTP2:
		return "HTTP/2"
	case PrefaceTLS:
		return "TLS"
	}
	return "Preface(?)"
}

// fourLetterWords are the words ZooKeeper 3.8/3.9 recognises
// (FourLetterCommands), whether or not its allow-list enables them.
var fourLetterWords = []string{
	"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "hash", "isro",
	"mntr", "ruok", "srst", "srvr", "stat", "stmk", "wchc", "wchp", "wchs",
}

// FourLetterWords returns the four-letter words ZooKeeper 3.8/3.9 knows, in
// alphabetical order: conf, cons, crst, dirs, dump, envi, gtmk, hash, isro,
// mntr, ruok, srst, srvr, stat, stmk, wchc, wchp, wchs. (ZooKeeper also
// recognises telnet's close sequence, 0xfff4fffd, and closes the
// connection; as a frame length it is negative.)
func FourLetterWords() []string { return append([]string(nil), fourLetterWords...) }

// http2Preface is the start of the HTTP/2 client connection preface
// ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").
var http2Preface = [4]byte{'P', 'R', 'I', ' '}

// FourLetterWord returns the word if the four bytes are one of
// FourLetterWords.
func FourLetterWord(b [4]byte) (string, bool) {
	for _, w := range fourLetterWords {
		if string(b[:]) == w {
			return w, true
		}
	}
	return "", false
}

// Classify tells from the first four bytes of a connection what it is. No
// ambiguity is possible with a sensible frame limit: as a length, every
// four-letter word, "PRI " and every TLS record start is over 300 MB.
func Classify(b [4]byte) Preface {
	switch {
	case b[0] == 0x16:
		return PrefaceTLS
	case b == http2Preface:
		return PrefaceHTTP2
	}
	if _, ok := FourLetterWord(b); ok {
		return PrefaceFourLetterWord
	}
	return PrefaceJute
}
