package multigpu

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"", nil, false},
		{"\n", nil, false},
		{"0", []int{0}, false},
		{"0-3\n", []int{0, 1, 2, 3}, false},
		{"0-1,4,6-7", []int{0, 1, 4, 6, 7}, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"1-", nil, true},
		{"-1", nil, true},
		{"0-99999999", nil, true},
	}
	for _, tc := range cases {
		var got []int
		err := parseCPUList(tc.in, func(c int) { got = append(got, c) })
		if (err != nil) != tc.bad {
			t.Errorf("parseCPUList(%q) error %v, want error %v", tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHostString(t *testing.T) {
	cases := []struct {
		h    Host
		want string
	}{
		{Host{Nodes: map[int]int{1: 56, 0: 56}}, "2 NUMA nodes (node 0: 56 CPUs, node 1: 56 CPUs), 112 CPUs"},
		{Host{Nodes: map[int]int{0: 32}, CPUs: 30}, "1 NUMA node (node 0: 32 CPUs), 30 CPUs"},
		{Host{CPUs: 16}, "NUMA layout unknown, 16 CPUs"},
	}
	for _, tc := range cases {
		if got := tc.h.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	if got := (Host{}).String(); !strings.Contains(got, "unknown") || (Host{}).cpus() != runtime.NumCPU() {
		t.Errorf("zero Host: %q, cpus %d", got, Host{}.cpus())
	}
}

// TestReadHostHere reads this machine's layout: whatever it is, it must be
// consistent.
func TestReadHostHere(t *testing.T) {
	h := ReadHost()
	t.Log(h)
	if h.CPUs < 1 {
		t.Errorf("CPUs = %d", h.CPUs)
	}
	for n, c := range h.Nodes {
		if n < 0 || c < 0 {
			t.Errorf("node %d: %d CPUs", n, c)
		}
	}
}
