package cuda

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/internal/testenv"
)

// envChild makes the test binary run one no-driver check as a child process:
// Load runs once per process, so each library setting needs its own process.
const envChild = "PINPOOL_CUDA_TEST_CHILD"

func TestNoDriverChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("runs only as a child of TestNoDriver")
	}
	err := Load()
	if !errors.Is(err, ErrNoDriver) || !IsNoDriver(err) {
		t.Fatalf("Load = %v, want ErrNoDriver", err)
	}
	if _, err := DeviceCount(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("DeviceCount = %v", err)
	}
	if _, err := DriverVersion(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("DriverVersion = %v", err)
	}
	if _, err := NewContext(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("NewContext = %v", err)
	}
	if _, err := CurrentContext(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("CurrentContext = %v", err)
	}
	if IsPinned(make([]byte, 10)) {
		t.Error("IsPinned true without a driver")
	}
	if LibraryPath() != "" {
		t.Error("LibraryPath set without a driver")
	}
	for _, s := range symbols {
		if *s.addr != 0 {
			t.Errorf("%s bound after a failed load", s.name)
		}
	}
	os.Stdout.WriteString("NODRIVER-OK " + err.Error() + "\n")
}

// TestNoDriver loads the driver from places where none is: a missing file,
// and a real library that is not libcuda (libc). Both must give ErrNoDriver,
// never a panic.
func TestNoDriver(t *testing.T) {
	testenv.MustReexec(t)
	for _, tc := range []struct{ name, lib, want string }{
		{"missing", "/nonexistent/libcuda.so.1", "no usable CUDA driver"},
		{"not-cuda", "libc.so.6", "lacks required functions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoDriverChild$", "-test.v")
			cmd.Env = append(os.Environ(), envChild+"=1", EnvLibrary+"="+tc.lib)
			out, err := testenv.CombinedOutput(t, cmd)
			if err != nil {
				t.Fatalf("child failed: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "NODRIVER-OK") || !strings.Contains(string(out), tc.want) {
				t.Fatalf("child output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

func TestCandidates(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	c := candidates()
	if c[0] != "libcuda.so.1" {
		t.Errorf("first candidate %q, want libcuda.so.1", c[0])
	}
	want := map[string]bool{
		"/usr/local/nvidia/lib64/libcuda.so.1":    false,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1":  false,
		"/usr/lib/aarch64-linux-gnu/libcuda.so.1": false,
		"/usr/lib/wsl/lib/libcuda.so.1":           false,
	}
	for _, p := range c {
		if _, ok := want[p]; ok {
			want[p] = true
		}
	}
	for p, found := range want {
		if !found {
			t.Errorf("%s not searched", p)
		}
	}
	t.Setenv(EnvLibrary, "/opt/x/libcuda.so")
	if c := candidates(); len(c) != 1 || c[0] != "/opt/x/libcuda.so" {
		t.Errorf("override gave %v", c)
	}
}
