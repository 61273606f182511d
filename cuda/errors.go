package cuda

import (
	"errors"
	"fmt"
)

// Result is a CUresult, the status code every driver API call returns.
type Result int32

// Success is CUDA_SUCCESS.
const Success Result = 0

// Error is a failed driver call: the CUresult with its name and description
// and the driver function that returned it. Compare it with the exported
// sentinels (ErrOutOfMemory, ErrInvalidContext, ...) using errors.Is.
type Error struct {
	Code        Result // the CUresult
	Name        string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Description string // the driver's text, e.g. "out of memory"
	Op          string // the driver function, e.g. "cuMemHostAlloc"; empty in sentinels
}

// Error formats the error as "cuda: OP: NAME (CODE): DESCRIPTION".
func (e *Error) Error() string {
	s := "cuda: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += fmt.Sprintf("%s (%d)", e.Name, int32(e.Code))
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, cuda.ErrOutOfMemory) holds for any out-of-memory failure.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func sentinel(code Result) *Error {
	return &Error{Code: code, Name: code.Name(), Description: resultText[code].desc}
}

// Sentinels for the results this project meets; errors.Is matches any *Error
// with the same code.
var (
	ErrInvalidValue         = sentinel(1)
	ErrOutOfMemory          = sentinel(2)
	ErrNotInitialized       = sentinel(3)
	ErrDeinitialized        = sentinel(4)
	ErrStubLibrary          = sentinel(34)
	ErrNoDevice             = sentinel(100)
	ErrInvalidDevice        = sentinel(101)
	ErrInvalidImage         = sentinel(200)
	ErrInvalidContext       = sentinel(201)
	ErrNoBinaryForGPU       = sentinel(209)
	ErrInvalidPTX           = sentinel(218)
	ErrUnsupportedPTX       = sentinel(222)
	ErrInvalidHandle        = sentinel(400)
	ErrNotFound             = sentinel(500)
	ErrNotReady             = sentinel(600)
	ErrIllegalAddress       = sentinel(700)
	ErrLaunchFailed         = sentinel(719)
	ErrAlreadyRegistered    = sentinel(712)
	ErrNotRegistered        = sentinel(713)
	ErrNotPermitted         = sentinel(800)
	ErrNotSupported         = sentinel(801)
	ErrSystemDriverMismatch = sentinel(803)
	ErrUnknown              = sentinel(999)
)

// Errors of this package that are not driver results.
var (
	// ErrNoDriver means libcuda could not be loaded or initialised: no GPU
	// driver on this machine. It is not a failure of the program; callers
	// fall back to host memory.
	ErrNoDriver = errors.New("cuda: no usable CUDA driver or device")
	// ErrMissingSymbol means the loaded driver lacks an optional function
	// that the called feature needs (an older driver).
	ErrMissingSymbol = errors.New("cuda: driver lacks a function this feature needs")
	// ErrClosed is returned by any use of a Context, stream, event, module or
	// memory after it was closed or freed.
	ErrClosed = errors.New("cuda: use after close or free")
	// ErrNotPinned is returned when an asynchronous copy is given host memory
	// that is not page-locked by the driver, such as an ordinary Go slice.
	ErrNotPinned = errors.New("cuda: asynchronous copy needs page-locked host memory")
	// ErrSize is returned for a negative length, a copy longer than its
	// source or destination, or a length that overflows.
	ErrSize = errors.New("cuda: invalid size")
	// ErrNotMapped is returned by DevicePointer for host memory that was not
	// allocated or registered with the DeviceMap flag.
	ErrNotMapped = errors.New("cuda: host memory is not mapped into the device address space")
)

// resultErr turns a CUresult from the driver function op into an error (nil
// for Success). Names and descriptions come from the driver when it has
// them, else from this package's table.
func resultErr(op string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Code: r, Op: op}
	e.Name, e.Description = driverErrorText(r)
	if e.Name == "" {
		e.Name = r.Name()
	}
	if e.Description == "" {
		e.Description = resultText[r].desc
	}
	return e
}

// Name is the CUresult's symbolic name from this package's table, or
// "CUDA_ERROR_<code>" for a code the table does not know.
func (r Result) Name() string {
	if t, ok := resultText[r]; ok {
		return t.name
	}
	return fmt.Sprintf("CUDA_ERROR_%d", int32(r))
}
