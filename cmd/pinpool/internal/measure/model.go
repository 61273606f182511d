// Package measure runs the benchmarks behind `pinpool bench` and `pinpool
// advise` and holds their results: transfer bandwidth and latency per kind
// of host memory, direction and size; the cost of allocating and freeing
// pinned memory; and the pool's Get+Release throughput against the seed
// design. The Report type is what the output formats (internal/report) and
// the advice rules (internal/advise) read.
package measure

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Kind is a kind of host memory a transfer reads or writes.
type Kind string

// Kinds of host memory, in the order tables list them.
const (
	// Pageable is ordinary Go memory ([]byte from make), copied by the
	// driver's synchronous cuMemcpyHtoD/DtoH.
	Pageable Kind = "pageable"
	// Pinned is cuMemHostAlloc memory (the pool's buffers), copied with
	// cuMemcpyHtoDAsync/DtoHAsync.
	Pinned Kind = "pinned"
	// WriteCombined is cuMemHostAlloc memory with
	// CU_MEMHOSTALLOC_WRITECOMBINED: uncached for the CPU, faster to read
	// over PCIe on some machines, very slow for the CPU to read.
	WriteCombined Kind = "write-combined"
	// Registered is ordinary memory page-locked with cuMemHostRegister.
	Registered Kind = "registered"
	// Mapped is pinned memory the GPU reads or writes in place (zero-copy)
	// through its device pointer, timed with the read-sum / fill kernels.
	Mapped Kind = "mapped"
	// Staged is pageable memory moved by the transfer engine
	// (transfer.Copier: pinned staging buffers, parallel CPU copies).
	Staged Kind = "staged"
	// Batch is pageable memory copied by the driver's batch copy
	// (cuMemcpyBatchAsync, CUDA 12.8 and later) in 4 MiB pieces with
	// source access order ANY, timed on the host clock around the call
	// and the stream's synchronize. Older drivers skip it.
	Batch Kind = "batch"
)

// Kinds lists every kind, in table order.
var Kinds = []Kind{Pageable, Pinned, WriteCombined, Registered, Mapped, Staged, Batch}

// ParseKind returns the kind named s, or an error naming the valid ones.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("measure: unknown memory kind %q (want one of %v)", s, Kinds)
}

// Direction is the direction of a transfer.
type Direction string

// Directions, in table order.
const (
	// H2D copies host memory to the device.
	H2D Direction = "H2D"
	// D2H copies device memory to the host.
	D2H Direction = "D2H"
	// Both runs an H2D and a D2H transfer of the same size at once, on two
	// streams; its bandwidth counts the bytes of both.
	Both Direction = "both"
)

// Directions lists every direction, in table order.
var Directions = []Direction{H2D, D2H, Both}

// ParseDirection returns the direction named s (case as in Directions, or
// "h2d", "d2h", "bidir"), or an error.
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "H2D", "h2d":
		return H2D, nil
	case "D2H", "d2h":
		return D2H, nil
	case "both", "bidir", "BOTH":
		return Both, nil
	}
	return "", fmt.Errorf("measure: unknown direction %q (want H2D, D2H or both)", s)
}

// Transfer is one measured transfer row: the median of Repeats timed
// transfers of Size bytes of memory of one Kind in one Direction.
type Transfer struct {
	Kind Kind      `json:"kind"`
	Dir  Direction `json:"direction"`
	// Size is the bytes of one transfer (of each of the two transfers for
	// Both).
	Size    int64 `json:"size_bytes"`
	Repeats int   `json:"repeats"`
	// Median, Min and Max are the time of one transfer (of the pair, for
	// Both) over the repeats.
	Median time.Duration `json:"median_ns"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
	// GBps is the bytes moved (2×Size for Both) over Median, in 10⁹ bytes
	// per second.
	GBps float64 `json:"gigabytes_per_second"`

	// Device is the device ordinal, or AllDevices for a transfer run on
	// every measured device at once (Size bytes on each; the rate is the
	// sum over the devices).
	Device int `json:"device"`
	// Runs are the repeats in up to MaxRuns consecutive batches, for the
	// Go benchmark format (a line per run); absent in reports saved before
	// it was recorded.
	Runs []RepeatRun `json:"runs,omitempty"`

	// Timer is how the transfers were timed: "cuda-events" (events
	// recorded on the stream around the copy) or "wall" (the host clock
	// around a call that returns when the bytes are in place: pageable and
	// staged copies, and batch copies with the stream's synchronize).
	Timer string `json:"timer"`
}

// Bytes is the bytes one timed transfer moves (2×Size for Both).
func (t Transfer) Bytes() int64 {
	if t.Dir == Both {
		return 2 * t.Size
	}
	return t.Size
}

// Devices returns the device ordinals the transfers were measured on, in
// order, without AllDevices.
func (r *Report) Devices() []int {
	var out []int
	for _, t := range r.Transfers {
		if t.Device != AllDevices && !slices.Contains(out, t.Device) {
			out = append(out, t.Device)
		}
	}
	slices.Sort(out)
	return out
}

// Alloc operations measured by the allocation benchmark.
const (
	OpHostAlloc  = "cuMemHostAlloc"      // allocate pinned memory
	OpFreeHost   = "cuMemFreeHost"       // free it
	OpRegister   = "cuMemHostRegister"   // page-lock existing (touched) memory
	OpUnregister = "cuMemHostUnregister" // undo it
	OpPoolHit    = "pool-hit"            // Pool.Get+Release of an idle buffer
	OpMmapLock   = "mmap+mlock"          // the host backend's allocation (no GPU)
	OpMunmap     = "munmap"              // and its free
)

// Alloc is the cost of one allocation-side operation at one size: the
// median of Repeats calls.
type Alloc struct {
	Op      string        `json:"op"`
	Size    int64         `json:"size_bytes"`
	Repeats int           `json:"repeats"`
	Median  time.Duration `json:"median_ns"`
	Min     time.Duration `json:"min_ns"`
	Max     time.Duration `json:"max_ns"`
	Runs    []RepeatRun   `json:"runs,omitempty"` // as Transfer.Runs
}

// Pool implementations compared by the pool benchmark.
const (
	ImplPinpool = "pinpool" // the root package's Pool
	ImplSeed    = "seed"    // internal/seedpool: the seed article's design
)

// PoolRun is the Get+Release throughput of one pool implementation with
// some goroutines, each getting and releasing a buffer of Size bytes in a
// tight loop.
type PoolRun struct {
	Impl       string `json:"impl"`
	Goroutines int    `json:"goroutines"`
	Size       int64  `json:"size_bytes"`
	Ops        int64  `json:"ops"` // Get+Release pairs, all goroutines
	// Elapsed is the wall time of the run.
	Elapsed time.Duration `json:"elapsed_ns"`
	// OpsPerSec is Ops/Elapsed (pairs per second, all goroutines);
	// NsPerOp is Elapsed×Goroutines/Ops (the time of one pair on one
	// goroutine).
	OpsPerSec float64 `json:"ops_per_second"`
	NsPerOp   float64 `json:"ns_per_op"`
	Backend   string  `json:"backend"` // memory behind the pool
	// Runs are the run's consecutive timed slices (Plan.MinRepeats of
	// them), for the Go benchmark format (a line per slice); absent in
	// reports saved before they were recorded.
	Runs []PoolSlice `json:"runs,omitempty"`
}

// PoolSlice is one timed slice of a PoolRun: Ops pairs in Elapsed.
type PoolSlice struct {
	Ops     int64         `json:"ops"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Machine describes where a report was measured.
// AllDevices is the Device of a transfer measured on every device at
// once.
const AllDevices = -1

// UnmarshalJSON reads a transfer row, also from reports saved before the
// rate's field was named gigabytes_per_second (it was "gbps").
func (t *Transfer) UnmarshalJSON(b []byte) error {
	type plain Transfer // without this method
	var v struct {
		plain
		Legacy *float64 `json:"gbps"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Transfer(v.plain)
	if v.Legacy != nil && t.GBps == 0 {
		t.GBps = *v.Legacy
	}
	return nil
}

// HostCopy is one row of the host memory copy benchmark: Size bytes
// copied from one ordinary Go slice to another by Threads goroutines at
// once, each its own contiguous part, with no DMA running. It is the
// ceiling of the staging path (which copies ordinary memory into pinned
// buffers) on this machine, measured with or without a GPU.
type HostCopy struct {
	Size    int64         `json:"size_bytes"`
	Threads int           `json:"threads"`
	Repeats int           `json:"repeats"`
	Median  time.Duration `json:"median_ns"`
	Min     time.Duration `json:"min_ns"`
	Max     time.Duration `json:"max_ns"`
	GBps    float64       `json:"gigabytes_per_second"` // 10^9 bytes per second, at the median
	Runs    []RepeatRun   `json:"runs,omitempty"`       // as Transfer.Runs
}

type Machine struct {
	Hostname string `json:"hostname"`
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	CPUs     int    `json:"cpus"`      // runtime.NumCPU
	CPUModel string `json:"cpu_model"` // from /proc/cpuinfo, when known
	MemTotal int64  `json:"mem_total_bytes"`
	// NoGPU, when not empty, says why no GPU was used (no driver, no
	// device); the GPU fields are then empty.
	NoGPU             string `json:"no_gpu,omitempty"`
	GPU               string `json:"gpu,omitempty"`
	Driver            string `json:"driver,omitempty"`         // the CUDA version the driver supports, "13.0"
	DriverRelease     string `json:"driver_release,omitempty"` // the driver's own release, as nvidia-smi shows it: "580.159.04"
	ComputeCapability string `json:"compute_capability,omitempty"`
	Integrated        bool   `json:"integrated"` // shares memory with the CPU (Jetson)
	CanMapHostMemory  bool   `json:"can_map_host_memory"`
	PCIe              string `json:"pcie,omitempty"` // "gen5 x16" when known
}

// Report is everything one run of the benchmarks measured.
type Report struct {
	// Date is when the run started; Command the command line that made it.
	Date    time.Time `json:"date"`
	Command string    `json:"command"`
	Machine Machine   `json:"machine"`

	Transfers []Transfer `json:"transfers"`
	Allocs    []Alloc    `json:"allocations"`
	Pool      []PoolRun  `json:"pool"`
	// HostCopies is the host memory copy benchmark (the ceiling of
	// staging), by size and threads.
	HostCopies []HostCopy `json:"host_copies,omitempty"`
	// Files is the file benchmark (Plan.FileSize): a temporary file to the
	// device and back, warm and cold, pinpool beside os.ReadFile plus the
	// driver's copy.
	Files []FileRun `json:"files,omitempty"`
	// Skipped says, one line each, what was not measured and why ("mapped:
	// the device cannot map host memory").
	Skipped []string `json:"skipped,omitempty"`
	// Partial is true when the run stopped early (interrupted, or a
	// device failed): the rows are those measured before it stopped.
	Partial bool `json:"partial,omitempty"`
}

// Empty reports whether r holds no measurement at all.
func (r *Report) Empty() bool {
	return len(r.Transfers)+len(r.Allocs)+len(r.Pool)+len(r.HostCopies)+len(r.Files) == 0
}

// IsNoGPU reports whether r was measured without a GPU.
func (r *Report) IsNoGPU() bool { return r.Machine.NoGPU != "" }

// Transfer returns the row for kind, direction and size, if measured.
func (r *Report) Transfer(k Kind, d Direction, size int64) (Transfer, bool) {
	for _, t := range r.Transfers {
		if t.Kind == k && t.Dir == d && t.Size == size {
			return t, true
		}
	}
	return Transfer{}, false
}

// TransferSizes returns the distinct transfer sizes measured, ascending.
func (r *Report) TransferSizes() []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, t := range r.Transfers {
		if !seen[t.Size] {
			seen[t.Size] = true
			out = append(out, t.Size)
		}
	}
	slices.Sort(out)
	return out
}
