package pinpool

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStress runs 64 goroutines doing random Gets, TryGets, Releases and
// fenced releases of random sizes under a budget, for a bounded time. Each
// goroutine stamps its buffers and checks the stamp before releasing: a
// buffer handed to two owners at once would fail the check. The backend's
// peak must stay within the budget and nothing may leak.
func TestStress(t *testing.T) {
	d := 2 * time.Second
	if !soak() {
		d = 300 * time.Millisecond
	}
	const budget = 96 << 20
	p, f := newTestPool(t, Options{Budget: budget, MaxIdle: 8, IdleDecay: time.Millisecond, IdleTimeout: 50 * time.Millisecond})
	sizes := []int{1, 4096, 5000, 64 << 10, 1 << 20, frame, 4 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var ops, corrupt atomic.Int64
	var unexpected atomic.Pointer[error]
	for g := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var held []Buffer
			stamp := func(b Buffer, v uint64) {
				bs := b.Bytes()
				if len(bs) >= 8 {
					binary.LittleEndian.PutUint64(bs, v)
					binary.LittleEndian.PutUint64(bs[len(bs)-8:], v)
				}
			}
			check := func(b Buffer) {
				bs := b.Bytes()
				if len(bs) >= 8 && (binary.LittleEndian.Uint64(bs) != uint64(uintptr(b.Pointer())) || binary.LittleEndian.Uint64(bs[len(bs)-8:]) != uint64(uintptr(b.Pointer()))) {
					corrupt.Add(1)
				}
			}
			for ctx.Err() == nil {
				ops.Add(1)
				switch op := rng.IntN(10); {
				case op < 5 && len(held) < 6:
					n := sizes[rng.IntN(len(sizes))]
					var b Buffer
					var err error
					if op < 2 {
						wctx, c := context.WithTimeout(ctx, time.Millisecond)
						b, err = p.Get(wctx, n)
						c()
					} else {
						b, err = p.TryGet(n)
					}
					if err != nil {
						if !errors.Is(err, ErrBudget) {
							unexpected.Store(&err)
						}
						continue
					}
					stamp(b, uint64(uintptr(b.Pointer())))
					held = append(held, b)
				case len(held) > 0:
					i := rng.IntN(len(held))
					b := held[i]
					held = append(held[:i], held[i+1:]...)
					check(b)
					var err error
					if op == 9 {
						deadline := time.Now().Add(time.Duration(rng.IntN(200)) * time.Microsecond)
						err = b.ReleaseAfter(FenceFunc(func() (bool, error) { return time.Now().After(deadline), nil }))
					} else {
						err = b.Release()
					}
					if err != nil {
						unexpected.Store(&err)
					}
					if rng.IntN(50) == 0 && b.Release() == nil {
						e := errors.New("double release accepted")
						unexpected.Store(&e)
					}
				}
			}
			for _, b := range held {
				check(b)
				b.Release()
			}
		})
	}
	wg.Wait()
	if e := unexpected.Load(); e != nil {
		t.Fatal(*e)
	}
	if corrupt.Load() != 0 {
		t.Fatalf("%d buffers were handed to two owners", corrupt.Load())
	}
	waitFor(t, "pending fences", func() bool { return p.Stats().BytesPending == 0 })
	_, maxLive, _, _ := f.stats()
	st := p.Stats()
	t.Logf("%d ops; peak held %d of budget %d; %d grows, %d trims, %d budget waits", ops.Load(), st.PeakHeld, budget, st.Grows, st.Trims, st.BudgetWaits)
	if maxLive > budget || st.PeakHeld > budget {
		t.Fatalf("budget exceeded: backend peak %d, pool peak %d, budget %d", maxLive, st.PeakHeld, budget)
	}
	if st.BytesInUse != 0 {
		t.Fatalf("%d bytes still in use", st.BytesInUse)
	}
}
