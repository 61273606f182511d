// memcpy_bw: the CUDA C reference for pinpool's transfer engine. It times
// cudaMemcpyAsync of pinned memory (cudaMallocHost) host-to-device and
// device-to-host on a non-blocking stream, at the sizes of the Go benchmark
// table (BenchmarkTransfer in transfer/), with CUDA events, median of
// repeats; both directions at once on two streams; and the latency of a
// 4 KiB copy (cudaMemcpyAsync + cudaStreamSynchronize, host clock). The
// copier's pinned path should reach >= 98% of these figures at >= 1 MiB and
// stay within 1 us of the 4 KiB latency.
//
// Compiled and run on the GPU host by scripts/gpu-run.sh:
//   nvcc -O2 -x cu -o .gpu/memcpy_bw scripts/ref/memcpy_bw.cu -lcuda
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); exit(1); } } while (0)

static int cmp_float(const void *a, const void *b) {
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

enum { REPEATS = 11 };

// copies runs iters copies of n bytes in direction dir (0 H2D, 1 D2H) on s.
static void copies(int dir, void *dev, void *host, size_t n, int iters, cudaStream_t s) {
	for (int i = 0; i < iters; i++) {
		if (dir == 0)
			CHECK(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, s));
		else
			CHECK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, s));
	}
}

// bandwidth returns the median GB/s over REPEATS batches of copies, each
// batch timed with events.
static double bandwidth(int dir, void *dev, void *host, size_t n, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
	int iters = (int)((256u << 20) / n);
	if (iters < 1) iters = 1;
	if (iters > 1000) iters = 1000;
	copies(dir, dev, host, n, 1, s); // warm-up
	float ms[REPEATS];
	for (int r = 0; r < REPEATS; r++) {
		CHECK(cudaEventRecord(e0, s));
		copies(dir, dev, host, n, iters, s);
		CHECK(cudaEventRecord(e1, s));
		CHECK(cudaEventSynchronize(e1));
		CHECK(cudaEventElapsedTime(&ms[r], e0, e1));
		ms[r] /= iters;
	}
	qsort(ms, REPEATS, sizeof ms[0], cmp_float);
	return (double)n / (ms[REPEATS / 2] * 1e-3) / 1e9;
}

int main(void) {
	const size_t sizes[] = {4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20, 256u << 20, 1u << 30};
	const int nsizes = sizeof sizes / sizeof sizes[0];
	const size_t maxn = sizes[nsizes - 1];
	void *h, *h2, *d, *d2;
	CHECK(cudaMallocHost(&h, maxn));
	CHECK(cudaMallocHost(&h2, maxn));
	CHECK(cudaMalloc(&d, maxn));
	CHECK(cudaMalloc(&d2, maxn));
	for (size_t i = 0; i < maxn; i++) ((unsigned char *)h)[i] = (unsigned char)(i * 131 + 7);
	cudaStream_t s, s2;
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	cudaEvent_t e0, e1, e2;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	CHECK(cudaEventCreate(&e2));

	printf("%-10s %-14s %8s\n", "size", "path", "GB/s");
	for (int i = 0; i < nsizes; i++) {
		size_t n = sizes[i];
		printf("%-10zu %-14s %8.2f\n", n, "pinned/H2D", bandwidth(0, d, h, n, s, e0, e1));
		printf("%-10zu %-14s %8.2f\n", n, "pinned/D2H", bandwidth(1, d, h, n, s, e0, e1));
		// Both directions at once: H2D on s, D2H on s2, timed from s.
		int iters = (int)((256u << 20) / n);
		if (iters < 1) iters = 1;
		if (iters > 1000) iters = 1000;
		float ms[REPEATS];
		for (int r = 0; r < REPEATS; r++) {
			CHECK(cudaEventRecord(e0, s));
			CHECK(cudaStreamWaitEvent(s2, e0, 0));
			copies(0, d, h, n, iters, s);
			copies(1, d2, h2, n, iters, s2);
			CHECK(cudaEventRecord(e2, s2));
			CHECK(cudaStreamWaitEvent(s, e2, 0));
			CHECK(cudaEventRecord(e1, s));
			CHECK(cudaEventSynchronize(e1));
			CHECK(cudaEventElapsedTime(&ms[r], e0, e1));
			ms[r] /= iters;
		}
		qsort(ms, REPEATS, sizeof ms[0], cmp_float);
		printf("%-10zu %-14s %8.2f\n", n, "pinned/bidir", 2.0 * n / (ms[REPEATS / 2] * 1e-3) / 1e9);
	}

	// Latency of one 4 KiB copy, as a synchronous caller sees it.
	// One copy and its stream synchronize per iteration, timed on the host
	// (median): what a synchronous copy call (the Go copier's ToDevice of a
	// pinned buffer) can reach at each size.
	for (int i = 0; i < nsizes; i++) {
		size_t n = sizes[i];
		for (int dir = 0; dir < 2; dir++) {
			enum { SYNCREPS = 101 };
			static double t[SYNCREPS];
			int reps = n >= (256u << 20) ? 11 : SYNCREPS;
			copies(dir, d, h, n, 1, s);
			CHECK(cudaStreamSynchronize(s));
			for (int r = 0; r < reps; r++) {
				double t0 = now_ns();
				copies(dir, d, h, n, 1, s);
				CHECK(cudaStreamSynchronize(s));
				t[r] = now_ns() - t0;
			}
			qsort(t, reps, sizeof t[0], cmp_double);
			printf("%-10zu %-14s %8.2f\n", n, dir == 0 ? "sync/H2D" : "sync/D2H", (double)n / t[reps / 2]);
		}
	}

	enum { LAT = 20001 };
	static double lat[LAT];
	for (int dir = 0; dir < 2; dir++) {
		for (int i = 0; i < 1000; i++) {
			copies(dir, d, h, 4096, 1, s);
			CHECK(cudaStreamSynchronize(s));
		}
		for (int i = 0; i < LAT; i++) {
			double t0 = now_ns();
			copies(dir, d, h, 4096, 1, s);
			CHECK(cudaStreamSynchronize(s));
			lat[i] = now_ns() - t0;
		}
		qsort(lat, LAT, sizeof lat[0], cmp_double);
		printf("latency 4096 %s async+sync: median %.2f us, p10 %.2f us, p90 %.2f us\n",
			dir == 0 ? "H2D" : "D2H", lat[LAT / 2] / 1e3, lat[LAT / 10] / 1e3, lat[LAT * 9 / 10] / 1e3);
	}
	CHECK(cudaFreeHost(h));
	CHECK(cudaFreeHost(h2));
	CHECK(cudaFree(d));
	CHECK(cudaFree(d2));
	return 0;
}
