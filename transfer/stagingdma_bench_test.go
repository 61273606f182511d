package transfer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// BenchmarkStagingDMA times, with CUDA events, only the DMA of one pinned
// copy of n bytes, from (host to device) or into (device to host) pinned
// memory in three states: cold (last touched 256 MiB of copies ago, so out
// of the CPU caches, as in the pinned benchmarks), or touched by the CPU
// just before (written for host to device, read for device to host, as a
// staging buffer is) by one goroutine or by 8 goroutines in slices, as the
// staged lanes do. It tells whether the DMA engine reads and writes memory
// that sits in the CPU caches as fast as memory that does not: the staged
// path always hands it such memory.
func BenchmarkStagingDMA(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	ctx := context.Background()
	const arena = 256 << 20
	buf, err := g.pool.Get(ctx, arena)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Release()
	mem := buf.Bytes()
	host := randomBytes(16<<20, 21)
	dev := g.devMem(b, 16<<20)
	start, err := g.ctx.NewEvent(cuda.EventDefault)
	if err != nil {
		b.Fatal(err)
	}
	defer start.Destroy()
	end, err := g.ctx.NewEvent(cuda.EventDefault)
	if err != nil {
		b.Fatal(err)
	}
	defer end.Destroy()
	touch := func(k int, d Direction, region []byte, nt, evict bool) {
		var wg sync.WaitGroup
		slice := (len(region) + k - 1) / k
		for j := range k {
			lo, hi := min(j*slice, len(region)), min((j+1)*slice, len(region))
			wg.Go(func() {
				if d == HostToDevice && nt {
					streamBytes(region[lo:hi], host[lo:hi])
				} else if d == HostToDevice {
					copyBytes(region[lo:hi], host[lo:hi], true)
				} else {
					copyBytes(host[lo:hi], region[lo:hi], false)
				}
				if evict {
					evictBytes(region[lo:hi])
				}
			})
		}
		wg.Wait()
	}
	for _, n := range []int{1 << 20, frameBytes, 16 << 20} {
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			for _, state := range []struct {
				name  string
				lanes int
				nt    bool
				evict bool
			}{{"cold", 0, false, false}, {"touched-by-1", 1, false, false}, {"touched-by-8", 8, false, false}, {"written-by-8-nt", 8, true, false}, {"touched-by-8-evicted", 8, false, true}} {
				if state.nt && (d == DeviceToHost || !hasStreamingStores) || state.evict && !evictAvailable() {
					continue
				}
				b.Run(fmt.Sprintf("size=%s/%s/%v", sizeLabel(n), state.name, d), func(b *testing.B) {
					defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
					var dma time.Duration
					off := 0
					b.SetBytes(int64(n))
					for b.Loop() {
						off = (off + 16<<20) % arena
						region := mem[off : off+n]
						if state.lanes > 0 {
							touch(state.lanes, d, region, state.nt, state.evict)
						}
						if err := start.Record(g.s); err != nil {
							b.Fatal(err)
						}
						if d == HostToDevice {
							err = g.s.CopyHtoDAsync(dev.Ptr(), region)
						} else {
							err = g.s.CopyDtoHAsync(region, dev.Ptr())
						}
						if err == nil {
							err = end.Record(g.s)
						}
						if err == nil {
							err = end.Synchronize()
						}
						if err != nil {
							b.Fatal(err)
						}
						dt, err := cuda.ElapsedTime(start, end)
						if err != nil {
							b.Fatal(err)
						}
						dma += dt
					}
					b.ReportMetric(float64(n)*float64(b.N)/dma.Seconds()/1e9, "dma-GB/s")
				})
			}
		}
	}
}
