package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"slices"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// poolRule compares pinpool's Get+Release throughput with the seed design's
// (one mutex, a map of lists) at the largest goroutine count both were
// measured with, and at one goroutine. A count whose two figures do not
// give a finite ratio counts as not measured.
func poolRule(d *data) Advice {
	var gs []int
	for k := range d.pool {
		if k.impl != measure.ImplPinpool {
			continue
		}
		if s, ok := d.pool[poolKey{measure.ImplSeed, k.goroutines}]; ok {
			if _, ok := ratio(d.pool[k], s); ok {
				gs = append(gs, k.goroutines)
			}
		}
	}
	if len(gs) == 0 {
		return d.missing(TopicPool, "pinpool vs seed-design Get+Release throughput at a common goroutine count", "pool", "seed")
	}
	slices.Sort(gs)
	top := gs[len(gs)-1]
	counts := []int{top}
	if gs[0] == 1 && top != 1 {
		counts = append(counts, 1)
	}
	var evs []string
	topRatio := 0.0
	for _, g := range counts {
		p, s := d.pool[poolKey{measure.ImplPinpool, g}], d.pool[poolKey{measure.ImplSeed, g}]
		r, _ := ratio(p, s) // valid: gs holds only such counts
		ev := fmt.Sprintf("%s: pinpool %s%s vs seed %s%s (%s)", goroutines(g), rate(p), perPair(p, g), rate(s), perPair(s, g), times(r))
		if g == top {
			topRatio = r
		}
		evs = append(evs, ev)
	}
	a := Advice{Topic: TopicPool, Measured: true,
		Evidence: "Get+Release pairs per second, all goroutines: " + strings.Join(evs, "; ")}
	if topRatio > 1 {
		a.Advice = fmt.Sprintf("Use pinpool.Pool rather than a single-mutex pool like the seed's: it serves %s the Get+Release pairs at %s.",
			times(topRatio), goroutines(top))
	} else {
		a.Advice = fmt.Sprintf("Do not count on pinpool.Pool for throughput here: it is not faster than the seed design at %s.", goroutines(top))
	}
	return a
}

// goroutines formats "1 goroutine", "16 goroutines".
func goroutines(g int) string {
	if g == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", g)
}

// perPair formats the time of one Get+Release pair on one goroutine (the
// report's NsPerOp), " (41 ns/pair)" or " (53 ns/pair per goroutine)", or
// nothing when it is not a valid figure.
func perPair(opsPerSec float64, g int) string {
	ns := float64(g) / opsPerSec * 1e9
	switch {
	case !valid(ns):
		return ""
	case g == 1:
		return " (" + units.DurationNs(ns) + "/pair)"
	}
	return " (" + units.DurationNs(ns) + "/pair per goroutine)"
}
