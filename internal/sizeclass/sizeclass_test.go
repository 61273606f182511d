package sizeclass

import (
	"errors"
	"math"
	"testing"
)

func TestCount(t *testing.T) {
	if got := Count(); got != 1408 {
		t.Fatalf("Count() = %d, want 1408", got)
	}
	if got := Size(Count() - 1); got != Max {
		t.Fatalf("Size(last) = %d, want Max %d", got, int64(Max))
	}
	if got := Size(0); got != PageSize {
		t.Fatalf("Size(0) = %d, want %d", got, PageSize)
	}
}

func TestRoundTable(t *testing.T) {
	tests := []struct {
		n       int64
		want    int64
		wantIdx int
	}{
		{1, 4096, 0},
		{4095, 4096, 0},
		{4096, 4096, 0},
		{4097, 8192, 1},
		{8192, 8192, 1},
		{8193, 12288, 2},
		{32767, 32768, 7},
		{32768, 32768, 7},
		{32769, 36864, 8},
		{36864, 36864, 8},
		{36865, 40960, 9},
		{65535, 65536, 15},
		{65536, 65536, 15},
		{65537, 73728, 16},
		{1 << 20, 1 << 20, 47},
		{1<<20 + 1, 1<<20 + 1<<17, 48},
		{3110400, 3145728, 59}, // one 1080p NV12 frame -> 3 MiB
		{1 << 30, 1 << 30, 127},
		{1<<30 + 1, 1<<30 + 8<<20, 128}, // above 1 GiB the step is 8 MiB
		{2233382994, 2248146944, 261},   // 2.08 GiB: 16 MiB steps, 14.8 MB of waste where eight classes a doubling wasted 260 MB
		{Max - 1, Max, 1407},
		{Max, Max, 1407},
	}
	for _, tt := range tests {
		got, err := Round(tt.n)
		if err != nil || got != tt.want {
			t.Errorf("Round(%d) = %d, %v; want %d", tt.n, got, err, tt.want)
		}
		idx, err := Index(tt.n)
		if err != nil || idx != tt.wantIdx {
			t.Errorf("Index(%d) = %d, %v; want %d", tt.n, idx, err, tt.wantIdx)
		}
	}
}

func TestInvalid(t *testing.T) {
	for _, n := range []int64{0, -1, -4096, math.MinInt64, Max + 1, Max + 4096, 1 << 41, math.MaxInt64} {
		if _, err := Index(n); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("Index(%d) error = %v, want ErrInvalidSize", n, err)
		}
		if _, err := Round(n); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("Round(%d) error = %v, want ErrInvalidSize", n, err)
		}
	}
}

func TestSizePanics(t *testing.T) {
	for _, idx := range []int{-1, Count(), math.MaxInt, math.MinInt} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Size(%d) did not panic", idx)
				}
			}()
			Size(idx)
		}()
	}
}

// TestPowersOfTwo checks 2^k-1, 2^k and 2^k+1 for every k up to 40.
func TestPowersOfTwo(t *testing.T) {
	for k := 0; k <= 40; k++ {
		p := int64(1) << k
		for _, n := range []int64{p - 1, p, p + 1} {
			if n <= 0 || n > Max {
				continue
			}
			checkRequest(t, n)
		}
		// A power of two >= one page is a class by itself.
		if p >= PageSize {
			if r, _ := Round(p); r != p {
				t.Errorf("Round(2^%d) = %d, want %d", k, r, p)
			}
		}
	}
}

// TestClasses walks every class and checks the properties that, together,
// prove the waste bound for every n: sizes strictly increase and are page
// aligned, each class is its own round-trip, and the worst request of a class
// (one byte above the previous class) respects the bound. Waste inside a
// class is largest for its smallest request, so checking that one suffices.
func TestClasses(t *testing.T) {
	prev := int64(0)
	for i := 0; i < Count(); i++ {
		s := Size(i)
		if s <= prev {
			t.Fatalf("Size(%d) = %d not above Size(%d) = %d", i, s, i-1, prev)
		}
		if s%PageSize != 0 {
			t.Fatalf("Size(%d) = %d not page aligned", i, s)
		}
		if idx, err := Index(s); err != nil || idx != i {
			t.Fatalf("Index(Size(%d)) = %d, %v", i, idx, err)
		}
		checkRequest(t, s)
		checkRequest(t, prev+1)
		if s > PageSize {
			checkRequest(t, s-1)
		}
		prev = s
	}
}

// checkRequest checks one request against every stated property.
func checkRequest(t *testing.T, n int64) {
	t.Helper()
	idx, err := Index(n)
	if err != nil {
		t.Fatalf("Index(%d): %v", n, err)
	}
	if idx < 0 || idx >= Count() {
		t.Fatalf("Index(%d) = %d out of range", n, idx)
	}
	c := Size(idx)
	r, err := Round(n)
	if err != nil || r != c {
		t.Fatalf("Round(%d) = %d, %v; Size(Index) = %d", n, r, err, c)
	}
	if c < n {
		t.Fatalf("Round(%d) = %d is smaller than the request", n, c)
	}
	if c%PageSize != 0 {
		t.Fatalf("Round(%d) = %d not page aligned", n, c)
	}
	waste := c - n
	if n > FineMin && FineWasteDivisor*waste >= n {
		t.Fatalf("Round(%d) = %d wastes %d bytes, not < n/%d", n, c, waste, FineWasteDivisor)
	}
	if n > LinearMax && WasteDivisor*waste >= n {
		t.Fatalf("Round(%d) = %d wastes %d bytes, not < n/%d", n, c, waste, WasteDivisor)
	}
	if n <= LinearMax && waste >= PageSize {
		t.Fatalf("Round(%d) = %d wastes %d bytes, not < one page", n, c, waste)
	}
	// The class is the smallest that fits: the one below is too small.
	if idx > 0 && Size(idx-1) >= n {
		t.Fatalf("Index(%d) = %d but class %d (%d bytes) fits", n, idx, idx-1, Size(idx-1))
	}
	if idx2 := mustIndex(t, c); idx2 != idx {
		t.Fatalf("Index(Round(%d)) = %d, want %d", n, idx2, idx)
	}
}

func mustIndex(t *testing.T, n int64) int {
	t.Helper()
	idx, err := Index(n)
	if err != nil {
		t.Fatalf("Index(%d): %v", n, err)
	}
	return idx
}

func TestMonotonicDense(t *testing.T) {
	// Every byte count up to 256 KiB: the index never decreases and never
	// skips a class.
	prev := 0
	for n := int64(1); n <= 256<<10; n++ {
		idx := mustIndex(t, n)
		if idx != prev && idx != prev+1 {
			t.Fatalf("Index(%d) = %d after %d", n, idx, prev)
		}
		prev = idx
	}
}

func TestZeroAllocs(t *testing.T) {
	n := int64(12345)
	allocs := testing.AllocsPerRun(100, func() {
		idx, _ := Index(n)
		_ = Size(idx)
		_, _ = Round(n)
		_, _ = Index(-1)
	})
	if allocs != 0 {
		t.Fatalf("allocations per run = %v, want 0", allocs)
	}
}

func FuzzRound(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 4095, 4096, 4097, 32768, 32769, 3110400, Max - 1, Max, Max + 1, math.MaxInt64, math.MinInt64} {
		f.Add(n, int64(1))
	}
	f.Fuzz(func(t *testing.T, n, d int64) {
		idx, err := Index(n)
		if n <= 0 || n > Max {
			if !errors.Is(err, ErrInvalidSize) {
				t.Fatalf("Index(%d) error = %v, want ErrInvalidSize", n, err)
			}
			if _, err := Round(n); !errors.Is(err, ErrInvalidSize) {
				t.Fatalf("Round(%d) error = %v, want ErrInvalidSize", n, err)
			}
			return
		}
		checkRequest(t, n)
		if mustIndex(t, Size(idx)) != idx {
			t.Fatalf("Index(Size(%d)) != %d", idx, idx)
		}
		// Monotonic: a second request n2 = n + |d| (clamped to Max).
		if d < 0 {
			d = -d
		}
		if d < 0 { // MinInt64
			d = math.MaxInt64
		}
		n2 := n + d
		if n2 > Max || n2 < n {
			n2 = Max
		}
		if idx2 := mustIndex(t, n2); idx2 < idx {
			t.Fatalf("Index(%d) = %d < Index(%d) = %d", n2, idx2, n, idx)
		}
	})
}

func BenchmarkIndex(b *testing.B) {
	sizes := []int64{100, 4097, 30000, 3110400, 1 << 30, 777777777}
	sink := 0
	for i := 0; b.Loop(); i++ {
		idx, _ := Index(sizes[i%len(sizes)])
		sink += idx
	}
	if sink < 0 {
		b.Fatal(sink)
	}
}

func BenchmarkRound(b *testing.B) {
	var sink int64
	n := int64(3110400)
	for b.Loop() {
		r, _ := Round(n)
		sink += r
	}
	if sink < 0 {
		b.Fatal(sink)
	}
}
