package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/tree"
	"github.com/coordd/coordd/watch"
)

// replyOverhead is more than a reply's encoding adds to its data or names:
// the stat, the xid, the message's own framing.
const replyOverhead = 1 << 10

// oversize returns an error reply if a reply carrying size bytes of data or
// names could exceed what the server may send, and nil otherwise. Such a
// request fails and registers no watch; the session goes on.
func (s *Session) oversize(req *Request, size int) *Response {
	limit := s.e.cfg.MaxReplySize
	if limit <= 0 || size+replyOverhead <= limit {
		return nil
	}
	return errResponse(req, MarshallingError, fmt.Sprintf("reply too large: %d bytes of data or child names, and this server sends at most %d", size, limit-replyOverhead))
}

// needsPath reports whether an operation names a node whose path must be
// valid.
func needsPath(op Op) bool {
	switch op {
	case OpGetData, OpExists, OpGetChildren, OpRemoveWatches, OpCheckWatches, OpAddWatch, OpGetAllChildrenNumber, OpGetACL:
		return true
	}
	return false
}

// requester is who the session's requests come from, as the ACL checks
// see it: its connection and the identities its session holds in v.
func (s *Session) requester(v fsm.View) *auth.Requester {
	r := &auth.Requester{Conn: s.conn}
	if v.Sessions != nil {
		r.IDs = v.Sessions.Identities(s.id)
	}
	return r
}

// permitted checks that the session holds perm on the existing node p, as
// ZooKeeper's FinalRequestProcessor checks reads: against this server's
// applied state, like the read itself.
func (s *Session) permitted(v fsm.View, p string, perm tree.Perms) error {
	acl := s.acl(v.Tree, p)
	if acl == nil || s.requester(v).Allowed(acl, perm) {
		return nil
	}
	return fmt.Errorf("%w: %s needs %s", tree.ErrNoAuth, p, permName(perm))
}

// acl returns the ACL of node p, nil when every node lets everyone READ
// (the common case costs no lookup: permitted asks only for READ, or READ
// or ADMIN) or p does not exist.
func (s *Session) acl(t *tree.Tree, p string) []tree.ACL {
	if !t.ReadRestricted() {
		return nil
	}
	acl, _ := t.ACL(p)
	return acl
}

func permName(p tree.Perms) string {
	switch p {
	case tree.PermRead:
		return "READ"
	case tree.PermRead | tree.PermAdmin:
		return "READ or ADMIN"
	}
	return "permission " + p.String()
}

// lockDelayUntil returns when node p, whose stat is st, will be released
// if it is kept for a lock-delay (an ephemeral of an expired session), and
// 0 otherwise. It looks the registry up only for an ephemeral, and only
// while some node is kept.
func lockDelayUntil(v fsm.View, p string, st tree.Stat) int64 {
	if st.EphemeralOwner == 0 || v.Sessions == nil || v.Sessions.LockDelays() == 0 {
		return 0
	}
	if ld, ok := v.Sessions.LockDelayOf(p); ok && ld.Session == st.EphemeralOwner {
		return ld.Until
	}
	return 0
}

// redacted is getACL's answer to a caller without ADMIN: each digest id's
// hash replaced with x (ZooKeeper's user:x).
func redacted(acl []tree.ACL) []tree.ACL {
	out := make([]tree.ACL, len(acl))
	for i, a := range acl {
		if a.Scheme == auth.SchemeDigest {
			user, _, _ := strings.Cut(a.ID, ":")
			a.ID = user + ":x"
		}
		out[i] = a
	}
	return out
}

// read runs a request that does not go through the log against the local
// tree. The caller holds the FSM's lock (read or write) and s.mu.
//
// Reads check permissions as ZooKeeper 3.8.4 and 3.9.2 do (the rules of
// 3.8.0 plus exists, ZOOKEEPER-2590): getData, getChildren,
// getAllChildrenNumber and an existing node's exists need READ, getACL READ
// or ADMIN (digests redacted without ADMIN); the others need nothing. A
// refused read registers no watch.
func (s *Session) read(req *Request, v fsm.View) *Response {
	t := v.Tree
	resp := &Response{Xid: req.Xid, Op: req.Op}
	fail := func(err error) *Response {
		resp.Code, resp.Message = codeOf(err), fsm.Detail(err)
		return resp
	}
	if needsPath(req.Op) {
		if err := tree.ValidatePath(req.Path); err != nil {
			return fail(err)
		}
	}
	w := s.e.watches
	switch req.Op {
	case OpPing:
	case OpGetData:
		data, st, err := s.getData(t, req.Path)
		if err != nil {
			return fail(err)
		}
		if err := s.permitted(v, req.Path, tree.PermRead); err != nil {
			return fail(err)
		}
		if r := s.oversize(req, len(data)); r != nil {
			return r
		}
		if req.Watch {
			w.Add(s.id, req.Path, watch.Data)
		}
		resp.Data, resp.Stat = data, &st
		resp.LockDelayUntil = lockDelayUntil(v, req.Path, st)
	case OpExists:
		st, err := s.exists(t, req.Path)
		if err != nil && !errors.Is(err, tree.ErrNoNode) {
			return fail(err)
		}
		if err == nil {
			if err := s.permitted(v, req.Path, tree.PermRead); err != nil {
				return fail(err)
			}
		}
		if req.Watch {
			w.Add(s.id, req.Path, watch.Data)
		}
		if err == nil {
			resp.Stat = &st
			resp.LockDelayUntil = lockDelayUntil(v, req.Path, st)
		}
	case OpGetChildren:
		names, st, err := s.children(t, req.Path)
		if err != nil {
			return fail(err)
		}
		if err := s.permitted(v, req.Path, tree.PermRead); err != nil {
			return fail(err)
		}
		size := 0
		for _, name := range names {
			size += len(name) + 4 // the name and its length
		}
		if r := s.oversize(req, size); r != nil {
			return r
		}
		if req.Watch {
			w.Add(s.id, req.Path, watch.Child)
		}
		resp.Children, resp.Stat = names, &st
	case OpMultiRead:
		resp.Results = make([]Response, 0, len(req.Ops))
		for i := range req.Ops {
			op := &req.Ops[i]
			if op.Op != OpGetData && op.Op != OpGetChildren {
				resp.Results = append(resp.Results, *errResponse(op, BadArguments, op.Op.String()+" may not be part of a multiRead"))
				continue
			}
			resp.Results = append(resp.Results, *s.read(op, v))
		}
	case OpRemoveWatches, OpCheckWatches:
		var err error
		if req.Op == OpRemoveWatches {
			err = w.RemoveWatches(s.id, req.Path, req.WatcherType)
		} else {
			err = w.CheckWatches(s.id, req.Path, req.WatcherType)
		}
		switch {
		case errors.Is(err, watch.ErrNoWatcher):
			resp.Code, resp.Message = NoWatcher, err.Error()
		case errors.Is(err, watch.ErrUnknownWatcherType):
			resp.Code, resp.Message = MarshallingError, err.Error()
		case err != nil:
			resp.Code, resp.Message = SystemError, err.Error()
		}
	case OpAddWatch:
		kind := watch.Persistent
		if req.Recursive {
			kind = watch.PersistentRecursive
		}
		w.Add(s.id, req.Path, kind)
	case OpSetWatches:
		s.reregisterLocked(&req.Watches, v)
	case OpGetEphemerals:
		prefix := req.Path
		if prefix == "" {
			prefix = "/"
		}
		for _, p := range t.EphemeralsOf(s.id) {
			if strings.HasPrefix(p, prefix) {
				resp.Children = append(resp.Children, p)
			}
		}
	case OpGetAllChildrenNumber:
		n, err := t.Descendants(req.Path)
		if err != nil {
			return fail(err)
		}
		if err := s.permitted(v, req.Path, tree.PermRead); err != nil {
			return fail(err)
		}
		resp.Count = int64(n)
	case OpGetACL:
		st, err := s.exists(t, req.Path)
		if err != nil {
			return fail(err)
		}
		if err := s.permitted(v, req.Path, tree.PermRead|tree.PermAdmin); err != nil {
			return fail(err)
		}
		acl, _ := t.ACL(req.Path)
		if !s.requester(v).Allowed(acl, tree.PermAdmin) {
			acl = redacted(acl)
		}
		resp.ACL, resp.Stat = acl, &st
	case OpWhoAmI:
		resp.Identities = s.requester(v).WhoAmI()
	default:
		resp.Code, resp.Message = Unimplemented, fmt.Sprintf("operation %s is not supported", req.Op)
	}
	return resp
}
