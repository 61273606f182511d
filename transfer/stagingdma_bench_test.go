package transfer

import (
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
	const arena = 256 << 20
	mem := g.pinnedMem(b, arena)
	host := randomBytes(16<<20, 21)
	dev := g.devMem(b, 16<<20)
	start, end := g.timingEvents(b)
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
						err := start.Record(g.s)
						if err == nil && d == HostToDevice {
							err = g.s.CopyHtoDAsync(dev.Ptr(), region)
						} else if err == nil {
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

// BenchmarkHotDMAStreams times, with CUDA events, the DMA of one round of
// 2 MiB chunks (one per lane) just written by the lanes, as a chunked
// transfer's first round is, queued as one copy per chunk over 1, 2 or 4
// streams (the chunks dealt round robin), and the same round cold. It tells
// whether copy engines working side by side read lines that sit in the
// lanes' L2 caches faster than one does: if the DMA's reads of such lines
// were slow for their latency rather than for the link, more copies at
// once would hide it. On the H200 host they did not
// (docs/results/2026-12-01-paced-round-trips.md, section 3).
func BenchmarkHotDMAStreams(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	const lanes, chunk = 8, 2 << 20
	const n = lanes * chunk
	const arena = 256 << 20
	mem := g.pinnedMem(b, arena)
	host := randomBytes(n, 31)
	dev := g.devMem(b, n)
	streams := []*cuda.Stream{g.s}
	for range 3 {
		s, err := g.ctx.NewStream(cuda.StreamNonBlocking)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Destroy()
		streams = append(streams, s)
	}
	start, end := g.timingEvents(b)
	var ends []*cuda.Event
	for range streams {
		e, err := g.ctx.NewEvent(cuda.EventDisableTiming)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Destroy()
		ends = append(ends, e)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, hot := range []bool{true, false} {
		for _, k := range []int{1, 2, 4} {
			state := "cold"
			if hot {
				state = "written-by-8"
			}
			b.Run(fmt.Sprintf("%s/streams=%d", state, k), func(b *testing.B) {
				defer allCPUs()()
				var dma time.Duration
				off := 0
				b.SetBytes(n)
				for b.Loop() {
					off = (off + 32<<20) % arena
					region := mem[off : off+n]
					if hot {
						var wg sync.WaitGroup
						for j := range lanes {
							wg.Go(func() { copyBytes(region[j*chunk:(j+1)*chunk], host[j*chunk:(j+1)*chunk], true) })
						}
						wg.Wait()
					}
					must(start.Record(streams[0]))
					for i := 1; i < k; i++ {
						must(streams[i].WaitEvent(start))
					}
					for j := range lanes {
						s := streams[j%k]
						must(s.CopyHtoDAsync(dev.Ptr()+cuda.DevicePtr(j*chunk), region[j*chunk:(j+1)*chunk]))
					}
					for i := 1; i < k; i++ {
						must(ends[i].Record(streams[i]))
						must(streams[0].WaitEvent(ends[i]))
					}
					must(end.Record(streams[0]))
					must(end.Synchronize())
					dt, err := cuda.ElapsedTime(start, end)
					must(err)
					dma += dt
				}
				b.ReportMetric(float64(n)*float64(b.N)/dma.Seconds()/1e9, "dma-GB/s")
			})
		}
	}
}

// BenchmarkChunkedDMA times, with CUDA events, the DMA of 64 MiB of pinned
// memory queued on one stream as one copy ("whole") and as back-to-back
// copies of a chunk size ("chunked"), as the chunked mode issues them,
// alternating the two in every iteration. It reports both rates and the
// time each extra copy adds (per-copy-us): the ceiling that the chunk size
// puts on a staged transfer, however fast its lanes. On the H200 host each
// copy added about 2.9 µs host to device and 2 µs device to host, so 2 MiB
// copies cap 64 MiB at about 51 and 52.5 GB/s
// (docs/results/2026-12-01-dma-ceiling.md).
func BenchmarkChunkedDMA(b *testing.B) {
	defer allCPUs()()
	g := newGPU(b, cudahost.Options{})
	const n = 64 << 20
	mem := g.pinnedMem(b, n)
	copy(mem, randomBytes(n, 23))
	dev := g.devMem(b, n)
	start, end := g.timingEvents(b)
	// timed queues the copies of mem in chunks of chunk bytes and returns
	// the time the stream took for them.
	timed := func(d Direction, chunk int) time.Duration {
		if err := start.Record(g.s); err != nil {
			b.Fatal(err)
		}
		for off := 0; off < n; off += chunk {
			hi := min(off+chunk, n)
			p := dev.Ptr() + cuda.DevicePtr(off)
			var err error
			if d == HostToDevice {
				err = g.s.CopyHtoDAsync(p, mem[off:hi])
			} else {
				err = g.s.CopyDtoHAsync(mem[off:hi], p)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := end.Record(g.s); err != nil {
			b.Fatal(err)
		}
		if err := end.Synchronize(); err != nil {
			b.Fatal(err)
		}
		dt, err := cuda.ElapsedTime(start, end)
		if err != nil {
			b.Fatal(err)
		}
		return dt
	}
	for _, chunk := range []int{8 << 20, 4 << 20, DefaultChunkSize, 1 << 20, 512 << 10} {
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			b.Run(fmt.Sprintf("chunk=%s/%v", sizeLabel(chunk), d), func(b *testing.B) {
				defer allCPUs()()
				var whole, chunked time.Duration
				b.SetBytes(2 * n)
				for b.Loop() {
					whole += timed(d, n)
					chunked += timed(d, chunk)
				}
				copies := float64(ceilDiv(n, chunk))
				b.ReportMetric(float64(n)*float64(b.N)/whole.Seconds()/1e9, "whole-GB/s")
				b.ReportMetric(float64(n)*float64(b.N)/chunked.Seconds()/1e9, "chunked-GB/s")
				b.ReportMetric((chunked-whole).Seconds()*1e6/float64(b.N)/(copies-1), "per-copy-us")
			})
		}
	}
}
