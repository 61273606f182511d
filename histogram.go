package pinpool

import (
	"sync/atomic"
	"time"
)

// DurationBounds are the upper bounds of the duration histograms in Stats
// (growth times, budget waits): from 10 µs to 10 s by factors of ten, and
// above the last one the overflow bucket. It is for reading: the pools
// count with their own copy, and every Stats snapshot carries its own copy
// in Histogram.Bounds, so writing into either changes nothing else.
var DurationBounds = []time.Duration{
	10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond,
	10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second,
}

// durationBounds are the bounds that the pools count with: a copy of
// DurationBounds made before anyone can write into it.
var durationBounds = [7]time.Duration(DurationBounds)

// Histogram counts events by duration. Counts[i] is the events of at most
// Bounds[i] and more than Bounds[i-1]; the last count, one past Bounds,
// is the events above the last bound. Sum is their total duration.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// Count is the number of events.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// durationHistogram records durations with atomics: a slow-path event
// (a growth, a wait) costs two atomic additions.
type durationHistogram struct {
	counts [len(durationBounds) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (h *durationHistogram) observe(d time.Duration) {
	i := 0
	for i < len(durationBounds) && d > durationBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// snapshot copies the histogram out. Every count only grows, so two
// snapshots in turn never go back.
func (h *durationHistogram) snapshot() Histogram {
	out := Histogram{Bounds: append([]time.Duration(nil), durationBounds[:]...), Counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
	}
	out.Sum = time.Duration(h.sum.Load())
	return out
}
