package transfer

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestRampRoundTrip round-trips chunked transfers whose plans ramp (small
// chunks at the start host to device, at the end device to host) on the
// fake device, with several lane counts and ramps, and checks every byte,
// the chunks counted against the plan, and that the staging is all back.
func TestRampRoundTrip(t *testing.T) {
	for _, lanes := range []int{2, 4, 8} {
		for _, rp := range [][2]int{{testChunk / 8, 150}, {testChunk / 4, 200}} {
			tu := chunkedOnly()
			tu.rampFrom, tu.rampGrowth = rp[0], rp[1]
			e := newEnvTuned(t, Options{ChunkSize: testChunk, WindowBytes: 8 * testChunk, Lanes: lanes, DirectBelow: -1}, tu)
			e.d.latency.Store(int64(5 * time.Microsecond))
			for _, n := range []int{3 * testChunk, 20*testChunk + 4097, 64*testChunk - 1} {
				t.Run(fmt.Sprintf("lanes=%d/ramp=%v/n=%d", lanes, rp, n), func(t *testing.T) {
					for _, dir := range []Direction{HostToDevice, DeviceToHost} {
						p := planStaging(n, dir, 1, false, e.c.opt, tu)
						if n >= 20*testChunk && p.rampRounds == 0 {
							t.Fatalf("%v plan %+v has no ramp", dir, p)
						}
						src := randomBytes(n, uint64(n)+uint64(dir))
						dev := e.d.alloc(n)
						before := e.c.Stats().Chunks
						back := make([]byte, n)
						var err error
						if dir == HostToDevice {
							err = e.c.ToDevice(context.Background(), dev, src)
						} else {
							e.setDev(dev, src)
							err = e.c.FromDevice(context.Background(), back, dev)
						}
						if err != nil {
							t.Fatal(err)
						}
						if dir == HostToDevice {
							sameBytes(t, "device", e.devBytes(dev, n), src)
						} else {
							sameBytes(t, "host", back, src)
						}
						if got := e.c.Stats().Chunks - before; got != uint64(p.chunks) {
							t.Errorf("%v: %d chunks counted, plan has %d", dir, got, p.chunks)
						}
						if st := e.c.Stats(); st.StagingBytes != 0 {
							t.Errorf("%v: %d bytes of staging held after the transfer", dir, st.StagingBytes)
						}
					}
				})
			}
		}
	}
}
