package cuda

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// invoke calls the C function at f with integer and pointer arguments and
// returns its CUresult. It goes through purego.SyscallN, not
// RegisterLibFunc, so no reflection is paid per call.
//
// Like SyscallN it is marked uintptrescapes: a pointer converted to uintptr
// in the argument list is kept alive (and off the movable stack) until the
// call returns. Such conversions must appear in the call expression itself.
//
//go:uintptrescapes
func invoke(f uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(f, args...)
	return Result(int32(uint32(r)))
}

// goString copies the NUL-terminated C string at p (memory the driver owns).
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// driverErrorText asks the driver for r's name and description; both are
// empty when the driver is not loaded or does not know r.
func driverErrorText(r Result) (name, desc string) {
	if fn.cuGetErrorName == 0 {
		return "", ""
	}
	var np, dp *byte
	if invoke(fn.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&np))) == Success {
		name = goString(np)
	}
	if invoke(fn.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&dp))) == Success {
		desc = goString(dp)
	}
	return name, desc
}
