package cuda

// fn holds the addresses of the driver functions, filled once by Load.
// Required symbols are non-zero after a successful Load; optional ones may be
// zero, and the features that need them return ErrMissingSymbol.
var fn struct {
	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                   uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute           uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease          uintptr
	cuCtxSetCurrent, cuCtxGetCurrent, cuCtxSynchronize                             uintptr
	cuMemHostAlloc, cuMemFreeHost, cuMemHostGetDevicePointer, cuMemHostGetFlags    uintptr
	cuMemHostRegister, cuMemHostUnregister, cuPointerGetAttribute                  uintptr
	cuMemAlloc, cuMemFree, cuMemGetInfo, cuMemsetD8, cuMemsetD32, cuMemsetD8Async  uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD                                       uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                        uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamQuery            uintptr
	cuStreamWaitEvent                                                              uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventQuery, cuEventSynchronize uintptr
	cuEventElapsedTime                                                             uintptr
	cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction, cuLaunchKernel        uintptr
	cuMemcpyBatchAsync, cuMemcpyBatchAsyncV2                                       uintptr
	cuMemGetAddressRange                                                           uintptr
}

// symbol is one driver function to look up: the versioned name that cuda.h
// maps the plain name to, an older fallback name, and whether the binding
// can work without it.
type symbol struct {
	name     string
	fallback string
	optional bool
	addr     *uintptr
}

// symbols lists every driver function this package calls. The _v2 names are
// the ones cuda.h's macros select; calling the unversioned ones would get the
// old 32-bit ABI.
var symbols = []symbol{
	{"cuInit", "", false, &fn.cuInit},
	{"cuDriverGetVersion", "", false, &fn.cuDriverGetVersion},
	{"cuGetErrorName", "", false, &fn.cuGetErrorName},
	{"cuGetErrorString", "", false, &fn.cuGetErrorString},
	{"cuDeviceGetCount", "", false, &fn.cuDeviceGetCount},
	{"cuDeviceGet", "", false, &fn.cuDeviceGet},
	{"cuDeviceGetName", "", false, &fn.cuDeviceGetName},
	{"cuDeviceGetAttribute", "", false, &fn.cuDeviceGetAttribute},
	{"cuDeviceTotalMem_v2", "", false, &fn.cuDeviceTotalMem},
	{"cuDevicePrimaryCtxRetain", "", false, &fn.cuDevicePrimaryCtxRetain},
	{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", false, &fn.cuDevicePrimaryCtxRelease},
	{"cuCtxSetCurrent", "", false, &fn.cuCtxSetCurrent},
	{"cuCtxGetCurrent", "", false, &fn.cuCtxGetCurrent},
	{"cuCtxSynchronize", "", false, &fn.cuCtxSynchronize},
	{"cuMemHostAlloc", "", false, &fn.cuMemHostAlloc},
	{"cuMemFreeHost", "", false, &fn.cuMemFreeHost},
	{"cuMemHostGetDevicePointer_v2", "", false, &fn.cuMemHostGetDevicePointer},
	{"cuMemHostGetFlags", "", false, &fn.cuMemHostGetFlags},
	{"cuMemHostRegister_v2", "", true, &fn.cuMemHostRegister},
	{"cuMemHostUnregister", "", true, &fn.cuMemHostUnregister},
	{"cuPointerGetAttribute", "", false, &fn.cuPointerGetAttribute},
	{"cuMemAlloc_v2", "", false, &fn.cuMemAlloc},
	{"cuMemFree_v2", "", false, &fn.cuMemFree},
	{"cuMemGetInfo_v2", "", false, &fn.cuMemGetInfo},
	{"cuMemGetAddressRange_v2", "", true, &fn.cuMemGetAddressRange},
	{"cuMemsetD8_v2", "", false, &fn.cuMemsetD8},
	{"cuMemsetD32_v2", "", false, &fn.cuMemsetD32},
	{"cuMemsetD8Async", "", false, &fn.cuMemsetD8Async},
	{"cuMemcpyHtoD_v2", "", false, &fn.cuMemcpyHtoD},
	{"cuMemcpyDtoH_v2", "", false, &fn.cuMemcpyDtoH},
	{"cuMemcpyDtoD_v2", "", false, &fn.cuMemcpyDtoD},
	{"cuMemcpyHtoDAsync_v2", "", false, &fn.cuMemcpyHtoDAsync},
	{"cuMemcpyDtoHAsync_v2", "", false, &fn.cuMemcpyDtoHAsync},
	{"cuMemcpyDtoDAsync_v2", "", false, &fn.cuMemcpyDtoDAsync},
	{"cuStreamCreate", "", false, &fn.cuStreamCreate},
	{"cuStreamDestroy_v2", "", false, &fn.cuStreamDestroy},
	{"cuStreamSynchronize", "", false, &fn.cuStreamSynchronize},
	{"cuStreamQuery", "", false, &fn.cuStreamQuery},
	{"cuStreamWaitEvent", "", true, &fn.cuStreamWaitEvent},
	{"cuEventCreate", "", false, &fn.cuEventCreate},
	{"cuEventDestroy_v2", "", false, &fn.cuEventDestroy},
	{"cuEventRecord", "", false, &fn.cuEventRecord},
	{"cuEventQuery", "", false, &fn.cuEventQuery},
	{"cuEventSynchronize", "", false, &fn.cuEventSynchronize},
	{"cuEventElapsedTime_v2", "cuEventElapsedTime", false, &fn.cuEventElapsedTime},
	{"cuModuleLoadDataEx", "", false, &fn.cuModuleLoadDataEx},
	{"cuModuleUnload", "", false, &fn.cuModuleUnload},
	{"cuModuleGetFunction", "", false, &fn.cuModuleGetFunction},
	{"cuLaunchKernel", "", false, &fn.cuLaunchKernel},
	// The batch copy (CUDA 12.8+) has two ABIs, so two slots and no
	// fallback: cuMemcpyBatchAsync takes a failIdx pointer before the
	// stream, cuMemcpyBatchAsync_v2 (what CUDA 13's cuda.h maps the name
	// to) does not. batchFn picks one.
	{"cuMemcpyBatchAsync_v2", "", true, &fn.cuMemcpyBatchAsyncV2},
	{"cuMemcpyBatchAsync", "", true, &fn.cuMemcpyBatchAsync},
}
