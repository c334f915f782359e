package main

import "strings"

// startError is how coordd says why it cannot start (or stop) cleanly.
// rpc's errors carry the package prefix Go's style asks of a library
// ("rpc: client address 127.0.0.1:2181: listen tcp ...: address already in
// use"); to someone starting a server it names nothing they know, so it goes
// here, at the edge, wherever it stands in the chain of wrapped errors.
func startError(err error) string {
	s := strings.TrimPrefix(err.Error(), "rpc: ")
	return strings.ReplaceAll(s, ": rpc: ", ": ")
}
