package rpc

import (
	"errors"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/tree"
)

// This file is the error and type boundary between the replicated command
// set and the public API: every mapping happens here, once.

func statToAPI(s tree.Stat) *apipb.Stat {
	return &apipb.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Kind: apipb.NodeKind(s.Kind), TtlMs: s.TTL,
	}
}

func cmdStatToAPI(s *cmdpb.Stat) *apipb.Stat {
	if s == nil {
		return nil
	}
	return &apipb.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Kind: apipb.NodeKind(s.Kind), TtlMs: s.TtlMs,
	}
}

// codeToAPI maps result codes; the enums share numbers by design.
func codeToAPI(c cmdpb.Code) apipb.ErrorCode { return apipb.ErrorCode(c) }

// treeErrCode maps a tree error (from a local read) to the public code.
func treeErrCode(err error) apipb.ErrorCode {
	switch {
	case err == nil:
		return apipb.ErrorCode_OK
	case errors.Is(err, tree.ErrNoNode):
		return apipb.ErrorCode_NO_NODE
	case errors.Is(err, tree.ErrBadArguments):
		return apipb.ErrorCode_BAD_ARGUMENTS
	}
	return apipb.ErrorCode_SYSTEM_ERROR
}

func createToCmd(c *apipb.CreateRequest) *cmdpb.Create {
	return &cmdpb.Create{Path: c.Path, Data: c.Data, Kind: cmdpb.Kind(c.Kind), Sequential: c.Sequential, TtlMs: c.TtlMs}
}

// writeToCmd converts a write request; ok is false for a read.
func writeToCmd(sess int64, req *apipb.Request) (*cmdpb.Write, bool) {
	w := &cmdpb.Write{SessionId: sess, Xid: req.Xid, LowestPendingXid: req.LowestPendingXid}
	switch op := req.Op.(type) {
	case *apipb.Request_Create:
		w.Op = &cmdpb.Write_Create{Create: createToCmd(op.Create)}
	case *apipb.Request_Delete:
		w.Op = &cmdpb.Write_Delete{Delete: &cmdpb.Delete{Path: op.Delete.Path, Version: op.Delete.Version}}
	case *apipb.Request_SetData:
		w.Op = &cmdpb.Write_SetData{SetData: &cmdpb.SetData{Path: op.SetData.Path, Data: op.SetData.Data, Version: op.SetData.Version}}
	case *apipb.Request_Multi:
		m := &cmdpb.Multi{}
		for _, o := range op.Multi.Ops {
			var co *cmdpb.Op
			switch x := o.Op.(type) {
			case *apipb.MultiOp_Create:
				co = &cmdpb.Op{Op: &cmdpb.Op_Create{Create: createToCmd(x.Create)}}
			case *apipb.MultiOp_Delete:
				co = &cmdpb.Op{Op: &cmdpb.Op_Delete{Delete: &cmdpb.Delete{Path: x.Delete.Path, Version: x.Delete.Version}}}
			case *apipb.MultiOp_SetData:
				co = &cmdpb.Op{Op: &cmdpb.Op_SetData{SetData: &cmdpb.SetData{Path: x.SetData.Path, Data: x.SetData.Data, Version: x.SetData.Version}}}
			case *apipb.MultiOp_Check:
				co = &cmdpb.Op{Op: &cmdpb.Op_Check{Check: &cmdpb.Check{Path: x.Check.Path, Version: x.Check.Version}}}
			default:
				co = &cmdpb.Op{}
			}
			m.Ops = append(m.Ops, co)
		}
		w.Op = &cmdpb.Write_Multi{Multi: m}
	default:
		return nil, false
	}
	return w, true
}

// dataSize is the largest znode payload a write request carries.
func dataSize(req *apipb.Request) int {
	switch op := req.Op.(type) {
	case *apipb.Request_Create:
		return len(op.Create.Data)
	case *apipb.Request_SetData:
		return len(op.SetData.Data)
	case *apipb.Request_Multi:
		n := 0
		for _, o := range op.Multi.Ops {
			switch x := o.Op.(type) {
			case *apipb.MultiOp_Create:
				n = max(n, len(x.Create.Data))
			case *apipb.MultiOp_SetData:
				n = max(n, len(x.SetData.Data))
			}
		}
		return n
	}
	return 0
}

// resultToAPI builds the public reply of a write from its FSM result.
func resultToAPI(req *apipb.Request, r *cmdpb.Result) *apipb.Response {
	resp := &apipb.Response{Xid: req.Xid, Zxid: r.Zxid, Error: codeToAPI(r.Code), Message: r.Message}
	switch req.Op.(type) {
	case *apipb.Request_Create:
		if r.Code == cmdpb.Code_OK {
			resp.Result = &apipb.Response_Create{Create: &apipb.CreateResponse{Path: r.Path, Stat: cmdStatToAPI(r.Stat)}}
		}
	case *apipb.Request_SetData:
		if r.Code == cmdpb.Code_OK {
			resp.Result = &apipb.Response_SetData{SetData: &apipb.SetDataResponse{Stat: cmdStatToAPI(r.Stat)}}
		}
	case *apipb.Request_Multi:
		m := &apipb.MultiResponse{}
		for _, o := range r.Ops {
			m.Results = append(m.Results, &apipb.MultiResult{Error: codeToAPI(o.Code), Path: o.Path, Stat: cmdStatToAPI(o.Stat)})
		}
		resp.Result = &apipb.Response_Multi{Multi: m}
	}
	return resp
}

func errResponse(xid int64, code apipb.ErrorCode, msg string) *apipb.Response {
	return &apipb.Response{Xid: xid, Error: code, Message: msg}
}

// createsTTL reports whether a write request creates a TTL node.
func createsTTL(req *apipb.Request) bool {
	switch op := req.Op.(type) {
	case *apipb.Request_Create:
		return op.Create.Kind == apipb.NodeKind_TTL
	case *apipb.Request_Multi:
		for _, o := range op.Multi.Ops {
			if c := o.GetCreate(); c != nil && c.Kind == apipb.NodeKind_TTL {
				return true
			}
		}
	}
	return false
}
