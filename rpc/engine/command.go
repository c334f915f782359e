package engine

import (
	"fmt"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// This file is the boundary between requests and the replicated command
// set: a write becomes a cmdpb.Write, and its cmdpb.Result becomes a
// Response, here and nowhere else.

func createToCmd(r *Request) *cmdpb.Create {
	return &cmdpb.Create{Path: r.Path, Data: r.Data, NullData: r.NullData, Kind: cmdpb.Kind(r.Create.Kind), Sequential: r.Create.Sequential, TtlMs: r.Create.TTL, Acl: fsm.ACLToPB(r.ACL)}
}

// opToCmd converts one write operation (of a multi, or alone).
func opToCmd(r *Request) (*cmdpb.Op, error) {
	switch r.Op {
	case OpCreate:
		return &cmdpb.Op{Op: &cmdpb.Op_Create{Create: createToCmd(r)}}, nil
	case OpDelete:
		return &cmdpb.Op{Op: &cmdpb.Op_Delete{Delete: &cmdpb.Delete{Path: r.Path, Version: r.Version}}}, nil
	case OpSetData:
		return &cmdpb.Op{Op: &cmdpb.Op_SetData{SetData: &cmdpb.SetData{Path: r.Path, Data: r.Data, NullData: r.NullData, Version: r.Version}}}, nil
	case OpCheck:
		return &cmdpb.Op{Op: &cmdpb.Op_Check{Check: &cmdpb.Check{Path: r.Path, Version: r.Version}}}, nil
	}
	return nil, fmt.Errorf("%s is not a write a multi may hold", r.Op)
}

// writeToCmd converts a write request of session sess that came on a
// connection with identities conn (which the write's ACL checks use).
func writeToCmd(sess int64, conn auth.Conn, r *Request) (*cmdpb.Write, error) {
	w := &cmdpb.Write{SessionId: sess, Xid: r.Xid, LowestPendingXid: r.LowestPendingXid, Conn: fsm.ConnToPB(conn)}
	switch r.Op {
	case OpCreate:
		w.Op = &cmdpb.Write_Create{Create: createToCmd(r)}
	case OpSetACL:
		w.Op = &cmdpb.Write_SetAcl{SetAcl: &cmdpb.SetACL{Path: r.Path, Acl: fsm.ACLToPB(r.ACL), Version: r.Version}}
	case OpDelete:
		w.Op = &cmdpb.Write_Delete{Delete: &cmdpb.Delete{Path: r.Path, Version: r.Version}}
	case OpSetData:
		w.Op = &cmdpb.Write_SetData{SetData: &cmdpb.SetData{Path: r.Path, Data: r.Data, NullData: r.NullData, Version: r.Version}}
	case OpCheck, OpMulti:
		ops := r.Ops
		if r.Op == OpCheck {
			ops = []Request{*r}
		}
		m := &cmdpb.Multi{Ops: make([]*cmdpb.Op, 0, len(ops))}
		for i := range ops {
			o, err := opToCmd(&ops[i])
			if err != nil {
				return nil, err
			}
			m.Ops = append(m.Ops, o)
		}
		w.Op = &cmdpb.Write_Multi{Multi: m}
	default:
		return nil, fmt.Errorf("%s is not a write", r.Op)
	}
	return w, nil
}

// dataSize is the largest znode payload a write request carries.
func dataSize(r *Request) int {
	n := len(r.Data)
	for i := range r.Ops {
		n = max(n, len(r.Ops[i].Data))
	}
	return n
}

// requestSize estimates a write's encoded size: its paths, data and ACLs
// plus a little per op. It is what a request limit is checked against,
// whatever wire the request came on.
func requestSize(r *Request) int {
	n := 16 + len(r.Path) + len(r.Data)
	for _, a := range r.ACL {
		n += 8 + len(a.Scheme) + len(a.ID)
	}
	for i := range r.Ops {
		n += requestSize(&r.Ops[i])
	}
	return n
}

// createsTTL reports whether a write creates a TTL node.
func createsTTL(r *Request) bool {
	if r.Op == OpCreate && r.Create.Kind == tree.TTL {
		return true
	}
	for i := range r.Ops {
		if createsTTL(&r.Ops[i]) {
			return true
		}
	}
	return false
}

// fromStat converts the FSM's stat of a result (nil stays nil).
func fromStat(s *cmdpb.Stat) *tree.Stat {
	if s == nil {
		return nil
	}
	st := fsm.StatFromPB(s)
	return &st
}

// resultResponse builds the response of a write from its FSM result.
func resultResponse(req *Request, r *cmdpb.Result) *Response {
	resp := &Response{Xid: req.Xid, Op: req.Op, Zxid: r.Zxid, Code: fromResult(r.Code), Message: r.Message}
	switch req.Op {
	case OpCreate, OpSetData, OpSetACL:
		if r.Code == cmdpb.Code_OK {
			resp.Path, resp.Stat = r.Path, fromStat(r.Stat)
		}
	case OpMulti:
		resp.Results = make([]Response, 0, len(r.Ops))
		for i, o := range r.Ops {
			res := Response{Code: fromResult(o.Code), Path: o.Path, Stat: fromStat(o.Stat), Message: o.Message}
			if i < len(req.Ops) {
				res.Op = req.Ops[i].Op
			}
			resp.Results = append(resp.Results, res)
		}
	}
	return resp
}

func errResponse(req *Request, code Code, msg string) *Response {
	return &Response{Xid: req.Xid, Op: req.Op, Code: code, Message: msg}
}
