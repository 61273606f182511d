package transfer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// TestPageableAsked checks when the copier asks the driver whether host memory is pinned: once for
// memory it found pageable less than tuning.pageableFor ago (and any part of it), again for other
// memory, after the answer expired, and every time with pageableFor zero; the bytes arrive every
// time.
func TestPageableAsked(t *testing.T) {
	const n = 4 << 20 // above DirectBelow: staged, no second question about its first byte
	if defaultTuning().pageableFor <= 0 {
		t.Errorf("the default copier asks the driver about every transfer (tuning.pageableFor %v)", defaultTuning().pageableFor)
	}
	for _, tc := range []struct {
		name string
		good time.Duration
		age  bool  // the answers expire between the first copy and the rest
		want int64 // questions for the three copies of one buffer
	}{
		{"remembered", time.Hour, false, 1},
		{"expired", time.Hour, true, 2},
		{"ask-always", 0, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, dev, host := pageableEnv(t, tc.good, n, 7)
			ctx := context.Background()
			asks0 := e.d.pinnedAsks.Load()
			if err := e.c.ToDevice(ctx, dev, host); err != nil {
				t.Fatal(err)
			}
			if tc.age {
				expireAnswers(e.c)
			}
			for _, b := range [][]byte{host, host[4096 : n-4096]} {
				if err := e.c.ToDevice(ctx, dev, b); err != nil {
					t.Fatal(err)
				}
			}
			back := make([]byte, n)
			if err := e.c.FromDevice(ctx, back, dev); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "host", back[:4096], host[4096:8192])            // the sub-slice's copy came last
			if got := e.d.pinnedAsks.Load() - asks0 - 1; got != tc.want { // back: one question
				t.Errorf("the driver was asked %d times, want %d", got, tc.want)
			}
			asks0 = e.d.pinnedAsks.Load()
			other := randomBytes(n, 8)
			if err := e.c.ToDevice(ctx, dev, other); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, "device", e.devBytes(dev, n), other)
			if got := e.d.pinnedAsks.Load() - asks0; got != 1 {
				t.Errorf("other memory: the driver was asked %d times, want 1", got)
			}
		})
	}
}

// TestPageableThenPinned breaks the remembered answer: memory the copier found pageable is then
// pinned by other code (a registration the copier does not know) or registered through the copier.
// The first is staged until the answer expires, then copied as pinned; the second is copied as
// registered at once; the bytes arrive either way.
func TestPageableThenPinned(t *testing.T) {
	const n = 4 << 20
	e, dev, host := pageableEnv(t, time.Hour, n, 9)
	ctx := context.Background()
	copyAs := func(b []byte, want Path) {
		t.Helper()
		if got := e.c.PathOf(b); got != want {
			t.Fatalf("path %v, want %v", got, want)
		}
		e.setDev(dev, make([]byte, n))
		if err := e.c.ToDevice(ctx, dev, b); err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "device", e.devBytes(dev, n), b)
	}
	copyAs(host, PathStaged)
	reg, err := e.d.register(host) // pinned by other code
	if err != nil {
		t.Fatal(err)
	}
	copyAs(host, PathStaged) // the answer still holds: staged, which pinned memory allows
	expireAnswers(e.c)
	copyAs(host, PathPinned)
	if err := reg.Free(); err != nil {
		t.Fatal(err)
	}

	mine := randomBytes(n, 10)
	copyAs(mine, PathStaged)
	r, err := e.c.Register(mine)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	copyAs(mine, PathRegistered)
}

// pageableEnv is a copier whose pageable answers stay good for good, with device memory of n bytes
// and n random host bytes from seed.
func pageableEnv(t *testing.T, good time.Duration, n int, seed uint64) (*env, cuda.DevicePtr, []byte) {
	tu := defaultTuning()
	tu.pageableFor = good
	e := newEnvTuned(t, Options{}, tu)
	return e, e.d.alloc(n), randomBytes(n, seed)
}

// expireAnswers makes every answer c remembers older than any tuning.pageableFor a test sets.
func expireAnswers(c *Copier) {
	c.pageable.mu.Lock()
	defer c.pageable.mu.Unlock()
	for i := range c.pageable.ranges {
		c.pageable.ranges[i].at -= int64(1000 * time.Hour)
	}
}

// TestPageableConcurrent copies from more buffers than the copier remembers, from goroutines at
// once (run with -race): every copy's bytes arrive, whichever answers are remembered.
func TestPageableConcurrent(t *testing.T) {
	const n, goroutines, rounds = 1 << 20, 12, 20
	e := newEnv(t, Options{})
	var wg sync.WaitGroup
	for g := range goroutines {
		dev := e.d.alloc(n)
		host := randomBytes(n, uint64(20+g))
		wg.Go(func() {
			back := make([]byte, n)
			for range rounds {
				if err := e.c.ToDevice(context.Background(), dev, host); err != nil {
					t.Error(err)
					return
				}
				if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
					t.Error(err)
					return
				}
				sameBytes(t, "host", back, host)
			}
		})
	}
	wg.Wait()
}
