package pause

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleep waits in nanosleep(2), again for what is left when a signal (the
// runtime's preemption signal among them) interrupts it.
func sleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var rem unix.Timespec
		if err := unix.Nanosleep(&ts, &rem); err != unix.EINTR {
			return
		}
		ts = rem
	}
}
