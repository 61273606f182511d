package transfer

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// allGPUs is every device of the host, each with its pool (a backend of its
// own), device memory, a pageable source and a pinned buffer of size bytes.
type allGPUs struct {
	gs     []*gpu
	dev    []*cuda.DeviceMem
	host   [][]byte
	pinned []pinpool.Buffer
}

// openAllGPUs opens every device, or skips with fewer than two.
func openAllGPUs(b *testing.B, size int) *allGPUs {
	n, err := cuda.DeviceCount()
	if cuda.IsNoDriver(err) {
		b.Skipf("multi-GPU benchmark skipped: no CUDA driver or device (%v)", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	if n < 2 {
		b.Skipf("multi-GPU benchmark skipped: %d device(s) on this host, it needs two or more (kind nvidia-h200-x2)", n)
	}
	a := &allGPUs{}
	for i := range n {
		g := newGPU(b, cudahost.Options{Device: i})
		buf, err := g.pool.Get(context.Background(), size)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { buf.Release() })
		a.gs = append(a.gs, g)
		a.dev = append(a.dev, g.devMem(b, size))
		a.host = append(a.host, randomBytes(size, uint64(40+i)))
		a.pinned = append(a.pinned, buf)
	}
	return a
}

// together runs f(i) for every device at once, starting them together, and
// returns the wall time until the last one finished.
func together(n int, f func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	dt := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return dt, err
		}
	}
	return dt, nil
}

// hostCopy copies n bytes of pageable memory the way the staged path's
// lanes do, without any device: k goroutines claim 2 MiB chunks of srcs
// (host to device: from the pageable memory into a two-chunk ring of their
// own, which stays in the cache like a lane's staging buffers; device to
// host: from the ring into the pageable memory). It is the host's ceiling
// for the staged path.
func hostCopy(k int, mem [][]byte, d Direction, rings [][]byte) {
	const chunk = 2 << 20
	per := len(mem[0]) / chunk
	var next atomic.Int64
	var wg sync.WaitGroup
	for j := range k {
		wg.Go(func() {
			ring := rings[j]
			for slot := 0; ; slot ^= 1 {
				i := int(next.Add(1) - 1)
				if i >= per*len(mem) {
					return
				}
				m := mem[i/per][(i%per)*chunk : (i%per+1)*chunk]
				r := ring[slot*chunk : (slot+1)*chunk]
				if d == HostToDevice {
					copyBytes(r, m, true)
				} else {
					copyBytes(m, r, false)
				}
			}
		})
	}
	wg.Wait()
}

// dmaRunning keeps pinned copies of direction d running on every device
// until the returned stop function is called.
func (a *allGPUs) dmaRunning(b *testing.B, d Direction) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	for i, g := range a.gs {
		wg.Go(func() {
			for !quit.Load() {
				var err error
				if d == HostToDevice {
					err = g.s.CopyHtoDAsync(a.dev[i].Ptr(), a.pinned[i].Bytes())
				} else {
					err = g.s.CopyDtoHAsync(a.pinned[i].Bytes(), a.dev[i].Ptr())
				}
				if err == nil {
					err = g.s.Synchronize()
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	return func() {
		quit.Store(true)
		wg.Wait()
	}
}

// BenchmarkAllGPUs is the staged path on every GPU of the host at once
// (kind nvidia-h200-x2), against three baselines measured in the same
// iterations: each GPU's staged copy alone, the pinned copies of all GPUs
// at once (the links' aggregate), and the host's own ceiling for the staged
// path's CPU work, which is hostCopy of the same bytes by as many
// goroutines as the copiers have lanes in all, with pinned DMA running on
// every GPU meanwhile. It reports alone-GB/s (the mean of the GPUs alone),
// all-GB/s (bytes of all GPUs over the wall time until the last finished),
// x-one (all over alone), pinned-all-GB/s, ceiling-GB/s (hostCopy with
// DMA), nodma-GB/s (hostCopy without DMA) and of-ceiling (all over
// ceiling), per direction and lanes per copier.
func BenchmarkAllGPUs(b *testing.B) {
	defer allCPUs()()
	const size = 256 << 20
	a := openAllGPUs(b, size)
	ctx := context.Background()
	nd := len(a.gs)
	for _, cf := range []struct {
		w    int
		name string
	}{{8, ""}, {16, ""}} {
		w := cf.w
		cs := make([]*Copier, nd)
		for i, g := range a.gs {
			cs[i] = g.copier(b, Options{Lanes: w, DirectBelow: -1, Prewarm: true})
		}
		k := min(w*nd, runtime.NumCPU())
		rings := make([][]byte, k)
		for j := range rings {
			rings[j] = make([]byte, 4<<20)
		}
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			staged := func(i int) error {
				return cs[i].transfer(ctx, op{d, a.dev[i].Ptr(), a.host[i]}, false)
			}
			pinned := func(i int) error {
				return cs[i].transfer(ctx, op{d, a.dev[i].Ptr(), a.pinned[i].Bytes()}, true)
			}
			b.Run(fmt.Sprintf("size=%s/lanes=%d%s/devices=%d/%v", sizeName(size), w, cf.name, nd, d), func(b *testing.B) {
				defer allCPUs()() // the testing package sets -test.cpu's GOMAXPROCS for each leaf
				var alone, all, pin, ceil, nodma time.Duration
				b.SetBytes(int64(size * nd))
				for b.Loop() {
					for i := range nd {
						t0 := time.Now()
						if err := staged(i); err != nil {
							b.Fatal(err)
						}
						alone += time.Since(t0)
					}
					dt, err := together(nd, staged)
					if err != nil {
						b.Fatal(err)
					}
					all += dt
					if dt, err = together(nd, pinned); err != nil {
						b.Fatal(err)
					}
					pin += dt
					t0 := time.Now()
					hostCopy(k, a.host, d, rings)
					nodma += time.Since(t0)
					stop := a.dmaRunning(b, d)
					t0 = time.Now()
					hostCopy(k, a.host, d, rings)
					ceil += time.Since(t0)
					stop()
				}
				one := float64(size) * float64(b.N)
				every := one * float64(nd)
				b.ReportMetric(every/alone.Seconds()/1e9, "alone-GB/s")
				b.ReportMetric(every/all.Seconds()/1e9, "all-GB/s")
				b.ReportMetric(alone.Seconds()/all.Seconds(), "x-one")
				b.ReportMetric(every/pin.Seconds()/1e9, "pinned-all-GB/s")
				b.ReportMetric(every/ceil.Seconds()/1e9, "ceiling-GB/s")
				b.ReportMetric(every/nodma.Seconds()/1e9, "nodma-GB/s")
				b.ReportMetric(ceil.Seconds()/all.Seconds(), "of-ceiling")
			})
		}
	}
}
