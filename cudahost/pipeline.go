package cudahost

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/pinpool/pinpool/cuda"
)

// The Register method's growth. A large allocation is made in pieces of
// at most Options.RegisterChunk bytes, each registered in calls that hold
// the driver's lock about lockHold at most (lockGate.fit), so that the lock is
// held for one bounded call at a time and other goroutines' copies get in
// between. Prefault (page faults and zeroing,
// which take no driver lock) runs on several goroutines, and takes turns
// with the registration by groups of pieces (Options.RegisterGroup): a
// group is prefaulted, then registered, then the next is prefaulted, so
// that the two never run at once. Registering each piece as soon as it was
// backed, while the workers faulted in the next ones, was no faster and
// made a neighbour's copies wait up to tens of milliseconds (`pinpool
// arena`'s register way without groups beside it, 2026-12-02).
// BenchmarkArena (package pinpool) and `pinpool arena` measure the rate and
// what a neighbour's copies wait for each choice of the knobs.

// prefaulter is the region a pipeline backs: a *hostmem.Region.
type prefaulter interface {
	Prefault(off, n int) error
}

// pipeline is one growth: its knobs and the work done.
type pipeline struct {
	piece    int // bytes per registration call
	unit     int // bytes per prefault step (at most a piece)
	prefault int // prefault goroutines
	register int // registration goroutines
	minSplit int // smallest part a refused registration is split into
	// group is how many pieces are prefaulted, then registered, in turn
	// (at least 1): the pieces of a group go to registration once all of
	// them are backed, and the prefault of a group waits until the
	// previous one is registered, so that the two never run at once.
	group int
	// fit, if not nil, is the size of the next registration call of a
	// piece with left bytes still to register (lockGate.fit); nil: one call.
	fit func(left int) int
}

// plan returns the pipeline for size bytes in groups of group pieces
// (at least one): each group is prefaulted in units shared out among all
// the prefault workers, one unit per worker where a piece holds a
// worker's share of the group, no smaller than align (a huge page, so
// that no huge page is faulted by two workers) and never across a piece.
// Units are claimed in address order, so the pieces of a group are ready
// at the rate of all the workers together. A worker faults its share of a
// group in as few calls as it can: cut into huge pages, the same prefault
// made another process's copies wait longer, and grew no faster
// (`pinpool arena`'s register ways, with scripts/ref/torch_pin.py
// neighbour running as the other process).
func plan(size, piece, group, prefault, register, align int) pipeline {
	if prefault <= 0 {
		prefault = min(runtime.GOMAXPROCS(0), DefaultPrefaultWorkers)
	}
	if register <= 0 {
		register = DefaultRegisterWorkers
	}
	group = max(1, group)
	align = min(align, piece) // a piece smaller than a huge page keeps its size
	pieces := (size + piece - 1) / piece
	groupBytes := min(size, piece*min(group, pieces)) // no overflow: group is cut to the pieces
	share := (groupBytes/prefault + align - 1) / align * align
	unit := min(piece, max(align, share))
	return pipeline{
		piece:    piece,
		unit:     unit,
		prefault: max(1, min(prefault, (size+unit-1)/unit)),
		register: max(1, min(register, pieces)),
		minSplit: align,
		group:    group,
	}
}

// DefaultRegisterWorkers is the number of goroutines that call
// cuMemHostRegister at once when Options.RegisterWorkers is zero.
const DefaultRegisterWorkers = 2

// growth is what a pipeline made, and what it saw.
type growth struct {
	parts  []part // in address order
	splits int    // registrations refused for their size and retried in halves
}

// run prefaults and registers mem (the region r's memory) piece by piece.
// progress, if not nil, is called with the bytes registered so far, rising,
// from one goroutine at a time. On an error or when ctx is done it undoes
// every registration it made and returns the error.
func (pl pipeline) run(ctx context.Context, r prefaulter, mem []byte, register func([]byte) (part, error), progress func(int)) (growth, error) {
	n := len(mem)
	pieces := (n + pl.piece - 1) / pl.piece
	unitsOf := func(i int) int {
		ln := min(pl.piece, n-i*pl.piece)
		return (ln + pl.unit - 1) / pl.unit
	}
	per := max(1, pl.group) // pieces per group
	groups := (pieces + per - 1) / per
	left := make([]atomic.Int32, groups)     // prefault units still to do, per group
	unpinned := make([]atomic.Int32, groups) // pieces not yet registered, per group
	registered := make([]chan struct{}, groups)
	for i := range pieces {
		left[i/per].Add(int32(unitsOf(i)))
		unpinned[i/per].Add(1)
	}
	for g := range registered {
		registered[g] = make(chan struct{})
	}
	ready := make(chan int, pieces)
	var failed atomic.Bool
	stopped := make(chan struct{}) // closed on the first failure
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
			close(stopped)
		}
		errMu.Unlock()
		failed.Store(true)
	}
	stop := context.AfterFunc(ctx, func() { fail(ctx.Err()) })
	defer stop()

	perPiece := (pl.piece + pl.unit - 1) / pl.unit // units of every piece but the last
	units := (pieces-1)*perPiece + unitsOf(pieces-1)
	var next atomic.Int64
	var faulting sync.WaitGroup
	for range pl.prefault {
		faulting.Go(func() {
			for !failed.Load() {
				u := int(next.Add(1) - 1)
				if u >= units {
					return
				}
				i := u / perPiece
				g := i / per
				if g > 0 {
					select { // the previous group is registered first
					case <-registered[g-1]:
					case <-stopped:
						return
					}
				}
				off := i*pl.piece + u%perPiece*pl.unit
				ln := min(pl.unit, (i+1)*pl.piece-off, n-off)
				if err := r.Prefault(off, ln); err != nil {
					fail(fmt.Errorf("prefaulting bytes [%d, %d) of %d: %w", off, off+ln, n, err))
					return
				}
				if left[g].Add(-1) == 0 {
					for j := g * per; j < min(pieces, (g+1)*per); j++ {
						ready <- j
					}
				}
			}
		})
	}
	go func() { faulting.Wait(); close(ready) }()

	byPiece := make([][]part, pieces)
	var splits atomic.Int64
	var progMu sync.Mutex
	done := 0
	pin := func(i int) {
		if err := ctx.Err(); err != nil && !failed.Load() {
			fail(err) // at once: AfterFunc's call may come later
		}
		if failed.Load() {
			return
		}
		off := i * pl.piece
		ln := min(pl.piece, n-off)
		ps, err := pl.registerFitted(mem[off:off+ln:off+ln], register, &splits)
		byPiece[i] = ps
		if err != nil {
			fail(fmt.Errorf("registering bytes [%d, %d) of %d: %w", off, off+ln, n, err))
			return
		}
		if progress != nil {
			progMu.Lock()
			done += ln
			if !failed.Load() {
				progress(done)
			}
			progMu.Unlock()
		}
	}
	var registering sync.WaitGroup
	for range pl.register {
		registering.Go(func() {
			for i := range ready {
				pin(i)
				if g := i / per; unpinned[g].Add(-1) == 0 {
					close(registered[g])
				}
			}
		})
	}
	registering.Wait()
	faulting.Wait()
	var parts []part
	for _, ps := range byPiece {
		parts = append(parts, ps...)
	}
	if failed.Load() {
		errMu.Lock()
		err := firstErr
		errMu.Unlock()
		return growth{}, also(err, freeParts(parts, pl.register))
	}
	return growth{parts: parts, splits: int(splits.Load())}, nil
}

// registerFitted registers mem in calls of the sizes pl.fit gives (one
// when it is nil), each through registerSplitting; on a failure it undoes
// the calls that succeeded.
func (pl pipeline) registerFitted(mem []byte, register func([]byte) (part, error), splits *atomic.Int64) ([]part, error) {
	var parts []part
	for len(mem) > 0 {
		n := len(mem)
		if pl.fit != nil {
			n = min(max(pl.fit(n), 1), n)
		}
		ps, err := pl.registerSplitting(mem[:n:n], register, splits)
		if err != nil {
			return nil, also(err, freeParts(parts, 1))
		}
		parts, mem = append(parts, ps...), mem[n:]
	}
	return parts, nil
}

// registerSplitting registers mem; when the driver refuses it and it is
// larger than minSplit, it registers the two halves instead (the kernel
// may cap how much one pin call takes), counting each split.
func (pl pipeline) registerSplitting(mem []byte, register func([]byte) (part, error), splits *atomic.Int64) ([]part, error) {
	p, err := register(mem)
	if err == nil {
		return []part{p}, nil
	}
	if len(mem) <= pl.minSplit || !splittable(err) {
		return nil, err
	}
	splits.Add(1)
	half := (len(mem)/2 + pl.minSplit - 1) / pl.minSplit * pl.minSplit
	if half >= len(mem) {
		return nil, err
	}
	a, err := pl.registerSplitting(mem[:half:half], register, splits)
	if err != nil {
		return nil, err
	}
	b, err := pl.registerSplitting(mem[half:], register, splits)
	if err != nil {
		return nil, also(err, freeParts(a, 1))
	}
	return append(a, b...), nil
}

// splittable reports whether a refused registration may succeed in
// smaller parts: not when the memory is registered already, or the driver
// or the context cannot be used at all.
func splittable(err error) bool {
	for _, e := range []error{cuda.ErrAlreadyRegistered, cuda.ErrInvalidContext, cuda.ErrNotInitialized,
		cuda.ErrDeinitialized, cuda.ErrMissingSymbol, cuda.ErrClosed, cuda.ErrNoDriver} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// freeParts frees parts with up to workers goroutines and returns the
// failures.
func freeParts(parts []part, workers int) error {
	if len(parts) == 0 {
		return nil
	}
	workers = max(1, min(workers, len(parts)))
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(parts) {
					return
				}
				if err := parts[i].Free(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
