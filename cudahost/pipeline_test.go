package cudahost

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/pinpool/pinpool/cuda"
)

// fakeFaults records the ranges a pipeline prefaults, and fails the one
// starting at failAt (-1: none).
type fakeFaults struct {
	mu     sync.Mutex
	ranges [][2]int
	failAt int
}

func (f *fakeFaults) Prefault(off, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off == f.failAt {
		return errors.New("fake prefault failure")
	}
	f.ranges = append(f.ranges, [2]int{off, off + n})
	return nil
}

// fakeRegistrar registers parts of mem: it checks each was prefaulted
// first, records the part, and refuses parts larger than maxLen (0: any)
// or the part starting at failAt (-1: none).
type fakeRegistrar struct {
	t      *testing.T
	mem    []byte
	faults *fakeFaults
	maxLen int
	failAt int

	mu    sync.Mutex
	live  map[int]int // offset -> length
	calls int
	freed int
}

type regPart struct {
	r        *fakeRegistrar
	off, len int
}

func (p *regPart) Len() int                               { return p.len }
func (p *regPart) DevicePointer() (cuda.DevicePtr, error) { return 0, cuda.ErrNotMapped }
func (p *regPart) Free() error {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if _, ok := p.r.live[p.off]; !ok {
		p.r.t.Errorf("free of part at %d that is not registered", p.off)
	}
	delete(p.r.live, p.off)
	p.r.freed++
	return nil
}

func (r *fakeRegistrar) register(b []byte) (part, error) {
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(r.mem))))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.faults.mu.Lock()
	covered := 0
	for _, rg := range r.faults.ranges {
		covered += max(0, min(rg[1], off+len(b))-max(rg[0], off))
	}
	r.faults.mu.Unlock()
	if covered != len(b) {
		r.t.Errorf("part [%d, %d) registered with %d of its bytes prefaulted", off, off+len(b), covered)
	}
	if r.maxLen > 0 && len(b) > r.maxLen {
		return nil, cuda.ErrOutOfMemory
	}
	if off == r.failAt {
		return nil, cuda.ErrAlreadyRegistered
	}
	if r.live == nil {
		r.live = map[int]int{}
	}
	r.live[off] = len(b)
	return &regPart{r, off, len(b)}, nil
}

// TestPipelineBoundedPieces checks that every registration call covers at
// most one piece, that the parts tile the memory in address order, that
// each was prefaulted before it was registered, and that progress rises
// to the whole size.
func TestPipelineBoundedPieces(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		size, piece, prefault, register, align int
	}{
		{64 * mib, 16 * mib, 4, 2, 2 * mib},
		{64 * mib, 64 * mib, 3, 1, 2 * mib}, // one piece, prefault units that do not divide it
		{67*mib + 4096, 8 * mib, 8, 4, 4096},
		{4 * mib, 64 * mib, 16, 2, 2 * mib},
		{10 * mib, 4 * mib, 1, 1, 4096},
		{9 * mib, 1 * mib, 4, 2, 2 * mib}, // pieces smaller than a huge page
	} {
		t.Run(fmt.Sprintf("%d/%d/%d/%d", tc.size, tc.piece, tc.prefault, tc.register), func(t *testing.T) {
			mem := make([]byte, tc.size)
			f := &fakeFaults{failAt: -1}
			r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: -1}
			pl := plan(tc.size, tc.piece, 1, tc.prefault, tc.register, tc.align)
			var seen []int
			g, err := pl.run(context.Background(), f, mem, r.register, func(n int) { seen = append(seen, n) })
			if err != nil {
				t.Fatal(err)
			}
			off := 0
			for _, p := range g.parts {
				rp := p.(*regPart)
				if rp.off != off || rp.len > tc.piece {
					t.Fatalf("part at %d of %d bytes; want one at %d of at most %d", rp.off, rp.len, off, tc.piece)
				}
				off += rp.len
			}
			if off != tc.size {
				t.Fatalf("parts cover %d of %d bytes", off, tc.size)
			}
			if !slices.IsSorted(seen) || len(seen) == 0 || seen[len(seen)-1] != tc.size {
				t.Fatalf("progress %v: want rising to %d", seen, tc.size)
			}
			if err := freeParts(g.parts, 3); err != nil || len(r.live) != 0 {
				t.Fatalf("free: %v, %d parts left", err, len(r.live))
			}
		})
	}
}

// TestPipelineSplitsRefusedParts checks that a registration refused for
// its size is retried in halves, down to what the driver accepts, and
// counted.
func TestPipelineSplitsRefusedParts(t *testing.T) {
	const mib = 1 << 20
	mem := make([]byte, 32*mib)
	f := &fakeFaults{failAt: -1}
	r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: -1, maxLen: 4 * mib}
	g, err := plan(len(mem), 16*mib, 1, 4, 2, 2*mib).run(context.Background(), f, mem, r.register, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.parts) != 8 || g.splits != 6 {
		t.Fatalf("%d parts after %d splits; want 8 parts of 4 MiB after 6 splits", len(g.parts), g.splits)
	}
	freeParts(g.parts, 1)
}

// TestPipelineUndoes checks that a failed prefault, a failed registration
// and a cancelled context each leave nothing registered.
func TestPipelineUndoes(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name           string
		faultAt, regAt int
		cancelAfter    int // progress calls before cancelling; 0: never
		want           error
	}{
		{"prefault", 40 * mib, -1, 0, nil},
		{"register", -1, 48 * mib, 0, cuda.ErrAlreadyRegistered},
		{"cancel", -1, -1, 2, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, 64*mib)
			f := &fakeFaults{failAt: tc.faultAt}
			r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: tc.regAt}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			_, err := plan(len(mem), 8*mib, 1, 4, 2, 2*mib).run(ctx, f, mem, r.register, func(int) {
				if calls++; calls == tc.cancelAfter {
					cancel()
				}
			})
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("run: %v, want an error wrapping %v", err, tc.want)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.live) != 0 {
				t.Fatalf("%d parts still registered after the failure", len(r.live))
			}
		})
	}
}

// TestPlanSharesEveryPiece checks that the prefault workers share each
// group, not one piece each: the first piece of a growth of many pieces is
// ready for registration after a fraction of its prefault, and each worker
// faults its share of a group in one unit where a piece holds it. Units
// stay whole huge pages (align), and within a piece.
func TestPlanSharesEveryPiece(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		size, piece, group, prefault, align, unit, workers int
	}{
		{1 << 30, 32 * mib, 1, 8, 2 * mib, 4 * mib, 8},
		{32 << 30, 32 * mib, 1, 8, 2 * mib, 4 * mib, 8},
		{1 << 30, 64 * mib, 1, 12, 2 * mib, 6 * mib, 12},
		{1 << 30, 8 * mib, 1, 16, 2 * mib, 2 * mib, 16}, // not below a huge page
		{64 * mib, 64 * mib, 1, 3, 2 * mib, 22 * mib, 3},
		{1 << 30, 32 * mib, 1, 8, 4096, 4 * mib, 8},
		{9 * mib, 1 * mib, 1, 4, 2 * mib, 1 * mib, 4}, // pieces smaller than a huge page
		// Groups: a worker's share of the group, at most a piece.
		{32 << 30, 16 * mib, 4, 16, 2 * mib, 4 * mib, 16},
		{32 << 30, 16 * mib, 256, 16, 2 * mib, 16 * mib, 16},
		{32 << 30, 16 * mib, 5, 16, 2 * mib, 6 * mib, 16},        // 80 MiB in 16 shares of 5 MiB, whole huge pages
		{8 * mib, 16 * mib, 4, 16, 2 * mib, 2 * mib, 4},          // a group larger than the growth
		{32 << 30, 16 * mib, 1 << 40, 16, 2 * mib, 16 * mib, 16}, // no overflow
		{96 << 30, 16 * mib, 4, 1, 2 * mib, 16 * mib, 1},         // one worker: whole pieces
	} {
		pl := plan(tc.size, tc.piece, tc.group, tc.prefault, 2, tc.align)
		if pl.unit != tc.unit || pl.unit > pl.piece || pl.prefault != tc.workers || pl.group != tc.group {
			t.Errorf("plan(%d, %d, groups of %d, %d workers, align %d): units of %d bytes, %d workers, groups of %d; want %d bytes, %d workers", tc.size, tc.piece, tc.group, tc.prefault, tc.align, pl.unit, pl.prefault, pl.group, tc.unit, tc.workers)
		}
	}
}

// phaseLog records when prefaults and registrations run, to check that a
// grouped pipeline never runs both at once.
type phaseLog struct {
	mu              sync.Mutex
	faulting, pinng int
	overlaps        int
}

func (l *phaseLog) enter(pin bool, d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pin {
		l.pinng += d
	} else {
		l.faulting += d
	}
	if l.faulting > 0 && l.pinng > 0 {
		l.overlaps++
	}
}

type loggedFaults struct {
	*fakeFaults
	log *phaseLog
}

func (f loggedFaults) Prefault(off, n int) error {
	f.log.enter(false, 1)
	defer f.log.enter(false, -1)
	return f.fakeFaults.Prefault(off, n)
}

// TestPipelineGroups checks a grouped pipeline: prefault and registration
// take turns group by group (never both at once), every piece is still
// registered once, in address order, after its prefault, and progress
// rises to the whole size; a failure in a later group undoes everything.
func TestPipelineGroups(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		size, piece, group, prefault, register int
	}{
		{64 * mib, 4 * mib, 4, 4, 2},
		{67 * mib, 4 * mib, 3, 8, 3},  // a short last group and piece
		{16 * mib, 2 * mib, 16, 4, 2}, // one group
		{24 * mib, 4 * mib, 1, 8, 2},  // groups of one piece, plan's own
	} {
		t.Run(fmt.Sprintf("%d/%d/%d", tc.size, tc.piece, tc.group), func(t *testing.T) {
			mem := make([]byte, tc.size)
			log := &phaseLog{}
			f := &fakeFaults{failAt: -1}
			r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: -1}
			pl := plan(tc.size, tc.piece, tc.group, tc.prefault, tc.register, 2*mib)
			reg := func(b []byte) (part, error) {
				log.enter(true, 1)
				defer log.enter(true, -1)
				return r.register(b)
			}
			var seen []int
			g, err := pl.run(context.Background(), loggedFaults{f, log}, mem, reg, func(n int) { seen = append(seen, n) })
			if err != nil {
				t.Fatal(err)
			}
			if log.overlaps > 0 {
				t.Errorf("prefault and registration ran at once %d times", log.overlaps)
			}
			off := 0
			for _, p := range g.parts {
				rp := p.(*regPart)
				if rp.off != off || rp.len > tc.piece {
					t.Fatalf("part at %d of %d bytes; want one at %d of at most %d", rp.off, rp.len, off, tc.piece)
				}
				off += rp.len
			}
			if off != tc.size || !slices.IsSorted(seen) || seen[len(seen)-1] != tc.size {
				t.Fatalf("parts cover %d of %d bytes, progress %v", off, tc.size, seen)
			}
			if err := freeParts(g.parts, 2); err != nil || len(r.live) != 0 {
				t.Fatalf("free: %v, %d parts left", err, len(r.live))
			}
		})
	}
	t.Run("failure", func(t *testing.T) {
		mem := make([]byte, 32*mib)
		f := &fakeFaults{failAt: -1}
		r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: 20 * mib}
		pl := plan(len(mem), 4*mib, 2, 4, 2, 2*mib)
		if _, err := pl.run(context.Background(), f, mem, r.register, nil); !errors.Is(err, cuda.ErrAlreadyRegistered) {
			t.Fatalf("run: %v, want the registration's error", err)
		}
		if len(r.live) != 0 {
			t.Fatalf("%d parts left registered after the failure", len(r.live))
		}
		f2 := &fakeFaults{failAt: 24 * mib}
		r2 := &fakeRegistrar{t: t, mem: mem, faults: f2, failAt: -1}
		if _, err := pl.run(context.Background(), f2, mem, r2.register, nil); err == nil || len(r2.live) != 0 {
			t.Fatalf("run with a failing prefault: %v, %d parts left", err, len(r2.live))
		}
	})
}

// TestBackendPlanDefaults checks what a Register backend built with zero
// Options plans for a large allocation: pieces of DefaultRegisterChunk,
// min(GOMAXPROCS, DefaultPrefaultWorkers) prefault workers, and groups of
// DefaultRegisterGroup (so that prefault and registration take turns); a
// given RegisterGroup in whole pieces.
func TestBackendPlanDefaults(t *testing.T) {
	const gib = 1 << 30
	j := &journal{}
	for _, tc := range []struct {
		opt          Options
		piece, group int // group in pieces
	}{
		{Options{}, DefaultRegisterChunk, DefaultRegisterGroup / DefaultRegisterChunk},
		{Options{RegisterChunk: 32 << 20, RegisterGroup: 100 << 20}, 32 << 20, 4},
		{Options{RegisterChunk: 2 << 30}, 2 << 30, max(1, DefaultRegisterGroup/(2<<30))}, // the group rounded up to one piece
		{Options{RegisterChunk: 2 << 30, RegisterGroup: 4096}, 2 << 30, 1},               // a group of one piece
	} {
		pl := fakeBackend(j, tc.opt).plan(32*gib, hugeAlign)
		wantPrefault := min(runtime.GOMAXPROCS(0), DefaultPrefaultWorkers)
		if pl.piece != tc.piece || pl.group != tc.group || pl.prefault != wantPrefault || pl.register != DefaultRegisterWorkers {
			t.Errorf("%+v: plan %+v; want pieces of %d, groups of %d pieces, %d prefault and %d registration workers", tc.opt, pl, tc.piece, tc.group, wantPrefault, DefaultRegisterWorkers)
		}
	}
}

// TestPipelineGroupsCancel checks that a grouped pipeline cancelled while
// one group registers (its next group's prefault waiting for it) or while
// a group is prefaulted stops, returns the context's error and leaves
// nothing registered, and that its progress had risen.
func TestPipelineGroupsCancel(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		cancelAfter int // registrations before cancelling
		inPrefault  bool
	}{
		{"registering first group", 1, false},
		{"registering later group", 5, false},
		{"prefaulting", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, 64*mib)
			f := &fakeFaults{failAt: -1}
			r := &fakeRegistrar{t: t, mem: mem, faults: f, failAt: -1}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pl := plan(len(mem), 4*mib, 4, 4, 2, 2*mib)
			var faults sync.Once
			pf := cancelFaults{f, func(off int) {
				if tc.inPrefault && off >= 16*mib {
					faults.Do(cancel) // in the second group
				}
			}}
			var seen []int
			_, err := pl.run(ctx, pf, mem, r.register, func(n int) {
				if seen = append(seen, n); len(seen) == tc.cancelAfter {
					cancel()
				}
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("run: %v, want context.Canceled", err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.live) != 0 || r.freed != r.calls {
				t.Fatalf("%d parts still registered (%d registered, %d freed)", len(r.live), r.calls, r.freed)
			}
			if !slices.IsSorted(seen) {
				t.Fatalf("progress %v: want rising", seen)
			}
			if tc.inPrefault && r.calls > 4 {
				t.Fatalf("%d registrations after a cancel in the second group's prefault; want at most the first group's 4", r.calls)
			}
		})
	}
}

// cancelFaults calls at before each prefault.
type cancelFaults struct {
	*fakeFaults
	at func(off int)
}

func (f cancelFaults) Prefault(off, n int) error {
	f.at(off)
	return f.fakeFaults.Prefault(off, n)
}
