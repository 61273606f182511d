package main

import (
	"testing"

	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/units"
)

// Locked memory the tests' workloads need on the host backend.
const (
	lockFrame = 3112960 // one default stress frame (3110400 bytes in whole pages)
	// lockBenchPool is what bench's pool benchmark at its default 64 KiB
	// buffers needs: pinpool's pool gets half the allowance, and the seed
	// pool grows by 4 buffers at a time.
	lockBenchPool = 512 << 10
)

// lockable reports whether the tool can lock need bytes here: always with
// a GPU (the CUDA backend, which RLIMIT_MEMLOCK does not bound), else when
// RLIMIT_MEMLOCK (less what is locked) allows it; why says how much it
// allows when it does not.
func lockable(need int64) (ok bool, why string) {
	if hasGPU() {
		return true, ""
	}
	n, limited, err := hostmem.LockAllowance()
	if err != nil || !limited || n >= uint64(need) {
		return true, ""
	}
	return false, "needs " + units.Size(need) + " of locked memory on the host backend; RLIMIT_MEMLOCK lets this process lock " +
		units.Limit(n) + " (ulimit -l raises it)"
}

// needLockable skips the test unless the tool can lock need bytes here.
func needLockable(t testing.TB, need int64) {
	t.Helper()
	if ok, why := lockable(need); !ok {
		t.Skip(why)
	}
}
