package testenv

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const childEnv = "PINPOOL_TESTENV_CHILD"

// UnderLimit runs the calling top-level test again in a child process whose
// RLIMIT_MEMLOCK (soft and hard) is limit bytes and whose test goroutine
// runs on a thread without CAP_IPC_LOCK, so that the limit holds even when
// the tests run as root and the parent's limits stay untouched.
//
// In the parent it returns false once the child has run: the test fails
// when the child failed and skips when the child skipped. In the child it
// returns true and the caller goes on to test under the limit. The child
// skips, saying why, when this process may not set the limit: an ordinary
// user may lower the hard limit but not raise it (setrlimit needs
// CAP_SYS_RESOURCE for that), so a test that needs 8 MiB skips under
// `ulimit -l 64`.
func UnderLimit(t *testing.T, limit uint64) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		lowerInChild(t, limit)
		return true
	}
	MustReexec(t)
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("testenv.UnderLimit in subtest %s: call it from a top-level test", t.Name())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := CombinedOutput(t, cmd)
	text := string(out)
	if err != nil {
		t.Fatalf("child under RLIMIT_MEMLOCK %d: %v\n%s", limit, err, text)
	}
	if strings.Contains(text, "--- SKIP: "+t.Name()) {
		t.Skipf("child under RLIMIT_MEMLOCK %d skipped:\n%s", limit, childLines(text))
	}
	if !strings.Contains(text, "--- PASS: "+t.Name()) {
		t.Fatalf("child under RLIMIT_MEMLOCK %d ran no test:\n%s", limit, text)
	}
	if lines := childLines(text); lines != "" {
		t.Log(lines)
	}
	return false
}

// lowerInChild drops CAP_IPC_LOCK on this thread, keeps the test goroutine
// on it (capabilities belong to threads, and mlock runs on the calling
// goroutine's), and sets the limit.
func lowerInChild(t *testing.T, limit uint64) {
	t.Helper()
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		t.Fatalf("capget: %v", err)
	}
	caps[0].Effective &^= 1 << unix.CAP_IPC_LOCK
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		t.Fatalf("capset: %v", err)
	}
	err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: limit, Max: limit})
	if errors.Is(err, unix.EPERM) {
		var rl unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl)
		t.Skipf("this test runs under RLIMIT_MEMLOCK %d bytes, above this process's hard limit of %d; raising it needs CAP_SYS_RESOURCE", limit, rl.Max)
	}
	if err != nil {
		t.Fatalf("setrlimit(RLIMIT_MEMLOCK, %d): %v", limit, err)
	}
}

// childLines is the child's own log: its lines that are no test framework
// chatter.
func childLines(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		if s == "" || s == "PASS" || s == "FAIL" || strings.HasPrefix(s, "=== RUN") || strings.HasPrefix(s, "--- ") || strings.HasPrefix(s, "ok ") {
			continue
		}
		keep = append(keep, s)
	}
	return strings.Join(keep, "\n")
}
