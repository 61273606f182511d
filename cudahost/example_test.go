package cudahost_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
)

// A pool over a CUDA backend chosen by the caller, with locked host memory
// when there is no GPU: what pinpool.DefaultBackend does, with room for
// options of one's own (Mapped, WriteCombined, HugePages, BindNUMA, ...).
// It runs with or without a GPU.
func ExampleNew() {
	var backend pinpool.Backend
	b, err := cudahost.New(cudahost.Options{}) // device 0, the faster method for it
	switch {
	case err == nil:
		defer b.Close() // after the pool's Close: a pool does not close a backend it was given
		backend = pinpool.CUDABackend(b)
	case cuda.IsNoDriver(err):
		backend = pinpool.NewHostBackend(hostmem.Options{}) // no GPU: locked host memory
	default:
		log.Fatal(err)
	}
	p, err := pinpool.New(pinpool.Options{Backend: backend})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	buf, err := p.Get(context.Background(), 16<<10) // small: fits a 64 KiB lock limit
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Release()
	fmt.Println(len(buf.Bytes()))
	// Output: 16384
}

// Options that contradict each other are refused before the driver is
// touched, so this runs without a GPU too.
func ExampleNew_invalidOptions() {
	_, err := cudahost.New(cudahost.Options{Method: cudahost.Register, WriteCombined: true})
	fmt.Println(errors.Is(err, cudahost.ErrInvalidOptions))
	fmt.Println(err)
	// Output:
	// true
	// cudahost: invalid options: WriteCombined needs the hostalloc method (cuMemHostRegister has no write-combined flag)
}

// A backend used on its own: a chunk of pinned memory mapped into the
// device's address space, for kernels to read and write in place. It needs
// a GPU that can map host memory; without one it says so on standard error
// and returns.
func ExampleBackend_Alloc() {
	b, err := cudahost.New(cudahost.Options{Mapped: true})
	if cuda.IsNoDriver(err) || errors.Is(err, cudahost.ErrCannotMap) {
		fmt.Fprintln(os.Stderr, "no GPU that maps host memory: skipped:", err)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	c, err := b.Alloc(2 << 20) // a positive multiple of 4096
	if err != nil {
		log.Fatal(err)
	}
	defer c.Free()
	if !cuda.IsPinned(c.Bytes()) {
		log.Fatal("chunk is not pinned")
	}
	if _, err := c.DevicePointer(); err != nil { // the chunk's address on the device
		log.Fatal(err)
	}
	// Output:
}

// A large arena on a machine that no other process copies on (one server
// that owns the GPU and the node): the Register method on huge pages, as
// the pool's default backend, but with prefault groups of 4 GiB, which
// grow a large arena faster at the cost of other processes' copies
// waiting milliseconds while it grows. Each allocation's buffers are
// usable as soon as it is pinned; the progress callback can drive a bar.
// Without a GPU it says so on standard error and returns.
func ExampleOptions_dedicatedNode() {
	b, err := cudahost.New(cudahost.Options{Method: cudahost.Register, HugePages: true, RegisterGroup: 4 << 30})
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", err)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close() // after the pool's Close
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	// A tier of 32 GiB would be Reserve(2<<20, 16384); this one is 16 MiB.
	err = p.ReserveContext(context.Background(), 2<<20, 8, func(made, total int64) {
		_ = made // of total bytes: a progress bar's position
	})
	if err != nil {
		log.Fatal(err) // ErrBudget, or an error naming the driver's refusal
	}
	// Output:
}
