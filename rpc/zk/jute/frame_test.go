package jute

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

func frameOf(n int32, payload []byte) []byte {
	b := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return append(b, payload...)
}

func TestReadFrame(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 3*frameChunk+5)
	tests := []struct {
		name  string
		in    []byte
		limit int
		want  []byte
		err   error
		msg   string
	}{
		{name: "frame", in: frameOf(3, []byte("abc")), limit: 10, want: []byte("abc")},
		{name: "empty frame", in: frameOf(0, nil), limit: 10, want: []byte{}},
		{name: "exactly the limit", in: frameOf(4, []byte("abcd")), limit: 4, want: []byte("abcd")},
		{name: "large frame", in: frameOf(int32(len(big)), big), limit: DefaultMaxBuffer, want: big},
		{name: "clean end", in: nil, limit: 10, err: io.EOF},
		{name: "over the limit", in: frameOf(5, []byte("abcde")), limit: 4, err: ErrFrameTooLarge,
			msg: "jute: frame length 5 exceeds the limit of 4 bytes"},
		{name: "four-letter word as a length", in: []byte("ruok"), limit: DefaultMaxBuffer, err: ErrFrameTooLarge},
		{name: "negative", in: frameOf(-1, nil), limit: 10, err: ErrNegativeLength,
			msg: "jute: frame length -1 is negative"},
		{name: "telnet close", in: []byte{0xff, 0xf4, 0xff, 0xfd}, limit: 10, err: ErrNegativeLength},
		{name: "short prefix", in: []byte{0, 0}, limit: 10, err: ErrTruncatedFrame,
			msg: "jute: stream ends inside a frame's length prefix"},
		{name: "short payload", in: frameOf(5, []byte("ab")), limit: 10, err: ErrTruncatedFrame,
			msg: "jute: stream ends after 2 of the frame's 5 bytes"},
		{name: "short large payload", in: frameOf(int32(len(big)), big[:frameChunk+1]), limit: DefaultMaxBuffer, err: ErrTruncatedFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time, as a slow peer sends them.
			got, err := ReadFrame(iotest.OneByteReader(bytes.NewReader(tc.in)), tc.limit)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || got != nil {
					t.Fatalf("got %d bytes, err %v; want %v", len(got), err, tc.err)
				}
				if tc.msg != "" && err.Error() != tc.msg {
					t.Errorf("message %q, want %q", err, tc.msg)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("got %d bytes, err %v", len(got), err)
			}
		})
	}
}

func TestReadFrameSequence(t *testing.T) {
	in := append(frameOf(1, []byte("a")), frameOf(2, []byte("bc"))...)
	r := bytes.NewReader(in)
	for _, want := range []string{"a", "bc"} {
		got, err := ReadFrame(r, 10)
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if _, err := ReadFrame(r, 10); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadFramePassesOtherErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := ReadFrame(iotest.ErrReader(boom), 10); err != boom {
		t.Errorf("prefix: %v", err)
	}
	r := io.MultiReader(bytes.NewReader(frameOf(5, []byte("ab"))), iotest.ErrReader(boom))
	if _, err := ReadFrame(r, 10); err != boom {
		t.Errorf("payload: %v", err)
	}
}

// A peer that announces a large frame and sends little costs little memory.
func TestReadFrameMemoryFollowsTheBytesSent(t *testing.T) {
	in := frameOf(DefaultMaxBuffer, []byte("tiny"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := ReadFrame(bytes.NewReader(in), DefaultMaxBuffer); !errors.Is(err, ErrTruncatedFrame) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 10*2*frameChunk {
		t.Errorf("10 announced frames of 1 MiB carrying 4 bytes each allocated %d bytes", d)
	}
}

func TestAppendFrame(t *testing.T) {
	got := AppendFrame([]byte{9}, &RequestHeader{Xid: XidPing, Type: OpPing}, nil)
	want := []byte{9, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
	if got := AppendFrame(nil); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Fatalf("empty frame % x", got)
	}
}

func TestClassify(t *testing.T) {
	words := FourLetterWords()
	if len(words) != 18 {
		t.Errorf("%d words: %v", len(words), words)
	}
	for _, w := range words {
		b := [4]byte([]byte(w))
		if Classify(b) != PrefaceFourLetterWord {
			t.Errorf("%q classifies as %v", w, Classify(b))
		}
		if got, ok := FourLetterWord(b); !ok || got != w {
			t.Errorf("FourLetterWord(%q) = %q, %v", w, got, ok)
		}
	}
	words[0] = "xxxx"
	if FourLetterWords()[0] != "conf" {
		t.Error("FourLetterWords shares its slice")
	}
	tests := []struct {
		in   [4]byte
		want Preface
	}{
		{[4]byte{0, 0, 0, 44}, PrefaceJute},         // go-zookeeper's ConnectRequest
		{[4]byte{0, 0, 0, 45}, PrefaceJute},         // the Java client's
		{[4]byte{0, 0x0f, 0xff, 0xff}, PrefaceJute}, // jute.maxbuffer
		{[4]byte{'P', 'R', 'I', ' '}, PrefaceHTTP2},
		{[4]byte{0x16, 0x03, 0x01, 0x02}, PrefaceTLS}, // TLS 1.0 record header of a ClientHello
		{[4]byte{0x16, 0x03, 0x03, 0x00}, PrefaceTLS},
		{[4]byte{'G', 'E', 'T', ' '}, PrefaceJute}, // an absurd length; ReadFrame refuses it
		{[4]byte{'R', 'U', 'O', 'K'}, PrefaceJute}, // words are lower case
		{[4]byte{0xff, 0xf4, 0xff, 0xfd}, PrefaceJute},
	}
	for _, tc := range tests {
		if got := Classify(tc.in); got != tc.want {
			t.Errorf("Classify(% x) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for p, s := range map[Preface]string{PrefaceJute: "jute", PrefaceFourLetterWord: "four-letter word", PrefaceHTTP2: "HTTP/2", PrefaceTLS: "TLS", Preface(9): "Preface(?)"} {
		if p.String() != s {
			t.Errorf("%d prints %q", p, p.String())
		}
	}
}
