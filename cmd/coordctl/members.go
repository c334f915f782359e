package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/apipb"
)

// The verbs that change the cluster itself: member and leader. They use the
// public API's unary calls, which any server takes to the leader.

// defaultCatchUp is how long member add and member promote wait for a new
// server to catch up before promoting it (the server's own default).
const defaultCatchUp = 60 * time.Second

var memberVerb = &verb{
	name:     "member",
	synopsis: "member list | add ID PEER-ADDR [--non-voter] | remove ID | promote ID",
	summary:  "list, add, remove or promote the members of the cluster",
	detail: `
member list shows every member of the cluster's configuration: its id, peer
and client addresses, whether it votes, its role and applied zxid.

member add ID PEER-ADDR adds a server, which must have been started with
coordd --join (and an empty data dir) at that peer address. It joins as a
non-voter, catches up from the leader, and is then promoted to voter
(waiting up to --catch-up for that); with --non-voter it stays a non-voter:
an observer that serves reads, sessions and watches and forwards writes, but
does not count towards the quorum. When the server does not catch up in
time it stays a non-voter and the command fails, saying so: promote it later
with member promote.

member remove ID removes a server (shut it down afterwards). member promote
ID makes a caught-up non-voter a voter.

One change at a time: a change is refused, and nothing changes, when another
is in progress (ReconfigInProgress), when the id or peer address is already a
member's (MemberExists), when there is no such member (NoMember), when it
would remove the last voter (LastVoter), when the voters of the new
configuration would not have a reachable majority (NewConfigNoQuorum), or
when the server to add leads a cluster of its own, started without --join
(NotJoining); with -o json these are the error's code. While there is no
leader (an election), the change is asked again for up to --timeout. Every
sub-command prints the membership after the change.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		nonVoter := fs.Bool("non-voter", false, "member add: keep the new server a non-voter (an observer)")
		catchUp := fs.Duration("catch-up", defaultCatchUp, "member add, member promote: how long to wait for the server to catch up before promoting it")
		return func(x *cmd, args []string) error {
			args, err := x.interleaved(fs, args)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return x.usage("missing sub-command (list, add, remove or promote)")
			}
			if *catchUp <= 0 {
				return x.usage("--catch-up must be positive")
			}
			sub, rest := args[0], args[1:]
			want := map[string]int{"list": 0, "add": 2, "remove": 1, "promote": 1}
			n, ok := want[sub]
			if !ok {
				return x.usage("unknown sub-command %q (want list, add, remove or promote)", sub)
			}
			if len(rest) != n {
				return x.usage("%s takes %d argument(s), not %d", sub, n, len(rest))
			}
			if *nonVoter && sub != "add" {
				return x.usage("--non-voter goes with add only")
			}
			var resp *apipb.MembersResponse
			call := func(ctx context.Context, c apipb.CoordClient) (err error) {
				switch sub {
				case "list":
					resp, err = c.Members(ctx, &apipb.MembersRequest{})
				case "add":
					resp, err = c.AddMember(ctx, &apipb.AddMemberRequest{Id: rest[0], PeerAddress: rest[1], NonVoter: *nonVoter, CatchUpMs: catchUp.Milliseconds()})
				case "remove":
					resp, err = c.RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: rest[0]})
				case "promote":
					resp, err = c.PromoteMember(ctx, &apipb.PromoteMemberRequest{Id: rest[0], CatchUpMs: catchUp.Milliseconds()})
				}
				return err
			}
			d := x.timeout
			if sub == "add" || sub == "promote" {
				d += *catchUp
			}
			if err := x.adminCall(d, call); err != nil {
				return fmt.Errorf("member %s: %w", sub, err)
			}
			out := membersOf(resp)
			return x.out.emit(out, func(w io.Writer) { writeMembers(w, out) })
		}
	},
}

var leaderVerb = &verb{
	name:     "leader",
	synopsis: "leader transfer [ID]",
	summary:  "hand the leadership to voter ID (or to any caught-up voter)",
	detail: `
leader transfer drains the leader before maintenance: the leader brings the
chosen voter up to date and has it start an election at once, so the cluster
has a new leader within moments instead of an election timeout. Without ID
the leader picks the most caught-up voter. Prints the new leader. A non-voter
cannot lead (NotVoter); an unknown id is NoMember.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if len(args) == 0 || args[0] != "transfer" {
				return x.usage("missing sub-command transfer")
			}
			if err := x.nargs(args[1:], 0, 1); err != nil {
				return err
			}
			req := &apipb.TransferLeadershipRequest{}
			if len(args) == 2 {
				req.Id = args[1]
			}
			var resp *apipb.TransferLeadershipResponse
			err := x.adminCall(x.timeout, func(ctx context.Context, c apipb.CoordClient) (err error) {
				resp, err = c.TransferLeadership(ctx, req)
				return err
			})
			if err != nil {
				return fmt.Errorf("leader transfer: %w", err)
			}
			out := struct {
				Leader string `json:"leader"`
			}{resp.GetLeader()}
			return x.out.emit(out, func(w io.Writer) { fmt.Fprintf(w, "leader: %s\n", out.Leader) })
		}
	},
}

// interleaved parses the verb's flags wherever they stand among the
// positional arguments ("add 4 host:port --non-voter -o json") and returns
// the positional ones. An -o among them sets the output format.
func (x *cmd) interleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printVerbUsage(x.stdout, x.verb)
				return nil, errHelp
			}
			return nil, x.usage("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if o := fs.Lookup("o"); o != nil {
		format := o.Value.String()
		if err := checkFormat(x.verb.name, format); err != nil {
			return nil, err
		}
		x.out.json = format == "json"
		x.errJSON = x.out.json
	}
	return pos, nil
}

type membersJSON struct {
	Leader      string             `json:"leader"`
	ConfigIndex uint64             `json:"configIndex"`
	Members     []memberDetailJSON `json:"members"`
}

type memberDetailJSON struct {
	ID            string `json:"id"`
	PeerAddress   string `json:"peerAddress"`
	ClientAddress string `json:"clientAddress"` // "" when never registered
	Voter         bool   `json:"voter"`
	Role          string `json:"role"`
	Applied       int64  `json:"applied"`
}

func membersOf(resp *apipb.MembersResponse) membersJSON {
	out := membersJSON{Leader: resp.GetLeader(), ConfigIndex: resp.GetConfigIndex(), Members: []memberDetailJSON{}}
	for _, m := range resp.GetMembers() {
		out.Members = append(out.Members, memberDetailJSON{
			ID: m.GetId(), PeerAddress: m.GetPeerAddress(), ClientAddress: m.GetClientAddress(),
			Voter: m.GetVoter(), Role: m.GetRole(), Applied: m.GetApplied(),
		})
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func writeMembers(w io.Writer, ms membersJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPEER\tCLIENT\tVOTER\tROLE\tAPPLIED")
	for _, m := range ms.Members {
		client := m.ClientAddress
		if client == "" {
			client = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.PeerAddress, client, yesNo(m.Voter), m.Role, appliedText(m.Role, m.Applied))
	}
	tw.Flush()
	leader := ms.Leader
	if leader == "" {
		leader = "none"
	}
	fmt.Fprintf(w, "leader: %s, configuration index: %d\n", leader, ms.ConfigIndex)
}

// adminCall makes one call about the cluster on the first server that
// takes it, within d. A server that cannot be reached, or answers that it
// cannot do it now (Unavailable: it has no leader, say), is passed over
// for the next; any other answer is final: a refusal is not asked of
// another server. While every server that answers knows no leader (an
// election is under way), the servers are asked again, for up to
// --timeout. A refusal becomes an error whose JSON code is the server's
// reason (ReconfigInProgress, MemberExists, ...).
func (x *cmd) adminCall(d time.Duration, call func(ctx context.Context, c apipb.CoordClient) error) error {
	servers := x.serverOrder()
	failed := probe(x.ctx, servers, min(x.timeout, probeTimeout))
	if x.ctx.Err() != nil {
		return x.ctx.Err()
	}
	deadline := time.Now().Add(x.timeout)
	for {
		again, err := x.adminRound(servers, failed, d, call)
		if !again || time.Now().After(deadline) {
			return err
		}
		select {
		case <-x.ctx.Done():
			return x.ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// adminRound asks the reachable servers in turn (see adminCall); again
// says that every one that answered knows no leader.
func (x *cmd) adminRound(servers []string, failed map[string]error, d time.Duration, call func(ctx context.Context, c apipb.CoordClient) error) (again bool, err error) {
	later := map[string]error{}
	var lastAnswer error
	noLeader := true
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
			ctx, cancel := context.WithTimeout(x.ctx, d)
			defer cancel()
			return call(ctx, apipb.NewCoordClient(cc))
		}()
		if err == nil {
			return false, nil
		}
		if x.ctx.Err() != nil {
			return false, x.ctx.Err()
		}
		var local *cliError
		if errors.As(err, &local) {
			return false, err // coordctl's own failure (writing a file): no server would do better
		}
		reason := apipb.RefusalOf(err)
		refused := reason != apipb.MemberRefusal_MEMBER_REFUSAL_UNSPECIFIED
		if status.Code(err) != codes.Unavailable && refused || status.Code(err) == codes.DeadlineExceeded {
			return false, refusal(err, reason.Name())
		}
		if refused {
			lastAnswer = err
			noLeader = noLeader && reason == apipb.MemberRefusal_MEMBER_NO_LEADER
		}
		later[addr] = err
	}
	if lastAnswer != nil {
		return noLeader, refusal(lastAnswer, apipb.MemberRefusal_MEMBER_UNAVAILABLE.Name())
	}
	lastErr := func(addr string) error { return later[addr] }
	return false, &connectError{what: "no server answered", servers: x.explainTLS(failures(servers, failed, lastErr), lastErr)}
}

// refusal turns a server's refusal into coordctl's error, coded reason.
func refusal(err error, reason string) error {
	st := status.Convert(err)
	if reason == "" {
		reason = "Error"
		if errors.Is(err, context.DeadlineExceeded) || st.Code() == codes.DeadlineExceeded {
			reason = "Timeout"
		}
	}
	return &cliError{code: reason, status: 1, msg: st.Message()}
}
