// Package cuda is a small binding to the CUDA driver API (libcuda.so.1),
// loaded at run time with purego: no CUDA toolkit, headers or cgo are needed
// to build it, and a machine without a driver gets ErrNoDriver instead of a
// crash.
//
// It covers what pinned host memory needs: devices and their attributes, the
// device's primary context, page-locked host memory (cuMemHostAlloc and
// cuMemHostRegister), device memory, streams, events, synchronous and
// asynchronous copies, and loading PTX modules and launching their kernels.
//
// # Threads and contexts
//
// A CUDA context is current per OS thread, and goroutines move between
// threads. Every method of Context, and of the objects made from it, is safe
// to call from any goroutine: for the duration of one driver call it locks the
// calling goroutine to its thread and makes the primary context current there
// (one extra driver call, cuCtxSetCurrent). Code that issues many calls in a
// row from one goroutine can pay that only once with Context.LockThread.
// Because the context is made current on whatever thread runs the call,
// programs that also use other contexts must set theirs before each of their
// own calls, as CUDA requires anyway.
//
// # Asynchronous copies
//
// Asynchronous copies read or write host memory after the call returns, so
// they accept only page-locked memory that the driver knows: memory from
// HostAlloc or HostRegister, or memory pinned by other code in the process.
// A slice of ordinary Go memory is refused with ErrNotPinned: the garbage
// collector could free it while the copy engine still reads it.
//
// # Beside other CUDA code
//
// The primary context is the one that the CUDA runtime (cudaSetDevice,
// cudaStreamCreate) and most bindings use, so memory, streams and events of
// this package and of other libraries in the process work together.
// Context.WrapStream and Context.WrapEvent take the raw CUstream and CUevent
// handles that other code made, without owning them: copies can be queued
// on another library's stream, and its event can fence a pool buffer's
// release. Their owner keeps them alive while the wrappers are used and
// destroys them itself.
package cuda
