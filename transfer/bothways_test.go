package transfer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBothWaysOwnWindow checks that each direction stages within a window
// of its own: with every slot of the host-to-device window held, a
// device-to-host transfer runs without waiting for a slot, a host-to-device
// transfer waits until its deadline, and once the slots are back it runs.
// Stats count the staging of both windows together and report one
// direction's bound.
func TestBothWaysOwnWindow(t *testing.T) {
	const slots = 4
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: slots * testChunk, Lanes: 2, DirectBelow: -1})
	const n = 16 * testChunk
	dev, src := e.devHolding(n, 41)
	w := e.c.wins[HostToDevice]
	for range slots {
		if !w.tryAcquire() {
			t.Fatal("the host-to-device window is busy")
		}
	}
	waits := e.c.Stats().StagingWaits

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	back := make([]byte, n)
	if err := e.c.FromDevice(ctx, back, dev); err != nil {
		t.Fatalf("device to host with the other window full: %v", err)
	}
	sameBytes(t, "back", back, src)
	if got := e.c.Stats().StagingWaits; got != waits {
		t.Errorf("device to host waited %d times for a slot, with its own window free", got-waits)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancelShort()
	if err := e.c.ToDevice(short, dev, src); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("host to device with its window full: %v, want a deadline error", err)
	}
	st := e.c.Stats()
	if st.StagingBytes != slots*testChunk {
		t.Errorf("%d bytes of staging held, want the %d of the slots held by hand", st.StagingBytes, slots*testChunk)
	}
	if st.WindowBytes != slots*testChunk {
		t.Errorf("WindowBytes %d, want one direction's %d", st.WindowBytes, slots*testChunk)
	}
	for range slots {
		w.release()
	}
	if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, "device", e.devBytes(dev, n), src)
}

// TestBothWaysPeakStaging runs transfers both ways at once over a slow
// device: every byte arrives, and the staging held at once, counted over
// both windows, exceeds one window (the device holds the first round's
// copies until it does) but never two.
func TestBothWaysPeakStaging(t *testing.T) {
	const slots = 4
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: slots * testChunk, Lanes: 2, DirectBelow: -1})
	e.d.latency.Store(int64(300 * time.Microsecond))
	const n = 24 * testChunk
	src, back := randomBytes(n, 42), make([]byte, n)
	devIn, devOut := e.d.alloc(n), e.d.alloc(n)
	want := randomBytes(n, 43)
	if err := e.c.ToDevice(context.Background(), devOut, want); err != nil {
		t.Fatal(err)
	}
	// In the first round the device holds the copies until the two
	// directions hold more than one window between them, so that the
	// transfers overlap however they are scheduled.
	var overlapped atomic.Bool
	hold := func() {
		spinUntil(func() bool {
			if e.c.held.now.Load() > slots {
				overlapped.Store(true)
			}
			return overlapped.Load()
		}, -1)
	}
	e.d.hold.Store(&hold)
	for range 3 {
		var wg sync.WaitGroup
		var errOut error
		wg.Go(func() { errOut = e.c.FromDevice(context.Background(), back, devOut) })
		err := e.c.ToDevice(context.Background(), devIn, src)
		e.d.hold.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if errOut != nil {
			t.Fatal(errOut)
		}
		sameBytes(t, "device", e.devBytes(devIn, n), src)
		sameBytes(t, "back", back, want)
	}
	st := e.c.Stats()
	if st.PeakStaging > 2*st.WindowBytes {
		t.Errorf("peak staging %d, above the two windows' %d", st.PeakStaging, 2*st.WindowBytes)
	}
	if st.PeakStaging <= st.WindowBytes {
		t.Errorf("peak staging %d: both directions at once never held more than one window (%d)", st.PeakStaging, st.WindowBytes)
	}
	if n := settledStaging(e.c); n != 0 {
		t.Errorf("%d bytes of staging held after the transfers", n)
	}
}

// TestBothWaysOwnLanes checks that a staged transfer splits its lanes only
// with transfers in its own direction: while a host-to-device transfer
// stages, a device-to-host one still plans (and runs on) all Lanes lanes
// from its direction's standing lanes, and a second host-to-device one
// gets half of them.
func TestBothWaysOwnLanes(t *testing.T) {
	const lanes = 4
	e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 16 * testChunk, Lanes: lanes, DirectBelow: -1, LaneSpin: time.Second})
	e.d.latency.Store(int64(200 * time.Microsecond))
	in := e.c.lanes[HostToDevice]
	in.arrive() // a host-to-device transfer stages throughout
	defer in.leave()
	if active := in.arrive(); active != 2 {
		t.Errorf("a second host-to-device transfer counts %d transfers staging, want 2", active)
	}
	in.leave()
	if active := e.c.lanes[DeviceToHost].arrive(); active != 1 {
		t.Errorf("a device-to-host transfer beside a host-to-device one counts %d transfers staging, want 1", active)
	}
	e.c.lanes[DeviceToHost].leave()

	const n = 64 * testChunk
	want := randomBytes(n, 44)
	dev := e.d.alloc(n)
	if err := e.d.copyHtoD(dev, want); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, n)
	for i := range 3 {
		before := e.c.stats.lanes.Load()
		if i > 0 { // the first transfer wakes the lanes
			// Hold the copies until every lane has joined: the transfer
			// cannot end before them, however they are scheduled.
			hold := func() { spinUntil(func() bool { return e.c.stats.lanes.Load()-before >= lanes }, -1) }
			e.d.hold.Store(&hold)
		}
		err := e.c.FromDevice(context.Background(), back, dev)
		e.d.hold.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "back", back, want)
		if i > 0 {
			if got := e.c.stats.lanes.Load() - before; got != lanes {
				t.Errorf("transfer %d: %d lanes ran beside a host-to-device transfer, want %d", i, got, lanes)
			}
		}
	}
}
