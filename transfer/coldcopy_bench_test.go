package transfer

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkColdCopy copies 64 MiB in 2 MiB chunks into a 32 MiB window
// of "staging" (ordinary memory, reused round robin) with 1 to 15
// goroutines at once, the way a chunked upload's lanes do: the CPU side
// of a staged upload, without a GPU. The source is:
//   - warm: the same 64 MiB every time, which stays in the last-level
//     cache;
//   - after-2ms, after-10ms, after-35ms: the same 64 MiB after the process
//     slept that long;
//   - busy-35ms: the same, after 35 ms in which the copying goroutines
//     kept their processors busy without touching memory;
//   - touched-35ms: the same, after 35 ms asleep and one goroutine's read
//     of a byte in each 4 KiB page of the source and the staging (timed
//     apart: touch-us);
//   - cold: the next 64 MiB of a 1 GiB buffer, read from memory.
//
// It reports GB/s of the copies alone.
func BenchmarkColdCopy(b *testing.B) {
	const n, chunk, window, total = 64 << 20, 2 << 20, 32 << 20, 1 << 30
	big := randomBytes(total, 26)
	staging := make([]byte, window)
	for _, src := range []string{"warm", "after-2ms", "after-10ms", "after-35ms", "busy-35ms", "touched-35ms", "cold"} {
		for _, k := range []int{1, 4, 8, 12, 15} {
			if k > runtime.GOMAXPROCS(0) {
				continue
			}
			b.Run(fmt.Sprintf("%s/goroutines=%d", src, k), func(b *testing.B) {
				var took, touch time.Duration
				i := 0
				for b.Loop() {
					mem := big[:n]
					switch src {
					case "cold":
						i = (i + 1) % (total / n)
						mem = big[i*n : (i+1)*n]
					case "after-2ms":
						time.Sleep(2 * time.Millisecond)
					case "after-10ms":
						time.Sleep(10 * time.Millisecond)
					case "after-35ms":
						time.Sleep(35 * time.Millisecond)
					case "busy-35ms":
						busyFor(k, 35*time.Millisecond)
					case "touched-35ms":
						time.Sleep(35 * time.Millisecond)
						t0 := time.Now()
						touchPages(mem)
						touchPages(staging)
						touch += time.Since(t0)
					}
					t0 := time.Now()
					var next atomic.Int64
					var wg sync.WaitGroup
					for range k {
						wg.Go(func() {
							for {
								c := int(next.Add(1) - 1)
								if c*chunk >= n {
									return
								}
								s := (c * chunk) % window
								copyBytes(staging[s:s+chunk], mem[c*chunk:(c+1)*chunk], true)
							}
						})
					}
					wg.Wait()
					took += time.Since(t0)
				}
				b.ReportMetric(float64(n)*float64(b.N)/took.Seconds()/1e9, "GB/s")
				if touch > 0 {
					b.ReportMetric(float64(touch.Microseconds())/float64(b.N), "touch-us")
				}
			})
		}
	}
}

// busyFor keeps k goroutines busy for d without touching memory.
func busyFor(k int, d time.Duration) {
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range k {
		wg.Go(func() {
			for time.Now().Before(end) {
			}
		})
	}
	wg.Wait()
}

// touchSink keeps touchPages's reads.
var touchSink byte

// touchPages reads one byte of every 4 KiB page of b.
func touchPages(b []byte) {
	var x byte
	for i := 0; i < len(b); i += 4096 {
		x ^= b[i]
	}
	touchSink = x
}
