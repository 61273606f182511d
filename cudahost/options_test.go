package cudahost

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/internal/testenv"
)

// Fake device properties, after real devices.
var (
	propsTX2 = cuda.Properties{Name: "NVIDIA Tegra X2", ComputeMajor: 6, ComputeMinor: 2,
		Integrated: true, CanMapHostMemory: true, UnifiedAddressing: true, HostNUMAID: -1}
	propsXavier = cuda.Properties{Name: "Xavier", ComputeMajor: 7, ComputeMinor: 2,
		Integrated: true, CanMapHostMemory: true, UnifiedAddressing: true, HostNUMAID: -1,
		HostRegisterSupported: true}
	// propsTX2Claims is a TX2 whose driver claims host-register support:
	// the compute capability still rules Register out.
	propsTX2Claims = func() cuda.Properties { p := propsTX2; p.HostRegisterSupported = true; return p }()
	propsH200      = cuda.Properties{Name: "NVIDIA H200", ComputeMajor: 9, ComputeMinor: 0,
		CanMapHostMemory: true, UnifiedAddressing: true, HostNUMAID: 0,
		HostRegisterSupported: true, ReadOnlyHostRegisterSupported: true, AsyncEngineCount: 2}
	// propsOld is a discrete GPU on a driver too old to report the
	// host-register attributes, and unable to map.
	propsOld = cuda.Properties{Name: "old", ComputeMajor: 5, ComputeMinor: 2, HostNUMAID: -1}
)

func TestMethodString(t *testing.T) {
	for m, want := range map[Method]string{Auto: "auto", HostAlloc: "hostalloc", Register: "register", 3: "Method(3)", -1: "Method(-1)"} {
		if got := m.String(); got != want {
			t.Errorf("Method(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		opt     Options
		props   cuda.Properties
		method  Method // resolved, when err is nil
		err     error
		errText string // substring of the error, if set
	}{
		// Auto.
		{"h200 auto", Options{}, propsH200, Register, nil, ""},
		{"xavier auto", Options{}, propsXavier, Register, nil, ""},
		{"tx2 auto", Options{}, propsTX2, HostAlloc, nil, ""},
		{"tx2 claiming register auto", Options{}, propsTX2Claims, HostAlloc, nil, ""},
		{"old driver auto", Options{}, propsOld, HostAlloc, nil, ""},
		{"h200 auto wc", Options{WriteCombined: true}, propsH200, HostAlloc, nil, ""},
		{"h200 auto huge", Options{HugePages: true}, propsH200, Register, nil, ""},
		{"tx2 auto mapped", Options{Mapped: true}, propsTX2, HostAlloc, nil, ""},
		{"tx2 auto huge", Options{HugePages: true}, propsTX2, 0, ErrUnsupported, "compute capability 7.2"},
		{"old auto numa", Options{BindNUMA: true}, propsOld, 0, ErrUnsupported, "BindNUMA need the register method"},

		// Explicit methods.
		{"h200 hostalloc all flags", Options{Method: HostAlloc, Portable: true, Mapped: true, WriteCombined: true}, propsH200, HostAlloc, nil, ""},
		{"h200 register all flags", Options{Method: Register, Portable: true, Mapped: true, ReadOnly: true, HugePages: true, BindNUMA: true, NUMANode: 1}, propsH200, Register, nil, ""},
		{"tx2 register", Options{Method: Register}, propsTX2, 0, ErrUnsupported, "Tegra X2, compute 6.2, integrated"},
		{"tx2 claiming register", Options{Method: Register}, propsTX2Claims, 0, ErrUnsupported, ""},
		{"tx2 hostalloc wc mapped", Options{Method: HostAlloc, WriteCombined: true, Mapped: true}, propsTX2, HostAlloc, nil, ""},
		{"xavier register mapped", Options{Method: Register, Mapped: true}, propsXavier, Register, nil, ""},
		{"xavier read-only", Options{Method: Register, ReadOnly: true}, propsXavier, 0, ErrUnsupported, "read-only"},
		{"old register", Options{Method: Register}, propsOld, 0, ErrUnsupported, "host-register support"},
		{"old mapped", Options{Mapped: true}, propsOld, 0, ErrCannotMap, "CanMapHostMemory"},

		// Contradictions, whatever the device.
		{"register wc", Options{Method: Register, WriteCombined: true}, propsH200, 0, ErrInvalidOptions, "WriteCombined"},
		{"hostalloc read-only", Options{Method: HostAlloc, ReadOnly: true}, propsH200, 0, ErrInvalidOptions, "ReadOnly"},
		{"hostalloc huge", Options{Method: HostAlloc, HugePages: true}, propsH200, 0, ErrInvalidOptions, "HugePages"},
		{"hostalloc small", Options{Method: HostAlloc, SmallPages: true}, propsH200, 0, ErrInvalidOptions, "SmallPages"},
		{"huge and small", Options{HugePages: true, SmallPages: true}, propsH200, 0, ErrInvalidOptions, "contradict"},
		{"register chunk above 64 GiB", Options{Method: Register, RegisterChunk: 64<<30 + 4096}, propsH200, 0, ErrInvalidOptions, "at most"},
		{"hostalloc chunk not a page multiple", Options{Method: HostAlloc, HostAllocChunk: 100}, propsH200, 0, ErrInvalidOptions, "HostAllocChunk"},
		{"hostalloc numa", Options{Method: HostAlloc, BindNUMA: true}, propsH200, 0, ErrInvalidOptions, "BindNUMA"},
		{"auto wc huge", Options{WriteCombined: true, HugePages: true}, propsH200, 0, ErrInvalidOptions, "cannot be combined"},
		{"unknown method", Options{Method: 7}, propsH200, 0, ErrInvalidOptions, "Method(7)"},
		{"negative device", Options{Device: -1}, propsH200, 0, ErrInvalidOptions, "device"},
		{"negative node", Options{BindNUMA: true, NUMANode: -1}, propsH200, 0, ErrInvalidOptions, "NUMA"},
		{"negative node unbound", Options{NUMANode: -1}, propsH200, Register, nil, ""},
		{"negative chunk", Options{RegisterChunk: -4096}, propsH200, 0, ErrInvalidOptions, "RegisterChunk"},
		{"odd chunk", Options{RegisterChunk: 5000}, propsH200, 0, ErrInvalidOptions, "RegisterChunk"},
		{"odd group", Options{RegisterGroup: 5000}, propsH200, 0, ErrInvalidOptions, "RegisterGroup"},
		{"negative group", Options{RegisterGroup: -4096}, propsH200, 0, ErrInvalidOptions, "RegisterGroup"},
		{"odd group hostalloc", Options{Method: HostAlloc, RegisterGroup: 4097}, propsH200, 0, ErrInvalidOptions, "RegisterGroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := validate(tt.opt, tt.props)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("validate = %v, want %v", err, tt.err)
				}
				if !strings.HasPrefix(err.Error(), "cudahost: ") || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("error %q: want prefix \"cudahost: \" and %q", err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if got.Method != tt.method {
				t.Fatalf("method %v, want %v", got.Method, tt.method)
			}
			wantChunk, wantGroup := 0, 0
			if got.Method == Register {
				wantChunk, wantGroup = DefaultRegisterChunk, DefaultRegisterGroup
			}
			if got.RegisterChunk != wantChunk || got.RegisterGroup != wantGroup {
				t.Errorf("RegisterChunk %d, RegisterGroup %d; want %d, %d", got.RegisterChunk, got.RegisterGroup, wantChunk, wantGroup)
			}
			// Only Method, RegisterChunk and RegisterGroup change.
			back := got
			back.Method, back.RegisterChunk, back.RegisterGroup = tt.opt.Method, tt.opt.RegisterChunk, tt.opt.RegisterGroup
			if back != tt.opt {
				t.Errorf("validate changed %+v into %+v", tt.opt, got)
			}
		})
	}
}

// TestValidateGroup checks that RegisterGroup resolves to whole pieces:
// the default for zero, a given size rounded up, and HostAlloc leaves it
// alone.
func TestValidateGroup(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		opt  Options
		want int
	}{
		{Options{}, DefaultRegisterGroup},
		{Options{RegisterGroup: 100 * mib}, 112 * mib},
		{Options{RegisterGroup: 4096}, DefaultRegisterChunk},
		{Options{RegisterGroup: 4096, RegisterChunk: 3 * mib}, 3 * mib},
		{Options{RegisterChunk: 48 * mib}, (DefaultRegisterGroup + 48*mib - 1) / (48 * mib) * (48 * mib)},
		{Options{Method: HostAlloc, RegisterGroup: 8192}, 8192},
		// No room to round up: the whole pieces below it, not an overflow.
		{Options{RegisterGroup: math.MaxInt &^ 4095}, math.MaxInt / DefaultRegisterChunk * DefaultRegisterChunk},
	} {
		got, err := validate(tc.opt, propsH200)
		if err != nil || got.RegisterGroup != tc.want {
			t.Errorf("validate(%+v): RegisterGroup %d, %v; want %d", tc.opt, got.RegisterGroup, err, tc.want)
		}
	}
}

func TestValidateKeepsChunk(t *testing.T) {
	got, err := validate(Options{RegisterChunk: 1 << 20}, propsH200)
	if err != nil || got.RegisterChunk != 1<<20 {
		t.Fatalf("validate = %+v, %v", got, err)
	}
}

// TestValidateRoundsChunk checks that the resolved RegisterChunk is a
// multiple of the system page size, and that HostAlloc leaves it alone.
func TestValidateRoundsChunk(t *testing.T) {
	page := os.Getpagesize()
	got, err := validate(Options{Method: Register, RegisterChunk: 4096}, propsH200)
	if err != nil || got.RegisterChunk != max(4096, page) {
		t.Fatalf("validate = %+v, %v; want RegisterChunk %d", got, err, max(4096, page))
	}
	got, err = validate(Options{Method: HostAlloc, RegisterChunk: 4096}, propsH200)
	if err != nil || got.RegisterChunk != 4096 {
		t.Fatalf("hostalloc: validate = %+v, %v", got, err)
	}
	if _, err := validate(Options{RegisterChunk: 5000}, propsH200); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "RegisterChunk 5000") {
		t.Fatalf("validate of an odd chunk: %v", err)
	}
}

// TestNoImplicitNUMA checks that a device's nearest node is not bound to
// unless asked.
func TestNoImplicitNUMA(t *testing.T) {
	p := propsH200
	p.HostNUMAID = 1
	got, err := validate(Options{}, p)
	if err != nil || got.BindNUMA {
		t.Fatalf("validate = %+v, %v; want no binding", got, err)
	}
}

func TestNameAndFlags(t *testing.T) {
	tests := []struct {
		opt   Options
		name  string
		alloc cuda.HostAllocFlags
		reg   cuda.HostRegisterFlags
	}{
		{Options{Method: Register}, "cuda:0/register", 0, 0},
		{Options{Method: Register, SmallPages: true}, "cuda:0/register+small", 0, 0},
		{Options{Method: HostAlloc}, "cuda:0/hostalloc", 0, 0},
		{Options{Device: 1, Method: HostAlloc, WriteCombined: true, Mapped: true}, "cuda:1/hostalloc+wc+mapped",
			cuda.HostAllocWriteCombined | cuda.HostAllocDeviceMap, 0},
		{Options{Method: HostAlloc, Portable: true}, "cuda:0/hostalloc+portable", cuda.HostAllocPortable, 0},
		{Options{Method: Register, Portable: true, Mapped: true, ReadOnly: true, HugePages: true, BindNUMA: true, NUMANode: 3},
			"cuda:0/register+ro+portable+mapped+huge+numa3", 0,
			cuda.HostRegisterPortable | cuda.HostRegisterDeviceMap | cuda.HostRegisterReadOnly},
		{Options{Method: Register, NUMANode: 3}, "cuda:0/register", 0, 0},
	}
	for _, tt := range tests {
		if got := tt.opt.name(); got != tt.name {
			t.Errorf("name of %+v = %q, want %q", tt.opt, got, tt.name)
		}
		a, r := tt.opt.flags()
		if a != tt.alloc || r != tt.reg {
			t.Errorf("flags of %+v = %#x, %#x; want %#x, %#x", tt.opt, a, r, tt.alloc, tt.reg)
		}
	}
}

// TestNewInvalidOptions checks that contradictory options are reported
// before the driver is touched, so also on machines without a GPU.
func TestNewInvalidOptions(t *testing.T) {
	for _, opt := range []Options{
		{Method: Register, WriteCombined: true},
		{Method: HostAlloc, HugePages: true},
		{Device: -2},
		{RegisterChunk: 100},
	} {
		if b, err := New(opt); !errors.Is(err, ErrInvalidOptions) || b != nil {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidOptions", opt, b, err)
		}
	}
}

// envNoDriverChild marks the child process of TestNewNoDriver.
const envNoDriverChild = "CUDAHOST_TEST_NO_DRIVER_CHILD"

// TestNewNoDriver checks that New without a driver returns an error that
// cuda.IsNoDriver recognises. Where a driver is present (the GPU host), it
// reruns itself in a child process whose library search is pointed at a
// file that does not exist.
func TestNewNoDriver(t *testing.T) {
	if cuda.Load() == nil && os.Getenv(envNoDriverChild) == "" {
		testenv.MustReexec(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestNewNoDriver$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envNoDriverChild+"=1", cuda.EnvLibrary+"=/nonexistent/libcuda.so.1")
		out, err := testenv.CombinedOutput(t, cmd)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNewNoDriver") {
			t.Fatalf("child without a driver: %v\n%s", err, out)
		}
		return
	}
	b, err := New(Options{})
	if err == nil {
		b.Close()
		t.Fatal("New succeeded without a driver")
	}
	if !cuda.IsNoDriver(err) || !errors.Is(err, cuda.ErrNoDriver) {
		t.Fatalf("New = %v; want an error wrapping cuda.ErrNoDriver", err)
	}
	if !strings.HasPrefix(err.Error(), "cudahost: ") {
		t.Fatalf("error %q lacks the package prefix", err)
	}
	t.Logf("New without a driver: %v", err)
}
