package cudahost

import "strconv"

// Method is how a Backend makes pinned memory.
type Method int

const (
	// Auto, the zero value, picks the method that grows faster on the
	// device (BenchmarkGrow compares them): Register where the device supports host registration (and is
	// not an integrated GPU below compute capability 7.2), else HostAlloc.
	// Options that only one method has decide instead: WriteCombined picks
	// HostAlloc; ReadOnly, HugePages and BindNUMA pick Register. See the
	// package documentation for the figures behind the choice.
	Auto Method = iota

	// HostAlloc allocates with cuMemHostAlloc: the driver maps, zeroes and
	// pins the memory in one call, slow for large sizes and under a
	// driver-wide lock (BenchmarkGrow), and cuMemFreeHost gives it back.
	HostAlloc

	// Register maps anonymous memory with mmap (optionally bound to a NUMA
	// node and advised to use transparent huge pages), prefaults it in
	// parallel and pins it with cuMemHostRegister, in parts of at most
	// Options.RegisterChunk bytes, group by group (Options.RegisterGroup).
	// Free unregisters every part and unmaps.
	Register
)

// String returns "auto", "hostalloc", "register", or "Method(N)" for a value
// that is none of them.
func (m Method) String() string {
	switch m {
	case Auto:
		return "auto"
	case HostAlloc:
		return "hostalloc"
	case Register:
		return "register"
	}
	return "Method(" + strconv.Itoa(int(m)) + ")"
}
