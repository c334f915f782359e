package console

import (
	"context"
	"net/http"

	"github.com/coordd/coordd/rpc/apipb"
)

// sessionJSON is one open session.
type sessionJSON struct {
	ID         string `json:"id"`
	Server     string `json:"server"`
	TimeoutMs  int64  `json:"timeoutMs"`
	Ephemerals int64  `json:"ephemerals"`
	Watches    int64  `json:"watches"`
	// Console: the console's own session.
	Console bool `json:"console,omitempty"`
}

// sessionsJSON lists the open sessions, by id.
type sessionsJSON struct {
	Sessions []sessionJSON `json:"sessions"`
}

func (c *Console) handleSessions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := call(r)
	defer cancel()
	resp, err := c.api.Sessions(ctx, &apipb.SessionsRequest{})
	if err != nil {
		fail(w, err)
		return
	}
	var own int64
	if cl := c.current(); cl != nil {
		own = cl.SessionID()
	}
	out := sessionsJSON{Sessions: []sessionJSON{}}
	for _, s := range resp.GetSessions() {
		out.Sessions = append(out.Sessions, sessionJSON{
			ID: hexID(s.GetId()), Server: s.GetServer(), TimeoutMs: s.GetTimeoutMs(),
			Ephemerals: s.GetEphemerals(), Watches: s.GetWatches(), Console: s.GetId() == own && own != 0,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionServers maps each open session (hex) to the server it is
// connected to; nil when the listing failed.
func (c *Console) sessionServers(ctx context.Context) map[string]string {
	resp, err := c.api.Sessions(ctx, &apipb.SessionsRequest{})
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(resp.GetSessions()))
	for _, s := range resp.GetSessions() {
		out[hexID(s.GetId())] = s.GetServer()
	}
	return out
}
