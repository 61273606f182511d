// Package units writes byte counts the one way the tool, its reports and
// the library's messages use: binary units, a whole number when the count
// is one ("4 KiB", "16 MiB"), else three significant digits ("2.97 MiB",
// "251 GiB"); and, where a name must tell every size apart (benchmark
// names), exactly ("3037.5KiB").
package units

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Units are the binary units sizes are written in, smallest first.
var Units = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Parts splits a byte count into a number and a binary unit: the
// largest unit in which the count is written exactly with at most two
// decimals (1 GiB, 1.5 KiB, 1025 KiB, 1000 B). The result is exact, so
// that two different sizes never print the same.
func Parts(n int64) (num, unit string) {
	u := uint64(n)
	sign := ""
	if n < 0 {
		sign = "-"
		u = -u // two's complement: right for math.MinInt64 too
	}
	for i := len(Units) - 1; i > 0; i-- {
		shift := uint(10 * i)
		scale := uint64(1) << shift
		if u < scale {
			continue
		}
		whole, rem := u>>shift, u&(scale-1)
		if rem == 0 {
			return sign + strconv.FormatUint(whole, 10), Units[i]
		}
		// rem/scale as hundredths, if exact; rem < scale and 100 < scale,
		// so the 128-bit quotient fits.
		hi, lo := bits.Mul64(rem, 100)
		hundredths, r := bits.Div64(hi, lo, scale)
		if r != 0 {
			continue
		}
		frac := strings.TrimRight(strconv.FormatUint(hundredths+100, 10)[1:], "0")
		return sign + strconv.FormatUint(whole, 10) + "." + frac, Units[i]
	}
	return sign + strconv.FormatUint(u, 10), "B"
}

// Exact writes a byte count exactly, with a space: "4 KiB", "1.5 KiB",
// "3037.5 KiB".
func Exact(n int64) string {
	num, unit := Parts(n)
	return num + " " + unit
}

// Size writes a byte count for people: "4 KiB", "16 MiB" when it is a
// whole number of a unit, else three significant digits: "2.97 MiB",
// "251 GiB", "100 B"; from 1000 to 1024 of a unit, the whole number
// below ("1000 MiB", "1023 MiB"), never an exponent.
func Size(n int64) string {
	sign, u := "", uint64(n)
	if n < 0 {
		sign, u = "-", -u // two's complement: right for math.MinInt64 too
	}
	for i := len(Units) - 1; i > 0; i-- {
		scale := uint64(1) << (10 * i)
		if u < scale {
			continue
		}
		if u%scale == 0 {
			return sign + strconv.FormatUint(u/scale, 10) + " " + Units[i]
		}
		v := float64(u) / float64(scale)
		num := strconv.FormatFloat(v, 'g', 3, 64)
		if v >= 999.5 { // 'g' would write 1e+03: round down, so that it stays below the next unit
			num = strconv.FormatUint(u/scale, 10)
		}
		return sign + num + " " + Units[i]
	}
	return sign + strconv.FormatUint(u, 10) + " B"
}

// Limit is Size for a limit where math.MaxUint64 means none: "unlimited".
func Limit(n uint64) string {
	if n == math.MaxUint64 {
		return "unlimited"
	}
	if n > math.MaxInt64 {
		n = math.MaxInt64
	}
	return Size(int64(n))
}

// Compact writes a byte count without spaces, for benchmark names:
// "4KiB", "1GiB", "512B".
func Compact(n int64) string {
	num, unit := Parts(n)
	return num + unit
}

// Duration writes a time in the unit that fits it (ns, µs, ms or s)
// with about three significant digits and no trailing zeros: "41 ns",
// "41.7 ns", "12.3 µs", "4.56 ms", "2.5 s".
func Duration(d time.Duration) string { return DurationNs(float64(d)) }

// DurationNs is Duration of a fractional count of nanoseconds (a mean).
func DurationNs(ns float64) string {
	a := math.Abs(ns)
	switch {
	case math.IsNaN(ns) || math.IsInf(ns, 0):
		return "?"
	case a < 1e3:
		return trimmed(ns) + " ns"
	case a < 1e6:
		return trimmed(ns/1e3) + " µs"
	case a < 1e9:
		return trimmed(ns/1e6) + " ms"
	}
	return trimmed(ns/1e9) + " s"
}

// trimmed is Sig3 without trailing zeros: "1.5", "12.3", "230".
func trimmed(v float64) string {
	s := Sig3(v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Sig3 writes v with two decimals below 10, one below 100 and none above:
// about three significant digits. The decimals are those of the rounded
// value, so 9.999 is "10.0", not "10.00".
func Sig3(v float64) string {
	for _, d := range []struct {
		below    float64
		decimals int
	}{{10, 2}, {100, 1}} {
		if s := strconv.FormatFloat(v, 'f', d.decimals, 64); math.Abs(parseFloat(s)) < d.below {
			return s
		}
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// parseFloat reads back a number FormatFloat wrote.
func parseFloat(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
