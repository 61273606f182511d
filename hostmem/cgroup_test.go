package hostmem

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const gib = 1 << 30

// The recorded trees under testdata/cgroup/<case> hold proc/self/cgroup,
// proc/self/mountinfo and the cgroup files of the group and its ancestors.
// hybrid-this-machine is copied from the machine the tests were written on
// (v1 memory controller, unified v2 without it, no limit).
func TestReadCgroupMemoryAt(t *testing.T) {
	tests := []struct {
		dir     string
		want    CgroupMemory // Path relative to the case's directory
		errFile string       // "": no error; else the error wraps ErrCgroup and names this file
	}{
		{"v2-namespace", CgroupMemory{2, "sys/fs/cgroup", 8 * gib, "memory.max", 6657199308, 429496729}, ""},
		{"v2-nested", CgroupMemory{2, "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/pod1", 2 * gib, "memory.max", gib, 104857600}, ""},
		{"v2-shared-parent", CgroupMemory{2, "sys/fs/cgroup/jobs.slice", 16 * gib, "memory.max", 15 * gib, 512 << 20}, ""},
		{"v2-max", CgroupMemory{2, "sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope", 0, "", 123456789, 0}, ""},
		{"v2-high", CgroupMemory{2, "sys/fs/cgroup", 3 * gib, "memory.high", 2 * gib, 0}, ""},
		{"v2-nomemory", CgroupMemory{}, ""},
		{"v2-missing-files", CgroupMemory{2, "sys/fs/cgroup/a/b", 1e9, "memory.max", 6e8, 0}, ""},
		{"v2-no-usage", CgroupMemory{}, "sys/fs/cgroup/a"},
		{"v2-outside-root", CgroupMemory{2, "sys/fs/cgroup", 5e8, "memory.max", 1e8, 0}, ""},
		{"v2-escaped", CgroupMemory{2, "run/my cgroup/pod1", 3e8, "memory.max", 2e8, 5e7}, ""},
		{"v1-limit", CgroupMemory{1, "sys/fs/cgroup/memory", 2 * gib, "memory.limit_in_bytes", 15e8, 2e8}, ""},
		{"v1-unlimited", CgroupMemory{1, "sys/fs/cgroup/memory", 0, "", 3e6, 0}, ""},
		{"v1-cpu-memory", CgroupMemory{1, "sys/fs/cgroup/cpu,memory/batch/job", gib, "memory.limit_in_bytes", 8e8, 1e8}, ""},
		{"hybrid-limit", CgroupMemory{1, "sys/fs/cgroup/memory/user.slice", 3 * gib, "memory.limit_in_bytes", gib, 256 << 20}, ""},
		{"hybrid-this-machine", CgroupMemory{1, "sys/fs/cgroup/memory/process_api/93fdd9ad525b1a06fb1215cb91513c55", 0, "", 96268288, 0}, ""},
		{"no-mountinfo", CgroupMemory{}, ""},
		{"garbage-limit", CgroupMemory{}, "sys/fs/cgroup/memory.max"},
		{"garbage-usage", CgroupMemory{}, "sys/fs/cgroup/memory.current"},
		{"garbage-stat", CgroupMemory{}, "sys/fs/cgroup/memory.stat"},
		{"garbage-cgroup", CgroupMemory{}, "proc/self/cgroup"},
		{"garbage-mountinfo", CgroupMemory{}, "proc/self/mountinfo"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			root := filepath.Join("testdata", "cgroup", tt.dir)
			got, err := ReadCgroupMemoryAt(root)
			if tt.errFile != "" {
				if !errors.Is(err, ErrCgroup) || !strings.Contains(err.Error(), filepath.Join(root, tt.errFile)) {
					t.Fatalf("ReadCgroupMemoryAt = %+v, %v; want an ErrCgroup naming %s", got, err, tt.errFile)
				}
				t.Logf("%v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want.Path != "" {
				want.Path = filepath.Join(root, want.Path)
			}
			if got != want {
				t.Fatalf("ReadCgroupMemoryAt =\n %+v; want\n %+v", plainCgroup(got), plainCgroup(want))
			}
			checkCgroupMemory(t, got)
			t.Log(got)
		})
	}
}

func TestReadCgroupMemoryNoProc(t *testing.T) {
	got, err := ReadCgroupMemoryAt(t.TempDir())
	if err != nil || got != (CgroupMemory{}) {
		t.Fatalf("ReadCgroupMemoryAt(empty dir) = %+v, %v; want Version 0, no error", got, err)
	}
	if got.Headroom() != -1 || got.String() != "no cgroup memory controller" {
		t.Fatalf("Headroom %d, String %q", got.Headroom(), got)
	}
}

// plainCgroup prints with its fields, not String.
type plainCgroup CgroupMemory

// checkCgroupMemory checks what holds for every result.
func checkCgroupMemory(t *testing.T, c CgroupMemory) {
	t.Helper()
	h := c.Headroom()
	switch {
	case c.Version < 0 || c.Version > 2:
		t.Errorf("Version %d", c.Version)
	case c.Version == 0 && c != (CgroupMemory{}):
		t.Errorf("Version 0 with fields set: %+v", c)
	case c.Limit < 0 || c.Limit >= cgroupNoLimit || c.Usage < 0 || c.Reclaimable < 0:
		t.Errorf("out of range: %+v", c)
	case c.Limit == 0 && (h != -1 || c.LimitFile != ""):
		t.Errorf("no limit but Headroom %d, LimitFile %q", h, c.LimitFile)
	case c.Limit > 0 && (h < 0 || h > c.Limit || c.LimitFile == "" || c.Path == ""):
		t.Errorf("limit %d but Headroom %d, LimitFile %q, Path %q", c.Limit, h, c.LimitFile, c.Path)
	case c.Limit > 0 && h != max(0, c.Limit-max(0, c.Usage-c.Reclaimable)):
		t.Errorf("Headroom %d of %+v", h, c)
	case c.Version > 0 && !strings.Contains(c.String(), c.Path):
		t.Errorf("String %q does not name %s", c, c.Path)
	}
}

func TestCgroupMemoryHeadroomAndString(t *testing.T) {
	tests := []struct {
		c    CgroupMemory
		room int64
		str  string
	}{
		{CgroupMemory{2, "/sys/fs/cgroup/foo", 8 * gib, "memory.max", 6*gib + gib/2, gib / 2}, 2 * gib,
			"cgroup v2 /sys/fs/cgroup/foo: memory.max 8 GiB, using 6.5 GiB (512 MiB reclaimable), 2 GiB headroom"},
		{CgroupMemory{2, "/g", gib, "memory.high", 2 * gib, 0}, 0, "cgroup v2 /g: memory.high 1 GiB, using 2 GiB (0 B reclaimable), 0 B headroom"},
		{CgroupMemory{1, "/g", gib, "memory.limit_in_bytes", 10, 20}, gib, ""}, // reclaimable read after usage grew past it
		{CgroupMemory{1, "/g", 0, "", 10 << 20, 0}, -1, "cgroup v1 /g: no memory limit, using 10 MiB"},
		{CgroupMemory{}, -1, "no cgroup memory controller"},
	}
	for _, tt := range tests {
		if got := tt.c.Headroom(); got != tt.room {
			t.Errorf("%+v.Headroom() = %d, want %d", tt.c, got, tt.room)
		}
		if got := tt.c.String(); tt.str != "" && got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
	}
}

// copyTree copies the recorded case dir into a temporary directory.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("testdata", "cgroup", dir))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestCgroupReaderRereads(t *testing.T) {
	root := copyTree(t, "v2-nested")
	r, err := NewCgroupReader(root)
	if err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(root, "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/pod1")
	ctr := filepath.Join(pod, "ctr")
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(wantPath string, wantLimit, wantUsage int64) {
		t.Helper()
		c, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if c.Path != wantPath || c.Limit != wantLimit || c.Usage != wantUsage {
			t.Fatalf("Read = %+v; want Path %s, Limit %d, Usage %d", c, wantPath, wantLimit, wantUsage)
		}
		checkCgroupMemory(t, c)
	}
	read(pod, 2*gib, gib)
	write(filepath.Join(pod, "memory.current"), "1500000000")
	read(pod, 2*gib, 1500000000)
	write(filepath.Join(ctr, "memory.high"), "1000000000") // a limit set later on the container
	read(ctr, 1e9, 943718400)
	write(filepath.Join(pod, "memory.max"), "max")
	write(filepath.Join(ctr, "memory.high"), "max")
	read(filepath.Join(root, "sys/fs/cgroup/kubepods.slice"), 64*gib, 20*gib)
	write(filepath.Join(ctr, "memory.max"), "garbage")
	if _, err := r.Read(); !errors.Is(err, ErrCgroup) || !strings.Contains(err.Error(), filepath.Join(ctr, "memory.max")) {
		t.Fatalf("Read after garbage = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); !errors.Is(err, ErrCgroup) || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close = %v; want ErrCgroup and os.ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The container's group went away (on kernfs the open files would
	// then fail to read): a new reader skips it and names it still.
	if err := os.RemoveAll(ctr); err != nil {
		t.Fatal(err)
	}
	if r, err = NewCgroupReader(root); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c, err := r.Read(); err != nil || c.Path != filepath.Join(root, "sys/fs/cgroup/kubepods.slice") || len(r.levels) != 3 || r.dir != ctr {
		t.Fatalf("after removing the group: %+v, %v, %d levels, dir %s", plainCgroup(c), err, len(r.levels), r.dir)
	}
}

func TestParseCgroupLimit(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"max\n", 0, false},
		{"8589934592\n", 8 * gib, false},
		{"0\n", 0, false}, // a limit of 0 bytes reads as none; the kernel would have killed us already
		{"9223372036854771712\n", 0, false},
		{"4611686018427387904", 0, false}, // 1<<62
		{"4611686018427387903", 1<<62 - 1, false},
		{"-1", 0, true},
		{"", 0, true},
		{"Max", 0, true},
		{"12 34", 0, true},
		{"9223372036854775808", 0, true},
		{"1e9", 0, true},
	}
	for _, tt := range tests {
		got, err := parseCgroupLimit([]byte(tt.in))
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("parseCgroupLimit(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestParseCgroupStat(t *testing.T) {
	const stat = "inactive_anon 1\nactive_file 7\ninactive_file 4096\ntotal_inactive_file 8192\n"
	for _, tt := range []struct {
		in, key string
		want    int64
		found   bool
		err     bool
	}{
		{stat, "inactive_file", 4096, true, false},
		{stat, "total_inactive_file", 8192, true, false},
		{stat, "file", 0, false, false},
		{"inactive_file_x 1\n", "inactive_file", 0, false, false},
		{"inactive_file\n", "inactive_file", 0, false, false},
		{"inactive_file x\n", "inactive_file", 0, true, true},
		{"inactive_file 5", "inactive_file", 5, true, false},
		{"", "inactive_file", 0, false, false},
	} {
		got, found, err := parseCgroupStat([]byte(tt.in), tt.key)
		if got != tt.want || found != tt.found || (err != nil) != tt.err {
			t.Errorf("parseCgroupStat(%q, %q) = %d, %v, %v", tt.in, tt.key, got, found, err)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want procCgroup
		err  bool
	}{
		{"0::/\n", procCgroup{v2: "/", hasV2: true}, false},
		{"0::/a/b\n", procCgroup{v2: "/a/b", hasV2: true}, false},
		{"4:memory:/docker/x\n0::/\n", procCgroup{v2: "/", v1: "/docker/x", hasV2: true, hasV1: true}, false},
		{"3:cpu,memory:/job\n", procCgroup{v1: "/job", hasV1: true}, false},
		{"3:memoryx:/job\n1:name=systemd:/\n", procCgroup{}, false},
		{"0::/a:b\n", procCgroup{v2: "/a:b", hasV2: true}, false},
		{"", procCgroup{}, false},
		{"memory:/x\n", procCgroup{}, true},
		{"x:memory:/x\n", procCgroup{}, true},
	} {
		got, err := parseProcCgroup([]byte(tt.in))
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("parseProcCgroup(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestParseMountInfoLine(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want mountInfo
		err  bool
	}{
		{"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
			mountInfo{"/", "/sys/fs/cgroup/unified", "cgroup2", "rw"}, false},
		{"35 31 0:32 /docker/a /sys/fs/cgroup/cpu,memory rw shared:4 master:1 - cgroup cgroup rw,cpu,memory",
			mountInfo{"/docker/a", "/sys/fs/cgroup/cpu,memory", "cgroup", "rw,cpu,memory"}, false},
		{`1 2 0:1 /a\040b /my\040mnt\011x\134 rw - cgroup2 none rw`, mountInfo{"/a b", "/my mnt\tx\\", "cgroup2", "rw"}, false},
		{`1 2 0:1 / /m\04 rw - cgroup2 none rw`, mountInfo{}, true},
		{`1 2 0:1 / /m\999 rw - cgroup2 none rw`, mountInfo{}, true},
		{"1 2 0:1 / /m rw - cgroup2 none", mountInfo{}, true},
		{"1 2 0:1 / - rw cgroup2 none rw", mountInfo{}, true},
		{"", mountInfo{}, true},
	} {
		got, err := parseMountInfoLine(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("parseMountInfoLine(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestCgroupRel(t *testing.T) {
	for _, tt := range []struct{ root, path, want string }{
		{"/", "/", "/"},
		{"/", "/a/b", "/a/b"},
		{"/a", "/a/b", "/b"},
		{"/a", "/a", "/"},
		{"/a", "/ab/c", "/"},
		{"/a", "/x", "/"},
		{"/", "/../../x", "/"},
		{"/", "x", "/"},
		{"/", "/a/", "/a"},
		{"/a/", "/a/b", "/b"},
	} {
		if got := cgroupRel(tt.root, tt.path); got != tt.want {
			t.Errorf("cgroupRel(%q, %q) = %q, want %q", tt.root, tt.path, got, tt.want)
		}
	}
}

// TestReadCgroupMemory reads this machine's cgroup: whatever it is, the
// result must be consistent.
func TestReadCgroupMemory(t *testing.T) {
	c, err := ReadCgroupMemory()
	if err != nil {
		if !errors.Is(err, ErrCgroup) {
			t.Fatalf("error does not wrap ErrCgroup: %v", err)
		}
		t.Skipf("this machine's cgroup cannot be read: %v", err)
	}
	if runtime.GOOS != "linux" && c.Version != 0 {
		t.Fatalf("a cgroup on %s: %+v", runtime.GOOS, c)
	}
	checkCgroupMemory(t, c)
	t.Logf("%s (headroom %d)", c, c.Headroom())
}

// BenchmarkCgroupReaderRead measures the refresh the pool makes every
// ~50 ms: on this machine's cgroup, and on a recorded five-level v2 tree
// with two limits (every level read).
func BenchmarkCgroupReaderRead(b *testing.B) {
	for _, bb := range []struct{ name, root string }{
		{"machine", "/"},
		{"v2-nested", filepath.Join("testdata", "cgroup", "v2-nested")},
	} {
		b.Run(bb.name, func(b *testing.B) {
			r, err := NewCgroupReader(bb.root)
			if err != nil {
				b.Skip(err)
			}
			defer r.Close()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadCgroupMemory(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadCgroupMemory(); err != nil {
			b.Skip(err)
		}
	}
}
