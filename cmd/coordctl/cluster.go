package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/rpc/apipb"
)

// The verbs about the cluster itself: status and sessions. They use the
// public API's unary calls, not a session.

var statusVerb = &verb{
	name:     "status",
	synopsis: "status",
	summary:  "show every member of the cluster: id, client address, voter or not, role, applied zxid, version; the leader and the command level",
	detail: `
Asks the first server that answers (the shell's own server first) for its
view of the cluster. A member that server cannot reach shows as unreachable,
with the client address it had when it was last up and "-" for what only
it could tell (its applied zxid and version). The command level is what the
servers may propose; during a rolling upgrade it rises once every member
runs the new version.

As a health check: the exit status is 0 when every member is reachable and
there is a leader, 3 when a member is unreachable or there is no leader (the
members are printed all the same, and stderr says what is wrong), 1 when no
server answered.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 0, 0); err != nil {
				return err
			}
			var resp *apipb.StatusResponse
			err := x.unary(func(ctx context.Context, c apipb.CoordClient) (err error) {
				resp, err = c.Status(ctx, &apipb.StatusRequest{})
				return err
			})
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			out := statusJSON{Leader: resp.GetLeader(), Level: resp.GetCommandLevel(), Members: []memberJSON{}}
			for _, m := range resp.GetMembers() {
				out.Members = append(out.Members, memberJSON{ID: m.GetId(), Address: m.GetClientAddress(), Voter: m.GetVoter(), Role: m.GetRole(), Applied: m.GetApplied(), Version: m.GetVersion(), Level: m.GetLevel()})
			}
			if err := x.out.emit(out, func(w io.Writer) { writeStatus(w, out) }); err != nil {
				return err
			}
			return unhealthy(out)
		}
	},
}

// unhealthy says what makes a status unfit for service: members that are
// unreachable, or no leader; nil when there is nothing.
func unhealthy(st statusJSON) error {
	var probs []string
	for _, m := range st.Members {
		if m.Role == "unreachable" {
			probs = append(probs, fmt.Sprintf("member %s is unreachable", m.ID))
		}
	}
	if st.Leader == "" {
		probs = append(probs, "there is no leader")
	}
	if len(probs) == 0 {
		return nil
	}
	return &cliError{code: "Unhealthy", status: exitUnhealthy, msg: "status: " + strings.Join(probs, ", ")}
}

var sessionsVerb = &verb{
	name:     "sessions",
	synopsis: "sessions",
	summary:  "list the open sessions: id, timeout, ephemeral count, server",
	detail: `
Session ids are printed in hex, as ZooKeeper prints them (also in JSON, as
strings); the server is the id of the member the session is connected to,
when known. A one-shot call opens no session of its own.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 0, 0); err != nil {
				return err
			}
			var resp *apipb.SessionsResponse
			err := x.unary(func(ctx context.Context, c apipb.CoordClient) (err error) {
				resp, err = c.Sessions(ctx, &apipb.SessionsRequest{})
				return err
			})
			if err != nil {
				return fmt.Errorf("sessions: %w", err)
			}
			out := sessionsJSON{Sessions: []sessionJSON{}}
			for _, s := range resp.GetSessions() {
				out.Sessions = append(out.Sessions, sessionJSON{ID: hexID(s.GetId()), TimeoutMs: s.GetTimeoutMs(), Ephemerals: s.GetEphemerals(), Server: s.GetServer()})
			}
			return x.out.emit(out, func(w io.Writer) { writeSessions(w, out) })
		}
	},
}

// serverOrder is the order a one-off call tries the servers in: the
// session's own server first (if the command has a session), then --servers.
func (x *cmd) serverOrder() []string {
	var servers []string
	if x.sess != nil {
		if cur := x.sess.cl.Server(); cur != "" {
			servers = append(servers, cur)
		}
	}
	for _, addr := range x.servers {
		if !slices.Contains(servers, addr) {
			servers = append(servers, addr)
		}
	}
	return servers
}

// unary runs call against the servers in turn (the session's server first)
// until one answers, each within the command's timeout. Servers that do not
// accept a connection are skipped at once; when none answers, the error
// says why each failed.
func (x *cmd) unary(call func(ctx context.Context, c apipb.CoordClient) error) error {
	servers := x.serverOrder()
	failed := probe(x.ctx, servers, min(x.timeout, probeTimeout))
	if x.ctx.Err() != nil {
		return x.ctx.Err()
	}
	later := map[string]error{}
	for _, addr := range servers {
		if failed[addr] != nil {
			continue
		}
		err := func() error {
			cc, err := x.dialAPI(addr)
			if err != nil {
				return err
			}
			defer cc.Close()
			ctx, cancel := x.deadline()
			defer cancel()
			return call(ctx, apipb.NewCoordClient(cc))
		}()
		if err == nil {
			return nil
		}
		if x.ctx.Err() != nil {
			return x.ctx.Err()
		}
		later[addr] = err
	}
	lastErr := func(addr string) error { return later[addr] }
	return &connectError{what: "no server answered", servers: x.explainTLS(failures(servers, failed, lastErr), lastErr)}
}

// dialAPI opens a connection to the public API of the server at addr, with
// the invocation's TLS settings.
func (c *cli) dialAPI(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, c.grpcCredentials())
}
