package transfer

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// fakeDevice simulates a GPU for the engine: device memory is byte slices
// at fake addresses, each stream is a goroutine that runs its queued work
// in order (after an injectable latency), events complete when their
// stream passes them, and failures can be injected when a copy is queued
// or when it runs. It checks what a real driver would refuse or what would
// corrupt data on a real device, and records it as a violation:
//   - an asynchronous copy of host memory that is not pinned (neither pool
//     memory nor registered), or that spans two registrations (the driver
//     refuses it with CUDA_ERROR_INVALID_VALUE);
//   - a synchronous copy of host memory that begins pinned and leaves its
//     allocation or registration (refused the same way);
//   - host-to-device source bytes that changed between the time the copy
//     was queued and the time it ran (a staging buffer reused too early).
//
// It also measures the most bytes of asynchronous copies queued and not yet
// run, which staging must keep within the window.
type fakeDevice struct {
	mu      sync.Mutex
	devMem  []fakeDevAlloc
	nextDev cuda.DevicePtr
	pool    []fakeSpan // pool memory: pinned
	regs    []fakeSpan // registered memory: pinned, one span per register call

	latency atomic.Int64 // per asynchronous operation, in nanoseconds
	// hold, when set, runs before each asynchronous operation: a test
	// holds the DMA until what it waits for has happened.
	hold atomic.Pointer[func()]
	// gate, when set before a stream is made, holds every asynchronous
	// copy of that stream until it is closed.
	gate chan struct{}

	// Injection hooks, set before the copier is used.
	failEnqueue  func(d Direction, n int) error
	failExec     func(d Direction, n int) error
	failRegister func(b []byte) error

	streams, events atomic.Int64 // live
	syncCopies      atomic.Int64
	asyncCopies     atomic.Int64
	inflight        atomic.Int64
	maxInflight     atomic.Int64
	maxAsyncLen     atomic.Int64
	pinnedAsks      atomic.Int64 // isPinned calls

	logMu      sync.Mutex
	log        []fakeCopy // asynchronous copies in the order they ran
	violations []string
}

type fakeDevAlloc struct {
	base cuda.DevicePtr
	mem  []byte
}

type fakeSpan struct{ start, end uintptr }

// fakeCopy is one executed asynchronous copy.
type fakeCopy struct {
	stream int
	dir    Direction
	dev    cuda.DevicePtr
	n      int
}

func newFakeDevice() *fakeDevice { return &fakeDevice{nextDev: 1 << 32} }

func (d *fakeDevice) violate(format string, args ...any) {
	d.logMu.Lock()
	d.violations = append(d.violations, fmt.Sprintf(format, args...))
	d.logMu.Unlock()
}

func (d *fakeDevice) Violations() []string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return append([]string(nil), d.violations...)
}

func (d *fakeDevice) copies() []fakeCopy {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return append([]fakeCopy(nil), d.log...)
}

// alloc returns n bytes of fake device memory, with a gap after it so that
// out-of-range addresses are caught.
func (d *fakeDevice) alloc(n int) cuda.DevicePtr {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.nextDev
	d.devMem = append(d.devMem, fakeDevAlloc{p, make([]byte, n)})
	d.nextDev += cuda.DevicePtr((n+1<<20-1)&^(1<<20-1) + 1<<20)
	return p
}

// mem returns the device bytes [p, p+n).
func (d *fakeDevice) mem(p cuda.DevicePtr, n int) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.devMem {
		if p >= a.base && p+cuda.DevicePtr(n) <= a.base+cuda.DevicePtr(len(a.mem)) {
			off := int(p - a.base)
			return a.mem[off : off+n], nil
		}
	}
	return nil, fmt.Errorf("fake device: %d bytes at %#x: %w", n, uintptr(p), cuda.ErrInvalidValue)
}

func span(b []byte) fakeSpan {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return fakeSpan{p, p + uintptr(len(b))}
}

func within(list []fakeSpan, s fakeSpan) bool {
	for _, x := range list {
		if s.start >= x.start && s.end <= x.end {
			return true
		}
	}
	return false
}

// checkAsync is the driver's check of an asynchronous copy's host memory.
func (d *fakeDevice) checkAsync(b []byte) error {
	s := span(b)
	d.mu.Lock()
	ok := within(d.pool, s) || within(d.regs, s)
	d.mu.Unlock()
	if !ok {
		d.violate("asynchronous copy of %d bytes at %#x that are not in one pinned allocation or registration", len(b), s.start)
		return fmt.Errorf("fake device: %w: %w", cuda.ErrInvalidValue, cuda.ErrNotPinned)
	}
	return nil
}

func (d *fakeDevice) addInflight(n int) {
	v := d.inflight.Add(int64(n))
	for {
		m := d.maxInflight.Load()
		if v <= m || d.maxInflight.CompareAndSwap(m, v) {
			return
		}
	}
}

func (d *fakeDevice) newStream() (stream, error) {
	s := &fakeStream{d: d, id: int(d.streams.Add(1)), ops: make(chan func(), 1<<14), exited: make(chan struct{}), gate: d.gate}
	go s.run()
	return s, nil
}

func (d *fakeDevice) newEvent() (event, error) {
	d.events.Add(1)
	e := &fakeEvent{d: d}
	e.cond = sync.NewCond(&e.mu)
	return e, nil
}

// checkSync is the driver's check of a synchronous copy's host memory:
// memory that begins page-locked is taken for page-locked memory, and must
// then lie inside one allocation or registration.
func (d *fakeDevice) checkSync(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	s := span(b)
	d.mu.Lock()
	startPinned := within(d.pool, fakeSpan{s.start, s.start + 1}) || within(d.regs, fakeSpan{s.start, s.start + 1})
	ok := !startPinned || within(d.pool, s) || within(d.regs, s)
	d.mu.Unlock()
	if !ok {
		d.violate("synchronous copy of %d bytes at %#x that begin page-locked and leave their allocation or registration", len(b), s.start)
		return fmt.Errorf("fake device: %w", cuda.ErrInvalidValue)
	}
	return nil
}

func (d *fakeDevice) copyHtoD(dst cuda.DevicePtr, src []byte) error {
	d.syncCopies.Add(1)
	if err := d.checkSync(src); err != nil {
		return err
	}
	m, err := d.mem(dst, len(src))
	if err != nil {
		return err
	}
	copy(m, src)
	return nil
}

func (d *fakeDevice) copyDtoH(dst []byte, src cuda.DevicePtr) error {
	d.syncCopies.Add(1)
	if err := d.checkSync(dst); err != nil {
		return err
	}
	m, err := d.mem(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, m)
	return nil
}

func (d *fakeDevice) register(b []byte) (hostReg, error) {
	if f := d.failRegister; f != nil {
		if err := f(b); err != nil {
			return nil, err
		}
	}
	s := span(b)
	d.mu.Lock()
	defer d.mu.Unlock()
	// The driver locks whole pages: overlapping pages are refused.
	pg := fakeSpan{s.start &^ 4095, (s.end + 4095) &^ 4095}
	for _, x := range append(append([]fakeSpan(nil), d.regs...), d.pool...) {
		if x.start < pg.end && pg.start < x.end {
			return nil, fmt.Errorf("fake device: cuMemHostRegister: %w", cuda.ErrAlreadyRegistered)
		}
	}
	d.regs = append(d.regs, s)
	return &fakeReg{d: d, s: s}, nil
}

func (d *fakeDevice) isPinned(b []byte) bool {
	d.pinnedAsks.Add(1)
	if len(b) == 0 {
		return false
	}
	// Like cuda.IsPinned for foreign memory: both ends pinned.
	d.mu.Lock()
	defer d.mu.Unlock()
	in := func(p uintptr) bool {
		return within(d.pool, fakeSpan{p, p + 1}) || within(d.regs, fakeSpan{p, p + 1})
	}
	s := span(b)
	return in(s.start) && in(s.end-1)
}

type fakeReg struct {
	d     *fakeDevice
	s     fakeSpan
	freed bool
}

func (r *fakeReg) Free() error {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	if r.freed {
		return cuda.ErrNotRegistered
	}
	r.freed = true
	for i, x := range r.d.regs {
		if x == r.s {
			r.d.regs = append(r.d.regs[:i], r.d.regs[i+1:]...)
			return nil
		}
	}
	return cuda.ErrNotRegistered
}

// fakeStream runs its operations in order on one goroutine.
type fakeStream struct {
	d      *fakeDevice
	id     int
	mu     sync.Mutex // guards closed and sends on ops
	closed bool
	ops    chan func()
	exited chan struct{}
	err    error // failure since the last event (stream goroutine only)
	gate   chan struct{}
}

func (s *fakeStream) run() {
	defer close(s.exited)
	for f := range s.ops {
		f()
	}
}

func (s *fakeStream) push(f func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cuda.ErrInvalidHandle
	}
	s.ops <- f
	return nil
}

func (s *fakeStream) sleep() {
	if s.gate != nil {
		<-s.gate
	}
	if h := s.d.hold.Load(); h != nil {
		(*h)()
	}
	if l := s.d.latency.Load(); l > 0 {
		time.Sleep(time.Duration(l))
	}
}

func (s *fakeStream) copyHtoDAsync(dst cuda.DevicePtr, src []byte) error {
	return s.async(HostToDevice, dst, src)
}

func (s *fakeStream) copyDtoHAsync(dst []byte, src cuda.DevicePtr) error {
	return s.async(DeviceToHost, src, dst)
}

func (s *fakeStream) async(dir Direction, dev cuda.DevicePtr, host []byte) error {
	d := s.d
	if err := d.checkAsync(host); err != nil {
		return err
	}
	if f := d.failEnqueue; f != nil {
		if err := f(dir, len(host)); err != nil {
			return err
		}
	}
	n := len(host)
	var sum uint32
	if dir == HostToDevice {
		sum = crc32.ChecksumIEEE(host)
	}
	d.asyncCopies.Add(1)
	for {
		m := d.maxAsyncLen.Load()
		if int64(n) <= m || d.maxAsyncLen.CompareAndSwap(m, int64(n)) {
			break
		}
	}
	d.addInflight(n)
	return s.push(func() {
		defer d.addInflight(-n)
		s.sleep()
		if f := d.failExec; f != nil {
			if err := f(dir, n); err != nil {
				s.err = err
				return
			}
		}
		m, err := d.mem(dev, n)
		if err != nil {
			s.err = err
			return
		}
		if dir == HostToDevice {
			if crc32.ChecksumIEEE(host) != sum {
				d.violate("stream %d: %d staged bytes changed between enqueue and execution", s.id, n)
			}
			copy(m, host)
		} else {
			copy(host, m)
		}
		d.logMu.Lock()
		d.log = append(d.log, fakeCopy{s.id, dir, dev, n})
		d.logMu.Unlock()
	})
}

func (s *fakeStream) record(ev event) error {
	e := ev.(*fakeEvent)
	e.mu.Lock()
	if e.destroyed {
		e.mu.Unlock()
		return cuda.ErrInvalidHandle
	}
	e.recorded++
	seq := e.recorded
	e.mu.Unlock()
	return s.push(func() {
		err := s.err
		s.err = nil
		e.mu.Lock()
		if seq > e.completed {
			e.completed, e.err = seq, err
		}
		e.cond.Broadcast()
		e.mu.Unlock()
	})
}

// synchronize waits for the stream's queued work and, like
// cuStreamSynchronize, reports a failure of work run since the last event.
func (s *fakeStream) synchronize() error {
	ch := make(chan struct{})
	var err error
	if err := s.push(func() { err, s.err = s.err, nil; close(ch) }); err != nil {
		return err
	}
	<-ch
	return err
}

func (s *fakeStream) destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cuda.ErrInvalidHandle
	}
	s.closed = true
	close(s.ops)
	s.d.streams.Add(-1)
	return nil
}

// fakeEvent completes when its stream runs the marker that record queued.
type fakeEvent struct {
	d                   *fakeDevice
	mu                  sync.Mutex
	cond                *sync.Cond
	recorded, completed uint64
	err                 error
	destroyed           bool
}

func (e *fakeEvent) Done() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return false, cuda.ErrInvalidHandle
	}
	if e.completed < e.recorded {
		return false, nil
	}
	return true, e.err
}

func (e *fakeEvent) synchronize() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.completed < e.recorded && !e.destroyed {
		e.cond.Wait()
	}
	if e.destroyed {
		return cuda.ErrInvalidHandle
	}
	return e.err
}

func (e *fakeEvent) destroy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		e.d.violate("event destroyed twice") // a real driver may have reused the handle
		return cuda.ErrInvalidHandle
	}
	e.destroyed = true
	e.cond.Broadcast()
	e.d.events.Add(-1)
	return nil
}

// fakeBackend gives the pool page-aligned Go memory that the fake device
// treats as pinned.
type fakeBackend struct {
	d      *fakeDevice
	allocs atomic.Int64
}

func (b *fakeBackend) Name() string { return "fake-pinned" }

func (b *fakeBackend) Alloc(size int) (pinpool.Allocation, error) {
	mem := alignedBytes(size)
	b.d.mu.Lock()
	b.d.pool = append(b.d.pool, span(mem))
	b.d.mu.Unlock()
	b.allocs.Add(1)
	return &fakeAllocation{b: b, mem: mem}, nil
}

type fakeAllocation struct {
	b     *fakeBackend
	mem   []byte
	freed bool
}

func (a *fakeAllocation) Bytes() []byte { return a.mem }

func (a *fakeAllocation) DevicePointer() (uintptr, error) { return 0, pinpool.ErrNotMapped }

func (a *fakeAllocation) Free() error {
	if a.freed {
		return errors.New("fake backend: double free")
	}
	a.freed = true
	d := a.b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	s := span(a.mem)
	for i, x := range d.pool {
		if x == s {
			d.pool = append(d.pool[:i], d.pool[i+1:]...)
			break
		}
	}
	a.b.allocs.Add(-1)
	return nil
}

// addressRange is the fake allocation that p lies in, as
// cuMemGetAddressRange tells it (rangedDevice).
func (d *fakeDevice) addressRange(p cuda.DevicePtr) (cuda.DevicePtr, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.devMem {
		if p >= a.base && p < a.base+cuda.DevicePtr(len(a.mem)) {
			return a.base, uint64(len(a.mem)), nil
		}
	}
	return 0, 0, fmt.Errorf("fake device: cuMemGetAddressRange(%#x): %w", uintptr(p), cuda.ErrInvalidValue)
}
