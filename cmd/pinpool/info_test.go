package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/internal/testenv"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return o.String(), e.String(), code
}

func TestInfoText(t *testing.T) {
	out, errOut, code := runCLI(t, "info")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"host memory:", "RLIMIT_MEMLOCK:", "this process locked:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gpu:                  none:") != (cuda.Load() != nil) {
		t.Errorf("no-GPU line does not match the driver state (%v):\n%s", cuda.Load(), out)
	}
}

func TestInfoJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "info", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var r infoReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, out)
	}
	if r.Host.Total == 0 || r.Host.Available == 0 || r.Host.MemlockSoft == 0 {
		t.Errorf("host fields missing: %+v", r.Host)
	}
	if (r.Driver == nil) == (r.NoGPU == "") {
		t.Errorf("exactly one of driver and no_gpu must be set: %+v / %q", r.Driver, r.NoGPU)
	}
	if r.Driver != nil && len(r.Devices) == 0 {
		t.Error("a driver with no devices listed")
	}
	for _, d := range r.Devices {
		if d.Name == "" || d.TotalMem == 0 {
			t.Errorf("device %+v", d)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"info", "--no-such-flag"}, {}} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
	}
	if out, _, code := runCLI(t, "--help"); code != 0 || !strings.Contains(out, "info") {
		t.Errorf("--help: exit %d, output %q", code, out)
	}
}

// TestInfoWithoutDriver runs the test binary again with the driver search
// pointed at nothing: info must say so in one line and exit 0.
func TestInfoWithoutDriver(t *testing.T) {
	if os.Getenv("PINPOOL_INFO_CHILD") != "" {
		os.Exit(run([]string{"info"}, os.Stdout, os.Stderr))
	}
	testenv.MustReexec(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestInfoWithoutDriver$")
	cmd.Env = append(os.Environ(), "PINPOOL_INFO_CHILD=1", cuda.EnvLibrary+"=/nonexistent/libcuda.so.1")
	out, err := testenv.CombinedOutput(t, cmd)
	if err != nil {
		t.Fatalf("info without a driver failed: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "gpu:                  none:"); n != 1 {
		t.Fatalf("want one no-GPU line, got %d:\n%s", n, out)
	}
	if !strings.Contains(string(out), "host backend") || !strings.Contains(string(out), "host memory:") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestCgroupLine(t *testing.T) {
	limited := &hostmem.CgroupMemory{Version: 2, Path: "/sys/fs/cgroup/app", Limit: 8 << 30, LimitFile: "memory.max", Usage: 2 << 30}
	free := &hostmem.CgroupMemory{Version: 1, Path: "/sys/fs/cgroup/memory/x", Usage: 1 << 20}
	for _, tc := range []struct {
		cg   *hostmem.CgroupMemory
		err  string
		want []string
	}{
		{limited, "", []string{"/sys/fs/cgroup/app", "memory.max 8 GiB", "pinned memory counts against it"}},
		{free, "", []string{"no memory limit"}},
		{&hostmem.CgroupMemory{}, "", []string{"no cgroup memory controller"}},
		{nil, "hostmem: cannot read cgroup memory limits: /sys/fs/cgroup/memory.max", []string{"unreadable", "memory.max"}},
	} {
		got := cgroupLine(tc.cg, tc.err)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("cgroupLine = %q, want it to contain %q", got, w)
			}
		}
	}
}
