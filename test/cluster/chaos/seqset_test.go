package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coordd/coordd/client"
)

// seqset: clients create sequential nodes under /seqset, each named with a
// unique op id ("c<worker>-<n>-" + the 10-digit counter), so the final
// listing says which ops applied and how often.
type seqset struct {
	e       *env
	seed    int64
	workers int
	cnt     counters

	mu     sync.Mutex
	acked  map[string]string // op id -> returned name
	unsure map[string]bool   // op ids with unknown outcome
	failed map[string]bool   // op ids that definitely failed
	issued map[string]bool
}

func newSeqset(e *env, seed int64, workers int) *seqset {
	return &seqset{e: e, seed: seed, workers: workers, acked: map[string]string{},
		unsure: map[string]bool{}, failed: map[string]bool{}, issued: map[string]bool{}}
}

func (s *seqset) name() string        { return "seqset" }
func (s *seqset) counters() *counters { return &s.cnt }

func (s *seqset) setup(ctx context.Context, cl *client.Client) error {
	return createAll(ctx, cl, "/seqset", s.e.dataACL())
}

func (s *seqset) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < s.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s.seed), uint64(2000+w)))
			var cl *client.Client
			for n := 0; n < 20000 && ctx.Err() == nil; n++ {
				if cl == nil {
					var err error
					if cl, _, err = s.e.newClient(ctx, fmt.Sprintf("seqset-%d", w)); err != nil {
						sleep(ctx, 500*time.Millisecond)
						continue
					}
				}
				id := fmt.Sprintf("c%d-%d", w, n)
				s.mu.Lock()
				s.issued[id] = true
				s.mu.Unlock()
				octx, cancel := context.WithTimeout(context.Background(), opTimeout)
				name, err := cl.Create(octx, "/seqset/"+id+"-", nil, client.CreateMode{Sequential: true, ACL: s.e.creatorACL()})
				cancel()
				s.mu.Lock()
				switch {
				case err == nil:
					s.cnt.ok.Add(1)
					s.acked[id] = name
				case indeterminate(err):
					s.cnt.indet.Add(1)
					s.unsure[id] = true
				default:
					s.cnt.fail.Add(1)
					s.failed[id] = true
					s.e.logf("seqset: create %s: definite error %v", id, err)
				}
				s.mu.Unlock()
				if ended(err) {
					cl = nil
				}
				sleep(ctx, time.Duration(10+rng.IntN(30))*time.Millisecond)
			}
		}(w)
	}
	wg.Wait()
}

func (s *seqset) check(ctx context.Context, cl *client.Client, v *verdict) {
	if err := cl.Sync(ctx, "/seqset"); err != nil {
		v.failf("final sync: %v", err)
		return
	}
	kids, _, err := cl.Children(ctx, "/seqset")
	if err != nil {
		v.failf("final listing: %v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := map[string][]string{}
	seqs := map[int64]string{}
	for _, k := range kids {
		i := strings.LastIndexByte(k, '-')
		if i < 0 || len(k)-i-1 != 10 {
			v.failf("unexpected child %q", k)
			continue
		}
		id := k[:i]
		seq, err := strconv.ParseInt(k[i+1:], 10, 64)
		if err != nil {
			v.failf("child %q: bad sequence number", k)
			continue
		}
		if other, dup := seqs[seq]; dup {
			v.failf("sequence number %d used twice: %s and %s", seq, other, k)
		}
		seqs[seq] = k
		byID[id] = append(byID[id], k)
	}
	for id, names := range byID {
		if len(names) > 1 {
			v.failf("create %s applied %d times: %v", id, len(names), names)
		}
		if !s.issued[id] {
			v.failf("child %v was never created by the workload", names)
		}
		if s.failed[id] {
			v.failf("create %s failed definitely but is present as %v", id, names)
		}
	}
	lost := 0
	for id, name := range s.acked {
		got := byID[id]
		if len(got) == 0 {
			lost++
			v.failf("acknowledged create %s (%s) is missing", id, name)
		} else if "/seqset/"+got[0] != name {
			v.failf("acknowledged create %s returned %s but the node is %s", id, name, got[0])
		}
	}
	present := 0
	for id := range s.unsure {
		if len(byID[id]) > 0 {
			present++
		}
	}
	v.notef("%d children; %d acknowledged (%d missing); %d indeterminate of which %d present", len(kids), len(s.acked), lost, len(s.unsure), present)
}
