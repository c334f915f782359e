package zk

import (
	"crypto/rand"

	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/rpc/zk/sasl"
)

// This file is the SASL authentication of ZooKeeper's protocol: a client
// sends its tokens in sasl requests (GetSASLRequest) and reads the
// server's in their replies (SetSASLResponse). The exchange is the
// connection's (package sasl runs DIGEST-MD5); what it proves, the
// identity sasl:USER (and super for Config.SASLSuperUser), becomes the
// session's through the log like an addAuth's (engine.Session.
// Authenticate), so every server checks the session's requests alike, and
// the step that proves it is answered once this server applied it. A step
// that fails is answered AuthFailed and the connection closed, as
// ZooKeeper does; the session lives on, as it was.

// saslStep runs a sasl request's step of the connection's exchange. It
// returns the engine request that answers it in its place, the identities
// the step verified (none until the last step), the token for the client,
// or the refusal.
func (c *conn) saslStep(h jute.RequestHeader, rec jute.Record) (engine.Request, []engine.Identity, []byte, *badRequest) {
	req := engine.Request{Op: engine.OpAddAuth, Xid: int64(h.Xid)}
	src := c.srv.cfg.SASL
	if src == nil {
		// ZooKeeper without a Server section answers with no token and
		// lets the client go on unauthenticated, believing otherwise;
		// coordd says no.
		c.srv.log.Warn("zk: a client asked for SASL, which this server does not serve (no --sasl-users)", "remote", c.remote, "session", c.sess.ID())
		return req, nil, nil, bad(engine.AuthFailed, "SASL is not configured on this server")
	}
	if c.exchange == nil {
		c.exchange = sasl.NewDigestMD5(src.Users(), rand.Reader)
	}
	tok, err := c.exchange.Step(rec.(*jute.GetSASLRequest).Token)
	if err != nil {
		c.srv.log.Warn("zk: SASL authentication failed", "remote", c.remote, "session", c.sess.ID(), "err", err)
		return req, nil, nil, bad(engine.AuthFailed, "%v", err)
	}
	if !c.exchange.Done() {
		return req, nil, tok, nil
	}
	user := c.exchange.User()
	ids := []engine.Identity{{Scheme: engine.SchemeSASL, ID: user}}
	if su := c.srv.cfg.SASLSuperUser; su != "" && user == su {
		ids = append(ids, engine.Identity{Scheme: engine.SchemeSuper})
	}
	c.srv.log.Info("zk: SASL authenticated", "remote", c.remote, "session", c.sess.ID(), "user", user, "super", len(ids) > 1)
	return req, ids, tok, nil
}
