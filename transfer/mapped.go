package transfer

import (
	"errors"
	"fmt"

	"github.com/pinpool/pinpool"
	"github.com/pinpool/pinpool/cuda"
)

// MappedPointer returns the device address of a buffer from a pool whose
// memory is mapped (for example pinpool.CUDABackend over
// cudahost.New(cudahost.Options{Mapped: true})); kernels read and write the
// buffer in place through it. Otherwise the error wraps ErrNotMapped.
func MappedPointer(buf pinpool.Buffer) (cuda.DevicePtr, error) {
	p, err := buf.DevicePointer()
	if err != nil {
		if errors.Is(err, ErrNotMapped) {
			return 0, fmt.Errorf("transfer: %w", err)
		}
		return 0, fmt.Errorf("transfer: device pointer of a pool buffer: %w", err)
	}
	return cuda.DevicePtr(p), nil
}
