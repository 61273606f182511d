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
// "251 GiB", "100 B".
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
		return sign + strconv.FormatFloat(float64(u)/float64(scale), 'g', 3, 64) + " " + Units[i]
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
