package pinpool

import (
	"sync/atomic"
	"unsafe"
)

// A slot's state word holds its generation and its state: gen<<stateBits |
// state. The word is the single source of truth about a buffer: the caches
// hold (slot, generation) entries that are only hints, and whoever moves a
// slot from one state to another does so with one compare-and-swap on the
// word, so that exactly one party wins. The generation moves on by one at
// every release; a Buffer handle carries the generation it was handed out
// with, and is live only while the word reads (that generation, inUse).
const (
	stIdle    = 0 // in the pool, ready to hand out
	stInUse   = 1 // handed out
	stPending = 2 // released with a fence that has not completed
	stRetired = 3 // its fence failed: never handed out again
	stFreed   = 4 // its chunk was given back to the backend
	stBusy    = 5 // released; the pool is poisoning it (Options.Debug)

	stateBits = 3
	stateMask = 1<<stateBits - 1
)

func word(gen uint64, st uint64) uint64 { return gen<<stateBits | st }

// idleState reports whether a slot in state st counts as idle: ready, or
// released and being poisoned (Debug).
func idleState(st uint64) bool { return st == stIdle || st == stBusy }

// freeableState reports whether a slot in state st lets its chunk be
// freed: idle, or retired after a failed fence.
func freeableState(st uint64) bool { return st == stIdle || st == stRetired }

func genOf(w uint64) uint64   { return w >> stateBits }
func stateOf(w uint64) uint64 { return w & stateMask }

// served is how many times the slot was handed out, read from its word: a
// release moves the generation on, so every hand-out that ended is counted
// in the generation, and one more while the slot is in use. The figure
// never goes back as the slot moves between states.
func served(w uint64) uint64 {
	if stateOf(w) == stInUse {
		return genOf(w) + 1
	}
	return genOf(w)
}

// slot is one buffer's place in a chunk.
type slot struct {
	state atomic.Uint64
	ptr   unsafe.Pointer
	off   uintptr // offset in the chunk
	chunk *chunk
	_     [cacheLine/2 - 32]byte // one slot per 64-byte line: buffers of one slab go to different processors
}

// claim moves the slot from idle to in use if it still has generation gen:
// the hand-out of an entry taken from a cache.
func (s *slot) claim(gen uint64) bool {
	return s.state.CompareAndSwap(word(gen, stIdle), word(gen, stInUse))
}

// claimAny hands out the slot if it is idle, whatever its generation: the
// scan that finds idle buffers no cache entry leads to.
func (s *slot) claimAny() (gen uint64, ok bool) {
	w := s.state.Load()
	if stateOf(w) != stIdle {
		return 0, false
	}
	return genOf(w), s.state.CompareAndSwap(w, word(genOf(w), stInUse))
}

// entry is a cached reference to an idle slot: valid while the slot is
// still idle with that generation.
type entry struct {
	s   *slot
	gen uint64
}

// valid reports whether the entry still leads to an idle slot.
func (e entry) valid() bool { return e.s.state.Load() == word(e.gen, stIdle) }

// chunk is one backend allocation, carved into equal slots.
type chunk struct {
	alloc  Allocation
	class  *class
	bytes  int64
	slots  []slot
	devPtr uintptr // device address of the chunk, when mapped
	mapped bool
	freed  bool  // given back to the backend (under core.mu)
	huge   int64 // bytes backed by huge pages, as the allocation said when made

	// aging state, the janitor's only
	genSum      uint64 // sum of the slots' generations when last looked at
	unusedSince int64  // unix ns since when no slot was handed out, 0: in use
}

// claimForFree moves every idle slot of the chunk to freed, if every slot
// is idle or retired; otherwise it changes nothing and returns false. The
// caller holds core.mu, so Stats never sees a half-claimed chunk. Slots
// that a concurrent Get took between the look and the claim make it give
// up: it puts back what it claimed, into the central list, since the
// caches may have dropped their entries for it meanwhile.
func (ch *chunk) claimForFree() bool {
	for i := range ch.slots {
		if !freeableState(stateOf(ch.slots[i].state.Load())) {
			return false
		}
	}
	for i := range ch.slots {
		s := &ch.slots[i]
		w := s.state.Load()
		if stateOf(w) == stRetired {
			continue
		}
		if stateOf(w) == stIdle && s.state.CompareAndSwap(w, word(genOf(w), stFreed)) {
			continue
		}
		for j := range i {
			t := &ch.slots[j]
			if w := t.state.Load(); stateOf(w) == stFreed {
				t.state.Store(word(genOf(w), stIdle))
				ch.class.cache.putShared(entry{t, genOf(w)})
			}
		}
		return false
	}
	return true
}

// servedSum is the hand-outs of all of the chunk's slots.
func (ch *chunk) servedSum() uint64 {
	var n uint64
	for i := range ch.slots {
		n += served(ch.slots[i].state.Load())
	}
	return n
}
