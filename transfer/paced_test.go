//go:build linux

package transfer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPacedOrder checks that each round of BenchmarkPacedFrames's turns holds every way once, and
// that the rounds are not all in one order.
func TestPacedOrder(t *testing.T) {
	const ways, rounds = 5, 40
	order := pacedOrder(rand.New(rand.NewPCG(1, 2)), ways, rounds)
	if len(order) != ways*rounds {
		t.Fatalf("%d turns, want %d", len(order), ways*rounds)
	}
	varied := false
	for r := range rounds {
		round := slices.Clone(order[r*ways : (r+1)*ways])
		varied = varied || !slices.Equal(round, order[:ways])
		slices.Sort(round)
		if !slices.Equal(round, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("round %d holds ways %v", r, order[r*ways:(r+1)*ways])
		}
	}
	if !varied {
		t.Errorf("all %d rounds in the order %v", rounds, order[:ways])
	}
}

// TestPacedRun checks BenchmarkPacedFrames's stream against a fake frame and CPU clock: each frame
// starts no sooner than its deadline and goes to its way, and the CPU time spent in a frame (here
// all the CPU time there is) goes to that frame's way, user and system apart.
func TestPacedRun(t *testing.T) {
	const period = 2 * time.Millisecond
	order := pacedOrder(rand.New(rand.NewPCG(3, 4)), 3, 6)
	var user, sys time.Duration
	cpu := func() (time.Duration, time.Duration) { return user, sys }
	t0 := time.Now().Add(time.Millisecond)
	next := 0
	frame := func(way, i int) error {
		if i != next || way != order[i] {
			t.Fatalf("frame %d of way %d, want frame %d of way %d", i, way, next, order[next])
		}
		next++
		if late := time.Since(t0.Add(time.Duration(i) * period)); late < 0 {
			t.Errorf("frame %d starts %v before its deadline", i, -late)
		}
		user += time.Duration(way+1) * time.Millisecond
		sys += time.Duration(way+1) * time.Microsecond
		time.Sleep(time.Duration(way) * 100 * time.Microsecond)
		return nil
	}
	st := make([]pacedStats, 3)
	if err := pacedRun(t0, period, order, frame, cpu, st); err != nil {
		t.Fatal(err)
	}
	if next != len(order) {
		t.Fatalf("%d frames moved, want %d", next, len(order))
	}
	for k, s := range st {
		if len(s.wall) != 6 {
			t.Errorf("way %d: %d frames, want 6", k, len(s.wall))
		}
		sum := s.summary()
		if want := float64(time.Duration(k+1) * time.Millisecond); sum.cpu != want+float64(time.Duration(k+1)*time.Microsecond) {
			t.Errorf("way %d: %v CPU per frame, want %v", k, time.Duration(sum.cpu), time.Duration(want)+time.Duration(k+1)*time.Microsecond)
		}
		if want := float64(time.Duration(k+1) * time.Microsecond); sum.sys != want {
			t.Errorf("way %d: %v system time per frame, want %v", k, time.Duration(sum.sys), time.Duration(want))
		}
		if min := float64(time.Duration(k) * 100 * time.Microsecond); sum.p50 < min || sum.mean < min {
			t.Errorf("way %d: wall time per frame %v (median %v), less than its sleep %v", k, time.Duration(sum.mean), time.Duration(sum.p50), time.Duration(min))
		}
	}

	failed := errors.New("frame failed")
	err := pacedRun(time.Now(), period, order, func(int, int) error { return failed }, cpu, st)
	if !errors.Is(err, failed) {
		t.Errorf("pacedRun of a failing frame: %v, want %v", err, failed)
	}
}

// TestPacedSummary checks a way's figures from known wall times.
func TestPacedSummary(t *testing.T) {
	var s pacedStats
	for i := 100; i >= 1; i-- {
		s.wall = append(s.wall, time.Duration(i))
	}
	s.cpu, s.sys = 1000, 300
	got := s.summary()
	want := pacedSummary{mean: 50.5, p50: 51, p99: 99, cpu: 10, sys: 3}
	if got != want {
		t.Errorf("summary %+v, want %+v", got, want)
	}
	if (pacedStats{}).summary() != (pacedSummary{}) {
		t.Errorf("summary of no frames is not zero")
	}
}

// TestPickPacedWays checks that the driver's way comes first and always, and that the expression
// picks the copiers.
func TestPickPacedWays(t *testing.T) {
	names := func(ws []frameWay) []string {
		var n []string
		for _, w := range ws {
			n = append(n, w.name)
		}
		return n
	}
	all, err := pickPacedWays("")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(pacedWays) || all[0].name != "driver" {
		t.Errorf("all ways: %v", names(all))
	}
	some, err := pickPacedWays("=(default|cold-3)$")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(some); !slices.Equal(got, []string{"driver", "copier=default", "copier=cold-3"}) {
		t.Errorf("picked %v", got)
	}
	if _, err := pickPacedWays("("); err == nil {
		t.Errorf("a bad expression gave no error")
	}
}
