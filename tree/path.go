package tree

import (
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// MaxPathLength is the longest path, in bytes, that ValidatePath accepts
// (ZooKeeper's own bound is its 1 MiB request size limit). It also bounds
// path lengths read from a snapshot.
const MaxPathLength = 1 << 20

// ValidatePath reports whether path is a valid znode path by ZooKeeper's
// rules (PathUtils.validatePath): it is non-empty, starts with '/', does not
// end with '/' (except the root "/"), has no empty, "." or ".." components,
// and contains no NUL, no U+0001–U+001F, U+007F–U+009F, U+D800–U+F8FF or
// U+FFF0–U+FFFF. It must also be valid UTF-8, contain no character above
// U+FFFF (ZooKeeper sees those as surrogate pairs, which it rejects), and be
// at most MaxPathLength bytes long. The error wraps ErrBadArguments and
// gives the reason.
func ValidatePath(path string) error {
	if path == "" {
		return badPath("path must not be empty", path)
	}
	if len(path) > MaxPathLength {
		return fmt.Errorf("%w: path length %d exceeds limit %d", ErrBadArguments, len(path), MaxPathLength)
	}
	if path[0] != '/' {
		return badPath("path must start with /", path)
	}
	if len(path) == 1 {
		return nil
	}
	if path[len(path)-1] == '/' {
		return badPath("path must not end with /", path)
	}
	start := 1 // start of the current component
	for i := 1; i < len(path); {
		c := path[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '/':
				if i == start {
					return badPath(fmt.Sprintf("empty node name @%d", i), path)
				}
				if isRelative(path[start:i]) {
					return badPath(fmt.Sprintf("relative paths not allowed @%d", start), path)
				}
				start = i + 1
			case c == 0:
				return badPath(fmt.Sprintf("null character not allowed @%d", i), path)
			case c < 0x20 || c == 0x7f:
				return badPath(fmt.Sprintf("invalid character @%d", i), path)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(path[i:])
		if r == utf8.RuneError && size == 1 {
			return badPath(fmt.Sprintf("invalid UTF-8 @%d", i), path)
		}
		if r <= 0x9f || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
			return badPath(fmt.Sprintf("invalid character @%d", i), path)
		}
		i += size
	}
	if isRelative(path[start:]) {
		return badPath(fmt.Sprintf("relative paths not allowed @%d", start), path)
	}
	return nil
}

func isRelative(component string) bool { return component == "." || component == ".." }

func badPath(reason, path string) error {
	return fmt.Errorf("%w: %s: %q", ErrBadArguments, reason, path)
}

// parentOf returns the parent path of a valid non-root path (or of a
// sequential prefix such as "/p/").
func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// keyOf returns the btree key of a path that starts with '/': the path with
// its last '/' replaced by NUL, i.e. parent+"\x00"+name where the root's
// children use the empty parent. The root "/" becomes "\x00". Sorting keys
// bytewise puts a node's direct children in one contiguous run, sorted by
// name, and every node after its parent.
func keyOf(path string) string {
	b := appendKey(make([]byte, 0, len(path)), path)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendKey appends the key of a path that starts with '/' (see keyOf).
func appendKey(b []byte, path string) []byte {
	i := strings.LastIndexByte(path, '/')
	b = append(b, path[:i]...)
	b = append(b, 0)
	return append(b, path[i+1:]...)
}

// childPrefix returns the key prefix shared by the direct children of the
// node at path.
func childPrefix(path string) string {
	if path == "/" {
		return "\x00"
	}
	return path + "\x00"
}

// rootKey is the key of "/".
const rootKey = "\x00"

// appendPath appends the path a key stands for.
func appendPath(b []byte, key string) []byte {
	i := strings.IndexByte(key, 0)
	b = append(b, key...)
	b[len(b)-len(key)+i] = '/'
	return b
}

// pathOf returns the path a key stands for.
func pathOf(key string) string {
	return string(appendPath(make([]byte, 0, len(key)), key))
}
