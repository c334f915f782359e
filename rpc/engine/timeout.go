package engine

import "time"

// logClamped tells the operator, once per session (when it is opened, the
// only time its timeout is negotiated), that a client asked for a session
// timeout outside [MinSessionTimeout, MaxSessionTimeout] and got the bound
// instead. Clients do not all keep the timeout granted: kazoo, and Patroni
// on it, go on assuming the one they asked for, so a session cut from 30 s
// to 20 s expires while its client thinks it has time left; this line is
// where the difference shows. A client that asked for none (0: the
// default) is not clamped.
func (e *Engine) logClamped(id, askedMs int64, granted time.Duration) {
	asked := time.Duration(askedMs) * time.Millisecond
	if askedMs <= 0 || asked == granted {
		return
	}
	e.log.Info("session timeout clamped into the server's bounds", "session", id, "asked", asked, "granted", granted)
}
