package multigpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/transfer"
)

// GPU tests: they skip on a machine without a CUDA driver or device (or
// with fewer devices than they need), and run for real on the GPU host
// through scripts/gpu-run.sh.

// gpuDevices returns every device, or skips the test when there are fewer
// than need.
func gpuDevices(tb testing.TB, need int) []int {
	tb.Helper()
	devices, err := AllDevices()
	switch {
	case cuda.IsNoDriver(err):
		tb.Skipf("GPU test skipped: no CUDA driver or device on this machine (%v); run scripts/gpu-run.sh on the GPU host", err)
	case err != nil:
		tb.Fatal(err)
	case len(devices) < need:
		tb.Skipf("GPU test skipped: it needs %d devices, the driver shows %d", need, len(devices))
	}
	return devices
}

// openSet opens a set (through open, with adjust) and closes it at the
// end of the test, checking the second Close.
func openSet(tb testing.TB, devices []int, opt Options, adjust func([]Placement)) *Set {
	tb.Helper()
	s, err := open(devices, opt, adjust)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
		if err := s.Close(); !errors.Is(err, ErrClosed) {
			tb.Errorf("second Close: %v, want ErrClosed", err)
		}
		if _, err := s.Copier(devices[0]); !errors.Is(err, ErrClosed) {
			tb.Errorf("Copier after Close: %v, want ErrClosed", err)
		}
	})
	return s
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 42}).Read(b)
	return b
}

// TestGPUSet opens every device and, on all of them at once, sends random
// bytes to the device and back with its copier, byte-exact, from a Go
// slice (staged) and from a buffer of the shared pool (pinned, though the
// pool's memory was made by the first device's backend), and checks the
// placements against Place over the same properties and host.
func TestGPUSet(t *testing.T) {
	devices := gpuDevices(t, 1)
	host := ReadHost()
	t.Logf("host: %v; devices %v", host, devices)
	s := openSet(t, devices, Options{}, nil)

	var props []cuda.Properties
	for _, d := range devices {
		dev, err := cuda.GetDevice(d)
		if err != nil {
			t.Fatal(err)
		}
		p, err := dev.Properties()
		if err != nil {
			t.Fatal(err)
		}
		props = append(props, p)
	}
	want := Place(props, host)
	for i, pl := range s.Placements() {
		t.Logf("%v (%s, HOST_NUMA_ID %d; staging backend %s)", pl, props[i].Name, props[i].HostNUMAID, s.per[i].backend.Name())
		w := want[i]
		if pl.NUMANode != w.NUMANode && !strings.Contains(pl.Reason, "failed") || pl.Lanes != w.Lanes {
			t.Errorf("device %d: placement %v, Place says %v", pl.Device, pl, w)
		}
		if bound := strings.Contains(s.per[i].backend.Name(), fmt.Sprintf("+numa%d", pl.NUMANode)); bound != (pl.NUMANode >= 0) {
			t.Errorf("device %d: backend %s for placement %v", pl.Device, s.per[i].backend.Name(), pl)
		}
		c, err := s.Copier(pl.Device)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Options().Lanes; got != pl.Lanes {
			t.Errorf("device %d: copier runs %d lanes, placement says %d", pl.Device, got, pl.Lanes)
		}
		st := s.per[i].staging.Stats()
		if w := c.Options().WindowBytes; st.BytesHeld != w || st.Budget != 2*w {
			t.Errorf("device %d: staging pool holds %d bytes of budget %d, window %d (want one window held, a budget of two)", pl.Device, st.BytesHeld, st.Budget, w)
		}
	}
	if len(devices) < 2 {
		t.Log("one device: the shared pool serves only the device that made it here")
	}

	const n = 64<<20 + 12345 // staged in whole chunks and a tail
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, d := range devices {
		wg.Go(func() {
			if err := roundTrips(ctx, s, d, n); err != nil {
				t.Errorf("device %d: %v", d, err)
			}
		})
	}
	wg.Wait()
	for _, d := range devices {
		c, _ := s.Copier(d)
		st := c.Stats()
		t.Logf("device %d: H2D staged %.1f GB/s, pinned %.1f GB/s; D2H staged %.1f GB/s, pinned %.1f GB/s (one transfer each, all devices at once)",
			d, st.ToDevice.Staged.GBps(), st.ToDevice.Pinned.GBps(), st.FromDevice.Staged.GBps(), st.FromDevice.Pinned.GBps())
		if st.ToDevice.Staged.Transfers != 1 || st.ToDevice.Pinned.Transfers != 1 || st.FromDevice.Pinned.Transfers != 1 || st.FromDevice.Staged.Transfers != 2 {
			t.Errorf("device %d: paths counted %+v", d, st)
		}
	}
	if st := s.Pool().Stats(); st.BytesInUse != 0 {
		t.Errorf("shared pool: %d bytes still in use", st.BytesInUse)
	}
}

// roundTrips copies n random bytes to device d and back, staged and from
// the shared pool.
func roundTrips(ctx context.Context, s *Set, d, n int) error {
	c, err := s.Copier(d)
	if err != nil {
		return err
	}
	gpu, err := s.Context(d)
	if err != nil {
		return err
	}
	dev, err := gpu.MemAlloc(n)
	if err != nil {
		return err
	}
	defer dev.Free()

	// Staged: an ordinary Go slice.
	src := randomBytes(n, uint64(d))
	if p := c.PathOf(src); p != transfer.PathStaged {
		return fmt.Errorf("a Go slice takes path %v, want staged", p)
	}
	if err := c.ToDevice(ctx, dev.Ptr(), src); err != nil {
		return err
	}
	back := make([]byte, n)
	if err := c.FromDevice(ctx, back, dev.Ptr()); err != nil {
		return err
	}
	if !bytes.Equal(back, src) {
		return errors.New("staged round trip changed the data")
	}

	// Pinned: a buffer of the shared pool, made by the first device's
	// backend, pinned for this device too.
	buf, err := s.Pool().Get(ctx, n)
	if err != nil {
		return err
	}
	defer buf.Release()
	copy(buf.Bytes(), randomBytes(n, uint64(d)+100))
	if p := c.PathOf(buf.Bytes()); p != transfer.PathPinned {
		return fmt.Errorf("a shared pool buffer takes path %v on device %d, want pinned", p, d)
	}
	if err := c.ToDeviceBuffer(ctx, dev.Ptr(), buf); err != nil {
		return err
	}
	clear(back)
	if err := c.FromDevice(ctx, back, dev.Ptr()); err != nil {
		return err
	}
	if !bytes.Equal(back, buf.Bytes()) {
		return errors.New("pinned upload changed the data")
	}
	buf2, err := s.Pool().Get(ctx, n)
	if err != nil {
		return err
	}
	defer buf2.Release()
	if err := c.FromDeviceBuffer(ctx, buf2, dev.Ptr()); err != nil {
		return err
	}
	if !bytes.Equal(buf2.Bytes(), buf.Bytes()) {
		return errors.New("pinned download changed the data")
	}
	return nil
}

// TestGPUSharedBufferEveryDevice sends one buffer of the shared pool to
// every device in turn, and back from each: one pool serving several
// devices. It needs two devices.
func TestGPUSharedBufferEveryDevice(t *testing.T) {
	devices := gpuDevices(t, 2)
	s := openSet(t, devices, Options{Budget: 64 << 20}, nil)
	ctx := context.Background()
	const n = 16 << 20
	buf, err := s.Pool().Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	copy(buf.Bytes(), randomBytes(n, 7))
	for _, d := range devices {
		c, _ := s.Copier(d)
		gpu, _ := s.Context(d)
		dev, err := gpu.MemAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ToDevice(ctx, dev.Ptr(), buf.Bytes()); err != nil { // detected as pinned
			t.Fatal(err)
		}
		back := make([]byte, n)
		if err := c.FromDevice(ctx, back, dev.Ptr()); err != nil {
			t.Fatal(err)
		}
		dev.Free()
		if !bytes.Equal(back, buf.Bytes()) {
			t.Fatalf("device %d: the round trip changed the data", d)
		}
		if st := c.Stats(); st.ToDevice.Pinned.Transfers != 1 {
			t.Errorf("device %d: the shared buffer went %+v, not pinned", d, st.ToDevice)
		}
	}
}

// TestGPUBinding forces bindings the lent one-node hosts cannot show by
// themselves: every staging bound to node 0 (the register method with
// mbind, where the device can register), and the first device's to a node
// no host has, which must fall back to unbound staging with the reason.
// Options.NoNUMABind and a fixed Lanes are checked on the way.
func TestGPUBinding(t *testing.T) {
	devices := gpuDevices(t, 1)
	dev, err := cuda.GetDevice(devices[0])
	if err != nil {
		t.Fatal(err)
	}
	if p, err := dev.Properties(); err != nil || !p.HostRegisterSupported {
		t.Skipf("GPU test skipped: device %d cannot register host memory (%v)", devices[0], err)
	}
	bind := func(nodes ...int) func([]Placement) {
		return func(pls []Placement) {
			for i := range pls {
				n := nodes[min(i, len(nodes)-1)]
				pls[i].NUMANode = n
				pls[i].Staging.Method, pls[i].Staging.BindNUMA, pls[i].Staging.NUMANode = cudahost.Register, true, n
				pls[i].Reason = fmt.Sprintf("forced to node %d by the test", n)
			}
		}
	}
	t.Run("node 0", func(t *testing.T) {
		s := openSet(t, devices, Options{}, bind(0))
		for i, pl := range s.Placements() {
			t.Logf("%v; backend %s", pl, s.per[i].backend.Name())
			if pl.NUMANode != 0 && !strings.Contains(pl.Reason, "failed") {
				t.Errorf("placement %v", pl)
			}
		}
	})
	t.Run("absent node", func(t *testing.T) {
		s := openSet(t, devices[:1], Options{}, bind(63))
		pl := s.Placements()[0]
		t.Log(pl)
		if pl.NUMANode != -1 || !strings.Contains(pl.Reason, "binding to node 63 failed") || strings.Contains(s.per[0].backend.Name(), "numa") {
			t.Errorf("placement %v, backend %s: want the unbound fallback", pl, s.per[0].backend.Name())
		}
		roundTripsOK(t, s, devices[0])
	})
	t.Run("NoNUMABind and Lanes", func(t *testing.T) {
		s := openSet(t, devices[:1], Options{NoNUMABind: true, Transfer: transfer.Options{Lanes: 3}}, nil)
		pl := s.Placements()[0]
		c, _ := s.Copier(devices[0])
		if pl.NUMANode != -1 || pl.Lanes != 3 || c.Options().Lanes != 3 || strings.Contains(s.per[0].backend.Name(), "numa") {
			t.Errorf("placement %v, copier lanes %d, backend %s", pl, c.Options().Lanes, s.per[0].backend.Name())
		}
	})
}

func roundTripsOK(t *testing.T, s *Set, d int) {
	t.Helper()
	if err := roundTrips(context.Background(), s, d, 8<<20+1); err != nil {
		t.Errorf("device %d: %v", d, err)
	}
}
