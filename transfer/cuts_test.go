package transfer

import "testing"

// checkCuts checks that c's chunks cover [0, n) in order, without gap or
// overlap, none empty or longer than max.
func checkCuts(t *testing.T, c cuts, n, max int) {
	t.Helper()
	next := 0
	for i := range c.count() {
		off, m := c.at(i)
		if off != next || m <= 0 || m > max {
			t.Fatalf("%+v: chunk %d is [%d, +%d), want it at %d, 1..%d bytes", c, i, off, m, next, max)
		}
		next = off + m
	}
	if next != n {
		t.Fatalf("%+v: chunks end at %d, want %d", c, next, n)
	}
}

func TestCuts(t *testing.T) {
	for _, tc := range []struct {
		n, unit, ramp, k int
		wantHead         int
	}{
		{1, 64, 0, 8, 0},
		{100 << 20, 2 << 20, 512 << 10, 8, 8},
		{64<<20 + 17, 2 << 20, 512 << 10, 8, 8},
		{2*8*(512<<10) + 8*(2<<20), 2 << 20, 512 << 10, 8, 8}, // just enough
		{2*8*(512<<10) + 8*(2<<20) - 1, 2 << 20, 512 << 10, 8, 0},
		{frameBytes, 389 << 10, 0, 8, 0},
		{10 << 20, 2 << 20, 2 << 20, 4, 0}, // ramp not below unit: uniform
	} {
		c := rampCuts(tc.n, tc.unit, tc.ramp, tc.k)
		if c.head != tc.wantHead || c.tail != tc.wantHead {
			t.Errorf("rampCuts(%d, %d, %d, %d) = %+v, want %d ramp chunks at each end", tc.n, tc.unit, tc.ramp, tc.k, c, tc.wantHead)
		}
		checkCuts(t, c, tc.n, tc.unit)
	}
}

func FuzzCuts(f *testing.F) {
	f.Add(64<<20, 2<<20, 512<<10, 8)
	f.Add(1, 1, 0, 1)
	f.Fuzz(func(t *testing.T, n, unit, ramp, k int) {
		if n <= 0 || n > 1<<34 || unit <= 0 || unit > 1<<30 || k <= 0 || k > 256 || ramp < 0 || ramp > 1<<30 || n/unit > 1<<16 {
			t.Skip()
		}
		if ramp > 0 && n/ramp > 1<<16 {
			t.Skip()
		}
		checkCuts(t, rampCuts(n, unit, ramp, k), n, unit)
	})
}
