package units

import (
	"math"
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
