package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/coordd/coordd/client"
)

// TestNodeErrorNamesPathOnce checks the text of an error about a node for
// each way a server's message may repeat the path.
func TestNodeErrorNamesPathOnce(t *testing.T) {
	cases := []struct {
		path string
		err  error
		want string
	}{
		{"/app", fmt.Errorf("%w: /app", client.ErrNotEmpty), "/app: node has children"},
		{"/a", fmt.Errorf("%w: /a has version 1, not 0", client.ErrBadVersion), "/a: version does not match: it has version 1, not 0"},
		{"/a/b/c", fmt.Errorf("%w: parent of /a/b/c", client.ErrNoNode), "/a/b/c: parent node /a/b does not exist"},
		{"/a", fmt.Errorf("%w: parent of /a", client.ErrNoNode), "/a: parent node / does not exist"},
		{"a", fmt.Errorf("%w: path must start with /: %q", client.ErrBadArguments, "a"), "a: bad arguments: path must start with /"},
		{"/s", fmt.Errorf("%w: /s needs READ", client.ErrNoAuth), "/s: not authorized: it needs READ"},
		{"/x", client.ErrNoNode, "/x: node does not exist"},
		{"/x", fmt.Errorf("%w: data length 9 exceeds limit 8", client.ErrBadArguments), "/x: bad arguments: data length 9 exceeds limit 8"},
		{"/x", errors.New("something else: /x"), "/x: something else: /x"},
	}
	for _, tc := range cases {
		err := nodeError(tc.path, tc.err)
		if got := errText(err); got != tc.want {
			t.Errorf("nodeError(%q, %q) reads %q, want %q", tc.path, tc.err, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("nodeError(%q, %q) does not wrap the error", tc.path, tc.err)
		}
	}
}
