package pinpool

import (
	"fmt"
	"time"
	"unsafe"
)

// The pool calls its Backend only through these functions, which contain
// a backend's panics: a panic becomes an error (counted in
// Stats.BackendPanics), and the pool's budget and bookkeeping stay exact.

// backendAlloc allocates size bytes and checks what came back: at least
// size bytes, page-aligned. Bad memory is freed and reported as ErrGrow.
func (co *core) backendAlloc(size int64) (a Allocation, mem []byte, took time.Duration, err error) {
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
	a, err = co.backend.Alloc(int(size))
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
	case uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%uintptr(co.page) != 0:
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
