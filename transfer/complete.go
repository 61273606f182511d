package transfer

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// Step 5 of a transfer: complete. A copy is complete when the event issued after it has completed:
// only then may its staging buffer go back to the pool and its window slot to the window, and only
// then are device-to-host bytes in the staging buffer to copy out. (A chunked transfer's lanes
// complete their chunks in staged.go, with chunkedRun.complete.)

// waitAll waits for the events of a transfer's issued copies of pinned memory, gives them back, and
// returns err joined with their failures.
func (c *Copier) waitAll(o op, path Path, evs []event, err error) error {
	for _, ev := range evs {
		if e := ev.synchronize(); e != nil {
			c.events.drop(ev)
			err = errors.Join(err, copyErr(o.dir, path, 0, len(o.host), e))
			continue
		}
		c.events.put(ev)
	}
	return err
}

// copyOut copies device-to-host bytes from staging into the destination: with streaming stores when
// stream (no other transfer stages device to host), which need not read the destination's lines
// first and were faster for large transfers and streams of frames; with many transfers staging
// device to host at once they were slower than cached stores, so those copy out cached
// (BenchmarkFrameStream with 10 goroutines). A transfer host to device beside it does not count:
// copying out cached beside one made transfers both ways at once slower (BenchmarkBothWays).
func copyOut(dst, src []byte, stream bool) {
	if stream {
		streamBytes(dst, src)
		return
	}
	copyBytes(dst, src, false)
}

// cachedStep is the largest single memmove of a cached copy. The Go runtime's memmove on amd64
// switches to non-temporal stores (which bypass the caches) at 1 MiB; steps below that keep the
// destination in the last-level cache.
const cachedStep = 512 << 10

// copyBytes copies src into dst (of equal length). cached keeps the destination in the CPU caches,
// in steps below the runtime's threshold for non-temporal stores; otherwise it is the runtime's
// copy (cached below 1 MiB, streaming to memory from there), which suits a destination that is not
// read soon. The cooperative mode writes its staging with streamBytes instead, since the DMA reads
// memory that sits in the cores' caches much slower (BenchmarkFrameStream); the chunked mode uses
// cached copies, whose window stays in the last-level cache.
func copyBytes(dst, src []byte, cached bool) {
	if !cached {
		copy(dst, src)
		return
	}
	for len(src) > cachedStep {
		copy(dst[:cachedStep], src[:cachedStep])
		dst, src = dst[cachedStep:], src[cachedStep:]
	}
	copy(dst, src)
}

// sourceFault is a page fault in a transfer's source memory, such as a mapping of a file cut short
// underneath it. It wraps ErrFileChanged.
type sourceFault struct{ addr uintptr }

func (e *sourceFault) Error() string {
	if e.addr == 0 {
		return fmt.Sprintf("transfer: the source memory is gone: %v", ErrFileChanged)
	}
	return fmt.Sprintf("transfer: the source memory at %#x is gone: %v", e.addr, ErrFileChanged)
}

func (e *sourceFault) Unwrap() error { return ErrFileChanged }

// copyIn copies host-to-device bytes from src into staging dst, with streaming stores when stream
// (see copyBytes), and turns a page fault in src into a *sourceFault instead of a crash. The
// standing lanes and a staged transfer's caller run with debug.SetPanicOnFault on, so that a file
// mapped by the caller (or by ToDeviceFromFile) and truncated meanwhile ends the transfer with an
// error; every other panic goes on.
func copyIn(dst, src []byte, stream bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			re, rt := r.(runtime.Error)
			if !rt {
				panic(r)
			}
			if f, ok := r.(interface{ Addr() uintptr }); ok {
				err = &sourceFault{f.Addr()}
				return
			}
			// An emulator (qemu-user) reports the fault without its address, as a nil
			// dereference; only src can fault here, dst being staging the copier holds.
			if strings.Contains(re.Error(), "invalid memory address") {
				err = &sourceFault{}
				return
			}
			panic(r)
		}
	}()
	if stream {
		streamBytes(dst, src)
	} else {
		copyBytes(dst, src, true)
	}
	runtime.KeepAlive(src)
	return nil
}
