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

// namedCopier is a copier that BenchmarkStagedSizes compares.
type namedCopier struct {
	name string
	c    *Copier
}

// shapeCopiers are the copiers BenchmarkStagedSizes compares: the default
// staging plan (DirectBelow off, so that every size is staged), and
// variants of its tuning measured against it in the same run.
func shapeCopiers(b *testing.B, g *gpu) []namedCopier {
	whole := defaultTuning()
	whole.coopShare = 1 // cooperative up to the whole window
	opt := Options{DirectBelow: -1, Prewarm: true}
	return []namedCopier{
		{"plan=default", g.tunedCopier(b, opt, defaultTuning())},
		{"plan=coop-whole-window", g.tunedCopier(b, opt, whole)},
		{"plan=chunked-only", g.tunedCopier(b, opt, chunkedOnly())},
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
