package pinpool_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pinpool/pinpool"
)

// The five lines of everyday use: make a pool, get a buffer, fill it, hand
// it to the GPU, give it back.
func Example() {
	p, err := pinpool.New(pinpool.Options{}) // CUDA device 0 if there is one, else locked host memory
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	buf, err := p.Get(context.Background(), 1920*1080*3/2) // a 1080p NV12 frame
	if err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), "frame data")
	// ... cuda.Stream.CopyHtoDAsync(dev, buf.Bytes()) ...
	fmt.Println(len(buf.Bytes()), buf.Cap() >= buf.Len())
	if err := buf.Release(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(buf.Release()) // a second release is refused
	// Output:
	// 3110400 true
	// pinpool: buffer already released
}

// ReleaseAfter returns a buffer only once an asynchronous operation that
// uses it has finished: here a fence that completes after 10 ms stands in
// for a *cuda.Event recorded after an asynchronous copy.
func ExampleBuffer_ReleaseAfter() {
	p, err := pinpool.New(pinpool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	buf, _ := p.Get(context.Background(), 1<<20)
	finish := time.Now().Add(10 * time.Millisecond)
	copyDone := pinpool.FenceFunc(func() (bool, error) { return time.Now().After(finish), nil })
	buf.ReleaseAfter(copyDone)
	fmt.Println(p.Stats().BytesPending > 0)
	time.Sleep(50 * time.Millisecond)
	fmt.Println(p.Stats().BytesPending)
	// Output:
	// true
	// 0
}

// A budget caps what the pool holds; TryGet refuses instead of waiting.
func ExamplePool_TryGet() {
	p, err := pinpool.New(pinpool.Options{Budget: 8 << 20, Exact: true})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	a, _ := p.TryGet(6 << 20)
	_, err = p.TryGet(6 << 20)
	fmt.Println(err != nil)
	a.Release()
	// Output: true
}
