package testenv

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// reexec is whether this test binary can start itself again, and why not.
var reexec = sync.OnceValue(func() error {
	err := exec.Command(os.Args[0], "-test.run=^$").Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // it ran
	}
	return err
})

// MustReexec skips tb unless this test binary can run itself again in a
// child process. It cannot where the kernel does not know how to run it:
// an arm64 binary run by qemu-user on an x86-64 host whose binfmt_misc has
// no entry for arm64 fails with "exec format error".
func MustReexec(tb testing.TB) {
	tb.Helper()
	if err := reexec(); err != nil {
		if errors.Is(err, syscall.ENOEXEC) {
			tb.Skipf("this test runs itself again in a child process, and the kernel cannot run this binary (%v): an emulated binary without a binfmt_misc entry", err)
		}
		tb.Skipf("this test runs itself again in a child process, which fails here: %v", err)
	}
}
