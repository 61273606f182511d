package seedpool

import (
	"errors"
	"sync"
	"testing"
)

// idle returns the number of idle blocks of size.
func (p *Pool) idle(size int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free[size])
}

// outstanding returns the number of blocks handed out and not freed.
func (p *Pool) outstanding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.out)
}

func mustAlloc(t testing.TB, p *Pool, size int) []byte {
	t.Helper()
	b, err := p.Alloc(size)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", size, err)
	}
	if len(b) != size {
		t.Fatalf("Alloc(%d): len %d", size, len(b))
	}
	return b
}

func mustFree(t testing.TB, p *Pool, size int, b []byte) {
	t.Helper()
	if err := p.Free(size, b); err != nil {
		t.Fatalf("Free(%d): %v", size, err)
	}
}

func TestPoolGrowOnMiss(t *testing.T) {
	const size = 4096
	for _, tc := range []struct {
		name string
		opt  int
		want int
	}{
		{"default", 0, DefaultGrowCount},
		{"negative", -3, DefaultGrowCount},
		{"one", 1, 1},
		{"four", 4, 4},
		{"seven", 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa := &FakeAllocator{}
			p := New(fa, Options{GrowCount: tc.opt})
			var bufs [][]byte
			// The first miss allocates want blocks; the next want-1 are hits.
			for i := range tc.want {
				bufs = append(bufs, mustAlloc(t, p, size))
				if got := p.Allocations(); got != int64(tc.want) {
					t.Fatalf("after %d allocs: Allocations = %d, want %d", i+1, got, tc.want)
				}
				if got := p.idle(size); got != tc.want-1-i {
					t.Fatalf("after %d allocs: idle = %d, want %d", i+1, got, tc.want-1-i)
				}
			}
			if got, want := p.HeldBytes(), int64(tc.want*size); got != want {
				t.Fatalf("HeldBytes = %d, want %d", got, want)
			}
			// The next one is a miss again.
			bufs = append(bufs, mustAlloc(t, p, size))
			if got := p.Allocations(); got != int64(2*tc.want) {
				t.Fatalf("second miss: Allocations = %d, want %d", got, 2*tc.want)
			}
			if got := fa.AllocCalls(); got != p.Allocations() {
				t.Fatalf("fake AllocCalls = %d, pool Allocations = %d", got, p.Allocations())
			}
			// Another size has its own list.
			other := mustAlloc(t, p, size+1)
			if got := p.Allocations(); got != int64(3*tc.want) {
				t.Fatalf("other size: Allocations = %d, want %d", got, 3*tc.want)
			}
			mustFree(t, p, size+1, other)
			for _, b := range bufs {
				mustFree(t, p, size, b)
			}
			if err := p.Destroy(); err != nil {
				t.Fatal(err)
			}
			if fa.LiveBytes() != 0 || fa.LiveBlocks() != 0 {
				t.Fatalf("leak: %d bytes in %d blocks", fa.LiveBytes(), fa.LiveBlocks())
			}
		})
	}
}

func TestPoolMaxIdle(t *testing.T) {
	const size = 64 << 10
	for _, tc := range []struct {
		name    string
		maxIdle int
		n       int // blocks allocated then freed
		keep    int // idle blocks expected afterwards
	}{
		{"default under", 0, 20, 20},
		{"default exact", 0, 32, 32},
		{"default over", 0, 40, DefaultMaxIdle},
		{"two", 2, 12, 2},
		{"one", 1, 4, 1},
		{"below grow count", 3, 1, 3}, // a miss grows 4; freeing trims back to 3
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa := &FakeAllocator{}
			p := New(fa, Options{MaxIdle: tc.maxIdle})
			bufs := make([][]byte, tc.n)
			for i := range bufs {
				bufs[i] = mustAlloc(t, p, size)
			}
			allocated := int(p.Allocations())
			for _, b := range bufs {
				mustFree(t, p, size, b)
			}
			if got := p.idle(size); got != tc.keep {
				t.Fatalf("idle = %d, want %d", got, tc.keep)
			}
			if got, want := p.Frees(), int64(allocated-tc.keep); got != want {
				t.Fatalf("Frees = %d, want %d", got, want)
			}
			if got, want := p.HeldBytes(), int64(tc.keep*size); got != want {
				t.Fatalf("HeldBytes = %d, want %d", got, want)
			}
			if got := fa.LiveBytes(); got != p.HeldBytes() {
				t.Fatalf("fake live bytes %d != HeldBytes %d", got, p.HeldBytes())
			}
			if got, want := p.PeakHeldBytes(), int64(allocated*size); got != want {
				t.Fatalf("PeakHeldBytes = %d, want %d", got, want)
			}
		})
	}
}

func TestPoolDestroy(t *testing.T) {
	const a, b = 4096, 8192
	fa := &FakeAllocator{}
	p := New(fa, Options{})
	x := mustAlloc(t, p, a)
	y := mustAlloc(t, p, b)
	mustFree(t, p, a, x)
	// y is still out: Destroy frees the 4+3 idle blocks only.
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if got := fa.FreeCalls(); got != 7 {
		t.Fatalf("FreeCalls after Destroy = %d, want 7", got)
	}
	if p.idle(a) != 0 || p.idle(b) != 0 {
		t.Fatalf("lists not cleared: %d, %d", p.idle(a), p.idle(b))
	}
	if got := p.HeldBytes(); got != b {
		t.Fatalf("HeldBytes = %d, want %d (the block still out)", got, b)
	}
	// The seed's defect: a second destroy freed the same blocks again.
	if err := p.Destroy(); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if got := fa.FreeCalls(); got != 7 {
		t.Fatalf("second Destroy called Free: FreeCalls = %d", got)
	}
	// The block still out comes back, and the pool is usable.
	mustFree(t, p, b, y)
	z := mustAlloc(t, p, a)
	mustFree(t, p, a, z)
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if fa.LiveBytes() != 0 || p.HeldBytes() != 0 || p.outstanding() != 0 {
		t.Fatalf("after final Destroy: live %d, held %d, out %d", fa.LiveBytes(), p.HeldBytes(), p.outstanding())
	}
}

func TestPoolFreeForeign(t *testing.T) {
	const size = 4096
	fa := &FakeAllocator{}
	p := New(fa, Options{})
	other := New(&FakeAllocator{}, Options{})
	mine := mustAlloc(t, p, size)
	theirs := mustAlloc(t, other, size)
	freed := mustAlloc(t, p, size)
	mustFree(t, p, size, freed)

	for _, tc := range []struct {
		name string
		size int
		b    []byte
		want error
	}{
		{"nil", size, nil, ErrUnknown},
		{"empty", size, []byte{}, ErrUnknown},
		{"go heap", size, make([]byte, size), ErrUnknown},
		{"other pool", size, theirs, ErrUnknown},
		{"interior", size - 1, mine[1:], ErrUnknown},
		{"already freed", size, freed, ErrUnknown},
		{"wrong size", 2 * size, mine, ErrSizeMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frees, out := fa.FreeCalls(), p.outstanding()
			if err := p.Free(tc.size, tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("Free = %v, want %v", err, tc.want)
			}
			if fa.FreeCalls() != frees || p.outstanding() != out {
				t.Fatal("a failed Free changed the pool")
			}
		})
	}
	// The real block is still outstanding and frees normally, resliced too.
	mustFree(t, p, size, mine[:10])
	mustFree(t, other, size, theirs)
}

func TestPoolInvalidSize(t *testing.T) {
	fa := &FakeAllocator{}
	p := New(fa, Options{})
	for _, n := range []int{0, -1} {
		if _, err := p.Alloc(n); !errors.Is(err, ErrInvalidSize) {
			t.Fatalf("Alloc(%d) = %v, want ErrInvalidSize", n, err)
		}
	}
	if fa.AllocCalls() != 0 {
		t.Fatal("invalid size reached the allocator")
	}
}

func TestPoolAllocFailure(t *testing.T) {
	const size = 4096
	for _, tc := range []struct {
		name      string
		failEvery int64
		wantErr   bool
		wantCalls int64 // Allocator calls made by the one Alloc
		wantIdle  int
	}{
		// The seed retried forever; one call and an error here.
		{"every call fails", 1, true, 1, 0},
		// Calls 1 and 2 succeed, 3 fails: growth stops, a block is served.
		{"third call fails", 3, false, 3, 1},
		// Call 1 succeeds, 2 fails.
		{"second call fails", 2, false, 2, 0},
		{"no failure", 0, false, 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fa := &FakeAllocator{FailEvery: tc.failEvery}
			p := New(fa, Options{})
			b, err := p.Alloc(size)
			if tc.wantErr {
				if !errors.Is(err, ErrInjected) || b != nil {
					t.Fatalf("Alloc = %v, %v; want nil, ErrInjected", b, err)
				}
			} else if err != nil || len(b) != size {
				t.Fatalf("Alloc = len %d, %v", len(b), err)
			}
			if got := fa.AllocCalls(); got != tc.wantCalls {
				t.Fatalf("AllocCalls = %d, want %d", got, tc.wantCalls)
			}
			if got := p.Allocations(); got != tc.wantCalls {
				t.Fatalf("Allocations = %d, want %d", got, tc.wantCalls)
			}
			if got := p.idle(size); got != tc.wantIdle {
				t.Fatalf("idle = %d, want %d", got, tc.wantIdle)
			}
			if got := p.HeldBytes(); got != fa.LiveBytes() {
				t.Fatalf("HeldBytes %d != fake live %d", got, fa.LiveBytes())
			}
			if b != nil {
				mustFree(t, p, size, b)
			}
			if err := p.Destroy(); err != nil {
				t.Fatal(err)
			}
			if fa.LiveBytes() != 0 {
				t.Fatalf("leak: %d bytes", fa.LiveBytes())
			}
		})
	}
}

func TestPoolHeldBytes(t *testing.T) {
	const a, b = 4096, 10000
	fa := &FakeAllocator{}
	p := New(fa, Options{GrowCount: 4, MaxIdle: 2})
	var as [][]byte
	for range 5 { // two misses: 8 blocks of a
		as = append(as, mustAlloc(t, p, a))
	}
	bb := mustAlloc(t, p, b) // one miss: 4 blocks of b
	peak := int64(8*a + 4*b)
	if got := p.HeldBytes(); got != peak {
		t.Fatalf("HeldBytes = %d, want %d", got, peak)
	}
	// Freeing trims each size to 2 idle blocks; the peak stays.
	for _, x := range as {
		mustFree(t, p, a, x)
	}
	mustFree(t, p, b, bb)
	if got, want := p.HeldBytes(), int64(2*a+2*b); got != want {
		t.Fatalf("HeldBytes after trim = %d, want %d", got, want)
	}
	if got := p.PeakHeldBytes(); got != peak {
		t.Fatalf("PeakHeldBytes = %d, want %d", got, peak)
	}
	if got := fa.LiveBytes(); got != p.HeldBytes() {
		t.Fatalf("fake live %d != HeldBytes %d", got, p.HeldBytes())
	}
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if p.HeldBytes() != 0 || p.PeakHeldBytes() != peak {
		t.Fatalf("after Destroy: held %d, peak %d", p.HeldBytes(), p.PeakHeldBytes())
	}
}

func TestPoolConcurrent(t *testing.T) {
	sizes := []int{4096, 65536, 100000, 4096 * 3}
	const goroutines, iters = 16, 500
	fa := &FakeAllocator{}
	p := New(fa, Options{MaxIdle: 8})
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			held := make(map[int][]byte)
			for i := range iters {
				size := sizes[(g+i)%len(sizes)]
				if b, ok := held[size]; ok {
					if err := p.Free(size, b); err != nil {
						errs <- err
						return
					}
					delete(held, size)
					continue
				}
				b, err := p.Alloc(size)
				if err != nil {
					errs <- err
					return
				}
				b[0], b[len(b)-1] = byte(g), byte(i) // the block is ours alone
				held[size] = b
			}
			for size, b := range held {
				if err := p.Free(size, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p.outstanding() != 0 {
		t.Fatalf("%d blocks still out", p.outstanding())
	}
	if got := fa.LiveBytes(); got != p.HeldBytes() {
		t.Fatalf("fake live %d != HeldBytes %d", got, p.HeldBytes())
	}
	for _, s := range sizes {
		if n := p.idle(s); n > 8 {
			t.Fatalf("size %d: %d idle > MaxIdle 8", s, n)
		}
	}
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if fa.LiveBytes() != 0 || p.HeldBytes() != 0 {
		t.Fatalf("leak: live %d, held %d", fa.LiveBytes(), p.HeldBytes())
	}
	if fa.AllocCalls() != p.Allocations() || fa.FreeCalls() != p.Frees() || p.Allocations() != p.Frees() {
		t.Fatalf("calls: fake %d/%d, pool %d/%d", fa.AllocCalls(), fa.FreeCalls(), p.Allocations(), p.Frees())
	}
}

func TestNewNilAllocator(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(nil) did not panic")
		}
	}()
	New(nil, Options{})
}
