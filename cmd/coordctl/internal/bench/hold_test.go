package bench

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// TestCheckHeld: every loss of a held session during the hold, and every
// held session that cannot answer after it, is a failure.
func TestCheckHeld(t *testing.T) {
	b := fakeBench(nil, "a")
	gone := errors.New("session expired")
	sessions := []session{
		&fakeSession{},
		&fakeSession{lost: []sessionLoss{{"Disconnected", nil}, {"Expired", gone}}},
		&fakeSession{existsErr: gone},
	}
	st := &runState{}
	b.checkHeld(sessions, st)
	if st.errs.Load() != 3 {
		t.Errorf("%d failures, want 3", st.errs.Load())
	}
	if want := "a session went Disconnected during the hold"; st.firstErr == nil || st.firstErr.Error() != want {
		t.Errorf("first failure %v, want %q", st.firstErr, want)
	}
}

// TestZKLosses: a go-zookeeper session reports its expiries and lost
// connections once each.
func TestZKLosses(t *testing.T) {
	s := &zkSession{}
	s.expired.Add(1)
	s.disconnected.Add(2)
	want := []sessionLoss{{"Expired", nil}, {"Disconnected", nil}, {"Disconnected", nil}}
	if got := s.losses(); !reflect.DeepEqual(got, want) {
		t.Errorf("losses %v, want %v", got, want)
	}
	if got := s.losses(); len(got) != 0 {
		t.Errorf("losses again %v, want none", got)
	}
}

// TestUsageAndHoldUsage: each server's memory after and CPU during the
// run; the memory per held session is what the servers' resident memory
// grew by, summed, per session; the leader's cores are its CPU over the
// measured time.
func TestUsageAndHoldUsage(t *testing.T) {
	const mb = 1 << 20
	start := &apipb.StatusResponse{Members: []*apipb.Member{{Id: "1", RssBytes: 20 * mb}, {Id: "2", RssBytes: 30 * mb}}}
	before := &apipb.StatusResponse{Members: []*apipb.Member{{Id: "1", CpuSeconds: 1}, {Id: "2", CpuSeconds: 2}}}
	after := &apipb.StatusResponse{Members: []*apipb.Member{
		{Id: "1", ClientAddress: "a", Role: "leader", RssBytes: 30 * mb, CpuSeconds: 3},
		{Id: "2", ClientAddress: "b", Role: "follower", RssBytes: 40 * mb, CpuSeconds: 2.5},
		{Id: "3", ClientAddress: "c"}, // unreachable: no usage
	}}
	b := &Bench{cfg: Config{Duration: 4 * time.Second}}
	r := Result{HeldSessions: 1024}
	b.finish(&r, &histogram{}, &runState{}, before, after)
	holdUsage(&r, start, after)
	want := []ServerUsage{
		{ID: "1", Address: "a", Role: "leader", RssMB: 30, CPUS: 2, RssStartMB: 20},
		{ID: "2", Address: "b", Role: "follower", RssMB: 40, CPUS: 0.5, RssStartMB: 30},
	}
	if !reflect.DeepEqual(r.Servers, want) {
		t.Errorf("servers %+v, want %+v", r.Servers, want)
	}
	if r.KBPerSession != 20 || r.LeaderCores != 0.5 {
		t.Errorf("%v KB per session, leader %v cores; want 20 and 0.5", r.KBPerSession, r.LeaderCores)
	}
}
