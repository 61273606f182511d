package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// stagedRule compares copies of ordinary []byte through the transfer
// engine (staged) with the driver's pageable copy and with pinned memory,
// at the largest size measured, one line per direction.
func stagedRule(d *data) []Advice {
	return []Advice{stagedDir(d, measure.H2D), stagedDir(d, measure.D2H)}
}

// stagedDir is stagedRule for one direction.
func stagedDir(d *data, dir measure.Direction) Advice {
	ps := d.points(dir, measure.Staged, measure.Pageable)
	if len(ps) == 0 {
		return d.missing(TopicStaged, fmt.Sprintf("staged vs pageable %s copies", dir), "staged", "pageable")
	}
	last := ps[len(ps)-1]
	ev := fmt.Sprintf("staged %s vs pageable %s at %s %s (%s)",
		gbps(last.num), gbps(last.den), units.Size(last.size), dir, times(last.ratio))
	if p, ok := d.bw[transferKey{measure.Pinned, dir, last.size}]; ok {
		if r, ok := ratio(last.num, p); ok {
			ev += fmt.Sprintf("; pinned %s (staged reaches %s of it)", gbps(p), pct(r))
		}
	}
	a := Advice{Topic: TopicStaged, Evidence: ev, Measured: true}
	if last.ratio > 1 {
		a.Advice = fmt.Sprintf("Move large []byte %s copies through transfer.Copier: staging them through pinned buffers runs %s the driver's pageable copy at %s.",
			dir, times(last.ratio), units.Size(last.size))
	} else {
		a.Advice = fmt.Sprintf("Do not stage %s []byte copies for speed: the transfer engine is not faster than the driver's pageable copy at %s; put data that moves often in pinned pool buffers instead.",
			dir, units.Size(last.size))
	}
	return a
}

// pct formats a fraction as a whole percentage: 0.28 → "28%".
func pct(f float64) string { return num(math.Round(f*100)) + "%" }

// registeredRule compares copies of registered memory (Copier.Register)
// with staged copies at the largest size measured in each direction: for
// buffers that are copied many times, registration's one-off cost buys
// pinned speed.
func registeredRule(d *data) Advice {
	var evs []string
	best := 0.0
	for _, dir := range []measure.Direction{measure.H2D, measure.D2H} {
		ps := d.points(dir, measure.Registered, measure.Staged)
		if len(ps) == 0 {
			continue
		}
		last := ps[len(ps)-1]
		evs = append(evs, fmt.Sprintf("registered %s vs staged %s at %s %s (%s)",
			gbps(last.num), gbps(last.den), units.Size(last.size), dir, times(last.ratio)))
		best = max(best, last.ratio)
	}
	if len(evs) == 0 {
		return d.missing(TopicRegistered, "registered vs staged copies", "registered", "register", "staged")
	}
	a := Advice{Topic: TopicRegistered, Evidence: strings.Join(evs, "; "), Measured: true}
	if best > 1 {
		a.Advice = fmt.Sprintf("Register []byte buffers that are reused for many copies (transfer.Copier.Register): their copies then skip staging and run up to %s faster.", times(best))
	} else {
		a.Advice = "Do not register buffers for speed: registered copies are not faster than staged ones here."
	}
	return a
}
