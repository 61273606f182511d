package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"3110400", 3110400}, {"3MiB", 3 << 20}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30},
		{"1gib", 1 << 30}, {"4KiB", 4096}, {"4k", 4096}, {"2M", 2 << 20}, {"1T", 1 << 40},
		{"2GB", 2e9}, {"5kB", 5000}, {"7 MiB", 7 << 20}, {" 12B ", 12}, {"1.5GiB", 3 << 29},
		{"0.5KiB", 512}, {".25MiB", 1 << 18}, {"1.0001KiB", 1024}, {"9223372036854775807", math.MaxInt64},
		{"8388607TiB", 8388607 << 40},
	} {
		got, err := parseBytes(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{
		"", " ", "-1", "+1", "MiB", "1.", ".", "1..2", "1.2.3KiB", "3 MiBs", "1e6", "0x10",
		"9223372036854775808", "8388608TiB", "99999999999999999999", "1.5", "1.5B", "1 2", "3Mi",
	} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	for _, tt := range []struct {
		n    byteSize
		want string
	}{{0, "0"}, {3110400, "3110400"}, {1 << 30, "1GiB"}, {3 << 20, "3MiB"}, {1536, "1536"}, {2048, "2KiB"}} {
		if got := tt.n.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", int64(tt.n), got, tt.want)
		}
	}
}

// FuzzParseBytes checks that parseBytes never panics, never returns a
// negative count, agrees with the unit arithmetic, and reads back what
// byteSize.String writes.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"3110400", "3MiB", "64MiB", "1GiB", "1.5gb", "", "-1", "1..", "18446744073709551616", ".9T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseBytes(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseBytes(%q) = %d", s, n)
		}
		back, err := parseBytes(byteSize(n).String())
		if err != nil || back != n {
			t.Fatalf("parseBytes(%q) = %d, whose String %q reads %d, %v", s, n, byteSize(n).String(), back, err)
		}
		// An integer with a unit is exactly their product.
		trimmed := strings.ToLower(strings.TrimSpace(s))
		for unit, mult := range byteUnits {
			num, ok := strings.CutSuffix(trimmed, unit)
			num = strings.TrimSpace(num)
			if !ok || unit == "" || num == "" || strings.Trim(num, "0123456789") != "" {
				continue
			}
			v, err := strconv.ParseInt(num, 10, 64)
			if err == nil && v*mult != n {
				t.Fatalf("parseBytes(%q) = %d, want %d*%d", s, n, v, mult)
			}
		}
	})
}
