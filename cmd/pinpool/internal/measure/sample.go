package measure

import (
	"slices"
	"time"
)

// samples collects the timed repeats of one row.
type samples []time.Duration

// enough reports whether a row has its repeats: at least MinRepeats and
// MinTime in total, or MaxRepeats.
func (s samples) enough(p Plan) bool {
	if len(s) >= p.MaxRepeats {
		return true
	}
	if len(s) < p.MinRepeats {
		return false
	}
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return total >= p.MinTime
}

// summary returns the median, min and max (zeros for no samples). The
// median of an even count is the mean of the middle two.
func (s samples) summary() (median, lo, hi time.Duration) {
	if len(s) == 0 {
		return 0, 0, 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	m := len(c) / 2
	median = c[m]
	if len(c)%2 == 0 {
		median = (c[m-1] + c[m]) / 2
	}
	return median, c[0], c[len(c)-1]
}

// RepeatRun is one run of a row's consecutive repeats, as one line of go test
// -bench reports one run of b.N iterations: N repeats of Mean time each.
type RepeatRun struct {
	N    int           `json:"n"`
	Mean time.Duration `json:"mean_ns"`
}

// runs splits the samples, in the order they were taken, into
// min(len(s), k) consecutive batches whose sizes differ by at most one,
// and returns each batch's count and mean. A row's k is Plan.MinRepeats,
// so that the Go benchmark format has as many samples of it as
// --repeats asks (benchstat wants 6 or more to compute a confidence
// interval).
func (s samples) runs(k int) []RepeatRun {
	k = min(len(s), max(k, 1))
	out := make([]RepeatRun, 0, k)
	for i, lo := 0, 0; i < k; i++ {
		hi := lo + len(s)/k
		if i < len(s)%k {
			hi++
		}
		var sum time.Duration
		for _, d := range s[lo:hi] {
			sum += d
		}
		out = append(out, RepeatRun{N: hi - lo, Mean: sum / time.Duration(hi-lo)})
		lo = hi
	}
	return out
}

// gbps is bytes over d in 10⁹ bytes per second (0 for d <= 0).
func gbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e9
}

// transferRow makes the row of a kind, direction and size from its samples.
func transferRow(k Kind, d Direction, size int64, s samples, timer string, runs int) Transfer {
	med, lo, hi := s.summary()
	t := Transfer{Kind: k, Dir: d, Size: size, Repeats: len(s), Median: med, Min: lo, Max: hi, Timer: timer, Runs: s.runs(runs)}
	t.GBps = gbps(t.Bytes(), med)
	return t
}

// rotor hands out offsets of size-byte windows that cycle through an arena
// of arena bytes, aligned to 4 KiB, so that consecutive transfers touch
// different memory until the arena is used up.
type rotor struct {
	size, arena, next int64
}

func newRotor(size, arena int64) *rotor { return &rotor{size: size, arena: arena} }

// offset returns the next window's offset; off+size <= arena always.
func (r *rotor) offset() int64 {
	step := (r.size + 4095) &^ 4095
	if r.next+r.size > r.arena {
		r.next = 0
	}
	off := r.next
	r.next += step
	return off
}

// collect times a row: once is run p.Warmup times untimed, then until the
// plan has enough samples; the first error ends it.
func (p Plan) collect(once func() (time.Duration, error)) (samples, error) {
	for range p.Warmup {
		if _, err := once(); err != nil {
			return nil, err
		}
	}
	var s samples
	for !s.enough(p) {
		dt, err := once()
		if err != nil {
			return nil, err
		}
		s = append(s, dt)
	}
	return s, nil
}
