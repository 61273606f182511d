package multigpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
	"github.com/pinpool/pinpool/cudahost"
	"github.com/pinpool/pinpool/hostmem"
	"github.com/pinpool/pinpool/transfer"
)

// Set is the library's shape for several GPUs: one shared pool whose
// buffers are pinned for every device of the set, and per device a copier
// that stages through a pool of its own, on the device's NUMA node where
// Place allows. All methods are safe for concurrent use.
type Set struct {
	devices    []int
	placements []Placement
	index      map[int]int // device ordinal → position in devices
	pool       *pinpool.Pool
	per        []perDevice

	mu      sync.Mutex
	closed  bool
	closers []func() error // in the order things were opened
}

// perDevice is what the set opened for one device.
type perDevice struct {
	backend *cudahost.Backend // staging memory, and the device's context
	staging *pinpool.Pool
	copier  *transfer.Copier
}

// Open opens a set over the given devices (ordinals as cuda.GetDevice
// takes them, each once; AllDevices lists them all). For each device, in
// order, it computes the Placement (Place, from the devices' properties and
// Options.Host), opens a cudahost backend with the placement's Staging
// options, a staging pool over it whose Budget is exactly the copier's
// two windows (one per direction), and a copier (transfer.New) with the
// placement's lanes that reserves one window at once. Before them it opens
// the shared pool (Set.Pool): a cudahost backend on the first device with
// Portable set, so that its memory is pinned for every CUDA context of the
// process.
//
// Should binding a device's staging to its node fail (hostmem.ErrNUMA: the
// node is outside the process's cpuset, say), that device's staging is
// opened unbound instead and its Placement's Reason says so.
//
// Errors: ErrInvalidDevices (checked before the driver is asked, except
// for ordinals the driver does not show) or ErrInvalidOptions; without a
// CUDA driver or device, an error for which cuda.IsNoDriver reports true
// (it wraps cuda.ErrNoDriver or cuda.ErrNoDevice); otherwise the error of
// the backend, pool or copier that failed. On any failure everything opened
// so far is closed.
func Open(devices []int, opt Options) (*Set, error) { return open(devices, opt, nil) }

// open is Open with a hook that may change the placements before they are
// applied (tests force bindings with it).
func open(devices []int, opt Options, adjust func([]Placement)) (*Set, error) {
	if err := checkDevices(devices); err != nil {
		return nil, err
	}
	if err := opt.check(); err != nil {
		return nil, err
	}
	n, err := deviceCount()
	if err != nil {
		return nil, err
	}
	props := make([]cuda.Properties, len(devices))
	for i, d := range devices {
		if d >= n {
			return nil, fmt.Errorf("%w: device %d: the driver shows %d device(s), 0 .. %d (CUDA_VISIBLE_DEVICES chooses which)", ErrInvalidDevices, d, n, n-1)
		}
		dev, err := cuda.GetDevice(d)
		if err == nil {
			props[i], err = dev.Properties()
		}
		if err != nil {
			return nil, fmt.Errorf("multigpu: device %d: reading properties: %w", d, err)
		}
	}
	host := ReadHost()
	if opt.Host != nil {
		host = *opt.Host
	}
	pls := Place(props, host)
	for i := range pls {
		if opt.NoNUMABind && pls[i].NUMANode >= 0 {
			pls[i].unbind("binding turned off (Options.NoNUMABind)")
		}
		if opt.Transfer.Lanes > 0 {
			pls[i].Lanes = opt.Transfer.Lanes
		}
	}
	if adjust != nil {
		adjust(pls)
	}

	s := &Set{devices: slices.Clone(devices), placements: pls, index: map[int]int{}, per: make([]perDevice, len(devices))}
	for i, d := range devices {
		s.index[d] = i
	}
	if err := s.openShared(devices[0], opt.Budget); err != nil {
		return nil, s.fail(err)
	}
	for i := range pls {
		err := s.openDevice(i, opt)
		if err != nil && pls[i].NUMANode >= 0 && errors.Is(err, hostmem.ErrNUMA) {
			pls[i].unbind(fmt.Sprintf("binding to node %d failed (%v), so not bound", pls[i].NUMANode, err))
			err = s.openDevice(i, opt)
		}
		if err != nil {
			return nil, s.fail(err)
		}
	}
	return s, nil
}

// unbind turns the placement's binding off, with the reason.
func (p *Placement) unbind(why string) {
	p.NUMANode = -1
	p.Staging = cudahost.Options{Device: p.Device}
	p.Reason = why
}

// checkDevices validates the device list without the driver.
func checkDevices(devices []int) error {
	if len(devices) == 0 {
		return fmt.Errorf("%w: no device", ErrInvalidDevices)
	}
	seen := make(map[int]bool, len(devices))
	for _, d := range devices {
		switch {
		case d < 0:
			return fmt.Errorf("%w: negative device ordinal %d", ErrInvalidDevices, d)
		case seen[d]:
			return fmt.Errorf("%w: device %d twice", ErrInvalidDevices, d)
		}
		seen[d] = true
	}
	return nil
}

// deviceCount asks the driver for the number of devices; no device at all
// is an error wrapping cuda.ErrNoDevice.
func deviceCount() (int, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return 0, fmt.Errorf("multigpu: counting devices: %w", err)
	}
	if n == 0 {
		return 0, fmt.Errorf("multigpu: the driver shows no device: %w", cuda.ErrNoDevice)
	}
	return n, nil
}

// AllDevices returns the ordinals of every device the driver shows (which
// honours CUDA_VISIBLE_DEVICES), 0 to count-1, for Open. Without a driver
// or a device it returns an error for which cuda.IsNoDriver reports true.
func AllDevices() ([]int, error) {
	n, err := deviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// openShared opens the shared pool: portable pinned memory made by the
// backend of device dev.
func (s *Set) openShared(dev int, budget int64) error {
	b, err := cudahost.New(cudahost.Options{Device: dev, Portable: true})
	if err != nil {
		return fmt.Errorf("multigpu: shared pool on device %d: %w", dev, err)
	}
	s.closers = append(s.closers, b.Close)
	p, err := pinpool.New(pinpool.Options{Backend: pinpool.CUDABackend(b), Budget: budget})
	if err != nil {
		return fmt.Errorf("multigpu: shared pool: %w", err)
	}
	s.closers = append(s.closers, p.Close)
	s.pool = p
	return nil
}

// openDevice opens the staging backend, staging pool and copier of the
// i-th device. On failure it closes what it opened itself.
func (s *Set) openDevice(i int, opt Options) error {
	pl := s.placements[i]
	b, err := cudahost.New(pl.Staging)
	if err != nil {
		return fmt.Errorf("multigpu: device %d: staging backend: %w", pl.Device, err)
	}
	slots, chunk := opt.window()
	size := (int64(chunk) + 4095) &^ 4095 // an Exact pool rounds to whole pages
	pool, err := pinpool.New(pinpool.Options{
		Backend:   pinpool.CUDABackend(b),
		Budget:    2 * int64(slots) * size, // a window per direction
		Exact:     true,                    // one size: the chunk
		SlabMax:   -1,                      // each chunk a whole allocation, none shared
		GrowBytes: int64(slots) * size,
	})
	if err != nil {
		return fmt.Errorf("multigpu: device %d: staging pool: %w", pl.Device, errors.Join(err, b.Close()))
	}
	topt := opt.Transfer
	topt.Lanes = pl.Lanes
	topt.Prewarm = true
	c, err := transfer.New(pool, b.Context(), topt)
	if err != nil {
		return fmt.Errorf("multigpu: device %d: copier: %w", pl.Device, errors.Join(err, pool.Close(), b.Close()))
	}
	s.closers = append(s.closers, b.Close, pool.Close, c.Close)
	s.per[i] = perDevice{backend: b, staging: pool, copier: c}
	return nil
}

// fail closes everything opened so far and returns err, joined with the
// errors of closing.
func (s *Set) fail(err error) error {
	if cerr := s.closeAll(); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}

// closeAll closes what was opened, in reverse order.
func (s *Set) closeAll() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	if len(errs) > 0 {
		return fmt.Errorf("multigpu: closing: %w", errors.Join(errs...))
	}
	return nil
}

// Pool returns the shared pool: its buffers are pinned for every device of
// the set, so any copier of the set copies them directly
// (transfer.PathPinned, Copier.ToDeviceBuffer), with no staging. It is
// closed by Close.
func (s *Set) Pool() *pinpool.Pool { return s.pool }

// Copier returns the copier of a device of the set. It fails with
// ErrNotInSet for another device, and ErrClosed after Close.
func (s *Set) Copier(device int) (*transfer.Copier, error) {
	i, err := s.lookup(device)
	if err != nil {
		return nil, err
	}
	return s.per[i].copier, nil
}

// Context returns the primary context of a device of the set (the one its
// copier copies in), for device memory and streams of the caller's own.
// It is valid until Close. Errors are those of Copier.
func (s *Set) Context(device int) (*cuda.Context, error) {
	i, err := s.lookup(device)
	if err != nil {
		return nil, err
	}
	return s.per[i].backend.Context(), nil
}

func (s *Set) lookup(device int) (int, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	i, ok := s.index[device]
	if !ok {
		return 0, fmt.Errorf("%w: device %d (the set has %v)", ErrNotInSet, device, s.devices)
	}
	return i, nil
}

// Devices returns the set's device ordinals, in the order given to Open.
func (s *Set) Devices() []int { return slices.Clone(s.devices) }

// Placements returns the placement of each device, in the order of
// Devices, as applied (a binding that failed shows as unbound, with its
// reason).
func (s *Set) Placements() []Placement { return slices.Clone(s.placements) }

// Close closes everything the set opened, in reverse order: the copiers
// (each waits for its transfers in flight), the staging pools and their
// backends, then the shared pool and its backend. Buffers of the shared
// pool still held are freed when released. The errors of all the closes
// are joined. A second Close returns ErrClosed.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	return s.closeAll()
}
