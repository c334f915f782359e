package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in a bucket whose bounds hold it, and buckets are
	// contiguous and at most 1/128 of their values wide.
	prevEnd := int64(0)
	for i := 0; i < 40*128; i++ {
		low, width := histBucket(i)
		if low != prevEnd {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, low, prevEnd)
		}
		if low >= 256 && float64(width)/float64(low) > 1.0/128 {
			t.Fatalf("bucket %d [%d, +%d) too wide", i, low, width)
		}
		for _, v := range []int64{low, low + width - 1} {
			if histIndex(v) != i {
				t.Fatalf("value %d: index %d, want %d", v, histIndex(v), i)
			}
		}
		prevEnd = low + width
	}
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b histogram
	var exact []int64
	for i := 0; i < 100000; i++ {
		// log-normal-ish latencies from ~50µs to ~1s
		v := int64(math.Exp(10.8 + 1.5*rng.NormFloat64()))
		exact = append(exact, v)
		if i%2 == 0 {
			a.record(time.Duration(v))
		} else {
			b.record(time.Duration(v))
		}
	}
	a.merge(&b)
	sort.Slice(exact, func(i, j int) bool { return exact[i] < exact[j] })
	if a.n != uint64(len(exact)) || a.max != exact[len(exact)-1] || a.min != exact[0] {
		t.Fatalf("n %d min %d max %d; want %d %d %d", a.n, a.min, a.max, len(exact), exact[0], exact[len(exact)-1])
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		want := exact[int(math.Ceil(q*float64(len(exact))))-1]
		got := a.quantile(q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/128 {
			t.Errorf("q%v: %d, exact %d (%.2f%% off)", q, got, want, 100*rel)
		}
	}
	var empty histogram
	if empty.quantile(0.5) != 0 || empty.mean() != 0 {
		t.Error("empty histogram")
	}
}
