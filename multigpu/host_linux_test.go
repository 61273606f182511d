package multigpu

import (
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fakeSys writes a copy of /sys/devices/system/node with the given
// cpulists (one node per entry) and returns its folder.
func fakeSys(t *testing.T, cpulists map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, list := range cpulists {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if list == "-" {
			continue // a node folder without cpulist
		}
		if err := os.WriteFile(filepath.Join(dir, name, "cpulist"), []byte(list+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// What else the real folder holds.
	for _, f := range []string{"online", "possible", "has_cpu"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("0-1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadHostSysfs(t *testing.T) {
	even := func(cpu int) bool { return cpu%2 == 0 }
	cases := []struct {
		name    string
		lists   map[string]string
		allowed func(int) bool
		want    map[int]int // nil: unknown
	}{
		{"DGX-H100-like", map[string]string{"node0": "0-55,112-167", "node1": "56-111,168-223"}, nil,
			map[int]int{0: 112, 1: 112}},
		{"lent 2xH200 host", map[string]string{"node0": "0-31"}, nil, map[int]int{0: 32}},
		{"affinity counts", map[string]string{"node0": "0-7", "node1": "8-15"}, even, map[int]int{0: 4, 1: 4}},
		{"memory-only node and a bad list", map[string]string{"node0": "0-3", "node1": "", "node2": "x", "node3": "-"}, nil,
			map[int]int{0: 4, 1: 0, 2: 0, 3: 0}},
		{"no node folder", map[string]string{"nodeX": "0-3", "cpu0": "0"}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := readHost(fakeSys(t, tc.lists), tc.allowed)
			if !maps.Equal(h.Nodes, tc.want) {
				t.Errorf("Nodes = %v, want %v", h.Nodes, tc.want)
			}
			if h.CPUs != runtime.NumCPU() {
				t.Errorf("CPUs = %d, want runtime.NumCPU() = %d", h.CPUs, runtime.NumCPU())
			}
		})
	}
	if h := readHost(filepath.Join(t.TempDir(), "absent"), nil); h.Nodes != nil || h.CPUs != runtime.NumCPU() {
		t.Errorf("absent folder: %+v", h)
	}
}
