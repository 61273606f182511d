package transfer

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestGoRef: BenchmarkPacedFrames' Go reference (goRef) moves frames of every size it takes both
// ways, byte for byte, with 0 to 3 helpers and either stripe rule, on the fake device, whose DMA
// comes late and which records any staging reused before its copy ran; a frame larger than its
// staging and a failed copy end the frame with an error, and the next frame moves as before. A
// reference that moved the wrong bytes would measure nothing worth comparing.
func TestGoRef(t *testing.T) {
	sizes := []int{1, 4096, 65537, goRefChunk, goRefChunk + 1, frameBytes, goRefStaging}
	for _, helpers := range []int{0, 1, 2, 3} {
		for _, stripe := range []int{0, 128 << 10} {
			t.Run(fmt.Sprintf("T%d/stripe=%d", helpers, stripe), func(t *testing.T) {
				e := newEnv(t, Options{})
				e.d.latency.Store(int64(20 * time.Microsecond))
				r := newGoRef(t, e.d, e.pool, helpers, stripe)
				dev := e.d.alloc(goRefStaging + 1)
				for i, n := range sizes {
					up := randomBytes(n, uint64(i))
					if err := r.move(HostToDevice, up, dev); err != nil {
						t.Fatalf("%d bytes up: %v", n, err)
					}
					sameBytes(t, fmt.Sprintf("%d bytes up", n), e.devBytes(dev, n), up)
					want := randomBytes(n, uint64(i)+100)
					e.setDev(dev, want)
					down := make([]byte, n)
					if err := r.move(DeviceToHost, down, dev); err != nil {
						t.Fatalf("%d bytes down: %v", n, err)
					}
					sameBytes(t, fmt.Sprintf("%d bytes down", n), down, want)
				}
				if err := r.move(HostToDevice, make([]byte, goRefStaging+1), dev); err == nil {
					t.Fatal("a frame larger than the staging moved")
				}
			})
		}
	}
}

// TestGoRefFailedCopy: a copy the device refuses (when queued, or when it runs) ends goRef's frame
// with that error in either direction, and the next frame moves whole.
func TestGoRefFailedCopy(t *testing.T) {
	for _, when := range []string{"enqueue", "exec"} {
		for _, d := range []Direction{HostToDevice, DeviceToHost} {
			t.Run(when+"/"+d.String(), func(t *testing.T) {
				e := newEnv(t, Options{})
				r := newGoRef(t, e.d, e.pool, 2, 0)
				dev := e.d.alloc(frameBytes)
				failed := e.injectFailure(when, 2)
				frame := randomBytes(frameBytes, 5)
				if d == DeviceToHost {
					e.setDev(dev, frame)
				}
				if err := r.move(d, make([]byte, frameBytes), dev); !errors.Is(err, errInjected) {
					t.Fatalf("a copy that failed (%s): %v", when, err)
				}
				if failed.Load() == 0 {
					t.Fatal("no failure was injected")
				}
				e.d.failEnqueue, e.d.failExec = nil, nil
				got := make([]byte, frameBytes)
				if d == HostToDevice {
					if err := r.move(d, frame, dev); err != nil {
						t.Fatal(err)
					}
					got = e.devBytes(dev, frameBytes)
				} else if err := r.move(d, got, dev); err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "the frame after the failure", got, frame)
			})
		}
	}
}
