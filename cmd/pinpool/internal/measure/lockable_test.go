package measure

import (
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/units"
)

// needLockable skips the test unless need bytes can be locked here: with
// a GPU (whose pinned memory RLIMIT_MEMLOCK does not bound), or where
// RLIMIT_MEMLOCK, less what is locked, allows it.
func needLockable(t testing.TB, need int64) {
	t.Helper()
	if n, err := cuda.DeviceCount(); err == nil && n > 0 {
		return
	}
	n, limited, err := hostmem.LockAllowance()
	if err != nil || !limited || n >= uint64(need) {
		return
	}
	t.Skipf("needs %s of locked memory on the host backend; RLIMIT_MEMLOCK lets this process lock %s (ulimit -l raises it)",
		units.Size(need), units.Limit(n))
}
