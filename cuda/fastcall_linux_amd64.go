//go:build linux && amd64

package cuda

import "unsafe"

// fastArgs is the argument block of fastTrampoline; the layout is fixed by
// fastcall_linux_amd64.s.
type fastArgs struct {
	setCurrent, ctx, fn    uintptr
	a0, a1, a2, a3, a4, a5 uintptr
	r                      uintptr
}

// fastTrampolineABI0 is the address of fastTrampoline (set in assembly).
var fastTrampolineABI0 uintptr

// runtimeCgocall runs fn(arg) on the system stack with the C calling
// convention, as cgo and purego do. The block stays on this goroutine's
// stack: the stack cannot move while the goroutine is in the call.
//
//go:linkname runtimeCgocall runtime.cgocall
//go:noescape
func runtimeCgocall(fn uintptr, arg unsafe.Pointer) int32

// fastCall makes ctx current on the calling thread and calls f with up to
// six integer arguments, in a single transition to C: about half the cost of
// two purego calls, no allocation, no LockOSThread. The arguments must not
// point into Go memory (handles, device addresses and pinned host memory
// only). ctx == 0 skips the context switch.
func fastCall(ctx, f, a0, a1, a2, a3, a4, a5 uintptr) Result {
	a := fastArgs{ctx: ctx, fn: f, a0: a0, a1: a1, a2: a2, a3: a3, a4: a4, a5: a5}
	if ctx != 0 {
		a.setCurrent = fn.cuCtxSetCurrent
	}
	runtimeCgocall(fastTrampolineABI0, unsafe.Pointer(&a))
	return Result(int32(uint32(a.r)))
}

// fastPath reports whether fastCall uses the single-transition trampoline.
const fastPath = true

// fastCallPtr is fastCall returning the full 64-bit return register, for
// tests that call functions returning pointers.
func fastCallPtr(ctx, f, a0, a1, a2, a3, a4, a5 uintptr) uintptr {
	a := fastArgs{ctx: ctx, fn: f, a0: a0, a1: a1, a2: a2, a3: a3, a4: a4, a5: a5}
	if ctx != 0 {
		a.setCurrent = fn.cuCtxSetCurrent
	}
	runtimeCgocall(fastTrampolineABI0, unsafe.Pointer(&a))
	return a.r
}
