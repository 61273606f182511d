package transfer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// Registration is host memory page-locked by Copier.Register for a scope: copies of any range
// inside it go as asynchronous copies, with no staging, until Close. It suits large buffers copied
// many times: registering costs about as much as copying the memory a few times over, and
// unregistering synchronises with the device (BenchmarkTransfer and pinpool bench measure both).
type Registration struct {
	g          *registry // the copier's, which Close takes it out of
	mem        []byte    // keeps a Go slice alive (the Go heap does not move)
	start, end uintptr
	parts      []regPart
	users      sync.WaitGroup // copies using the registration
	closed     bool           // under g.mu
}

// regPart is one cuMemHostRegister call's range, in absolute addresses.
type regPart struct {
	start, end uintptr
	h          hostReg
}

// Free unregisters the part (for cuda.RegisterInParts).
func (p regPart) Free() error { return p.h.Free() }

// registry holds a copier's open registrations, sorted by address.
type registry struct {
	chunk int          // Options.RegisterChunk, a multiple of the page size
	mu    sync.RWMutex // held alone: no other lock is taken under it (see Copier)
	list  []*Registration
}

// Bytes is the registered memory.
func (r *Registration) Bytes() []byte { return r.mem }

// Parts is the number of cuMemHostRegister calls the memory took.
func (r *Registration) Parts() int { return len(r.parts) }

// Close waits for copies that use the registration, then unregisters it; the memory stays valid as
// ordinary memory. A second Close returns ErrClosed. Copier.Close closes the registrations still
// open.
func (r *Registration) Close() error {
	if !r.g.remove(r) {
		return ErrClosed
	}
	r.users.Wait()
	if err := r.free(); err != nil {
		return fmt.Errorf("transfer: unregistering %d bytes at %#x: %w", len(r.mem), r.start, err)
	}
	return nil
}

// free unregisters the parts, last first.
func (r *Registration) free() error {
	var errs []error
	for i := len(r.parts) - 1; i >= 0; i-- {
		if err := r.parts[i].Free(); err != nil {
			errs = append(errs, err)
		}
	}
	r.parts = nil
	return errors.Join(errs...)
}

// useList is the registrations a transfer uses, each with a use taken.
type useList []*Registration

func (l useList) done() {
	for _, r := range l {
		r.users.Done()
	}
}

// covering appends to dst the open registrations that overlap b, in address order, each with a use
// taken, so that none is closed while the transfer copies from or into it.
func (g *registry) covering(dst useList, b []byte) useList {
	if len(b) == 0 {
		return dst
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	e := p + uintptr(len(b))
	g.mu.RLock()
	defer g.mu.RUnlock()
	// The first registration that ends after p.
	i, _ := slices.BinarySearchFunc(g.list, p, func(r *Registration, t uintptr) int {
		if r.end <= t {
			return -1
		}
		return 1
	})
	for ; i < len(g.list) && g.list[i].start < e; i++ {
		g.list[i].users.Add(1)
		dst = append(dst, g.list[i])
	}
	return dst
}

// appendParts appends to segs a registered segment for each of r's parts that overlaps b, as ranges
// relative to b, in address order.
func (r *Registration) appendParts(segs []segment, b []byte) []segment {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	e := p + uintptr(len(b))
	for _, part := range r.parts {
		if s, t := max(part.start, p), min(part.end, e); s < t {
			segs = append(segs, segment{int(s - p), int(t - p), PathRegistered})
		}
	}
	return segs
}

// overlaps reports whether [s, e) overlaps an open registration; g.mu is held.
func (g *registry) overlaps(s, e uintptr) bool {
	return slices.ContainsFunc(g.list, func(r *Registration) bool { return r.start < e && s < r.end })
}

// insert adds r unless it overlaps an open registration.
func (g *registry) insert(r *Registration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.overlaps(r.start, r.end) {
		return false
	}
	i, _ := slices.BinarySearchFunc(g.list, r.start, func(x *Registration, t uintptr) int { return cmp.Compare(x.start, t) })
	g.list = slices.Insert(g.list, i, r)
	return true
}

// remove takes r out of the registry; false if it was closed already.
func (g *registry) remove(r *Registration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.closed {
		return false
	}
	r.closed = true
	g.list = slices.DeleteFunc(g.list, func(x *Registration) bool { return x == r })
	return true
}

func (g *registry) closeAll() error {
	g.mu.RLock()
	list := slices.Clone(g.list)
	g.mu.RUnlock()
	var errs []error
	for _, r := range list {
		if err := r.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MappedPointer returns the device address of a buffer from a pool whose memory is mapped (for
// example pinpool.CUDABackend over cudahost.New(cudahost.Options{Mapped: true})); kernels read and
// write the buffer in place through it. Otherwise the error wraps ErrNotMapped.
func MappedPointer(buf pinpool.Buffer) (cuda.DevicePtr, error) {
	p, err := buf.DevicePointer()
	if err != nil {
		if errors.Is(err, ErrNotMapped) {
			return 0, fmt.Errorf("transfer: %w", err)
		}
		return 0, fmt.Errorf("transfer: device pointer of a pool buffer: %w", err)
	}
	return cuda.DevicePtr(p), nil
}
