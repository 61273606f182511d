package report

import (
	"slices"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// kindsIn returns the kinds of the transfers, in measure.Kinds order,
// then any other kind in the order first seen.
func kindsIn(ts []measure.Transfer) []measure.Kind {
	return ordered(measure.Kinds, ts, func(t measure.Transfer) measure.Kind { return t.Kind })
}

// directionsIn returns the directions of the transfers, in
// measure.Directions order, then any other in the order first seen.
func directionsIn(ts []measure.Transfer) []measure.Direction {
	return ordered(measure.Directions, ts, func(t measure.Transfer) measure.Direction { return t.Dir })
}

// ordered returns the keys of rows that appear in known, in known's
// order, followed by the others in the order first seen.
func ordered[K comparable, R any](known []K, rows []R, key func(R) K) []K {
	seen := map[K]bool{}
	for _, r := range rows {
		seen[key(r)] = true
	}
	var out []K
	for _, k := range known {
		if seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	for _, r := range rows {
		if k := key(r); seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	return out
}

// inDirection returns the transfers in direction d, in report order.
func inDirection(ts []measure.Transfer, d measure.Direction) []measure.Transfer {
	var out []measure.Transfer
	for _, t := range ts {
		if t.Dir == d {
			out = append(out, t)
		}
	}
	return out
}

// sizesOf returns the distinct sizes of the transfers, ascending.
func sizesOf(ts []measure.Transfer) []int64 {
	var out []int64
	for _, t := range ts {
		if !slices.Contains(out, t.Size) {
			out = append(out, t.Size)
		}
	}
	slices.Sort(out)
	return out
}

// find returns the transfer of kind k and size n among ts (one
// direction's rows).
func find(ts []measure.Transfer, k measure.Kind, n int64) (measure.Transfer, bool) {
	for _, t := range ts {
		if t.Kind == k && t.Size == n {
			return t, true
		}
	}
	return measure.Transfer{}, false
}
