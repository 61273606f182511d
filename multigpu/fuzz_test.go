package multigpu

import (
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/transfer"
)

// FuzzPlace feeds Place random device attributes and host layouts, decoded
// from the fuzzer's bytes, and checks its promises: it never panics, gives
// one placement per device in order, every copier 1 to
// transfer.DefaultMaxLanes lanes, the copiers of a node together no more
// lanes than its CPUs (or one each), and binds staging only to a node the
// host shows, that the device reported, on a device that can register host
// memory, with the Register method.
func FuzzPlace(f *testing.F) {
	f.Add([]byte{8, 0, 0, 0, 0, 1, 1, 1, 1}, []byte{2, 56, 56}, uint16(112))
	f.Add([]byte{2, 0, 0}, []byte{1, 32}, uint16(32))
	f.Add([]byte{2, 0xff, 0xff}, []byte{1, 32}, uint16(0))
	f.Add([]byte{1, 0x80}, []byte{1, 6}, uint16(6))
	f.Add([]byte{2, 0, 3}, []byte{2, 4, 4}, uint16(0))
	f.Add([]byte{3, 1, 1, 1}, []byte{0}, uint16(12))
	f.Fuzz(func(t *testing.T, devs, nodes []byte, cpus uint16) {
		props := decodeDevices(devs)
		host := decodeHost(nodes, cpus)
		got := Place(props, host)
		if len(got) != len(props) {
			t.Fatalf("%d placements for %d devices", len(got), len(props))
		}
		onNode := map[int][2]int{} // node → devices with lanes from it, their lanes
		for i, g := range got {
			p := props[i]
			if g.Device != p.Ordinal || g.Staging.Device != p.Ordinal {
				t.Fatalf("%d: %+v for device %d", i, g, p.Ordinal)
			}
			if g.Lanes < 1 || g.Lanes > transfer.DefaultMaxLanes {
				t.Fatalf("%v: Lanes %d out of [1, %d]", g, g.Lanes, transfer.DefaultMaxLanes)
			}
			if g.Reason == "" {
				t.Fatalf("%v: no reason", g)
			}
			if n := p.HostNUMAID; n >= 0 && host.Nodes[n] > 0 {
				c := onNode[n]
				onNode[n] = [2]int{c[0] + 1, c[1] + g.Lanes}
			}
			if !g.Staging.BindNUMA {
				if g.NUMANode != -1 || g.Staging != (cudahost.Options{Device: p.Ordinal}) {
					t.Fatalf("%v: unbound but NUMANode %d, Staging %+v", g, g.NUMANode, g.Staging)
				}
				continue
			}
			_, exists := host.Nodes[g.NUMANode]
			registers := p.HostRegisterSupported && !(p.Integrated && p.ComputeMajor < 7)
			switch {
			case !exists:
				t.Fatalf("%v: bound to node %d, which the host (%v) lacks", g, g.NUMANode, host)
			case g.NUMANode != p.HostNUMAID || g.Staging.NUMANode != g.NUMANode:
				t.Fatalf("%v: bound to %d/%d, device reports %d", g, g.NUMANode, g.Staging.NUMANode, p.HostNUMAID)
			case !registers || g.Staging.Method != cudahost.Register:
				t.Fatalf("%v: bound on a device that cannot register (%+v) or without Register", g, p)
			}
		}
		for n, c := range onNode {
			if c[1] > max(host.Nodes[n], c[0]) {
				t.Fatalf("node %d (%d CPUs): %d devices given %d lanes", n, host.Nodes[n], c[0], c[1])
			}
		}
	})
}

// decodeDevices reads a device count (at most 16) and then one byte per
// device: its HOST_NUMA_ID (low 4 bits, 15 meaning -1, 14 meaning -2),
// host registration (bit 4 clear), integrated (bit 7), compute major 6 or
// 9 (bit 5).
func decodeDevices(b []byte) []cuda.Properties {
	if len(b) == 0 {
		return nil
	}
	n := min(int(b[0])%17, len(b)-1)
	props := make([]cuda.Properties, n)
	for i := range props {
		x := b[i+1]
		numa := int(x & 0x0f)
		switch numa {
		case 15:
			numa = -1
		case 14:
			numa = -2
		}
		major := 9
		if x&0x20 != 0 {
			major = 6
		}
		props[i] = cuda.Properties{
			Ordinal: i, ComputeMajor: major, HostNUMAID: numa,
			HostRegisterSupported: x&0x10 == 0, Integrated: x&0x80 != 0,
		}
	}
	return props
}

// decodeHost reads a node count (at most 8) and then one byte per node: its
// CPU count; nodes are numbered 0, 1, ... skipping 2 (a gap, as on hosts
// with offline nodes).
func decodeHost(b []byte, cpus uint16) Host {
	h := Host{CPUs: int(cpus)}
	if len(b) == 0 {
		return h
	}
	n := min(int(b[0])%9, len(b)-1)
	if n == 0 {
		return h
	}
	h.Nodes = map[int]int{}
	for i := range n {
		node := i
		if i >= 2 {
			node++
		}
		h.Nodes[node] = int(b[i+1])
	}
	return h
}
