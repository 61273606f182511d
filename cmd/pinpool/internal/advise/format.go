package advise

import (
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"strconv"
	"strings"
)

// num formats a finite value with about three significant digits and no
// trailing zeros: 55.4, 9.37, 0.117, 101, 28537, 41. A value that is not finite, which the rules
// never pass, prints as "?" rather than NaN or Inf.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "?"
	case a == 0:
		return "0"
	case a >= 1e7:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return trimZeros(strconv.FormatFloat(v, 'f', 1, 64))
	case a >= 1:
		return trimZeros(strconv.FormatFloat(v, 'f', 2, 64))
	case a >= 0.001:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'e', 2, 64)
}

// trimZeros drops the trailing zeros of a decimal fraction: "41.0" →
// "41", "1.90" → "1.9".
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// gbps formats a bandwidth: "55.4 GB/s".
func gbps(v float64) string { return num(v) + " GB/s" }

// times formats a ratio: "5.9×", "158×", and two decimals below 2, near
// the rules' thresholds: "1.05×", "0.92×".
func times(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "?×"
	case a >= 10 && a < 1e7:
		return strconv.FormatFloat(v, 'f', 0, 64) + "×"
	case a >= 2 && a < 10:
		return strconv.FormatFloat(v, 'f', 1, 64) + "×"
	case a >= 0.1 && a < 2:
		return strconv.FormatFloat(v, 'f', 2, 64) + "×"
	}
	return num(v) + "×"
}

// percent formats the fraction v-1 as a percentage: 1.1 → "10%", 1.034
// → "3.4%"; an absurd ratio (a million and more) as a ratio instead.
func percent(v float64) string {
	if math.Abs(v) >= 1e6 {
		return times(v)
	}
	p := (v - 1) * 100
	if math.Abs(p) >= 10 {
		return num(math.Round(p)) + "%"
	}
	r := math.Round(p*10) / 10
	if r == math.Trunc(r) {
		return strconv.FormatFloat(r, 'f', 0, 64) + "%"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "%"
}

// rate formats a rate in operations per second: "296 M/s".
func rate(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return num(v/1e9) + " G/s"
	case a >= 1e6:
		return num(v/1e6) + " M/s"
	case a >= 1e3:
		return num(v/1e3) + " k/s"
	}
	return num(v) + "/s"
}

// sizeCode writes a power of two as Go code: "2 << 20", "4 << 10", "512".
func sizeCode(n int64) string {
	for _, s := range []uint{30, 20, 10} {
		if n >= 1<<s && n%(1<<s) == 0 {
			return fmt.Sprintf("%d << %d", n>>s, s)
		}
	}
	return strconv.FormatInt(n, 10)
}

// pow2Round rounds a positive size to the nearest power of two on a log
// scale, between 1 and 1<<62.
func pow2Round(c float64) int64 {
	if !valid(c) {
		return 1
	}
	k := math.Round(math.Log2(c))
	k = max(0, min(62, k))
	return int64(1) << uint(k)
}

// sizeList formats "4 KiB 1.05×, 16 KiB 1.07×, ..." for points' ratios.
func sizeList(ps []point) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = units.Size(p.size) + " " + times(p.ratio)
	}
	return strings.Join(parts, ", ")
}

// sizeRange formats the sizes of ps: "4 KiB to 1 GiB", or one size.
func sizeRange(ps []point) string {
	if len(ps) == 1 {
		return units.Size(ps[0].size)
	}
	return units.Size(ps[0].size) + " to " + units.Size(ps[len(ps)-1].size)
}

// bytesOf converts a positive size in bytes to an int64, within 1 and
// 1<<62 (a float64 can exceed math.MaxInt64).
func bytesOf(f float64) int64 {
	if !valid(f) || f < 1 {
		return 1
	}
	return int64(min(f, 1<<62))
}
