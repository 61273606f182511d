package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/pinpool/pinpool/cuda"
	"golang.org/x/sys/unix"
)

// streamOpts are small pieces, so that the tests cross many of them.
var streamOpts = Options{ChunkSize: 64 << 10, WindowBytes: 256 << 10}

func writeTemp(t testing.TB, data []byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// dropCache drops [off, off+n) of f (n 0: to its end) from the page cache,
// synced first so that its pages are clean, so that the next read comes
// from the disk; it skips tb where the kernel will not.
func dropCache(tb testing.TB, f *os.File, off, n int64) {
	tb.Helper()
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED); err != nil {
		tb.Skipf("cannot drop the file from the page cache: %v", err)
	}
}

// TestSplitPieces checks the piece plan: contiguous, covering the range,
// cut at multiples of the chunk in file offsets.
func TestSplitPieces(t *testing.T) {
	for _, tc := range []struct {
		off, n int64
		chunk  int
		want   int
	}{
		{0, 1, 4096, 1}, {0, 4096, 4096, 1}, {0, 4097, 4096, 2}, {1, 4096, 4096, 2},
		{4095, 2, 4096, 2}, {100, 10 << 20, 2 << 20, 6}, {2 << 20, 4 << 20, 2 << 20, 2},
	} {
		ps := splitPieces(tc.off, tc.n, tc.chunk)
		if len(ps) != tc.want {
			t.Errorf("splitPieces(%d, %d, %d): %d pieces, want %d: %v", tc.off, tc.n, tc.chunk, len(ps), tc.want, ps)
		}
		checkPieces(t, ps, tc.off, tc.n, tc.chunk)
	}
}

func checkPieces(t *testing.T, ps []piece, off, n int64, chunk int) {
	t.Helper()
	var pos int64
	for _, p := range ps {
		if p.pos != pos || p.off != off+pos || p.n <= 0 || p.n > chunk {
			t.Fatalf("off %d n %d chunk %d: bad piece %+v at %d", off, n, chunk, p, pos)
		}
		if p.off/int64(chunk) != (p.off+int64(p.n)-1)/int64(chunk) {
			t.Fatalf("piece %+v crosses a multiple of the chunk %d", p, chunk)
		}
		if chunk%directAlign == 0 {
			start := p.off &^ (directAlign - 1)
			end := (p.off + int64(p.n) + directAlign - 1) &^ (directAlign - 1)
			if end-start > int64(chunk) {
				t.Fatalf("piece %+v: its aligned span %d is more than a buffer of %d", p, end-start, chunk)
			}
		}
		pos += int64(p.n)
	}
	if pos != n {
		t.Fatalf("pieces cover %d of %d bytes", pos, n)
	}
}

func FuzzSplitPieces(f *testing.F) {
	f.Add(int64(0), int64(1), 4096)
	f.Add(int64(4095), int64(10<<20), 2<<20)
	f.Add(int64(1<<40), int64(3), 1000)
	f.Fuzz(func(t *testing.T, off, n int64, chunk int) {
		if off < 0 || n <= 0 || chunk <= 0 || n > 1<<24 || off > 1<<50 || n/int64(chunk) > 1<<16 {
			return
		}
		checkPieces(t, splitPieces(off, n, chunk), off, n, chunk)
	})
}

// TestToDeviceFromFile copies ranges of a file at odd offsets and lengths
// to the fake device and back to another file, byte-exact.
func TestToDeviceFromFile(t *testing.T) {
	e := newEnv(t, streamOpts)
	const size = 1<<20 + 12345
	data := randomBytes(size, 1)
	f := writeTemp(t, data)
	chunk := int64(streamOpts.ChunkSize)
	for _, r := range []struct{ off, n int64 }{
		{0, 1}, {0, 4096}, {1, 4095}, {4095, 2}, {0, chunk}, {chunk - 3, 7}, {3, 3*chunk + 5},
		{0, size}, {size - 1, 1}, {12345, size - 12345}, {size, 0},
	} {
		t.Run(fmt.Sprintf("off=%d/n=%d", r.off, r.n), func(t *testing.T) {
			dev := e.d.alloc(int(max(r.n, 1)))
			got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, r.off, r.n)
			if err != nil || got != r.n {
				t.Fatalf("ToDeviceFromFile: %d bytes, %v", got, err)
			}
			m, _ := e.d.mem(dev, int(r.n))
			if !bytes.Equal(m, data[r.off:r.off+r.n]) {
				t.Fatal("device bytes differ from the file's")
			}
			out := writeTemp(t, make([]byte, 7))
			if got, err := e.c.FromDeviceToFile(context.Background(), out, 7, dev, r.n); err != nil || got != r.n {
				t.Fatalf("FromDeviceToFile: %d bytes, %v", got, err)
			}
			back := make([]byte, r.n)
			if _, err := out.ReadAt(back, 7); err != nil && r.n > 0 {
				t.Fatal(err)
			}
			if !bytes.Equal(back, data[r.off:r.off+r.n]) {
				t.Fatal("file written from the device differs")
			}
		})
	}
	e.checkPool(true)
}

// TestFileDirectAndCached reads a file that is not in the page cache (it
// asks the kernel to drop it) and one that is, with each probe of the page
// cache, and checks which way each piece went: O_DIRECT for the first
// where the file system has it, the page cache for the second.
func TestFileDirectAndCached(t *testing.T) {
	data := randomBytes(4<<20+100, 2)
	f := writeTemp(t, data)
	for _, way := range []int32{probeCachestat, probeMincore} {
		t.Run(fmt.Sprint("probe ", way), func(t *testing.T) {
			dropCache(t, f, 0, 0)
			sourceWays.firstWay = way
			defer func() { sourceWays.firstWay = probeCachestat }()
			s := openSource(f)
			defer s.close()
			if s.direct == nil {
				t.Skipf("O_DIRECT not available in %s: pieces go through the page cache", filepath.Dir(f.Name()))
			}
			buf := make([]byte, 2<<20+directAlign) // a page-aligned window of it below
			al := buf[directAlign-int(uintptr(unsafePointer(buf))%directAlign):][: 2<<20 : 2<<20]
			read := func(off int64, n int) {
				t.Helper()
				got, err := s.readAt(context.Background(), al, off, n)
				if err != nil || !bytes.Equal(got, data[off:off+int64(n)]) {
					t.Fatalf("readAt(%d, %d): %v (or bytes differ)", off, n, err)
				}
			}
			read(2<<20, 2<<20)
			read(1<<20+5, 1<<20-5) // odd start
			read(4<<20, 100)       // the tail
			if s.directed.Load() == 0 {
				t.Fatalf("a file dropped from the page cache was not read with O_DIRECT (probe now %d, cached %d)", s.probe.Load(), s.cached.Load())
			}
			// Now into the page cache, and read again: no O_DIRECT.
			if _, err := io.Copy(io.Discard, io.NewSectionReader(f, 0, int64(len(data)))); err != nil {
				t.Fatal(err)
			}
			before := s.directed.Load()
			read(0, 2<<20)
			read(4<<20, 100)
			if s.directed.Load() != before {
				t.Fatalf("a cached piece was read with O_DIRECT (%d bytes)", s.directed.Load()-before)
			}
			t.Logf("O_DIRECT %d bytes, page cache %d bytes, probe %d", s.directed.Load(), s.cached.Load(), s.probe.Load())
		})
	}
}

// TestStreamRoundTrip sends readers of every shape to the device and the
// device to a writer, byte-exact.
func TestStreamRoundTrip(t *testing.T) {
	e := newEnv(t, streamOpts)
	const n = 700<<10 + 3
	data := randomBytes(n, 3)
	for name, r := range map[string]func() io.Reader{
		"plain":   func() io.Reader { return bytes.NewReader(data) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"half":    func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		"dataerr": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
	} {
		t.Run(name, func(t *testing.T) {
			dev := e.d.alloc(n)
			if got, err := e.c.ToDeviceFrom(context.Background(), dev, r(), n); err != nil || got != n {
				t.Fatalf("ToDeviceFrom: %d, %v", got, err)
			}
			var out bytes.Buffer
			if got, err := e.c.FromDeviceTo(context.Background(), &out, dev, n); err != nil || got != n {
				t.Fatalf("FromDeviceTo: %d, %v", got, err)
			}
			if !bytes.Equal(out.Bytes(), data) {
				t.Fatal("round trip differs")
			}
		})
	}
	e.checkPool(true)
}

// TestStreamErrors ends transfers every way they can end early, and checks
// the error, the count of bytes that arrived, and that nothing is held.
func TestStreamErrors(t *testing.T) {
	e := newEnv(t, streamOpts)
	const n = 1 << 20
	data := randomBytes(n, 4)
	dev := e.d.alloc(n)
	boom := errors.New("boom")
	chunk := int64(streamOpts.ChunkSize)

	t.Run("short reader", func(t *testing.T) {
		got, err := e.c.ToDeviceFrom(context.Background(), dev, bytes.NewReader(data[:300000]), n)
		if !errors.Is(err, io.ErrUnexpectedEOF) || got != 300000 {
			t.Fatalf("%d bytes, %v; want 300000 and io.ErrUnexpectedEOF", got, err)
		}
	})
	t.Run("reader error", func(t *testing.T) {
		r := io.MultiReader(bytes.NewReader(data[:2*chunk]), iotest.ErrReader(boom))
		got, err := e.c.ToDeviceFrom(context.Background(), dev, r, n)
		if !errors.Is(err, boom) || got != 2*chunk {
			t.Fatalf("%d bytes, %v; want %d and boom", got, err, 2*chunk)
		}
	})
	t.Run("short file", func(t *testing.T) {
		f := writeTemp(t, data[:500000])
		got, err := e.c.ToDeviceFromFile(context.Background(), dev, f, 0, n)
		if !errors.Is(err, io.ErrUnexpectedEOF) || got > 500000 {
			t.Fatalf("%d bytes, %v; want at most 500000 and io.ErrUnexpectedEOF", got, err)
		}
	})
	t.Run("reader shorter than its Size", func(t *testing.T) {
		// The range was checked against a size that the reader does not keep to: the file changed.
		r := sizedReaderAt{bytes.NewReader(data[:500000]), n}
		got, err := e.c.ToDeviceFromFile(context.Background(), dev, r, 0, n)
		if !errors.Is(err, ErrFileChanged) || !errors.Is(err, io.ErrUnexpectedEOF) || got > 500000 {
			t.Fatalf("%d bytes, %v; want at most 500000, ErrFileChanged and io.ErrUnexpectedEOF", got, err)
		}
	})
	t.Run("reader of no size ends early", func(t *testing.T) {
		r := readerAtFunc(bytes.NewReader(data[:500000]).ReadAt)
		got, err := e.c.ToDeviceFromFile(context.Background(), dev, r, 0, n)
		if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrFileChanged) || got > 500000 {
			t.Fatalf("%d bytes, %v; want at most 500000 and io.ErrUnexpectedEOF alone", got, err)
		}
	})
	t.Run("file read error", func(t *testing.T) {
		got, err := e.c.ToDeviceFromFile(context.Background(), dev, failingReaderAt{data, 3 * chunk, boom}, 0, n)
		if !errors.Is(err, boom) || got > 3*chunk {
			t.Fatalf("%d bytes, %v", got, err)
		}
	})
	t.Run("writer error", func(t *testing.T) {
		w := &limitedWriter{left: 100000, err: boom}
		got, err := e.c.FromDeviceTo(context.Background(), w, dev, n)
		if !errors.Is(err, boom) || got >= 100000+chunk {
			t.Fatalf("%d bytes, %v", got, err)
		}
	})
	t.Run("writerAt error", func(t *testing.T) {
		got, err := e.c.FromDeviceToFile(context.Background(), failingWriterAt{boom}, 0, dev, n)
		if !errors.Is(err, boom) || got != 0 {
			t.Fatalf("%d bytes, %v", got, err)
		}
	})
	t.Run("cancelled mid-way", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r := &cancelAfter{r: bytes.NewReader(data), after: 3 * chunk, cancel: cancel}
		got, err := e.c.ToDeviceFrom(ctx, dev, r, n)
		if !errors.Is(err, context.Canceled) || got >= n {
			t.Fatalf("%d bytes, %v", got, err)
		}
	})
	t.Run("file cancelled mid-way", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var calls atomic.Int32
		r := readerAtFunc(func(b []byte, off int64) (int, error) {
			if calls.Add(1) == 3 {
				cancel()
			}
			return copy(b, data[off:]), nil
		})
		got, err := e.c.ToDeviceFromFile(ctx, dev, r, 0, n)
		if !errors.Is(err, context.Canceled) || got >= n {
			t.Fatalf("%d bytes, %v", got, err)
		}
	})
	t.Run("panics", func(t *testing.T) {
		for name, run := range map[string]func() (int64, error){
			"Read": func() (int64, error) {
				return e.c.ToDeviceFrom(context.TODO(), dev, io.MultiReader(bytes.NewReader(data[:chunk]), panicky{}), n)
			},
			"ReadAt":  func() (int64, error) { return e.c.ToDeviceFromFile(context.TODO(), dev, panicky{}, 0, n) },
			"Write":   func() (int64, error) { return e.c.FromDeviceTo(context.TODO(), panicky{}, dev, n) },
			"WriteAt": func() (int64, error) { return e.c.FromDeviceToFile(context.TODO(), panicky{}, 0, dev, n) },
		} {
			got, err := run()
			if !errors.Is(err, ErrCallbackPanic) || !strings.Contains(err.Error(), name) || got >= n {
				t.Errorf("%s panics: %d bytes, %v; want ErrCallbackPanic naming it", name, got, err)
			}
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, err := range []error{
			func() error { _, err := e.c.ToDeviceFrom(context.TODO(), dev, bytes.NewReader(data), -1); return err }(),
			func() error { _, err := e.c.ToDeviceFrom(context.TODO(), dev, nil, 1); return err }(),
			func() error { _, err := e.c.ToDeviceFromFile(context.TODO(), dev, nil, 0, 1); return err }(),
			func() error {
				_, err := e.c.ToDeviceFromFile(context.TODO(), dev, bytes.NewReader(data), -1, 1)
				return err
			}(),
			func() error { _, err := e.c.FromDeviceTo(context.TODO(), nil, dev, 1); return err }(),
			func() error { _, err := e.c.FromDeviceToFile(context.TODO(), nil, 0, dev, 1); return err }(),
		} {
			if !errors.Is(err, ErrInvalidRange) {
				t.Errorf("got %v, want ErrInvalidRange", err)
			}
		}
	})
	e.checkPool(true)
	t.Run("closed", func(t *testing.T) {
		e.c.Close()
		if _, err := e.c.ToDeviceFrom(context.TODO(), dev, bytes.NewReader(data), n); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
		if _, err := e.c.FromDeviceToFile(context.TODO(), failingWriterAt{boom}, 0, dev, n); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	})
}

// TestStreamCloseRaces closes the copier while file and stream transfers
// run: each ends (whole, or with ErrClosed) and nothing is held.
func TestStreamCloseRaces(t *testing.T) {
	for it := range 20 {
		e := newEnv(t, streamOpts)
		const n = 2 << 20
		data := randomBytes(n, uint64(it))
		f := writeTemp(t, data)
		var wg sync.WaitGroup
		var errs atomic.Int32
		for g := range 4 {
			wg.Go(func() {
				dev := e.d.alloc(n)
				var err error
				switch g % 4 {
				case 0:
					_, err = e.c.ToDeviceFromFile(context.TODO(), dev, f, 0, n)
				case 1:
					_, err = e.c.ToDeviceFrom(context.TODO(), dev, bytes.NewReader(data), n)
				case 2:
					_, err = e.c.FromDeviceTo(context.TODO(), io.Discard, dev, n)
				case 3:
					_, err = e.c.FromDeviceToFile(context.TODO(), f, 0, dev, n)
				}
				if err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("transfer %d: %v", g, err)
					errs.Add(1)
				}
			})
		}
		e.c.Close()
		wg.Wait()
		e.checkPool(true)
	}
}

// TestStreamWindowBound reads a large generated file through a small
// window, sampling Stats all along: the staging held never exceeds the
// copier's two windows (a file load also takes the download window's free
// slots when it has more readers than lanes, as on a host with more than
// twice as many processors as lanes: -test.cpu 16), and the pool never
// holds more than that in use.
func TestStreamWindowBound(t *testing.T) {
	opt := Options{ChunkSize: 256 << 10, WindowBytes: 1 << 20}
	e := newEnv(t, opt)
	n := int64(256 << 20)
	if testing.Short() {
		n = 32 << 20
	}
	dev := e.d.alloc(int(n))
	stop := samplePeak(func() int64 { return e.pool.Stats().BytesInUse })
	got, err := e.c.ToDeviceFromFile(context.Background(), dev, patternReaderAt{n}, 0, n)
	peakInUse, samples := stop()
	if err != nil || got != n {
		t.Fatalf("%d bytes, %v", got, err)
	}
	st := e.c.Stats()
	if bound := 2 * opt.WindowBytes; st.PeakStaging > bound || peakInUse > bound {
		t.Fatalf("staging peak %d, pool in use peak %d: more than the two windows %d", st.PeakStaging, peakInUse, bound)
	}
	m, _ := e.d.mem(dev+cuda.DevicePtr(n-8), 8)
	want := make([]byte, 8)
	patternReaderAt{n}.ReadAt(want, n-8)
	if !bytes.Equal(m, want) {
		t.Fatal("the end of the data differs")
	}
	t.Logf("%d MiB through a %d KiB window: staging peak %d KiB, %d samples", n>>20, opt.WindowBytes>>10, st.PeakStaging>>10, samples)
}

// patternReaderAt is a file of n bytes that are a function of their offset.
type patternReaderAt struct{ n int64 }

func (p patternReaderAt) ReadAt(b []byte, off int64) (int, error) {
	k := 0
	for k < len(b) && off+int64(k) < p.n {
		o := off + int64(k)
		b[k] = byte(o ^ o>>8 ^ o>>16)
		k++
	}
	if k < len(b) {
		return k, io.EOF
	}
	return k, nil
}

type failingReaderAt struct {
	data []byte
	at   int64
	err  error
}

func (f failingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	if off+int64(len(b)) > f.at {
		return 0, f.err
	}
	return copy(b, f.data[off:]), nil
}

// sizedReaderAt is a reader that says it has size bytes, whatever it holds.
type sizedReaderAt struct {
	io.ReaderAt
	size int64
}

func (s sizedReaderAt) Size() int64 { return s.size }

type readerAtFunc func([]byte, int64) (int, error)

func (f readerAtFunc) ReadAt(b []byte, off int64) (int, error) { return f(b, off) }

// panicky panics in every method.
type panicky struct{}

func (panicky) Read([]byte) (int, error)           { panic("reader boom") }
func (panicky) ReadAt([]byte, int64) (int, error)  { panic("readerAt boom") }
func (panicky) Write([]byte) (int, error)          { panic("writer boom") }
func (panicky) WriteAt([]byte, int64) (int, error) { panic("writerAt boom") }

type failingWriterAt struct{ err error }

func (f failingWriterAt) WriteAt(b []byte, off int64) (int, error) { return 0, f.err }

type limitedWriter struct {
	left int
	err  error
}

func (w *limitedWriter) Write(b []byte) (int, error) {
	if len(b) > w.left {
		k := w.left
		w.left = 0
		return k, w.err
	}
	w.left -= len(b)
	return len(b), nil
}

// cancelAfter cancels its context once it has given after bytes.
type cancelAfter struct {
	r      io.Reader
	read   int64
	after  int64
	cancel func()
}

func (c *cancelAfter) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.read += int64(k)
	if c.read >= c.after {
		c.cancel()
	}
	return k, err
}

// splitPieces lists the pieces of [off, off+n) (tests).
func splitPieces(off, n int64, chunk int) []piece {
	if n <= 0 {
		return nil
	}
	p := newPieces(off, n, chunk)
	ps := make([]piece, p.count)
	for i := range ps {
		ps[i] = p.at(i)
	}
	return ps
}

// TestStreamFailedCopyCount: a piece whose copy fails on the device does not count as arrived,
// both ways and for readers and files alike (before, its bytes were counted; one lane, so that the
// third copy is the third piece).
func TestStreamFailedCopyCount(t *testing.T) {
	const chunk = 64 << 10
	const n = 8 * chunk
	data := randomBytes(n, 30)
	for _, tc := range []struct {
		name string
		dir  Direction
		run  func(c *Copier, dev cuda.DevicePtr, f *os.File) (int64, error)
	}{
		{"ToDeviceFrom", HostToDevice, func(c *Copier, dev cuda.DevicePtr, _ *os.File) (int64, error) {
			return c.ToDeviceFrom(context.Background(), dev, bytes.NewReader(data), n)
		}},
		{"ToDeviceFromFile", HostToDevice, func(c *Copier, dev cuda.DevicePtr, f *os.File) (int64, error) {
			return c.ToDeviceFromFile(context.Background(), dev, f, 0, n)
		}},
		{"FromDeviceToFile", DeviceToHost, func(c *Copier, dev cuda.DevicePtr, f *os.File) (int64, error) {
			return c.FromDeviceToFile(context.Background(), f, 0, dev, n)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{ChunkSize: chunk, WindowBytes: 4 * chunk, Lanes: 1})
			var copies atomic.Int32
			e.d.failExec = func(d Direction, _ int) error {
				if d == tc.dir && copies.Add(1) == 3 {
					return errInjected
				}
				return nil
			}
			got, err := tc.run(e.c, e.d.alloc(n), writeTemp(t, data))
			if !errors.Is(err, errInjected) || got > 2*chunk {
				t.Fatalf("%d bytes, %v; want at most %d and the injected failure", got, err, 2*chunk)
			}
		})
	}
}
