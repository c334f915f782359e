package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/coordd/coordd/client"
)

// How coordctl reports an error: on stderr, as "coordctl: <message>" or,
// when the command asked for -o json, as one JSON object,
//
//	{"error": {"code": "NoNode", "message": "/a: node does not exist"}}
//
// with "servers" added when no server could be used. The exit status is 2
// for a usage error, 3 when status finds the cluster unhealthy, else 1 (or
// the status of lock's and elect's CMD).

// errorJSON is the JSON form of an error.
type errorJSON struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Servers []serverFailure `json:"servers,omitempty"`
}

// cliError is a failure of coordctl's own, with its code and exit status.
type cliError struct {
	code   string
	status int
	msg    string
}

func (e *cliError) Error() string { return e.msg }

// exitUnhealthy is the exit status of status when a member is unreachable
// or there is no leader.
const exitUnhealthy = 3

// errCodes names the client's sentinel errors as ZooKeeper names its codes
// (KeeperException.Code). ErrOutcomeUnknown comes first: errors matching it
// also match ErrSessionExpired or ErrClosed.
var errCodes = []struct {
	err  error
	code string
}{
	{client.ErrOutcomeUnknown, "OutcomeUnknown"},
	{client.ErrNoNode, "NoNode"},
	{client.ErrNodeExists, "NodeExists"},
	{client.ErrBadVersion, "BadVersion"},
	{client.ErrNotEmpty, "NotEmpty"},
	{client.ErrNoChildrenForEphemerals, "NoChildrenForEphemerals"},
	{client.ErrBadArguments, "BadArguments"},
	{client.ErrRuntimeInconsistency, "RuntimeInconsistency"},
	{client.ErrSessionExpired, "SessionExpired"},
	{client.ErrAuthFailed, "AuthFailed"},
	{client.ErrNoAuth, "NoAuth"},
	{client.ErrInvalidACL, "InvalidACL"},
	{client.ErrNoWatcher, "NoWatcher"},
	{client.ErrUnimplemented, "Unimplemented"},
	{client.ErrSystemError, "SystemError"},
	{client.ErrMarshalling, "MarshallingError"},
	{client.ErrConnectionLoss, "ConnectionLoss"},
	{client.ErrOperationTimeout, "OperationTimeout"},
	{client.ErrUnavailable, "Unavailable"},
	{client.ErrClosed, "Closed"},
}

// errCode is err's code in the JSON form.
func errCode(err error) string {
	var (
		ue *usageError
		ce *connectError
		me *cliError
	)
	switch {
	case errors.As(err, &ue):
		return "Usage"
	case errors.As(err, &ce):
		return "ConnectionFailed"
	case errors.As(err, &me):
		return me.code
	}
	for _, c := range errCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	case errors.Is(err, context.Canceled):
		return "Interrupted"
	}
	return "Error"
}

// report prints err as coordctl reports errors and returns the exit status.
func (c *cli) report(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errHelp) {
		return 0
	}
	status := 1
	var (
		xs *exitStatusError
		ue *usageError
		me *cliError
	)
	switch {
	case errors.As(err, &xs):
		status = xs.code
		if xs.msg == "" {
			return status
		}
	case errors.As(err, &ue):
		status = 2
	case errors.As(err, &me):
		status = me.status
	}
	c.printError(err, c.errJSON)
	return status
}

// printError prints err on stderr, as JSON or as text.
func (c *cli) printError(err error, asJSON bool) {
	var ue *usageError
	errors.As(err, &ue)
	if asJSON {
		body := errorBody{Code: errCode(err), Message: errText(err)}
		var ce *connectError
		if errors.As(err, &ce) {
			body.Message = ce.headline()
			body.Servers = ce.servers
		}
		if ue != nil {
			body.Message = ue.msg
		}
		b, _ := json.Marshal(errorJSON{Error: body})
		c.stderr.Write(append(b, '\n'))
		return
	}
	if ue != nil {
		// One write, so that a shell prompt is redrawn only once.
		var b strings.Builder
		fmt.Fprintf(&b, "coordctl: %s\n", ue.msg)
		help := "coordctl help"
		if c.inShell {
			help = "help"
		}
		if ue.verb == "" {
			fmt.Fprintf(&b, "Run '%s' for usage.\n", help)
		} else if v := lookupVerb(ue.verb); v != nil {
			fmt.Fprintf(&b, "usage: %s\n", v.synopsis)
			fmt.Fprintf(&b, "Run '%s %s' for details.\n", help, v.name)
		}
		io.WriteString(c.stderr, b.String())
		return
	}
	fmt.Fprintf(c.stderr, "coordctl: %s\n", errText(err))
}

// wantsJSON reports whether a command line asks for -o json (so that even
// an error in parsing it is reported as JSON). It stops at "--", after
// which lock's and elect's CMD begins.
func wantsJSON(args []string) bool {
	json := false
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "o" && name != "output") {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				continue
			}
			val = args[i+1]
		}
		json = val == "json"
	}
	return json
}

// pathError is the failure of an operation on one node. Its text names the
// node once: the server's own message, which often repeats the path ("node
// has children: /app", "/a has version 1, not 0"), is said without it.
type pathError struct {
	path string
	err  error
}

// nodeError is err, a failure of an operation on path, for the user.
func nodeError(path string, err error) error { return &pathError{path: path, err: err} }

func (e *pathError) Unwrap() error { return e.err }

func (e *pathError) Error() string {
	text := e.err.Error()
	for _, c := range errCodes {
		if errors.Is(e.err, c.err) {
			if detail, ok := strings.CutPrefix(text, c.err.Error()+": "); ok {
				text = aboutPath(e.path, c.err, detail)
			}
			break
		}
	}
	return e.path + ": " + text
}

// aboutPath says what sentinel and a server's detail say about path,
// without repeating the path: "/a" goes, "/a has version 1, not 0" becomes
// "it has version 1, not 0", `path must start with /: "a"` loses its
// quoted path, and "parent of /a/b" (the parent is missing) is said as
// "parent node /a does not exist".
func aboutPath(path string, sentinel error, detail string) string {
	what := sentinel.Error()
	quoted := ": " + strconv.Quote(path)
	switch {
	case detail == path:
		return what
	case sentinel == client.ErrNoNode && detail == "parent of "+path:
		return "parent node " + parentOf(path) + " does not exist"
	case strings.HasPrefix(detail, path+" "):
		return what + ": it" + detail[len(path):]
	case strings.HasSuffix(detail, quoted):
		return what + ": " + strings.TrimSuffix(detail, quoted)
	}
	return what + ": " + detail
}

// parentOf is the parent of a node's path.
func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// errText renders an error for a human: package prefixes ("client: ",
// "lockrecipe: ", ...) are dropped, and so is a server message that repeats
// the error's own text ("node does not exist: node does not exist").
func errText(err error) string {
	s := err.Error()
	for _, p := range []string{"client: ", "lockrecipe: ", "tree: ", "fsm: ", "rpc: ", "session: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	for {
		parts := strings.Split(s, ": ")
		changed := false
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == parts[i+1] {
				parts = append(parts[:i+1], parts[i+2:]...)
				changed = true
				break
			}
		}
		s = strings.Join(parts, ": ")
		if !changed {
			break
		}
	}
	return s
}
