package rpc

import (
	"slices"
	"testing"

	"github.com/coordd/coordd/fsm/cmdpb"
)

// TestProposerConfirmIsCumulative: a confirmation covers every command up
// to its seq (the leader commits a follower's commands in order and
// confirms a batch with one message); a stale or repeated one changes
// nothing, and what is not confirmed stays to be sent again.
func TestProposerConfirmIsCumulative(t *testing.T) {
	p := newProposer(nil)
	for range 5 {
		p.pending = append(p.pending, &proposal{seq: p.nextSeq + 1, cmd: &cmdpb.Command{}})
		p.nextSeq++
	}
	seqs := func() []uint64 {
		var out []uint64
		for _, q := range p.snapshotFrom(0) {
			out = append(out, q.seq)
		}
		return out
	}
	p.confirm(3)
	if got := seqs(); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("after confirm(3): pending %v, want [4 5]", got)
	}
	p.confirm(2) // stale: already covered
	p.confirm(3) // repeated
	if got := seqs(); !slices.Equal(got, []uint64{4, 5}) {
		t.Fatalf("after stale confirmations: pending %v, want [4 5]", got)
	}
	if got := p.snapshotFrom(4); len(got) != 1 || got[0].seq != 5 {
		t.Fatalf("snapshotFrom(4) = %v, want seq 5", got)
	}
	p.confirm(99)
	if got := seqs(); len(got) != 0 {
		t.Fatalf("after confirm(99): pending %v, want none", got)
	}
}
