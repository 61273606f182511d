package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"slices"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// AllocMin is the smallest allocation whose cost counts in the per-GiB
// figures: below it the fixed cost of a call dominates.
const AllocMin = 1 << 20

// gib is a GiB in bytes, as a float.
const gib = float64(1 << 30)

// perGiB returns the median cost of op per GiB over the rows of at least
// AllocMin bytes, in ns.
func (d *data) perGiB(op string) (float64, bool) {
	var vs []float64
	for s, ns := range d.allocsAtLeast(op, AllocMin) {
		if v := ns / float64(s) * gib; valid(v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	return median(vs), true
}

// costList formats the per-GiB cost of each of ops that was measured:
// "cuMemHostAlloc 488 ms, cuMemFreeHost 136 ms".
func (d *data) costList(ops ...string) string {
	var parts []string
	for _, op := range ops {
		if v, ok := d.perGiB(op); ok {
			parts = append(parts, op+" "+units.DurationNs(v))
		}
	}
	return strings.Join(parts, ", ")
}

// allocationRule compares allocating pinned memory with a pool hit, and
// (with a GPU) cuMemHostAlloc with cuMemHostRegister for the pool's
// backend. Without a GPU the host backend's rows (mmap+mlock, munmap) stand
// in for the CUDA ones.
func allocationRule(d *data, c *choices) []Advice {
	noGPU := d.r.Machine.NoGPU != ""
	allocOps := []string{measure.OpHostAlloc, measure.OpRegister, measure.OpMmapLock}
	if noGPU {
		allocOps = []string{measure.OpMmapLock}
	}
	out := []Advice{poolHitLine(d, c, allocOps)}
	if !noGPU && (len(d.allocs[measure.OpHostAlloc]) > 0 || len(d.allocs[measure.OpRegister]) > 0 || len(d.allocs[measure.OpMmapLock]) == 0) {
		out = append(out, methodLine(d, c))
	}
	return out
}

// freeOf names the operation that undoes each allocation operation.
var freeOf = map[string]string{
	measure.OpHostAlloc: measure.OpFreeHost,
	measure.OpRegister:  measure.OpUnregister,
	measure.OpMmapLock:  measure.OpMunmap,
}

// poolHitLine compares a pool hit with the first of allocOps that was
// measured, at the nearest sizes.
func poolHitLine(d *data, c *choices, allocOps []string) Advice {
	op := ""
	for _, o := range allocOps {
		if len(d.allocs[o]) > 0 {
			op = o
			break
		}
	}
	if op == "" {
		return d.missing(TopicAllocation, "the cost of allocating pinned memory ("+strings.Join(allocOps, ", ")+")",
			"alloc", "register", "mlock", "mmap")
	}
	if op == measure.OpMmapLock {
		c.method = "host"
		c.from(TopicAllocation)
	}
	costs := d.costList(op, freeOf[op])
	hits := d.allocs[measure.OpPoolHit]
	if len(hits) == 0 {
		a := Advice{Topic: TopicAllocation, Measured: true}
		if v, ok := d.perGiB(op); ok {
			a.Advice = fmt.Sprintf("Get pinned buffers from a pinpool.Pool and reuse them rather than allocating per use: %s costs %s per GiB here.", op, units.DurationNs(v))
		} else {
			s, ns := largestRow(d.allocs[op])
			a.Advice = fmt.Sprintf("Get pinned buffers from a pinpool.Pool and reuse them rather than allocating per use: %s of %s costs %s here.", op, units.Size(s), units.DurationNs(ns))
		}
		a.Evidence = "per GiB (median of rows of 1 MiB and more): " + orNone(costs) + "; not measured: the pool hit"
		return a
	}
	hs, as := nearestSizes(sortedSizes(hits), sortedSizes(d.allocs[op]))
	hit, alloc := hits[hs], d.allocs[op][as]
	a := Advice{Topic: TopicAllocation, Measured: true}
	at := "at " + units.Size(as)
	if hs != as {
		at = fmt.Sprintf("at %s (pool hit at %s)", units.Size(as), units.Size(hs))
	}
	r, ok := ratio(alloc, hit)
	if ok && r > 1 {
		a.Advice = fmt.Sprintf("Get pinned buffers from a pinpool.Pool and reuse them rather than allocating per use: a pool hit costs %s against %s for %s (%s).",
			units.DurationNs(hit), units.DurationNs(alloc), op, times(r))
	} else {
		a.Advice = fmt.Sprintf("Do not expect a pool to save allocation time here: a pool hit costs %s against %s for %s.", units.DurationNs(hit), units.DurationNs(alloc), op)
	}
	a.Evidence = fmt.Sprintf("pool hit %s vs %s %s %s", units.DurationNs(hit), op, units.DurationNs(alloc), at)
	if ok {
		a.Evidence += " (" + times(r) + ")"
	}
	a.Evidence += "; per GiB (median of rows of 1 MiB and more): " + orNone(costs)
	return a
}

// methodLine picks the CUDA backend's method: cuMemHostAlloc or
// cuMemHostRegister, whichever costs less per GiB (with its free, when
// both frees were measured).
func methodLine(d *data, c *choices) Advice {
	ha, okA := d.perGiB(measure.OpHostAlloc)
	rg, okR := d.perGiB(measure.OpRegister)
	if !okA || !okR {
		var what []string
		if !okA {
			what = append(what, measure.OpHostAlloc)
		}
		if !okR {
			what = append(what, measure.OpRegister)
		}
		return d.missing(TopicAllocation, "the backend's method ("+strings.Join(what, " and ")+" per GiB, rows of 1 MiB and more)",
			"cuMemHost", "register", "hostalloc", "alloc")
	}
	fh, okF := d.perGiB(measure.OpFreeHost)
	ur, okU := d.perGiB(measure.OpUnregister)
	what := [2]string{measure.OpHostAlloc, measure.OpRegister}
	if okF && okU && valid(ha+fh) && valid(rg+ur) {
		ha, rg = ha+fh, rg+ur
		what = [2]string{measure.OpHostAlloc + " + " + measure.OpFreeHost, measure.OpRegister + " + " + measure.OpUnregister}
	}
	a := Advice{Topic: TopicAllocation, Measured: true,
		Evidence: "per GiB (median of rows of 1 MiB and more): " + d.costList(measure.OpHostAlloc, measure.OpFreeHost, measure.OpRegister, measure.OpUnregister) +
			"; cuMemHostRegister pins memory already touched: the Register method also prefaults fresh memory, which this figure leaves out"}
	c.from(TopicAllocation)
	if rg < ha {
		c.method = "register"
		r, _ := ratio(ha, rg)
		a.Advice = fmt.Sprintf("Back the pool with cudahost.Options{Method: cudahost.Register}: %s costs %s per GiB against %s for %s (%s).",
			what[1], units.DurationNs(rg), units.DurationNs(ha), what[0], times(r))
	} else {
		c.method = "hostalloc"
		r, _ := ratio(rg, ha)
		a.Advice = fmt.Sprintf("Back the pool with cudahost.Options{Method: cudahost.HostAlloc}: %s costs %s per GiB against %s for %s (%s).",
			what[0], units.DurationNs(ha), units.DurationNs(rg), what[1], times(r))
	}
	return a
}

// sortedSizes returns the keys of m, ascending.
func sortedSizes(m map[int64]float64) []int64 {
	out := make([]int64, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// nearestSizes returns the pair of sizes, one from each list (both sorted,
// not empty), closest on a log scale; the first such pair on a tie.
func nearestSizes(a, b []int64) (int64, int64) {
	ba, bb, best := a[0], b[0], math.Inf(1)
	for _, x := range a {
		for _, y := range b {
			if dist := math.Abs(math.Log2(float64(x)) - math.Log2(float64(y))); dist < best {
				ba, bb, best = x, y, dist
			}
		}
	}
	return ba, bb
}

// largestRow returns the largest size in m and its value.
func largestRow(m map[int64]float64) (int64, float64) {
	s := sortedSizes(m)
	return s[len(s)-1], m[s[len(s)-1]]
}

// orNone returns s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
