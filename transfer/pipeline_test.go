package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// TestWindowBound checks that the staging memory in flight, measured by the
// fake device (bytes queued and not yet run) and by the copier, stays within
// WindowBytes with several transfers in one direction at once, and within
// twice that (a window per direction) with transfers both ways at once.
func TestWindowBound(t *testing.T) {
	const window = 4 * testChunk
	for _, tc := range []struct {
		name  string
		dir   func(g int) Direction
		bound int64
	}{
		{"one direction", func(int) Direction { return HostToDevice }, window},
		{"both directions", func(g int) Direction { return Direction(g % 2) }, 2 * window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: window, Streams: 4, DirectBelow: -1})
			e.d.latency.Store(int64(100 * time.Microsecond))
			// The device holds the copies until the windows are full, so
			// that the transfers overlap however they are scheduled.
			full := int64(window/testChunk) * (tc.bound / window)
			var filled atomic.Bool
			hold := func() {
				spinUntil(func() bool {
					if e.c.held.now.Load() >= full {
						filled.Store(true)
					}
					return filled.Load()
				}, -1)
			}
			e.d.hold.Store(&hold)
			const n = 40*testChunk + 9
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					dev := e.d.alloc(n)
					src := randomBytes(n, uint64(g))
					var err error
					if tc.dir(g) == HostToDevice {
						err = e.c.ToDevice(context.Background(), dev, src)
					} else {
						err = e.c.FromDevice(context.Background(), src, dev)
					}
					if err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			st := e.c.Stats()
			if m := e.d.maxInflight.Load(); m > tc.bound || m < 2*testChunk {
				t.Errorf("fake device saw %d bytes in flight, bound %d", m, tc.bound)
			}
			if st.PeakStaging > tc.bound || st.PeakStaging < 2*testChunk || st.WindowBytes != window || st.StagingBytes != 0 {
				t.Errorf("staging stats %+v, bound %d", st, tc.bound)
			}
			// Whether a lane waits for a slot or completes a chunk of its
			// own to free one depends on the scheduling; a wait counted
			// has a time.
			if st.StagingWaits > 0 && st.StagingWaitTime <= 0 {
				t.Errorf("staging waits counted without a time: %+v", st)
			}
		})
	}
}

// TestCancel cancels staged copies in the middle (as the third chunk is queued), in both directions, sync
// and async, and checks the error, that nothing is left in flight when it
// returns, and (in cleanup) that the pool got every buffer back.
func TestCancel(t *testing.T) {
	for _, dir := range []Direction{HostToDevice, DeviceToHost} {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/async=%v", dir, async), func(t *testing.T) {
				e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 4 * testChunk, DirectBelow: -1})
				e.d.latency.Store(int64(2 * time.Millisecond))
				const n = 200 * testChunk
				dev := e.d.alloc(n)
				host := randomBytes(n, 5)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				// Cancelled as the third chunk is queued, not after a time: a
				// loaded machine may not have queued any chunk by then.
				var queued atomic.Int64
				e.d.failEnqueue = func(Direction, int) error {
					if queued.Add(1) == 3 {
						cancel()
					}
					return nil
				}
				var err error
				switch {
				case async && dir == HostToDevice:
					err = e.c.ToDeviceAsync(ctx, dev, host).Wait()
				case async:
					err = e.c.FromDeviceAsync(ctx, host, dev).Wait()
				case dir == HostToDevice:
					err = e.c.ToDevice(ctx, dev, host)
				default:
					err = e.c.FromDevice(ctx, host, dev)
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v, want context.Canceled", err)
				}
				if in := e.d.inflight.Load(); in != 0 {
					t.Fatalf("%d bytes still in flight after the cancelled copy returned", in)
				}
				if st := e.c.Stats(); st.Canceled != 1 || st.StagingBytes != 0 || st.Chunks == 0 || st.Chunks >= n/testChunk {
					t.Fatalf("stats %+v", st)
				}
				e.checkPool(true)
			})
		}
	}
	t.Run("before start", func(t *testing.T) {
		e := newEnv(t, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		if err := e.c.ToDevice(ctx, e.d.alloc(10), make([]byte, 10)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	})
}

var errInjected = errors.New("injected failure")

// TestFailure injects a device failure when the 5th chunk is queued, and
// when it runs: the copy returns a typed error, stops, and leaks nothing.
func TestFailure(t *testing.T) {
	for _, when := range []string{"enqueue", "exec"} {
		for _, dir := range []Direction{HostToDevice, DeviceToHost} {
			t.Run(when+"/"+dir.String(), func(t *testing.T) {
				e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 4 * testChunk, DirectBelow: -1})
				e.d.latency.Store(int64(100 * time.Microsecond))
				calls := e.injectFailure(when, 5)
				e.failThenRecover(dir, 50*testChunk, when, func(err error) {
					// It stops within a window (4 chunks) of the failure,
					// plus one chunk per other lane that was already past
					// its check, plus a window when the failure is seen
					// late: lanes share the stream, so a lane's copy may
					// land between another's copy and its event, and the
					// failure is reported by the next event on the stream.
					st := e.c.Stats()
					if st.Failed != 1 || st.Chunks > uint64(5+2*4+e.c.opt.Lanes-1) || st.ToDevice.Total().Transfers+st.FromDevice.Total().Transfers != 0 {
						t.Fatalf("stats %+v, %d enqueue/exec calls, err %v", st, calls.Load(), err)
					}
				})
			})
		}
	}
}

// TestConcurrent runs many goroutines on two copiers sharing one pool, with
// mixed sizes, directions and paths, and checks every byte.
func TestConcurrent(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 6 * testChunk, Streams: 4, DirectBelow: 4096})
	c2, err := newCopier(e.pool, e.d, Options{ChunkSize: testChunk, WindowBytes: 3 * testChunk}, defaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c2.Close(); err != nil {
			t.Error(err)
		}
	}()
	e.d.latency.Store(int64(20 * time.Microsecond))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.c
			if g%3 == 0 {
				c = c2
			}
			for i := range 6 {
				n := []int{1, 4095, testChunk + 1, 5*testChunk + 17}[(g+i)%4]
				src := randomBytes(n, uint64(g*100+i))
				dev := e.d.alloc(n)
				if g%2 == 0 {
					if err := c.ToDeviceAsync(context.Background(), dev, src).Wait(); err != nil {
						t.Error(err)
						return
					}
				} else if err := c.ToDevice(context.Background(), dev, src); err != nil {
					t.Error(err)
					return
				}
				back := make([]byte, n)
				if err := c.FromDevice(context.Background(), back, dev); err != nil {
					t.Error(err)
					return
				}
				sameBytes(t, fmt.Sprintf("goroutine %d, %d bytes", g, n), back, src)
			}
		}()
	}
	wg.Wait()
}

// TestAsyncFence uses a Transfer as the fence of a pool buffer it reads.
func TestAsyncFence(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk})
	e.d.latency.Store(int64(5 * time.Millisecond))
	ctx := context.Background()
	buf, err := e.pool.Get(ctx, 2*testChunk)
	if err != nil {
		t.Fatal(err)
	}
	src := randomBytes(buf.Len(), 8)
	copy(buf.Bytes(), src)
	dev := e.d.alloc(buf.Len())
	tr := e.c.ToDeviceAsync(ctx, dev, buf.Bytes())
	if tr.Len() != buf.Len() || tr.Direction() != HostToDevice {
		t.Fatalf("transfer %d %v", tr.Len(), tr.Direction())
	}
	if done, _ := tr.Done(); done {
		t.Fatal("done before the device ran the copy")
	}
	if err := buf.ReleaseAfter(tr); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wait(); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "device", e.devBytes(dev, len(src)), src)
}

// TestFakeChecks makes sure the fake device's checks are not vacuous: it
// flags an asynchronous copy of Go memory, and a staging buffer changed
// before its copy ran.
func TestFakeChecks(t *testing.T) {
	d := newFakeDevice()
	d.gate = make(chan struct{})
	s, _ := d.newStream()
	defer s.destroy()
	dev := d.alloc(100)
	if err := s.copyHtoDAsync(dev, make([]byte, 100)); !errors.Is(err, cuda.ErrNotPinned) {
		t.Fatalf("Go memory: %v", err)
	}
	be := &fakeBackend{d: d}
	a, _ := be.Alloc(4096)
	if err := s.copyHtoDAsync(dev, a.Bytes()[:100]); err != nil {
		t.Fatal(err)
	}
	a.Bytes()[0]++ // reused before the copy ran
	close(d.gate)
	s.synchronize()
	if v := d.Violations(); len(v) != 2 {
		t.Fatalf("violations %q", v)
	}
}

// TestStagingBudgetBelowWindow runs staged copies through a pool whose
// budget holds fewer staging buffers than the window has slots, with more
// lanes than buffers: a lane that cannot get a buffer while it holds chunks
// in flight must complete one of its own instead of waiting for the others
// (which would deadlock, each lane holding what another waits for).
func TestStagingBudgetBelowWindow(t *testing.T) {
	d := newFakeDevice()
	d.latency.Store(int64(50 * time.Microsecond))
	pool, err := pinpool.New(pinpool.Options{Backend: &fakeBackend{d: d}, MinAvailable: -1, Budget: 3 * testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := newCopier(pool, d, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: 8, DirectBelow: -1}, defaultTuning())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 40*testChunk + 5
	var wg sync.WaitGroup
	for g := range 3 { // several transfers at once compete for the buffers too
		src := randomBytes(n, uint64(21+g))
		dev := d.alloc(n)
		wg.Go(func() {
			back := make([]byte, n)
			for range 3 {
				if err := c.ToDevice(ctx, dev, src); err != nil {
					t.Errorf("goroutine %d: ToDevice: %v", g, err)
					return
				}
				if err := c.FromDevice(ctx, back, dev); err != nil {
					t.Errorf("goroutine %d: FromDevice: %v", g, err)
					return
				}
				sameBytes(t, "round trip", back, src)
			}
		})
	}
	wg.Wait()
	if st := pool.Stats(); st.BytesHeld > 3*testChunk || st.BytesInUse != 0 {
		t.Errorf("pool after the copies: held %d bytes (budget %d), %d bytes in use", st.BytesHeld, 3*testChunk, st.BytesInUse)
	}
}

// TestCancelWhileWaitingForStaging cancels a transfer that waits for a
// staging buffer held elsewhere: the error wraps the context's error and
// not pinpool.ErrBudget, which would tell the caller the pool is too small.
func TestCancelWhileWaitingForStaging(t *testing.T) {
	d := newFakeDevice()
	pool, err := pinpool.New(pinpool.Options{Backend: &fakeBackend{d: d}, MinAvailable: -1, Budget: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := newCopier(pool, d, Options{ChunkSize: testChunk, WindowBytes: 4 * testChunk, Lanes: 2, DirectBelow: -1}, chunkedOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := pool.Get(context.Background(), testChunk) // the whole budget
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	const n = 4 * testChunk
	err = c.ToDevice(ctx, d.alloc(n), randomBytes(n, 1))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pinpool.ErrBudget) {
		t.Fatalf("got %v: want the deadline, not ErrBudget", err)
	}
}

// TestChunkedUploadDemotes checks that a chunked upload's lanes demote the chunks they hold in
// flight once none is left to claim (laneQueue.demote), each chunk's staging once, and only
// uploads: with a depth that holds every chunk, all of an upload's bytes are demoted, none of a
// download's.
func TestChunkedUploadDemotes(t *testing.T) {
	var mu sync.Mutex
	var demoted []int
	demoteHook = func(b []byte) {
		mu.Lock()
		demoted = append(demoted, len(b))
		mu.Unlock()
	}
	t.Cleanup(func() { demoteHook = demoteBytes })
	const n = 4*testChunk - 100
	e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: 2, DirectBelow: -1}, chunkedOnly())
	if p := planStaging(n, HostToDevice, 1, true, e.c.opt, e.c.tune); p.mode != chunked || p.chunks != 4 || p.depth < p.chunks {
		t.Fatalf("plan %+v: want 4 chunks, all of them in flight at once", p)
	}
	dev := e.d.alloc(n)
	src := randomBytes(n, 5)
	for round := range 3 {
		mu.Lock()
		demoted = demoted[:0]
		mu.Unlock()
		if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
			t.Fatal(err)
		}
		sameBytes(t, fmt.Sprintf("round %d", round), e.devBytes(dev, n), src)
		mu.Lock()
		total := 0
		for _, m := range demoted {
			total += m
		}
		if total != n || len(demoted) != 4 {
			t.Errorf("round %d: demoted %v (%d bytes), want the 4 chunks of %d bytes", round, demoted, total, n)
		}
		mu.Unlock()
		if err := e.c.FromDevice(context.Background(), make([]byte, n), dev); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(demoted) != 4 {
			t.Errorf("round %d: after the download, demoted %v: want the upload's 4 chunks only", round, demoted)
		}
		mu.Unlock()
	}
}
