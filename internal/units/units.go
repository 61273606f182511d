// Package units writes byte counts the one way the tool and the reports
// use: binary units, exact ("1.5 KiB", never a rounded figure that two
// sizes could share).
package units

import (
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

// Size writes a byte count for people: "4 KiB", "1 GiB", "512 B".
func Size(n int64) string {
	num, unit := Parts(n)
	return num + " " + unit
}

// Compact writes a byte count without spaces, for benchmark names:
// "4KiB", "1GiB", "512B".
func Compact(n int64) string {
	num, unit := Parts(n)
	return num + unit
}
