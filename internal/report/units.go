package report

import (
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"strconv"
	"time"
)

// sizeParts splits a byte count into a number and a binary unit (see
// units.Parts).
func sizeParts(n int64) (num, unit string) { return units.Parts(n) }

// formatSize writes a byte count for tables: "4 KiB", "1 GiB", "512 B".
func formatSize(n int64) string { return units.Size(n) }

// compactSize writes a byte count without spaces, for benchmark names:
// "4KiB", "1GiB", "512B".
func compactSize(n int64) string { return units.Compact(n) }

// tickSize writes a byte count as a short axis label: "4K", "64K", "1M",
// "1G", "512".
func tickSize(n int64) string {
	num, unit := sizeParts(n)
	if unit == "B" {
		return num
	}
	return num + unit[:1]
}

// formatDuration writes a time in the unit that fits it (ns, µs, ms or
// s) with about three significant digits: "850 ns", "12.3 µs", "4.56 ms".
func formatDuration(d time.Duration) string {
	v := float64(d)
	a := math.Abs(v)
	switch {
	case a < 1e3:
		return strconv.FormatInt(int64(d), 10) + " ns"
	case a < 1e6:
		return sig3(v/1e3) + " µs"
	case a < 1e9:
		return sig3(v/1e6) + " ms"
	}
	return sig3(v/1e9) + " s"
}

// sig3 writes v with two decimals below 10, one below 100 and none above:
// about three significant digits. The decimals are those of the rounded
// value, so 9.999 is "10.0", not "10.00".
func sig3(v float64) string {
	for _, d := range []struct {
		below    float64
		decimals int
	}{{10, 2}, {100, 1}} {
		if s := strconv.FormatFloat(v, 'f', d.decimals, 64); math.Abs(parse(s)) < d.below {
			return s
		}
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// fixed writes v with one decimal, or two below 10: the table format of
// bandwidths and latencies ("55.3", "8.42"). As in sig3, the decimals are
// those of the rounded value.
func fixed(v float64) string {
	if s := strconv.FormatFloat(v, 'f', 2, 64); math.Abs(parse(s)) < 10 {
		return s
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// parse reads back a number FormatFloat wrote.
func parse(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
