package transfer

import "sync"

// minPiece is the smallest part of a copy given to one worker: below it the
// hand-off costs more than the parallelism gains.
const minPiece = 256 << 10

// workers copy between pageable memory and staging buffers in parallel. A
// copy is split into up to n pieces; the calling goroutine copies the first
// and n-1 long-lived goroutines the others. A piece no worker is free to
// take is copied by the caller, so copies never wait for a worker.
type workers struct {
	n    int
	jobs chan copyJob
	wg   sync.WaitGroup
}

type copyJob struct {
	dst, src []byte
	done     *sync.WaitGroup
}

func newWorkers(n int) *workers {
	w := &workers{n: max(n, 1)}
	if w.n > 1 {
		w.jobs = make(chan copyJob, w.n)
		for range w.n - 1 {
			w.wg.Add(1)
			go w.run()
		}
	}
	return w
}

func (w *workers) run() {
	defer w.wg.Done()
	for j := range w.jobs {
		copy(j.dst, j.src)
		j.done.Done()
	}
}

// copy copies min(len(dst), len(src)) bytes from src into dst with up to
// n goroutines.
func (w *workers) copy(dst, src []byte) {
	n := min(len(dst), len(src))
	parts := min(w.n, n/minPiece)
	if parts <= 1 {
		copy(dst[:n], src[:n])
		return
	}
	piece := (n/parts + 63) &^ 63 // whole cache lines
	var wg sync.WaitGroup
	for off := piece; off < n; off += piece {
		end := min(off+piece, n)
		wg.Add(1)
		select {
		case w.jobs <- copyJob{dst: dst[off:end], src: src[off:end], done: &wg}:
		default:
			copy(dst[off:end], src[off:end])
			wg.Done()
		}
	}
	copy(dst[:piece], src[:piece])
	wg.Wait()
}

// stop ends the worker goroutines; no copy may run or start.
func (w *workers) stop() {
	if w.jobs != nil {
		close(w.jobs)
		w.wg.Wait()
	}
}
