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

// formatDuration writes a time as units.Duration does.
func formatDuration(d time.Duration) string { return units.Duration(d) }

// sig3 writes v with about three significant digits (units.Sig3).
func sig3(v float64) string { return units.Sig3(v) }

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
