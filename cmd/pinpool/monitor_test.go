package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
)

// sampleLines returns the samples of out (not warnings), each with the
// indented lines it continues on (a sample with a GPU and a cgroup is
// longer than a line may be) joined to it.
func sampleLines(out string) []string {
	var lines []string
	warning := false
	for l := range strings.Lines(out) {
		switch {
		case strings.HasPrefix(l, " "):
			if !warning && len(lines) > 0 {
				lines[len(lines)-1] = strings.TrimSuffix(lines[len(lines)-1], "\n") + " " + strings.TrimLeft(l, " ")
			}
		case strings.HasPrefix(l, "WARNING: "):
			warning = true
		default:
			warning = false
			lines = append(lines, l)
		}
	}
	return lines
}

func TestMonitorOnce(t *testing.T) {
	out, errOut, code := runCLI(t, "monitor", "--once")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	lines := sampleLines(out)
	if len(lines) != 1 {
		t.Fatalf("%d sample lines, want 1:\n%s", len(lines), out)
	}
	for _, want := range []string{"MemAvailable ", " of ", "Mlocked ", "RLIMIT_MEMLOCK "} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line lacks %q: %s", want, lines[0])
		}
	}
	if strings.Contains(out, "\033[") {
		t.Errorf("escape sequences in non-terminal output: %q", out)
	}
	if hasGPU := cuda.Load() == nil; hasGPU != strings.Contains(lines[0], "GPU 0 used") || hasGPU == strings.Contains(errOut, "no GPU") {
		t.Errorf("GPU state %v, stdout %q, stderr %q", hasGPU, out, errOut)
	}
	if n := strings.Count(errOut, "no GPU"); n > 1 {
		t.Errorf("no-GPU said %d times", n)
	}
}

func TestMonitorCount(t *testing.T) {
	t0 := time.Now()
	out, errOut, code := runCLI(t, "monitor", "--count", "3", "--interval", "10ms", "--warn-below", "0")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if d := time.Since(t0); d < 20*time.Millisecond {
		t.Errorf("3 samples 10ms apart took %v", d)
	}
	if n := len(sampleLines(out)); n != 3 {
		t.Fatalf("%d lines, want 3:\n%s", n, out)
	}
	if strings.Count(errOut, "no GPU") > 1 {
		t.Errorf("no-GPU said more than once: %s", errOut)
	}
}

// TestMonitorPIDSelf monitors the test process, after locking a little
// memory when the process may.
func TestMonitorPIDSelf(t *testing.T) {
	const n = 1 << 20
	locked := false
	if r, err := hostmem.Alloc(n, hostmem.Options{}); err == nil {
		defer r.Unmap()
		locked = true
	}
	pid := os.Getpid()
	out, errOut, code := runCLI(t, "monitor", "--once", "--pid", fmt.Sprint(pid))
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	// A long sample continues on indented lines: read it as one.
	flat := strings.Join(strings.Fields(out), " ")
	if !strings.Contains(flat, fmt.Sprintf("pid %d (", pid)) || !strings.Contains(flat, "VmLck ") || !strings.Contains(flat, "VmPin ") {
		t.Fatalf("output:\n%s", out)
	}
	checkLineLengths(t, "monitor --once --pid", out)

	out, errOut, code = runCLI(t, "monitor", "--once", "--json", "--pid", fmt.Sprint(pid))
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var s monitorSample
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	p := s.Process
	if p == nil || p.PID != pid || p.Name == "" || p.VmLck == nil {
		t.Fatalf("process %+v", p)
	}
	if locked && *p.VmLck < n {
		t.Errorf("VmLck %d after locking %d bytes", *p.VmLck, n)
	}
	soft, hard, err := hostmem.LockLimit()
	if err != nil {
		t.Fatal(err)
	}
	if s.MemlockSoft != soft || s.MemlockHard != hard {
		t.Errorf("RLIMIT_MEMLOCK of the pid %d/%d, getrlimit %d/%d", s.MemlockSoft, s.MemlockHard, soft, hard)
	}
}

func TestMonitorBadPID(t *testing.T) {
	out, errOut, code := runCLI(t, "monitor", "--once", "--pid", "2147483646")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if !strings.Contains(errOut, "no process with pid 2147483646") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestMonitorJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "monitor", "--count", "2", "--interval", "1ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		var s monitorSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Text())
		}
		if s.Total == 0 || s.Available == 0 || s.MemlockSoft == 0 || s.Time.IsZero() || s.Process != nil {
			t.Errorf("sample %+v", s)
		}
		if want := s.Total / 100 * pinpool.DefaultMinAvailablePercent; math.Abs(float64(s.Floor)-float64(want)) > float64(s.Total)/1000 {
			t.Errorf("floor %d, want about %d", s.Floor, want)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d JSON lines, want 2:\n%s", n, out)
	}
}

func TestMonitorWarning(t *testing.T) {
	out, _, code := runCLI(t, "monitor", "--once", "--warn-below", "100%")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "\nWARNING: MemAvailable ") || !strings.Contains(out, "is below the floor") {
		t.Errorf("no warning:\n%s", out)
	}
	out, _, _ = runCLI(t, "monitor", "--once", "--warn-below", "1KiB")
	if strings.Contains(out, "WARNING") {
		t.Errorf("a warning with a 1 KiB floor:\n%s", out)
	}
}

func TestMemWarning(t *testing.T) {
	const g = 1 << 30
	m := func(avail uint64) hostmem.MemInfo { return hostmem.MemInfo{Total: 100 * g, Available: avail} }
	for _, tt := range []struct {
		avail, floor uint64
		want         string
	}{
		{50 * g, 3 * g, ""}, {6 * g, 3 * g, ""}, {5 * g, 3 * g, "near the floor"}, {2 * g, 3 * g, "below the floor"}, {0, 0, ""},
	} {
		got := memWarning(m(tt.avail), tt.floor)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("avail %d floor %d: %q, want %q", tt.avail, tt.floor, got, tt.want)
		}
	}
}

func TestMonitorUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--interval", "0s"}, {"--interval", "soon"}, {"--count", "-1"}, {"--once", "--count", "3"},
		{"--warn-below", "150%"}, {"--warn-below", "x%"}, {"--warn-below", "lots"}, {"--pid", "-5"}, {"--pid", "me"},
		{"--no-such-flag"},
	} {
		_, errOut, code := runCLI(t, append([]string{"monitor"}, args...)...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
	}
}

// TestMonitorDefaultFloor ties the documented default to the pool's guard.
func TestMonitorDefaultFloor(t *testing.T) {
	f, _ := reflect.TypeFor[monitorCmd]().FieldByName("WarnBelow")
	if got, want := f.Tag.Get("default"), fmt.Sprintf("%d%%", pinpool.DefaultMinAvailablePercent); got != want {
		t.Errorf("--warn-below defaults to %q, the pool's guard is %q", got, want)
	}
}

// TestMonitorInPlace runs the loop as on a terminal: each sample after the
// first moves the cursor back over the previous block and clears it.
func TestMonitorInPlace(t *testing.T) {
	c := &monitorCmd{Interval: time.Millisecond, Count: 3, PID: os.Getpid(), WarnBelow: "100%"}
	var b bytes.Buffer
	if err := c.loop(context.Background(), &b, nil, 0, 100, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Block: title, host memory, limit, process, warning = 5 lines.
	if n := strings.Count(out, "\033[5A\r\033[J"); n != 2 {
		t.Errorf("%d redraws, want 2:\n%q", n, out)
	}
	if n := strings.Count(out, "host memory:"); n != 3 {
		t.Errorf("%d blocks, want 3:\n%s", n, out)
	}
	for _, want := range []string{"RLIMIT_MEMLOCK:", fmt.Sprintf("pid %d (", os.Getpid()), "locked (VmLck)", "WARNING: "} {
		if !strings.Contains(out, want) {
			t.Errorf("block lacks %q:\n%s", want, out)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Error("/dev/null is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a file is a terminal")
	}
}

func TestParseProcStatus(t *testing.T) {
	const status = "Name:\tcuda-app\nUmask:\t0022\nVmPeak:\t  123 kB\nVmLck:\t    2048 kB\nVmPin:\t       8 kB\nVmHWM:\t 9 kB\n"
	p, err := parseProcStatus(7, []byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != 7 || p.Name != "cuda-app" || p.VmLck == nil || *p.VmLck != 2048<<10 || p.VmPin == nil || *p.VmPin != 8<<10 {
		t.Fatalf("%+v", p)
	}
	// A kernel thread has no Vm lines; an old kernel no VmPin.
	p, err = parseProcStatus(2, []byte("Name:\tkthreadd\nState:\tS (sleeping)\n"))
	if err != nil || p.VmLck != nil || p.VmPin != nil || optBytes(p.VmPin) != "n/a" {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, bad := range []string{"VmLck:\tlots kB\n", "VmLck:\t1 MB\n", "VmPin:\n", "VmLck:\t99999999999999999999 kB\n"} {
		if _, err := parseProcStatus(1, []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseLockLimit(t *testing.T) {
	const limits = "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max processes             95357                95357                processes \n" +
		"Max locked memory         8388608              unlimited            bytes     \n"
	soft, hard, err := parseLockLimit([]byte(limits))
	if err != nil || soft != 8<<20 || hard != math.MaxUint64 {
		t.Fatalf("%d %d %v", soft, hard, err)
	}
	if _, _, err := parseLockLimit([]byte("Max processes 1 1 processes\n")); err == nil {
		t.Error("no line: no error")
	}
	if _, _, err := parseLockLimit([]byte("Max locked memory  x  y  bytes\n")); err == nil {
		t.Error("bad numbers: no error")
	}
}

func TestCgroupWarning(t *testing.T) {
	const gib = 1 << 30
	cg := func(limit, usage int64) hostmem.CgroupMemory {
		return hostmem.CgroupMemory{Version: 2, Path: "/sys/fs/cgroup/app", Limit: limit, LimitFile: "memory.max", Usage: usage}
	}
	for _, tc := range []struct {
		name    string
		cg      hostmem.CgroupMemory
		bytes   int64
		percent float64
		want    string // substring; "" for no warning
	}{
		{"no limit", cg(0, 5*gib), 0, 3, ""},
		{"plenty", cg(8*gib, 1*gib), 0, 3, ""},
		{"near the 3% floor", cg(100*gib, 95*gib), 0, 3, "near the floor"},
		{"below the 3% floor", cg(100*gib, 98*gib), 0, 3, "below the floor"},
		{"below a byte floor", cg(8*gib, 8*gib-100<<20), 256 << 20, 0, "raise the container's memory limit"},
		{"warnings off", cg(8*gib, 8*gib), 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cgroupWarning(tc.cg, tc.bytes, tc.percent)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("cgroupWarning = %q, want %q", got, tc.want)
			}
		})
	}
}

// recordedCgroup copies one of hostmem's recorded cgroup trees to a
// temporary directory and makes monitor read it.
func recordedCgroup(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("..", "..", "hostmem", "testdata", "cgroup", name))); err != nil {
		t.Fatal(err)
	}
	old := cgroupRoot
	cgroupRoot = root
	t.Cleanup(func() { cgroupRoot = old })
	return root
}

// TestMonitorUnreadableCgroup: a cgroup file that cannot be parsed is
// shown as "unreadable" in each sample, as info shows it, and the
// monitor goes on. Before, it exited 1 at its first sample.
func TestMonitorUnreadableCgroup(t *testing.T) {
	for _, tc := range []struct{ tree, names string }{
		{"garbage-limit", "memory.max"},              // found, then unparsable at every read
		{"garbage-mountinfo", "proc/self/mountinfo"}, // unparsable before the first sample
	} {
		t.Run(tc.tree, func(t *testing.T) {
			recordedCgroup(t, tc.tree)
			out, errOut, code := runCLI(t, "monitor", "--count", "2", "--interval", "1ms", "--warn-below", "0")
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			lines := sampleLines(out)
			if len(lines) != 2 {
				t.Fatalf("%d samples, want 2:\n%s", len(lines), out)
			}
			for _, l := range lines {
				if !strings.Contains(l, "cgroup unreadable: ") || !strings.Contains(l, tc.names) {
					t.Errorf("sample does not say the cgroup is unreadable (%s): %s", tc.names, l)
				}
			}
			out, errOut, code = runCLI(t, "monitor", "--once", "--json")
			var s monitorSample
			if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || s.Cgroup != nil || !strings.Contains(s.CgroupError, tc.names) {
				t.Fatalf("exit %d, %v, sample %+v, stderr %s", code, err, s, errOut)
			}
		})
	}
}

// TestMonitorCgroupBreaksMidRun: a cgroup file that becomes unparsable
// between samples makes that sample say so; the next one reads it again.
func TestMonitorCgroupBreaksMidRun(t *testing.T) {
	root := recordedCgroup(t, "v2-namespace")
	r, err := hostmem.NewCgroupReader(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := &monitorCmd{cgroup: r}
	limit := filepath.Join(root, "sys", "fs", "cgroup", "memory.max")
	good, err := os.ReadFile(limit)
	if err != nil {
		t.Fatal(err)
	}
	for i, content := range [][]byte{good, []byte("garbage\n"), good} {
		if err := os.WriteFile(limit, content, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := c.sample(nil, 0, 0)
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		broken := i == 1
		if (s.Cgroup == nil) != broken || (s.CgroupError != "") != broken || broken && !strings.Contains(strings.Join(strings.Fields(s.line()), " "), "cgroup unreadable: ") {
			t.Fatalf("sample %d (memory.max %q): cgroup %+v, error %q, line %s", i, content, s.Cgroup, s.CgroupError, s.line())
		}
		var block bytes.Buffer
		if err := s.writeBlock(&block, time.Second); err != nil || broken != strings.Contains(block.String(), "unreadable: ") {
			t.Fatalf("sample %d: block %v:\n%s", i, err, block.String())
		}
	}
}
