package advise

import (
	"math"
	"slices"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// data is the valid part of a report, indexed for the rules: every figure
// in it is finite and positive. Rows with a zero, negative, NaN or
// infinite figure count as not measured; duplicate rows are reduced to the
// median of their valid figures.
type data struct {
	r      *measure.Report
	bw     map[transferKey]float64      // GB/s
	allocs map[string]map[int64]float64 // op → size → ns
	pool   map[poolKey]float64          // Get+Release pairs per second
}

type transferKey struct {
	kind measure.Kind
	dir  measure.Direction
	size int64
}

type poolKey struct {
	impl       string
	goroutines int
}

// valid reports whether v is a usable figure: finite and positive.
func valid(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// newData indexes the valid rows of r.
func newData(r *measure.Report) *data {
	bw := map[transferKey][]float64{}
	for _, t := range r.Transfers {
		if v, ok := bandwidth(t); ok {
			k := transferKey{t.Kind, t.Dir, t.Size}
			bw[k] = append(bw[k], v)
		}
	}
	allocs := map[string]map[int64][]float64{}
	for _, a := range r.Allocs {
		if a.Size <= 0 || a.Median <= 0 {
			continue
		}
		if allocs[a.Op] == nil {
			allocs[a.Op] = map[int64][]float64{}
		}
		allocs[a.Op][a.Size] = append(allocs[a.Op][a.Size], float64(a.Median))
	}
	pool := map[poolKey][]float64{}
	for _, p := range r.Pool {
		if v, ok := throughput(p); ok {
			k := poolKey{p.Impl, p.Goroutines}
			pool[k] = append(pool[k], v)
		}
	}
	d := &data{r: r, bw: map[transferKey]float64{}, allocs: map[string]map[int64]float64{}, pool: map[poolKey]float64{}}
	for k, v := range bw {
		d.bw[k] = median(v)
	}
	for op, m := range allocs {
		d.allocs[op] = map[int64]float64{}
		for s, v := range m {
			d.allocs[op][s] = median(v)
		}
	}
	for k, v := range pool {
		d.pool[k] = median(v)
	}
	return d
}

// bandwidth is a transfer row's GB/s: GBps when valid, else the bytes over
// the median time.
func bandwidth(t measure.Transfer) (float64, bool) {
	if t.Size <= 0 {
		return 0, false
	}
	if valid(t.GBps) {
		return t.GBps, true
	}
	if t.Median <= 0 {
		return 0, false
	}
	bytes := float64(t.Size)
	if t.Dir == measure.Both {
		bytes *= 2
	}
	v := bytes / float64(t.Median) // bytes per ns = GB/s
	return v, valid(v)
}

// throughput is a pool run's Get+Release pairs per second: OpsPerSec when
// valid, else Ops over Elapsed.
func throughput(p measure.PoolRun) (float64, bool) {
	if p.Goroutines <= 0 {
		return 0, false
	}
	if valid(p.OpsPerSec) {
		return p.OpsPerSec, true
	}
	if p.Ops <= 0 || p.Elapsed <= 0 {
		return 0, false
	}
	v := float64(p.Ops) / p.Elapsed.Seconds()
	return v, valid(v)
}

// median returns the median of vs (not empty, every value valid), without
// overflowing for huge values.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1]/2 + s[n/2]/2
}

// ratio returns a/b when it is a valid figure, else 0 and false.
func ratio(a, b float64) (float64, bool) {
	if !valid(a) || !valid(b) {
		return 0, false
	}
	if v := a / b; valid(v) {
		return v, true
	}
	return 0, false
}

// point is one size at which two kinds were both measured in a direction.
type point struct {
	size     int64
	num, den float64 // GB/s of the two kinds
	ratio    float64 // num/den
}

// points returns, ascending by size, the sizes at which num and den were
// both measured in direction dir, with their bandwidths and ratio.
func (d *data) points(dir measure.Direction, num, den measure.Kind) []point {
	var out []point
	for k, a := range d.bw {
		if k.kind != num || k.dir != dir {
			continue
		}
		b, ok := d.bw[transferKey{den, dir, k.size}]
		if !ok {
			continue
		}
		if r, ok := ratio(a, b); ok {
			out = append(out, point{k.size, a, b, r})
		}
	}
	slices.SortFunc(out, func(x, y point) int {
		switch {
		case x.size < y.size:
			return -1
		case x.size > y.size:
			return 1
		}
		return 0
	})
	return out
}

// suffixFrom returns the index from which every point up to the last one
// satisfies ok, or len(ps) when the last one does not.
func suffixFrom(ps []point, ok func(point) bool) int {
	i := len(ps)
	for i > 0 && ok(ps[i-1]) {
		i--
	}
	return i
}

// allocsAtLeast returns the valid rows of op of at least min bytes, as size
// → ns.
func (d *data) allocsAtLeast(op string, min int64) map[int64]float64 {
	out := map[int64]float64{}
	for s, ns := range d.allocs[op] {
		if s >= min {
			out[s] = ns
		}
	}
	return out
}

// skippedAbout returns the report's Skipped lines that mention any of
// words (case-insensitive).
func (d *data) skippedAbout(words ...string) []string {
	var out []string
	for _, line := range d.r.Skipped {
		l := strings.ToLower(line)
		for _, w := range words {
			if strings.Contains(l, strings.ToLower(w)) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}
