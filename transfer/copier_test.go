package transfer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
)

func sizesFor(chunk int) []int {
	return []int{1, 2, chunk - 1, chunk, chunk + 1, 3*chunk + 5, 64*chunk + 7}
}

// TestRoundTrip copies random data both ways, byte for byte, for sizes
// around the chunk size, staged and with the default direct threshold.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, direct := range []int{-1, 0} {
		for _, streams := range []int{2, 4} {
			t.Run(fmt.Sprintf("direct=%d/streams=%d", direct, streams), func(t *testing.T) {
				e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Streams: streams, DirectBelow: direct, Lanes: 4})
				for i, n := range sizesFor(testChunk) {
					src := randomBytes(n, uint64(i)+1)
					dev := e.d.alloc(n)
					if err := e.c.ToDevice(ctx, dev, src); err != nil {
						t.Fatalf("%d bytes: ToDevice: %v", n, err)
					}
					sameBytes(t, fmt.Sprintf("%d bytes on the device", n), e.devBytes(dev, n), src)
					dst := randomBytes(n, uint64(i)+100)
					want := randomBytes(n, uint64(i)+200)
					e.setDev(dev, want)
					if err := e.c.FromDevice(ctx, dst, dev); err != nil {
						t.Fatalf("%d bytes: FromDevice: %v", n, err)
					}
					sameBytes(t, fmt.Sprintf("%d bytes back", n), dst, want)
				}
				st := e.c.Stats()
				if direct < 0 && (st.ToDevice.Direct.Transfers != 0 || st.ToDevice.Staged.Transfers != uint64(len(sizesFor(testChunk)))) {
					t.Errorf("DirectBelow < 0 but paths %+v", st.ToDevice)
				}
				if st.Chunks == 0 || st.PeakStaging > st.WindowBytes {
					t.Errorf("stats %+v", st)
				}
			})
		}
	}
}

func TestZeroLength(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.c.ToDevice(context.Background(), 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.c.FromDevice(context.Background(), []byte{}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.c.ToDeviceAsync(context.Background(), 0, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := e.d.syncCopies.Load() + e.d.asyncCopies.Load(); n != 0 {
		t.Fatalf("%d device copies for nothing", n)
	}
}

// TestChunks checks that a staged copy issues each of its chunks once, in
// chunks of ChunkSize (the last one shorter), on the direction's streams
// only, with several lanes at once.
func TestChunks(t *testing.T) {
	for _, dir := range []Direction{HostToDevice, DeviceToHost} {
		t.Run(dir.String(), func(t *testing.T) {
			e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 4 * testChunk, Streams: 4, DirectBelow: -1, Lanes: 3})
			e.d.latency.Store(int64(50 * time.Microsecond))
			const n = 10*testChunk + 3
			host := randomBytes(n, 9)
			dev := e.d.alloc(n)
			var err error
			if dir == HostToDevice {
				err = e.c.ToDevice(context.Background(), dev, host)
				sameBytes(t, "device", e.devBytes(dev, n), host)
			} else {
				want := randomBytes(n, 10)
				e.setDev(dev, want)
				err = e.c.FromDevice(context.Background(), host, dev)
				sameBytes(t, "host", host, want)
			}
			if err != nil {
				t.Fatal(err)
			}
			log := e.d.copies()
			if len(log) != 11 {
				t.Fatalf("%d copies for 11 chunks", len(log))
			}
			seen := map[int]bool{}
			streams := map[int]bool{}
			for _, cp := range log {
				off := int(cp.dev - dev)
				if off%testChunk != 0 || seen[off] || cp.dir != dir {
					t.Fatalf("unexpected copy %+v (offset %d)", cp, off)
				}
				if want := min(testChunk, n-off); cp.n != want {
					t.Fatalf("chunk at %d has %d bytes, want %d", off, cp.n, want)
				}
				seen[off] = true
				streams[cp.stream] = true
			}
			if len(streams) != 2 {
				t.Fatalf("%v chunks used %d streams, want the 2 of the direction", dir, len(streams))
			}
		})
	}
}

// TestPaths checks the choice of path: direct below DirectBelow, staged
// above, pinned for pool memory (detected, or given as a Buffer).
func TestPaths(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{ChunkSize: testChunk, DirectBelow: 1000})
	dev := e.d.alloc(1 << 20)
	small := randomBytes(999, 1)
	if p := e.c.PathOf(small); p != PathDirect {
		t.Fatalf("999 bytes: %v", p)
	}
	if err := e.c.ToDevice(ctx, dev, small); err != nil {
		t.Fatal(err)
	}
	if s, a := e.d.syncCopies.Load(), e.d.asyncCopies.Load(); s != 1 || a != 0 {
		t.Fatalf("direct copy made %d sync and %d async copies", s, a)
	}
	sameBytes(t, "direct", e.devBytes(dev, 999), small)
	if err := e.c.FromDevice(ctx, make([]byte, 999), dev); err != nil {
		t.Fatal(err)
	}
	big := randomBytes(1000, 2)
	if p := e.c.PathOf(big); p != PathStaged {
		t.Fatalf("1000 bytes: %v", p)
	}
	if err := e.c.ToDevice(ctx, dev, big); err != nil {
		t.Fatal(err)
	}
	buf, err := e.pool.Get(ctx, 3*testChunk+1)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	copy(buf.Bytes(), randomBytes(buf.Len(), 3))
	if p := e.c.PathOf(buf.Bytes()); p != PathPinned {
		t.Fatalf("pool buffer: %v", p)
	}
	if err := e.c.ToDevice(ctx, dev, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := e.c.ToDeviceBuffer(ctx, dev, buf); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "pinned", e.devBytes(dev, buf.Len()), buf.Bytes())
	want := randomBytes(buf.Len(), 4)
	e.setDev(dev, want)
	if err := e.c.FromDeviceBuffer(ctx, buf, dev); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "pinned back", buf.Bytes(), want)
	if e.d.maxAsyncLen.Load() != int64(buf.Len()) {
		t.Fatalf("pinned copy was split: largest async copy %d bytes", e.d.maxAsyncLen.Load())
	}
	st := e.c.Stats()
	if st.ToDevice.Direct.Transfers != 1 || st.FromDevice.Direct.Transfers != 1 || st.ToDevice.Staged.Transfers != 1 ||
		st.ToDevice.Pinned.Transfers != 2 || st.FromDevice.Pinned.Transfers != 1 || st.ToDevice.Pinned.Bytes != int64(2*buf.Len()) {
		t.Fatalf("stats %+v", st)
	}
	if st.Last.Direction != DeviceToHost || st.Last.Path != PathPinned || st.Last.Bytes != int64(buf.Len()) {
		t.Fatalf("last %+v", st.Last)
	}
	dead, err := e.pool.Get(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	dead.Release()
	for _, b := range []pinpool.Buffer{dead, {}} {
		if err := e.c.ToDeviceBuffer(ctx, dev, b); !errors.Is(err, pinpool.ErrReleased) {
			t.Fatalf("dead buffer: %v", err)
		}
	}
}

func TestOptions(t *testing.T) {
	o, err := Options{}.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Streams != 2 || o.ChunkSize != 2<<20 || o.WindowBytes != 32<<20 || o.Lanes < 1 || o.Lanes > 8 ||
		o.DirectBelow != 1<<20 || o.RegisterChunk != 64<<30 || o.Slots() != 16 || o.LaneSpin != DefaultLaneSpin {
		t.Fatalf("defaults %+v", o)
	}
	if again, err := o.Defaults(); err != nil || again != o {
		t.Fatalf("Defaults of the defaults: %+v, %v", again, err)
	}
	for _, bad := range []Options{{Streams: 1}, {Streams: -2}, {ChunkSize: -1}, {ChunkSize: 1 << 20, WindowBytes: 1 << 19}, {Lanes: -1}, {RegisterChunk: -1}} {
		if _, err := bad.Defaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := newCopier(nil, newFakeDevice(), Options{}, defaultTuning()); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("nil pool: %v", err)
	}
	if _, err := New(nil, nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("nil context: %v", err)
	}
	if p, d := PathRegistered.String(), DeviceToHost.String(); p != "registered" || d != "D2H" {
		t.Errorf("%s %s", p, d)
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{ChunkSize: testChunk, DirectBelow: -1})
	dev := e.d.alloc(1 << 20)
	e.d.latency.Store(int64(200e3))
	tr := e.c.ToDeviceAsync(ctx, dev, randomBytes(1<<20, 1))
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if done, err := tr.Done(); !done || err != nil {
		t.Fatalf("Close did not wait for the transfer: %v %v", done, err)
	}
	if err := e.c.ToDevice(ctx, dev, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := e.c.FromDeviceAsync(ctx, []byte{1}, dev).Wait(); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := e.c.Register(make([]byte, 10)); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := e.c.Close(); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	_ = e.c.Stats()
}

// TestNilContext checks that a nil context means no cancellation, as it
// does for pinpool.Pool.Get, on every path, sync and async.
func TestNilContext(t *testing.T) {
	e := newEnv(t, Options{ChunkSize: testChunk, DirectBelow: 4096})
	for _, n := range []int{100, 3 * testChunk, 40 * testChunk} { // direct, cooperative, chunked
		src := randomBytes(n, uint64(n))
		dev := e.d.alloc(n)
		//lint:ignore SA1012 the test checks that a nil context works
		if err := e.c.ToDevice(nil, dev, src); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		back := make([]byte, n)
		//lint:ignore SA1012 the test checks that a nil context works
		if err := e.c.FromDeviceAsync(nil, back, dev).Wait(); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		sameBytes(t, "round trip", back, src)
	}
}
