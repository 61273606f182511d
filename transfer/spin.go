package transfer

import (
	"runtime"
	"time"
)

// spinYieldEvery is how long spinUntil busy-waits between two yields of
// the processor. A yield (runtime.Gosched) goes through the scheduler's
// global lock: lanes that yielded after every look, as the package's spin
// once did, spent much of their time on that lock and delayed the
// goroutines that did the work, a transfer's first copy among them. The
// value was chosen between yielding often, which suits host-to-device
// frames, and rarely, which suits device-to-host ones and spends less CPU
// time (BenchmarkFrameStream). Yielding now and
// then still lets another goroutine of the same processor run.
var spinYieldEvery = 20 * time.Microsecond

// spinLooks is how many looks spinUntil takes between two readings of the
// clock.
const spinLooks = 16

// spinUntil calls ready, with a CPU pause in between, until it reports
// true or limit has passed; a negative limit means no limit, zero one
// call. It reports ready's last answer. It is the package's one busy wait:
// for waits shorter than a thread wake-up (a lane's next transfer, the
// issue lock, a cooperative chunk's DMA, the lanes of a transfer that end
// together), where sleeping would cost more than the wait. It yields the
// processor every spinYieldEvery.
func spinUntil(ready func() bool, limit time.Duration) bool {
	if ready() {
		return true
	}
	if limit == 0 {
		return false
	}
	start := time.Now()
	var yielded time.Duration
	for {
		for range spinLooks {
			cpuRelax()
			if ready() {
				return true
			}
		}
		spun := time.Since(start)
		if limit > 0 && spun >= limit {
			return false
		}
		if spun-yielded >= spinYieldEvery {
			runtime.Gosched()
			yielded = spun
		}
	}
}
