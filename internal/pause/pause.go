// Package pause waits for short times (tens of microseconds to a few
// milliseconds) as long as asked. time.Sleep rounds such a wait up to about
// a millisecond when the process has nothing else to run: the runtime then
// waits for its next timer in epoll, whose timeout has millisecond
// resolution. The CUDA backend's lock gate pauses a few hundred
// microseconds between driver calls, and the arena measurement's neighbour
// copies every 200 µs; both lost most of their time to that rounding
// (BenchmarkFor measures what a pause takes).
package pause

import "time"

// For blocks the calling goroutine for d, or returns at once when d <= 0.
// On Linux the goroutine's thread sleeps in nanosleep(2) (the runtime
// hands its processor to other goroutines meanwhile), so the wait ends
// within the kernel's timer slack of d; elsewhere it is time.Sleep.
func For(d time.Duration) {
	if d <= 0 {
		return
	}
	sleep(d)
}

// Until blocks the calling goroutine until t, as For does.
func Until(t time.Time) { For(time.Until(t)) }
