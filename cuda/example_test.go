package cuda_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/pinpool/pinpool/cuda"
)

// The driver binding: a context, pinned host memory, device memory, a
// stream and an event; an asynchronous copy, and the bytes read back. It
// needs a GPU; without one NewContext returns an error for which IsNoDriver
// holds, and the example says so on standard error and returns.
func Example() {
	gpu, err := cuda.NewContext(0) // device 0's primary context
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer gpu.Close()

	host, err := gpu.HostAlloc(64<<20, 0) // pinned
	if err != nil {
		log.Fatal(err)
	}
	defer host.Free()
	dev, err := gpu.MemAlloc(64 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Free()
	stream, err := gpu.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Destroy()
	done, err := gpu.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		log.Fatal(err)
	}
	defer done.Destroy()

	rand.Read(host.Bytes()) // the data
	if err := stream.CopyHtoDAsync(dev.Ptr(), host.Bytes()); err != nil {
		log.Fatal(err)
	}
	if err := done.Record(stream); err != nil {
		log.Fatal(err)
	}
	if err := done.Synchronize(); err != nil {
		log.Fatal(err)
	}

	err = stream.CopyHtoDAsync(dev.Ptr(), make([]byte, 4096)) // ordinary Go memory
	if !errors.Is(err, cuda.ErrNotPinned) {
		log.Fatalf("want ErrNotPinned, got %v", err)
	}

	back := make([]byte, dev.Len())
	if err := gpu.CopyDtoH(back, dev.Ptr()); err != nil { // synchronous: any memory
		log.Fatal(err)
	}
	if !bytes.Equal(back, host.Bytes()) {
		log.Fatal("the device holds other bytes than the host")
	}
	// Output:
}

// Asynchronous copies accept only page-locked memory; IsPinned tells
// beforehand. Ordinary Go memory never is, with or without a GPU.
func ExampleIsPinned() {
	fmt.Println(cuda.IsPinned(make([]byte, 4096)))
	// Output: false
}
