package report

import (
	"encoding/xml"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cmd/pinpool/internal/measure"
)

// decodePNG reads the PNG file at path.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return img
}

// countColors counts, in one pass, the pixels of img that are exactly
// each of colors.
func countColors(img image.Image, colors []color.Color) []int {
	type rgb struct{ r, g, b uint32 }
	index := map[rgb]int{}
	for i, c := range colors {
		r, g, b, _ := c.RGBA()
		index[rgb{r, g, b}] = i
	}
	counts := make([]int, len(colors))
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if i, ok := index[rgb{r, g, b}]; ok {
				counts[i]++
			}
		}
	}
	return counts
}

func TestPlotPNG(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "bandwidth.png")
	if err := Plot(full, transfersOnly(h200Report())); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, full)
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	// Three 5 in panels side by side at 144 dpi, 4.4 in high plus the
	// title: wider than three panels, and landscape.
	if w < 3*5*plotDPI || w > 20*plotDPI || float64(h) < 4.4*plotDPI || h > 6*plotDPI {
		t.Errorf("image is %d×%d px, want about %d×%d", w, h, 18*plotDPI, 5*plotDPI)
	}
	if got := img.At(0, 0); !sameColor(got, color.White) {
		t.Errorf("corner pixel %v, want white", got)
	}
	// Each kind's line is drawn in its colour.
	var colors []color.Color
	for _, k := range measure.Kinds {
		colors = append(colors, kindStyles[k].color)
	}
	for i, n := range countColors(img, colors) {
		if n < 200 {
			t.Errorf("%s: %d pixels of its colour, want a line's worth", measure.Kinds[i], n)
		}
	}

	// One direction: one panel, narrower by two panels and their gaps.
	// The layout is the same in either format: the SVG (in points) is
	// measured, as rasterising a second PNG under the race detector takes
	// seconds.
	one := filepath.Join(dir, "UPPER.SVG") // an upper-case extension is accepted
	if err := Plot(one, transfersOnly(without(h200Report(), func(t measure.Transfer) bool { return t.Dir != measure.H2D }))); err != nil {
		t.Fatal(err)
	}
	w1, h1 := svgSize(t, one)
	w1, h1 = w1/72*plotDPI, h1/72*plotDPI // in pixels of the PNG
	wantNarrower := float64(2*(panelWidth+panelGap)) / 72 * plotDPI
	if d := float64(w) - w1; d < wantNarrower-2 || d > wantNarrower+2 {
		t.Errorf("one panel is %v px narrower than three, want %v", d, wantNarrower)
	}
	// The same panels, under a title wrapped to more lines.
	if h1 <= float64(h) || h1 > 7*plotDPI {
		t.Errorf("one panel is %v px high, three %d: want a little higher", h1, h)
	}
}

// svgSize returns the width and height, in points, of the SVG at path.
func svgSize(t *testing.T, path string) (w, h float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<svg width="([0-9.]+)pt" height="([0-9.]+)pt"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no size in the svg element", path)
	}
	w, _ = strconv.ParseFloat(string(m[1]), 64)
	h, _ = strconv.ParseFloat(string(m[2]), 64)
	return w, h
}

// transfersOnly is r without its host-side rows (one row of panels).
func transfersOnly(r *measure.Report) *measure.Report {
	c := *r
	c.Allocs, c.Pool = nil, nil
	return &c
}

// TestPlotHostSide: a report without a GPU still draws its allocation
// costs and pool throughput (the README's main command, run without a GPU,
// promises a plot); with a GPU they form a second row under the bandwidth.
func TestPlotHostSide(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "host.png")
	if err := Plot(host, noGPUReport()); err != nil {
		t.Fatalf("no-GPU report: %v", err)
	}
	img := decodePNG(t, host)
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if w < 3*5*plotDPI || w > 16*plotDPI || float64(h) < 4.4*plotDPI || h > 6*plotDPI {
		t.Errorf("three host panels: image is %d×%d px", w, h)
	}
	colors := []color.Color{opStyles[measure.OpMmapLock].color, opStyles[measure.OpMunmap].color,
		implStyles[measure.ImplPinpool].color, implStyles[measure.ImplSeed].color, threadStyles[2].color}
	// The host copy lines (1 and 2 goroutines) share colours with the
	// allocation panel's; the third style is theirs alone, and unused.
	colors = colors[:4]
	for i, n := range countColors(img, colors) {
		if n < 100 {
			t.Errorf("line %d: %d pixels of its colour, want a line's worth", i, n)
		}
	}
	both := filepath.Join(dir, "both.svg") // the layout of the PNG, faster
	if err := Plot(both, h200Report()); err != nil {
		t.Fatal(err)
	}
	if _, h2 := svgSize(t, both); h2 < 2*4.4*72 {
		t.Errorf("bandwidth and host rows: %v pt high, want two rows", h2)
	}
}

func sameColor(a, b color.Color) bool {
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}

func TestPlotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bandwidth.svg")
	if err := Plot(path, h200Report()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var root string
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	all := strings.Join(texts, "\n")
	want := []string{
		"NVIDIA H200", "2026-05-04 09:30 UTC", // the title
		"H2D: host to device", "D2H: device to host", "both: H2D and D2H at once",
		"transfer size (bytes)", "bandwidth (GB/s)", "memory kind",
	}
	for _, k := range measure.Kinds {
		want = append(want, string(k))
	}
	for _, s := range want {
		if !strings.Contains(all, s) {
			t.Errorf("no text %q in the SVG; texts:\n%s", s, all)
		}
	}
	for _, tick := range []string{"4K", "64K", "1M", "16M", "256M", "1G", "0", "100"} {
		if !slices.Contains(texts, tick) {
			t.Errorf("no tick label %q in the SVG", tick)
		}
	}
}

func TestPlotErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		report  *measure.Report
		noData  bool     // errors.Is(err, ErrNothingToPlot)
		message []string // in the error
	}{
		{"pdf", "bw.pdf", h200Report(), false, []string{"report: ", `".pdf"`, ".png", ".svg"}},
		{"no extension", "bw", h200Report(), false, []string{"report: ", ".png", ".svg"}},
		// The extension is checked before the data.
		{"bad extension, no data", "bw.jpg", noGPUReport(), false, []string{`".jpg"`, ".png", ".svg"}},
		{"nothing measured png", "bw.png", &measure.Report{}, true, []string{"report: "}},
		{"nothing measured svg", "bw.svg", &measure.Report{}, true, []string{"report: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			err := Plot(path, tt.report)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrNothingToPlot); got != tt.noData {
				t.Errorf("errors.Is(%v, ErrNothingToPlot) = %v, want %v", err, got, tt.noData)
			}
			for _, s := range tt.message {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("%s was written (stat: %v)", tt.file, err)
			}
		})
	}
}

func TestSizeTicks(t *testing.T) {
	labels := func(sizes []int64) (major []string, minor int) {
		for _, tk := range sizeTicks(sizes) {
			if tk.Label == "" {
				minor++
			} else {
				major = append(major, tk.Label)
			}
		}
		return major, minor
	}
	major, minor := labels(fixtureSizes)
	if want := []string{"4K", "64K", "1M", "16M", "256M", "1G"}; !slices.Equal(major, want) {
		t.Errorf("labels %q, want %q", major, want)
	}
	if minor != 19-6 { // the other powers of two from 4K to 1G
		t.Errorf("%d minor ticks, want 13", minor)
	}
	var every []int64
	for n := 4 * kib; n <= gib; n *= 2 {
		every = append(every, n)
	}
	// Past eight sizes, labels at every 16× (the step doubles until
	// eight or fewer are left), the rest minor ticks.
	major, minor = labels(every)
	if want := []string{"4K", "64K", "1M", "16M", "256M"}; !slices.Equal(major, want) || minor != 19-5 {
		t.Errorf("19 sizes: labels %q and %d minor ticks, want %q and 14", major, minor, want)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ v, top, step float64 }{
		{106.05, 120, 20}, {58.3, 60, 10}, {17.9, 18, 2}, {100, 100, 20}, {0.42, 0.45, 0.05}, {0, 1, 0.2},
	} {
		if top, step := niceCeil(tt.v); top != tt.top || step != tt.step {
			t.Errorf("niceCeil(%v) = %v, %v; want %v, %v", tt.v, top, step, tt.top, tt.step)
		}
	}
}

// TestPlotTitles: the title names no setup hint and calls memory pinned
// only where a GPU pinned it; sizes left out (above RLIMIT_MEMLOCK) are
// noted; a partial run says so.
func TestPlotTitles(t *testing.T) {
	r := noGPUReport()
	r.Machine.NoGPU = "libcuda.so.1 not found; set PINPOOL_LIBCUDA to its path"
	r.Skipped = []string{"transfers: no GPU", "allocation 16 MiB, 256 MiB: above RLIMIT_MEMLOCK (8 MiB); `pinpool info` says how to raise it"}
	r.Partial = true
	title, sub := plotTitles(r, false, false)
	tt, st := strings.Join(title, " "), strings.Join(sub, " ")
	if strings.Contains(tt, "PINPOOL_LIBCUDA") || strings.Contains(tt, "Pinned") || !strings.Contains(tt, "no GPU") {
		t.Errorf("title %q", tt)
	}
	if !strings.Contains(st, "skipped: allocation 16 MiB, 256 MiB: above RLIMIT_MEMLOCK (8 MiB)") ||
		strings.Contains(st, "pinpool info") || strings.Contains(st, "transfers: no GPU") || !strings.Contains(st, "partial") {
		t.Errorf("subtitle %q", st)
	}
	if title, _ := plotTitles(h200Report(), false, false); !strings.HasPrefix(title[0], "Pinned") {
		t.Errorf("GPU title %q", title)
	}
}

// TestPlotSeveralDevices: with several devices every device's transfers
// are drawn, a row of panels each, and those of all at once (before, the
// panels showed device 0 only).
func TestPlotSeveralDevices(t *testing.T) {
	rows, _, err := bandwidthPanels(twoDevices())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows of panels, want 3 (device 0, device 1, all at once)", len(rows))
	}
	for i, want := range []string{"device 0, ", "device 1, ", "all at once, "} {
		if got := rows[i][0].Title.Text; !strings.HasPrefix(got, want) {
			t.Errorf("row %d titled %q, want %q...", i, got, want)
		}
	}
	one, two := filepath.Join(t.TempDir(), "one.svg"), filepath.Join(t.TempDir(), "two.svg")
	if err := Plot(one, h200Report()); err != nil {
		t.Fatal(err)
	}
	if err := Plot(two, twoDevices()); err != nil {
		t.Fatal(err)
	}
	_, h1 := svgSize(t, one)
	if _, h2 := svgSize(t, two); h2-h1 < 2*4*72 {
		t.Errorf("two devices: %v pt high against %v for one, want two more rows", h2, h1)
	}
}
