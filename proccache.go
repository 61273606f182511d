package pinpool

import (
	"runtime"
	"sync"
	"unsafe"
	_ "unsafe" // go:linkname
)

// runtimeProcPin returns the index of the P (logical processor) the calling
// goroutine runs on and disables preemption until runtimeProcUnpin: while
// pinned, no other goroutine runs on that P, so data indexed by it has a
// single user. sync.Pool is built on the same two functions.
//
//go:linkname runtimeProcPin runtime.procPin
func runtimeProcPin() int

//go:linkname runtimeProcUnpin runtime.procUnpin
func runtimeProcUnpin()

const (
	// cacheLine is the unit the per-processor data is padded to: two
	// 64-byte lines, since x86 processors fetch lines in adjacent pairs.
	cacheLine = 128
	// privCap is how many idle buffers a processor keeps for itself.
	privCap = 4
	// stackCap is how many more it keeps where other processors may take
	// them; beyond that, half the stack moves to the central list.
	stackCap = 8
)

// procCache holds the idle buffers of one size class, in three tiers:
//
//   - a private array per processor (P), used only by the goroutine pinned
//     to that P, with no atomic operation and no lock: Get and Release of a
//     buffer the processor already holds touch nothing else;
//   - a small locked stack per processor, which others may steal from;
//   - a central locked list, for what the processors do not keep.
//
// Entries are hints (see entry): a slot is handed out only by the
// compare-and-swap of its state word, so an entry whose slot was taken by
// someone else (a scan of the chunks, a trim) is dropped when met. Only the
// private arrays are out of reach of other processors; the pool's scans of
// the chunks (findIdle, trim, Stats) read the slots themselves and so see
// every idle buffer, private or not.
//
// Locks: each stack's mutex and the central mutex are leaves. No code
// holds two of them at once, and none takes another lock while holding
// one. Callers may hold core.mu when they call in (core.mu comes first).
type procCache struct {
	locals  []local // indexed by P; the slice itself is never written after init
	_       [cacheLine]byte
	central stack
}

// stack is a locked LIFO of entries.
type stack struct {
	mu    sync.Mutex
	items []entry
}

// localData is one processor's share of a procCache.
type localData struct {
	owner ownerLock // no-op, except under the race detector (race.go)
	n     int       // entries in priv; the pinned P's only
	priv  [privCap]entry
	stack stack
}

// local pads localData to whole cache lines, so that two processors never
// write to one line.
type local struct {
	localData
	_ [(cacheLine - unsafe.Sizeof(localData{})%cacheLine) % cacheLine]byte
}

func (pc *procCache) init() {
	pc.locals = make([]local, runtime.GOMAXPROCS(0))
}

// get hands out an idle buffer of the calling processor, or returns a zero
// entry. It is the pool's fast path: a pin, a few plain loads and stores,
// and the compare-and-swap that claims the slot.
func (pc *procCache) get() entry {
	pid := runtimeProcPin()
	if pid < len(pc.locals) {
		l := &pc.locals[pid]
		l.owner.lock()
		for l.n > 0 {
			l.n--
			e := l.priv[l.n]
			l.priv[l.n] = entry{}
			if e.s.claim(e.gen) {
				l.owner.unlock()
				runtimeProcUnpin()
				return e
			}
		}
		l.owner.unlock()
	}
	runtimeProcUnpin()
	return entry{}
}

// put caches a released idle buffer on the calling processor: in its
// private array, else its stack, spilling half the stack to the central
// list when full.
func (pc *procCache) put(e entry) {
	pid := runtimeProcPin()
	if pid < len(pc.locals) {
		l := &pc.locals[pid]
		l.owner.lock()
		if l.n < privCap {
			l.priv[l.n] = e
			l.n++
			l.owner.unlock()
			runtimeProcUnpin()
			return
		}
		l.owner.unlock()
		runtimeProcUnpin()
		// The goroutine may run on another P from here: any stack will do.
		st := &l.stack
		st.mu.Lock()
		if len(st.items) < stackCap {
			st.items = append(st.items, e)
			st.mu.Unlock()
			return
		}
		var spill [stackCap / 2]entry
		k := copy(spill[:], st.items[len(st.items)-len(spill):])
		clear(st.items[len(st.items)-k:])
		st.items = append(st.items[:len(st.items)-k], e)
		st.mu.Unlock()
		pc.central.push(spill[:k]...)
		return
	}
	runtimeProcUnpin()
	pc.central.push(e)
}

// putShared caches an idle buffer in the central list, for buffers that
// the pool itself returns (completed fences, fresh growth).
func (pc *procCache) putShared(es ...entry) { pc.central.push(es...) }

// getShared hands out an idle buffer from the calling processor's stack,
// the central list or another processor's stack, or returns a zero entry.
func (pc *procCache) getShared() entry {
	pid := runtimeProcPin()
	runtimeProcUnpin()
	if pid < len(pc.locals) {
		if e := pc.locals[pid].stack.pop(); e.s != nil {
			return e
		}
	}
	if e := pc.central.pop(); e.s != nil {
		return e
	}
	for i := range pc.locals {
		if e := pc.locals[i].stack.pop(); e.s != nil {
			return e
		}
	}
	return entry{}
}

// clean drops the entries of the shared tiers that no longer lead to an
// idle slot (freed chunks, slots taken by a scan). Private arrays drop
// theirs when their processor meets them.
func (pc *procCache) clean() {
	pc.central.clean()
	for i := range pc.locals {
		pc.locals[i].stack.clean()
	}
}

func (st *stack) push(es ...entry) {
	st.mu.Lock()
	st.items = append(st.items, es...)
	st.mu.Unlock()
}

// pop claims the newest entry that still leads to an idle slot, dropping
// the stale ones above it.
func (st *stack) pop() entry {
	st.mu.Lock()
	defer st.mu.Unlock()
	for k := len(st.items) - 1; k >= 0; k-- {
		e := st.items[k]
		st.items[k] = entry{}
		st.items = st.items[:k]
		if e.s.claim(e.gen) {
			return e
		}
	}
	return entry{}
}

func (st *stack) clean() {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.items[:0]
	for _, e := range st.items {
		if e.valid() {
			out = append(out, e)
		}
	}
	clear(st.items[len(out):])
	st.items = out
}
