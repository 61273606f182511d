package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/pinpool/pinpool/cuda"
)

// Fuzzed sources and sinks (issue 30's promises, tried by the fuzzer): a script of the fuzzer's
// bytes decides what each call of a Reader, Writer, ReaderAt or WriterAt does, honest or not, and
// the test holds the copier to what it promises whatever the script: the count returned is what
// arrived (exactly, where the calls come in order), the device holds that and nothing else outside
// it, the error says why, and no staging is held after. Every target runs on the fake device, with
// chunks of 64 KiB (streamOpts), so that one input crosses many pieces.

// errScripted is the error a scripted reader or writer returns when its script says so.
var errScripted = errors.New("scripted failure")

// fuzzMaxBytes bounds a fuzzed transfer: 16 pieces of streamOpts.
const fuzzMaxBytes = 1 << 20

// A script's acts: each call of a scripted Reader or Writer takes the next two bytes of its script,
// the act (modulo numActs) and its argument; past the script's end every call is honest and whole.
// The ReaderAt and WriterAt pick theirs by the call's offset and length.
const (
	actWhole    = iota // honest: everything asked (a writer: takes everything)
	actPart            // honest: part of it (a writer: a short write with no error)
	actEmpty           // no byte and no error (readers)
	actOver            // a count above what was asked, garbage in the buffer
	actNegative        // a count below zero, garbage in the buffer
	actError           // part of it, and errScripted
	actEOF             // part of it (maybe all), and io.EOF
	actPanic           // garbage in the buffer, then a panic
	numActs
)

// partOf is the argument's share of asked bytes: 1 to asked (0 to asked when zero is allowed),
// spread from a byte to several pieces.
func partOf(arg byte, asked int, zero bool) int {
	k := int(arg) * int(arg) * 4
	if !zero {
		k++
	}
	return min(k, asked)
}

// garble overwrites b with the complement of want (its length), so that bytes a copier should not
// have moved are told from the data if it moves them.
func garble(b, want []byte) {
	for i := range b {
		b[i] = ^want[i]
	}
}

// nextAct takes the next act and its argument off the front of a Reader's or Writer's script
// (actWhole past its end).
func nextAct(script *[]byte) (int, byte) {
	if len(*script) < 2 {
		return actWhole, 0
	}
	act, arg := int((*script)[0])%numActs, (*script)[1]
	*script = (*script)[2:]
	return act, arg
}

// actAt is the act and argument of a ReaderAt's or WriterAt's call of n bytes at off: the script's
// two bytes at a place that the offset and length pick (actWhole for a script of less than two).
func actAt(script []byte, off int64, n int) (int, byte) {
	if len(script) < 2 {
		return actWhole, 0
	}
	i := int((off/512+int64(n))%int64(len(script)/2)) * 2
	return int(script[i]) % numActs, script[i+1]
}

// writeAct is what a scripted Writer or WriterAt does with a call of n bytes: the count it
// returns and its error, how many of the bytes it takes (a prefix), and the class of the call
// when it is not honest (nil when it is). A writer has no empty or EOF act: those take all.
func writeAct(act int, arg byte, n int) (k, took int, err, end error) {
	switch act {
	case actPart: // a short write with no error
		k = partOf(arg, n-1, true)
		return k, k, nil, ErrContract
	case actOver:
		return n + 1 + int(arg), 0, nil, ErrContract
	case actNegative:
		return -1 - int(arg), 0, nil, ErrContract
	case actError:
		k = partOf(arg, n, true)
		return k, k, errScripted, errScripted
	case actPanic:
		return 0, 0, nil, ErrCallbackPanic
	}
	return n, n, nil, nil
}

// scriptedReader reads data (all the transfer's bytes) as its script says, in order.
type scriptedReader struct {
	data, script []byte
	gave         int   // bytes given by honest counts, those of an error's or EOF's read among them
	end          error // the class of the read that ended the stream (nil: none did)
	empty        int   // empty reads in a row
	after        int   // reads after an end other than io.EOF
}

func (r *scriptedReader) Read(b []byte) (int, error) {
	if r.end != nil {
		if r.end != io.EOF {
			r.after++
		}
		return 0, io.EOF
	}
	act, arg := nextAct(&r.script)
	want := r.data[r.gave:][:len(b)] // the copier never asks past the transfer's length
	give := func(k int, err error) (int, error) {
		copy(b, want[:k])
		r.gave += k
		return k, err
	}
	if act != actEmpty {
		r.empty = 0
	}
	switch act {
	case actPart:
		return give(partOf(arg, len(b), false), nil)
	case actEmpty:
		if r.empty++; r.empty >= emptyReads {
			r.end = io.ErrNoProgress
		}
		return 0, nil
	case actOver:
		garble(b, want)
		r.end = ErrContract
		return len(b) + 1 + int(arg), nil
	case actNegative:
		garble(b, want)
		r.end = ErrContract
		return -1 - int(arg), nil
	case actError:
		r.end = errScripted
		return give(partOf(arg, len(b), true), errScripted)
	case actEOF:
		r.end = io.EOF
		return give(partOf(arg, len(b), true), io.EOF)
	case actPanic:
		garble(b, want)
		r.end = ErrCallbackPanic
		panic("scripted panic")
	}
	return give(len(b), nil)
}

// fuzzRig is a rig over e's fake device whose device accessors need no testing.TB: inside a fuzz
// target env's own (which call the F's Helper) may not be used. The memory is the test's own, so a
// failure to reach it is a bug of the test, and panics.
func fuzzRig(e *env) *rig {
	mem := func(p cuda.DevicePtr, n int) []byte {
		m, err := e.d.mem(p, n)
		if err != nil {
			panic(err)
		}
		return m
	}
	return &rig{c: e.c, pool: e.pool, alloc: e.d.alloc,
		get: func(p cuda.DevicePtr, n int) []byte { return bytes.Clone(mem(p, n)) },
		set: func(p cuda.DevicePtr, b []byte) { copy(mem(p, len(b)), b) }}
}

// FuzzStreamReader: ToDeviceFrom of a scripted reader returns exactly the bytes the reader gave
// honestly (an erring or ending read's among them), the device holds them and nothing else, the
// error wraps the class of the read that ended the stream (none: no error and all n bytes), and no
// read comes after an end that is not io.EOF.
func FuzzStreamReader(f *testing.F) {
	f.Add(uint32(fuzzMaxBytes), []byte{})
	f.Add(uint32(200000), []byte{actPart, 9, actWhole, 0, actEmpty, 0, actPart, 200, actOver, 3})
	f.Add(uint32(300001), []byte{actPart, 255, actPart, 255, actNegative, 0})
	f.Add(uint32(70000), []byte{actPart, 100, actError, 50})
	f.Add(uint32(65536), []byte{actEOF, 255})
	f.Add(uint32(500000), []byte{actPart, 130, actEOF, 30})
	f.Add(uint32(131072), []byte{actWhole, 0, actPanic, 1})
	f.Add(uint32(4096), bytes.Repeat([]byte{actEmpty, 0}, emptyReads))
	e := newEnv(f, streamOpts)
	r := fuzzRig(e)
	data := randomBytes(fuzzMaxBytes, 31)
	g := r.guarded(fuzzMaxBytes, 32)
	f.Fuzz(func(t *testing.T, size uint32, script []byte) {
		n := 1 + int(size)%fuzzMaxBytes
		g.reset()
		src := &scriptedReader{data: data[:n], script: script}
		got, err := e.c.ToDeviceFrom(context.Background(), g.dst, src, int64(n))
		if got != int64(src.gave) {
			t.Fatalf("%d bytes reported, the reader gave %d (%v)", got, src.gave, err)
		}
		if src.after != 0 {
			t.Fatalf("%d reads after the read that ended the stream (%v)", src.after, src.end)
		}
		switch {
		case src.end == nil || src.end == io.EOF && src.gave == n:
			if err != nil || got != int64(n) {
				t.Fatalf("an honest reader of %d bytes: %d bytes, %v", n, got, err)
			}
		case src.end == io.EOF:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("a reader that ended after %d of %d bytes: %v; want io.ErrUnexpectedEOF", got, n, err)
			}
		case src.end == io.ErrNoProgress:
			if !errors.Is(err, ErrContract) || !errors.Is(err, io.ErrNoProgress) {
				t.Fatalf("%d empty reads: %v; want ErrContract and io.ErrNoProgress", emptyReads, err)
			}
		case !errors.Is(err, src.end):
			t.Fatalf("the stream ended by %v: %v", src.end, err)
		}
		g.check(t, data[:got])
		fuzzSettled(t, e)
	})
}

// scriptedWriter takes the bytes it is given as its script says, in order.
type scriptedWriter struct {
	script []byte
	took   []byte // the bytes it accepted with an honest count
	end    error
	short  bool // the end was a short write with no error
	after  int  // writes after the end
}

func (w *scriptedWriter) Write(b []byte) (int, error) {
	if w.end != nil {
		w.after++
		return 0, errScripted
	}
	act, arg := nextAct(&w.script)
	k, took, err, end := writeAct(act, arg, len(b))
	w.took = append(w.took, b[:took]...)
	w.end, w.short = end, act == actPart
	if act == actPanic {
		panic("scripted panic")
	}
	return k, err
}

// FuzzStreamWriter: FromDeviceTo of a scripted writer returns exactly the bytes the writer took
// with an honest count, which are the device's bytes in order; the error wraps the class of the
// write that ended it (a short write with no error: ErrContract and io.ErrShortWrite), no write
// comes after it, and the device's bytes are left as they were.
func FuzzStreamWriter(f *testing.F) {
	f.Add(uint32(fuzzMaxBytes), []byte{})
	f.Add(uint32(200000), []byte{actWhole, 0, actPart, 9})
	f.Add(uint32(300001), []byte{actWhole, 0, actWhole, 0, actOver, 1})
	f.Add(uint32(70000), []byte{actNegative, 0})
	f.Add(uint32(500000), []byte{actWhole, 0, actError, 77})
	f.Add(uint32(131072), []byte{actWhole, 0, actPanic, 1})
	e := newEnv(f, streamOpts)
	r := fuzzRig(e)
	g := r.guarded(fuzzMaxBytes, 33)
	f.Fuzz(func(t *testing.T, size uint32, script []byte) {
		n := 1 + int(size)%fuzzMaxBytes
		dst := &scriptedWriter{script: script}
		got, err := e.c.FromDeviceTo(context.Background(), dst, g.dst, int64(n))
		if got != int64(len(dst.took)) {
			t.Fatalf("%d bytes reported, the writer took %d (%v)", got, len(dst.took), err)
		}
		if dst.after != 0 {
			t.Fatalf("%d writes after the write that ended it (%v)", dst.after, dst.end)
		}
		sameBytes(t, "what the writer took", dst.took, g.inner[:len(dst.took)])
		switch {
		case dst.end == nil:
			if err != nil || got != int64(n) {
				t.Fatalf("an honest writer of %d bytes: %d bytes, %v", n, got, err)
			}
		case dst.short && !errors.Is(err, io.ErrShortWrite), !errors.Is(err, dst.end):
			t.Fatalf("the writer ended by %v (short: %v): %v", dst.end, dst.short, err)
		}
		g.check(t, nil) // the device untouched, guards included
		fuzzSettled(t, e)
	})
}

// scriptedReaderAt reads data at any offset, from several lanes at once; what a call does depends
// on its offset and length alone (the script's two bytes at a place they pick), so that each
// piece's outcome does not depend on the order the lanes run in. A part with no error is honest
// here: the copier reads on from where it ended.
type scriptedReaderAt struct {
	data, script []byte
	dishonesty
}

// dishonesty is what the calls of a scripted ReaderAt or WriterAt that were not honest did, noted
// from several lanes at once.
type dishonesty struct {
	mu    sync.Mutex
	ends  []error // the classes of the calls that were not honest
	badAt int64   // the least offset of a byte a call did not give or take honestly (the range's end: none)
}

// note records a dishonest call of class end whose first byte not given or taken honestly is at.
func (d *dishonesty) note(at int64, end error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.badAt = min(d.badAt, at)
	d.ends = append(d.ends, end)
}

// check fails t unless a transfer of n bytes from offset off that returned got and err kept to the
// calls: got ends no later than the first byte not given or taken honestly, and err wraps the class
// of one of the dishonest calls (none: no error and all n bytes).
func (d *dishonesty) check(t *testing.T, got, off int64, n int, err error) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if got < 0 || got > d.badAt-off {
		t.Fatalf("%d bytes reported, the first byte not moved honestly at %d of [%d, %d) (%v)", got, d.badAt, off, off+int64(n), err)
	}
	if len(d.ends) == 0 {
		if err != nil || got != int64(n) {
			t.Fatalf("honest calls, %d bytes: %d bytes, %v", n, got, err)
		}
		return
	}
	for _, end := range d.ends {
		if errors.Is(err, end) {
			return
		}
	}
	t.Fatalf("calls ended by %v: %v", d.ends, err)
}

func (r *scriptedReaderAt) ReadAt(b []byte, off int64) (int, error) {
	want := r.data[off:][:len(b)] // the copier never asks past the range, which data ends
	act, arg := actAt(r.script, off, len(b))
	k, err, honest, end := len(b), error(nil), len(b), error(nil)
	switch act {
	case actPart:
		k = partOf(arg, len(b), false)
		honest = k
	case actEmpty: // again and again at this offset: the copier gives up
		k, honest, end = 0, 0, io.ErrNoProgress
	case actOver:
		k, honest, end = len(b)+1+int(arg), 0, ErrContract
	case actNegative:
		k, honest, end = -1-int(arg), 0, ErrContract
	case actError:
		k, err, end = partOf(arg, len(b), true), errScripted, errScripted
		honest = k
	case actEOF:
		k, err = partOf(arg, len(b), true), io.EOF
		if honest = k; k < len(b) {
			end = io.ErrUnexpectedEOF
		}
	case actPanic:
		honest, end = 0, ErrCallbackPanic
	}
	copy(b, want[:honest])
	if end != nil { // the rest of b must not be moved: make it tell
		garble(b[honest:], want[honest:])
		r.note(off+int64(honest), end)
	}
	if act == actPanic {
		panic("scripted panic")
	}
	return k, err
}

// FuzzFileReaderAt: ToDeviceFromFile of a scripted ReaderAt (no Size: nothing is checked before
// it starts), read by several lanes at once, at a fuzzed offset: the count returned is a prefix of
// the range that ends no later than the first byte some call did not give honestly, the device
// holds the data there, each byte after it either the data or what it held before, nothing outside
// the range, and the error wraps the class of one of the calls that were not honest (none: no
// error and all n bytes).
func FuzzFileReaderAt(f *testing.F) {
	f.Add(uint32(0), uint32(fuzzMaxBytes), []byte{})
	f.Add(uint32(4095), uint32(300000), []byte{actWhole, 0, actPart, 40, actWhole, 0})
	f.Add(uint32(65536), uint32(500000), []byte{actWhole, 0, actOver, 2, actWhole, 0, actWhole, 0})
	f.Add(uint32(1), uint32(200000), []byte{actError, 3, actWhole, 0, actNegative, 0})
	f.Add(uint32(777), uint32(900000), []byte{actWhole, 0, actEOF, 255, actPanic, 0, actEmpty, 0})
	e := newEnv(f, streamOpts)
	r := fuzzRig(e)
	file := randomBytes(2*fuzzMaxBytes, 34)
	g := r.guarded(fuzzMaxBytes, 35)
	f.Fuzz(func(t *testing.T, offset, size uint32, script []byte) {
		off := int64(offset) % fuzzMaxBytes
		n := 1 + int(size)%fuzzMaxBytes
		g.reset()
		src := &scriptedReaderAt{data: file[:off+int64(n)], script: script, dishonesty: dishonesty{badAt: off + int64(n)}}
		got, err := e.c.ToDeviceFromFile(context.Background(), g.dst, src, off, int64(n))
		src.check(t, got, off, n, err)
		data := file[off : off+int64(n)]
		g.checkUpTo(t, data[:got], false)
		dev := r.get(g.dst, n)
		for i := int(got); i < n; i++ {
			if dev[i] != data[i] && dev[i] != g.inner[i] {
				t.Fatalf("device byte %d after the %d that arrived is %#x: neither the data's %#x nor the old %#x", i, got, dev[i], data[i], g.inner[i])
			}
		}
		fuzzSettled(t, e)
	})
}

// reset puts back what g's range and guards held when it was made.
func (g *guarded) reset() {
	all := bytes.Repeat([]byte{0xA5}, g.n+2*guardBytes)
	copy(all[guardBytes:], g.inner)
	g.r.set(g.base, all)
}

// fuzzSettled fails t unless the copier gave all its staging back and the fake device saw no
// violation, after a fuzzed transfer.
func fuzzSettled(t *testing.T, e *env) {
	t.Helper()
	poolIdle(t, e.pool, "pool after the transfer", false)
	for _, v := range e.d.Violations() {
		t.Fatalf("fake device: %s", v)
	}
}

// scriptedWriterAt takes the bytes it is given at any offset, from several lanes at once, into a
// shadow of the file; what a call does depends on its offset and length alone, as for
// scriptedReaderAt.
type scriptedWriterAt struct {
	script     []byte
	start, end int64  // the range the transfer may write
	dishonesty        // its mu guards file and outside too
	file       []byte // the shadow: what honest writes took, at their offsets
	outside    []string
}

func (w *scriptedWriterAt) WriteAt(b []byte, off int64) (int, error) {
	act, arg := actAt(w.script, off, len(b))
	k, took, err, end := writeAct(act, arg, len(b))
	w.mu.Lock()
	if off < w.start || off > w.end-int64(len(b)) {
		w.outside = append(w.outside, fmt.Sprintf("%d bytes at %d, outside [%d, %d)", len(b), off, w.start, w.end))
		w.mu.Unlock()
		return 0, errScripted
	}
	copy(w.file[off-w.start:], b[:took])
	w.mu.Unlock()
	if end != nil {
		w.note(off+int64(took), end)
	}
	if act == actPanic {
		panic("scripted panic")
	}
	return k, err
}

// FuzzFileWriterAt: FromDeviceToFile into a scripted WriterAt, written by several lanes at once,
// at a fuzzed offset: no write falls outside the range, the count returned is a prefix that ends
// no later than the first byte some call did not take honestly and that the file holds, the error
// wraps the class of one of the calls that were not honest (none: no error and all n bytes), and
// the device's bytes are left as they were.
func FuzzFileWriterAt(f *testing.F) {
	f.Add(uint32(0), uint32(fuzzMaxBytes), []byte{})
	f.Add(uint32(4095), uint32(300000), []byte{actWhole, 0, actPart, 40, actWhole, 0})
	f.Add(uint32(65536), uint32(500000), []byte{actWhole, 0, actOver, 2, actWhole, 0, actWhole, 0})
	f.Add(uint32(1), uint32(200000), []byte{actError, 3, actWhole, 0, actNegative, 0})
	f.Add(uint32(777), uint32(900000), []byte{actWhole, 0, actPanic, 0, actWhole, 0})
	e := newEnv(f, streamOpts)
	r := fuzzRig(e)
	g := r.guarded(fuzzMaxBytes, 36)
	f.Fuzz(func(t *testing.T, offset, size uint32, script []byte) {
		off := int64(offset) % fuzzMaxBytes
		n := 1 + int(size)%fuzzMaxBytes
		dst := &scriptedWriterAt{script: script, start: off, end: off + int64(n), file: make([]byte, n), dishonesty: dishonesty{badAt: off + int64(n)}}
		got, err := e.c.FromDeviceToFile(context.Background(), dst, off, g.dst, int64(n))
		if len(dst.outside) != 0 {
			t.Fatalf("writes outside the range: %v", dst.outside)
		}
		dst.check(t, got, off, n, err)
		sameBytes(t, "what the file took", dst.file[:got], g.inner[:got])
		g.check(t, nil)
		fuzzSettled(t, e)
	})
}
