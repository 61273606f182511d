//go:build !(linux && amd64)

package cuda

import "runtime"

// fastCall makes ctx current and calls f with up to six integer arguments.
// Without the amd64 trampoline it takes two purego calls on a locked thread.
// The arguments must not point into Go memory.
func fastCall(ctx, f, a0, a1, a2, a3, a4, a5 uintptr) Result {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if ctx != 0 {
		if r := invoke(fn.cuCtxSetCurrent, ctx); r != Success {
			return r
		}
	}
	return invoke(f, a0, a1, a2, a3, a4, a5)
}

// fastPath reports whether fastCall uses the single-transition trampoline.
const fastPath = false
