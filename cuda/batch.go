package cuda

import (
	"fmt"
	"runtime"
	"strconv"
	"unsafe"
)

// SrcAccessOrder is CUmemcpySrcAccessOrder: when a batch copy may read its
// source, relative to the work queued before it on the stream. The
// destination is always written in stream order.
type SrcAccessOrder uint32

// Source access orders of CopyBatchAsync, with the values of cuda.h.
const (
	// SrcAccessStream (CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) reads the source
	// in stream order, like any asynchronous copy: earlier work on the
	// stream may still be writing it. The source must stay alive and
	// unchanged until the stream has passed the copy.
	SrcAccessStream SrcAccessOrder = 1
	// SrcAccessDuringCall (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL)
	// lets the driver read the source out of stream order, all of it
	// before the call returns, by the driver's documentation: no earlier
	// work on the stream may be writing the source. The driver does not
	// keep that promise for pageable memory (see CopyBatchAsync), so this
	// package asks the caller to keep the source until the stream has
	// passed the copy, as for the other orders.
	SrcAccessDuringCall SrcAccessOrder = 2
	// SrcAccessAny (CU_MEMCPY_SRC_ACCESS_ORDER_ANY) lets the driver read
	// the source out of stream order, also after the call has returned: no
	// earlier work on the stream may be writing the source, and it must
	// stay alive and unchanged until the stream has passed the copy. It is
	// the order meant for pageable memory (malloc, Go slices).
	SrcAccessAny SrcAccessOrder = 3
)

// String returns "stream", "during-api-call" or "any", or
// "SrcAccessOrder(N)" for a value cuda.h does not name.
func (o SrcAccessOrder) String() string {
	switch o {
	case SrcAccessStream:
		return "stream"
	case SrcAccessDuringCall:
		return "during-api-call"
	case SrcAccessAny:
		return "any"
	}
	return "SrcAccessOrder(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// valid reports whether o is one of the three orders the driver accepts.
func (o SrcAccessOrder) valid() bool { return o >= SrcAccessStream && o <= SrcAccessAny }

// memLocation is CUmemLocation: { CUmemLocationType type; int id; }.
type memLocation struct {
	typ int32 // CUmemLocationType; 0 is CU_MEM_LOCATION_TYPE_INVALID: no hint
	id  int32
}

// memcpyAttributes is CUmemcpyAttributes (CUmemcpyAttributes_v1): 24 bytes,
// every field 4-byte aligned. The location hints only matter for managed
// memory, so batch copies leave them zero; flags 0 is
// CU_MEMCPY_FLAG_DEFAULT.
type memcpyAttributes struct {
	srcAccessOrder uint32 // CUmemcpySrcAccessOrder
	srcLocHint     memLocation
	dstLocHint     memLocation
	flags          uint32
}

// BatchCopy is one copy of a batch for CopyBatchAsync: Size bytes from the
// source to the destination. Each side is either host memory, given as a
// slice (pageable or page-locked), or a device address; a slice that is
// not nil takes the place of the address beside it.
type BatchCopy struct {
	Dst     DevicePtr // the destination on the device, when DstHost is nil
	DstHost []byte    // the destination in host memory, at least Size bytes
	Src     DevicePtr // the source on the device, when SrcHost is nil
	SrcHost []byte    // the source in host memory, at least Size bytes
	Size    int       // bytes to copy, more than 0
}

// BatchError is a batch copy refused before the driver is called: an
// empty batch, a copy of no bytes, a slice shorter than its copy, a zero
// device address, a piece size of 0 or less, an order that is not one of
// the three, or the legacy default stream. Errors about sizes also match
// ErrSize with errors.Is.
type BatchError struct {
	Op     string // the method, e.g. "CopyBatchAsync"
	Index  int    // the copy at fault, or -1 when the batch as a whole is
	Reason string // what is wrong, e.g. "size 0"
	size   bool   // a size problem: Unwrap returns ErrSize
}

// Error formats the error as "cuda: OP: copy INDEX: REASON", without the
// copy when the batch as a whole is at fault.
func (e *BatchError) Error() string {
	s := "cuda: " + e.Op + ": "
	if e.Index >= 0 {
		s += "copy " + strconv.Itoa(e.Index) + ": "
	}
	return s + e.Reason
}

// Unwrap returns ErrSize for errors about sizes, nil for the others.
func (e *BatchError) Unwrap() error {
	if e.size {
		return ErrSize
	}
	return nil
}

func batchErr(op string, index int, format string, args ...any) *BatchError {
	return &BatchError{Op: op, Index: index, Reason: fmt.Sprintf(format, args...)}
}

func batchSizeErr(op string, index int, format string, args ...any) *BatchError {
	e := batchErr(op, index, format, args...)
	e.size = true
	return e
}

// checkOrder refuses an order the driver does not know.
func checkOrder(op string, order SrcAccessOrder) error {
	if !order.valid() {
		return batchErr(op, -1, "invalid source access order %v", order)
	}
	return nil
}

// checkBatch checks copies and order without touching the driver.
func checkBatch(copies []BatchCopy, order SrcAccessOrder) error {
	const op = "CopyBatchAsync"
	if len(copies) == 0 {
		return batchSizeErr(op, -1, "empty batch")
	}
	if err := checkOrder(op, order); err != nil {
		return err
	}
	for i, c := range copies {
		switch {
		case c.Size <= 0:
			return batchSizeErr(op, i, "size %d", c.Size)
		case c.DstHost != nil && len(c.DstHost) < c.Size:
			return batchSizeErr(op, i, "destination of %d bytes for a copy of %d", len(c.DstHost), c.Size)
		case c.SrcHost != nil && len(c.SrcHost) < c.Size:
			return batchSizeErr(op, i, "source of %d bytes for a copy of %d", len(c.SrcHost), c.Size)
		case c.DstHost == nil && c.Dst == 0:
			return batchErr(op, i, "no destination (nil slice and device address 0)")
		case c.SrcHost == nil && c.Src == 0:
			return batchErr(op, i, "no source (nil slice and device address 0)")
		}
	}
	return nil
}

// checkPieces checks the arguments of CopyHtoDBatch and CopyDtoHBatch.
func checkPieces(op string, dev DevicePtr, host []byte, piece int, order SrcAccessOrder) error {
	switch {
	case len(host) == 0:
		return batchSizeErr(op, -1, "empty host memory")
	case piece <= 0:
		return batchSizeErr(op, -1, "piece size %d", piece)
	case dev == 0:
		return batchErr(op, -1, "device address 0")
	}
	return checkOrder(op, order)
}

// batchFn returns the driver's batch copy function, preferring the CUDA
// 13 ABI (cuMemcpyBatchAsync_v2), and whether it is that one: the CUDA
// 12.8 cuMemcpyBatchAsync takes a failIdx pointer before the stream, _v2
// does not. Without either it returns an error wrapping ErrMissingSymbol.
func batchFn() (f uintptr, v2 bool, err error) {
	switch {
	case fn.cuMemcpyBatchAsyncV2 != 0:
		return fn.cuMemcpyBatchAsyncV2, true, nil
	case fn.cuMemcpyBatchAsync != 0:
		return fn.cuMemcpyBatchAsync, false, nil
	}
	return 0, false, fmt.Errorf("%w: cuMemcpyBatchAsync_v2 or cuMemcpyBatchAsync (CUDA 12.8 or later)", ErrMissingSymbol)
}

// BatchCopyAvailable returns nil when the loaded driver has the batch copy
// of CopyBatchAsync (cuMemcpyBatchAsync, CUDA 12.8 and later), an error
// wrapping ErrMissingSymbol when it is older, and Load's error without a
// driver.
func BatchCopyAvailable() error {
	if err := Load(); err != nil {
		return err
	}
	_, _, err := batchFn()
	return err
}

// CopyBatchAsync queues the copies on the stream as one batch
// (cuMemcpyBatchAsync) and returns; the copies of a batch may run in any
// order, so none may depend on another. The batch reads every source
// with the access order given (see SrcAccessOrder for what each asks of
// the caller) and writes every destination in stream order.
//
// Host memory may be pageable: ordinary Go slices and mmap memory as
// well as page-locked memory. The driver reads the address arrays during
// the call only, and the slices are kept alive and in place until the
// call returns. After that, whatever the order, the caller must keep
// every host slice, source or destination, referenced and must neither
// write it nor (a destination) read it until the stream has passed the
// batch (Synchronize, or an event recorded after it and waited for); a
// destination holds its data only then. This is more than the driver's
// documentation asks for SrcAccessDuringCall, which says such sources
// are read before the call returns: on an H200 with driver 580.159.04
// (CUDA 13.0) pageable sources in batches of several copies larger than
// 64 KiB were still read after the call had returned, with either ABI
// and in every order (page-locked sources were not). Go's collector does
// not move heap memory, and the slices passed here are on the heap;
// callers who want the cgo rules' guarantee for Go memory the driver
// uses after the call can pin the slices themselves with a
// runtime.Pinner until the stream has passed the batch.
//
// Invalid copies or order return a *BatchError before the driver is
// called; the legacy default stream, which the driver refuses for batch
// copies, too. A driver older than CUDA 12.8 gives an error wrapping
// ErrMissingSymbol. A driver failure is an *Error, naming the copy at
// fault when the driver says which.
func (s *Stream) CopyBatchAsync(copies []BatchCopy, order SrcAccessOrder) error {
	if err := checkBatch(copies, order); err != nil {
		return err
	}
	if err := s.checkBatchStream("CopyBatchAsync"); err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	arr := newBatchArrays(len(copies))
	for i, c := range copies {
		arr.sizes[i] = uintptr(c.Size)
		arr.dsts[i] = uintptr(c.Dst)
		if c.DstHost != nil {
			arr.dsts[i] = pinAddr(&pin, c.DstHost)
		}
		arr.srcs[i] = uintptr(c.Src)
		if c.SrcHost != nil {
			arr.srcs[i] = pinAddr(&pin, c.SrcHost)
		}
	}
	return s.batch(arr, order)
}

// CopyHtoDBatch copies host memory src (pageable or page-locked) to the
// device at dst as one batch of copies of piece bytes each (the last one
// shorter), queued on the stream with the source access order given (see
// SrcAccessOrder). Whatever the order, src must stay referenced and
// unchanged until the stream has passed the batch, when the data is on
// the device (see CopyBatchAsync).
func (s *Stream) CopyHtoDBatch(dst DevicePtr, src []byte, piece int, order SrcAccessOrder) error {
	const op = "CopyHtoDBatch"
	if err := checkPieces(op, dst, src, piece, order); err != nil {
		return err
	}
	if err := s.checkBatchStream(op); err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	arr := pieceArrays(uintptr(dst), pinAddr(&pin, src), len(src), piece)
	return s.batch(arr, order)
}

// CopyDtoHBatch copies len(dst) bytes from the device at src into host
// memory dst (pageable or page-locked) as one batch of copies of piece
// bytes each (the last one shorter), queued on the stream with the
// source access order given for the device source (SrcAccessAny and
// SrcAccessDuringCall: no earlier work on the stream may be writing it).
// dst holds the data once the stream has passed the batch, and must stay
// referenced and untouched until then.
func (s *Stream) CopyDtoHBatch(dst []byte, src DevicePtr, piece int, order SrcAccessOrder) error {
	const op = "CopyDtoHBatch"
	if err := checkPieces(op, src, dst, piece, order); err != nil {
		return err
	}
	if err := s.checkBatchStream(op); err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	arr := pieceArrays(pinAddr(&pin, dst), uintptr(src), len(dst), piece)
	return s.batch(arr, order)
}

// checkBatchStream refuses a destroyed stream and the legacy default
// stream (handle 0), which cuMemcpyBatchAsync does not accept.
func (s *Stream) checkBatchStream(op string) error {
	if s == nil || s.handle == 0 {
		return batchErr(op, -1, "the legacy default stream cannot run batch copies; use a stream from NewStream")
	}
	if s.destroyed.Load() {
		return ErrClosed
	}
	return nil
}

// pinAddr pins the Go object behind b (nothing for memory outside the Go
// heap) and returns b's address. Pin's argument escapes, so b is never
// on a goroutine stack, where it could move.
func pinAddr(p *runtime.Pinner, b []byte) uintptr {
	d := unsafe.SliceData(b)
	p.Pin(d)
	return uintptr(unsafe.Pointer(d))
}

// batchArrays are the three arrays of cuMemcpyBatchAsync, in Go memory:
// the driver only reads them during the call.
type batchArrays struct {
	dsts, srcs, sizes []uintptr // CUdeviceptr and size_t, both 64-bit here
}

func newBatchArrays(n int) batchArrays {
	return batchArrays{dsts: make([]uintptr, n), srcs: make([]uintptr, n), sizes: make([]uintptr, n)}
}

// pieceArrays splits a copy of n bytes from src to dst into pieces of at
// most piece bytes.
func pieceArrays(dst, src uintptr, n, piece int) batchArrays {
	arr := newBatchArrays((n + piece - 1) / piece)
	for i := range arr.sizes {
		off := i * piece
		arr.dsts[i] = dst + uintptr(off)
		arr.srcs[i] = src + uintptr(off)
		arr.sizes[i] = uintptr(min(piece, n-off))
	}
	return arr
}

// sizeMax is SIZE_MAX: the failIdx of an error that concerns no single
// copy.
const sizeMax = ^uintptr(0)

// batch makes the driver call: one attributes entry (index 0) for every
// copy. The arrays, the attributes and failIdx are Go memory that the call
// expression converts, so invoke's uintptrescapes keeps them alive and on
// the heap during the call.
func (s *Stream) batch(arr batchArrays, order SrcAccessOrder) error {
	if err := Load(); err != nil {
		return err
	}
	f, v2, err := batchFn()
	if err != nil {
		return err
	}
	attrs := memcpyAttributes{srcAccessOrder: uint32(order)}
	idxs := []uintptr{0}
	n := uintptr(len(arr.sizes))
	var r Result
	failIdx := sizeMax
	if v2 {
		r = s.ctx.call(f,
			uintptr(unsafe.Pointer(unsafe.SliceData(arr.dsts))), uintptr(unsafe.Pointer(unsafe.SliceData(arr.srcs))),
			uintptr(unsafe.Pointer(unsafe.SliceData(arr.sizes))), n,
			uintptr(unsafe.Pointer(&attrs)), uintptr(unsafe.Pointer(unsafe.SliceData(idxs))), 1,
			s.handle)
	} else {
		r = s.ctx.call(f,
			uintptr(unsafe.Pointer(unsafe.SliceData(arr.dsts))), uintptr(unsafe.Pointer(unsafe.SliceData(arr.srcs))),
			uintptr(unsafe.Pointer(unsafe.SliceData(arr.sizes))), n,
			uintptr(unsafe.Pointer(&attrs)), uintptr(unsafe.Pointer(unsafe.SliceData(idxs))), 1,
			uintptr(unsafe.Pointer(&failIdx)), s.handle)
	}
	runtime.KeepAlive(arr)
	if r == Success {
		return nil
	}
	op := "cuMemcpyBatchAsync"
	if v2 {
		op = "cuMemcpyBatchAsync_v2"
	}
	if failIdx != sizeMax && failIdx < n {
		op = fmt.Sprintf("%s (copy %d of %d)", op, failIdx, n)
	}
	return check(op, r)
}
