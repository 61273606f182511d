package multigpu_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"os"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/multigpu"
)

// Every GPU of the host in one set: a shared pool whose buffers go to any
// of them as pinned memory, and one copier per device that stages ordinary
// Go memory on the device's own NUMA node. It needs a GPU; without one it
// says so on standard error and returns.
func Example() {
	devices, err := multigpu.AllDevices() // every GPU the driver shows
	if cuda.IsNoDriver(err) {
		fmt.Fprintln(os.Stderr, "no GPU: skipped:", cuda.NoGPUReason(err))
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	s, err := multigpu.Open(devices, multigpu.Options{}) // one shared pool, one copier per device
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, p := range s.Placements() {
		fmt.Fprintln(os.Stderr, p) // device 0: staging on NUMA node 0 (register), 8 copy lanes: ...
	}

	ctx := context.Background()
	buf, err := s.Pool().Get(ctx, 64<<20) // pinned for every device of the set
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Release()
	rand.Read(buf.Bytes())
	frame := make([]byte, 64<<20) // ordinary Go memory
	for _, d := range s.Devices() {
		gpu, err := s.Context(d)
		if err != nil {
			log.Fatal(err)
		}
		dev, err := gpu.MemAlloc(buf.Len())
		if err != nil {
			log.Fatal(err)
		}
		defer dev.Free()
		c, err := s.Copier(d)
		if err != nil {
			log.Fatal(err)
		}
		if err := c.ToDevice(ctx, dev.Ptr(), buf.Bytes()); err != nil { // pinned: one asynchronous copy
			log.Fatal(err)
		}
		if err := c.FromDevice(ctx, frame, dev.Ptr()); err != nil { // staged through the device's window
			log.Fatal(err)
		}
	}
	// Output:
}
