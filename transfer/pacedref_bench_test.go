package transfer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// goRefWays are BenchmarkPacedFrames's Go references: the simplest Go program doing the job of
// scripts/ref/paced.cpp's "sleep T" ways (goRef), as the bound that Go's scheduler sets on a paced
// frame, beside the C program's and the engine's.
var goRefWays = []frameWay{
	{name: "goref-T1", mover: goRefMover(1, 0)},
	{name: "goref-T2", mover: goRefMover(2, 0)},
	{name: "goref-T2-s128K", mover: goRefMover(2, 128<<10)},
	{name: "goref-T3", mover: goRefMover(3, 0)},
}

// goRef moves a frame as paced.cpp's "sleep T chunk=1024K stream" way does, in plain Go: one
// stream, one pinned staging buffer, a frame cut into 1 MiB chunks and the chunks into stripes,
// which the caller and T helper goroutines claim in order. Each helper is asleep on a channel of
// its own between frames, and the caller sends it each frame. Up, the thread that copies a chunk's
// last stripe in queues the chunk's copy; the caller then waits for the helpers that joined, and
// polls an event after the last copy. Down, the caller queues every chunk's copy with an event
// after it, and whichever thread needs a chunk polls its event before it copies the chunk out.
// Copies into and out of staging use non-temporal stores (streamBytes), as the C's "stream" ways
// do. A helper that wakes after the caller has finished finds the frame closed and does nothing, as
// in the C. It runs over the package's device, so that TestGoRef checks it on the fake one.
type goRef struct {
	s       stream
	staging []byte
	chunkEv []event
	endEv   event
	helpers []chan *goRefJob
	chunk   int
	stripe  int // 0: the chunk shared out among the threads, 64 KiB at least (paced.cpp's rule)
}

// goRefJob is one frame's copy, shared by the caller and the helpers it sends it to.
type goRefJob struct {
	dir                         Direction
	host, staging               []byte
	dev                         cuda.DevicePtr
	chunk, stripe               int
	chunks, perChunk, stripes   int
	next, issued, in            atomic.Int32
	closed                      atomic.Bool
	left, recorded, landed, pol []atomic.Int32 // per chunk
	failed                      atomic.Bool    // err is set
	errMu                       sync.Mutex
	err                         error
	r                           *goRef
}

const (
	goRefChunk   = 1 << 20
	goRefStaging = 4 << 20 // the most a frame may hold
)

// goRefMover makes a goRef of helpers helpers and the given stripe on the GPU, freed when tb
// ends, and returns its frame mover.
func goRefMover(helpers, stripe int) func(testing.TB, *gpu) func(Direction, []byte, cuda.DevicePtr) error {
	return func(tb testing.TB, g *gpu) func(Direction, []byte, cuda.DevicePtr) error {
		return newGoRef(tb, cudaDevice{g.ctx}, g.pool, helpers, stripe).move
	}
}

// newGoRef makes a goRef over dev, its staging from pool, with helpers helpers and the given
// stripe; tb's cleanup stops the helpers and frees what it holds.
func newGoRef(tb testing.TB, dev device, pool *pinpool.Pool, helpers, stripe int) *goRef {
	tb.Helper()
	r := &goRef{chunk: goRefChunk, stripe: stripe}
	var err error
	if r.s, err = dev.newStream(); err != nil {
		tb.Fatal(err)
	}
	buf, err := pool.Get(context.Background(), goRefStaging)
	if err != nil {
		tb.Fatal(err)
	}
	r.staging = buf.Bytes()
	for range goRefStaging / r.chunk {
		e, err := dev.newEvent()
		if err != nil {
			tb.Fatal(err)
		}
		r.chunkEv = append(r.chunkEv, e)
	}
	if r.endEv, err = dev.newEvent(); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	for range helpers {
		ch := make(chan *goRefJob, 1)
		r.helpers = append(r.helpers, ch)
		wg.Go(func() {
			for j := range ch {
				j.in.Add(1)
				if !j.closed.Load() {
					j.work()
				}
				j.in.Add(-1)
			}
		})
	}
	tb.Cleanup(func() {
		for _, ch := range r.helpers {
			close(ch)
		}
		wg.Wait()
		r.s.synchronize()
		for _, e := range r.chunkEv {
			e.destroy()
		}
		r.endEv.destroy()
		r.s.destroy()
		buf.Release()
	})
	return r
}

// move copies one frame (of at most the staging's length) in direction d.
func (r *goRef) move(d Direction, host []byte, dev cuda.DevicePtr) error {
	n := len(host)
	if n > len(r.staging) {
		return fmt.Errorf("goRef: a frame of %d bytes, staging of %d", n, len(r.staging))
	}
	lanes := len(r.helpers) + 1
	stripe := r.stripe
	if stripe == 0 {
		stripe = r.chunk
		if lanes > 1 {
			stripe = max(64<<10, (r.chunk/lanes+4095)/4096*4096)
		}
	}
	stripe = min(stripe, r.chunk)
	j := &goRefJob{dir: d, host: host, staging: r.staging[:n], dev: dev, chunk: r.chunk, stripe: stripe, r: r}
	j.chunks = (n + r.chunk - 1) / r.chunk
	j.perChunk = (r.chunk + stripe - 1) / stripe
	last := n - (j.chunks-1)*r.chunk
	j.stripes = (j.chunks-1)*j.perChunk + (last+stripe-1)/stripe
	j.left = make([]atomic.Int32, j.chunks)
	j.recorded = make([]atomic.Int32, j.chunks)
	j.landed = make([]atomic.Int32, j.chunks)
	j.pol = make([]atomic.Int32, j.chunks)
	for k := range j.chunks {
		lo, hi := k*r.chunk, min((k+1)*r.chunk, n)
		j.left[k].Store(int32((hi - lo + stripe - 1) / stripe))
	}
	for _, ch := range r.helpers {
		ch <- j
	}
	if d == DeviceToHost {
		for k := range j.chunks {
			lo, hi := k*r.chunk, min((k+1)*r.chunk, n)
			if err := r.s.copyDtoHAsync(j.staging[lo:hi], dev+cuda.DevicePtr(lo)); err != nil {
				j.fail(err)
				break
			}
			if err := r.s.record(r.chunkEv[k]); err != nil {
				j.fail(err)
				break
			}
			j.recorded[k].Store(1)
		}
	}
	j.work()
	j.closed.Store(true)
	for j.in.Load() != 0 {
		cpuRelax()
	}
	if err := j.firstErr(); err != nil {
		r.s.synchronize()
		return err
	}
	if d == HostToDevice {
		if got := int(j.issued.Load()); got != j.chunks {
			return fmt.Errorf("goRef: %d of %d chunks issued", got, j.chunks)
		}
		if err := r.s.record(r.endEv); err != nil {
			return err
		}
		return pollDone(r.endEv)
	}
	return nil
}

// work claims stripes of j until none is left or a call failed.
func (j *goRefJob) work() {
	for {
		i := int(j.next.Add(1) - 1)
		if i >= j.stripes || j.failed.Load() {
			return
		}
		k := i / j.perChunk
		lo := k*j.chunk + i%j.perChunk*j.stripe
		hi := min(lo+j.stripe, (k+1)*j.chunk, len(j.host))
		if j.dir == HostToDevice {
			streamBytes(j.staging[lo:hi], j.host[lo:hi])
			if j.left[k].Add(-1) == 0 {
				clo, chi := k*j.chunk, min((k+1)*j.chunk, len(j.host))
				if err := j.r.s.copyHtoDAsync(j.dev+cuda.DevicePtr(clo), j.staging[clo:chi]); err != nil {
					j.fail(err)
					return
				}
				j.issued.Add(1)
			}
			continue
		}
		for j.landed[k].Load() == 0 {
			if j.failed.Load() {
				return
			}
			if j.recorded[k].Load() != 0 && j.pol[k].CompareAndSwap(0, 1) {
				done, err := j.r.chunkEv[k].Done()
				if err != nil {
					j.fail(err)
					return
				}
				if done {
					j.landed[k].Store(1)
				}
				j.pol[k].Store(0)
			}
			cpuRelax()
		}
		streamBytes(j.host[lo:hi], j.staging[lo:hi])
	}
}

// fail records err, unless a call failed before.
func (j *goRefJob) fail(err error) {
	j.errMu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.errMu.Unlock()
	j.failed.Store(true)
}

// firstErr is the first call's error, nil when none failed.
func (j *goRefJob) firstErr() error {
	if !j.failed.Load() {
		return nil
	}
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// pollDone spins on e until it completes, as paced.cpp's pollEvent does.
func pollDone(e event) error {
	for {
		done, err := e.Done()
		if err != nil || done {
			return err
		}
		cpuRelax()
	}
}
