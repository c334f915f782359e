package grpcapi

import (
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/tree"
)

// This file maps between the public API and the engine, once in each
// direction.

// codeToAPI maps an engine code to the public API's (ZooKeeper's absolute
// numbers; coordd's Unavailable is 200).
func codeToAPI(c engine.Code) apipb.ErrorCode {
	if c == engine.Unavailable {
		return apipb.ErrorCode_UNAVAILABLE
	}
	return apipb.ErrorCode(-int32(c))
}

// statToAPI converts a stat (nil stays nil).
func statToAPI(s *tree.Stat) *apipb.Stat {
	if s == nil {
		return nil
	}
	return &apipb.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Kind: apipb.NodeKind(s.Kind), TtlMs: s.TTL,
	}
}

// withLockDelay sets a stat's lock-delay (a kept node's release time).
func withLockDelay(s *apipb.Stat, until int64) *apipb.Stat {
	if s != nil {
		s.LockDelayUntilMs = until
	}
	return s
}

func createOf(c *apipb.CreateRequest) engine.Request {
	return engine.Request{Op: engine.OpCreate, Path: c.Path, Data: c.Data, ACL: aclOf(c.Acl),
		Create: engine.Create{Kind: tree.Kind(c.Kind), Sequential: c.Sequential, TTL: c.TtlMs}}
}

// aclOf converts an ACL from the public API.
func aclOf(acl []*apipb.ACL) []tree.ACL {
	if len(acl) == 0 {
		return nil
	}
	out := make([]tree.ACL, len(acl))
	for i, a := range acl {
		out[i] = tree.ACL{Perms: tree.Perms(a.Perms), Scheme: a.Scheme, ID: a.Id}
	}
	return out
}

// aclToAPI converts an ACL to the public API.
func aclToAPI(acl []tree.ACL) []*apipb.ACL {
	out := make([]*apipb.ACL, len(acl))
	for i, a := range acl {
		out[i] = &apipb.ACL{Perms: int32(a.Perms), Scheme: a.Scheme, Id: a.ID}
	}
	return out
}

// watcherType maps the public API's watch kinds to ZooKeeper's.
var watcherType = map[apipb.WatchKind]engine.WatcherType{
	apipb.WatchKind_WATCH_ANY:                  engine.WatchAny,
	apipb.WatchKind_WATCH_DATA:                 engine.WatchData,
	apipb.WatchKind_WATCH_CHILD:                engine.WatchChildren,
	apipb.WatchKind_WATCH_PERSISTENT:           engine.WatchPersistent,
	apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE: engine.WatchPersistentRecursive,
}

// watcherTypeOf maps a watch kind; an unknown one gives a type the watch
// table refuses (MarshallingError, as ZooKeeper answers it).
func watcherTypeOf(k apipb.WatchKind) engine.WatcherType {
	if t, ok := watcherType[k]; ok {
		return t
	}
	return engine.WatcherType(-1)
}

// requestOf converts a request; ok is false for one without an operation.
func requestOf(r *apipb.Request) (req engine.Request, ok bool) {
	switch op := r.Op.(type) {
	case *apipb.Request_Create:
		req = createOf(op.Create)
	case *apipb.Request_Delete:
		req = engine.Request{Op: engine.OpDelete, Path: op.Delete.Path, Version: op.Delete.Version}
	case *apipb.Request_SetData:
		req = engine.Request{Op: engine.OpSetData, Path: op.SetData.Path, Data: op.SetData.Data, Version: op.SetData.Version}
	case *apipb.Request_GetData:
		req = engine.Request{Op: engine.OpGetData, Path: op.GetData.Path, Watch: op.GetData.Watch}
	case *apipb.Request_Exists:
		req = engine.Request{Op: engine.OpExists, Path: op.Exists.Path, Watch: op.Exists.Watch}
	case *apipb.Request_GetChildren:
		req = engine.Request{Op: engine.OpGetChildren, Path: op.GetChildren.Path, Watch: op.GetChildren.Watch}
	case *apipb.Request_Sync:
		req = engine.Request{Op: engine.OpSync, Path: op.Sync.Path}
	case *apipb.Request_Multi:
		req = engine.Request{Op: engine.OpMulti, Ops: make([]engine.Request, 0, len(op.Multi.Ops))}
		for _, o := range op.Multi.Ops {
			var sub engine.Request
			switch x := o.Op.(type) {
			case *apipb.MultiOp_Create:
				sub = createOf(x.Create)
			case *apipb.MultiOp_Delete:
				sub = engine.Request{Op: engine.OpDelete, Path: x.Delete.Path, Version: x.Delete.Version}
			case *apipb.MultiOp_SetData:
				sub = engine.Request{Op: engine.OpSetData, Path: x.SetData.Path, Data: x.SetData.Data, Version: x.SetData.Version}
			case *apipb.MultiOp_Check:
				sub = engine.Request{Op: engine.OpCheck, Path: x.Check.Path, Version: x.Check.Version}
			default:
				// An op with no body: a check of no path, which fails
				// cleanly with BadArguments and fails the multi.
				sub = engine.Request{Op: engine.OpCheck}
			}
			req.Ops = append(req.Ops, sub)
		}
	case *apipb.Request_Ping:
		req = engine.Request{Op: engine.OpPing}
	case *apipb.Request_Close:
		req = engine.Request{Op: engine.OpClose}
	case *apipb.Request_RemoveWatches:
		req = engine.Request{Op: engine.OpRemoveWatches, Path: op.RemoveWatches.Path, WatcherType: watcherTypeOf(op.RemoveWatches.Kind)}
	case *apipb.Request_CheckWatches:
		req = engine.Request{Op: engine.OpCheckWatches, Path: op.CheckWatches.Path, WatcherType: watcherTypeOf(op.CheckWatches.Kind)}
	case *apipb.Request_AddWatch:
		req = engine.Request{Op: engine.OpAddWatch, Path: op.AddWatch.Path, Recursive: op.AddWatch.Recursive}
	case *apipb.Request_GetAcl:
		req = engine.Request{Op: engine.OpGetACL, Path: op.GetAcl.Path}
	case *apipb.Request_SetAcl:
		req = engine.Request{Op: engine.OpSetACL, Path: op.SetAcl.Path, ACL: aclOf(op.SetAcl.Acl), Version: op.SetAcl.Version}
	case *apipb.Request_AddAuth:
		req = engine.Request{Op: engine.OpAddAuth, AuthScheme: op.AddAuth.Scheme, Auth: op.AddAuth.Auth}
	case *apipb.Request_WhoAmI:
		req = engine.Request{Op: engine.OpWhoAmI}
	default:
		return engine.Request{Xid: r.Xid}, false
	}
	req.Xid, req.LowestPendingXid = r.Xid, r.LowestPendingXid
	return req, true
}

// responseToAPI converts a reply; the result is set only on success (a
// multi's results always).
func responseToAPI(r *engine.Response) *apipb.Response {
	out := &apipb.Response{Xid: r.Xid, Zxid: r.Zxid, Error: codeToAPI(r.Code), Message: r.Message}
	if r.Code != engine.OK && r.Op != engine.OpMulti {
		return out
	}
	switch r.Op {
	case engine.OpCreate:
		out.Result = &apipb.Response_Create{Create: &apipb.CreateResponse{Path: r.Path, Stat: statToAPI(r.Stat)}}
	case engine.OpSetData:
		out.Result = &apipb.Response_SetData{SetData: &apipb.SetDataResponse{Stat: statToAPI(r.Stat)}}
	case engine.OpGetData:
		out.Result = &apipb.Response_GetData{GetData: &apipb.GetDataResponse{Data: r.Data, Stat: withLockDelay(statToAPI(r.Stat), r.LockDelayUntil)}}
	case engine.OpExists:
		out.Result = &apipb.Response_Exists{Exists: &apipb.ExistsResponse{Stat: withLockDelay(statToAPI(r.Stat), r.LockDelayUntil)}}
	case engine.OpGetChildren:
		out.Result = &apipb.Response_GetChildren{GetChildren: &apipb.GetChildrenResponse{Children: r.Children, Stat: statToAPI(r.Stat)}}
	case engine.OpSync:
		out.Result = &apipb.Response_Sync{Sync: &apipb.SyncResponse{Path: r.Path}}
	case engine.OpGetACL:
		out.Result = &apipb.Response_GetAcl{GetAcl: &apipb.GetACLResponse{Acl: aclToAPI(r.ACL), Stat: statToAPI(r.Stat)}}
	case engine.OpSetACL:
		out.Result = &apipb.Response_SetAcl{SetAcl: &apipb.SetACLResponse{Stat: statToAPI(r.Stat)}}
	case engine.OpWhoAmI:
		w := &apipb.WhoAmIResponse{Identities: make([]*apipb.Identity, 0, len(r.Identities))}
		for _, id := range r.Identities {
			w.Identities = append(w.Identities, &apipb.Identity{Scheme: id.Scheme, Id: id.ID})
		}
		out.Result = &apipb.Response_WhoAmI{WhoAmI: w}
	case engine.OpMulti:
		m := &apipb.MultiResponse{Results: make([]*apipb.MultiResult, 0, len(r.Results))}
		for i := range r.Results {
			res := &r.Results[i]
			m.Results = append(m.Results, &apipb.MultiResult{Error: codeToAPI(res.Code), Path: res.Path, Stat: statToAPI(res.Stat)})
		}
		out.Result = &apipb.Response_Multi{Multi: m}
	}
	return out
}

func eventToAPI(ev *engine.Event) *apipb.WatchEvent {
	return &apipb.WatchEvent{Type: apipb.EventType(ev.Type), Path: ev.Path, Zxid: ev.Zxid, Kinds: uint32(ev.Kinds)}
}
