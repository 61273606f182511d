package transfer

import "github.com/pinpool/pinpool/cuda"

// device is what the engine needs from a GPU: cudaDevice over a *cuda.Context, or the tests'
// simulated device, which checks the scheduling without a GPU. Every method is safe for concurrent
// use; the copies of any host memory return when the data is in place.
type device interface {
	newStream() (stream, error) // non-blocking
	newEvent() (event, error)   // for fencing, no timing
	copyHtoD(dst cuda.DevicePtr, src []byte) error
	copyDtoH(dst []byte, src cuda.DevicePtr) error
	register(b []byte) (hostReg, error) // page-locks b: one cuMemHostRegister call
	isPinned(b []byte) bool             // b is page-locked memory that asynchronous copies accept
}

// stream is a device stream. Its copies take pinned host memory and return once queued; destroy
// releases it while queued work still completes.
type stream interface {
	copyHtoDAsync(dst cuda.DevicePtr, src []byte) error
	copyDtoHAsync(dst []byte, src cuda.DevicePtr) error
	record(e event) error // marks the current end of the stream with e
	synchronize() error   // waits for all work queued
	destroy() error
}

// event is a marker in a stream. Done, which reports without blocking whether the work recorded
// before it has completed, makes it a pinpool.Fence.
type event interface {
	Done() (bool, error)
	synchronize() error
	destroy() error
}

// hostReg is one registration of host memory; Free unregisters it.
type hostReg interface{ Free() error }

// cudaDevice is the device over a CUDA context.
type cudaDevice struct{ c *cuda.Context }

func (d cudaDevice) newStream() (stream, error) {
	s, err := d.c.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		return nil, err
	}
	return cudaStream{s}, nil
}

func (d cudaDevice) newEvent() (event, error) {
	e, err := d.c.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		return nil, err
	}
	return cudaEvent{e}, nil
}

func (d cudaDevice) copyHtoD(dst cuda.DevicePtr, src []byte) error { return d.c.CopyHtoD(dst, src) }
func (d cudaDevice) copyDtoH(dst []byte, src cuda.DevicePtr) error { return d.c.CopyDtoH(dst, src) }
func (d cudaDevice) register(b []byte) (hostReg, error)            { return d.c.HostRegister(b, 0) }
func (d cudaDevice) isPinned(b []byte) bool                        { return cuda.IsPinned(b) }

// addressRange is the device allocation that p lies in (rangedDevice).
func (d cudaDevice) addressRange(p cuda.DevicePtr) (cuda.DevicePtr, uint64, error) {
	return d.c.MemAddressRange(p)
}

type cudaStream struct{ s *cuda.Stream }

func (s cudaStream) copyHtoDAsync(dst cuda.DevicePtr, src []byte) error {
	return s.s.CopyHtoDAsync(dst, src)
}
func (s cudaStream) copyDtoHAsync(dst []byte, src cuda.DevicePtr) error {
	return s.s.CopyDtoHAsync(dst, src)
}
func (s cudaStream) record(e event) error { return e.(cudaEvent).e.Record(s.s) }
func (s cudaStream) synchronize() error   { return s.s.Synchronize() }
func (s cudaStream) destroy() error       { return s.s.Destroy() }

type cudaEvent struct{ e *cuda.Event }

func (e cudaEvent) Done() (bool, error) { return e.e.Done() }
func (e cudaEvent) synchronize() error  { return e.e.Synchronize() }
func (e cudaEvent) destroy() error      { return e.e.Destroy() }
