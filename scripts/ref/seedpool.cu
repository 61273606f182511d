// seedpool: the C++ reference of the "seed" pinned-memory pool, the design
// that pinpool starts from and is measured against. It is the C++ peer of the
// Go benchmark BenchmarkGetRelease of cmd/pinpool/internal/seedpool
// (compare_test.go): its seed/frame sub-benchmark runs the Go reproduction of
// this same design, its pinpool/frame sub-benchmark the real pool, both on a
// warm pool, so these figures say what the seed design
// costs in its own language, next to the Go figures.
//
// What it measures
//   - Alloc+free pairs of one 1080p NV12 frame (1920*1080*3/2 = 3110400
//     bytes) on a warm CudaMemoryPool, by 1, 2, 4, 8, 16, 32, 64 and
//     "online CPUs" threads (deduplicated, sorted, each capped at 2x the CPU
//     count), all threads started together and run for a fixed wall time.
//     ns_per_pair_wall = elapsed wall ns / pairs summed over all threads: the
//     figure that Go's RunParallel reports as ns/op. mpairs_per_s = million
//     pairs per second over all threads (Go's pairs/s metric / 1e6).
//     Each thread count is repeated (3 times by default) and the median is
//     printed. The pool is warmed first so that every thread can hold one
//     block: no cudaMallocHost runs in a timed loop, and this is checked by
//     counting the pool's cudaMallocHost and cudaFreeHost calls.
//   - The raw alternative: one cudaMallocHost + cudaFreeHost of a frame per
//     iteration, 1 thread, 200 iterations (the cost that the pool avoids).
//
// The seed design (CudaMemoryPool below), copied faithfully with its defects
// except the endless retry:
//   - a singleton-like pool (getInstance) with one std::mutex guarding a
//     std::unordered_map<size_t, std::list<uint8_t*>> of idle blocks, one
//     list per exact size (no size classes);
//   - alloc(size, ptr&): lock; pop an idle block of that size if there is
//     one, else cudaMallocHost 4 blocks of exactly that size under the lock,
//     keep 3 idle and return one;
//   - free(size, ptr): lock; push the block back on its size's list (a
//     std::list node is allocated with the global operator new on each free
//     and released on each alloc, under the lock); if more than 32 blocks of
//     that size are idle, cudaFreeHost the excess under the lock;
//   - destroy(): cudaFreeHost every idle block.
//   Defects kept: allocation and freeing of pinned memory under the one lock
//   (a ~1 ms cudaMallocHost stalls every caller of every size); free does
//   not check that the pointer came from the pool or that the size is right;
//   destroy frees the idle blocks but does not clear the lists (a second
//   destroy, or an alloc after it, would reuse freed memory; this program
//   destroys once, at the end); no protection against reusing a block that
//   an asynchronous copy still reads.
//   Defect NOT kept: the seed retried cudaMallocHost endlessly on failure;
//   here alloc stops at the first failure and returns its error when it got
//   no block (the blocks it did get are kept), as cmd/pinpool/internal/seedpool does.
//   Two additions that the hot path never touches: counters of the pool's
//   cudaMallocHost/cudaFreeHost calls (written on the slow paths only, under
//   the lock), and setMaxIdle, with which the benchmark raises the idle cap
//   from the seed's 32 to cover its largest thread count (up to 2x the CPUs),
//   as the Go benchmark does with MaxIdle: with 32 only, more than 32
//   threads would miss and grow and trim in the timed loop.
//
// Build and run
//   On the GPU host, scripts/gpu-run.sh builds and runs every
//   scripts/ref/*.cu (REF=seedpool scripts/gpu-run.sh OUTDIR: only this one):
//     nvcc -O2 -x cu -o .gpu/seedpool scripts/ref/seedpool.cu -lcuda
//     .gpu/seedpool > gpu-logs/ref-seedpool.txt
//   Without CUDA (a local check; aligned_alloc/free stand in for
//   cudaMallocHost/cudaFreeHost and no CUDA header is included):
//     g++ -O2 -std=c++17 -x c++ -DSEED_NO_CUDA -pthread scripts/ref/seedpool.cu -o /tmp/seedpool && /tmp/seedpool
//   Arguments and environment (all optional):
//     argv[1]        comma-separated thread counts, used as given (sorted,
//                    deduplicated, each 1..256), e.g. 1,16,32
//     SEED_SECONDS   wall time per run, default 0.5
//     SEED_REPEATS   runs per thread count, default 3
//   With the defaults a 32-core host runs 7 thread counts (1 to 64) x 3 runs
//   x 0.5 s, plus the warm-up and the raw pairs: about 15 s in all.
//
// Output (one line per repeat, then the median, then the raw figure):
//   seedpool: frame 3110400 bytes, cpus 32, backend cudaMallocHost
//   seedpool threads=8 repeat=1 pairs=123456789 seconds=0.500 ns_per_pair_wall=4.05 mpairs_per_s=246.9
//   seedpool threads=8 median ns_per_pair_wall=4.05 mpairs_per_s=246.9
//   raw threads=1 pairs=200 seconds=0.300 ns_per_pair=1500000.0 ...
//   seedpool: done
// Exit status: 0 on success; 1 on a CUDA error (its string is printed) or a
// failed check (an allocation in a timed loop); 2 on bad arguments.
//
// Written to compile as C++11 or later (nvcc's host dialect may be older
// than g++'s default): no C++17 library or language features.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <stdlib.h>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#ifndef SEED_NO_CUDA
#include <cuda_runtime.h>
#define SEED_BACKEND "cudaMallocHost"
#else
// Stand-ins for the CUDA runtime calls used here: page-aligned host memory
// from aligned_alloc (size rounded up to a page, as the C standard asks).
#define SEED_BACKEND "aligned_alloc (SEED_NO_CUDA)"
typedef int cudaError_t;
static const cudaError_t cudaSuccess = 0;
static const cudaError_t cudaErrorMemoryAllocation = 2;
static cudaError_t cudaMallocHost(void **ptr, size_t size) {
	const size_t page = 4096;
	*ptr = aligned_alloc(page, (size + page - 1) / page * page);
	return *ptr != NULL ? cudaSuccess : cudaErrorMemoryAllocation;
}
static cudaError_t cudaFreeHost(void *ptr) {
	::free(ptr);
	return cudaSuccess;
}
static const char *cudaGetErrorString(cudaError_t e) {
	return e == cudaErrorMemoryAllocation ? "out of memory (aligned_alloc)" : "unknown error";
}
#endif

// CHECK exits with status 1 and the error string when a CUDA call fails.
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
	exit(1); } } while (0)

static const size_t kFrame = 1920 * 1080 * 3 / 2; // 3110400 bytes: 1080p NV12

// ---------------------------------------------------------------------------
// The seed design.

class CudaMemoryPool {
public:
	static CudaMemoryPool &getInstance() {
		static CudaMemoryPool instance;
		return instance;
	}

	// alloc hands out a block of exactly size bytes in ptr. On a miss it
	// allocates kGrow blocks with cudaMallocHost under the lock, keeps all
	// but one idle and returns one; it stops at the first failed call (the
	// seed retried forever) and returns that error when it got no block.
	cudaError_t alloc(size_t size, uint8_t *&ptr) {
		std::lock_guard<std::mutex> lock(mu_);
		std::list<uint8_t *> &idle = pool_[size];
		cudaError_t err = cudaSuccess;
		if (idle.empty()) {
			for (int i = 0; i < kGrow; i++) {
				void *p = NULL;
				mallocCalls_++;
				err = cudaMallocHost(&p, size);
				if (err != cudaSuccess)
					break;
				idle.push_back(static_cast<uint8_t *>(p));
			}
			if (idle.empty())
				return err;
		}
		ptr = idle.front();
		idle.pop_front();
		return cudaSuccess;
	}

	// free gives a block back to its size's list (no check that it came
	// from this pool, as in the seed) and, when more than maxIdle_ blocks of
	// that size are idle, frees the excess with cudaFreeHost under the lock.
	// It returns the first cudaFreeHost error; the excess is dropped either
	// way.
	cudaError_t free(size_t size, uint8_t *ptr) {
		std::lock_guard<std::mutex> lock(mu_);
		std::list<uint8_t *> &idle = pool_[size];
		idle.push_back(ptr);
		cudaError_t first = cudaSuccess;
		while (idle.size() > maxIdle_) {
			uint8_t *p = idle.back();
			idle.pop_back();
			freeCalls_++;
			cudaError_t err = cudaFreeHost(p);
			if (err != cudaSuccess && first == cudaSuccess)
				first = err;
		}
		return first;
	}

	// destroy frees every idle block. Like the seed, it does not clear the
	// lists: call it once. It returns the first cudaFreeHost error.
	cudaError_t destroy() {
		std::lock_guard<std::mutex> lock(mu_);
		cudaError_t first = cudaSuccess;
		for (std::unordered_map<size_t, std::list<uint8_t *> >::iterator it = pool_.begin(); it != pool_.end(); ++it) {
			for (std::list<uint8_t *>::iterator b = it->second.begin(); b != it->second.end(); ++b) {
				freeCalls_++;
				cudaError_t err = cudaFreeHost(*b);
				if (err != cudaSuccess && first == cudaSuccess)
					first = err;
			}
		}
		return first;
	}

	// Additions for the benchmark (see the top of the file).
	void setMaxIdle(size_t n) {
		std::lock_guard<std::mutex> lock(mu_);
		maxIdle_ = n;
	}
	size_t maxIdle() {
		std::lock_guard<std::mutex> lock(mu_);
		return maxIdle_;
	}
	uint64_t mallocCalls() {
		std::lock_guard<std::mutex> lock(mu_);
		return mallocCalls_;
	}
	uint64_t freeCalls() {
		std::lock_guard<std::mutex> lock(mu_);
		return freeCalls_;
	}
	size_t idle(size_t size) {
		std::lock_guard<std::mutex> lock(mu_);
		std::unordered_map<size_t, std::list<uint8_t *> >::iterator it = pool_.find(size);
		return it == pool_.end() ? 0 : it->second.size();
	}

private:
	static const int kGrow = 4;          // blocks allocated on a miss
	static const size_t kMaxIdle = 32;   // the seed's cap of idle blocks per size

	CudaMemoryPool() : maxIdle_(kMaxIdle), mallocCalls_(0), freeCalls_(0) {}
	// The seed's singleton lives until exit and frees nothing there (the
	// CUDA runtime may be gone by then): memory goes back through destroy.
	~CudaMemoryPool() {}
	CudaMemoryPool(const CudaMemoryPool &);
	CudaMemoryPool &operator=(const CudaMemoryPool &);

	std::mutex mu_;
	std::unordered_map<size_t, std::list<uint8_t *> > pool_;
	size_t maxIdle_;
	uint64_t mallocCalls_;
	uint64_t freeCalls_;
};

// ---------------------------------------------------------------------------
// The benchmark.

static int64_t nowNs() {
	return std::chrono::duration_cast<std::chrono::nanoseconds>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The start and stop flags, each on a cache line of its own: the workers
// read stop once per pair; it is written once, at the end of a run.
struct alignas(64) Flag {
	std::atomic<bool> v;
	char pad[64 - sizeof(std::atomic<bool>)];
};
struct alignas(64) Counter {
	std::atomic<int> v;
	char pad[64 - sizeof(std::atomic<int>)];
};
static Flag gStart, gStop;
static Counter gReady;

// Slot is one worker's result, written once after its loop, padded to a
// cache line so that no two workers share one.
struct alignas(64) Slot {
	uint64_t pairs;
	int64_t endNs;
	cudaError_t err;
	int failed; // 0: ok, 1: alloc failed, 2: free failed
	char pad[64 - 2 * sizeof(uint64_t) - sizeof(cudaError_t) - sizeof(int)];
};
static_assert(sizeof(Slot) == 64, "Slot must be one cache line");

static void worker(Slot *slot) {
	CudaMemoryPool &pool = CudaMemoryPool::getInstance();
	gReady.v.fetch_add(1, std::memory_order_acq_rel);
	while (!gStart.v.load(std::memory_order_acquire))
		std::this_thread::yield();
	uint64_t n = 0; // this thread's count, in a local: no shared write per pair
	cudaError_t err = cudaSuccess;
	int failed = 0;
	while (!gStop.v.load(std::memory_order_relaxed)) {
		uint8_t *p = NULL;
		err = pool.alloc(kFrame, p);
		if (err != cudaSuccess) {
			failed = 1;
			break;
		}
		err = pool.free(kFrame, p);
		if (err != cudaSuccess) {
			failed = 2;
			break;
		}
		n++;
	}
	slot->endNs = nowNs();
	slot->pairs = n;
	slot->err = err;
	slot->failed = failed;
}

struct Result {
	uint64_t pairs;
	double seconds;
	double nsPerPair;
};

// runOnce runs threads workers for seconds of wall time, all started
// together, and returns the pairs summed over them and the elapsed time from
// the start signal to the last worker's end.
static Result runOnce(int threads, double seconds) {
	Slot *slots = static_cast<Slot *>(aligned_alloc(64, sizeof(Slot) * (size_t)threads));
	if (slots == NULL) {
		fprintf(stderr, "seedpool: out of memory for %d result slots\n", threads);
		exit(1);
	}
	memset(slots, 0, sizeof(Slot) * (size_t)threads);
	gReady.v.store(0);
	gStart.v.store(false);
	gStop.v.store(false);
	std::vector<std::thread> ts;
	ts.reserve((size_t)threads);
	try {
		for (int i = 0; i < threads; i++)
			ts.push_back(std::thread(worker, &slots[i]));
	} catch (const std::system_error &e) {
		fprintf(stderr, "seedpool: starting thread %d of %d: %s\n", (int)ts.size() + 1, threads, e.what());
		exit(1);
	}
	while (gReady.v.load(std::memory_order_acquire) < threads)
		std::this_thread::yield();
	int64_t t0 = nowNs();
	gStart.v.store(true, std::memory_order_release);
	std::this_thread::sleep_for(std::chrono::nanoseconds((int64_t)(seconds * 1e9)));
	gStop.v.store(true, std::memory_order_relaxed);
	for (size_t i = 0; i < ts.size(); i++)
		ts[i].join();
	Result r;
	r.pairs = 0;
	int64_t end = t0;
	for (int i = 0; i < threads; i++) {
		if (slots[i].failed) {
			fprintf(stderr, "seedpool: thread %d: CudaMemoryPool::%s = %s\n", i,
				slots[i].failed == 1 ? "alloc" : "free", cudaGetErrorString(slots[i].err));
			exit(1);
		}
		r.pairs += slots[i].pairs;
		end = std::max(end, slots[i].endNs);
	}
	::free(slots);
	r.seconds = (double)(end - t0) / 1e9;
	r.nsPerPair = r.pairs ? (double)(end - t0) / (double)r.pairs : 0;
	return r;
}

static double median(std::vector<double> v) {
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(const char *msg) {
	fprintf(stderr, "seedpool: %s\nusage: seedpool [THREADS,THREADS,...]  (env SEED_SECONDS, SEED_REPEATS)\n", msg);
	exit(2);
}

// parseThreads reads a comma-separated list of thread counts.
static std::vector<int> parseThreads(const char *s) {
	std::vector<int> out;
	const char *p = s;
	for (;;) {
		char *end = NULL;
		long v = strtol(p, &end, 10);
		if (end == p || v < 1 || v > 256)
			usage("thread counts must be integers from 1 to 256, comma-separated");
		out.push_back((int)v);
		if (*end == '\0')
			break;
		if (*end != ',')
			usage("thread counts must be comma-separated");
		p = end + 1;
	}
	return out;
}

int main(int argc, char **argv) {
	int cpus = (int)std::thread::hardware_concurrency();
	if (cpus < 1)
		cpus = 1;

	double seconds = 0.5;
	if (const char *s = getenv("SEED_SECONDS")) {
		char *end = NULL;
		seconds = strtod(s, &end);
		if (end == s || *end != '\0' || !(seconds > 0) || seconds > 60)
			usage("SEED_SECONDS must be a number of seconds in (0, 60]");
	}
	int repeats = 3;
	if (const char *s = getenv("SEED_REPEATS")) {
		char *end = NULL;
		long v = strtol(s, &end, 10);
		if (end == s || *end != '\0' || v < 1 || v > 100)
			usage("SEED_REPEATS must be an integer from 1 to 100");
		repeats = (int)v;
	}

	std::vector<int> counts;
	if (argc > 2)
		usage("at most one argument");
	if (argc == 2) {
		counts = parseThreads(argv[1]);
	} else {
		const int def[] = {1, 2, 4, 8, 16, 32, 64, cpus};
		for (size_t i = 0; i < sizeof def / sizeof def[0]; i++)
			counts.push_back(std::min(def[i], 2 * cpus));
	}
	std::sort(counts.begin(), counts.end());
	counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
	const int maxThreads = counts.back();

	printf("seedpool: frame %zu bytes, cpus %d, backend %s\n", kFrame, cpus, SEED_BACKEND);
#ifndef SEED_NO_CUDA
	{
		int dev = 0, rt = 0, drv = 0;
		CHECK(cudaGetDevice(&dev));
		cudaDeviceProp prop;
		CHECK(cudaGetDeviceProperties(&prop, dev));
		CHECK(cudaRuntimeGetVersion(&rt));
		CHECK(cudaDriverGetVersion(&drv));
		CHECK(cudaFree(0)); // create the context before anything is timed
		printf("seedpool: device %d %s, runtime %d.%d, driver %d.%d\n", dev, prop.name,
			rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10);
	}
#endif
	std::string list;
	for (size_t i = 0; i < counts.size(); i++)
		list += (i ? "," : "") + std::to_string(counts[i]);
	printf("seedpool: threads %s, %.3f s per run, %d repeats\n", list.c_str(), seconds, repeats);
	fflush(stdout);

	// Warm: every thread can hold a block at once. The pool grows by 4
	// blocks at a time, so warming maxThreads blocks allocates maxThreads
	// rounded up to 4; the idle cap is raised to keep them all.
	CudaMemoryPool &pool = CudaMemoryPool::getInstance();
	const size_t warm = ((size_t)maxThreads + 3) / 4 * 4;
	pool.setMaxIdle(std::max(pool.maxIdle(), warm));
	{
		std::vector<uint8_t *> held((size_t)maxThreads);
		for (int i = 0; i < maxThreads; i++)
			CHECK(pool.alloc(kFrame, held[i]));
		for (int i = 0; i < maxThreads; i++)
			CHECK(pool.free(kFrame, held[i]));
	}
	const uint64_t warmMallocs = pool.mallocCalls(), warmFrees = pool.freeCalls();
	printf("seedpool: warm %zu idle blocks of %zu bytes (%.1f MiB), cudaMallocHost calls %llu, cudaFreeHost calls %llu, max idle %zu (seed: 32)\n",
		pool.idle(kFrame), kFrame, (double)(pool.idle(kFrame) * kFrame) / (1 << 20),
		(unsigned long long)warmMallocs, (unsigned long long)warmFrees, pool.maxIdle());
	fflush(stdout);

	for (size_t c = 0; c < counts.size(); c++) {
		const int threads = counts[c];
		std::vector<double> ns;
		for (int r = 1; r <= repeats; r++) {
			Result res = runOnce(threads, seconds);
			if (res.pairs == 0) {
				fprintf(stderr, "seedpool: threads=%d repeat=%d: no pairs done\n", threads, r);
				return 1;
			}
			ns.push_back(res.nsPerPair);
			printf("seedpool threads=%d repeat=%d pairs=%llu seconds=%.3f ns_per_pair_wall=%.2f mpairs_per_s=%.1f\n",
				threads, r, (unsigned long long)res.pairs, res.seconds, res.nsPerPair, 1e3 / res.nsPerPair);
			fflush(stdout);
		}
		double med = median(ns);
		printf("seedpool threads=%d median ns_per_pair_wall=%.2f mpairs_per_s=%.1f\n", threads, med, 1e3 / med);
		fflush(stdout);
	}

	// No allocation or trim may have run in a timed loop.
	const uint64_t loopMallocs = pool.mallocCalls() - warmMallocs, loopFrees = pool.freeCalls() - warmFrees;
	printf("seedpool: cudaMallocHost calls in timed loops %llu, cudaFreeHost calls in timed loops %llu\n",
		(unsigned long long)loopMallocs, (unsigned long long)loopFrees);
	if (loopMallocs != 0 || loopFrees != 0) {
		fprintf(stderr, "seedpool: FAILED: the pool allocated or freed in a timed loop: the figures are not of a warm pool\n");
		return 1;
	}

	// Raw: one cudaMallocHost + cudaFreeHost of a frame per pair, 1 thread,
	// after one untimed pair; each pair is also timed on its own.
	{
		const int iters = 200;
		void *p = NULL;
		CHECK(cudaMallocHost(&p, kFrame));
		CHECK(cudaFreeHost(p));
		std::vector<double> each;
		each.reserve(iters);
		int64_t t0 = nowNs();
		for (int i = 0; i < iters; i++) {
			int64_t a = nowNs();
			CHECK(cudaMallocHost(&p, kFrame));
			CHECK(cudaFreeHost(p));
			each.push_back((double)(nowNs() - a));
		}
		double total = (double)(nowNs() - t0);
		double lo = *std::min_element(each.begin(), each.end());
		double hi = *std::max_element(each.begin(), each.end());
		printf("raw threads=1 pairs=%d seconds=%.3f ns_per_pair=%.1f median_ns=%.1f min_ns=%.1f max_ns=%.1f backend=%s\n",
			iters, total / 1e9, total / iters, median(each), lo, hi, SEED_BACKEND);
		fflush(stdout);
	}

	CHECK(pool.destroy());
	printf("seedpool: done\n");
	return 0;
}
