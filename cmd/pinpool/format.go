package main

import (
	"fmt"
	"math"
)

// formatBytes renders n in binary units with three significant digits
// ("3.00 MiB"); math.MaxUint64 reads "unlimited".
func formatBytes(n uint64) string {
	if n == math.MaxUint64 {
		return "unlimited"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v /= unit
		if v < unit || u == "PiB" {
			switch {
			case v < 10:
				return fmt.Sprintf("%.2f %s", v, u)
			case v < 100:
				return fmt.Sprintf("%.1f %s", v, u)
			}
			return fmt.Sprintf("%.0f %s", v, u)
		}
	}
	panic("unreachable")
}

// yesNo renders a boolean for tables.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
