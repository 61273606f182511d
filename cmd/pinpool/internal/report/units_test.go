package report

import (
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFormatSize(t *testing.T) {
	tests := []struct {
		n                      int64
		table, compact, ticker string
	}{
		{0, "0 B", "0B", "0"},
		{1, "1 B", "1B", "1"},
		{1000, "1000 B", "1000B", "1000"},
		{1023, "1023 B", "1023B", "1023"},
		{1024, "1 KiB", "1KiB", "1K"},
		{1025, "1025 B", "1025B", "1025"},
		{1280, "1.25 KiB", "1.25KiB", "1.25K"},
		{1536, "1.5 KiB", "1.5KiB", "1.5K"},
		{4 << 10, "4 KiB", "4KiB", "4K"},
		{64 << 10, "64 KiB", "64KiB", "64K"},
		{1 << 20, "1 MiB", "1MiB", "1M"},
		{1<<20 + 1<<10, "1025 KiB", "1025KiB", "1025K"}, // 1.0009765625 MiB: not two decimals
		{16 << 20, "16 MiB", "16MiB", "16M"},
		{256 << 20, "256 MiB", "256MiB", "256M"},
		{1 << 30, "1 GiB", "1GiB", "1G"},
		{3 << 29, "1.5 GiB", "1.5GiB", "1.5G"},
		{1 << 40, "1 TiB", "1TiB", "1T"},
		{1 << 62, "4 EiB", "4EiB", "4E"},
		{math.MaxInt64, "9223372036854775807 B", "9223372036854775807B", "9223372036854775807"},
		{-4096, "-4 KiB", "-4KiB", "-4K"},
		{math.MinInt64, "-8 EiB", "-8EiB", "-8E"},
	}
	for _, tt := range tests {
		if got := units.Exact(tt.n); got != tt.table {
			t.Errorf("units.Exact(%d) = %q, want %q", tt.n, got, tt.table)
		}
		if got := compactSize(tt.n); got != tt.compact {
			t.Errorf("compactSize(%d) = %q, want %q", tt.n, got, tt.compact)
		}
		if got := tickSize(tt.n); got != tt.ticker {
			t.Errorf("tickSize(%d) = %q, want %q", tt.n, got, tt.ticker)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ns"},
		{42, "42 ns"},
		{999, "999 ns"},
		{1000, "1 µs"},
		{7574, "7.57 µs"},
		{12345, "12.3 µs"},
		{174 * time.Microsecond, "174 µs"},
		{999999, "1000 µs"}, // rounds within its unit
		{4560 * time.Microsecond, "4.56 ms"},
		{174084 * time.Microsecond, "174 ms"},
		{1500 * time.Millisecond, "1.5 s"},
		{90 * time.Second, "90 s"},
		{-2 * time.Microsecond, "-2 µs"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.d); got != tt.want {
			t.Errorf("formatDuration(%d) = %q, want %q", int64(tt.d), got, tt.want)
		}
	}
}

func TestFixedAndSig3(t *testing.T) {
	tests := []struct {
		v           float64
		fixed, sig3 string
	}{
		{55.478, "55.5", "55.5"},
		{9.5, "9.50", "9.50"},
		{0.5408, "0.54", "0.54"},
		{9.996, "10.0", "10.0"}, // the rounded value has two digits
		{99.96, "100.0", "100"},
		{100.8, "100.8", "101"},
		{0, "0.00", "0.00"},
	}
	for _, tt := range tests {
		if got := fixed(tt.v); got != tt.fixed {
			t.Errorf("fixed(%v) = %q, want %q", tt.v, got, tt.fixed)
		}
		if got := sig3(tt.v); got != tt.sig3 {
			t.Errorf("sig3(%v) = %q, want %q", tt.v, got, tt.sig3)
		}
	}
}

// parseSizeExact reads what formatSize wrote back into bytes, exactly;
// ok is false if it is not a whole number of bytes.
func parseSizeExact(s string) (n *big.Int, ok bool) {
	num, unit, found := strings.Cut(s, " ")
	if !found {
		return nil, false
	}
	i := slices.Index(units.Units, unit)
	if i < 0 {
		return nil, false
	}
	whole, frac, _ := strings.Cut(num, ".")
	digits, good := new(big.Int).SetString(whole+frac, 10)
	if !good {
		return nil, false
	}
	v := new(big.Int).Lsh(digits, uint(10*i))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, r := new(big.Int).QuoRem(v, den, new(big.Int))
	return q, r.Sign() == 0
}

// FuzzFormatSize checks that every size is written exactly (it reads back
// as itself), in the largest unit it fits with at most two decimals, and
// that the compact and tick forms are the same number without spaces.
func FuzzFormatSize(f *testing.F) {
	for _, n := range []int64{0, 1, 1023, 1024, 1536, 4 << 10, 1<<20 + 1, 1 << 30, 3 << 29, math.MaxInt64, math.MinInt64, -1} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		s := units.Exact(n)
		num, unit, _ := strings.Cut(s, " ")
		back, ok := parseSizeExact(s)
		if !ok || back.Cmp(big.NewInt(n)) != 0 {
			t.Fatalf("units.Exact(%d) = %q reads back as %v (exact: %v)", n, s, back, ok)
		}
		if _, frac, found := strings.Cut(num, "."); found && (len(frac) == 0 || len(frac) > 2 || strings.HasSuffix(frac, "0")) {
			t.Fatalf("units.Exact(%d) = %q: decimals %q", n, s, frac)
		}
		// Largest unit: the count is below 1024 of its unit, or not two
		// decimals in the next one up.
		i := slices.Index(units.Units, unit)
		abs := new(big.Int).Abs(big.NewInt(n))
		if whole, _, _ := strings.Cut(strings.TrimPrefix(num, "-"), "."); i > 0 && whole == "0" {
			t.Fatalf("units.Exact(%d) = %q: below one %s", n, s, unit)
		}
		if i+1 < len(units.Units) {
			up := new(big.Int).Lsh(big.NewInt(1), uint(10*(i+1)))
			hundredths := new(big.Int).Mul(abs, big.NewInt(100))
			if abs.Cmp(up) >= 0 && new(big.Int).Mod(hundredths, up).Sign() == 0 {
				t.Fatalf("units.Exact(%d) = %q, but it is exact in %s", n, s, units.Units[i+1])
			}
		}
		if c := compactSize(n); c != num+unit || strings.ContainsAny(c, " \t") {
			t.Fatalf("compactSize(%d) = %q, want %q", n, c, num+unit)
		}
		wantTick := num
		if unit != "B" {
			wantTick += unit[:1]
		}
		if tk := tickSize(n); tk != wantTick {
			t.Fatalf("tickSize(%d) = %q, want %q", n, tk, wantTick)
		}
	})
}
