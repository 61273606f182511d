package pinpool

import (
	"fmt"
	"unsafe"
)

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

func (b Buffer) live() bool { return b.s != nil && b.s.state.Load() == word(b.gen, stInUse) }

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

// Cap is the size of the memory behind the buffer (its size class, a
// multiple of the system page size), at least Len.
func (b Buffer) Cap() int {
	if b.s == nil {
		return 0
	}
	return int(b.s.chunk.class.size)
}

// Pointer is the address of the buffer's memory, for CUDA calls and C
// libraries, or nil when the handle is dead. The memory is aligned to the
// system page size (os.Getpagesize).
//
// The memory of the pool's backends (NewHostBackend, package cudahost) is
// mapped outside the Go heap: the garbage collector neither moves nor
// frees it, so cgo's pointer-passing rules, which are about Go memory, do
// not restrict it. C code may keep the pointer after the call returns and
// use it from its own threads (an asynchronous copy, an inference engine's
// input binding), as long as the buffer is not released: once Release
// returns, the memory may be handed out again at once. Release it only
// after C is done with it, or with ReleaseAfter and a fence that completes
// when C is done (a CUDA event recorded after the work that reads it). A
// Go value stored into the memory is invisible to the garbage collector:
// keep only plain data there, never Go pointers.
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
		return 0, fmt.Errorf("%w (backend %s)", ErrNotMapped, c.class.core.backendName)
	}
	return c.devPtr + b.s.off, nil
}

// Release gives the buffer back to the pool for reuse. Only release a
// buffer that no asynchronous operation still reads or writes; otherwise
// use ReleaseAfter. A second release of the handle returns ErrReleased.
// After Close, the memory is freed once nothing else of its allocation is
// in use.
func (b Buffer) Release() error {
	if b.s == nil || !b.s.chunk.class.release(b.s, b.gen) {
		return ErrReleased
	}
	return nil
}

// ReleaseAfter gives the buffer back to the pool once f.Done() reports
// true, for example a CUDA event recorded after an asynchronous copy from
// or to the buffer. Until then the buffer counts as pending and is never
// handed out. The handle is dead at once: later releases return
// ErrReleased.
//
// A fence that cannot be called (nil, or a nil function or pointer behind
// the interface) is refused with ErrInvalidFence, and the handle stays
// live. A fence whose Done returns an error or panics retires the buffer:
// the pool cannot know whether the device still uses it, so it is never
// handed out again and its memory is freed with the rest of its
// allocation.
func (b Buffer) ReleaseAfter(f Fence) error {
	if nilFence(f) {
		if !b.live() {
			return ErrReleased
		}
		return fmt.Errorf("%w: nil %T (use Release when nothing is in flight)", ErrInvalidFence, f)
	}
	s := b.s
	if s == nil || !s.state.CompareAndSwap(word(b.gen, stInUse), word(b.gen+1, stPending)) {
		return ErrReleased
	}
	c := s.chunk.class
	c.pending.Add(1)
	co := c.core
	co.pending.add(pendingItem{s, b.gen + 1, f})
	co.kick()
	return nil
}

// Valid reports whether the handle is live (handed out and not released).
func (b Buffer) Valid() bool { return b.live() }
