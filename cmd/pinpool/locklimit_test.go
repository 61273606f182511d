package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/testenv"
	"github.com/pinpool/pinpool/internal/units"
	"golang.org/x/sys/unix"
)

// lockLimitChildEnv, set in a child process, holds the RLIMIT_MEMLOCK in
// bytes that the child sets before it runs its test.
const lockLimitChildEnv = "PINPOOL_CMD_TEST_LOCKLIMIT_CHILD"

// TestToolUnderLockLimit runs the tool as a user without CAP_IPC_LOCK and
// with the common default RLIMIT_MEMLOCK of 8 MiB: in a child process that
// runs as nobody when the tests run as root (capabilities are per thread,
// so dropping one in-process would leave the tool's other threads with
// it), with the limit lowered. Without a GPU the tool must fit its work
// into the limit and say so in one line: stress holds at most the frames
// that fit and fails none of its gets (before: 491 of 2000 failed), bench
// skips the allocation sizes above the limit in one short line (before:
// six lines of up to 532 characters).
func TestToolUnderLockLimit(t *testing.T) {
	if limit, ok := lockLimitOfChild(t); ok {
		toolUnderLockLimitChild(t, limit)
		return
	}
	runUnderLockLimit(t, "TestToolUnderLockLimit", 8<<20)
}

// lockLimitOfChild returns the limit this process, a child of
// runUnderLockLimit, is to set, and sets it; ok is false in the parent.
func lockLimitOfChild(t *testing.T) (limit uint64, ok bool) {
	v := os.Getenv(lockLimitChildEnv)
	if v == "" {
		return 0, false
	}
	limit, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", lockLimitChildEnv, v, err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Fatalf("setrlimit: %v", err) // runUnderLockLimit checked that it may lower it
	}
	if can, _ := hostmem.CanLockBeyondLimit(); can {
		t.Fatal("the child still has CAP_IPC_LOCK")
	}
	return limit, true
}

// runUnderLockLimit runs test in a child process with RLIMIT_MEMLOCK set
// to limit bytes and no CAP_IPC_LOCK (as nobody when the tests run as
// root), and fails with its output unless it logs "child: ok". It skips
// where that cannot be done: with a GPU (the CUDA backend, which the limit
// does not bound), for a user who has CAP_IPC_LOCK without being root, and
// when this process's hard limit is below limit (only root may raise it).
func runUnderLockLimit(t *testing.T, test string, limit uint64) {
	t.Helper()
	if hasGPU() {
		t.Skip("a GPU is present: the tool uses the CUDA backend, which RLIMIT_MEMLOCK does not bound")
	}
	testenv.MustReexec(t)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), lockLimitChildEnv+"="+strconv.FormatUint(limit, 10))
	switch can, err := hostmem.CanLockBeyondLimit(); {
	case err != nil:
		t.Fatal(err)
	case can && os.Geteuid() != 0:
		t.Skip("this user has CAP_IPC_LOCK without being root: cannot run as a user without it")
	case can:
		// As nobody, from a copy of the test binary that nobody can read.
		dir, err := os.MkdirTemp("", "pinpool-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil { // its temporary directory
			t.Fatal(err)
		}
		copyTo := filepath.Join(dir, "pinpool.test")
		if err := copyFile(bin, copyTo); err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args[0], cmd.Dir = copyTo, copyTo, dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Env = append(cmd.Env, "HOME="+dir, "GOCACHE="+dir, "TMPDIR="+dir)
	default:
		var rl unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
			t.Fatal(err)
		}
		if rl.Max < limit {
			t.Skipf("needs RLIMIT_MEMLOCK of %s to lower it from; this user's hard limit is %s and only root may raise it",
				units.Limit(limit), units.Limit(rl.Max))
		}
	}
	out, err := testenv.CombinedOutput(t, cmd)
	if err != nil || !strings.Contains(string(out), "child: ok") {
		t.Fatalf("child under a limit of %s: %v\n%s", units.Limit(limit), err, out)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func toolUnderLockLimitChild(t *testing.T, limit uint64) {
	if limit != 8<<20 {
		t.Fatalf("limit %d: this child's checks are those of 8 MiB", limit)
	}

	out, errOut, code := runCLI(t, "stress", "--iterations", "20", "--sleep-scale", "0", "--warmup", "0", "--compare-seed", "--compare-raw", "--json")
	if code != 0 {
		t.Fatalf("stress: exit %d\n%s\n%s", code, errOut, out)
	}
	var rep stressReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Failures != 0 || r.WarmupFailures != 0 || r.Ops == 0 {
			t.Errorf("stress under an 8 MiB limit: %s failed %d of its gets (%s)", r.Name, r.Failures, r.FirstError)
		}
	}
	if lines := strings.Count(errOut, "RLIMIT_MEMLOCK"); lines != 1 || !strings.Contains(errOut, "pinpool info") {
		t.Errorf("stress should say once that it fits the limit:\n%s", errOut)
	}
	if !strings.HasPrefix(rep.Workload.Get, "Get with a 1m0s deadline") {
		t.Errorf("stress without --wait under the limit: get %q, want a 1m wait for a turn", rep.Workload.Get)
	}
	// --wait=0s given: honoured (TryGet once a turn comes), not replaced
	// by a minute's wait.
	out, errOut, code = runCLI(t, "stress", "--iterations", "10", "--sleep-scale", "0", "--warmup", "0", "--wait=0s", "--json")
	if code != 0 {
		t.Fatalf("stress --wait=0s: exit %d\n%s\n%s", code, errOut, out)
	}
	rep = stressReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Workload.Get, "TryGet, at most") || !strings.Contains(errOut, "then TryGet (--wait 0s)") {
		t.Errorf("stress --wait=0s under the limit: get %q; stderr:\n%s", rep.Workload.Get, errOut)
	}
	// The hard limit is 8 MiB too: info must not tell this user to run
	// `ulimit -l unlimited`, which would fail.
	out, _, code = runCLI(t, "info")
	if code != 0 || strings.Contains(out, "ulimit -l unlimited") || !strings.Contains(out, "limits.conf") {
		t.Errorf("info under a low hard limit: exit %d:\n%s", code, out)
	}
	checkLineLengths(t, "info under a low hard limit", out)

	// Several sizes within the limit before and after the pool-hit rows,
	// whose memory must not eat the allowance of the next rows.
	args := append(append([]string(nil), smallBench...), "--alloc-sizes", "4KiB,64KiB,1MiB,16MiB,256MiB")
	out, errOut, code = runCLI(t, args...)
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s\n%s", code, errOut, out)
	}
	var skipped []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "skipped: ") && !strings.HasPrefix(l, "skipped: transfers") {
			skipped = append(skipped, l)
		}
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "RLIMIT_MEMLOCK") || !strings.Contains(skipped[0], "16 MiB, 256 MiB") || len(skipped[0]) > 200 {
		t.Errorf("bench should skip the sizes above the limit in one short line, got %q", skipped)
	}
	if !strings.Contains(out, "mmap+mlock") {
		t.Errorf("bench measured no allocation within the limit:\n%s", out)
	}
	t.Log("child: ok")
}
