package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startLimit bounds how long starting a child may take. Natively a start
// takes milliseconds; under qemu-user, whose emulated fork of a process
// with many threads can deadlock in the child before it execs, the start
// never returns, and a test would hang until the go test timeout.
const startLimit = time.Minute

// errNoStart is a child that did not start within startLimit; errTimedOut
// one that started and did not exit within its limit (it is killed).
var (
	errNoStart  = errors.New("the child process did not start")
	errTimedOut = errors.New("the child process did not exit in time and was killed")
)

// startCmd starts a child; a test replaces it with one that never returns.
var startCmd = (*exec.Cmd).Start

// runBounded runs cmd as cmd.Run does, but gives up on a start that takes
// longer than start (the child is left to the emulator that hung it: its
// pid is not known) and kills a child still running after run.
func runBounded(cmd *exec.Cmd, start, run time.Duration) error {
	started := make(chan error, 1)
	go func() { started <- startCmd(cmd) }()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-time.After(start):
		return fmt.Errorf("%w within %v: its fork hangs, as an emulator's (qemu-user) can", errNoStart, start)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(run):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w after %v", errTimedOut, run)
	}
}

// reexec is whether this test binary can start itself again, and why not.
var reexec = sync.OnceValue(func() error {
	err := runBounded(exec.Command(os.Args[0], "-test.run=^$"), startLimit, 2*startLimit)
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

// CombinedOutput runs cmd, a child process of the test tb, and returns
// its standard output and error together, as cmd.CombinedOutput does. It
// skips tb when the child does not start within a minute (an emulator's
// fork that hangs, never the code under test), and fails tb, with what
// the child printed, when the child is still running 30 seconds before the
// test binary's deadline (it is killed), so that a hung child is reported
// as itself rather than as the whole binary's timeout.
func CombinedOutput(tb testing.TB, cmd *exec.Cmd) ([]byte, error) {
	tb.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := runBounded(cmd, startLimit, runLimit(tb))
	switch {
	case errors.Is(err, errNoStart):
		tb.Skipf("%s: %v", cmd.Path, err)
	case errors.Is(err, errTimedOut):
		tb.Fatalf("%s: %v; it printed:\n%s", cmd.Path, err, out.Bytes())
	}
	return out.Bytes(), err
}

// runLimit is how long a child of tb may run: until 30 seconds before the
// test binary's deadline, and at least a second; ten minutes without one.
func runLimit(tb testing.TB) time.Duration {
	d, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return 10 * time.Minute
	}
	deadline, ok := d.Deadline()
	if !ok {
		return 10 * time.Minute
	}
	return max(time.Until(deadline)-30*time.Second, time.Second)
}
