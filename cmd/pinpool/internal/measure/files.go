package measure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/pinpool/pinpool/transfer"
)

// FileRun is one row of the file benchmark: one way of moving a temporary
// file of Size bytes between the disk and device memory, best of the
// repeats.
type FileRun struct {
	// Way is "pinpool" (transfer.Copier's ToDeviceFromFile and
	// FromDeviceToFile) or "readfile+driver" (os.ReadFile, then the
	// driver's copy of that pageable memory; the driver's copy into Go
	// memory, then os.WriteFile).
	Way       string    `json:"way"`
	Direction Direction `json:"direction"` // H2D: file to device; D2H: device to file
	// Cache is "warm" (the file in the page cache) or "cold" (dropped
	// from it before each repeat) for reads, "" for writes.
	Cache   string  `json:"cache,omitempty"`
	Size    int64   `json:"size_bytes"`
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"gb_per_s"`
}

// Ways of the file benchmark.
const (
	FileWayPinpool = "pinpool"
	FileWayPlain   = "readfile+driver"
)

// files measures the file benchmark of p on device g: a temporary file of
// p.FileSize random bytes in p.FileDir, to the device and back, every way,
// warm and cold.
func files(ctx context.Context, p Plan, g *gpu, r *Report, prog *progress) error {
	f, err := os.CreateTemp(p.FileDir, "pinpool-bench-*.bin")
	if err != nil {
		return fmt.Errorf("measure: file benchmark: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := fillFile(ctx, f, p.FileSize); err != nil {
		return fmt.Errorf("measure: file benchmark: writing %s: %w", f.Name(), err)
	}
	d, err := g.ctx.MemAlloc(int(p.FileSize))
	if err != nil {
		return fmt.Errorf("measure: file benchmark: %d bytes of device memory: %w", p.FileSize, err)
	}
	defer d.Free()
	n := p.FileSize
	// A copier of its own, at the defaults a user gets (the staged
	// transfers' copier, if any, stages everything).
	c, err := transfer.New(g.pool, g.ctx, transfer.Options{})
	if err != nil {
		return fmt.Errorf("measure: file benchmark: %w", err)
	}
	defer c.Close()
	read := map[string]func() error{
		FileWayPinpool: func() error {
			_, err := c.ToDeviceFromFile(ctx, d.Ptr(), f, 0, n)
			return err
		},
		FileWayPlain: func() error {
			b, err := os.ReadFile(f.Name())
			if err != nil {
				return err
			}
			return g.ctx.CopyHtoD(d.Ptr(), b)
		},
	}
	out := f.Name() + ".out"
	defer os.Remove(out)
	write := map[string]func() error{
		FileWayPinpool: func() error {
			w, err := os.Create(out)
			if err != nil {
				return err
			}
			_, err = c.FromDeviceToFile(ctx, w, 0, d.Ptr(), n)
			return errors.Join(err, w.Close())
		},
		FileWayPlain: func() error {
			b := make([]byte, n)
			if err := g.ctx.CopyDtoH(b, d.Ptr()); err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		},
	}
	canDrop := dropPageCache(f) == nil
	if !canDrop {
		r.Skipped = append(r.Skipped, "files cold: the page cache cannot be dropped for one file on this system")
	}
	for _, way := range []string{FileWayPinpool, FileWayPlain} {
		for _, cache := range []string{"warm", "cold"} {
			if cache == "cold" && !canDrop {
				continue
			}
			before := func() error {
				if cache == "cold" {
					return dropPageCache(f)
				}
				return nil
			}
			if cache == "warm" {
				if err := read[FileWayPlain](); err != nil { // into the page cache
					return fmt.Errorf("measure: file benchmark: %w", err)
				}
			}
			if err := fileRow(ctx, p, r, prog, way, H2D, cache, before, read[way]); err != nil {
				return err
			}
		}
		if err := fileRow(ctx, p, r, prog, way, D2H, "", func() error { return nil }, write[way]); err != nil {
			return err
		}
	}
	return nil
}

// fileRow times run p.FileRepeats times (before each, untimed) and adds the
// best as a row.
func fileRow(ctx context.Context, p Plan, r *Report, prog *progress, way string, dir Direction, cache string, before, run func() error) error {
	best := time.Duration(0)
	for range p.FileRepeats {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := before(); err != nil {
			return fmt.Errorf("measure: file benchmark: %w", err)
		}
		t0 := time.Now()
		if err := run(); err != nil {
			return fmt.Errorf("measure: file benchmark, %s %s %s: %w", way, dir, cache, err)
		}
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	r.Files = append(r.Files, FileRun{Way: way, Direction: dir, Cache: cache, Size: p.FileSize,
		Seconds: best.Seconds(), GBps: float64(p.FileSize) / best.Seconds() / 1e9})
	prog.step("file %s %s %s", way, dir, cache)
	return nil
}

// fillFile writes n pseudo-random bytes to f and syncs it.
func fillFile(ctx context.Context, f *os.File, n int64) error {
	w := bufio.NewWriterSize(f, 4<<20)
	r := rand.New(rand.NewPCG(uint64(n), 18))
	block := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(block)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		for i := 0; i < len(block); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < len(block); j++ {
				block[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := w.Write(block[:min(int64(len(block)), left)]); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Sync()
}
