package advise

import (
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"testing"
)

func TestFormat(t *testing.T) {
	tests := []struct{ got, want string }{
		{units.Size(4 << 10), "4 KiB"},
		{units.Size(2 << 20), "2 MiB"},
		{units.Size(1 << 30), "1 GiB"},
		{units.Size(frame), "2.97 MiB"},
		{units.Size(100), "100 B"},
		{units.Size(3 << 29), "1.5 GiB"},
		{units.Size(math.MaxInt64), "8 EiB"},
		{sizeCode(2 << 20), "2 << 20"},
		{sizeCode(4 << 10), "4 << 10"},
		{sizeCode(1 << 30), "1 << 30"},
		{sizeCode(512), "512"},
		{num(55.43), "55.4"},
		{num(9.367), "9.37"},
		{num(41), "41"},
		{num(100.7), "101"},
		{num(0.1170), "0.117"},
		{num(2.5e-5), "2.50e-05"},
		{num(3e9), "3e+09"},
		{num(math.NaN()), "?"},
		{gbps(1.9), "1.9 GB/s"},
		{times(5.91), "5.9×"},
		{times(1.05), "1.05×"},
		{times(0.92), "0.92×"},
		{times(157.9), "158×"},
		{times(0.01), "0.01×"},
		{percent(1.1), "10%"},
		{percent(1.05), "5%"},
		{percent(1.034), "3.4%"},
		{percent(0.9), "-10%"},
		{units.Duration(41), "41 ns"},
		{units.Duration(230e3), "230 µs"},
		{units.Duration(1.17e6), "1.17 ms"},
		{units.Duration(2.5e9), "2.5 s"},
		{rate(300e6), "300 M/s"},
		{rate(1.9e6), "1.9 M/s"},
		{rate(12e3), "12 k/s"},
		{pct(0.28), "28%"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestPow2Round(t *testing.T) {
	tests := []struct {
		in   float64
		want int64
	}{
		{2.12 * (1 << 20), 2 << 20},
		{2.9 * (1 << 20), 4 << 20}, // log2 21.54 rounds up
		{2.8 * (1 << 20), 2 << 20}, // log2 21.49 rounds down
		{4096, 4096},
		{0.3, 1},
		{math.NaN(), 1},
		{-5, 1},
		{1e30, 1 << 62},
	}
	for _, tt := range tests {
		if got := pow2Round(tt.in); got != tt.want {
			t.Errorf("pow2Round(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestBytesOf(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want int64
	}{{float64(math.MaxInt64), 1 << 62}, {math.Inf(1), 1}, {0, 1}, {3e6, 3e6}} {
		if got := bytesOf(tt.in); got != tt.want {
			t.Errorf("bytesOf(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
