package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// The host-side panels: what a report has with or without a GPU. Each
// carries its own legend inside, since its lines are not memory kinds.

// opStyles are the lines of the allocation panel, by operation.
var opStyles = map[string]kindStyle{
	measure.OpMmapLock:   {rgb(0xD5, 0x5E, 0x00), draw.CircleGlyph{}},
	measure.OpMunmap:     {rgb(0xE6, 0x9F, 0x00), draw.RingGlyph{}},
	measure.OpPoolHit:    {rgb(0x00, 0x00, 0x00), draw.CrossGlyph{}},
	measure.OpHostAlloc:  {rgb(0x00, 0x72, 0xB2), draw.BoxGlyph{}},
	measure.OpFreeHost:   {rgb(0x56, 0xB4, 0xE9), draw.SquareGlyph{}},
	measure.OpRegister:   {rgb(0x00, 0x9E, 0x73), draw.PyramidGlyph{}},
	measure.OpUnregister: {rgb(0xCC, 0x79, 0xA7), draw.TriangleGlyph{}},
}

// implStyles are the lines of the pool panel, by implementation.
var implStyles = map[string]kindStyle{
	measure.ImplPinpool: {rgb(0x00, 0x00, 0x00), draw.CrossGlyph{}},
	measure.ImplSeed:    {rgb(0xCC, 0x79, 0xA7), draw.CircleGlyph{}},
}

// styleOf returns the style for name from known, or the next of the
// others.
func styleOf(known map[string]kindStyle, name string, i int) kindStyle {
	if s, ok := known[name]; ok {
		return s
	}
	return otherStyles[i%len(otherStyles)]
}

// allocPanel draws the time per call of each allocation operation against
// the size, both on log axes, or returns nil without allocation rows.
func allocPanel(r *measure.Report) (*plot.Plot, error) {
	var rows []measure.Alloc
	for _, a := range r.Allocs {
		if a.Size > 0 && a.Median > 0 {
			rows = append(rows, a)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	ops := ordered([]string{measure.OpMmapLock, measure.OpMunmap, measure.OpHostAlloc, measure.OpFreeHost,
		measure.OpRegister, measure.OpUnregister, measure.OpPoolHit}, rows, func(a measure.Alloc) string { return a.Op })
	sizes := ordered(nil, rows, func(a measure.Alloc) int64 { return a.Size })
	p := newPanel("Allocation: time per call", "buffer size (bytes)", "time per call (median)")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks(sortedInt64(sizes))
	p.Y.Scale = plot.LogScale{}
	lo, hi := math.Inf(1), 0.0
	for _, a := range rows {
		lo, hi = min(lo, a.Median.Seconds()), max(hi, a.Median.Seconds())
	}
	p.Y.Tick.Marker = durationTicks(lo, hi)
	for i, op := range ops {
		var xys plotter.XYs
		for _, a := range rows {
			if a.Op == op {
				xys = append(xys, plotter.XY{X: float64(a.Size), Y: a.Median.Seconds()})
			}
		}
		if err := addLine(p, op, xys, styleOf(opStyles, op, i)); err != nil {
			return nil, err
		}
	}
	s := sortedInt64(sizes)
	p.X.Min, p.X.Max = float64(s[0])/math.Sqrt2, float64(s[len(s)-1])*math.Sqrt2
	p.Y.Min, p.Y.Max = decadeBelow(lo), decadeAbove(hi)
	return p, nil
}

// poolPanel draws Get+Release pairs per second over all goroutines
// against the goroutines, per pool implementation (log scale: the seed
// design and pinpool are orders of magnitude apart), or returns nil
// without pool rows.
func poolPanel(r *measure.Report) (*plot.Plot, error) {
	var rows []measure.PoolRun
	for _, p := range r.Pool {
		if p.Goroutines > 0 && p.OpsPerSec > 0 {
			rows = append(rows, p)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	title := "Pool: Get+Release pairs per second"
	if sizes := ordered(nil, rows, func(p measure.PoolRun) int64 { return p.Size }); len(sizes) == 1 {
		title += fmt.Sprintf(" (%s buffers)", tickSize(sizes[0]))
	}
	p := newPanel(title, "goroutines", "million pairs per second, all goroutines")
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	gs := ordered(nil, rows, func(p measure.PoolRun) int { return p.Goroutines })
	var xt plot.ConstantTicks
	for _, g := range gs {
		xt = append(xt, plot.Tick{Value: float64(g), Label: strconv.Itoa(g)})
	}
	p.X.Tick.Marker = xt
	lo, hi := math.Inf(1), 0.0
	for _, r := range rows {
		lo, hi = min(lo, r.OpsPerSec/1e6), max(hi, r.OpsPerSec/1e6)
	}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	impls := ordered([]string{measure.ImplPinpool, measure.ImplSeed}, rows, func(p measure.PoolRun) string { return p.Impl })
	for i, impl := range impls {
		var xys plotter.XYs
		for _, r := range rows {
			if r.Impl == impl {
				xys = append(xys, plotter.XY{X: float64(r.Goroutines), Y: r.OpsPerSec / 1e6})
			}
		}
		if err := addLine(p, impl, xys, styleOf(implStyles, impl, i)); err != nil {
			return nil, err
		}
	}
	minG, maxG := gs[0], gs[0]
	for _, g := range gs {
		minG, maxG = min(minG, g), max(maxG, g)
	}
	p.X.Min, p.X.Max = float64(minG)/math.Sqrt2, float64(maxG)*math.Sqrt2
	p.Y.Min, p.Y.Max = decadeBelow(lo), decadeAbove(hi)
	return p, nil
}

// hostCopyPanel draws the host memory copy bandwidth against the size,
// a line per goroutine count, or returns nil without such rows.
func hostCopyPanel(r *measure.Report) (*plot.Plot, error) {
	var rows []measure.HostCopy
	for _, h := range r.HostCopies {
		if h.Size > 0 && h.GBps > 0 && !math.IsInf(h.GBps, 0) {
			rows = append(rows, h)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	p := newPanel("Host memory copy: the ceiling of staging", "copy size (bytes)", "bandwidth (GB/s)")
	p.Legend.Left = false // the lines fall to the right: keep the legend off the small sizes
	sizes := sortedInt64(ordered(nil, rows, func(h measure.HostCopy) int64 { return h.Size }))
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks(sizes)
	ymax := 0.0
	for _, h := range rows {
		ymax = max(ymax, h.GBps)
	}
	ymax, yticks := linearTicks(ymax * 1.3) // room for the legend above the lines
	p.Y.Tick.Marker = yticks
	threads := ordered(nil, rows, func(h measure.HostCopy) int { return h.Threads })
	slices.Sort(threads)
	for i, n := range threads {
		var xys plotter.XYs
		for _, h := range rows {
			if h.Threads == n {
				xys = append(xys, plotter.XY{X: float64(h.Size), Y: h.GBps})
			}
		}
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		if err := addLine(p, goroutines(n), xys, threadStyles[i%len(threadStyles)]); err != nil {
			return nil, err
		}
	}
	p.X.Min, p.X.Max = float64(sizes[0])/math.Sqrt2, float64(sizes[len(sizes)-1])*math.Sqrt2
	p.Y.Min, p.Y.Max = 0, ymax
	return p, nil
}

// threadStyles are the lines of the host copy panel, by goroutine count in
// ascending order.
var threadStyles = []kindStyle{
	{rgb(0xD5, 0x5E, 0x00), draw.CircleGlyph{}},
	{rgb(0xE6, 0x9F, 0x00), draw.RingGlyph{}},
	{rgb(0x00, 0x9E, 0x73), draw.PyramidGlyph{}},
	{rgb(0x56, 0xB4, 0xE9), draw.TriangleGlyph{}},
	{rgb(0x00, 0x72, 0xB2), draw.BoxGlyph{}},
	{rgb(0xCC, 0x79, 0xA7), draw.SquareGlyph{}},
	{rgb(0x00, 0x00, 0x00), draw.CrossGlyph{}},
}

// newPanel returns a panel with the look of the bandwidth panels and a
// legend inside its top left corner.
func newPanel(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle = textStyle(boldFont, 13, color.Black)
	p.Title.Padding = 6
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle = textStyle(sansFont, 12, color.Black)
		a.Label.TextStyle.XAlign = draw.XCenter
		a.Label.Padding = 4
		a.Tick.Label = textStyle(sansFont, 11, color.Black)
		a.Tick.Length = 5
		a.LineStyle.Color = textGrey
		a.Tick.LineStyle.Color = textGrey
	}
	p.X.Label.TextStyle.YAlign = draw.YBottom
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XCenter, draw.YTop
	p.Y.Label.TextStyle.YAlign = draw.YBottom
	p.Y.Tick.Label.XAlign, p.Y.Tick.Label.YAlign = draw.XRight, draw.YCenter
	grid := plotter.NewGrid()
	grid.Vertical = draw.LineStyle{Color: gridColor, Width: vg.Points(0.7)}
	grid.Horizontal = grid.Vertical
	p.Add(grid)
	p.Legend.TextStyle = textStyle(sansFont, 11, color.Black)
	p.Legend.TextStyle.XAlign, p.Legend.TextStyle.YAlign = draw.XLeft, draw.YBottom
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.ThumbnailWidth = 24
	p.Legend.Padding = 4
	return p
}

// addLine adds a line with points, and its legend entry.
func addLine(p *plot.Plot, name string, xys plotter.XYs, s kindStyle) error {
	if len(xys) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("report: plot %s: %w", name, err)
	}
	line.LineStyle = draw.LineStyle{Color: s.color, Width: vg.Points(2)}
	points.GlyphStyle = draw.GlyphStyle{Color: s.color, Radius: vg.Points(3.5), Shape: s.glyph}
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	return nil
}

// durationTicks labels the powers of ten of seconds between lo and hi in
// the unit people read them in (10 ns, 1 µs, 1 ms, 1 s).
func durationTicks(lo, hi float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		ticks = append(ticks, plot.Tick{Value: v, Label: durationLabel(v)})
	}
	return ticks
}

// durationLabel writes a power of ten of seconds with its unit.
func durationLabel(s float64) string {
	for _, u := range []struct {
		name string
		in   float64
	}{{"s", 1}, {"ms", 1e-3}, {"µs", 1e-6}, {"ns", 1e-9}} {
		if s >= u.in*(1-1e-9) {
			return strconv.FormatFloat(round12(s/u.in), 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(s*1e9, 'g', 3, 64) + " ns"
}

func decadeBelow(v float64) float64 { return math.Pow(10, math.Floor(math.Log10(v))) }
func decadeAbove(v float64) float64 { return math.Pow(10, math.Ceil(math.Log10(v))) }

// sortedInt64 returns a sorted copy.
func sortedInt64(s []int64) []int64 { return slices.Sorted(slices.Values(s)) }
