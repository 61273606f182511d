package transfer

import (
	"errors"
	"fmt"
	"testing"
)

// frameBytes is one 1080p NV12 frame of the seed article (1920×1080, 12
// bits a pixel): 3,110,400 bytes.
const frameBytes = 1920 * 1080 * 3 / 2

// sizeLabel is sizeName, with sizes that are not whole KiB in bytes (the
// frame size).
func sizeLabel(n int) string {
	if n%1024 != 0 {
		return fmt.Sprintf("%dB", n)
	}
	return sizeName(n)
}

// namedCopier is a copier that BenchmarkStagedSizes compares, up to size
// upTo (0: every size).
type namedCopier struct {
	name string
	c    *Copier
	upTo int
}

// shapeCopiers are the copiers BenchmarkStagedSizes compares: the default
// staging plan (DirectBelow off, so that every size is staged), and
// variants of its tuning measured against it in the same run.
func shapeCopiers(b *testing.B, g *gpu) []namedCopier {
	half := defaultTuning()
	half.coopShare = [2]int{2, 2} // cooperative up to half the window both ways
	opt := Options{DirectBelow: -1, Prewarm: true}
	return []namedCopier{
		{"plan=default", g.tunedCopier(b, opt, defaultTuning()), 0},
		{"plan=coop-half-window", g.tunedCopier(b, opt, half), 64 << 20},
	}
}

// tunedCopier is g.copier with tuning tu.
func (g *gpu) tunedCopier(tb testing.TB, opt Options, tu tuning) *Copier {
	tb.Helper()
	c, err := newCopier(g.pool, cudaDevice{g.ctx}, opt, tu)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, ErrClosed) {
			tb.Errorf("Close: %v", err)
		}
	})
	return c
}

// frameWays are the ways BenchmarkFrameStream and BenchmarkPacedFrames
// compare: the driver's copy, the default copier, and copiers without
// spinning and with 4 lanes. (Giving every transfer all 8 lanes however
// many run at once, instead of sharing them, was measured and dropped:
// docs/results/2026-12-01-transfer-shape.md.)
var frameWays = []frameWay{
	{"driver", nil},
	{"copier=default", func(tb testing.TB, g *gpu) *Copier { return g.copier(tb, Options{Prewarm: true}) }},
	{"copier=spin-off", func(tb testing.TB, g *gpu) *Copier { return g.copier(tb, Options{Prewarm: true, LaneSpin: -1}) }},
	{"copier=lanes-4", func(tb testing.TB, g *gpu) *Copier { return g.copier(tb, Options{Prewarm: true, Lanes: 4}) }},
}
