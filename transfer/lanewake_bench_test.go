//go:build linux

package transfer

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// wakeJob is a transfer offered to lanes in BenchmarkLaneWake: each lane that joins notes how long
// after the offer it came.
type wakeJob struct {
	posted time.Time
	joined atomic.Int32
	after  [8]atomic.Int64 // ns from the offer to each join, in the order of the joins
}

func (j *wakeJob) join() {
	ns := int64(time.Since(j.posted))
	if k := j.joined.Add(1) - 1; int(k) < len(j.after) {
		j.after[k].Store(ns)
	}
}

// futexHelpers are helpers as scripts/ref/paced.cpp's: each sleeps on a futex of its own, on its own
// thread, and the poster wakes each with a system call of its own, so that they wake side by side.
type futexHelpers struct {
	seq  []atomic.Uint32
	job  atomic.Pointer[wakeJob]
	quit atomic.Bool
	wg   sync.WaitGroup
}

const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

func newFutexHelpers(n int) *futexHelpers {
	h := &futexHelpers{seq: make([]atomic.Uint32, n)}
	for i := range n {
		h.wg.Go(func() { h.loop(&h.seq[i]) })
	}
	return h
}

func (h *futexHelpers) loop(seq *atomic.Uint32) {
	seen := seq.Load()
	for {
		v := seq.Load()
		if v == seen {
			syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(seq)), futexWaitPrivate, uintptr(v), 0, 0, 0)
			continue
		}
		seen = v
		if h.quit.Load() {
			return
		}
		h.job.Load().join()
	}
}

// post wakes every helper for j.
func (h *futexHelpers) post(j *wakeJob) {
	h.job.Store(j)
	for i := range h.seq {
		h.seq[i].Add(1)
		syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&h.seq[i])), futexWakePrivate, 1, 0, 0, 0)
	}
}

func (h *futexHelpers) stop() {
	h.quit.Store(true)
	for i := range h.seq {
		h.seq[i].Add(1)
		syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(&h.seq[i])), futexWakePrivate, 1, 0, 0, 0)
	}
	h.wg.Wait()
}

// BenchmarkLaneWake measures what a paced frame pays to wake lanes asleep, without a GPU: how long
// after the offer each of n lanes joins, the standing lanes (offer, which wakes each lane with a
// channel send: the runtime puts it on the offering goroutine's processor and starts one thread at
// a time to take it) beside helpers woken as scripts/ref/paced.cpp wakes its threads (a futex each,
// a system call each). The caller spins until every lane has joined, as a cooperative download's
// caller spins for its first chunk; each offer comes after a pause longer than Options.LaneSpin.
// It reports the mean delay of the first, the middle and the last lane to join (first-ns,
// mid-ns, last-ns) and the process's CPU time per offer until the last join (cpu-ns/offer, the
// caller's spin among it). It needs no GPU, but only a host with a processor for every lane tells of
// the GPU host: run it there beside BenchmarkPacedFrames (paced.cpp's join-us is the same delay).
func BenchmarkLaneWake(b *testing.B) {
	defer allCPUs()()
	const pause = 2 * time.Millisecond
	for _, way := range []string{"lanes", "futex"} {
		for _, n := range []int{1, 3, 7} {
			b.Run(fmt.Sprintf("%s/lanes=%d", way, n), func(b *testing.B) {
				defer allCPUs()()
				var post func(*wakeJob)
				if way == "lanes" {
					l := newStandingLanes(n, DefaultLaneSpin)
					defer l.stop()
					post = func(j *wakeJob) { l.offer(j, n) }
				} else {
					h := newFutexHelpers(n)
					defer h.stop()
					post = h.post
				}
				var sum [3]time.Duration
				var cpu time.Duration
				for b.Loop() {
					time.Sleep(pause)
					cpu0 := cpuTime(b)
					j := &wakeJob{posted: time.Now()}
					post(j)
					spinUntil(func() bool { return int(j.joined.Load()) == n }, -1)
					cpu += cpuTime(b) - cpu0
					after := make([]time.Duration, n)
					for k := range after {
						after[k] = time.Duration(j.after[k].Load())
					}
					slices.Sort(after)
					sum[0] += after[0]
					sum[1] += after[n/2]
					sum[2] += after[n-1]
				}
				N := time.Duration(b.N)
				b.ReportMetric(float64(sum[0]/N), "first-ns")
				b.ReportMetric(float64(sum[1]/N), "mid-ns")
				b.ReportMetric(float64(sum[2]/N), "last-ns")
				b.ReportMetric(float64(cpu/N), "cpu-ns/offer")
			})
		}
	}
}
