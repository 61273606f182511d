package testenv

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestRunBounded: a child that exits is waited for; one that outlives its
// limit is killed and reported; a start that never returns (the fork hang
// of qemu-user, simulated) is given up on instead of hanging the test.
func TestRunBounded(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run as a child:", err)
	}
	// Under qemu-user the real start may hang: that is what runBounded
	// bounds, and not what these first checks are about.
	run := func(cmd *exec.Cmd, limit time.Duration) error {
		err := runBounded(cmd, startLimit, limit)
		if errors.Is(err, errNoStart) {
			t.Skip(err)
		}
		return err
	}
	if err := run(exec.Command(sh, "-c", "exit 0"), time.Minute); err != nil {
		t.Fatalf("a child that exits 0: %v", err)
	}
	var exit *exec.ExitError
	if err := run(exec.Command(sh, "-c", "exit 3"), time.Minute); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("a child that exits 3: %v", err)
	}

	sleeper := exec.Command(sh, "-c", "exec sleep 600")
	err = run(sleeper, 100*time.Millisecond)
	if !errors.Is(err, errTimedOut) {
		t.Fatalf("a child that sleeps past its limit: %v, want errTimedOut", err)
	}
	ws, ok := sleeper.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the sleeper ended %v; want killed", sleeper.ProcessState)
	}

	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{})
	startCmd = func(*exec.Cmd) error { close(entered); <-release; return errors.New("released") }
	defer func() { startCmd = (*exec.Cmd).Start }()
	if err := runBounded(exec.Command(sh), 100*time.Millisecond, time.Minute); !errors.Is(err, errNoStart) {
		t.Fatalf("a start that never returns: %v, want errNoStart", err)
	}
	<-entered // the start goroutine has read startCmd before it is put back
}

// TestCombinedOutput: the child's output comes back whole, and a child
// that fails is returned as its error, not as a failure of the test.
func TestCombinedOutput(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run as a child:", err)
	}
	out, err := CombinedOutput(t, exec.Command(sh, "-c", "echo out; echo err >&2; exit 1"))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("err %v, want exit status 1", err)
	}
	if string(out) != "out\nerr\n" {
		t.Fatalf("output %q", out)
	}
}
