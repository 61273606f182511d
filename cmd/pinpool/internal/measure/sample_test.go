package measure

import (
	"math"
	"testing"
	"time"
)

func TestSamplesSummary(t *testing.T) {
	for _, tc := range []struct {
		in          samples
		med, lo, hi time.Duration
	}{
		{nil, 0, 0, 0},
		{samples{5}, 5, 5, 5},
		{samples{9, 1}, 5, 1, 9},
		{samples{3, 1, 2}, 2, 1, 3},
		{samples{10, 40, 20, 30}, 25, 10, 40},
	} {
		med, lo, hi := tc.in.summary()
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("%v: got %v %v %v, want %v %v %v", tc.in, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}

func TestSamplesEnough(t *testing.T) {
	p := Plan{MinRepeats: 3, MinTime: 10, MaxRepeats: 5}
	for _, tc := range []struct {
		in   samples
		want bool
	}{
		{samples{100, 100}, false},     // too few
		{samples{1, 1, 1}, false},      // too short
		{samples{5, 5, 5}, true},       // both reached
		{samples{1, 1, 1, 1, 1}, true}, // the cap
	} {
		if got := tc.in.enough(p); got != tc.want {
			t.Errorf("%v: enough = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestTransferRow(t *testing.T) {
	r := transferRow(Pinned, Both, 1e9, samples{time.Second, 2 * time.Second, 3 * time.Second}, "cuda-events", 10)
	if r.GBps != 1 || r.Median != 2*time.Second || r.Repeats != 3 || r.Bytes() != 2e9 {
		t.Fatalf("row %+v", r)
	}
	if g := gbps(1, 0); g != 0 || math.IsNaN(g) {
		t.Fatalf("gbps of zero time = %v", g)
	}
}

// FuzzRotor checks that every window the rotor hands out lies in the arena,
// is 4 KiB aligned, and that the windows cycle.
func FuzzRotor(f *testing.F) {
	f.Add(int64(4096), int64(1<<20))
	f.Add(int64(1), int64(1))
	f.Add(int64(5000), int64(12000))
	f.Add(int64(1<<30), int64(1<<30))
	f.Fuzz(func(t *testing.T, size, arena int64) {
		if size < 1 || size > 1<<34 || arena < size || arena > 1<<36 {
			t.Skip()
		}
		r := newRotor(size, arena)
		first := r.offset()
		if first != 0 {
			t.Fatalf("first offset %d", first)
		}
		for range 100 {
			off := r.offset()
			if off < 0 || off+size > arena || off%4096 != 0 {
				t.Fatalf("size %d arena %d: offset %d", size, arena, off)
			}
		}
	})
}

// TestSamplesRuns: the repeats split into at most the asked number of
// consecutive batches, in order, none lost, sizes differing by at most one.
func TestSamplesRuns(t *testing.T) {
	const want = 10
	if r := (samples{}).runs(want); len(r) != 0 {
		t.Errorf("no samples: %v", r)
	}
	if r := (samples{4, 8, 6}).runs(0); len(r) != 1 || r[0] != (RepeatRun{3, 6}) {
		t.Errorf("three samples in at most 0 runs (1): %v", r)
	}
	if r := (samples{4, 8}).runs(want); len(r) != 2 || r[0] != (RepeatRun{1, 4}) || r[1] != (RepeatRun{1, 8}) {
		t.Errorf("two samples: %v", r)
	}
	var s samples
	for i := range 23 {
		s = append(s, time.Duration(i))
	}
	r := s.runs(want)
	if len(r) != want {
		t.Fatalf("%d runs of 23 samples, want %d", len(r), want)
	}
	n, lo := 0, 0
	for i, run := range r {
		if run.N != 2 && run.N != 3 {
			t.Errorf("run %d of %d repeats", i, run.N)
		}
		// The mean of lo .. lo+N-1 (rounded down, as Duration division).
		if want := time.Duration((2*lo + run.N - 1) / 2); run.Mean != want {
			t.Errorf("run %d: mean %v, want %v", i, run.Mean, want)
		}
		n += run.N
		lo += run.N
	}
	if n != 23 {
		t.Errorf("%d repeats in the runs, want 23", n)
	}
}
