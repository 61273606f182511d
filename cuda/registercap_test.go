package cuda

import (
	"math"
	"testing"

	"golang.org/x/sys/unix"
)

type capPart struct{}

func (capPart) Free() error { return nil }

// TestRegisterPartsCapped checks that no registration call takes more than
// DefaultRegisterChunk, whatever chunk size is asked: 130 GiB (reserved
// address space, never touched) with a chunk of math.MaxInt is registered
// as 64, 64 and 2 GiB.
func TestRegisterPartsCapped(t *testing.T) {
	const size = 130 << 30
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		t.Skipf("cannot reserve %d bytes of address space: %v", size, err)
	}
	defer unix.Munmap(mem)
	var lens []int
	_, err = RegisterInParts(mem, math.MaxInt, func(p []byte) (capPart, error) {
		lens = append(lens, len(p))
		return capPart{}, nil
	})
	if err != nil || len(lens) != 3 || lens[0] != DefaultRegisterChunk || lens[1] != DefaultRegisterChunk || lens[2] != 2<<30 {
		t.Fatalf("parts %v, %v; want 64, 64 and 2 GiB", lens, err)
	}
}
