package zk

import (
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/tree"
)

// This file turns engine replies and events into ZooKeeper frames, once.

// wireCode is a code as ZooKeeper's wire carries it: the engine's codes
// have ZooKeeper's numbers, except Unavailable (this server cannot serve
// now), which a ZooKeeper client knows as ConnectionLoss.
func wireCode(c engine.Code) jute.Code {
	if c == engine.Unavailable {
		return jute.CodeConnectionLoss
	}
	return jute.Code(c)
}

// statOf converts a stat (nil gives a zero stat, as ZooKeeper sends for
// nodes it has not got one for).
func statOf(s *tree.Stat) jute.Stat {
	if s == nil {
		return jute.Stat{}
	}
	return jute.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Pzxid: s.Pzxid,
	}
}

// createResult is a successful create's result as the opcode that asked
// for it reports it: create gives the path, create2, createContainer and
// createTTL the path and the stat.
func createResult(op jute.OpCode, r *engine.Response) jute.OpResult {
	if op == jute.OpCreate {
		return jute.OpResult{Type: jute.OpCreate, Path: r.Path}
	}
	return jute.OpResult{Type: jute.OpCreate2, Path: r.Path, Stat: statOf(r.Stat)}
}

// multiResults encodes a multi's results. A failed multi reports every op
// (ok-but-rolled-back, the failing op's error, RuntimeInconsistency after
// it: the engine's per-op codes) as error results, with the reply header's
// error left at OK, as ZooKeeper's server does.
func multiResults(ops []jute.OpCode, r *engine.Response) *jute.MultiResponse {
	out := &jute.MultiResponse{Results: make([]jute.OpResult, 0, len(r.Results))}
	for i := range r.Results {
		res := &r.Results[i]
		if r.Code != engine.OK {
			out.Results = append(out.Results, jute.ErrorResult(wireCode(res.Code)))
			continue
		}
		op := jute.OpError
		if i < len(ops) {
			op = ops[i]
		}
		switch op {
		case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
			out.Results = append(out.Results, createResult(op, res))
		case jute.OpSetData:
			out.Results = append(out.Results, jute.OpResult{Type: jute.OpSetData, Stat: statOf(res.Stat)})
		case jute.OpDelete, jute.OpCheck:
			out.Results = append(out.Results, jute.OpResult{Type: op})
		default:
			out.Results = append(out.Results, jute.ErrorResult(jute.CodeSystemError))
		}
	}
	return out
}

// multiReadResults encodes a multiRead's results: each op its data or
// children, or its own error.
func multiReadResults(r *engine.Response) *jute.MultiResponse {
	out := &jute.MultiResponse{Results: make([]jute.OpResult, 0, len(r.Results))}
	for i := range r.Results {
		res := &r.Results[i]
		switch {
		case res.Code != engine.OK:
			out.Results = append(out.Results, jute.ErrorResult(wireCode(res.Code)))
		case res.Op == engine.OpGetData:
			out.Results = append(out.Results, jute.OpResult{Type: jute.OpGetData, Data: res.Data, Stat: statOf(res.Stat)})
		default:
			out.Results = append(out.Results, jute.OpResult{Type: jute.OpGetChildren, Children: nonNil(res.Children)})
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// reply encodes a reply to a request of type p.op: its header and, when the
// request succeeded, its body.
func reply(dst []byte, p pending, r *engine.Response) []byte {
	h := jute.ReplyHeader{Xid: p.xid, Zxid: r.Zxid, Err: wireCode(r.Code)}
	var body jute.Encoder
	switch p.op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		if res := createResult(p.op, r); p.op == jute.OpCreate {
			body = &jute.CreateResponse{Path: res.Path}
		} else {
			body = &jute.Create2Response{Path: res.Path, Stat: res.Stat}
		}
	case jute.OpSetData, jute.OpCheck:
		body = &jute.SetDataResponse{Stat: statOf(r.Stat)}
	case jute.OpExists:
		if r.Code == engine.OK && r.Stat == nil {
			// ZooKeeper answers exists of an absent node with NoNode in
			// the header; its clients turn that into "no stat".
			h.Err = jute.CodeNoNode
		}
		body = &jute.ExistsResponse{Stat: statOf(r.Stat)}
	case jute.OpGetData, jute.OpReconfig:
		body = &jute.GetDataResponse{Data: r.Data, Stat: statOf(r.Stat)}
	case jute.OpGetChildren:
		body = &jute.GetChildrenResponse{Children: nonNil(r.Children)}
	case jute.OpGetChildren2:
		body = &jute.GetChildren2Response{Children: nonNil(r.Children), Stat: statOf(r.Stat)}
	case jute.OpSync:
		body = &jute.SyncResponse{Path: r.Path}
	case jute.OpGetACL:
		body = &jute.GetACLResponse{ACL: aclToWire(r.ACL), Stat: statOf(r.Stat)}
	case jute.OpSetACL:
		body = &jute.SetACLResponse{Stat: statOf(r.Stat)}
	case jute.OpGetAllChildrenNumber:
		body = &jute.GetAllChildrenNumberResponse{TotalNumber: int32(r.Count)}
	case jute.OpGetEphemerals:
		body = &jute.GetEphemeralsResponse{Ephemerals: nonNil(r.Children)}
	case jute.OpWhoAmI:
		w := &jute.WhoAmIResponse{ClientInfo: make([]jute.ClientInfo, 0, len(r.Identities))}
		for _, id := range r.Identities {
			w.ClientInfo = append(w.ClientInfo, jute.ClientInfo{AuthScheme: id.Scheme, User: id.ID})
		}
		body = w
	case jute.OpAddWatch:
		body = &jute.ErrorResponse{} // ZooKeeper's addWatch reply carries a 0
	case jute.OpSASL:
		body = &jute.SetSASLResponse{Token: p.saslToken}
	case jute.OpMulti:
		body = multiResults(p.ops, r)
	case jute.OpMultiRead:
		body = multiReadResults(r)
	}
	if p.op == jute.OpMulti && h.Err != jute.CodeOK {
		// A multi that failed in one of its ops is answered as ZooKeeper's
		// FinalRequestProcessor answers it: header error 0 and every op's
		// result (ok-rolled-back, the failing op's error,
		// RuntimeInconsistency after it). Kafka and Curator read them. Only
		// a multi that failed as a whole (the connection, the session, a
		// limit of this server) has its error in the header.
		switch {
		case len(r.Results) > 0:
			h.Err = jute.CodeOK
		case p.badOp >= 0 && r.Code != engine.Unavailable:
			h.Err = jute.CodeOK
			body = &jute.MultiResponse{Results: jute.FailedMultiResults(len(p.ops), p.badOp, wireCode(r.Code))}
		}
	}
	if h.Err != jute.CodeOK {
		body = nil // clients read no body after an error
		if p.op == jute.OpSASL {
			body = &jute.SetSASLResponse{} // ZooKeeper sends a null token all the same
		}
	}
	return jute.AppendFrame(dst, &h, body)
}

// notification encodes a watch event. One whose zxid is unknown (a
// NodeDeleted fired by setWatches) carries -1, ZooKeeper's NO_ZXID.
func notification(dst []byte, ev *engine.Event) []byte {
	zxid := ev.Zxid
	if zxid == 0 {
		zxid = -1
	}
	return jute.AppendFrame(dst,
		&jute.ReplyHeader{Xid: jute.XidNotification, Zxid: zxid},
		&jute.WatcherEvent{Type: jute.EventType(ev.Type), State: jute.StateSyncConnected, Path: ev.Path})
}
