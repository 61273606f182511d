package multigpu

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Host describes the host's NUMA nodes as far as placement needs them: which
// nodes exist and how many of their CPUs the process may run on. ReadHost
// reads it from the system; tests and callers that know better build it
// themselves.
type Host struct {
	// Nodes maps each NUMA node number to the number of its CPUs that the
	// process may use (0 for a node with memory only, or whose CPUs the
	// process's affinity excludes). Nil or empty means the layout is
	// unknown: placement then binds nothing and treats the host as one node
	// of CPUs processors.
	Nodes map[int]int

	// CPUs is the number of CPUs the process may use in all. Zero means the
	// sum of Nodes, or runtime.NumCPU() when Nodes is empty.
	CPUs int
}

// cpus is the number of CPUs to share among all devices.
func (h Host) cpus() int {
	if h.CPUs > 0 {
		return h.CPUs
	}
	n := 0
	for _, c := range h.Nodes {
		n += max(c, 0)
	}
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// known reports whether the host's NUMA layout is known.
func (h Host) known() bool { return len(h.Nodes) > 0 }

// nodeList returns the node numbers in order.
func (h Host) nodeList() []int {
	nodes := make([]int, 0, len(h.Nodes))
	for n := range h.Nodes {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes
}

// String describes the host in one line, for example "2 NUMA nodes (node 0:
// 56 CPUs, node 1: 56 CPUs), 112 CPUs" or "NUMA layout unknown, 16 CPUs".
func (h Host) String() string {
	if !h.known() {
		return fmt.Sprintf("NUMA layout unknown, %d CPUs", h.cpus())
	}
	parts := make([]string, 0, len(h.Nodes))
	for _, n := range h.nodeList() {
		parts = append(parts, fmt.Sprintf("node %d: %d CPUs", n, h.Nodes[n]))
	}
	s := "NUMA nodes"
	if len(h.Nodes) == 1 {
		s = "NUMA node"
	}
	return fmt.Sprintf("%d %s (%s), %d CPUs", len(h.Nodes), s, strings.Join(parts, ", "), h.cpus())
}

// parseCPUList parses a kernel CPU list such as "0-27,56-83" (the format of
// /sys/devices/system/node/nodeN/cpulist; an empty list is a node without
// CPUs) and calls f for each CPU in it.
func parseCPUList(s string, f func(cpu int)) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return fmt.Errorf("cpu list %q: bad CPU %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return fmt.Errorf("cpu list %q: bad range %q", s, r)
			}
		}
		if b-a > 1<<20 {
			return fmt.Errorf("cpu list %q: range %q too large", s, r)
		}
		for c := a; c <= b; c++ {
			f(c)
		}
	}
	return nil
}
