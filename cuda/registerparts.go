package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"
)

// registerChunkUnit is the granularity of register chunk sizes given in
// options, whatever the system page size.
const registerChunkUnit = 4096

// RegisterChunkSize resolves a register chunk size given in options, such as
// cudahost.Options.RegisterChunk and transfer.Options.RegisterChunk: zero
// means DefaultRegisterChunk, and any other value must be a positive
// multiple of 4096; it is rounded up to a multiple of the system page size
// where pages are larger. For any other value it returns an error that
// names the value and wraps no sentinel, for callers to wrap in their own
// invalid-options error.
func RegisterChunkSize(n int64) (int64, error) {
	return registerChunkSize(n, int64(os.Getpagesize()))
}

// registerChunkSize is RegisterChunkSize for a page size page.
func registerChunkSize(n, page int64) (int64, error) {
	if n == 0 {
		return DefaultRegisterChunk, nil
	}
	if n < 0 || n%registerChunkUnit != 0 {
		return n, fmt.Errorf("RegisterChunk %d: want 0 (default %d) or a positive multiple of %d", n, int64(DefaultRegisterChunk), registerChunkUnit)
	}
	if r := n % page; r != 0 {
		if n > math.MaxInt64-(page-r) {
			return n, fmt.Errorf("RegisterChunk %d: too large to round up to the %d-byte page", n, page)
		}
		n += page - r
	}
	return n, nil
}

// RegisterInParts registers mem with register in consecutive parts of at
// most chunk bytes, in address order, and returns what register returned
// for each part. It is how the pinpool packages call cuMemHostRegister
// (Context.HostRegister) on ranges too large for one registration.
//
// The parts are cut at the addresses that lie a whole number of chunks past
// the start of mem's first page, so every boundary falls on a page even
// when mem does not start on one: a page-aligned mem is cut every chunk
// bytes from its start; an unaligned mem's first part is short by mem's
// offset into its page. The last part holds the rest. chunk is rounded up
// to a multiple of the system page size (down, where rounding up would
// overflow an int); zero, negative or above DefaultRegisterChunk means
// DefaultRegisterChunk. Each part
// is passed to register as a slice of mem whose capacity is its length.
//
// If register fails, RegisterInParts frees the parts already registered,
// last first, and returns nil and an error that wraps register's error,
// naming the failing part's byte range within mem, mem's address and the
// part's index (from 1) and count, joined with the errors of that undoing.
// Empty mem is refused with ErrSize, without calling register.
func RegisterInParts[P interface{ Free() error }](mem []byte, chunk int, register func(part []byte) (P, error)) ([]P, error) {
	return registerInParts(mem, chunk, os.Getpagesize(), register)
}

// registerInParts is RegisterInParts for a page size page, a power of two.
func registerInParts[P interface{ Free() error }](mem []byte, chunk, page int, register func(part []byte) (P, error)) ([]P, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("%w: registering 0 bytes in parts", ErrSize)
	}
	chunk = partSize(chunk, page)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	lead := int(start & uintptr(page-1)) // mem's offset into its first page
	count := (len(mem)-1+lead)/chunk + 1
	parts := make([]P, 0, count)
	limit := chunk - lead // the first part ends a chunk past mem's page
	for off := 0; off < len(mem); limit = chunk {
		n := min(limit, len(mem)-off)
		p, err := register(mem[off : off+n : off+n])
		if err != nil {
			errs := []error{fmt.Errorf("registering bytes [%d, %d) of %d at %#x (part %d of %d): %w", off, off+n, len(mem), start, len(parts)+1, count, err)}
			for i := len(parts) - 1; i >= 0; i-- {
				if uerr := parts[i].Free(); uerr != nil {
					errs = append(errs, fmt.Errorf("undoing part %d: %w", i+1, uerr))
				}
			}
			return nil, errors.Join(errs...)
		}
		parts = append(parts, p)
		off += n
	}
	return parts, nil
}

// partSize resolves RegisterInParts's chunk for a page size page. No part
// is larger than DefaultRegisterChunk, whatever chunk asks: single
// registrations of 512 GiB and more fail.
func partSize(chunk, page int) int {
	if chunk <= 0 || chunk > DefaultRegisterChunk {
		chunk = DefaultRegisterChunk
	}
	if r := chunk % page; r != 0 {
		if chunk > math.MaxInt-(page-r) {
			return chunk - r
		}
		chunk += page - r
	}
	return chunk
}
