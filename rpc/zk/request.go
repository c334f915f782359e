package zk

import (
	"fmt"
	"strings"

	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/tree"
)

// This file turns ZooKeeper requests into engine requests, once.

// badRequest is a request the engine never sees: it is answered with code
// in its place among the replies.
type badRequest struct {
	code engine.Code
	msg  string
	// op is the op of a multi that was refused (-1: the request as a
	// whole): the multi is answered with per-op results, as ZooKeeper
	// answers an op its PrepRequestProcessor refuses. (ZooKeeper checks the
	// ops in order against the tree too, so when an earlier op would also
	// fail there it reports that one; coordd reports the refused op.)
	op int
}

func (b *badRequest) Error() string { return b.msg }

func bad(code engine.Code, format string, args ...any) *badRequest {
	return &badRequest{code: code, msg: fmt.Sprintf(format, args...), op: -1}
}

// createOf maps a create's mode to the engine's, checking it against the
// opcode that carried it as ZooKeeper's server does: createContainer needs
// the container mode, createTTL a TTL mode and a TTL, and the other creates
// neither.
func createOf(op jute.OpCode, path string, data []byte, acl []jute.ACL, mode jute.CreateMode, ttl int64) (engine.Request, *badRequest) {
	req := engine.Request{Op: engine.OpCreate, Path: path, Data: data, NullData: data == nil, ACL: aclOf(acl)}
	if !mode.Valid() {
		return req, bad(engine.BadArguments, "invalid create mode %d", int32(mode))
	}
	switch {
	case op == jute.OpCreateContainer && !mode.IsContainer(),
		op != jute.OpCreateContainer && mode.IsContainer():
		return req, bad(engine.BadArguments, "create mode %s needs createContainer, and createContainer needs it", mode)
	case op == jute.OpCreateTTL && !mode.IsTTL(),
		op != jute.OpCreateTTL && mode.IsTTL():
		return req, bad(engine.BadArguments, "create mode %s needs createTTL, and createTTL needs a TTL mode", mode)
	}
	// ZooKeeper's order: a path without a parent, then the ACL (an empty
	// one is InvalidACL; for the public API empty means open, so the
	// engine cannot tell), then everything else.
	if !strings.Contains(path, "/") || strings.Contains(path, "\x00") {
		return req, bad(engine.BadArguments, "invalid path %q", path)
	}
	if len(acl) == 0 {
		return req, bad(engine.InvalidACL, "a node needs at least one ACL entry")
	}
	req.Create.Sequential = mode.IsSequential()
	switch {
	case mode.IsEphemeral():
		req.Create.Kind = tree.Ephemeral
	case mode.IsContainer():
		req.Create.Kind = tree.Container
	case mode.IsTTL():
		req.Create.Kind, req.Create.TTL = tree.TTL, ttl
	}
	return req, nil
}

// writeOp maps one write op (alone or in a multi).
func writeOp(op jute.OpCode, rec jute.Record) (engine.Request, *badRequest) {
	switch x := rec.(type) {
	case *jute.CreateRequest:
		return createOf(op, x.Path, x.Data, x.ACL, x.Flags, 0)
	case *jute.CreateTTLRequest:
		return createOf(op, x.Path, x.Data, x.ACL, x.Flags, x.TTL)
	case *jute.DeleteRequest:
		return engine.Request{Op: engine.OpDelete, Path: x.Path, Version: x.Version}, nil
	case *jute.SetDataRequest:
		return engine.Request{Op: engine.OpSetData, Path: x.Path, Data: x.Data, NullData: x.Data == nil, Version: x.Version}, nil
	case *jute.CheckVersionRequest:
		return engine.Request{Op: engine.OpCheck, Path: x.Path, Version: x.Version}, nil
	}
	return engine.Request{}, bad(engine.BadArguments, "%s is not a write", op)
}

// requestOf maps a decoded request to the engine's.
func requestOf(h jute.RequestHeader, rec jute.Record) (engine.Request, *badRequest) {
	var req engine.Request
	var b *badRequest
	switch x := rec.(type) {
	case *jute.CreateRequest, *jute.CreateTTLRequest, *jute.DeleteRequest, *jute.SetDataRequest, *jute.CheckVersionRequest:
		req, b = writeOp(h.Type, rec)
	case *jute.ExistsRequest:
		req = engine.Request{Op: engine.OpExists, Path: x.Path, Watch: x.Watch}
	case *jute.GetDataRequest:
		req = engine.Request{Op: engine.OpGetData, Path: x.Path, Watch: x.Watch}
	case *jute.GetChildrenRequest:
		req = engine.Request{Op: engine.OpGetChildren, Path: x.Path, Watch: x.Watch}
	case *jute.GetChildren2Request:
		req = engine.Request{Op: engine.OpGetChildren, Path: x.Path, Watch: x.Watch}
	case *jute.SyncRequest:
		req = engine.Request{Op: engine.OpSync, Path: x.Path}
	case *jute.GetACLRequest:
		req = engine.Request{Op: engine.OpGetACL, Path: x.Path}
	case *jute.SetACLRequest:
		req = engine.Request{Op: engine.OpSetACL, Path: x.Path, Version: x.Version, ACL: aclOf(x.ACL)}
	case *jute.GetAllChildrenNumberRequest:
		req = engine.Request{Op: engine.OpGetAllChildrenNumber, Path: x.Path}
	case *jute.GetEphemeralsRequest:
		req = engine.Request{Op: engine.OpGetEphemerals, Path: x.PrefixPath}
	case *jute.CheckWatchesRequest:
		req = engine.Request{Op: engine.OpCheckWatches, Path: x.Path, WatcherType: engine.WatcherType(x.Type)}
	case *jute.RemoveWatchesRequest:
		req = engine.Request{Op: engine.OpRemoveWatches, Path: x.Path, WatcherType: engine.WatcherType(x.Type)}
	case *jute.SetWatches:
		req = engine.Request{Op: engine.OpSetWatches, Watches: engine.Watches{
			RelZxid: x.RelativeZxid, Data: x.DataWatches, Exist: x.ExistWatches, Child: x.ChildWatches, ListOrder: true}}
	case *jute.SetWatches2:
		req = engine.Request{Op: engine.OpSetWatches, Watches: engine.Watches{
			RelZxid: x.RelativeZxid, Data: x.DataWatches, Exist: x.ExistWatches, Child: x.ChildWatches,
			Persistent: x.PersistentWatches, PersistentRecursive: x.PersistentRecursiveWatches, ListOrder: true}}
	case *jute.AuthPacket:
		req = engine.Request{Op: engine.OpAddAuth, AuthScheme: x.Scheme, Auth: x.Auth}
	case *jute.ReconfigRequest:
		req = engine.Request{Op: engine.OpReconfig, Reconfig: engine.Reconfig{
			Joining: deref(x.JoiningServers), Leaving: deref(x.LeavingServers), NewMembers: deref(x.NewMembers), FromConfig: x.CurConfigID}}
	case *jute.MultiRequest:
		req = engine.Request{Op: engine.OpMulti, Ops: make([]engine.Request, 0, len(x.Ops))}
		for i, o := range x.Ops {
			sub, sb := writeOp(o.Type, o.Request)
			if sb != nil {
				sb.op = i
				return req, sb
			}
			req.Ops = append(req.Ops, sub)
		}
	case *jute.MultiReadRequest:
		req = engine.Request{Op: engine.OpMultiRead, Ops: make([]engine.Request, 0, len(x.Ops))}
		for _, o := range x.Ops {
			switch r := o.Request.(type) {
			case *jute.GetDataRequest:
				req.Ops = append(req.Ops, engine.Request{Op: engine.OpGetData, Path: r.Path, Watch: r.Watch})
			case *jute.GetChildrenRequest:
				req.Ops = append(req.Ops, engine.Request{Op: engine.OpGetChildren, Path: r.Path, Watch: r.Watch})
			default:
				return req, bad(engine.BadArguments, "%s may not be part of a multiRead", o.Type)
			}
		}
	case *jute.AddWatchRequest:
		switch x.Mode {
		case jute.AddWatchPersistent, jute.AddWatchPersistentRecursive:
		default:
			return req, bad(engine.BadArguments, "unknown addWatch mode %d", int32(x.Mode))
		}
		req = engine.Request{Op: engine.OpAddWatch, Path: x.Path, Recursive: x.Mode == jute.AddWatchPersistentRecursive}
	case *jute.Empty:
		switch h.Type {
		case jute.OpPing:
			req = engine.Request{Op: engine.OpPing}
		case jute.OpCloseSession:
			req = engine.Request{Op: engine.OpClose}
		case jute.OpWhoAmI:
			req = engine.Request{Op: engine.OpWhoAmI}
		}
	default:
		return req, bad(engine.Unimplemented, "operation %s is not supported", h.Type)
	}
	if b != nil {
		return req, b
	}
	req.Xid = int64(h.Xid)
	return req, nil
}

// aclOf converts an ACL from the wire.
func aclOf(acl []jute.ACL) []tree.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]tree.ACL, len(acl))
	for i, a := range acl {
		out[i] = tree.ACL{Perms: tree.Perms(a.Perms), Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return out
}

// aclToWire converts an ACL to the wire.
func aclToWire(acl []tree.ACL) []jute.ACL {
	out := make([]jute.ACL, len(acl))
	for i, a := range acl {
		out[i] = jute.ACL{Perms: jute.Perm(a.Perms), ID: jute.ID{Scheme: a.Scheme, ID: a.ID}}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
