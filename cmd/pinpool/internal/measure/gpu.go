package measure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/internal/testkernels"
	"github.com/pinpool/pinpool/transfer"
)

// gpu is what the GPU benchmarks share: device 0's default backend and its
// context, a pool over it, two streams (one per direction), timing events,
// the embedded kernels, two device arenas (one per direction, so that the
// two transfers of Both never touch the same device memory) and a pageable
// host arena.
type gpu struct {
	p     Plan
	dev   int // the device ordinal
	be    *cudahost.Backend
	ctx   *cuda.Context
	props cuda.Properties
	pool  *pinpool.Pool
	k     *testkernels.Kernels

	s1, s2          *cuda.Stream
	start, mid, end *cuda.Event
	dev1, dev2      *cuda.DeviceMem
	pageable        []byte
	pageable2       []byte // secondArena
	copier          *transfer.Copier
}

// openGPU opens device dev. It returns an error wrapping cuda.ErrNoDriver
// (cuda.IsNoDriver) when there is no driver or device.
func openGPU(p Plan, dev int) (*gpu, error) {
	be, err := cudahost.NewDefaultDevice(dev)
	if err != nil {
		return nil, err
	}
	g := &gpu{p: p, dev: dev, ctx: be.Context(), props: be.Properties(), be: be}
	if err := g.init(); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *gpu) init() error {
	var err error
	if g.pool, err = pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(g.be)}); err != nil {
		return err
	}
	if g.k, err = testkernels.Load(g.ctx); err != nil {
		return err
	}
	if g.s1, err = g.ctx.NewStream(cuda.StreamNonBlocking); err != nil {
		return err
	}
	if g.s2, err = g.ctx.NewStream(cuda.StreamNonBlocking); err != nil {
		return err
	}
	for _, e := range []**cuda.Event{&g.start, &g.mid, &g.end} {
		if *e, err = g.ctx.NewEvent(cuda.EventDefault); err != nil {
			return err
		}
	}
	return nil
}

// arenas allocates the device arenas and the pageable arena, touched.
func (g *gpu) arenas() error {
	a := g.p.arenaSize()
	if int64(int(a)) != a {
		return fmt.Errorf("measure: arena of %d bytes does not fit this platform", a)
	}
	var err error
	if g.dev1, err = g.ctx.MemAlloc(int(a)); err != nil {
		return fmt.Errorf("measure: device memory for transfers (%d bytes): %w", a, err)
	}
	if g.dev2, err = g.ctx.MemAlloc(int(a)); err != nil {
		return fmt.Errorf("measure: device memory for transfers (%d bytes): %w", a, err)
	}
	g.pageable = make([]byte, a)
	for i := range g.pageable {
		g.pageable[i] = byte(i >> 12)
	}
	return nil
}

// close releases everything, in reverse order; errors are dropped (the
// benchmark's figures are already taken).
func (g *gpu) close() {
	if g.copier != nil {
		g.copier.Close()
	}
	for _, m := range []*cuda.DeviceMem{g.dev1, g.dev2} {
		if m != nil {
			m.Free()
		}
	}
	for _, e := range []*cuda.Event{g.start, g.mid, g.end} {
		if e != nil {
			e.Destroy()
		}
	}
	for _, s := range []*cuda.Stream{g.s1, g.s2} {
		if s != nil {
			s.Destroy()
		}
	}
	if g.k != nil {
		g.k.Close()
	}
	if g.pool != nil {
		g.pool.Close()
	}
	g.be.Close()
}

// mover moves size bytes at host offset off in one direction; the kinds
// differ in how.
type mover struct {
	timer string
	// one queues (async kinds) or performs (wall kinds) one transfer of
	// the direction on stream s.
	one func(d Direction, s *cuda.Stream, dev cuda.DevicePtr, off, size int64) error
	// both (wall kinds) performs an H2D and a D2H transfer at once, from
	// two goroutines, on disjoint host memory.
	both func(off, size int64) error
	// free releases the kind's host memory.
	free func() error
}

// wallMover is the mover of a kind whose copies return when the bytes are
// in place (pageable, staged, batch), timed on the host clock, over the
// pageable arena.
func (g *gpu) wallMover(h2d func(cuda.DevicePtr, []byte) error, d2h func([]byte, cuda.DevicePtr) error) *mover {
	m := &mover{timer: timerWall, free: func() error { return nil }}
	m.one = func(d Direction, _ *cuda.Stream, dev cuda.DevicePtr, off, n int64) error {
		h := g.pageable[off : off+n]
		if d == H2D {
			return h2d(dev, h)
		}
		return d2h(h, dev)
	}
	m.both = func(off, n int64) error {
		second := g.secondArena()
		var wg sync.WaitGroup
		var e2 error
		wg.Go(func() { e2 = d2h(second[off:off+n], g.dev2.Ptr()) })
		err := h2d(g.dev1.Ptr(), g.pageable[off:off+n])
		wg.Wait()
		return errors.Join(err, e2)
	}
	return m
}

// secondArena is a second pageable arena, made and touched on first use:
// the destination of Both's device-to-host transfer for the wall kinds, so
// that the two transfers' CPU copies never touch the same bytes.
func (g *gpu) secondArena() []byte {
	if g.pageable2 == nil {
		g.pageable2 = make([]byte, len(g.pageable))
		for i := 0; i < len(g.pageable2); i += 4096 {
			g.pageable2[i] = 1
		}
	}
	return g.pageable2
}

const (
	timerEvents = "cuda-events"
	timerWall   = "wall"
)

// moverFor sets up the host memory of kind k. A kind the device cannot do
// returns errSkip wrapped with the reason.
func (g *gpu) moverFor(k Kind) (*mover, error) {
	a := int(g.p.arenaSize())
	switch k {
	case Pageable:
		return g.wallMover(g.ctx.CopyHtoD, g.ctx.CopyDtoH), nil
	case Staged:
		if g.copier == nil {
			c, err := transfer.New(g.pool, g.ctx, transfer.Options{DirectBelow: -1})
			if err != nil {
				return nil, err
			}
			g.copier = c
		}
		bg := context.Background()
		return g.wallMover(
			func(dev cuda.DevicePtr, h []byte) error { return g.copier.ToDevice(bg, dev, h) },
			func(h []byte, dev cuda.DevicePtr) error { return g.copier.FromDevice(bg, h, dev) }), nil
	case Batch:
		if err := cuda.BatchCopyAvailable(); err != nil {
			if errors.Is(err, cuda.ErrMissingSymbol) {
				return nil, fmt.Errorf("%w: the driver has no cuMemcpyBatchAsync (CUDA 12.8 or later)", errSkip)
			}
			return nil, err
		}
		// Each direction on its own stream: Both runs them at once from two
		// goroutines. The wall time includes the synchronize, as the
		// pageable kind's includes the copy's completion.
		return g.wallMover(
			func(dev cuda.DevicePtr, h []byte) error {
				return batchCopy(g.s1, g.s1.CopyHtoDBatch(dev, h, batchPiece, cuda.SrcAccessAny))
			},
			func(h []byte, dev cuda.DevicePtr) error {
				return batchCopy(g.s2, g.s2.CopyDtoHBatch(h, dev, batchPiece, cuda.SrcAccessAny))
			}), nil
	case Pinned, WriteCombined:
		flags := cuda.HostAllocFlags(0)
		if k == WriteCombined {
			flags = cuda.HostAllocWriteCombined
		}
		m, err := g.ctx.HostAlloc(a, flags)
		if err != nil {
			return nil, fmt.Errorf("measure: %s memory (%d bytes): %w", k, a, err)
		}
		return asyncMover(m.Bytes(), m.Free), nil
	case Registered:
		if !g.props.HostRegisterSupported {
			return nil, fmt.Errorf("%w: the device does not support cuMemHostRegister", errSkip)
		}
		m, err := g.ctx.HostRegister(g.pageable, 0)
		if err != nil {
			return nil, fmt.Errorf("measure: registering %d bytes: %w", a, err)
		}
		return asyncMover(g.pageable, m.Free), nil
	case Mapped:
		if !g.props.CanMapHostMemory {
			return nil, fmt.Errorf("%w: the device cannot map host memory", errSkip)
		}
		m, err := g.ctx.HostAlloc(a, cuda.HostAllocDeviceMap)
		if err != nil {
			return nil, fmt.Errorf("measure: mapped memory (%d bytes): %w", a, err)
		}
		ptr, err := m.DevicePointer()
		if err != nil {
			m.Free()
			return nil, fmt.Errorf("measure: device pointer of mapped memory: %w", err)
		}
		// The kernel reads (H2D) or writes (D2H) the host memory in place;
		// the device arena is not used.
		return &mover{timer: timerEvents, free: m.Free, one: func(d Direction, s *cuda.Stream, _ cuda.DevicePtr, off, n int64) error {
			if d == H2D {
				return g.k.ReadSumAsync(s, ptr+cuda.DevicePtr(off), int(n))
			}
			return g.k.Fill(s, ptr+cuda.DevicePtr(off), int(n), 1)
		}}, nil
	}
	return nil, fmt.Errorf("measure: unknown kind %q", k)
}

// errSkip marks a kind the device cannot do: a Skipped line, not a failure.
var errSkip = errors.New("skipped")

// batchPiece is the size of the batch kind's pieces: one copy of the
// batch per 4 MiB.
const batchPiece = 4 << 20

// batchCopy waits until the batch queued on s (err: how queuing went) is
// done; the pageable host memory stays referenced by the arena until then.
func batchCopy(s *cuda.Stream, err error) error {
	if err != nil {
		return errors.Join(err, s.Synchronize())
	}
	return s.Synchronize()
}

// asyncMover copies page-locked host memory with asynchronous copies.
func asyncMover(host []byte, free func() error) *mover {
	return &mover{timer: timerEvents, free: free, one: func(d Direction, s *cuda.Stream, dev cuda.DevicePtr, off, n int64) error {
		h := host[off : off+n]
		if d == H2D {
			return s.CopyHtoDAsync(dev, h)
		}
		return s.CopyDtoHAsync(h, dev)
	}}
}

// timeOnce performs one timed transfer of direction d (Both: an H2D and a
// D2H transfer at once) of size bytes at host offset off.
func (g *gpu) timeOnce(m *mover, d Direction, off, size int64) (time.Duration, error) {
	if m.timer == timerWall {
		t0 := time.Now()
		var err error
		if d == Both {
			err = m.both(off, size)
		} else {
			err = m.one(d, nil, g.devFor(d), off, size)
		}
		return time.Since(t0), err
	}
	if err := g.start.Record(g.s1); err != nil {
		return 0, err
	}
	if d == Both {
		if err := g.s2.WaitEvent(g.start); err != nil {
			return 0, err
		}
		if err := m.one(H2D, g.s1, g.dev1.Ptr(), off, size); err != nil {
			return 0, errors.Join(err, g.s1.Synchronize())
		}
		if err := m.one(D2H, g.s2, g.dev2.Ptr(), off, size); err != nil {
			return 0, errors.Join(err, g.s1.Synchronize(), g.s2.Synchronize())
		}
		if err := g.mid.Record(g.s2); err != nil {
			return 0, errors.Join(err, g.s2.Synchronize(), g.s1.Synchronize())
		}
		if err := g.s1.WaitEvent(g.mid); err != nil {
			return 0, errors.Join(err, g.s2.Synchronize(), g.s1.Synchronize())
		}
	} else if err := m.one(d, g.s1, g.devFor(d), off, size); err != nil {
		return 0, errors.Join(err, g.s1.Synchronize())
	}
	if err := g.end.Record(g.s1); err != nil {
		return 0, errors.Join(err, g.s1.Synchronize())
	}
	if err := g.end.Synchronize(); err != nil {
		return 0, err
	}
	return cuda.ElapsedTime(g.start, g.end)
}

func (g *gpu) devFor(d Direction) cuda.DevicePtr {
	if d == D2H {
		return g.dev2.Ptr()
	}
	return g.dev1.Ptr()
}

// row measures one transfer row: warm-up, then timed transfers cycling
// through the arena until the plan has enough.
func (g *gpu) row(m *mover, k Kind, d Direction, size int64) (Transfer, error) {
	rot := newRotor(size, g.p.arenaSize())
	s, err := g.p.collect(func() (time.Duration, error) { return g.timeOnce(m, d, rot.offset(), size) })
	if err != nil {
		return Transfer{}, err
	}
	t := transferRow(k, d, size, s, m.timer, g.p.MinRepeats)
	t.Device = g.dev
	return t, nil
}
