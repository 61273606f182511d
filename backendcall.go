package pinpool

import (
	"context"
	"fmt"
	"time"
	"unsafe"
)

// The pool calls its Backend only through these functions, which contain
// a backend's panics: a panic becomes an error (counted in
// Stats.BackendPanics), and the pool's budget and bookkeeping stay exact.

// backendAlloc allocates size bytes and checks what came back: at least
// size bytes, page-aligned. Bad memory is freed and reported as ErrGrow.
//
// A ContextBackend is given ctx and progress (bytes made so far); another
// backend is asked only when ctx is not done yet.
func (co *core) backendAlloc(ctx context.Context, size int64, progress func(int64)) (a Allocation, mem []byte, took time.Duration, err error) {
	t0 := time.Now()
	defer func() {
		took = time.Since(t0)
		if r := recover(); r != nil {
			co.backendPanics.Add(1)
			if a != nil {
				co.backendFree(a)
			}
			a, mem = nil, nil
			err = fmt.Errorf("%w: %d bytes from %s: the backend panicked: %v", ErrGrow, size, co.backendName, r)
		}
		if err != nil {
			co.failures.Add(1)
		}
	}()
	if cb, ok := co.backend.(ContextBackend); ok {
		var report func(int)
		if progress != nil {
			report = func(n int) { progress(int64(n)) }
		}
		a, err = cb.AllocContext(ctx, int(size), report)
	} else if err = ctx.Err(); err == nil {
		a, err = co.backend.Alloc(int(size))
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%w: %d bytes from %s: %w", ErrGrow, size, co.backendName, err)
	}
	if a == nil {
		return nil, nil, 0, fmt.Errorf("%w: %d bytes from %s: the backend returned no allocation and no error", ErrGrow, size, co.backendName)
	}
	mem = a.Bytes()
	switch {
	case int64(len(mem)) < size:
		co.backendFree(a)
		return nil, nil, 0, fmt.Errorf("%w: backend %s returned %d bytes, asked %d", ErrGrow, co.backendName, len(mem), size)
	case uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%pageSize != 0:
		co.backendFree(a)
		return nil, nil, 0, fmt.Errorf("%w: backend %s returned memory at %p, not page-aligned", ErrGrow, co.backendName, unsafe.SliceData(mem))
	}
	return a, mem[:size], 0, nil
}

// backendFree frees an allocation; a failure or a panic is counted in
// Stats.FreeFailures and returned.
func (co *core) backendFree(a Allocation) (err error) {
	defer func() {
		if r := recover(); r != nil {
			co.backendPanics.Add(1)
			err = fmt.Errorf("pinpool: freeing memory of %s: the backend panicked: %v", co.backendName, r)
		}
		if err != nil {
			co.freeFailures.Add(1)
		}
	}()
	if err := a.Free(); err != nil {
		return fmt.Errorf("pinpool: freeing memory of %s: %w", co.backendName, err)
	}
	return nil
}

// backendNameOf reads a backend's Name once, for Stats and errors.
func backendNameOf(b Backend) (name string) {
	defer func() {
		if r := recover(); r != nil {
			name = fmt.Sprintf("%T (Name panicked)", b)
		}
	}()
	return b.Name()
}

// devicePointerOf asks an allocation for its device address; an error or
// a panic means it is not mapped.
func devicePointerOf(a Allocation) (d uintptr, ok bool) {
	defer func() {
		if recover() != nil {
			d, ok = 0, false
		}
	}()
	d, err := a.DevicePointer()
	return d, err == nil
}

// growLimitOf asks a backend for its GrowLimit; a panic means none.
func growLimitOf(g GrowLimiter) (n int) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return g.GrowLimit()
}

// hugePageBytesOf asks an allocation how much of it huge pages back; an
// allocation that does not say, or panics, counts 0.
func hugePageBytesOf(a Allocation) (n int64) {
	h, ok := a.(hugePaged)
	if !ok {
		return 0
	}
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return max(0, h.HugePageBytes())
}

// splitRetriesOf asks a backend how many pin calls it split; 0 when it
// does not say or panics.
func splitRetriesOf(b Backend) (n uint64) {
	s, ok := b.(splitter)
	if !ok {
		return 0
	}
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return s.SplitRetries()
}
