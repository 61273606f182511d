package cuda

import (
	"fmt"
	"testing"
)

// TestPinnedRuns checks how copies of memory registered in parts are cut:
// a range inside one registration is one copy; a range over adjacent
// registrations is pinned and cut at each boundary; a range with a gap, or
// past the last part, is not known to be pinned.
func TestPinnedRuns(t *testing.T) {
	const base, part = uintptr(1 << 44), uintptr(64 << 20)
	for i := range uintptr(3) {
		addPinned(base+i*part, part)
	}
	addPinned(base+4*part, part) // a gap at part 3
	defer func() {
		for i := range uintptr(5) {
			removePinned(base + i*part)
		}
	}()
	for _, tc := range []struct {
		off, n uintptr
		known  bool
		runs   []uintptr
	}{
		{0, part, true, []uintptr{part}},
		{100, 4096, true, []uintptr{4096}},
		{part - 10, 20, true, []uintptr{10, 10}},
		{10, 3*part - 20, true, []uintptr{part - 10, part, part - 10}},
		{0, 3 * part, true, []uintptr{part, part, part}},
		{0, 3*part + 1, false, nil},      // one byte into the gap
		{2 * part, 3 * part, false, nil}, // over the gap
		{4*part + 8, part, false, nil},   // past the last part
	} {
		t.Run(fmt.Sprintf("%d+%d", tc.off, tc.n), func(t *testing.T) {
			p := base + tc.off
			if got := knownPinned(p, tc.n); got != tc.known {
				t.Fatalf("knownPinned = %v, want %v", got, tc.known)
			}
			if !tc.known {
				return
			}
			var runs []uintptr
			next := uintptr(0)
			r := eachRun(p, tc.n, func(off, q, n uintptr) Result {
				if off != next || q != p+off {
					t.Fatalf("run at offset %d (address %#x), want %d", off, q, next)
				}
				next += n
				runs = append(runs, n)
				return Success
			})
			if r != Success || fmt.Sprint(runs) != fmt.Sprint(tc.runs) {
				t.Fatalf("runs %v (%v), want %v", runs, r, tc.runs)
			}
		})
	}
	// A failure stops the copies.
	calls := 0
	if r := eachRun(base, 3*part, func(off, q, n uintptr) Result { calls++; return Result(1) }); r != Result(1) || calls != 1 {
		t.Fatalf("eachRun after a failure: %v after %d calls, want the failure after 1", r, calls)
	}
}
