package transfer

import (
	"flag"
	"sync"
	"time"
)

// Flags of the test binary that set the busy wait's constants for a whole
// process, so that the GPU benchmarks can compare other values in
// processes of their own (scripts/gpu-compare.sh); negative leaves the
// default. They take effect when the first GPU test or benchmark starts,
// before any copier's lanes run.
var (
	endSpinFlag   = flag.Duration("transfer.endspin", -1, "endSpin for this process (negative: the default)")
	spinYieldFlag = flag.Duration("transfer.spinyield", -1, "spinYieldEvery for this process (negative: the default)")
	spinFlagsOnce sync.Once
)

// applySpinFlags sets endSpin and spinYieldEvery from their flags, once.
func applySpinFlags() {
	spinFlagsOnce.Do(func() {
		if *endSpinFlag >= 0 {
			endSpin = *endSpinFlag
		}
		if *spinYieldFlag >= 0 {
			spinYieldEvery = max(*spinYieldFlag, time.Nanosecond)
		}
	})
}
