package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
)

// Sources and sinks that break their contracts (issue 30): every test here
// runs on the fake device, and on the GPU when there is one.

// rig is a copier over the fake device or the GPU, with what a test needs
// of device memory.
type rig struct {
	c     *Copier
	pool  *pinpool.Pool
	alloc func(n int) cuda.DevicePtr
	get   func(p cuda.DevicePtr, n int) []byte
	set   func(p cuda.DevicePtr, b []byte)
}

// onDevices runs f on a rig over the fake device, then over the GPU (which
// skips without one), each with a copier of opt.
func onDevices(t *testing.T, opt Options, f func(t *testing.T, r *rig)) {
	t.Run("fake", func(t *testing.T) {
		e := newEnv(t, opt)
		f(t, &rig{c: e.c, pool: e.pool, alloc: e.d.alloc, get: e.devBytes, set: e.setDev})
	})
	t.Run("gpu", func(t *testing.T) {
		g := newGPU(t, cudahost.Options{})
		r := &rig{c: g.copier(t, opt), pool: g.pool}
		r.alloc = func(n int) cuda.DevicePtr { return g.devMem(t, n).Ptr() }
		r.get = func(p cuda.DevicePtr, n int) []byte {
			b := make([]byte, n)
			if err := g.ctx.CopyDtoH(b, p); err != nil {
				t.Fatal(err)
			}
			return b
		}
		r.set = func(p cuda.DevicePtr, b []byte) {
			if err := g.ctx.CopyHtoD(p, b); err != nil {
				t.Fatal(err)
			}
		}
		f(t, r)
	})
}

// closeAndCheck closes the copier and checks that the pool has no byte in
// use or pending (bounded wait: a download's staging may come back a
// moment after it returned).
func (r *rig) closeAndCheck(t *testing.T) {
	t.Helper()
	if err := r.c.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("Close: %v", err)
	}
	var st pinpool.Stats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if st = r.pool.Stats(); st.BytesInUse == 0 && st.BytesPending == 0 || time.Now().After(deadline) {
			break
		}
	}
	if st.BytesInUse != 0 || st.BytesPending != 0 {
		t.Errorf("after Close the pool holds %d bytes in use, %d pending", st.BytesInUse, st.BytesPending)
	}
}

// guarded is device memory of n bytes with guard bytes of poison on both
// sides, so that a test can see a byte written outside [dst, dst+n).
type guarded struct {
	r     *rig
	base  cuda.DevicePtr
	dst   cuda.DevicePtr
	n     int
	inner []byte // what [dst, dst+n) held before
}

const guardBytes = 256 << 10

func (r *rig) guarded(n int, seed uint64) *guarded {
	base := r.alloc(n + 2*guardBytes)
	all := bytes.Repeat([]byte{0xA5}, n+2*guardBytes)
	inner := randomBytes(n, seed)
	copy(all[guardBytes:], inner)
	r.set(base, all)
	return &guarded{r: r, base: base, dst: base + guardBytes, n: n, inner: inner}
}

// check fails t if a byte of either guard changed, or if [dst, dst+n)
// does not hold want in its first len(want) bytes and what it held before
// in the rest.
func (g *guarded) check(t *testing.T, want []byte) { g.checkUpTo(t, want, true) }

// checkUpTo is check, with the rest of the range unchecked unless rest:
// the lanes of a file transfer may complete pieces after one that failed.
func (g *guarded) checkUpTo(t *testing.T, want []byte, rest bool) {
	t.Helper()
	all := g.r.get(g.base, g.n+2*guardBytes)
	for i, b := range all[:guardBytes] {
		if b != 0xA5 {
			t.Fatalf("the device byte %d before dst was written", guardBytes-i)
		}
	}
	for i, b := range all[guardBytes+g.n:] {
		if b != 0xA5 {
			t.Fatalf("the device byte %d after dst+n was written", i)
		}
	}
	got := all[guardBytes : guardBytes+g.n]
	sameBytes(t, "device range, the part that arrived", got[:len(want)], want)
	if rest {
		sameBytes(t, "device range, the part that did not", got[len(want):], g.inner[len(want):])
	}
}

// overReader gives good bytes for its first good bytes, then reports
// claim bytes for a read (more than asked, or negative).
type overReader struct {
	data  []byte
	good  int
	claim func(asked int) int
}

func (o *overReader) Read(b []byte) (int, error) {
	if o.good > 0 {
		k := copy(b[:min(len(b), o.good)], o.data)
		o.data, o.good = o.data[k:], o.good-k
		return k, nil
	}
	copy(b, o.data)
	return o.claim(len(b)), nil
}

// TestStreamOverReportingReader: a reader that claims more bytes than it
// was given, or a negative count, ends ToDeviceFrom with ErrContract, the
// count is what it truly gave before, and no device byte outside
// [dst, dst+n) nor past the good bytes is written.
func TestStreamOverReportingReader(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 1 << 20
		good := 3*streamOpts.ChunkSize + 1000 // the bad read is in the middle of a piece
		data := randomBytes(n+guardBytes, 7)
		for name, claim := range map[string]func(int) int{
			"more":     func(asked int) int { return asked + 4096 },
			"huge":     func(int) int { return math.MaxInt32 },
			"negative": func(int) int { return -5 },
		} {
			t.Run(name, func(t *testing.T) {
				g := r.guarded(n, 1)
				got, err := r.c.ToDeviceFrom(context.Background(), g.dst, &overReader{data: data, good: good, claim: claim}, n)
				if !errors.Is(err, ErrContract) || got != int64(good) {
					t.Fatalf("%d bytes, %v; want %d and ErrContract", got, err, good)
				}
				g.check(t, data[:good])
			})
		}
		r.closeAndCheck(t)
	})
}

// TestStreamOverReportingReadAt: the same for a ReaderAt of a file.
func TestStreamOverReportingReadAt(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 1 << 20
		data := randomBytes(n, 8)
		bad := int64(2 * streamOpts.ChunkSize)
		for name, claim := range map[string]func(int) int{
			"more":     func(asked int) int { return asked + 4096 },
			"negative": func(int) int { return -1 },
		} {
			t.Run(name, func(t *testing.T) {
				g := r.guarded(n, 2)
				f := readerAtFunc(func(b []byte, off int64) (int, error) {
					k := copy(b, data[off:])
					if off == bad {
						return claim(len(b)), nil
					}
					return k, nil
				})
				got, err := r.c.ToDeviceFromFile(context.Background(), g.dst, f, 0, n)
				if !errors.Is(err, ErrContract) || got > bad {
					t.Fatalf("%d bytes, %v; want at most %d and ErrContract", got, err, bad)
				}
				g.checkUpTo(t, data[:got], false)
			})
		}
		r.closeAndCheck(t)
	})
}

// TestStreamEmptyReads: a reader that returns (0, nil) forever ends
// ToDeviceFrom (io.ErrNoProgress), and one that returns (0, nil) while
// its context has ended ends it with the context's error, at once.
func TestStreamEmptyReads(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		dev := r.alloc(1 << 20)
		var reads atomic.Int64
		empty := readerFunc(func([]byte) (int, error) { reads.Add(1); return 0, nil })
		got, err := r.c.ToDeviceFrom(context.Background(), dev, empty, 1<<20)
		if !errors.Is(err, io.ErrNoProgress) || !errors.Is(err, ErrContract) || got != 0 {
			t.Fatalf("%d bytes, %v; want 0 and io.ErrNoProgress", got, err)
		}
		if reads.Load() > emptyReads {
			t.Fatalf("%d reads, more than %d", reads.Load(), emptyReads)
		}
		ctx, cancel := context.WithCancel(context.Background())
		slowEmpty := readerFunc(func([]byte) (int, error) { cancel(); return 0, nil })
		if got, err := r.c.ToDeviceFrom(ctx, dev, slowEmpty, 1<<20); !errors.Is(err, context.Canceled) || got != 0 {
			t.Fatalf("cancelled: %d bytes, %v; want 0 and context.Canceled", got, err)
		}
		emptyAt := readerAtFunc(func([]byte, int64) (int, error) { return 0, nil })
		if got, err := r.c.ToDeviceFromFile(context.Background(), dev, emptyAt, 0, 1<<20); !errors.Is(err, io.ErrNoProgress) || got != 0 {
			t.Fatalf("ReadAt: %d bytes, %v; want 0 and io.ErrNoProgress", got, err)
		}
		r.closeAndCheck(t)
	})
}

// TestStreamShortWrites: a Writer or WriterAt that takes fewer bytes than
// given with no error, or claims more, ends the transfer with ErrContract
// and the count of what it took.
func TestStreamShortWrites(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 1<<20 + 9
		dev := r.alloc(n)
		data := randomBytes(n, 9)
		r.set(dev, data)
		chunk := streamOpts.ChunkSize
		var took bytes.Buffer
		short := writerFunc(func(b []byte) (int, error) {
			if took.Len() >= 2*chunk {
				k := len(b) / 2
				took.Write(b[:k])
				return k, nil
			}
			return took.Write(b)
		})
		got, err := r.c.FromDeviceTo(context.Background(), short, dev, n)
		if !errors.Is(err, ErrContract) || !errors.Is(err, io.ErrShortWrite) || got != int64(took.Len()) || got != int64(2*chunk+chunk/2) {
			t.Fatalf("short Write: %d bytes (the writer took %d), %v", got, took.Len(), err)
		}
		sameBytes(t, "what the writer took", took.Bytes(), data[:took.Len()])
		over := writerFunc(func(b []byte) (int, error) { return len(b) + 1, nil })
		if got, err := r.c.FromDeviceTo(context.Background(), over, dev, n); !errors.Is(err, ErrContract) || got != 0 {
			t.Fatalf("over-reporting Write: %d bytes, %v", got, err)
		}
		var written atomic.Int64
		shortAt := writerAtFunc(func(b []byte, off int64) (int, error) {
			if off == 0 {
				written.Add(100)
				return 100, nil
			}
			written.Add(int64(len(b)))
			return len(b), nil
		})
		got, err = r.c.FromDeviceToFile(context.Background(), shortAt, 0, dev, n)
		if !errors.Is(err, ErrContract) || !errors.Is(err, io.ErrShortWrite) || got != 100 {
			t.Fatalf("short WriteAt: %d bytes, %v; want 100 and ErrContract", got, err)
		}
		overAt := writerAtFunc(func(b []byte, off int64) (int, error) { return len(b) * 2, nil })
		if got, err := r.c.FromDeviceToFile(context.Background(), overAt, 0, dev, n); !errors.Is(err, ErrContract) || got != 0 {
			t.Fatalf("over-reporting WriteAt: %d bytes, %v", got, err)
		}
		r.closeAndCheck(t)
	})
}

// TestStreamCancelledWriterCount: a FromDeviceTo cancelled while it runs
// reports exactly the bytes the writer took.
func TestStreamCancelledWriterCount(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 4 << 20
		dev := r.alloc(n)
		for _, after := range []int{1, 3, 7, 20} {
			ctx, cancel := context.WithCancel(context.Background())
			var took int64
			calls := 0
			w := writerFunc(func(b []byte) (int, error) {
				took += int64(len(b))
				if calls++; calls == after {
					cancel()
					// Give the copier time to see the cancellation while
					// this write is still under way: the count must
					// include it all the same.
					time.Sleep(20 * time.Millisecond)
				}
				return len(b), nil
			})
			got, err := r.c.FromDeviceTo(ctx, w, dev, n)
			cancel()
			if got != took {
				t.Fatalf("cancelled after %d writes: reported %d bytes, the writer took %d (%v)", after, got, took, err)
			}
			if got < n && !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled after %d writes: %d bytes, %v", after, got, err)
			}
		}
		r.closeAndCheck(t)
	})
}

// TestStreamHugeLengths: lengths and offsets that overflow or run past the
// device allocation or the file are refused before anything moves or is
// allocated.
func TestStreamHugeLengths(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		// 2 MiB: the driver may round an allocation up to its granule,
		// not past it.
		dev := r.alloc(2 << 20)
		f := writeTemp(t, randomBytes(1<<20, 5))
		ctx := context.Background()
		endless := readerFunc(func(b []byte) (int, error) { return len(b), nil })
		for _, n := range []int64{2<<20 + 1, 1 << 50, 1 << 62, math.MaxInt64} {
			if got, err := r.c.ToDeviceFrom(ctx, dev, endless, n); !errors.Is(err, ErrInvalidRange) || got != 0 {
				t.Errorf("ToDeviceFrom of %d bytes: %d, %v; want ErrInvalidRange", n, got, err)
			}
			if got, err := r.c.FromDeviceTo(ctx, io.Discard, dev, n); !errors.Is(err, ErrInvalidRange) || got != 0 {
				t.Errorf("FromDeviceTo of %d bytes: %d, %v; want ErrInvalidRange", n, got, err)
			}
			if got, err := r.c.ToDeviceFromFile(ctx, dev, f, 0, n); !errors.Is(err, ErrInvalidRange) || got != 0 {
				t.Errorf("ToDeviceFromFile of %d bytes: %d, %v; want ErrInvalidRange", n, got, err)
			}
		}
		for _, off := range []int64{1<<20 - 1, 1 << 50, 1 << 62, math.MaxInt64 - 1} {
			if got, err := r.c.ToDeviceFromFile(ctx, dev, f, off, 2); !errors.Is(err, ErrInvalidRange) || !errors.Is(err, io.ErrUnexpectedEOF) || got != 0 {
				t.Errorf("ToDeviceFromFile at %d: %d, %v; want ErrInvalidRange", off, got, err)
			}
			if got, err := r.c.ToDeviceFromFile(ctx, dev, bytes.NewReader(make([]byte, 10)), off, 2); !errors.Is(err, ErrInvalidRange) || got != 0 {
				t.Errorf("ToDeviceFromFile of a bytes.Reader at %d: %d, %v; want ErrInvalidRange", off, got, err)
			}
		}
		out := writeTemp(t, nil)
		for _, off := range []int64{math.MaxInt64 - 10, math.MaxInt64} {
			if got, err := r.c.FromDeviceToFile(ctx, out, off, dev, 1<<20); !errors.Is(err, ErrInvalidRange) || got != 0 {
				t.Errorf("FromDeviceToFile at %d: %d, %v; want ErrInvalidRange", off, got, err)
			}
		}
		if got, err := r.c.ToDeviceFrom(ctx, cuda.DevicePtr(math.MaxUint64-10), endless, 100); !errors.Is(err, ErrInvalidRange) || got != 0 {
			t.Errorf("ToDeviceFrom at the top of the address space: %d, %v; want ErrInvalidRange", got, err)
		}
		if st := r.pool.Stats(); st.BytesHeld != 0 {
			t.Errorf("the refused transfers made the pool grow to %d bytes", st.BytesHeld)
		}
		r.closeAndCheck(t)
	})
}

// TestFileModes: a file is read and written only through the caller's
// descriptor and as it allows: a write into a file open read-only, or a
// read of one open write-only, is refused with ErrFileMode and leaves the
// file as it was.
func TestFileModes(t *testing.T) {
	dirs := map[string]string{"tempdir": t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "pinpool-modes")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			dirs["shm"] = shm // tmpfs, where the issue saw it too
		}
	}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) { fileModesIn(t, dir) })
	}
}

func fileModesIn(t *testing.T, dir string) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 1<<20 + 4096
		dev := r.alloc(n)
		r.set(dev, randomBytes(n, 6))
		path := filepath.Join(dir, "f")
		old := randomBytes(4096, 4)
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
		ro, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		got, err := r.c.FromDeviceToFile(context.Background(), ro, 0, dev, n)
		if !errors.Is(err, ErrFileMode) || got != 0 {
			t.Fatalf("into a read-only file: %d bytes, %v; want 0 and ErrFileMode", got, err)
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
			t.Fatalf("the read-only file changed: %d bytes now", len(now))
		}
		wo, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer wo.Close()
		if got, err := r.c.ToDeviceFromFile(context.Background(), dev, wo, 0, 4096); !errors.Is(err, ErrFileMode) || got != 0 {
			t.Fatalf("from a write-only file: %d bytes, %v; want 0 and ErrFileMode", got, err)
		}
		r.closeAndCheck(t)
	})
}

// TestStreamPanicsHoldNothing: a source or sink that panics mid-way ends
// the transfer with ErrCallbackPanic, the count of what arrived before,
// no byte outside the range, and the pool holding nothing after Close.
func TestStreamPanicsHoldNothing(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 1 << 20
		data := randomBytes(n, 10)
		good := 2 * streamOpts.ChunkSize
		g := r.guarded(n, 3)
		src := io.MultiReader(bytes.NewReader(data[:good]), panicky{})
		got, err := r.c.ToDeviceFrom(context.Background(), g.dst, src, n)
		if !errors.Is(err, ErrCallbackPanic) || got != int64(good) {
			t.Fatalf("%d bytes, %v; want %d and ErrCallbackPanic", got, err, good)
		}
		g.check(t, data[:good])
		calls := 0
		w := writerFunc(func(b []byte) (int, error) {
			if calls++; calls == 3 {
				panic("sink boom")
			}
			return len(b), nil
		})
		if got, err := r.c.FromDeviceTo(context.Background(), w, g.dst, n); !errors.Is(err, ErrCallbackPanic) || got != int64(2*streamOpts.ChunkSize) {
			t.Fatalf("Write panics: %d bytes, %v", got, err)
		}
		r.closeAndCheck(t)
	})
}

// TestStreamCountsOneTransfer: a stream or file transfer is one transfer
// of all its bytes in Stats, under PathStream, and Stats.Last is the whole
// transfer, not its last piece (issue 31); its pieces count as the staging
// chunks they are (they were not counted).
func TestStreamCountsOneTransfer(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 1<<20 + 17
		data := randomBytes(n, 12)
		dev := r.alloc(n)
		f := writeTemp(t, data)
		ctx := context.Background()
		for i, run := range []struct {
			dir Direction
			do  func() (int64, error)
		}{
			{HostToDevice, func() (int64, error) { return r.c.ToDeviceFrom(ctx, dev, bytes.NewReader(data), n) }},
			{DeviceToHost, func() (int64, error) { return r.c.FromDeviceTo(ctx, io.Discard, dev, n) }},
			{HostToDevice, func() (int64, error) { return r.c.ToDeviceFromFile(ctx, dev, f, 0, n) }},
			{DeviceToHost, func() (int64, error) { return r.c.FromDeviceToFile(ctx, f, 0, dev, n) }},
		} {
			before := r.c.Stats()
			if got, err := run.do(); err != nil || got != n {
				t.Fatalf("transfer %d: %d bytes, %v", i, got, err)
			}
			st := r.c.Stats()
			d, d0 := st.ToDevice, before.ToDevice
			if run.dir == DeviceToHost {
				d, d0 = st.FromDevice, before.FromDevice
			}
			if d.Stream.Transfers-d0.Stream.Transfers != 1 || d.Stream.Bytes-d0.Stream.Bytes != n || d.Stream.Time <= d0.Stream.Time {
				t.Fatalf("transfer %d: the stream path counted %d transfers of %d bytes in %v", i, d.Stream.Transfers-d0.Stream.Transfers, d.Stream.Bytes-d0.Stream.Bytes, d.Stream.Time-d0.Stream.Time)
			}
			if tot, tot0 := d.Total(), d0.Total(); tot.Transfers-tot0.Transfers != 1 || tot.Bytes-tot0.Bytes != n {
				t.Fatalf("transfer %d: %d transfers of %d bytes in all, want 1 of %d", i, tot.Transfers-tot0.Transfers, tot.Bytes-tot0.Bytes, n)
			}
			if l := st.Last; l.Path != PathStream || l.Bytes != n || l.Direction != run.dir || l.Time <= 0 || l.GBps() <= 0 {
				t.Fatalf("transfer %d: Last is %+v, want the whole transfer", i, l)
			}
			if pieces := uint64(newPieces(0, n, streamOpts.ChunkSize).count); st.Chunks-before.Chunks != pieces {
				t.Fatalf("transfer %d: %d staging chunks counted, want its %d pieces", i, st.Chunks-before.Chunks, pieces)
			}
		}
		r.closeAndCheck(t)
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

type writerAtFunc func([]byte, int64) (int, error)

func (f writerAtFunc) WriteAt(b []byte, off int64) (int, error) { return f(b, off) }

// TestProgressCount: the count is the unbroken prefix of complete pieces,
// whatever order they complete in, and ends in a piece that arrived in
// part, even when pieces after it completed first.
func TestProgressCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(p *progress)
		want int64
	}{
		{"in order", func(p *progress) { p.add(0, 10, false); p.add(1, 10, false); p.add(2, 5, false) }, 25},
		{"out of order", func(p *progress) { p.add(2, 5, false); p.add(1, 10, false); p.add(0, 10, false) }, 25},
		{"gap", func(p *progress) { p.add(0, 10, false); p.add(2, 10, false) }, 10},
		{"partial first, after the rest", func(p *progress) { p.add(1, 10, false); p.add(2, 10, false); p.add(0, 3, true) }, 3},
		{"partial in the middle", func(p *progress) { p.add(0, 10, false); p.add(2, 10, false); p.add(1, 4, true); p.add(3, 10, false) }, 14},
		{"nothing", func(p *progress) {}, 0},
	} {
		p := newProgress()
		tc.do(p)
		if got := p.arrived(); got != tc.want {
			t.Errorf("%s: %d bytes arrived, want %d", tc.name, got, tc.want)
		}
	}
}

// TestStreamCloseEndsSlowReader: Close ends a stream whose reader would
// take long to give all its bytes, at the next piece, with ErrClosed and
// the count of what arrived, instead of waiting for the reader.
func TestStreamCloseEndsSlowReader(t *testing.T) {
	onDevices(t, streamOpts, func(t *testing.T, r *rig) {
		const n = 64 << 20
		dev := r.alloc(n)
		var read atomic.Int64
		slow := readerFunc(func(b []byte) (int, error) {
			time.Sleep(100 * time.Microsecond)
			k := min(len(b), 4096)
			read.Add(int64(k))
			return k, nil
		})
		type result struct {
			n   int64
			err error
		}
		done := make(chan result, 1)
		go func() {
			k, err := r.c.ToDeviceFrom(context.Background(), dev, slow, n)
			done <- result{k, err}
		}()
		for read.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := r.c.Close(); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if !errors.Is(res.err, ErrClosed) || res.n >= n || res.n > read.Load() {
			t.Fatalf("%d bytes (%d read), %v; want fewer and ErrClosed", res.n, read.Load(), res.err)
		}
		r.closeAndCheck(t)
	})
}
