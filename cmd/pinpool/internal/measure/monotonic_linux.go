package measure

import "golang.org/x/sys/unix"

// monotonic is CLOCK_MONOTONIC in nanoseconds: the clock other processes
// (Python's time.monotonic_ns) read too.
func monotonic() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
