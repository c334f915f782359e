package engine

import (
	"time"

	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
)

// This file is the entry point for identities a front-end verified itself,
// such as the SASL exchange of ZooKeeper's protocol, which runs over
// several requests and keeps its state with the connection.

// Identity is an identity a session authenticated as: an ACL scheme and an
// id within it (the session registry's).
type Identity = session.Identity

// The identities a front-end may verify itself.
const (
	// SchemeSASL is a SASL user's identity, sasl:NAME.
	SchemeSASL = auth.SchemeSASL
	// SchemeSuper is the super user's (its id empty), whom no ACL
	// refuses.
	SchemeSuper = auth.SchemeSuper
)

// Authenticate answers req in its place among the session's replies. With
// ids, the identities the front-end verified, it first adds them to the
// session through the log, as an addAuth's (so every server checks the
// session's later requests alike, and they last as long as the session),
// and answers once this server applied them: the session's next request
// already has them. Without, it only answers: a step of an exchange that
// has proved nothing yet. A client cannot reach it: the front-end calls it
// for what it checked itself, never for an addAuth's scheme and
// credentials.
func (s *Session) Authenticate(req *Request, ids []Identity) {
	e := s.e
	e.cfg.Meter.Received()
	e.touch(s.id, req.Xid)
	en := &entry{req: req, kind: kindDone, resp: &Response{}, arrived: time.Now()}
	if len(ids) > 0 {
		pb := make([]*cmdpb.Identity, len(ids))
		for i, id := range ids {
			pb[i] = &cmdpb.Identity{Scheme: id.Scheme, Id: id.ID}
		}
		en.kind, en.resp = kindWrite, nil
		en.cmd = &cmdpb.Command{Cmd: &cmdpb.Command_AddAuth{AddAuth: &cmdpb.AddAuth{SessionId: s.id, Xid: req.Xid, Ids: pb, Server: e.cfg.ServerID}}}
	}
	s.enqueue(en)
}
