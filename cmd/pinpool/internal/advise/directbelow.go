package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"strings"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// crossing is where, in one direction, staged copies become faster than
// the driver's pageable copy.
type crossing struct {
	dir   measure.Direction
	ps    []point // staged/pageable by size
	at    float64 // the crossover size in bytes; 0 when staging never wins
	from  int     // index of the first point of the winning run
	every bool    // staging wins at every size measured
}

// crossover finds where the staged/pageable ratio of ps reaches 1 and
// stays there up to the largest size: interpolated on a log scale between
// the last size where staging loses and the first where it wins.
func crossover(dir measure.Direction, ps []point) crossing {
	c := crossing{dir: dir, ps: ps}
	c.from = suffixFrom(ps, func(p point) bool { return p.ratio >= 1 })
	switch {
	case c.from == len(ps):
		return c
	case c.from == 0:
		c.every = true
		c.at = float64(ps[0].size)
		return c
	}
	lo, hi := ps[c.from-1], ps[c.from]
	t := (1 - lo.ratio) / (hi.ratio - lo.ratio) // in (0, 1]: lo < 1 <= hi
	l0, l1 := math.Log2(float64(lo.size)), math.Log2(float64(hi.size))
	c.at = math.Exp2(l0 + t*(l1-l0))
	if !valid(c.at) {
		c.at = float64(hi.size)
	}
	return c
}

// describe says where staging wins in one direction, with the sizes
// around the crossover.
func (c crossing) describe() string {
	switch {
	case c.at == 0:
		last := c.ps[len(c.ps)-1]
		return fmt.Sprintf("%s: staged is not faster than pageable at %s (%s)", c.dir, units.Size(last.size), times(last.ratio))
	case c.every:
		return fmt.Sprintf("%s: staged is faster than pageable at every size measured (%s at %s)", c.dir, times(c.ps[0].ratio), units.Size(c.ps[0].size))
	}
	lo, hi := c.ps[c.from-1], c.ps[c.from]
	return fmt.Sprintf("%s: staged/pageable crosses 1 at about %s (%s %s, %s %s)",
		c.dir, units.Size(bytesOf(c.at)), units.Size(lo.size), times(lo.ratio), units.Size(hi.size), times(hi.ratio))
}

// directBelowRule sets transfer.Options.DirectBelow at the size where
// staged copies become faster than the driver's pageable copy: the
// crossover of each direction, their midpoint on a log scale when both
// were measured, rounded to a power of two.
func directBelowRule(d *data, c *choices) Advice {
	var cs []crossing
	for _, dir := range []measure.Direction{measure.H2D, measure.D2H} {
		if ps := d.points(dir, measure.Staged, measure.Pageable); len(ps) > 0 {
			cs = append(cs, crossover(dir, ps))
		}
	}
	if len(cs) == 0 {
		return d.missing(TopicDirectBelow, "staged vs pageable copies by size", "staged", "pageable")
	}
	var evs []string
	logSum, n := 0.0, 0
	for _, x := range cs {
		evs = append(evs, x.describe())
		if x.at > 0 {
			logSum += math.Log2(x.at)
			n++
		}
	}
	a := Advice{Topic: TopicDirectBelow, Measured: true}
	c.from(TopicDirectBelow)
	if n == 0 {
		c.directNever = true
		a.Advice = "Set transfer.Options{DirectBelow: math.MaxInt}: staging is not faster than the driver's pageable copy at the largest sizes measured, so keep []byte copies direct."
		a.Evidence = strings.Join(evs, "; ")
		return a
	}
	nb := pow2Round(math.Exp2(logSum / float64(n)))
	c.directBelow = nb
	a.Advice = fmt.Sprintf("Set transfer.Options{DirectBelow: %s} (%s): smaller []byte copies go straight through the driver, larger ones are staged, where staging is faster.",
		sizeCode(nb), units.Size(nb))
	note := "rounded to a power of two"
	switch {
	case n > 1:
		note = "the midpoint of the directions on a log scale, " + note
	case len(cs) > 1:
		note += "; the direction where staging never wins was left out"
	}
	a.Evidence = strings.Join(evs, "; ") + "; " + note
	return a
}
