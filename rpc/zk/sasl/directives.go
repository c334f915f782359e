package sasl

import (
	"errors"
	"fmt"
	"strings"
)

// ErrMalformed is the error of a client token that breaks DIGEST-MD5's
// syntax or rules; its message says how.
var ErrMalformed = errors.New("sasl: malformed DIGEST-MD5 response")

// maxResponse bounds a digest-response: RFC 2831 keeps it under 4096
// bytes.
const maxResponse = 4096

// parseDirectives reads a DIGEST-MD5 digest-response (RFC 2831 2.1.2): a
// comma-separated list of KEY=VALUE, a value a token or a quoted string
// (a backslash quotes the next byte), white space allowed around the
// separators and empty elements skipped. Keys are returned lower case;
// a key given twice is an error, as RFC 2831 says each appears at most
// once. Values are the bytes as sent.
func parseDirectives(b []byte) (map[string][]byte, error) {
	if len(b) > maxResponse {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(b), maxResponse)
	}
	out := make(map[string][]byte)
	i := 0
	skipSpace := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(b) {
			return out, nil
		}
		if b[i] == ',' {
			i++
			continue
		}
		start := i
		for i < len(b) && b[i] != '=' && b[i] != ',' && b[i] > ' ' && b[i] != '"' {
			i++
		}
		key := strings.ToLower(string(b[start:i]))
		skipSpace()
		if key == "" || i >= len(b) || b[i] != '=' {
			return nil, fmt.Errorf("%w: expected KEY=VALUE at byte %d", ErrMalformed, start)
		}
		i++ // =
		skipSpace()
		var val []byte
		if i < len(b) && b[i] == '"' {
			i++
			val = []byte{}
			for {
				if i >= len(b) {
					return nil, fmt.Errorf("%w: the value of %s has no closing quote", ErrMalformed, short(key))
				}
				c := b[i]
				i++
				if c == '"' {
					break
				}
				if c == '\\' {
					if i >= len(b) {
						return nil, fmt.Errorf("%w: the value of %s has no closing quote", ErrMalformed, short(key))
					}
					c = b[i]
					i++
				}
				val = append(val, c)
			}
		} else {
			vs := i
			for i < len(b) && b[i] != ',' && b[i] > ' ' && b[i] != '"' {
				i++
			}
			val = b[vs:i]
		}
		skipSpace()
		if i < len(b) && b[i] != ',' {
			return nil, fmt.Errorf("%w: expected a comma after the value of %s at byte %d", ErrMalformed, short(key), i)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%w: %s is given twice", ErrMalformed, short(key))
		}
		out[key] = val
	}
}
