package units

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSize(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {100, "100 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1536, "1.5 KiB"},
		{4 << 10, "4 KiB"}, {3110400, "2.97 MiB"}, {3112960, "2.97 MiB"}, {3 << 20, "3 MiB"},
		{16 << 20, "16 MiB"}, {269888364544, "251 GiB"}, {1 << 40, "1 TiB"}, {-4096, "-4 KiB"}, {math.MinInt64, "-8 EiB"},
	} {
		if got := Size(tt.n); got != tt.want {
			t.Errorf("Size(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := Limit(math.MaxUint64); got != "unlimited" {
		t.Errorf("Limit(max) = %q", got)
	}
	if got := Limit(8 << 20); got != "8 MiB" {
		t.Errorf("Limit(8 MiB) = %q", got)
	}
	if got, want := Exact(3110400), "3037.5 KiB"; got != want {
		t.Errorf("Exact(3110400) = %q, want %q", got, want)
	}
	if got, want := Compact(3110400), "3037.5KiB"; got != want {
		t.Errorf("Compact(3110400) = %q, want %q", got, want)
	}
}

func TestSizeUnitBoundaries(t *testing.T) {
	const (
		KiB = int64(1) << 10
		MiB = int64(1) << 20
		GiB = int64(1) << 30
	)
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{999, "999 B"}, {1000, "1000 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1025, "1 KiB"},
		{999*KiB + 400, "999 KiB"}, {999*KiB + 600, "999 KiB"}, {1000 * KiB, "1000 KiB"}, {1000*KiB + 512, "1000 KiB"},
		{1023*KiB + 1023, "1023 KiB"}, {MiB - 1, "1023 KiB"}, {MiB, "1 MiB"}, {MiB + 1, "1 MiB"},
		{1000 * MiB, "1000 MiB"}, {1020 * MiB, "1020 MiB"}, {GiB - 1, "1023 MiB"}, {GiB, "1 GiB"},
		{995 * MiB, "995 MiB"}, {99*MiB + MiB/2, "99.5 MiB"}, {-(1000 * MiB), "-1000 MiB"},
		{1<<63 - 1, "8 EiB"}, {(1 << 60) - 1, "1023 PiB"},
	} {
		if got := Size(tt.n); got != tt.want {
			t.Errorf("Size(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// FuzzSize checks that Size writes every count as people write sizes: a
// plain number of at most four digits before an optional fraction, a
// space and a unit, within half a percent of the count.
func FuzzSize(f *testing.F) {
	for _, n := range []int64{0, 1, 1000, 1023, 1024, 1 << 20, 1000 << 20, 1<<30 - 1, 3110400, -1, math.MaxInt64, math.MinInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		s := Size(n)
		num, unit, ok := strings.Cut(s, " ")
		if !ok || strings.ContainsAny(num, "eE+") {
			t.Fatalf("Size(%d) = %q: not a number, a space and a unit", n, s)
		}
		i := slices.Index(Units, unit)
		if i < 0 {
			t.Fatalf("Size(%d) = %q: unknown unit", n, s)
		}
		whole, _, _ := strings.Cut(strings.TrimPrefix(num, "-"), ".")
		if len(whole) > 4 || i > 0 && len(whole) == 4 && whole > "1023" {
			t.Fatalf("Size(%d) = %q: %s digits before the point", n, s, whole)
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			t.Fatalf("Size(%d) = %q: %v", n, s, err)
		}
		if want := float64(n); math.Abs(v*math.Ldexp(1, 10*i)-want) > 0.005*math.Abs(want) {
			t.Fatalf("Size(%d) = %q: %g bytes", n, s, v*math.Ldexp(1, 10*i))
		}
	})
}
