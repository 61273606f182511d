// callcost: the native cost of the driver calls that pinpool's cuda package
// puts on hot paths, timed from C so that the Go binding's overhead can be
// read as the difference (BenchmarkCallOverhead). Compiled on the GPU host by
// scripts/gpu-run.sh: nvcc -O2 -x cu -o callcost scripts/ref/callcost.c -lcuda
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
	const char *n_ = "?"; cuGetErrorName(r_, &n_); \
	fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #x, n_); exit(1); } } while (0)

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

#define TIME(label, n, stmt) do { \
	for (int i_ = 0; i_ < (n) / 10; i_++) { stmt; } \
	double best_ = 1e30; \
	for (int rep_ = 0; rep_ < 5; rep_++) { \
		double t0_ = now_ns(); \
		for (int i_ = 0; i_ < (n); i_++) { stmt; } \
		double per_ = (now_ns() - t0_) / (n); \
		if (per_ < best_) best_ = per_; \
	} \
	printf("%-40s %8.1f ns/call (best of 5 x %d)\n", label, best_, (n)); \
} while (0)

int main(void) {
	CHECK(cuInit(0));
	CUdevice dev;
	CHECK(cuDeviceGet(&dev, 0));
	CUcontext ctx;
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CUstream s;
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUevent e;
	CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventRecord(e, s));
	CHECK(cuStreamSynchronize(s));
	void *h;
	CHECK(cuMemHostAlloc(&h, 4096, 0));
	CUdeviceptr d;
	CHECK(cuMemAlloc(&d, 4096));
	CUcontext cur;
	const int n = 1000000;

	TIME("cuCtxGetCurrent", n, cuCtxGetCurrent(&cur));
	TIME("cuCtxSetCurrent (already current)", n, cuCtxSetCurrent(ctx));
	TIME("cuCtxSetCurrent + cuCtxGetCurrent", n, (cuCtxSetCurrent(ctx), cuCtxGetCurrent(&cur)));
	TIME("cuStreamQuery (idle)", n, cuStreamQuery(s));
	TIME("cuEventQuery (completed)", n, cuEventQuery(e));
	TIME("cuEventRecord", n / 10, cuEventRecord(e, s));
	CHECK(cuStreamSynchronize(s));
	TIME("cuMemcpyHtoDAsync 4 KiB + cuStreamSynchronize", n / 20,
		(cuMemcpyHtoDAsync(d, h, 4096, s), cuStreamSynchronize(s)));
	TIME("cuMemcpyHtoD 4 KiB pinned (sync)", n / 20, cuMemcpyHtoD(d, h, 4096));
	return 0;
}
