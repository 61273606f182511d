package hostmem

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// escapeMountPath is what the kernel does to a path in mountinfo.
func escapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			b.WriteString(`\` + strconv.FormatUint(uint64(c)|0o1000, 8)[1:])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func FuzzParseCgroupValue(f *testing.F) {
	for _, s := range []string{"max\n", "0\n", "8589934592\n", "9223372036854771712\n", "-1", "", " 12 ", "1e9", "+5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		limit, lerr := parseCgroupLimit(b)
		n, nerr := parseCgroupBytes(b)
		if lerr == nil && (limit < 0 || limit >= cgroupNoLimit) {
			t.Fatalf("limit %d out of range", limit)
		}
		if nerr == nil {
			if n < 0 {
				t.Fatalf("negative %d", n)
			}
			// A number reads the same as a limit, up to the "unlimited" cut.
			if lerr != nil || (n < cgroupNoLimit && limit != n) || (n >= cgroupNoLimit && limit != 0) {
				t.Fatalf("bytes %d but limit %d, %v", n, limit, lerr)
			}
			if back, err := parseCgroupBytes([]byte(strconv.FormatInt(n, 10) + "\n")); err != nil || back != n {
				t.Fatalf("%d does not read back: %d, %v", n, back, err)
			}
		}
		if lerr == nil && nerr != nil && strings.TrimSpace(string(b)) != "max" {
			t.Fatalf("%q is a limit (%d) but not a number: %v", b, limit, nerr)
		}
		if v, found, err := parseCgroupStat(append([]byte("inactive_file "), b...), "inactive_file"); err == nil && (!found || v < 0) {
			t.Fatalf("stat: %d, found %v", v, found)
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, s := range []string{"0::/\n", "4:memory:/docker/x\n0::/a\n", "3:cpu,memory:/job\n", "1:name=systemd:/\n", "x", "0::", "::\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProcCgroup(b)
		if err != nil {
			if p != (procCgroup{}) {
				t.Fatalf("error %v with a result %+v", err, p)
			}
			return
		}
		if !p.hasV2 && p.v2 != "" || !p.hasV1 && p.v1 != "" {
			t.Fatalf("path without its flag: %+v", p)
		}
		// Either path maps into a mount below the mount point, whatever it is.
		for _, cg := range []string{p.v1, p.v2} {
			for _, root := range []string{"/", cg, "/a"} {
				rel := cgroupRel(root, cg)
				if !strings.HasPrefix(rel, "/") || strings.Contains(rel, "/../") || strings.HasSuffix(rel, "/..") || rel != "/" && strings.HasSuffix(rel, "/") {
					t.Fatalf("cgroupRel(%q, %q) = %q", root, cg, rel)
				}
			}
		}
	})
}

func FuzzParseMountInfoLine(f *testing.F) {
	for _, s := range []string{
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
		"35 31 0:32 /docker/a /sys/fs/cgroup/cpu,memory rw shared:4 master:1 - cgroup cgroup rw,cpu,memory",
		`1 2 0:1 /a\040b /my\040mnt rw - cgroup2 none rw`,
		`1 2 0:1 / /m\04 rw - x y z`,
		"- - - - - - - - - -",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseMountInfoLine(line)
		if err != nil {
			return
		}
		if m.fstype == "" || m.superOpts == "" || strings.ContainsAny(m.fstype+m.superOpts, " \t\n") {
			t.Fatalf("%q: %+v", line, m)
		}
		// The paths, escaped as the kernel does, read back the same.
		again := "1 2 0:1 " + escapeMountPath(m.root) + " " + escapeMountPath(m.point) + " rw - " + m.fstype + " src " + m.superOpts
		m2, err := parseMountInfoLine(again)
		if err != nil || m2 != m {
			t.Fatalf("%q: %+v; escaped again %q: %+v, %v", line, m, again, m2, err)
		}
		if strings.Contains(line, "\n") {
			return // one line of several: parseMountInfo reads them one at a time
		}
		if ms, err := parseMountInfo([]byte(line + "\n" + again + "\n")); err != nil || len(ms) != 2 {
			t.Fatalf("parseMountInfo of two lines: %d, %v", len(ms), err)
		}
	})
}

// FuzzReadCgroupMemoryAt writes fuzzed proc/self/cgroup, memory.max,
// memory.current and memory.stat into a copy of v2-nested: the result is
// consistent or the error wraps ErrCgroup.
func FuzzReadCgroupMemoryAt(f *testing.F) {
	f.Add("0::/kubepods.slice/kubepods-burstable.slice/pod1/ctr\n", "max\n", "943718400\n", "inactive_file 5\n")
	f.Add("0::/kubepods.slice\n", "100\n", "200\n", "inactive_file 300\n")
	f.Add("0::/../x\n", "1\n", "x", "")
	f.Add("0::/kubepods.slice/kubepods-burstable.slice/pod1/ctr\n", "0\n", "-1\n", "inactive_file x\n")
	root := f.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "cgroup", "v2-nested"))); err != nil {
		f.Fatal(err)
	}
	ctr := filepath.Join(root, "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/pod1/ctr")
	f.Fuzz(func(t *testing.T, cg, limit, usage, stat string) {
		for name, s := range map[string]string{
			filepath.Join(root, "proc/self/cgroup"): cg,
			filepath.Join(ctr, "memory.max"):        limit,
			filepath.Join(ctr, "memory.current"):    usage,
			filepath.Join(ctr, "memory.stat"):       stat,
		} {
			if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c, err := ReadCgroupMemoryAt(root)
		if err != nil {
			if !errors.Is(err, ErrCgroup) {
				t.Fatalf("error does not wrap ErrCgroup: %v", err)
			}
			return
		}
		checkCgroupMemory(t, c)
		if c.Version != 0 && !strings.HasPrefix(c.Path, filepath.Join(root, "sys/fs/cgroup")) {
			t.Fatalf("Path %s outside the mount", c.Path)
		}
	})
}
