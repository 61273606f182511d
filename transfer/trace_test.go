package transfer

import (
	"context"
	"fmt"
	rtrace "runtime/trace"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinpool/pinpool/cuda"
)

// A traced device wraps another and records, for one transfer at a time,
// when each asynchronous copy was queued and when each event wait
// returned, so that a benchmark can tell where a staged transfer's time
// goes (before the first DMA, between the copies, after the last) without
// marks in the engine.

// trace is what a traced device recorded since its last reset.
type trace struct {
	mu     sync.Mutex
	start  time.Time
	issues []traceIssue
	waits  []time.Duration // when an event wait returned, since start
}

// traceIssue is one asynchronous copy: when its call returned, since the
// trace's start, and its bytes.
type traceIssue struct {
	at time.Duration
	n  int
}

func (t *trace) reset() {
	t.mu.Lock()
	t.start = time.Now()
	t.issues, t.waits = t.issues[:0], t.waits[:0]
	t.mu.Unlock()
}

func (t *trace) issued(n int) {
	rtrace.Log(context.Background(), "issued", strconv.Itoa(n))
	t.mu.Lock()
	t.issues = append(t.issues, traceIssue{time.Since(t.start), n})
	t.mu.Unlock()
}

func (t *trace) waited() {
	rtrace.Log(context.Background(), "waited", "")
	t.mu.Lock()
	t.waits = append(t.waits, time.Since(t.start))
	t.mu.Unlock()
}

// summary is a trace's account of one transfer that took total: when the
// first and the last copy were queued, the bytes queued, and the copies.
type traceSummary struct {
	first, last, total time.Duration
	bytes, copies      int
}

// add adds s's times, bytes and copies to t: the sums over transfers.
func (t *traceSummary) add(s traceSummary) {
	t.first += s.first
	t.last += s.last
	t.total += s.total
	t.bytes += s.bytes
	t.copies += s.copies
}

func (t *trace) summary(total time.Duration) traceSummary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := traceSummary{total: total, copies: len(t.issues)}
	for i, c := range t.issues {
		if i == 0 || c.at < s.first {
			s.first = c.at
		}
		s.last = max(s.last, c.at)
		s.bytes += c.n
	}
	return s
}

type tracedDevice struct {
	device
	t *trace
}

func (d tracedDevice) newStream() (stream, error) {
	s, err := d.device.newStream()
	if err != nil {
		return nil, err
	}
	return tracedStream{s, d.t}, nil
}

func (d tracedDevice) newEvent() (event, error) {
	e, err := d.device.newEvent()
	if err != nil {
		return nil, err
	}
	return tracedEvent{e, d.t}, nil
}

type tracedStream struct {
	stream
	t *trace
}

func (s tracedStream) copyHtoDAsync(dst cuda.DevicePtr, src []byte) error {
	err := s.stream.copyHtoDAsync(dst, src)
	s.t.issued(len(src))
	return err
}

func (s tracedStream) copyDtoHAsync(dst []byte, src cuda.DevicePtr) error {
	err := s.stream.copyDtoHAsync(dst, src)
	s.t.issued(len(dst))
	return err
}

func (s tracedStream) record(e event) error { return s.stream.record(e.(tracedEvent).event) }

type tracedEvent struct {
	event
	t *trace
}

func (e tracedEvent) synchronize() error {
	err := e.event.synchronize()
	e.t.waited()
	return err
}

// TestTracedDevice checks the traced device on the fake one: staged
// transfers through it arrive byte-exact, and the trace counts every chunk
// and byte, in order in time.
func TestTracedDevice(t *testing.T) {
	tr := &trace{}
	d := newFakeDevice()
	e := newEnvOn(t, tracedDevice{d, tr}, d, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: 4, DirectBelow: -1}, defaultTuning())
	for _, n := range []int{3 * testChunk, 40*testChunk + 5} {
		for _, dir := range []Direction{HostToDevice, DeviceToHost} {
			src := randomBytes(n, uint64(n))
			dev := d.alloc(n)
			e.setDev(dev, src)
			// t0 before the trace's start, so that the transfer's total covers every time the
			// trace records however long this goroutine waits between the two.
			t0 := time.Now()
			tr.reset()
			back := make([]byte, n)
			host := src
			if dir == DeviceToHost {
				host = back
			}
			if err := e.c.transfer(context.Background(), op{dir, dev, host}, false); err != nil {
				t.Fatal(err)
			}
			s := tr.summary(time.Since(t0))
			if dir == HostToDevice {
				sameBytes(t, "device", e.devBytes(dev, n), src)
			} else {
				sameBytes(t, "host", back, src)
			}
			if s.bytes != n || s.copies == 0 || s.first > s.last || s.last > s.total || len(tr.waits) == 0 {
				t.Errorf("%v of %d bytes: trace %+v, %d waits", dir, n, s, len(tr.waits))
			}
		}
	}
}

// timeline is the trace as text, for a benchmark's log: when each copy was
// queued (µs since the start, and its KiB) and when each event wait
// returned, then the transfer's total.
func (t *trace) timeline(total time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s strings.Builder
	s.WriteString("issued:")
	for _, c := range t.issues {
		fmt.Fprintf(&s, " %d(%dK)", c.at.Microseconds(), c.n>>10)
	}
	s.WriteString("\nwaited:")
	for _, w := range t.waits {
		fmt.Fprintf(&s, " %d", w.Microseconds())
	}
	fmt.Fprintf(&s, "\ntotal: %d µs", total.Microseconds())
	return s.String()
}
