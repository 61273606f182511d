package multigpu

import (
	"strings"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// recorded returns the properties of n discrete GPUs (H100/H200-like:
// compute 9.0, host registration supported) with the given HOST_NUMA_IDs.
func recorded(numa ...int) []cuda.Properties {
	props := make([]cuda.Properties, len(numa))
	for i, n := range numa {
		props[i] = cuda.Properties{
			Ordinal: i, Name: "NVIDIA H100 80GB HBM3", ComputeMajor: 9,
			CanMapHostMemory: true, UnifiedAddressing: true,
			HostNUMAID: n, HostRegisterSupported: true, ReadOnlyHostRegisterSupported: true,
			AsyncEngineCount: 3,
		}
	}
	return props
}

// want is the expected placement of one device.
type want struct {
	node    int    // bound node, -1 none
	workers int    //
	reason  string // a word the reason must contain
}

func TestPlace(t *testing.T) {
	jetsonTX2 := cuda.Properties{Ordinal: 0, Name: "NVIDIA Tegra X2", ComputeMajor: 6, ComputeMinor: 2,
		Integrated: true, CanMapHostMemory: true, UnifiedAddressing: true, HostNUMAID: 0}
	jetsonClaims := jetsonTX2
	jetsonClaims.HostRegisterSupported = true // the compute capability still rules it out
	noRegister := recorded(0)[0]
	noRegister.HostRegisterSupported = false

	dgx := Host{Nodes: map[int]int{0: 56, 1: 56}, CPUs: 112}
	lent := Host{Nodes: map[int]int{0: 32}, CPUs: 32}
	b := func(n int) want { return want{n, 8, "bound"} }
	cases := []struct {
		name  string
		props []cuda.Properties
		host  Host
		want  []want
	}{
		{"DGX-H100-like: 8 GPUs on 2 nodes of 56 CPUs", recorded(0, 0, 0, 0, 1, 1, 1, 1), dgx,
			[]want{b(0), b(0), b(0), b(0), b(1), b(1), b(1), b(1)}},
		{"8 GPUs on 2 nodes of 16 CPUs: 4 lanes each", recorded(0, 0, 0, 0, 1, 1, 1, 1),
			Host{Nodes: map[int]int{0: 16, 1: 16}},
			[]want{{0, 4, "bound"}, {0, 4, "bound"}, {0, 4, "bound"}, {0, 4, "bound"}, {1, 4, "bound"}, {1, 4, "bound"}, {1, 4, "bound"}, {1, 4, "bound"}}},
		{"lopsided: 3 GPUs on node 0 (14 CPUs), 1 on node 1 (14 CPUs)", recorded(0, 0, 0, 1),
			Host{Nodes: map[int]int{0: 14, 1: 14}},
			[]want{{0, 4, "bound"}, {0, 4, "bound"}, {0, 4, "bound"}, {1, 8, "bound"}}},
		{"lent 2xH200 host, HOST_NUMA_ID 0", recorded(0, 0), lent, []want{b(0), b(0)}},
		{"lent 2xH200 host, HOST_NUMA_ID -1", recorded(-1, -1), lent,
			[]want{{-1, 8, "no host NUMA node"}, {-1, 8, "no host NUMA node"}}},
		{"driver before 12.2 on a 2-node host of 16 CPUs", recorded(-1, -1, -1, -1),
			Host{Nodes: map[int]int{0: 8, 1: 8}},
			[]want{{-1, 4, "before CUDA 12.2"}, {-1, 4, "before CUDA 12.2"}, {-1, 4, "before CUDA 12.2"}, {-1, 4, "before CUDA 12.2"}}},
		{"Jetson TX2: no host registration", []cuda.Properties{jetsonTX2}, Host{Nodes: map[int]int{0: 6}},
			[]want{{-1, 6, "7.2"}}},
		{"Jetson TX2 claiming host registration", []cuda.Properties{jetsonClaims}, Host{Nodes: map[int]int{0: 6}},
			[]want{{-1, 6, "7.2"}}},
		{"discrete GPU without host registration", []cuda.Properties{noRegister}, Host{Nodes: map[int]int{0: 16}},
			[]want{{-1, 8, "does not support"}}},
		{"HOST_NUMA_ID names a node the host lacks", recorded(0, 3), Host{Nodes: map[int]int{0: 4, 1: 4}},
			// device 0 shares node 0's 4 CPUs alone; device 1 gets all 8 CPUs over 2 devices.
			[]want{{0, 4, "bound"}, {-1, 4, "names no NUMA node"}}},
		{"single GPU, 16 cores", recorded(0), Host{Nodes: map[int]int{0: 16}}, []want{b(0)}},
		{"single GPU, 4 cores", recorded(0), Host{Nodes: map[int]int{0: 4}}, []want{{0, 4, "bound"}}},
		{"more GPUs than cores: at least one lane", recorded(0, 0, 0, 0, 0, 0, 0, 0), Host{Nodes: map[int]int{0: 4}},
			[]want{{0, 1, "bound"}, {0, 1, "bound"}, {0, 1, "bound"}, {0, 1, "bound"}, {0, 1, "bound"}, {0, 1, "bound"}, {0, 1, "bound"}, {0, 1, "bound"}}},
		{"node with memory only (no CPUs): bound, lanes from all CPUs", recorded(1, 0),
			Host{Nodes: map[int]int{0: 12, 1: 0}},
			[]want{{1, 6, "bound"}, {0, 8, "bound"}}},
		{"unknown host layout: nothing bound, all CPUs shared", recorded(0, 1), Host{CPUs: 12},
			[]want{{-1, 6, "unknown"}, {-1, 6, "unknown"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Place(tc.props, tc.host)
			if len(got) != len(tc.want) {
				t.Fatalf("%d placements, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				t.Log(g)
				if g.Device != tc.props[i].Ordinal || g.Staging.Device != g.Device {
					t.Errorf("%d: Device %d, Staging.Device %d, want %d", i, g.Device, g.Staging.Device, tc.props[i].Ordinal)
				}
				if g.NUMANode != w.node {
					t.Errorf("%d: NUMANode %d, want %d", i, g.NUMANode, w.node)
				}
				if g.Lanes != w.workers {
					t.Errorf("%d: Lanes %d, want %d", i, g.Lanes, w.workers)
				}
				if !strings.Contains(g.Reason, w.reason) {
					t.Errorf("%d: Reason %q lacks %q", i, g.Reason, w.reason)
				}
				checkStaging(t, g)
			}
		})
	}
}

// checkStaging checks that a placement's staging options agree with its
// NUMANode: bound means Register, BindNUMA and that node; unbound means the
// zero options of the device.
func checkStaging(t *testing.T, g Placement) {
	t.Helper()
	bound := cudahost.Options{Device: g.Device, Method: cudahost.Register, BindNUMA: true, NUMANode: g.NUMANode}
	unbound := cudahost.Options{Device: g.Device}
	switch {
	case g.NUMANode >= 0 && g.Staging != bound:
		t.Errorf("device %d bound to %d: Staging %+v, want %+v", g.Device, g.NUMANode, g.Staging, bound)
	case g.NUMANode < 0 && g.Staging != unbound:
		t.Errorf("device %d unbound: Staging %+v, want %+v", g.Device, g.Staging, unbound)
	}
}

func TestPlaceEmpty(t *testing.T) {
	if got := Place(nil, Host{}); len(got) != 0 {
		t.Errorf("Place(nil) = %v", got)
	}
}

func TestPlacementString(t *testing.T) {
	p := Place(recorded(1), Host{Nodes: map[int]int{0: 56, 1: 56}})[0]
	if s := p.String(); !strings.HasPrefix(s, "device 0: staging on NUMA node 1 (register), 8 copy lanes: HOST_NUMA_ID 1") {
		t.Errorf("String() = %q", s)
	}
	p = Place(recorded(-1), Host{Nodes: map[int]int{0: 1}})[0]
	if s := p.String(); !strings.HasPrefix(s, "device 0: staging not bound, 1 copy lane: the device reports no host NUMA node") {
		t.Errorf("String() = %q", s)
	}
}
