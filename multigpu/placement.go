package multigpu

import (
	"fmt"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/transfer"
)

// Placement is where one device's staging lives and how many copy lanes
// its copier runs: what Place computes and Open applies.
type Placement struct {
	// Device is the device's ordinal.
	Device int

	// NUMANode is the host NUMA node the device's staging memory is bound
	// to, or -1 when it is not bound (Reason says why).
	NUMANode int

	// Staging is the options of the device's staging backend: Device set;
	// when bound, the Register method with BindNUMA and NUMANode; otherwise
	// the Auto method and no binding.
	Staging cudahost.Options

	// Lanes is the number of lanes of the device's copier
	// (transfer.Options.Lanes): the CPUs of the device's node shared
	// among the devices on that node, or all CPUs shared among all devices
	// for a device whose node is unknown; at least 1, at most
	// transfer.DefaultMaxLanes.
	Lanes int

	// Reason says in a few words why the staging is bound or not.
	Reason string
}

// String describes the placement in one line, for the tool and logs, for
// example "device 4: staging on NUMA node 1 (register), 8 copy lanes: ..."
// or "device 0: staging not bound, 8 copy lanes: the device reports no
// host NUMA node ...".
func (p Placement) String() string {
	where := "staging not bound"
	if p.NUMANode >= 0 {
		where = fmt.Sprintf("staging on NUMA node %d (%v)", p.NUMANode, p.Staging.Method)
	}
	lanes := "copy lanes"
	if p.Lanes == 1 {
		lanes = "copy lane"
	}
	return fmt.Sprintf("device %d: %s, %d %s: %s", p.Device, where, p.Lanes, lanes, p.Reason)
}

// Place computes, from the devices' recorded properties and a description
// of the host, the placement of each device, in the order of props. It is
// a pure function: it calls no driver and reads no file (only
// runtime.NumCPU, when host gives no CPU count at all).
//
// A device's staging is bound to node HostNUMAID (the device attribute
// HOST_NUMA_ID: the host node nearest the device) when all of these hold:
// HostNUMAID >= 0 (drivers before CUDA 12.2, and hosts without NUMA,
// report -1); the host shows that node; and the device can register host
// memory (binding needs cudahost's Register method: HostRegisterSupported,
// and not an integrated GPU below compute capability 7.2). Otherwise the
// staging is not bound, and Reason says which condition failed.
//
// A device whose node is known and shows CPUs gets that node's CPUs shared
// among the devices reporting the same node; any other device gets all CPUs
// (Host.CPUs) shared among all devices. Either way the share is clamped to
// [1, transfer.DefaultMaxLanes]: more lanes did not stage faster
// (transfer's BenchmarkStagedTuning), and every device keeps at least one.
func Place(props []cuda.Properties, host Host) []Placement {
	perNode := map[int]int{} // devices near each node that has CPUs
	for _, p := range props {
		if n, ok := lanesNode(p, host); ok {
			perNode[n]++
		}
	}
	all := host.cpus()
	out := make([]Placement, len(props))
	for i, p := range props {
		pl := Placement{Device: p.Ordinal, NUMANode: -1, Staging: cudahost.Options{Device: p.Ordinal}}
		if n, ok := lanesNode(p, host); ok {
			pl.Lanes = lanes(host.Nodes[n], perNode[n])
		} else {
			pl.Lanes = lanes(all, len(props))
		}
		if why := unbound(p, host); why != "" {
			pl.Reason = why
		} else {
			n := p.HostNUMAID
			pl.NUMANode = n
			pl.Staging.Method = cudahost.Register
			pl.Staging.BindNUMA = true
			pl.Staging.NUMANode = n
			pl.Reason = fmt.Sprintf("HOST_NUMA_ID %d: bound to the device's nearest node", n)
		}
		out[i] = pl
	}
	return out
}

// lanesNode returns the node whose CPUs the device's copier shares: its
// HostNUMAID when the host shows that node with CPUs.
func lanesNode(p cuda.Properties, host Host) (int, bool) {
	n := p.HostNUMAID
	if n < 0 || host.Nodes[n] <= 0 {
		return -1, false
	}
	return n, true
}

// lanes shares cpus among devices: at least 1, at most
// transfer.DefaultMaxLanes.
func lanes(cpus, devices int) int {
	return min(max(cpus/max(devices, 1), 1), transfer.DefaultMaxLanes)
}

// unbound returns why the device's staging cannot be bound to its node, or
// "" when it can.
func unbound(p cuda.Properties, host Host) string {
	n := p.HostNUMAID
	switch {
	case n < 0:
		return fmt.Sprintf("the device reports no host NUMA node (HOST_NUMA_ID %d: a driver before CUDA 12.2, or a host without NUMA)", n)
	case !host.known():
		return fmt.Sprintf("HOST_NUMA_ID %d, but the host's NUMA layout is unknown", n)
	}
	if _, ok := host.Nodes[n]; !ok {
		return fmt.Sprintf("HOST_NUMA_ID %d names no NUMA node of this host (nodes %v)", n, host.nodeList())
	}
	if p.Integrated && (p.ComputeMajor < 7 || p.ComputeMajor == 7 && p.ComputeMinor < 2) {
		return fmt.Sprintf("HOST_NUMA_ID %d, but binding needs host registration, which integrated GPUs below compute capability 7.2 lack (this one: %s)", n, p.Compute())
	}
	if !p.HostRegisterSupported {
		return fmt.Sprintf("HOST_NUMA_ID %d, but binding needs host registration, which the device does not support", n)
	}
	return ""
}
