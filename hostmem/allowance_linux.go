package hostmem

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// capIPCLock is the bit of CAP_IPC_LOCK in the capability sets.
const capIPCLock = 14

// CanLockBeyondLimit reports whether the calling thread has CAP_IPC_LOCK
// in its effective set (root usually has it), so that RLIMIT_MEMLOCK does
// not bound what it locks. Capabilities belong to threads; in a process
// that does not change them per thread, every thread answers the same.
func CanLockBeyondLimit() (bool, error) {
	f, err := os.Open("/proc/thread-self/status")
	if err != nil {
		if f, err = os.Open("/proc/self/status"); err != nil {
			return false, fmt.Errorf("hostmem: %w", err)
		}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			if err != nil {
				return false, fmt.Errorf("hostmem: CapEff %q: %w", strings.TrimSpace(rest), err)
			}
			return caps&(1<<capIPCLock) != 0, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("hostmem: reading /proc/self/status: %w", err)
	}
	return false, fmt.Errorf("hostmem: no CapEff line in /proc/self/status")
}

// LockAllowance returns how many more bytes this process may lock with
// mlock: the soft RLIMIT_MEMLOCK less what it has locked already (VmLck).
// limited is false when nothing bounds it (CAP_IPC_LOCK, or an unlimited
// limit); then bytes is math.MaxUint64.
func LockAllowance() (bytes uint64, limited bool, err error) {
	if can, err := CanLockBeyondLimit(); err != nil {
		return 0, false, err
	} else if can {
		return math.MaxUint64, false, nil
	}
	soft, _, err := LockLimit()
	if err != nil {
		return 0, false, err
	}
	if soft == math.MaxUint64 {
		return math.MaxUint64, false, nil
	}
	locked, err := LockedBytes()
	if err != nil {
		return 0, false, err
	}
	if locked >= soft {
		return 0, true, nil
	}
	return soft - locked, true, nil
}

// RaiseLockLimitHint is the one command that lifts RLIMIT_MEMLOCK for a
// shell and what follows from it, with the equivalents where a service
// manager or a container sets the limit.
//
// It fails for a user whose hard limit is low: LockLimitHint says what
// works for this process.
const RaiseLockLimitHint = "`ulimit -l unlimited` (LimitMEMLOCK=infinity under systemd, --ulimit memlock=-1 in docker) or CAP_IPC_LOCK"

// LockLimitHint says how this process's user can raise RLIMIT_MEMLOCK:
// `ulimit -l unlimited` where the hard limit allows it, `ulimit -l N` (the
// hard limit, in KiB) where only the soft limit is low, and where the soft
// limit already is the hard limit (which only an administrator can raise)
// where that is set, or CAP_IPC_LOCK.
func LockLimitHint() string {
	soft, hard, err := LockLimit()
	if err != nil {
		return RaiseLockLimitHint
	}
	return lockLimitHint(soft, hard)
}

// lockLimitHint is LockLimitHint for the limits soft and hard.
func lockLimitHint(soft, hard uint64) string {
	switch {
	case hard == math.MaxUint64:
		return "`ulimit -l unlimited` (LimitMEMLOCK=infinity under systemd, --ulimit memlock=-1 in docker) or CAP_IPC_LOCK"
	case hard > soft:
		return fmt.Sprintf("`ulimit -l %d` (the hard limit, in KiB; beyond it an administrator must raise it) or CAP_IPC_LOCK", hard>>10)
	}
	return "an administrator: the hard limit is reached (memlock in /etc/security/limits.conf, " +
		"LimitMEMLOCK under systemd, --ulimit memlock in docker) or CAP_IPC_LOCK"
}
