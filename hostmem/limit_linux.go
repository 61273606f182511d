package hostmem

import (
	"errors"
	"fmt"
	"github.com/pinpool/pinpool/internal/units"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// LockLimit returns the soft and hard RLIMIT_MEMLOCK of the process in bytes;
// math.MaxUint64 means unlimited. A process with CAP_IPC_LOCK may lock more
// than the limit.
func LockLimit() (soft, hard uint64, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return 0, 0, fmt.Errorf("hostmem: getrlimit(RLIMIT_MEMLOCK): %w", err)
	}
	return limitValue(rl.Cur), limitValue(rl.Max), nil
}

// limitValue maps RLIM_INFINITY to math.MaxUint64 (the same bits on Linux,
// spelled out so the meaning does not depend on that).
func limitValue(v uint64) uint64 {
	if v == unix.RLIM_INFINITY {
		return math.MaxUint64
	}
	return v
}

// LockedBytes returns how much memory this process has locked, in bytes
// (VmLck in /proc/self/status). Memory pinned by a driver through
// get_user_pages (VmPin) is not included.
func LockedBytes() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("hostmem: %w", err)
	}
	defer f.Close()
	kb, found, err := parseStatusKB(f, "VmLck")
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, errors.New("hostmem: no VmLck line in /proc/self/status")
	}
	if kb > math.MaxUint64/1024 {
		return 0, fmt.Errorf("hostmem: VmLck of %d kB overflows", kb)
	}
	return kb * 1024, nil
}

// lockError explains a failed mlock of asked bytes.
func lockError(asked int, err error) error {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("hostmem: mlock of %s: %w", units.Size(int64(asked)), err)
	}
	limit := "unknown"
	if soft, _, lerr := LockLimit(); lerr == nil {
		limit = units.Limit(soft)
	}
	locked := "an unknown amount"
	if n, lerr := LockedBytes(); lerr == nil {
		locked = units.Limit(n)
	}
	return fmt.Errorf("%w: mlock of %s failed (%w): RLIMIT_MEMLOCK is %s and this process has %s locked; raise it with %s",
		ErrLockLimit, units.Size(int64(asked)), err, limit, locked, LockLimitHint())
}
