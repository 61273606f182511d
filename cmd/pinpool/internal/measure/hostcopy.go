package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/pinpool/pinpool/internal/units"
)

// minCopyPart is the smallest part one goroutine copies: below it, the
// cost of handing out the work hides the copy.
const minCopyPart = 64 << 10

// hostCopies measures the host memory copy bandwidth for every size and
// thread count of the plan: the ceiling of staging on this machine. A
// thread count that would give a goroutine less than minCopyPart of a
// size is measured with as many goroutines as the size allows, once.
func hostCopies(ctx context.Context, p Plan, r *Report, prog *progress) error {
	for _, size := range p.CopySizes {
		src, dst := make([]byte, size), make([]byte, size)
		if err := prepareCopy(ctx, src, dst); err != nil {
			return err
		}
		done := map[int]bool{}
		for _, want := range p.CopyThreads {
			if err := ctx.Err(); err != nil {
				return err
			}
			threads := int(max(1, min(int64(want), size/minCopyPart)))
			if done[threads] {
				prog.step("host copy %s: %d goroutines as %d", units.Size(size), want, threads)
				continue
			}
			done[threads] = true
			row, err := hostCopyRow(ctx, p, src, dst, threads)
			if err != nil {
				return err
			}
			r.HostCopies = append(r.HostCopies, row)
			prog.step("host copy %s, %d goroutines", units.Size(size), threads)
		}
	}
	return nil
}

// setupChunk is how much of a host copy's buffers is prepared between two
// looks at ctx: setting up 1 GiB takes seconds, and an interrupt must not
// wait for it.
const setupChunk = 16 << 20

// prepareCopy fills src with a pattern (byte i is i mod 256) and touches
// every page of dst, before timing, in parts of setupChunk, returning
// ctx's error as soon as ctx is done.
func prepareCopy(ctx context.Context, src, dst []byte) error {
	for i := range min(256, len(src)) {
		src[i] = byte(i)
	}
	// Doubling copies of the pattern: fast, and 256 divides every offset.
	for n := min(256, len(src)); n < len(src); {
		if err := ctx.Err(); err != nil {
			return err
		}
		n += copy(src[n:], src[:min(n, setupChunk)])
	}
	for lo := 0; lo < len(dst); lo += setupChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		clear(dst[lo:min(lo+setupChunk, len(dst))])
	}
	return nil
}

// hostCopyRow times copies of src into dst split among threads goroutines,
// which stay up between repeats (lockstep).
func hostCopyRow(ctx context.Context, p Plan, src, dst []byte, threads int) (HostCopy, error) {
	size := int64(len(src))
	part := (size + int64(threads) - 1) / int64(threads)
	round, stop := lockstep(threads, func(t int) error {
		lo, hi := min(int64(t)*part, size), min(int64(t+1)*part, size)
		copy(dst[lo:hi], src[lo:hi])
		return nil
	})
	defer stop()
	s, err := p.collect(func() (time.Duration, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return round()
	})
	if err != nil {
		return HostCopy{}, err
	}
	if dst[size-1] != src[size-1] || dst[0] != src[0] {
		return HostCopy{}, fmt.Errorf("measure: host copy of %d bytes with %d goroutines: the copy is wrong", size, threads)
	}
	med, lo, hi := s.summary()
	return HostCopy{Size: size, Threads: threads, Repeats: len(s), Median: med, Min: lo, Max: hi, GBps: gbps(size, med), Runs: s.runs(p.MinRepeats)}, nil
}
