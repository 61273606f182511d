package pinpool

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// slot is one buffer's place in a chunk. Its generation counts releases: a
// handle carries the generation the slot had when it was handed out, and is
// live only while the slot still has it. A release moves it on (one atomic
// compare-and-swap), which kills every copy of the handle; handing out only
// reads it.
type slot struct {
	gen   atomic.Uint64
	ptr   unsafe.Pointer
	off   uintptr // offset in the chunk
	chunk *chunk
	_     [32]byte // one slot per cache line: buffers of one slab go to different processors
}

// chunk is one backend allocation, carved into equal slots.
type chunk struct {
	alloc   Allocation
	class   *class
	bytes   int64
	slots   []slot
	devPtr  uintptr // device address of the chunk, when mapped
	mapped  bool
	retired int  // slots retired after a failed fence (under class.mu)
	freed   bool // under class.mu
}

// Buffer is a handle to pinned memory from a Pool. It is a small value:
// copy it freely, but release it exactly once, with Release or
// ReleaseAfter. After that every copy of the handle is dead: Bytes returns
// nil and a second release returns ErrReleased, even when the pool has
// already handed the same memory out again. The zero Buffer is dead.
type Buffer struct {
	s   *slot
	gen uint64
	n   int
}

func (b Buffer) live() bool { return b.s != nil && b.s.gen.Load() == b.gen }

// Bytes is the buffer's memory, of the length asked of Get, or nil when the
// handle is dead. The memory is not zeroed: it holds whatever the previous
// user left.
func (b Buffer) Bytes() []byte {
	if !b.live() {
		return nil
	}
	return unsafe.Slice((*byte)(b.s.ptr), b.n)
}

// Len is the length asked of Get.
func (b Buffer) Len() int { return b.n }

// Cap is the size of the memory behind the buffer (its size class), at
// least Len.
func (b Buffer) Cap() int {
	if b.s == nil {
		return 0
	}
	return int(b.s.chunk.class.size)
}

// Pointer is the address of the buffer's memory, for CUDA calls and cgo
// libraries, or nil when the handle is dead. The memory is page-aligned.
func (b Buffer) Pointer() unsafe.Pointer {
	if !b.live() {
		return nil
	}
	return b.s.ptr
}

// DevicePointer is the device address of the buffer when the pool's memory
// is mapped into a GPU's address space (zero-copy; for example the cudahost
// backend with Mapped set). Otherwise it returns ErrNotMapped.
func (b Buffer) DevicePointer() (uintptr, error) {
	if !b.live() {
		return 0, ErrReleased
	}
	c := b.s.chunk
	if !c.mapped {
		return 0, fmt.Errorf("%w (backend %s)", ErrNotMapped, c.class.pool.backend.Name())
	}
	return c.devPtr + b.s.off, nil
}

// Release gives the buffer back to the pool for reuse. Only release a
// buffer that no asynchronous operation still reads or writes; otherwise
// use ReleaseAfter. A second release of the handle returns ErrReleased.
func (b Buffer) Release() error {
	s := b.s
	if s == nil || !s.gen.CompareAndSwap(b.gen, b.gen+1) {
		return ErrReleased
	}
	s.chunk.class.release(s)
	return nil
}

// ReleaseAfter gives the buffer back to the pool once f.Done() reports
// true, for example a CUDA event recorded after an asynchronous copy from
// or to the buffer. Until then the buffer counts as pending and is never
// handed out. The handle is dead at once: later releases return
// ErrReleased. A nil fence is the same as Release.
func (b Buffer) ReleaseAfter(f Fence) error {
	if f == nil {
		return b.Release()
	}
	s := b.s
	if s == nil || !s.gen.CompareAndSwap(b.gen, b.gen+1) {
		return ErrReleased
	}
	p := s.chunk.class.pool
	p.pending.add(s, f)
	if p.closed.Load() {
		p.drainLate() // the janitor may have finished already
	} else {
		p.jan.kick()
	}
	return nil
}

// Valid reports whether the handle is live (handed out and not released).
func (b Buffer) Valid() bool { return b.live() }
