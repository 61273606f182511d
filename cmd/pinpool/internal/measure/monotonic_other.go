//go:build !linux

package measure

// monotonic is 0 where CLOCK_MONOTONIC is not read.
func monotonic() int64 { return 0 }
