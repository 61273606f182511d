package transfer

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestPageableMemo checks the memo of ranges found not page-locked: a
// range and the slices inside it are remembered, others are not, an
// expired entry is forgotten, a range covering older ones replaces them,
// and it holds at most memoSize ranges, the newest.
func TestPageableMemo(t *testing.T) {
	var m pageableMemo
	mem := make([]byte, 64<<10)
	if m.covers(mem) {
		t.Fatal("an empty memo has a range")
	}
	m.remember(mem[4096:8192])
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{mem[4096:8192], true},
		{mem[5000:6000], true},
		{mem[4095:8192], false},
		{mem[4096:8193], false},
		{mem[0:100], false},
	} {
		if got := m.covers(tc.b); got != tc.want {
			lo, hi := memoRange(tc.b)
			t.Errorf("has [%#x, %#x) = %v, want %v", lo, hi, got, tc.want)
		}
	}
	// Expired: forgotten, and dropped at the next add.
	lo, hi := memoRange(mem[:4096])
	expired := []memoEntry{{lo, hi, int64(time.Since(epoch)) - 1}}
	m.entries.Store(&expired)
	if m.covers(mem[:4096]) {
		t.Error("an expired range is remembered")
	}
	m.remember(mem[8192:12288])
	if es := *m.entries.Load(); len(es) != 1 {
		t.Errorf("%d entries after adding to a memo of one expired entry, want 1", len(es))
	}
	// A range covering an older one replaces it.
	m.remember(mem[8192:16384])
	if es := *m.entries.Load(); len(es) != 1 || !m.covers(mem[8192:16384]) {
		t.Errorf("entries %v after a covering range", es)
	}
	// Full: the oldest go.
	for i := range memoSize + 3 {
		m.remember(mem[i*1024 : i*1024+512])
	}
	if es := *m.entries.Load(); len(es) != memoSize {
		t.Errorf("%d entries, want %d", len(es), memoSize)
	}
	if m.covers(mem[0:512]) || !m.covers(mem[(memoSize+2)*1024:(memoSize+2)*1024+512]) {
		t.Error("the memo kept the oldest range or lost the newest")
	}
}

// TestPageableAskedOnce checks that a stream of staged transfers from one
// buffer asks the device whether it is page-locked once, while direct
// (small) transfers and pool memory ask every time; and that memory remembered as pageable and then registered
// takes the registered path at once.
func TestPageableAskedOnce(t *testing.T) {
	ctx := context.Background()
	opt := Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 2, DirectBelow: testChunk}
	for _, tc := range []struct {
		name string
		tu   tuning
		n    int
		want int64 // asks over 5 transfers
	}{
		{"staged", defaultTuning(), 2 * testChunk, 1},
		{"direct", defaultTuning(), testChunk / 2, 10}, // both ends, then the first byte
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvTuned(t, opt, tc.tu)
			src := randomBytes(tc.n, 3)
			dev := e.d.alloc(tc.n)
			before := e.d.pinnedAsks.Load()
			for range 5 {
				if err := e.c.ToDevice(ctx, dev, src); err != nil {
					t.Fatal(err)
				}
			}
			if got := e.d.pinnedAsks.Load() - before; got != tc.want {
				t.Errorf("%d asks, want %d", got, tc.want)
			}
			sameBytes(t, "device", e.devBytes(dev, tc.n), src)
		})
	}
	t.Run("pool-memory", func(t *testing.T) {
		e := newEnv(t, opt)
		buf, err := e.pool.Get(ctx, 2*testChunk)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Release()
		for range 3 {
			if p := e.c.PathOf(buf.Bytes()); p != PathPinned {
				t.Fatalf("pool memory takes path %v", p)
			}
		}
	})
	t.Run("registered-after", func(t *testing.T) {
		e := newEnv(t, opt)
		src := randomBytes(2*testChunk, 4)
		dev := e.d.alloc(len(src))
		if err := e.c.ToDevice(ctx, dev, src); err != nil {
			t.Fatal(err)
		}
		if p := e.c.PathOf(src); p != PathStaged {
			t.Fatalf("path %v before Register", p)
		}
		r, err := e.c.Register(src)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if p := e.c.PathOf(src); p != PathRegistered {
			t.Fatalf("path %v after Register", p)
		}
	})
}

// TestPageableMemoConcurrent adds and looks up ranges from many goroutines
// at once (run with -race): readers see whole entries, the memo never
// holds more than memoSize ranges, and a range added is found by its
// adder right after.
func TestPageableMemoConcurrent(t *testing.T) {
	var m pageableMemo
	mem := make([]byte, 1<<20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				lo := ((g*500 + i) * 64) % (len(mem) - 4096)
				b := mem[lo : lo+4096]
				m.remember(b)
				if !m.covers(b[100:200]) && len(*m.entries.Load()) < memoSize {
					t.Errorf("a range just added is not found")
					return
				}
				m.covers(mem[:100])
			}
		})
	}
	wg.Wait()
	if n := len(*m.entries.Load()); n > memoSize {
		t.Fatalf("%d entries, at most %d", n, memoSize)
	}
}
