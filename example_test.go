package pinpool_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// The everyday use: make a pool, get a buffer, fill it, give it back. It
// runs with or without a GPU: the zero Options take pinned memory of CUDA
// device 0 when there is one, else locked host memory.
func Example() {
	p, err := pinpool.New(pinpool.Options{}) // CUDA device 0 if present, else mlocked host memory
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	frame := make([]byte, 160*120*3/2)                  // a 160x120 NV12 frame; fits a 64 KiB lock limit
	buf, err := p.Get(context.Background(), len(frame)) // 25–44 ns once warm; blocks only under a Budget
	if err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), frame) // pinned memory, page-aligned
	fmt.Println(buf.Len(), buf.Cap() >= buf.Len())
	if err := buf.Release(); err != nil { // ReleaseAfter(fence) while a copy still uses it
		log.Fatal(err)
	}
	fmt.Println(buf.Release()) // a second release is refused
	// Output:
	// 28800 true
	// pinpool: buffer already released
}

// A pool buffer sent to the GPU with an asynchronous copy goes back to the
// pool only once the copy has finished: ReleaseAfter takes the CUDA event
// recorded after the copy as its fence. It needs a GPU; without one it says
// so on standard error and returns.
func ExampleBuffer_ReleaseAfter_cudaEvent() {
	gpu, err := cuda.NewContext(0) // device 0's primary context
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer gpu.Close()
	dev, err := gpu.MemAlloc(1920 * 1080 * 3 / 2)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Free()
	stream, err := gpu.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Destroy()
	ev, err := gpu.NewEvent(cuda.EventDisableTiming) // a *cuda.Event is a pinpool.Fence
	if err != nil {
		log.Fatal(err)
	}
	defer ev.Destroy()

	p, err := pinpool.New(pinpool.Options{}) // pinned memory of device 0
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close() // runs first: the event is still alive while the pool polls it

	buf, err := p.Get(context.Background(), dev.Len())
	if err != nil {
		log.Fatal(err)
	}
	rand.Read(buf.Bytes()) // the frame
	if err := stream.CopyHtoDAsync(dev.Ptr(), buf.Bytes()); err != nil {
		log.Fatal(err)
	}
	if err := ev.Record(stream); err != nil {
		log.Fatal(err)
	}
	if err := buf.ReleaseAfter(ev); err != nil { // reused only after the copy has finished
		log.Fatal(err)
	}
	// ... more work on the stream; before tearing down, wait for it:
	if err := stream.Synchronize(); err != nil {
		log.Fatal(err)
	}
	// Output:
}

// ReleaseAfter returns a buffer only once an asynchronous operation that
// uses it has finished: here a fence that reports done once the program
// says so stands in for a *cuda.Event recorded after an asynchronous copy.
// Until then the buffer counts as pending; afterwards the pool polls the
// fence and puts the buffer back among its idle ones.
func ExampleBuffer_ReleaseAfter() {
	p, err := pinpool.New(pinpool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	buf, err := p.Get(context.Background(), 16<<10)
	if err != nil {
		log.Fatal(err)
	}
	var copying atomic.Bool
	copying.Store(true)
	copyDone := pinpool.FenceFunc(func() (bool, error) { return !copying.Load(), nil })
	if err := buf.ReleaseAfter(copyDone); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending", p.Stats().BytesPending > 0)
	copying.Store(false) // the copy has finished
	for p.Stats().BytesPending > 0 {
		time.Sleep(time.Millisecond) // the pool polls pending fences in the background
	}
	fmt.Println("idle", p.Stats().BytesIdle > 0)
	// Output:
	// pending true
	// idle true
}

// A budget caps what the pool holds; TryGet refuses instead of waiting.
func ExamplePool_TryGet() {
	p, err := pinpool.New(pinpool.Options{Budget: 48 << 10, Exact: true})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	a, err := p.TryGet(32 << 10)
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.TryGet(32 << 10)
	fmt.Println(errors.Is(err, pinpool.ErrBudget))
	a.Release()
	// Output: true
}

// Stats is a consistent snapshot: the first Get of a size misses and grows
// the pool, the next ones are served from idle memory.
func ExamplePool_Stats() {
	p, err := pinpool.New(pinpool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	for range 3 {
		buf, err := p.Get(context.Background(), 16<<10)
		if err != nil {
			log.Fatal(err)
		}
		buf.Release()
	}
	st := p.Stats()
	fmt.Println("gets", st.Gets, "hits", st.Hits, "misses", st.Misses)
	fmt.Println("in use", st.BytesInUse, "idle", st.BytesIdle > 0)
	fmt.Println(st.BytesHeld == st.BytesInUse+st.BytesIdle+st.BytesPending+st.BytesRetired)
	// Output:
	// gets 3 hits 2 misses 1
	// in use 0 idle true
	// true
}

// New checks every option before it touches any memory; the error names
// the field.
func ExampleNew() {
	_, err := pinpool.New(pinpool.Options{Budget: 1000})
	fmt.Println(errors.Is(err, pinpool.ErrInvalidOptions))
	fmt.Println(err)
	// Output:
	// true
	// pinpool: invalid options: Budget = 1000: want 0 (no cap) or at least 4096 bytes
}
