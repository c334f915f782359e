package bench

import (
	"math"
	"math/bits"
	"time"
)

// histogram is a log-linear latency histogram in nanoseconds, in the manner
// of HdrHistogram: values below 256 have a bucket each; above, every power of
// two is split into 128 equal buckets, so a bucket is at most 1/128 (0.8%) of
// its values wide. It needs a few tens of kilobytes whatever the number of
// ops and run length (exact samples would need 8 bytes per op: fine for one
// short run, unbounded for long ones), and two histograms merge by adding
// counts, so each worker keeps its own and nothing is shared while measuring.
type histogram struct {
	counts   []uint64
	n        uint64
	sum      float64
	min, max int64
}

const histSubBits = 7 // 2^7 = 128 buckets per power of two

func histIndex(v int64) int {
	e := max(0, bits.Len64(uint64(v))-(histSubBits+1))
	return e<<histSubBits + int(v>>e)
}

// histBucket returns the lowest value of bucket i and the bucket's width.
func histBucket(i int) (low, width int64) {
	if i < 2<<histSubBits {
		return int64(i), 1
	}
	e := i>>histSubBits - 1
	m := int64(i - e<<histSubBits)
	return m << e, 1 << e
}

func (h *histogram) record(d time.Duration) {
	v := max(int64(d), 0)
	i := histIndex(v)
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile returns the value at quantile q (0..1): the middle of the bucket
// holding the ceil(q*n)-th smallest value, kept within [min, max].
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			low, width := histBucket(i)
			return min(max(low+(width-1)/2, h.min), h.max)
		}
	}
	return h.max
}
