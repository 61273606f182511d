package transfer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/transfer"
)

// Ordinary Go memory to the GPU and back: a copier over a pool of the
// device's pinned memory stages large slices through it, and memory
// registered for a scope goes directly. It needs a GPU; without one it says
// so on standard error and returns.
func ExampleCopier() {
	b, err := cudahost.New(cudahost.Options{}) // pinned memory of device 0, and its context
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	gpu := b.Context()
	dev, err := gpu.MemAlloc(64 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Free()

	c, err := transfer.New(p, gpu, transfer.Options{}) // stages through p's pinned buffers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	data := make([]byte, 64<<20)
	rand.Read(data)
	if err := c.ToDevice(ctx, dev.Ptr(), data); err != nil { // any []byte: direct, staged, pinned or registered
		log.Fatal(err)
	}

	weights := make([]byte, 64<<20)
	reg, err := c.Register(weights) // large buffers reused many times: copies at the pinned speed
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	if err := c.FromDevice(ctx, weights, dev.Ptr()); err != nil {
		log.Fatal(err)
	}
	if c.PathOf(data) != transfer.PathStaged || c.PathOf(weights) != transfer.PathRegistered {
		log.Fatal("unexpected paths")
	}
	if !bytes.Equal(weights, data) {
		log.Fatal("the round trip changed the data")
	}
	// Output:
}

// An asynchronous transfer is a pinpool.Fence: a pool buffer that it reads
// goes back to the pool once it has finished. It needs a GPU; without one
// it says so on standard error and returns.
func ExampleCopier_ToDeviceAsync() {
	b, err := cudahost.New(cudahost.Options{})
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	dev, err := b.Context().MemAlloc(8 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Free()
	c, err := transfer.New(p, b.Context(), transfer.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	buf, err := p.Get(context.Background(), dev.Len())
	if err != nil {
		log.Fatal(err)
	}
	t := c.ToDeviceAsync(context.Background(), dev.Ptr(), buf.Bytes()) // pinned: one asynchronous copy
	if err := buf.ReleaseAfter(t); err != nil {
		log.Fatal(err)
	}
	// ... other work meanwhile ...
	if err := t.Wait(); err != nil {
		log.Fatal(err)
	}
	// Output:
}

// Zero-copy needs a pool over mapped memory (cudahost.Options{Mapped:
// true}); for any other buffer MappedPointer says so. This runs with or
// without a GPU: the default pool is not mapped.
func ExampleMappedPointer() {
	p, err := pinpool.New(pinpool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	buf, err := p.Get(context.Background(), 16<<10) // small: fits a 64 KiB lock limit
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Release()

	_, err = transfer.MappedPointer(buf)
	fmt.Println(errors.Is(err, transfer.ErrNotMapped))
	// Output: true
}
