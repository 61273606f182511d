package transfer

import (
	"context"
	"testing"
	"time"
)

// TestCrewJoins checks that the standing lanes join a staged transfer: with
// lanes spinning, every one of Workers lanes runs the next transfer, and
// with spinning off at least one other than the caller wakes up and joins
// a long transfer.
func TestCrewJoins(t *testing.T) {
	for _, tc := range []struct {
		spin     time.Duration
		minLanes int
	}{
		{time.Second, 4},
		{-1, 2},
	} {
		tl := &timeline{}
		e := newEnv(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Workers: 4, DirectBelow: -1, LaneSpin: tc.spin, timeline: tl})
		e.d.latency.Store(int64(200 * time.Microsecond))
		const n = 64 * testChunk
		src := randomBytes(n, 5)
		dev := e.d.alloc(n)
		for i := range 3 {
			if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
				t.Fatal(err)
			}
			if i > 0 { // the first transfer wakes the lanes
				if got := tl.lanes(); got < tc.minLanes || got > 4 {
					t.Errorf("LaneSpin %v, transfer %d: %d lanes ran, want %d to 4", tc.spin, i, got, tc.minLanes)
				}
			}
		}
		sameBytes(t, "device", e.devBytes(dev, n), src)
	}
}

// TestCrewStaleOffer checks that a lane offered a transfer whose caller has
// finished drops the offer instead of running a lane of it.
func TestCrewStaleOffer(t *testing.T) {
	w := newCrew(2, -1)
	defer w.stop()
	r := &stagedRun{} // a lane of it would dereference r.c and panic
	r.closed = true
	w.offer(r, 2)
	deadline := time.Now().Add(5 * time.Second)
	for len(w.jobs) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(w.jobs) > 0 {
		t.Fatal("offers not taken")
	}
	// More offers than the queue holds do not block.
	w2 := newCrew(0, -1)
	defer w2.stop()
	done := make(chan struct{})
	go func() { w2.offer(r, 10); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("offer blocked on a full queue")
	}
}

// TestLaneVariants round-trips with the lanes' alternative ways of calling
// the driver (concurrent issue) and without the cooperative path, which
// the benchmarks compare with the defaults.
func TestLaneVariants(t *testing.T) {
	for _, opt := range []Options{{concurrentIssue: true}, {concurrentIssue: true, coopMax: -1}, {coopMax: -1}} {
		opt.ChunkSize, opt.WindowBytes, opt.Workers, opt.DirectBelow = testChunk, 8*testChunk, 4, -1
		e := newEnv(t, opt)
		e.d.latency.Store(int64(50 * time.Microsecond))
		const n = 30*testChunk + 7
		src := randomBytes(n, 9)
		dev := e.d.alloc(n)
		if err := e.c.ToDevice(context.Background(), dev, src); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, n)
		if err := e.c.FromDevice(context.Background(), back, dev); err != nil {
			t.Fatal(err)
		}
		sameBytes(t, "round trip", back, src)
	}
}
