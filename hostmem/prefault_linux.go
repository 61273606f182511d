package hostmem

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// minPartBytes is the least memory a prefault worker gets, so small regions
// are prefaulted inline without starting goroutines.
const minPartBytes = 1 << 20

// maxDefaultWorkers caps the default number of prefault workers; page faults
// contend on the process's memory map lock beyond a handful of threads.
const maxDefaultWorkers = 8

// noPopulate is set once madvise(MADV_POPULATE_WRITE) (Linux 5.14) turns out
// to be unsupported; prefault then touches pages instead. Tests set it to
// exercise the touch path.
var noPopulate atomic.Bool

// prefault makes the kernel back every page of mem now rather than on first
// use. The work is split into parts aligned to align bytes (a page, or a huge
// page so that no huge page is faulted by two workers), one goroutine per
// part. Each part is populated with madvise(MADV_POPULATE_WRITE), one system
// call per part and faster than one fault per page (BenchmarkAlloc against
// BenchmarkAllocTouch), or, on older kernels, by writing one byte per page.
func prefault(mem []byte, page, align, workers int) error {
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), maxDefaultWorkers)
	}
	workers = min(workers, max(1, len(mem)/minPartBytes))
	if workers <= 1 {
		return prefaultPart(mem, page)
	}
	part, ok := roundUp((len(mem)+workers-1)/workers, align)
	if !ok {
		part = len(mem)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for off := 0; off < len(mem); off += part {
		end := min(off+part, len(mem))
		wg.Go(func() {
			if err := prefaultPart(mem[off:end], page); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prefaultPart populates one part, falling back to touch when the kernel
// lacks MADV_POPULATE_WRITE. Other madvise failures (ENOMEM when the memory,
// or the bound NUMA node, is exhausted) are returned instead of letting a
// page fault invoke the OOM killer later.
func prefaultPart(mem []byte, page int) error {
	if !noPopulate.Load() {
		err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
			noPopulate.Store(true)
		default:
			return fmt.Errorf("hostmem: prefault (madvise MADV_POPULATE_WRITE): %w", err)
		}
	}
	touch(mem, page)
	return nil
}

// touch writes a zero to the first byte of every page of mem. A write (not a
// read) is needed: a read fault maps the shared zero page.
func touch(mem []byte, page int) {
	for i := 0; i < len(mem); i += page {
		mem[i] = 0
	}
}
