package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	stdfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// ErrNothingToPlot is returned by Plot for a report with no transfer,
// allocation or pool rows to draw.
var ErrNothingToPlot = errors.New("report: no measurements to plot")

// errNoTransfers says that a report has no transfer rows to draw.
var errNoTransfers = errors.New("report: no transfer measurements")

// The look of the plot.
const (
	plotDPI = 144 // of the PNG: twice a 72 dpi point, sharp on most screens

	panelWidth  = 5 * vg.Inch
	panelHeight = 4.4 * vg.Inch
	panelGap    = 0.25 * vg.Inch
	margin      = 0.2 * vg.Inch
	legendGap   = 0.25 * vg.Inch
)

// legendTitle heads the legend.
const legendTitle = "memory kind"

var (
	sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	boldFont = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: stdfont.WeightBold}

	gridColor = color.Gray{Y: 215}
	textGrey  = color.Gray{Y: 90}
)

// kindStyle is the colour and glyph of a memory kind's line, the same in
// every panel. The colours are the Okabe–Ito palette, told apart with most
// colour vision deficiencies; the glyphs tell them apart in grey too.
type kindStyle struct {
	color color.Color
	glyph draw.GlyphDrawer
}

var kindStyles = map[measure.Kind]kindStyle{
	measure.Pageable:      {rgb(0xD5, 0x5E, 0x00), draw.CircleGlyph{}},
	measure.Pinned:        {rgb(0x00, 0x72, 0xB2), draw.BoxGlyph{}},
	measure.WriteCombined: {rgb(0x00, 0x9E, 0x73), draw.PyramidGlyph{}},
	measure.Registered:    {rgb(0xE6, 0x9F, 0x00), draw.RingGlyph{}},
	measure.Mapped:        {rgb(0xCC, 0x79, 0xA7), draw.SquareGlyph{}},
	measure.Staged:        {rgb(0x00, 0x00, 0x00), draw.CrossGlyph{}},
	measure.Batch:         {rgb(0x56, 0xB4, 0xE9), draw.TriangleGlyph{}},
}

// otherStyles are for kinds measure does not name, in turn.
var otherStyles = []kindStyle{
	{rgb(0x56, 0xB4, 0xE9), draw.TriangleGlyph{}},
	{rgb(0x88, 0x88, 0x88), draw.PlusGlyph{}},
	{rgb(0x8B, 0x45, 0x13), draw.CircleGlyph{}},
}

func rgb(r, g, b uint8) color.RGBA { return color.RGBA{R: r, G: g, B: b, A: 0xFF} }

// Plot draws what r measured into the image file at path. The first row
// has the transfer bandwidth against the transfer size: a panel per
// direction measured (H2D, D2H, both), side by side; in each a line with
// points per memory kind, the size on a log₂ axis and GB/s from 0 on a
// linear one, the same for all panels; one legend beside them. The second
// row has the host side, which a report has with or without a GPU: the
// time per call of each allocation operation against the size, the
// pools' Get+Release pairs per second against the goroutines, and the host
// memory copy bandwidth against the size (the ceiling of staging), each
// with its legend inside. A title names the GPU (or says there is none) and the
// date. The file's extension picks the format, ".png" or ".svg"; any other
// is an error, returned before anything is drawn. A report with nothing to
// draw gives ErrNothingToPlot. The file is written only once the image is
// complete.
func Plot(path string, r *measure.Report) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("report: plot %q: unsupported file extension %q (want .png or .svg)", path, filepath.Ext(path))
	}
	if r == nil {
		return fmt.Errorf("report: nil report")
	}
	bw, legend, err := bandwidthPanels(r)
	if err != nil && !errors.Is(err, errNoTransfers) {
		return err
	}
	var host []*plot.Plot
	for _, f := range []func(*measure.Report) (*plot.Plot, error){allocPanel, poolPanel, hostCopyPanel} {
		p, err := f(r)
		if err != nil {
			return err
		}
		if p != nil {
			host = append(host, p)
		}
	}
	if len(bw) == 0 && len(host) == 0 {
		return ErrNothingToPlot
	}

	// A tenth more than the legend needs in Liberation Sans: an SVG viewer
	// without it or Arial may draw its text in a wider font.
	var legendWidth vg.Length
	bwCols := 0 // the panels of the widest bandwidth row
	for _, row := range bw {
		bwCols = max(bwCols, len(row))
	}
	if len(bw) > 0 {
		legendWidth = 1.1 * max(legend.Rectangle(draw.Canvas{}).Size().X,
			textStyle(boldFont, 12, color.Black).Width(legendTitle))
	}
	rowWidth := func(n int) vg.Length { return vg.Length(n)*panelWidth + vg.Length(max(n-1, 0))*panelGap }
	width := 2*margin + max(rowWidth(bwCols)+legendGap+legendWidth, rowWidth(len(host)))
	// The title and subtitle wrap to the width of the panels and legend.
	title, subtitle := plotTitles(r, len(bw) > 0, len(bw) > 1)
	titleStyle := textStyle(boldFont, 15, color.Black)
	subStyle := textStyle(sansFont, 10.5, textGrey)
	titleLines := wrap(titleStyle, title, width-2*margin)
	subLines := wrap(subStyle, subtitle, width-2*margin)
	titleHeight := vg.Length(10)
	for _, l := range titleLines {
		titleHeight += titleStyle.Height(l) + 2
	}
	for _, l := range subLines {
		titleHeight += subStyle.Height(l) + 2
	}
	rows := len(bw)
	if len(host) > 0 {
		rows++
	}
	height := 2*margin + titleHeight + vg.Length(rows)*panelHeight + vg.Length(rows-1)*panelGap

	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if ext == ".png" {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(plotDPI))}
	} else {
		canvas = vgsvg.NewWith(vgsvg.UseWH(width, height))
	}
	c := draw.New(canvas)
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())

	// Title and subtitle, centred over everything.
	top := c.Max.Y - margin
	for _, l := range titleLines {
		c.FillText(titleStyle, vg.Point{X: c.Center().X, Y: top}, l)
		top -= titleStyle.Height(l) + 2
	}
	for _, l := range subLines {
		c.FillText(subStyle, vg.Point{X: c.Center().X, Y: top}, l)
		top -= subStyle.Height(l) + 2
	}

	// The bandwidth rows (one per device when there are several), the
	// legend to the right of the first, its top level with the top of the
	// panels' data areas; then the host row.
	rowTop := margin + titleHeight
	for i, row := range bw {
		body := draw.Crop(c, margin, -(width - margin - rowWidth(len(row))), height-rowTop-panelHeight, -rowTop)
		tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: panelGap}
		for j, p := range row {
			p.Draw(tiles.At(body, j, 0))
		}
		if i > 0 {
			rowTop += panelHeight + panelGap
			continue
		}
		dataTop := row[0].DataCanvas(tiles.At(body, 0, 0)).Max.Y
		lx := margin + rowWidth(bwCols) + legendGap
		lc := draw.Crop(c, lx, -(width - lx - legendWidth), height-rowTop-panelHeight, -rowTop)
		headStyle := textStyle(boldFont, 12, color.Black)
		headStyle.XAlign = draw.XLeft
		c.FillText(headStyle, vg.Point{X: lc.Min.X, Y: dataTop}, legendTitle)
		lc.Max.Y = dataTop - headStyle.Height(legendTitle) - 6
		legend.Draw(lc)
		rowTop += panelHeight + panelGap
	}
	if len(host) > 0 {
		body := draw.Crop(c, margin, -(width - margin - rowWidth(len(host))), height-rowTop-panelHeight, -rowTop)
		tiles := draw.Tiles{Rows: 1, Cols: len(host), PadX: panelGap}
		for i, p := range host {
			p.Draw(tiles.At(body, i, 0))
		}
	}

	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return fmt.Errorf("report: plot %q: encoding: %w", path, err)
	}
	out := buf.Bytes()
	if ext == ".svg" {
		out = svgFontFallback(out)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("report: plot: %w", err)
	}
	return nil
}

// svgFontFallback lets an SVG viewer without the Liberation fonts use
// Arial or Helvetica, whose letters have the same widths, rather than its
// default serif font.
func svgFontFallback(svg []byte) []byte {
	return bytes.ReplaceAll(svg,
		[]byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}

// plotTitles returns the image's title (the GPU and the date) and a
// subtitle saying what the numbers are and what was skipped, each as the
// pieces a line may break between. transfers says whether bandwidth panels
// are drawn, devices whether there is a row of them per device. The title
// names no setup hint (the reason there is no GPU is in the report and the
// table), and calls the memory pinned only where a GPU pinned it.
func plotTitles(r *measure.Report, transfers, devices bool) (title, subtitle []string) {
	m := r.Machine
	gpu := m.GPU
	switch {
	case gpu == "" && m.NoGPU != "":
		gpu = "no GPU"
	case gpu == "":
		gpu = "unknown GPU"
	}
	var about []string
	if d := driverLabel(m); d != "" {
		about = append(about, d)
	}
	if m.PCIe != "" {
		about = append(about, "PCIe "+m.PCIe)
	}
	if len(about) > 0 {
		gpu += " (" + strings.Join(about, ", ") + ")"
	}
	switch {
	case transfers:
		title = []string{"Host-device transfer bandwidth,", oneLine(gpu)}
	case m.GPU != "":
		title = []string{"Pinned host memory,", oneLine(gpu)}
	default:
		title = []string{"Locked host memory,", oneLine(gpu)}
	}
	if !r.Date.IsZero() {
		title[1] += ","
		title = append(title, r.Date.Format("2006-01-02 15:04 MST"))
	}
	subtitle = []string{"median of the repeats at each size"}
	if transfers {
		subtitle = append(subtitle, "1 GB/s = 10^9 bytes per second",
			`"both" runs H2D and D2H at once and sums the two directions`)
		if devices {
			subtitle = append(subtitle, "a row per device, then all at once (the bytes of all, summed)")
		}
	}
	if m.Hostname != "" {
		subtitle = append(subtitle, "host "+oneLine(m.Hostname))
	}
	// What was left out, so that a size missing from a panel is explained
	// (an allocation above RLIMIT_MEMLOCK, a kind the device lacks); the
	// reason there is no GPU is the title's.
	for _, sk := range r.Skipped {
		if sk == "transfers: no GPU" {
			continue
		}
		sk, _, _ = strings.Cut(oneLine(sk), ";") // the reason, without the remedy
		subtitle = append(subtitle, "skipped: "+sk)
	}
	if r.Partial {
		subtitle = append(subtitle, "partial: the run stopped early")
	}
	for i := range subtitle[:len(subtitle)-1] {
		subtitle[i] += ";"
	}
	return title, subtitle
}

// wrap joins pieces with spaces into lines no wider than width in style
// (a piece wider than that on a line of its own).
func wrap(style text.Style, pieces []string, width vg.Length) []string {
	var lines []string
	for _, p := range pieces {
		if n := len(lines); n > 0 && style.Width(lines[n-1]+" "+p) <= width {
			lines[n-1] += " " + p
			continue
		}
		lines = append(lines, p)
	}
	return lines
}

// bandwidthPanels returns the bandwidth panels, a row per device (and one
// for all devices at once) when there are several, else one row: a panel
// per direction measured, with the same axes within a row; and the legend
// of the kinds drawn.
func bandwidthPanels(r *measure.Report) ([][]*plot.Plot, plot.Legend, error) {
	groups := deviceGroups(r)
	var valid [][]measure.Transfer
	var names []string
	var every []measure.Transfer
	for _, g := range groups {
		// Only rows a log axis can place and a line can join.
		var ts []measure.Transfer
		for _, t := range g.rows {
			if t.Size > 0 && t.GBps >= 0 && !math.IsInf(t.GBps, 0) && !math.IsNaN(t.GBps) {
				ts = append(ts, t)
			}
		}
		if len(ts) > 0 {
			valid = append(valid, ts)
			names = append(names, g.name)
			every = append(every, ts...)
		}
	}
	if len(every) == 0 {
		return nil, plot.Legend{}, errNoTransfers
	}
	kinds := kindsIn(every)
	styles := map[measure.Kind]kindStyle{}
	for i, k := range kinds {
		s, ok := kindStyles[k]
		if !ok {
			s = otherStyles[i%len(otherStyles)]
		}
		styles[k] = s
	}
	var rows [][]*plot.Plot
	for i, ts := range valid {
		prefix := ""
		switch {
		case len(groups) > 1 && ts[0].Device == measure.AllDevices:
			prefix = "all at once, " // the subtitle says the bytes are summed
		case len(groups) > 1:
			prefix = names[i] + ", "
		}
		row, err := directionPanels(ts, prefix, kinds, styles)
		if err != nil {
			return nil, plot.Legend{}, err
		}
		rows = append(rows, row)
	}

	legend := plot.NewLegend()
	legend.TextStyle = textStyle(sansFont, 12, color.Black)
	legend.TextStyle.XAlign, legend.TextStyle.YAlign = draw.XLeft, draw.YBottom
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = 28
	legend.Padding = 5
	// The legend lists every kind drawn, in table order, with the
	// thumbnail of its line and glyph.
	for _, k := range kinds {
		s := styles[k]
		line := &plotter.Line{LineStyle: draw.LineStyle{Color: s.color, Width: vg.Points(2)}}
		points := &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: s.color, Radius: vg.Points(3.5), Shape: s.glyph}}
		legend.Add(string(k), line, points)
	}
	return rows, legend, nil
}

// directionPanels returns a panel per direction of ts (the rows of one
// device, or of all at once), with the same axes, titled after prefix.
func directionPanels(ts []measure.Transfer, prefix string, kinds []measure.Kind, styles map[measure.Kind]kindStyle) ([]*plot.Plot, error) {
	sizes := sizesOf(ts)
	xmin, xmax := float64(sizes[0])/math.Sqrt2, float64(sizes[len(sizes)-1])*math.Sqrt2
	ymax := 0.0
	for _, t := range ts {
		ymax = max(ymax, t.GBps)
	}
	ymax, yticks := linearTicks(ymax * 1.05)
	xticks := sizeTicks(sizes)

	var panels []*plot.Plot
	for _, d := range directionsIn(ts) {
		p := newPanel(prefix+panelTitle(d), "transfer size (bytes)", "bandwidth (GB/s)")
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = xticks
		p.Y.Tick.Marker = yticks

		dts := inDirection(ts, d)
		for _, k := range kinds {
			var xys plotter.XYs
			for _, n := range sizes {
				if t, ok := find(dts, k, n); ok {
					xys = append(xys, plotter.XY{X: float64(n), Y: t.GBps})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("report: plot %s %s: %w", d, k, err)
			}
			s := styles[k]
			line.LineStyle = draw.LineStyle{Color: s.color, Width: vg.Points(2)}
			points.GlyphStyle = draw.GlyphStyle{Color: s.color, Radius: vg.Points(3.5), Shape: s.glyph}
			p.Add(line, points)
		}
		// After Add, which widens the axes to the data.
		p.X.Min, p.X.Max = xmin, xmax
		p.Y.Min, p.Y.Max = 0, ymax
		panels = append(panels, p)
	}
	return panels, nil
}

// panelTitle names a direction above its panel.
func panelTitle(d measure.Direction) string {
	switch d {
	case measure.H2D:
		return "H2D: host to device"
	case measure.D2H:
		return "D2H: device to host"
	case measure.Both:
		return "both: H2D and D2H at once"
	}
	return string(d)
}

// textStyle returns a plain text style of the font at size points.
func textStyle(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{
		Color:   c,
		Font:    font.From(f, size),
		XAlign:  draw.XCenter,
		YAlign:  draw.YTop,
		Handler: plot.DefaultTextHandler,
	}
}

// sizeTicks returns the ticks of the size axis: a label at each size
// measured (or, past eight sizes, at powers of two spread over the range)
// and a small tick at every power of two between.
func sizeTicks(sizes []int64) plot.ConstantTicks {
	lo, hi := sizes[0], sizes[len(sizes)-1]
	labelled := sizes
	if len(sizes) > 8 {
		e0 := bitsLen(lo - 1) // ceil(log2 lo)
		e1 := bitsLen(hi) - 1 // floor(log2 hi)
		step := 1
		for (e1-e0)/step+1 > 8 {
			step *= 2
		}
		labelled = nil
		for e := e0; e <= e1; e += step {
			labelled = append(labelled, int64(1)<<e)
		}
	}
	var ticks plot.ConstantTicks
	for _, n := range labelled {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: tickSize(n)})
	}
	for e := bitsLen(lo - 1); e < 63 && int64(1)<<e <= hi; e++ {
		if n := int64(1) << e; !slices.Contains(labelled, n) {
			ticks = append(ticks, plot.Tick{Value: float64(n)})
		}
	}
	return ticks
}

// bitsLen is the number of bits n needs (0 for n ≤ 0).
func bitsLen(n int64) int {
	l := 0
	for ; n > 0; n >>= 1 {
		l++
	}
	return l
}

// linearTicks returns the top of a linear axis from 0 that holds v
// (niceCeil) and its labelled ticks.
func linearTicks(v float64) (top float64, ticks plot.ConstantTicks) {
	top, step := niceCeil(v)
	for i := 0; float64(i)*step <= top*(1+1e-9); i++ {
		t := round12(float64(i) * step)
		ticks = append(ticks, plot.Tick{Value: t, Label: strconv.FormatFloat(t, 'f', -1, 64)})
	}
	return top, ticks
}

// niceCeil returns the top of the bandwidth axis, v rounded up to a
// multiple of a round step, and the step between its labels: about five
// to ten of them, at 1, 2 or 5 times a power of ten (105 → 120 by 20,
// 57.8 → 60 by 10, 17.9 → 18 by 2).
func niceCeil(v float64) (top, step float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1, 0.2
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	switch {
	case v/p < 2:
		step = p / 5
	case v/p < 5:
		step = p / 2
	default:
		step = p
	}
	return round12(math.Ceil(v/step-1e-9) * step), step
}

// round12 rounds v to 12 significant digits, dropping the float error of
// multiples of steps like 0.2 (0.6000000000000001) from axis labels.
func round12(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return r
}
