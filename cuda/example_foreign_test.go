package cuda_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// A stream and an event that other code made, an inference runtime
// reached through cgo for example, known by their raw handles: a pool
// buffer is copied on that stream, and goes back to the pool once that
// event has completed. The wrappers do not own the handles; their owner
// destroys them, after the pool no longer waits on the event. Here a
// stream and an event of this package stand in for the other library's.
// It needs a GPU; without one it says so on standard error and returns.
func ExampleContext_WrapStream() {
	b, err := cudahost.New(cudahost.Options{}) // pinned memory of device 0, and its context
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	gpu := b.Context()
	theirStream, err := gpu.NewStream(cuda.StreamNonBlocking) // the other library's
	if err != nil {
		log.Fatal(err)
	}
	defer theirStream.Destroy()
	theirEvent, err := gpu.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		log.Fatal(err)
	}
	defer theirEvent.Destroy() // after the pool's Close: the pool no longer waits on it

	stream := gpu.WrapStream(theirStream.Handle())  // a CUstream from C, as a uintptr
	defer stream.Destroy()                          // retires the wrapper; the handle stays theirs
	done, err := gpu.WrapEvent(theirEvent.Handle()) // a CUevent from C
	if err != nil {
		log.Fatal(err)
	}
	defer done.Destroy()

	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b)})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	dev, err := gpu.MemAlloc(1 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Free()

	buf, err := p.Get(context.Background(), dev.Len())
	if err != nil {
		log.Fatal(err)
	}
	if err := stream.CopyHtoDAsync(dev.Ptr(), buf.Bytes()); err != nil {
		log.Fatal(err)
	}
	if err := done.Record(stream); err != nil {
		log.Fatal(err)
	}
	if err := buf.ReleaseAfter(done); err != nil { // reused once their event has completed
		log.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		log.Fatal(err)
	}
	// Output:
}
