package transfer

import (
	"sync"
	"time"
)

// step is a point in the life of a staged chunk, for timeline.
type step int

// Steps of a staged chunk, in order.
const (
	stepLane   step = iota // a lane started
	stepStaged             // it holds a window slot and a staging buffer
	stepCopied             // host to device: the chunk is in the staging buffer
	stepIssued             // its copy and event are queued
	stepSynced             // its event has completed
	stepDone               // device to host: copied out; buffer and slot given back
	numSteps
)

var stepNames = [numSteps]string{"lane", "staged", "copied", "issued", "synced", "done"}

// timeline records, for the benchmarks that look inside the staged path
// (BenchmarkStagedTimeline), the first and last time each step happened in
// a transfer, from its start. Production copiers have none: a nil
// *timeline records nothing.
type timeline struct {
	mu          sync.Mutex
	start       time.Time
	first, last [numSteps]time.Duration
	seen        [numSteps]bool
	count       [numSteps]int
}

// reset starts a new transfer's timeline.
func (t *timeline) reset() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.start = time.Now()
	t.first, t.last, t.seen, t.count = [numSteps]time.Duration{}, [numSteps]time.Duration{}, [numSteps]bool{}, [numSteps]int{}
	t.mu.Unlock()
}

// mark records that step s happened now.
func (t *timeline) mark(s step) {
	if t == nil {
		return
	}
	d := time.Since(t.start)
	t.mu.Lock()
	if !t.seen[s] || d < t.first[s] {
		t.first[s] = d
	}
	if d > t.last[s] {
		t.last[s] = d
	}
	t.seen[s] = true
	t.count[s]++
	t.mu.Unlock()
}

// lanes returns the number of lanes the last transfer ran on.
func (t *timeline) lanes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count[stepLane]
}

// snapshot returns the first and last times of each step.
func (t *timeline) snapshot() (first, last [numSteps]time.Duration, seen [numSteps]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first, t.last, t.seen
}
