package apipb

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every refusal survives the trip through a gRPC status, and a server
// older than the typed detail (only the ErrorInfo reason) is read alike:
// coordctl of this version works against servers of the last one.
func TestRefusalRoundTrip(t *testing.T) {
	for v := range MemberRefusal_name {
		r := MemberRefusal(v)
		if r == MemberRefusal_MEMBER_REFUSAL_UNSPECIFIED {
			continue
		}
		if r.Name() == "" {
			t.Fatalf("%v has no name: add it to refusalNames", r)
		}
		err := RefusalStatus(codes.FailedPrecondition, r, "no")
		if got := RefusalOf(err); got != r {
			t.Errorf("RefusalOf(RefusalStatus(%v)) = %v", r, got)
		}
		st, _ := status.New(codes.FailedPrecondition, "no").WithDetails(&errdetails.ErrorInfo{Reason: r.Name(), Domain: RefusalDomain})
		if got := RefusalOf(st.Err()); got != r {
			t.Errorf("RefusalOf(ErrorInfo %q) = %v", r.Name(), got)
		}
	}
}

// Errors that are not refusals are told apart from every refusal.
func TestNotARefusal(t *testing.T) {
	other, _ := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{Reason: "NoLeader", Domain: "elsewhere"})
	for _, err := range []error{nil, errors.New("plain"), status.Error(codes.Unavailable, "no details"), other.Err()} {
		if got := RefusalOf(err); got != MemberRefusal_MEMBER_REFUSAL_UNSPECIFIED {
			t.Errorf("RefusalOf(%v) = %v", err, got)
		}
	}
}

// The names are a contract with scripts (coordctl -o json): pin them.
func TestRefusalNamesPinned(t *testing.T) {
	want := map[MemberRefusal]string{
		1: "BadArguments", 2: "MemberExists", 3: "NoMember", 4: "ReconfigInProgress",
		5: "NewConfigNoQuorum", 6: "LastVoter", 7: "NotCaughtUp", 8: "AlreadyVoter",
		9: "NotVoter", 10: "NotJoining", 11: "NoLeader", 12: "Unavailable",
	}
	for r, name := range want {
		if r.Name() != name {
			t.Errorf("%d: name %q, want %q", r, r.Name(), name)
		}
	}
}
