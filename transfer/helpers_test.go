package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// testChunk is the chunk size of most CPU tests: small, so that many chunks
// run quickly.
const testChunk = 64 << 10

// env is a copier over a fake device and a pool of fake pinned memory. Its
// cleanup closes the copier and checks that the pool got every staging
// buffer back, that the fake device saw no violation, and that no
// goroutine was left behind.
type env struct {
	t    testing.TB
	d    *fakeDevice
	be   *fakeBackend
	pool *pinpool.Pool
	c    *Copier
}

func newEnv(t testing.TB, opt Options) *env {
	t.Helper()
	return newEnvTuned(t, opt, defaultTuning())
}

// newEnvTuned is newEnv with a copier of tuning tu.
func newEnvTuned(t testing.TB, opt Options, tu tuning) *env {
	t.Helper()
	d := newFakeDevice()
	return newEnvOn(t, d, d, opt, tu)
}

// newEnvOn is newEnvTuned with a copier over dev, which is d or wraps it.
func newEnvOn(t testing.TB, dev device, d *fakeDevice, opt Options, tu tuning) *env {
	t.Helper()
	g0 := runtime.NumGoroutine()
	be := &fakeBackend{d: d}
	pool, err := pinpool.New(pinpool.Options{Backend: be, MinAvailable: -1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCopier(pool, dev, opt, tu)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, d: d, be: be, pool: pool, c: c}
	t.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
		e.checkPool(false)
		for _, v := range d.Violations() {
			t.Errorf("fake device: %s", v)
		}
		if n := d.streams.Load(); n != 0 {
			t.Errorf("%d streams left after Close", n)
		}
		if n := d.events.Load(); n != 0 {
			t.Errorf("%d events left after Close", n)
		}
		if err := pool.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
		waitGoroutines(t, g0)
	})
	return e
}

// checkPool is poolIdle of the env's pool.
func (e *env) checkPool(noRetired bool) {
	e.t.Helper()
	poolIdle(e.t, e.pool, "pool", noRetired)
}

// poolIdle waits (at most 5 s: a bound for a hang, not a timing) until p
// has no buffer in use or pending on a fence, as after every transfer has
// returned and its lanes have given their staging back; with noRetired it
// also wants no retired memory.
func poolIdle(tb testing.TB, p *pinpool.Pool, what string, noRetired bool) {
	tb.Helper()
	st := p.Stats()
	for deadline := time.Now().Add(5 * time.Second); (st.BytesInUse != 0 || st.BytesPending != 0) && time.Now().Before(deadline); st = p.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st.BytesInUse != 0 || st.BytesPending != 0 {
		tb.Errorf("%s: %d bytes in use, %d pending on fences after 5 s", what, st.BytesInUse, st.BytesPending)
	}
	if noRetired && st.BytesRetired != 0 {
		tb.Errorf("%s: %d bytes retired", what, st.BytesRetired)
	}
}

// settledStaging is the copier's staging in bytes once it holds none, or
// after 10 s (a bound for a hang, not a timing): a download that followed
// another closely may return before its lanes have given its staging back
// (the handoff, coop.go).
func settledStaging(c *Copier) int64 {
	for deadline := time.Now().Add(10 * time.Second); ; {
		n := c.Stats().StagingBytes
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitGoroutines waits (bounded) until no more goroutines run than before,
// not counting the signal loop that fuzzing starts (os/signal), which
// outlives every test.
func waitGoroutines(t testing.TB, before int) {
	t.Helper()
	var n int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= before {
			return
		}
		if n = goroutinesBut("os/signal.signal_recv"); n <= before {
			return
		}
	}
	buf := make([]byte, 1<<16)
	t.Errorf("goroutine leak: %d running, %d before\n%s", n, before, buf[:runtime.Stack(buf, true)])
}

// goroutinesBut counts the goroutines whose stack does not mention fn.
func goroutinesBut(fn string) int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// randomBytes returns n random bytes from a seeded source (never all zero
// for n >= 16).
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 7})
	r.Read(b)
	return b
}

// devBytes returns a copy of the fake device's bytes at p.
func (e *env) devBytes(p cuda.DevicePtr, n int) []byte {
	e.t.Helper()
	m, err := e.d.mem(p, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return bytes.Clone(m)
}

func (e *env) setDev(p cuda.DevicePtr, b []byte) {
	e.t.Helper()
	m, err := e.d.mem(p, len(b))
	if err != nil {
		e.t.Fatal(err)
	}
	copy(m, b)
}

// sameBytes fails t unless got equals want.
func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if err := bytesDiff(what, got, want); err != nil {
		t.Fatal(err)
	}
}

// bytesDiff is sameBytes as an error, for goroutines (which must not call
// Fatal): nil when got equals want, else the first differing offset.
func bytesDiff(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Errorf("%s: %d bytes differ from %d wanted, first at offset %d", what, len(got), len(want), i)
}

// alignedBytes returns n zero bytes of Go (pageable) memory, of capacity
// n, that start at a 4096-byte boundary, so that a sub-slice at offset k
// starts k bytes past one.
func alignedBytes(n int) []byte {
	b := make([]byte, n+4096)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 4095)
	return b[skip : skip+n : skip+n]
}

// injectFailure makes the fake device fail its nth asynchronous copy, when
// it is queued (when == "enqueue") or when it runs ("exec"), with an error
// wrapping errInjected and cuda.ErrLaunchFailed; it returns the count of
// copies seen.
func (e *env) injectFailure(when string, nth int64) *atomic.Int64 {
	calls := new(atomic.Int64)
	fail := func(Direction, int) error {
		if calls.Add(1) == nth {
			return fmt.Errorf("fake: %w: %w", errInjected, cuda.ErrLaunchFailed)
		}
		return nil
	}
	if when == "enqueue" {
		e.d.failEnqueue = fail
	} else {
		e.d.failExec = fail
	}
	return calls
}

// failThenRecover runs a transfer of n bytes in direction dir that an
// injected failure (injectFailure) makes fail, and checks that it returns
// the copy's error with nothing left in flight, calls check (if not nil)
// with the error, checks that the staging is back (retired when the
// failure came when the copy ran), then that the next transfer, with no
// failure injected, copies every byte.
func (e *env) failThenRecover(dir Direction, n int, when string, check func(error)) {
	e.t.Helper()
	dev := e.d.alloc(n)
	host := randomBytes(n, 3)
	var err error
	if dir == HostToDevice {
		err = e.c.ToDevice(context.Background(), dev, host)
	} else {
		err = e.c.FromDevice(context.Background(), host, dev)
	}
	if !errors.Is(err, ErrCopy) || !errors.Is(err, errInjected) || !errors.Is(err, cuda.ErrLaunchFailed) {
		e.t.Fatalf("got %v", err)
	}
	if in := e.d.inflight.Load(); in != 0 {
		e.t.Fatalf("%d bytes in flight after the failed copy returned", in)
	}
	if check != nil {
		check(err)
	}
	// A queueing failure leaves no doubt about the buffer; a failure while
	// running makes the pool retire it.
	e.checkPool(when == "enqueue")
	e.d.failEnqueue, e.d.failExec = nil, nil
	if err := e.c.ToDevice(context.Background(), dev, host); err != nil {
		e.t.Fatalf("copy after the failure: %v", err)
	}
	sameBytes(e.t, "device", e.devBytes(dev, n), host)
}

// devHolding returns device memory of the fake device holding n random
// bytes from seed, and those bytes.
func (e *env) devHolding(n int, seed uint64) (cuda.DevicePtr, []byte) {
	e.t.Helper()
	src := randomBytes(n, seed)
	dev := e.d.alloc(n)
	e.setDev(dev, src)
	return dev, src
}

// chunkedOnly is the default tuning with the cooperative mode off: every
// staged transfer runs chunked.
func chunkedOnly() tuning {
	t := defaultTuning()
	t.coopShare = [2]int{}
	return t
}

// samplePeak calls read in a loop on another goroutine until the returned
// stop is called, which returns the highest value read and how many reads
// there were.
func samplePeak(read func() int64) (stop func() (peak, samples int64)) {
	quit := make(chan struct{})
	var peak, n int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-quit:
				return
			default:
			}
			peak = max(peak, read())
			n++
		}
	})
	return func() (int64, int64) {
		close(quit)
		wg.Wait()
		return peak, n
	}
}

// closeDuringRoundTrips closes e's copier after wait while goroutines
// goroutines run round trips of n bytes on it (roundTripsUntilClosed;
// goroutine g's bytes from seed+g), and returns once they have all ended:
// the tests of Close racing transfers.
func (e *env) closeDuringRoundTrips(goroutines, n int, seed uint64, wait time.Duration) {
	var wg sync.WaitGroup
	for g := range goroutines {
		dev, src := e.devHolding(n, seed+uint64(g))
		wg.Go(func() { e.roundTripsUntilClosed(g, dev, src) })
	}
	time.Sleep(wait)
	if err := e.c.Close(); err != nil {
		e.t.Fatal(err)
	}
	wg.Wait()
}

// roundTripsUntilClosed runs round trips of src through dev on e's copier,
// device to host (checked) then host to device, until a transfer returns
// ErrClosed; any other error or a wrong byte is reported as goroutine g's.
func (e *env) roundTripsUntilClosed(g int, dev cuda.DevicePtr, src []byte) {
	for {
		back := make([]byte, len(src))
		err := e.c.FromDevice(context.Background(), back, dev)
		if errors.Is(err, ErrClosed) {
			return
		}
		if err != nil {
			e.t.Errorf("goroutine %d: device to host: %v", g, err)
			return
		}
		if !bytes.Equal(back, src) {
			e.t.Errorf("goroutine %d: device to host bytes differ", g)
			return
		}
		if err := e.c.ToDevice(context.Background(), dev, src); errors.Is(err, ErrClosed) {
			return
		} else if err != nil {
			e.t.Errorf("goroutine %d: host to device: %v", g, err)
			return
		}
	}
}
