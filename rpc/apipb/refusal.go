// Package apipb is coordd's public gRPC API, generated from api.proto
// (make proto), and the little written by hand beside it: the mapping of
// a refused membership change to and from its typed code (refusal.go).
package apipb

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RefusalDomain is the google.rpc.ErrorInfo domain of coordd's refusals.
const RefusalDomain = "coordd"

// refusalNames are the refusals' names: the ErrorInfo reason a server
// sends beside the typed detail, and coordctl's -o json error code. They
// are a public contract (scripts match them): never change one.
var refusalNames = map[MemberRefusal]string{
	MemberRefusal_MEMBER_BAD_ARGUMENTS:        "BadArguments",
	MemberRefusal_MEMBER_EXISTS:               "MemberExists",
	MemberRefusal_MEMBER_NO_MEMBER:            "NoMember",
	MemberRefusal_MEMBER_RECONFIG_IN_PROGRESS: "ReconfigInProgress",
	MemberRefusal_MEMBER_NEW_CONFIG_NO_QUORUM: "NewConfigNoQuorum",
	MemberRefusal_MEMBER_LAST_VOTER:           "LastVoter",
	MemberRefusal_MEMBER_NOT_CAUGHT_UP:        "NotCaughtUp",
	MemberRefusal_MEMBER_ALREADY_VOTER:        "AlreadyVoter",
	MemberRefusal_MEMBER_NOT_VOTER:            "NotVoter",
	MemberRefusal_MEMBER_NOT_JOINING:          "NotJoining",
	MemberRefusal_MEMBER_NO_LEADER:            "NoLeader",
	MemberRefusal_MEMBER_UNAVAILABLE:          "Unavailable",
}

// Name returns the refusal's name ("NoLeader", "MemberExists"...), "" for
// MEMBER_REFUSAL_UNSPECIFIED or a value this build does not know.
func (r MemberRefusal) Name() string { return refusalNames[r] }

// RefusalStatus returns the gRPC status error a server refuses with: code,
// message, and both details (the typed Refusal and, for clients older than
// it, the ErrorInfo reason).
func RefusalStatus(code codes.Code, r MemberRefusal, msg string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&Refusal{Code: r}, &errdetails.ErrorInfo{Reason: r.Name(), Domain: RefusalDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// RefusalOf returns the refusal err carries: its Refusal detail, or, from a
// server older than the typed codes, the ErrorInfo reason it names.
// MEMBER_REFUSAL_UNSPECIFIED means err is not such a refusal.
func RefusalOf(err error) MemberRefusal {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return MemberRefusal_MEMBER_REFUSAL_UNSPECIFIED
	}
	var named MemberRefusal
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *Refusal:
			return d.Code
		case *errdetails.ErrorInfo:
			if d.Domain != RefusalDomain {
				continue
			}
			for r, name := range refusalNames {
				if name == d.Reason {
					named = r
				}
			}
		}
	}
	return named
}
