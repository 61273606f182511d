package transfer

import "github.com/pinpool/pinpool/cuda"

// cudaDevice is the device over a CUDA context: non-blocking streams,
// events without timing, the cuda package's copies and registration.
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

func (d cudaDevice) register(b []byte) (hostReg, error) { return d.c.HostRegister(b, 0) }

func (d cudaDevice) isPinned(b []byte) bool { return cuda.IsPinned(b) }

// canBatch reports whether the driver has cuMemcpyBatchAsync (CUDA 12.8).
func (d cudaDevice) canBatch() bool { return cuda.BatchCopyAvailable() == nil }

type cudaStream struct{ s *cuda.Stream }

func (s cudaStream) copyHtoDAsync(dst cuda.DevicePtr, src []byte) error {
	return s.s.CopyHtoDAsync(dst, src)
}

func (s cudaStream) copyDtoHAsync(dst []byte, src cuda.DevicePtr) error {
	return s.s.CopyDtoHAsync(dst, src)
}

func (s cudaStream) copyBatchAsync(d Direction, copies []chunkCopy) error {
	bc := make([]cuda.BatchCopy, len(copies))
	for i, x := range copies {
		if d == HostToDevice {
			bc[i] = cuda.BatchCopy{Dst: x.dev, SrcHost: x.host, Size: len(x.host)}
		} else {
			bc[i] = cuda.BatchCopy{DstHost: x.host, Src: x.dev, Size: len(x.host)}
		}
	}
	return s.s.CopyBatchAsync(bc, cuda.SrcAccessStream)
}

func (s cudaStream) record(e event) error { return e.(cudaEvent).e.Record(s.s) }
func (s cudaStream) synchronize() error   { return s.s.Synchronize() }
func (s cudaStream) destroy() error       { return s.s.Destroy() }

type cudaEvent struct{ e *cuda.Event }

func (e cudaEvent) Done() (bool, error) { return e.e.Done() }
func (e cudaEvent) synchronize() error  { return e.e.Synchronize() }
func (e cudaEvent) destroy() error      { return e.e.Destroy() }

// addressRange is the device allocation that p lies in (rangedDevice).
func (d cudaDevice) addressRange(p cuda.DevicePtr) (cuda.DevicePtr, uint64, error) {
	return d.c.MemAddressRange(p)
}
