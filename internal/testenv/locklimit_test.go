package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnderLimit: in the child the limit is set and this thread cannot
// lock beyond it, whoever runs the tests.
func TestUnderLimit(t *testing.T) {
	const limit = 32 << 10
	if !UnderLimit(t, limit) {
		return
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur != limit || rl.Max != limit {
		t.Fatalf("RLIMIT_MEMLOCK %d/%d in the child, want %d", rl.Cur, rl.Max, limit)
	}
	status, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			if eff&(1<<unix.CAP_IPC_LOCK) != 0 {
				t.Fatalf("CapEff %x: the test thread still has CAP_IPC_LOCK", eff)
			}
		}
	}
	// Locking more than the limit fails on this thread.
	mem := make([]byte, 2*limit)
	if err := unix.Mlock(mem); err == nil {
		unix.Munlock(mem)
		t.Fatalf("mlock of %d bytes under a limit of %d succeeded", len(mem), limit)
	}
}
