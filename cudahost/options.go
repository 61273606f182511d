package cudahost

import (
	"fmt"
	"math"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// DefaultRegisterChunk is the RegisterChunk used when Options.RegisterChunk
// is zero: small enough that one registration call keeps other streams
// waiting for a short while only, large enough that the driver's cost per
// call stays small against the pinning (BenchmarkArena and `pinpool arena`
// measure both for each piece size; scripts/ref/arena.cpp the same in C++).
const DefaultRegisterChunk = 16 << 20

// DefaultRegisterGroup is the RegisterGroup used when Options.RegisterGroup
// is zero: a growth prefaults this many bytes, then registers them, then
// prefaults the next, so that prefault and registration never run at once
// (with both at once, other streams' copies waited for milliseconds). A
// group holds a few pieces, each prefault worker faulting its share of it
// in one call. Larger groups grew a large arena faster, but their long runs
// of prefault made other processes' copies and cuMemGetInfo wait past the
// bound the registration keeps, where a group's prefault between two
// registrations did not (`pinpool arena`'s register:group= ways, with
// scripts/ref/torch_pin.py neighbour running as the other process). A
// process that has the machine to itself can trade that for rate
// (ExampleOptions_dedicatedNode).
const DefaultRegisterGroup = 64 << 20

// DefaultPrefaultWorkers is the most goroutines that prefault a growth
// when Options.PrefaultWorkers is zero: New uses min(GOMAXPROCS,
// DefaultPrefaultWorkers). The prefault runs while no registration does
// (RegisterGroup), so it may take the cores; more fault in no faster (the
// page faults contend in the kernel).
const DefaultPrefaultWorkers = 16

// MaxRegisterChunk is the largest RegisterChunk: no single registration
// call pins more (driver r580 fails from 512 GiB).
const MaxRegisterChunk = 64 << 30

// DefaultHostAllocChunk is the HostAllocChunk used when it is zero: one
// cuMemHostAlloc of it holds the driver's lock about as long as one
// registration of a RegisterChunk piece.
const DefaultHostAllocChunk = 2 << 20

// DefaultRegisterPause is the RegisterPause used when it is zero: longer
// than a thread takes to wake up on the lock's release. A longer pause
// kept a neighbour's copies no faster and made a Close of many pieces,
// whose unregistrations each pause, slower (`pinpool arena`'s
// register:pause= ways).
const DefaultRegisterPause = 100 * time.Microsecond

// pageUnit is the granularity of sizes.
const pageUnit = 4096

// Options configures a Backend. The zero value uses device 0, picks the
// faster method for it (Auto), and asks for plain pinned memory: not
// portable, not mapped, not write-combined, on normal pages, with no NUMA
// binding.
type Options struct {
	// Device is the CUDA device ordinal (0 is the first device). The
	// backend retains that device's primary context.
	Device int

	// Method is how memory is made: HostAlloc, Register, or Auto (the zero
	// value), which picks one from the device's properties; see Auto.
	Method Method

	// Portable makes the memory pinned for every CUDA context in the
	// process, not only the device's primary context (the Portable flag of
	// cuMemHostAlloc and cuMemHostRegister).
	Portable bool

	// Mapped maps the memory into the device's address space (the DeviceMap
	// flag), so kernels can read and write it directly (zero-copy) through
	// Chunk.DevicePointer. New fails with ErrCannotMap when the device
	// cannot map host memory.
	Mapped bool

	// WriteCombined allocates write-combined memory: fast for the CPU to
	// write and the GPU to read over PCIe, very slow for the CPU to read.
	// HostAlloc method only (Register has no such flag); with Register New
	// fails with ErrInvalidOptions. Many hosts see no transfer gain from it
	// (pinpool bench's write-combined column says so for this one).
	WriteCombined bool

	// ReadOnly registers the memory as read-only for the device (the
	// ReadOnly flag of cuMemHostRegister): the device may read it, not
	// write it, so device-to-host copies into it are not allowed. Register
	// method only, and only on devices whose properties report
	// ReadOnlyHostRegisterSupported (ErrUnsupported otherwise).
	ReadOnly bool

	// HugePages asks for huge pages (Register method only), which the
	// Register method does by default anyway: the hugetlb pool when enough
	// huge pages are reserved, else transparent huge pages (advised), with
	// fewer page faults when prefaulting and fewer pages for the driver to
	// pin. Best effort; Chunk.HugePageBytes says what was obtained. Set, it
	// makes Auto pick Register.
	HugePages bool

	// SmallPages maps normal pages only (Register method only), for a
	// system where huge pages do harm (memory fragmentation, compaction).
	// It cannot be combined with HugePages.
	SmallPages bool

	// BindNUMA binds the mapping to host NUMA node NUMANode before it is
	// touched (Register method only). It is never done implicitly: when
	// BindNUMA is false the kernel's default policy places the pages (first
	// touch, by the prefault workers), even if the device reports a nearest
	// node in Properties.HostNUMAID. Callers that want memory next to the
	// GPU set BindNUMA and NUMANode = Properties().HostNUMAID themselves
	// (when it is >= 0).
	BindNUMA bool

	// NUMANode is the node BindNUMA binds to.
	NUMANode int

	// PrefaultWorkers is the number of goroutines that prefault a new
	// mapping (Register method only); zero or negative means
	// min(GOMAXPROCS, DefaultPrefaultWorkers).
	PrefaultWorkers int

	// RegisterGroup is how many bytes an allocation prefaults, then
	// registers, in turn (Register method only): the pages of a group are
	// faulted in by the PrefaultWorkers, then registered piece by piece,
	// and the next group's prefault starts only when the last piece of
	// this one is registered, so that prefault and registration never run
	// at once. Zero means DefaultRegisterGroup; otherwise it must be a
	// positive multiple of 4096, and it is rounded up to whole
	// RegisterChunk pieces.
	//
	// Small groups keep other processes' copies waiting short: a long run
	// of prefault, which takes no driver lock, still made their copies
	// wait milliseconds. On a machine no other process copies on, groups
	// of a few GiB (4 << 30) grow a large arena faster (`pinpool arena`'s
	// register:group= ways, with scripts/ref/torch_pin.py neighbour
	// running, measure both).
	RegisterGroup int

	// RegisterPause is the least time the backend leaves the driver's lock
	// free after each call that holds it (a registration or an
	// unregistration of a piece, a cuMemHostAlloc or cuMemFreeHost), so
	// that other goroutines' copies and driver calls get in between; the
	// pause is a quarter of the call's time when that is longer. Zero
	// means DefaultRegisterPause; negative means no pause (and such calls
	// may then run at once on several goroutines).
	RegisterPause time.Duration

	// RegisterWorkers is the number of goroutines that call
	// cuMemHostRegister at once while an allocation grows (Register method
	// only), each on the next piece whose pages are backed. Zero or
	// negative means DefaultRegisterWorkers.
	RegisterWorkers int

	// HostAllocChunk is the most bytes the pool should ask of one
	// cuMemHostAlloc (HostAlloc method only; see Backend.GrowLimit): the
	// call holds a driver-wide lock for its whole length, so a larger one
	// stalls other goroutines' copies for longer. Zero means DefaultHostAllocChunk; otherwise a positive
	// multiple of 4096.
	HostAllocChunk int

	// RegisterChunk is the most bytes one cuMemHostRegister call pins
	// (Register method only), at most MaxRegisterChunk: a larger
	// allocation is registered as several consecutive registrations, all
	// undone on failure and on Free. Each call holds the driver's lock
	// while it pins, so the piece bounds how long other streams' copies
	// wait; a piece is registered in smaller calls where the last call's
	// rate says it would hold the lock longer than about 0.75 ms (small
	// pages, fragmented memory). Zero means DefaultRegisterChunk; otherwise it must be a
	// positive multiple of 4096 (it is rounded up to the system page size
	// where pages are larger). The driver takes a copy only when it lies
	// inside one registration; package cuda's copies split a copy that
	// crosses a part boundary into one copy per part.
	RegisterChunk int
}

// registerOnly reports whether opt asks for something only the Register
// method has.
func (opt Options) registerOnly() bool {
	return opt.ReadOnly || opt.HugePages || opt.SmallPages || opt.BindNUMA
}

// checkOptions validates what does not depend on the device.
func checkOptions(opt Options) error {
	_, chunkErr := cuda.RegisterChunkSize(int64(opt.RegisterChunk))
	switch {
	case opt.Method != Auto && opt.Method != HostAlloc && opt.Method != Register:
		return fmt.Errorf("%w: unknown method %v", ErrInvalidOptions, opt.Method)
	case opt.Device < 0:
		return fmt.Errorf("%w: negative device ordinal %d", ErrInvalidOptions, opt.Device)
	case opt.BindNUMA && opt.NUMANode < 0:
		return fmt.Errorf("%w: negative NUMA node %d", ErrInvalidOptions, opt.NUMANode)
	case chunkErr != nil:
		return fmt.Errorf("%w: %w", ErrInvalidOptions, chunkErr)
	case opt.RegisterChunk > MaxRegisterChunk:
		return fmt.Errorf("%w: RegisterChunk %d: at most %d (single registrations of 512 GiB and more fail)", ErrInvalidOptions, opt.RegisterChunk, int64(MaxRegisterChunk))
	case opt.RegisterGroup < 0 || opt.RegisterGroup%pageUnit != 0:
		return fmt.Errorf("%w: RegisterGroup %d: want 0 (default %d) or a positive multiple of %d", ErrInvalidOptions, opt.RegisterGroup, DefaultRegisterGroup, pageUnit)
	case opt.HostAllocChunk < 0 || opt.HostAllocChunk%pageUnit != 0:
		return fmt.Errorf("%w: HostAllocChunk %d: want 0 (default %d) or a positive multiple of %d", ErrInvalidOptions, opt.HostAllocChunk, DefaultHostAllocChunk, pageUnit)
	case opt.HugePages && opt.SmallPages:
		return fmt.Errorf("%w: HugePages and SmallPages contradict each other", ErrInvalidOptions)
	case opt.WriteCombined && opt.Method == Register:
		return fmt.Errorf("%w: WriteCombined needs the hostalloc method (cuMemHostRegister has no write-combined flag)", ErrInvalidOptions)
	case opt.registerOnly() && opt.Method == HostAlloc:
		return fmt.Errorf("%w: %s need the register method", ErrInvalidOptions, registerOnlyNames(opt))
	case opt.WriteCombined && opt.registerOnly():
		return fmt.Errorf("%w: WriteCombined (hostalloc only) cannot be combined with %s (register only)", ErrInvalidOptions, registerOnlyNames(opt))
	}
	return nil
}

func registerOnlyNames(opt Options) string {
	s := ""
	add := func(on bool, name string) {
		if !on {
			return
		}
		if s != "" {
			s += ", "
		}
		s += name
	}
	add(opt.ReadOnly, "ReadOnly")
	add(opt.HugePages, "HugePages")
	add(opt.SmallPages, "SmallPages")
	add(opt.BindNUMA, "BindNUMA")
	return s
}

// canRegister reports whether cuMemHostRegister is usable on the device: the
// device says so, and it is not an integrated GPU without I/O coherency
// (compute capability below 7.2, e.g. the Jetson TX2).
func canRegister(p cuda.Properties) bool {
	if p.Integrated && (p.ComputeMajor < 7 || p.ComputeMajor == 7 && p.ComputeMinor < 2) {
		return false
	}
	return p.HostRegisterSupported
}

// describe names the device for error messages, e.g. "device 0 (NVIDIA
// Jetson TX2, compute 6.2, integrated)".
func describe(p cuda.Properties) string {
	s := fmt.Sprintf("device %d (", p.Ordinal)
	if p.Name != "" {
		s += p.Name + ", "
	}
	s += "compute " + p.Compute()
	if p.Integrated {
		s += ", integrated"
	}
	return s + ")"
}

// validate checks opt against the device's properties and returns it
// resolved: Method is HostAlloc or Register and, for Register,
// RegisterChunk is set (cuda.RegisterChunkSize: the default for zero,
// rounded up to the system page size) and RegisterGroup too (the default
// for zero, in whole pieces).
func validate(opt Options, p cuda.Properties) (Options, error) {
	if err := checkOptions(opt); err != nil {
		return opt, err
	}
	if opt.Method == Auto {
		switch {
		case opt.WriteCombined:
			opt.Method = HostAlloc
		case opt.registerOnly(), canRegister(p):
			opt.Method = Register
		default:
			opt.Method = HostAlloc
		}
	}
	if opt.Method == Register && !canRegister(p) {
		why := "the device does not report host-register support"
		if p.Integrated {
			why = "integrated GPUs need compute capability 7.2 (I/O coherency) for cuMemHostRegister"
		}
		if opt.registerOnly() {
			why += "; " + registerOnlyNames(opt) + " need the register method"
		}
		return opt, fmt.Errorf("%w: %s: register method: %s", ErrUnsupported, describe(p), why)
	}
	if opt.Mapped && !p.CanMapHostMemory {
		return opt, fmt.Errorf("%w: %s reports CanMapHostMemory false", ErrCannotMap, describe(p))
	}
	if opt.ReadOnly && !p.ReadOnlyHostRegisterSupported {
		return opt, fmt.Errorf("%w: %s: ReadOnly: the device does not report read-only host-register support", ErrUnsupported, describe(p))
	}
	if opt.Method == Register {
		chunk := int64(opt.RegisterChunk)
		if chunk == 0 {
			chunk = DefaultRegisterChunk
		}
		n, err := cuda.RegisterChunkSize(chunk) // checked by checkOptions
		if err != nil {
			return opt, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		opt.RegisterChunk = int(n)
		if opt.RegisterGroup == 0 {
			opt.RegisterGroup = DefaultRegisterGroup
		}
		// Up to whole pieces; where that would pass the largest int, down.
		if g := opt.RegisterGroup / opt.RegisterChunk * opt.RegisterChunk; g < opt.RegisterGroup && g <= math.MaxInt-opt.RegisterChunk {
			opt.RegisterGroup = g + opt.RegisterChunk
		} else {
			opt.RegisterGroup = g
		}
	}
	return opt, nil
}

// flags returns the driver flags for resolved options.
func (opt Options) flags() (cuda.HostAllocFlags, cuda.HostRegisterFlags) {
	var a cuda.HostAllocFlags
	var r cuda.HostRegisterFlags
	if opt.Portable {
		a |= cuda.HostAllocPortable
		r |= cuda.HostRegisterPortable
	}
	if opt.Mapped {
		a |= cuda.HostAllocDeviceMap
		r |= cuda.HostRegisterDeviceMap
	}
	if opt.WriteCombined {
		a |= cuda.HostAllocWriteCombined
	}
	if opt.ReadOnly {
		r |= cuda.HostRegisterReadOnly
	}
	if opt.Method == Register {
		return 0, r
	}
	return a, 0
}

// name is the backend name for resolved options, e.g. "cuda:0/register" or
// "cuda:0/hostalloc+wc+mapped".
func (opt Options) name() string {
	s := fmt.Sprintf("cuda:%d/%v", opt.Device, opt.Method)
	add := func(on bool, f string) {
		if on {
			s += "+" + f
		}
	}
	add(opt.WriteCombined, "wc")
	add(opt.ReadOnly, "ro")
	add(opt.Portable, "portable")
	add(opt.Mapped, "mapped")
	add(opt.HugePages, "huge")
	add(opt.SmallPages, "small")
	if opt.BindNUMA {
		s += fmt.Sprintf("+numa%d", opt.NUMANode)
	}
	return s
}
