package jute

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the package returns matches exactly one of them
// with errors.Is; its text says which field or frame was wrong and why.
var (
	// ErrTruncated means the input ends inside a fixed-size field (an int,
	// a long or a boolean).
	ErrTruncated = errors.New("jute: truncated input")
	// ErrBadLength means a length prefix (of a buffer, a ustring or a vector)
	// is negative other than jute's -1 for null, or announces more than the
	// bytes left in the input.
	ErrBadLength = errors.New("jute: bad length")
	// ErrUnknownOp means a request's opcode is not one a ZooKeeper client
	// sends, so its body cannot be decoded.
	ErrUnknownOp = errors.New("jute: unknown opcode")
	// ErrBadMulti means a multi or multiRead request carries an op of a type
	// that kind of multi may not carry (or a create with an invalid mode), or
	// a multi response carries a result of an unknown type.
	ErrBadMulti = errors.New("jute: bad multi")

	// ErrFrameTooLarge means a frame's length prefix is over the caller's limit.
	ErrFrameTooLarge = errors.New("jute: frame too large")
	// ErrNegativeLength means a frame's length prefix is negative.
	ErrNegativeLength = errors.New("jute: negative frame length")
	// ErrTruncatedFrame means the stream ended inside a frame: within its
	// length prefix or before the number of bytes the prefix announced.
	ErrTruncatedFrame = errors.New("jute: truncated frame")
)

// codecError is an error with its own text that matches one sentinel.
type codecError struct {
	kind error
	msg  string
}

func (e *codecError) Error() string { return e.msg }
func (e *codecError) Unwrap() error { return e.kind }

// errorf returns an error matching kind whose text is "jute: " + the message.
func errorf(kind error, format string, args ...any) error {
	return &codecError{kind: kind, msg: "jute: " + fmt.Sprintf(format, args...)}
}

// within puts context in front of a jute error's message, keeping what it
// matches: "jute: getData request: ustring length ...".
func within(context string, err error) error {
	if err == nil {
		return nil
	}
	var ce *codecError
	if errors.As(err, &ce) {
		return &codecError{kind: ce.kind, msg: "jute: " + context + ": " + strings.TrimPrefix(ce.msg, "jute: ")}
	}
	return fmt.Errorf("jute: %s: %w", context, err)
}
