package pinpool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkSnapshot checks the invariants every Stats snapshot must satisfy.
func checkSnapshot(st Stats) error {
	switch {
	case st.BytesHeld != st.BytesInUse+st.BytesIdle+st.BytesPending+st.BytesRetired:
		return fmt.Errorf("held %d != in use %d + idle %d + pending %d + retired %d", st.BytesHeld, st.BytesInUse, st.BytesIdle, st.BytesPending, st.BytesRetired)
	case st.Budget > 0 && st.BytesHeld > st.Budget:
		return fmt.Errorf("held %d > budget %d", st.BytesHeld, st.Budget)
	case st.BytesHeld != st.BytesGrown-st.BytesTrimmed:
		return fmt.Errorf("held %d != grown %d - trimmed %d", st.BytesHeld, st.BytesGrown, st.BytesTrimmed)
	case st.PeakHeld < st.BytesHeld || st.PeakHeld > st.BytesGrown:
		return fmt.Errorf("peak %d not in [held %d, grown %d]", st.PeakHeld, st.BytesHeld, st.BytesGrown)
	case st.Gets != st.Hits+st.Misses:
		return fmt.Errorf("gets %d != hits %d + misses %d", st.Gets, st.Hits, st.Misses)
	}
	for _, c := range st.Classes {
		if c.Gets != c.Hits+c.Misses {
			return fmt.Errorf("class %d: gets %d != hits %d + misses %d", c.Size, c.Gets, c.Hits, c.Misses)
		}
		if c.BytesHeld != (c.BuffersHeld+c.Retired)*c.Size {
			return fmt.Errorf("class %d: held %d bytes != (%d live + %d retired buffers) * size", c.Size, c.BytesHeld, c.BuffersHeld, c.Retired)
		}
	}
	return nil
}

// counters lists every counter of a snapshot by name, per class too.
func counters(st Stats) map[string]uint64 {
	m := map[string]uint64{
		"Gets": st.Gets, "Hits": st.Hits, "Misses": st.Misses, "Grows": st.Grows,
		"BytesGrown": uint64(st.BytesGrown), "Trims": st.Trims, "BytesTrimmed": uint64(st.BytesTrimmed),
		"GrowTime": uint64(st.GrowTime), "ReleasedAfterFence": st.ReleasedAfterFence, "FenceErrors": st.FenceErrors,
		"Failures": st.Failures, "FreeFailures": st.FreeFailures, "BackendPanics": st.BackendPanics,
		"BudgetWaits": st.BudgetWaits, "BudgetRefusals": st.BudgetRefusals, "LowMemoryRefusals": st.LowMemoryRefusals,
		"PeakHeld": uint64(st.PeakHeld),
	}
	for _, c := range st.Classes {
		for k, v := range map[string]uint64{"Gets": c.Gets, "Hits": c.Hits, "Misses": c.Misses, "Grows": c.Grows} {
			m[fmt.Sprintf("class %d %s", c.Size, k)] = v
		}
	}
	return m
}

// TestStatsUnderLoad samples Stats while goroutines get, release (some
// after fences that fail now and then), wait for budget and trim, and
// checks every snapshot against the invariants and every counter against
// its previous value. Before the fix, Gets and Hits dropped (16534 to
// 8346) while slabs grew, BytesInUse read a whole slab for one buffer,
// and BytesHeld read above the budget.
func TestStatsUnderLoad(t *testing.T) {
	fb := newFaultyBackend()
	fb.failEvery.Store(17)
	p, err := New(Options{Backend: fb, Budget: 48 << 20, MinAvailable: -1, MaxIdle: 8, IdleTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	run := 300 * time.Millisecond
	if !testing.Short() {
		run = 2 * time.Second
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sizes := []int{4096, 12 << 10, 64 << 10, 1 << 20, frame, 6 << 20}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			var held []Buffer
			for {
				select {
				case <-stop:
					for _, b := range held {
						b.Release()
					}
					return
				default:
				}
				switch op := r.IntN(10); {
				case op < 5:
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
					b, err := p.Get(ctx, sizes[r.IntN(len(sizes))])
					cancel()
					if err == nil {
						held = append(held, b)
					}
				case op < 8 && len(held) > 0:
					b := held[0]
					held = held[1:]
					if r.IntN(3) == 0 {
						polls, fails := 0, r.IntN(5) == 0
						b.ReleaseAfter(FenceFunc(func() (bool, error) {
							polls++
							if fails && polls > 1 {
								return false, errors.New("fence failed")
							}
							return polls > 2, nil
						}))
					} else {
						b.Release()
					}
				case op == 8:
					p.Trim()
				}
				if len(held) > 4 {
					held[0].Release()
					held = held[1:]
				}
			}
		}()
	}
	prev := counters(p.Stats())
	deadline := time.Now().Add(run)
	samples := 0
	for time.Now().Before(deadline) {
		st := p.Stats()
		if err := checkSnapshot(st); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("snapshot %d: %v", samples, err)
		}
		cur := counters(st)
		for k, v := range prev {
			if cur[k] < v {
				close(stop)
				wg.Wait()
				t.Fatalf("snapshot %d: counter %s went back from %d to %d", samples, k, v, cur[k])
			}
		}
		prev = cur
		samples++
	}
	close(stop)
	wg.Wait()
	st := p.Stats()
	if st.Gets == 0 || st.Misses == 0 || st.Hits == 0 || st.FenceErrors == 0 || st.Failures == 0 || st.BudgetWaits == 0 {
		t.Errorf("the load did not reach every path: %+v", st)
	}
	t.Logf("%d snapshots; %d gets, %d hits, %d misses, %d waits, %d grows, %d trims, %d fence errors, %d failures",
		samples, st.Gets, st.Hits, st.Misses, st.BudgetWaits, st.Grows, st.Trims, st.FenceErrors, st.Failures)
}

// TestModelNoBufferHeldTwice is a model-based stress: goroutines get,
// release, release after fences, release twice (expecting ErrReleased),
// reserve and trim at random, against a shared model that maps each live
// buffer's address to its holder and checks that no address is ever held
// twice, and that each buffer still holds what its holder wrote. After
// Close and the release of everything, nothing is left allocated.
func TestModelNoBufferHeldTwice(t *testing.T) {
	f := newFake()
	p, err := New(Options{Backend: f, Budget: 64 << 20, MinAvailable: -1, MaxIdle: 4, IdleTimeout: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run := time.Second
	if !testing.Short() {
		run = 5 * time.Second
	}
	var (
		mu     sync.Mutex
		holder = map[uintptr]int{}
		bad    atomic.Value
	)
	claim := func(b Buffer, g int) {
		a := uintptr(b.Pointer())
		mu.Lock()
		if h, ok := holder[a]; ok {
			bad.Store(fmt.Sprintf("address %#x handed to goroutine %d while goroutine %d holds it", a, g, h))
		}
		holder[a] = g
		mu.Unlock()
	}
	drop := func(b Buffer) {
		mu.Lock()
		delete(holder, uintptr(b.Pointer()))
		mu.Unlock()
	}
	sizes := []int{4096, 8192, 64 << 10, 1 << 20, frame}
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			type held struct {
				b   Buffer
				tag byte
			}
			var hs []held
			var stale []Buffer
			release := func(h held) {
				bs := h.b.Bytes()
				if bs[0] != h.tag || bs[len(bs)-1] != h.tag {
					bad.Store(fmt.Sprintf("goroutine %d: buffer at %p was written by someone else", g, h.b.Pointer()))
				}
				drop(h.b)
				var err error
				if r.IntN(4) == 0 {
					polls := 0
					err = h.b.ReleaseAfter(FenceFunc(func() (bool, error) { polls++; return polls > 1, nil }))
				} else {
					err = h.b.Release()
				}
				if err != nil {
					bad.Store(fmt.Sprintf("release: %v", err))
				}
				stale = append(stale, h.b)
			}
			for time.Now().Before(deadline) && bad.Load() == nil {
				switch op := r.IntN(12); {
				case op < 5:
					var b Buffer
					var err error
					if op < 3 {
						b, err = p.TryGet(sizes[r.IntN(len(sizes))])
					} else {
						ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
						b, err = p.Get(ctx, sizes[r.IntN(len(sizes))])
						cancel()
					}
					if err != nil {
						if !errors.Is(err, ErrBudget) {
							bad.Store(fmt.Sprintf("get: %v", err))
						}
						continue
					}
					claim(b, g)
					tag := byte(r.IntN(255) + 1)
					bs := b.Bytes()
					bs[0], bs[len(bs)-1] = tag, tag
					hs = append(hs, held{b, tag})
				case op < 9 && len(hs) > 0:
					i := r.IntN(len(hs))
					release(hs[i])
					hs = append(hs[:i], hs[i+1:]...)
				case op == 9 && len(stale) > 0:
					s := stale[r.IntN(len(stale))]
					if err := s.Release(); !errors.Is(err, ErrReleased) {
						bad.Store(fmt.Sprintf("a stale handle released again: %v", err))
					}
					if s.Bytes() != nil {
						bad.Store("a stale handle still gives memory")
					}
				case op == 10:
					p.Reserve(sizes[r.IntN(len(sizes))], 2)
				case op == 11:
					p.Trim()
				}
				if len(stale) > 64 {
					stale = stale[32:]
				}
			}
			for _, h := range hs {
				release(h)
			}
		}()
	}
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitLiveBytes(t, f, 0)
	if _, _, allocs, frees := f.stats(); allocs != frees {
		t.Fatalf("%d allocations, %d frees", allocs, frees)
	}
}
