package multigpu

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sysNodes is where Linux lists the NUMA nodes, one folder nodeN each.
const sysNodes = "/sys/devices/system/node"

// ReadHost reads the host's NUMA nodes from /sys/devices/system/node: the
// nodes there, and for each the CPUs of its cpulist that the process's
// affinity allows (sched_getaffinity, so a container's cpuset counts).
// Where the folder lists no node (a kernel without NUMA), the layout is
// unknown: Nodes is nil and CPUs is runtime.NumCPU().
func ReadHost() Host { return readHost(sysNodes, affinity()) }

// affinity returns whether the process may run on a CPU, or nil (every
// CPU) when the mask cannot be read.
func affinity() func(cpu int) bool {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		return nil
	}
	return set.IsSet
}

// readHost reads the NUMA nodes under dir (a copy of /sys/devices/system/node
// in tests), counting the CPUs that allowed accepts (all when nil).
func readHost(dir string, allowed func(cpu int) bool) Host {
	h := Host{CPUs: runtime.NumCPU()}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return h
	}
	nodes := map[int]int{}
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			continue
		}
		count := 0
		if b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cpulist")); err == nil {
			err = parseCPUList(string(b), func(cpu int) {
				if allowed == nil || allowed(cpu) {
					count++
				}
			})
			if err != nil {
				count = 0
			}
		}
		nodes[n] = count
	}
	if len(nodes) > 0 {
		h.Nodes = nodes
	}
	return h
}
