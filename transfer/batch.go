package transfer

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pinpool/pinpool/cuda"
)

// Step 4 of a chunked transfer: its chunks are issued through an issue
// queue, host to device in batches of two. The copy engine spends a few
// microseconds between one asynchronous copy and the next, which makes a
// transfer in 2 MiB copies measurably slower than one copy of the same
// memory (BenchmarkChunkedDMA). Copies queued together as one batch
// (cuMemcpyBatchAsync) run back to back, wherever the host side of each
// copy is (docs/results/2026-12-01-dma-ceiling.md has the figures).
//
// So a lane whose chunk is ready while the stream still has batches
// queued ahead of it hands the chunk to the copier's issue queue as a
// parked ticket instead of issuing it; the next chunk ready, from any
// lane, is issued with it in one batch. The DMA has work meanwhile, and a
// lane that must wait for a parked chunk, or has no chunk left to claim,
// issues the queue first (flush), so that no chunk waits for a lane that
// never comes. Which directions batch, how many chunks to a batch and
// when a chunk may be parked are tuning (tuning.go). Everything here runs
// under the issue lock of the chunks' direction.

// ticket is one chunk's copy handed to the issue queue.
type ticket struct {
	dir  Direction
	dev  cuda.DevicePtr
	host []byte
	off  int // the chunk's offset in its transfer, for errors

	// issued is set once the ticket's batch was issued, after ev or err.
	issued atomic.Bool
	ev     *sharedEvent // recorded after the ticket's batch
	err    error        // the issue failed
	// unsure: the issue failed and the stream could not be synchronized
	// after it, so the device may still use host.
	unsure bool
}

// sharedEvent is the event recorded after one batch, shared by the batch's
// tickets and the queue's list of recent batches; the last of them to let
// go of it gives it back to the copier.
type sharedEvent struct {
	ev   event
	refs atomic.Int32
	bad  atomic.Bool // it reported a failure: destroy it rather than reuse it
}

// issueQueue is one direction's parked tickets and the events of its last
// batches, oldest first.
type issueQueue struct {
	parked []*ticket
	recent []*sharedEvent
}

// busy reports whether the stream has depth batches or more still queued:
// the batch issued depth batches ago has not completed.
func (q *issueQueue) busy(depth int) bool {
	if depth <= 0 || len(q.recent) < depth {
		return false
	}
	done, err := q.recent[len(q.recent)-depth].ev.Done()
	return err == nil && !done
}

// batching reports whether the copier parks chunks of direction d to
// issue them in batches: tuning.batchMax of two or more and a driver with
// batch copies that has not refused one (enqueueBatch).
func (c *Copier) batching(d Direction) bool { return c.tune.batchMax[d] > 1 && c.canBatch.Load() }

// issueChunk hands the copy of host, the chunk at offset off of o, to the
// issue queue: it parks the chunk when mayPark, the stream is busy and the
// queue holds fewer than batchMax-1 tickets, and otherwise issues it at
// once with the tickets parked before it. The error is that of an issue this
// call made of the ticket; a parked ticket's issue error is the one its
// wait returns.
func (c *Copier) issueChunk(o op, off int, host []byte, mayPark bool) (*ticket, error) {
	t := &ticket{dir: o.dir, dev: o.dev + cuda.DevicePtr(off), host: host, off: off}
	c.issuing[o.dir].lock()
	defer c.issuing[o.dir].unlock()
	q := &c.queues[o.dir]
	if mayPark && c.batching(o.dir) && len(q.parked)+1 < c.tune.batchMax[o.dir] && q.busy(c.tune.batchDepth) {
		q.parked = append(q.parked, t)
		c.stats.parked.Add(1)
		return t, nil
	}
	c.issueParked(o.dir, t)
	return t, t.err
}

// flush issues the tickets parked in direction d, if any.
func (c *Copier) flush(d Direction) {
	c.issuing[d].lock()
	defer c.issuing[d].unlock()
	c.issueParked(d, nil)
}

// issueParked issues the tickets parked in direction d and t (when not
// nil) as one batch, and marks each issued, with its error when the issue
// failed. The caller holds the issue lock.
func (c *Copier) issueParked(d Direction, t *ticket) {
	q := &c.queues[d]
	ts := q.parked
	if t != nil {
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return
	}
	ev, err, unsure := c.issueBatch(d, ts)
	for _, x := range ts {
		if err != nil {
			x.err, x.unsure = copyErr(d, PathStaged, x.off, len(x.host), err), unsure
		} else {
			x.ev = ev
		}
		x.issued.Store(true)
	}
	clear(ts)
	q.parked = ts[:0]
	if ev == nil {
		return
	}
	q.recent = append(q.recent, ev)
	if len(q.recent) > max(c.tune.batchDepth, 1) {
		c.unref(q.recent[0])
		q.recent = append(q.recent[:0], q.recent[1:]...)
	}
}

// issueBatch queues the copies of ts on a stream of direction d, one
// asynchronous copy or one batch, and records an event after them. The
// event is shared by the tickets and the queue's recent list. On failure
// it returns the error, having waited for the stream where copies may
// have been queued; unsure reports that the wait failed too.
func (c *Copier) issueBatch(d Direction, ts []*ticket) (_ *sharedEvent, _ error, unsure bool) {
	ev, err := c.events.get()
	if err != nil {
		return nil, fmt.Errorf("creating an event: %w", err), false
	}
	s := c.stream(d)
	// Part of a batch may have been queued before a failure.
	err, syncErr := c.queueAndRecord(s, ev, len(ts) > 1, func() error {
		if len(ts) == 1 {
			return enqueueCopy(s, d, ts[0].dev, ts[0].host)
		}
		return c.enqueueBatch(s, d, ts)
	})
	if err != nil {
		if syncErr != nil {
			return nil, errors.Join(err, syncErr), true
		}
		return nil, err, false
	}
	se := &sharedEvent{ev: ev}
	se.refs.Store(int32(len(ts)) + 1) // the tickets and the recent list
	return se, nil, false
}

// enqueueBatch queues the copies of ts on s as one batch. A driver may
// have cuMemcpyBatchAsync and still refuse it, with
// CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_INVALID_VALUE, where it takes the
// same copies one at a time: the copies then go out one by one, and once
// they have, the copier issues every later chunk on its own
// (Stats.BatchFallbacks). Part of the refused batch may have been queued;
// the copies queued after it, in stream order, move the same bytes to the
// same place. If a copy is refused too, its error is returned and the
// copier goes on batching: the batch was not the cause.
func (c *Copier) enqueueBatch(s stream, d Direction, ts []*ticket) error {
	copies := make([]chunkCopy, len(ts))
	for i, x := range ts {
		copies[i] = chunkCopy{dev: x.dev, host: x.host}
	}
	err := s.copyBatchAsync(d, copies)
	if err == nil {
		c.stats.batched.Add(uint64(len(ts)))
		return nil
	}
	if !errors.Is(err, cuda.ErrNotSupported) && !errors.Is(err, cuda.ErrInvalidValue) {
		return err
	}
	for _, x := range copies {
		if err := enqueueCopy(s, d, x.dev, x.host); err != nil {
			return err
		}
	}
	if c.canBatch.Swap(false) {
		c.stats.batchFallbacks.Add(1)
	}
	return nil
}

// unref lets go of a shared event: the last one gives it back.
func (c *Copier) unref(se *sharedEvent) {
	if se.refs.Add(-1) != 0 {
		return
	}
	if se.bad.Load() {
		c.events.drop(se.ev)
		return
	}
	c.events.put(se.ev)
}

// wait returns once t's copy has completed, issuing the parked tickets
// first if t is among them, and returns t's issue error (t.err: then the
// copy never ran, unless t.unsure) or the copy's error. It waits in the
// driver: polling the event and yielding in between did no better.
func (c *Copier) wait(t *ticket) error {
	if !t.issued.Load() {
		c.flush(t.dir)
	}
	if t.err != nil {
		return t.err
	}
	err := t.ev.ev.synchronize()
	if err != nil {
		t.ev.bad.Store(true)
	}
	c.unref(t.ev)
	return err
}

// closeQueues lets go of the recent batches' events when the copier
// closes; every lane has waited for its tickets by then.
func (c *Copier) closeQueues() {
	for d := range c.queues {
		q := &c.queues[d]
		for _, se := range q.recent {
			c.unref(se)
		}
		q.recent = nil
	}
}
