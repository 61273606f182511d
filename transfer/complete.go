package transfer

import (
	"fmt"
	"runtime"
	"strings"
)

// Step 5 of a transfer: complete. A copy is complete when the event issued after it has completed:
// only then may its staging go back and its downloaded bytes be copied out. Here are wait and the
// CPU copies into and out of staging; the staged modes complete their own chunks.

// wait waits for ev, recorded after a copy of n bytes at offset off of a transfer, and gives it
// back; after a failure it destroys ev and returns the copy's error.
func (c *Copier) wait(ev event, d Direction, path Path, off, n int) error {
	if err := ev.synchronize(); err != nil {
		c.events.drop(ev)
		return copyErr(d, path, off, n, err)
	}
	c.events.put(ev)
	return nil
}

// copyOut copies device-to-host bytes from staging into the destination: with streaming stores,
// which need not read the destination's lines first, when stream (no other download stages at
// once: with many they were slower than the runtime's copy, BenchmarkFrameStream with 10
// goroutines; uploads beside do not count, a cached copy-out made both ways slower, BenchmarkBothWays).
func copyOut(dst, src []byte, stream bool) {
	if stream {
		streamBytes(dst, src)
		return
	}
	copy(dst, src)
}

// cachedStep is a cached copy's largest memmove: the runtime's memmove (amd64) streams from 1 MiB.
const cachedStep = 512 << 10

// copyBytes copies src into dst (of equal length); cached keeps the destination in the CPU caches,
// in steps below the runtime's threshold for non-temporal stores. The chunked mode stages with
// cached copies, since its window stays in the last-level cache; the cooperative mode with
// streamBytes, since the DMA reads memory in the cores' caches much slower (BenchmarkFrameStream).
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
// (see copyBytes), and turns a page fault in src into a *sourceFault: the lanes run with
// debug.SetPanicOnFault, so that a mapped file truncated meanwhile ends the transfer, not the
// process. Every other panic goes on.
func copyIn(dst, src []byte, stream bool) (err error) {
	defer func() {
		r := recover()
		re, rt := r.(runtime.Error)
		switch f, addr := r.(interface{ Addr() uintptr }); {
		case r == nil:
		case rt && addr:
			err = &sourceFault{f.Addr()}
		// An emulator (qemu-user) reports the fault without its address, as a nil dereference;
		// only src can fault here, dst being staging the copier holds.
		case rt && strings.Contains(re.Error(), "invalid memory address"):
			err = &sourceFault{}
		default:
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
