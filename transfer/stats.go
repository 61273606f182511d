package transfer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a copier's counters. Times are wall-clock times of whole transfers, from
// the call to the last byte in place; transfers that run at once overlap, so Bytes/Time of a path
// is the average speed of one transfer, not the copier's aggregate throughput.
type Stats struct {
	ToDevice   DirectionStats // host-to-device copies
	FromDevice DirectionStats // device-to-host copies

	Chunks          uint64        // staging chunks issued
	StagingWaits    uint64        // chunks that waited for a window slot
	StagingWaitTime time.Duration // total time spent waiting for one
	// StagingBytes is the staging held now, both directions; a download's lanes may give it back
	// just after the download returns.
	StagingBytes int64
	PeakStaging  int64 // the most staging memory held at once, both directions
	WindowBytes  int64 // one direction's bound: slots * ChunkSize (both ways at once, or a file load that takes the other window's free slots: twice this)

	Failed   uint64 // transfers that returned an error other than cancellation
	Canceled uint64 // transfers cut short by their context

	Last LastTransfer // the last transfer that finished without error
}

// DirectionStats counts one direction's transfers by path. Stream counts the stream and file
// transfers, each call as one transfer of its bytes, timed from the call to its return.
type DirectionStats struct {
	Direct, Staged, Pinned, Registered, Stream PathStats
}

// Total sums the paths.
func (d DirectionStats) Total() (t PathStats) {
	for _, p := range []PathStats{d.Direct, d.Staged, d.Pinned, d.Registered, d.Stream} {
		t.Transfers, t.Bytes, t.Time = t.Transfers+p.Transfers, t.Bytes+p.Bytes, t.Time+p.Time
	}
	return t
}

// PathStats counts the transfers of one direction and path that finished without error.
type PathStats struct {
	Transfers uint64
	Bytes     int64
	Time      time.Duration
}

// GBps is the cumulative bandwidth, Bytes/Time in 10^9 bytes per second (0 before any transfer).
func (p PathStats) GBps() float64 {
	if p.Time <= 0 {
		return 0
	}
	return float64(p.Bytes) / p.Time.Seconds() / 1e9
}

// LastTransfer describes one finished transfer.
type LastTransfer struct {
	Direction Direction
	Path      Path
	Bytes     int64
	Time      time.Duration
}

// GBps is the transfer's achieved bandwidth in 10^9 bytes per second.
func (l LastTransfer) GBps() float64 { return PathStats{Bytes: l.Bytes, Time: l.Time}.GBps() }

// counters are the copier's live counters.
type counters struct {
	chunks           atomic.Uint64
	lanes            atomic.Uint64 // lanes that worked on staged transfers, callers included
	helped           atomic.Uint64 // stripes of shared copy-outs copied by a lane that did not own the chunk
	handedOff        atomic.Uint64 // downloads whose staging a lane gave back after the caller returned (coop.go)
	failed, canceled atomic.Uint64
	mu               sync.Mutex // path and last
	path             [2][numPaths]PathStats
	last             LastTransfer
}

// count counts a transfer of n bytes (d, p) that ended with err after dt, ctx's error a cancel.
func (c *counters) count(ctx context.Context, err error, d Direction, p Path, n int, dt time.Duration) {
	if err != nil {
		counter := &c.failed
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			counter = &c.canceled
		}
		counter.Add(1)
		return
	}
	c.mu.Lock()
	ps := &c.path[d][p]
	ps.Transfers, ps.Bytes, ps.Time = ps.Transfers+1, ps.Bytes+int64(n), ps.Time+dt
	c.last = LastTransfer{Direction: d, Path: p, Bytes: int64(n), Time: dt}
	c.mu.Unlock()
}
