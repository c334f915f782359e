package client

import (
	"fmt"
	"time"
)

// Suspension: how a client learns that its session may be lost before the
// leader can expire it.
//
// The server a client talks to cannot tell it that by answering: a server
// cut off from the leader goes on answering pings until it notices, while
// the leader's clock for the session has stopped. So a server that vouches
// (ConnectResponse.vouch_interval_ms > 0) tells the client which of its
// requests the leader has heard of, in a term a majority confirmed after
// that (apipb.Vouch): no leader can expire the session before the session
// timeout T has passed since the client sent that request. The client
// remembers when it first sent each request, pings included, and on
// Vouch{xid} advances
//
//	confirmed = sent(xid)
//
// It suspends the session (StateSuspended) at
//
//	confirmed + T - V - M
//
// where V is the server's vouch interval and M the margin
// (WithSuspendMargin; by default max(T/50, 50ms)). The leader's earliest
// expiry is confirmed + T, so a suspended session has at least V + M, by
// the client's clock, before anyone else can take what it held.
//
// A reconnect does not move the clock: only a vouch does (the new server
// may itself be cut off). A suspended session returns to StateReconnected
// when a vouch moves the suspension back into the future while it is
// connected. Against a server that does not vouch, the client falls back
// to the rule of servers older than vouches: it suspends the session when
// the connection breaks.

// defaultMarginFloor and defaultMarginDivisor make the default margin,
// max(T/50, 50ms). T/50 (2%) is twenty times the worst drift of two clocks
// that NTP disciplines (Linux slews a clock by at most 500 ppm, so two
// differ by at most 0.1%); the 50ms floor covers what does not scale with
// the timeout: a late timer on a loaded host, a short GC pause, the signal
// reaching the program.
const (
	defaultMarginFloor   = 50 * time.Millisecond
	defaultMarginDivisor = 50
)

// maxSentRecords bounds the send times remembered while no vouch comes.
// When full, every other record is dropped: a vouch for a dropped xid then
// counts from an earlier send, which only suspends sooner.
const maxSentRecords = 1024

// sentRecord is when the client first sent the request xid.
type sentRecord struct {
	xid int64
	at  time.Duration // since Client.epoch
}

// vouchClock is the client's record of what the leader confirmed. It is
// guarded by Client.mu.
type vouchClock struct {
	sent      []sentRecord  // first sends not vouched for yet, in xid (and time) order
	maxXid    int64         // highest xid recorded
	confirmed time.Duration // send time of the last vouched request, since epoch
	interval  time.Duration // the current (or last) server's vouch interval; 0: it does not vouch
	suspended bool          // StateSuspended reported, not yet lifted
	timer     *time.Timer   // fires at the suspension deadline
}

// record notes the first send of xid at at. Requests are first sent in
// xid order, so the records stay sorted by xid and by time.
func (v *vouchClock) record(xid int64, at time.Duration) {
	if xid <= v.maxXid {
		return
	}
	if len(v.sent) >= maxSentRecords {
		kept := v.sent[:0]
		for i, r := range v.sent {
			if i%2 == 1 || i == len(v.sent)-1 {
				kept = append(kept, r)
			}
		}
		v.sent = kept
	}
	v.sent = append(v.sent, sentRecord{xid, at})
	v.maxXid = xid
}

// vouch applies Vouch{xid}: the confirmed time becomes the send time of xid
// (or, if its record was dropped, of the latest request sent before it). It
// reports whether the confirmed time moved forward. A vouch for an xid never
// sent is ignored.
func (v *vouchClock) vouch(xid int64) bool {
	if xid <= 0 || xid > v.maxXid {
		return false
	}
	i := 0
	for i < len(v.sent) && v.sent[i].xid <= xid {
		i++
	}
	if i == 0 {
		return false // vouched for already, or sent before records were kept
	}
	at := v.sent[i-1].at
	v.sent = append(v.sent[:0], v.sent[i:]...)
	if at <= v.confirmed {
		return false
	}
	v.confirmed = at
	return true
}

// suspendMargin is the margin M in use for timeout T.
func (o *options) suspendMargin(timeout time.Duration) time.Duration {
	if o.margin > 0 {
		return o.margin
	}
	return max(timeout/defaultMarginDivisor, defaultMarginFloor)
}

// suspendAtLocked is when (since epoch) the session is suspended, unless
// a vouch comes first.
func (c *Client) suspendAtLocked() time.Duration {
	return c.vc.confirmed + c.timeout - c.vc.interval - c.opts.suspendMargin(c.timeout)
}

// armSuspendLocked sets the suspension timer to the current deadline, or
// stops it when the server does not vouch or the session has ended.
func (c *Client) armSuspendLocked() {
	if c.vc.interval <= 0 || c.terminal != nil || c.closeAcked {
		if c.vc.timer != nil {
			c.vc.timer.Stop()
		}
		return
	}
	d := c.suspendAtLocked() - c.since()
	if c.vc.timer == nil {
		c.vc.timer = time.AfterFunc(d, c.checkSuspend)
		return
	}
	c.vc.timer.Reset(d)
}

// checkSuspend runs at the suspension deadline: it suspends the session
// unless a vouch moved the deadline meanwhile.
func (c *Client) checkSuspend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vc.interval <= 0 || c.vc.suspended || c.terminal != nil || c.closeAcked {
		return
	}
	if c.since() < c.suspendAtLocked() {
		c.armSuspendLocked()
		return
	}
	silent := c.since() - c.vc.confirmed
	c.suspendLocked(fmt.Errorf("client: the leader confirmed no request sent in the last %v (session timeout %v)", silent.Round(time.Millisecond), c.timeout))
}

// suspendLocked reports StateSuspended, once until it is lifted.
func (c *Client) suspendLocked(cause error) {
	if c.vc.suspended {
		return
	}
	c.vc.suspended = true
	c.setStateLocked(StateSuspended, c.server, cause)
	c.log.Info("client: session suspended", "session", c.sessionID, "server", c.server, "cause", cause)
}

// handleVouch applies a Vouch that arrived on cn. A vouch that brings the
// suspension deadline back into the future lifts a suspension, if cn is
// still the session's connection.
func (c *Client) handleVouch(cn *conn, xid int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.terminal != nil || !c.vc.vouch(xid) {
		return
	}
	if c.vc.suspended && c.conn == cn && c.since() < c.suspendAtLocked() {
		c.vc.suspended = false
		c.setStateLocked(StateReconnected, cn.addr, nil)
		c.log.Info("client: session confirmed again", "session", c.sessionID, "server", cn.addr)
	}
	c.armSuspendLocked()
}

// recordSendLocked notes the first send of cl on cn, if cn's server
// vouches.
func (c *Client) recordSendLocked(cn *conn, cl *call, now time.Duration) {
	if cn.vouchInterval > 0 && !cl.sent {
		c.vc.record(cl.xid, now)
	}
}

// attachStateLocked decides the state reported when cn becomes the
// session's connection, with the server's vouch interval, and arms the
// suspension timer. A session suspended on a server that vouches stays
// suspended (reported again, with the new server) until a vouch lifts it.
func (c *Client) attachStateLocked(cn *conn, first bool) State {
	c.vc.interval = cn.vouchInterval
	defer c.armSuspendLocked()
	switch {
	case first:
		return StateConnected
	case c.vc.suspended && c.vc.interval > 0:
		return StateSuspended
	}
	c.vc.suspended = false
	return StateReconnected
}

// disconnectedLocked applies the fallback rule after a disconnect: with a
// server that does not vouch, the session is suspended at once.
func (c *Client) disconnectedLocked(cause error) {
	if c.vc.interval <= 0 {
		c.suspendLocked(cause)
	}
}

// Confirmation is what the client knows of the leader's view of its
// session (see Client.Confirmation).
type Confirmation struct {
	// Vouched: the current (or last) server vouches for the session. When
	// false, the other fields are zero and the client suspends the session
	// when its connection breaks.
	Vouched bool
	// Sent is when (this client's clock) it sent the last request that the
	// leader confirmed (for a new session, the connect request).
	Sent time.Time
	// Timeout is the session timeout T.
	Timeout time.Duration
	// VouchInterval is the server's vouch interval V.
	VouchInterval time.Duration
	// Margin is the suspension margin M (WithSuspendMargin).
	Margin time.Duration
	// Suspended: StateSuspended was reported and not lifted.
	Suspended bool
}

// EarliestExpiry is the earliest moment, by this client's clock, at which
// the leader may expire the session: Sent + Timeout. Anything the session
// holds may pass to another owner from then on.
func (x Confirmation) EarliestExpiry() time.Time { return x.Sent.Add(x.Timeout) }

// SuspendAt is when the session is (or was) suspended unless a vouch
// comes first: Sent + Timeout - VouchInterval - Margin.
func (x Confirmation) SuspendAt() time.Time {
	return x.EarliestExpiry().Add(-x.VouchInterval - x.Margin)
}

// Confirmation reports what the leader has confirmed of the session, for a
// program that must act before the session can expire (such as killing a
// command that runs under a lock).
func (c *Client) Confirmation() Confirmation {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vc.interval <= 0 {
		return Confirmation{Suspended: c.vc.suspended}
	}
	return Confirmation{
		Vouched:       true,
		Sent:          c.epoch.Add(c.vc.confirmed),
		Timeout:       c.timeout,
		VouchInterval: c.vc.interval,
		Margin:        c.opts.suspendMargin(c.timeout),
		Suspended:     c.vc.suspended,
	}
}
