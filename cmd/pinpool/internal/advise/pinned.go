package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// PinnedPays is the pinned/pageable bandwidth ratio from which pinned
// memory is worth its cost (locked memory the system cannot page out).
const PinnedPays = 1.2

// pinnedRule compares pinned with pageable copies, one line per direction.
func pinnedRule(d *data) []Advice {
	return []Advice{pinnedDir(d, measure.H2D), pinnedDir(d, measure.D2H)}
}

// pinnedDir finds the size from which pinned copies stay at least
// PinnedPays times as fast as pageable ones in direction dir.
func pinnedDir(d *data, dir measure.Direction) Advice {
	ps := d.points(dir, measure.Pinned, measure.Pageable)
	if len(ps) == 0 {
		return d.missing(TopicPinned, fmt.Sprintf("pinned vs pageable %s copies", dir), "pinned", "pageable")
	}
	last := ps[len(ps)-1]
	ev := fmt.Sprintf("pinned %s vs pageable %s at %s %s (%s); pinned/pageable by size: %s",
		gbps(last.num), gbps(last.den), units.Size(last.size), dir, times(last.ratio), sizeList(ps))
	a := Advice{Topic: TopicPinned, Evidence: ev, Measured: true}
	from := suffixFrom(ps, func(p point) bool { return p.ratio >= PinnedPays })
	switch {
	case from == 0:
		a.Advice = fmt.Sprintf("Use pinned memory for %s copies of every size: it is at least %s pageable at each size measured (%s).",
			dir, times(PinnedPays), sizeRange(ps))
	case from == len(ps):
		a.Advice = fmt.Sprintf("Keep %s data in pageable memory: pinned does not pay here (under %s pageable at %s, the largest size measured).",
			dir, times(PinnedPays), units.Size(last.size))
	default:
		a.Advice = fmt.Sprintf("Use pinned memory for %s copies of %s and more: pinned pays from %s (at least %s pageable), below it pageable is nearly as fast.",
			dir, units.Size(ps[from].size), units.Size(ps[from].size), times(PinnedPays))
	}
	return a
}
