// seedpool.cu: the seed article's C++ CudaMemoryPool, measured the way the
// Go benchmark BenchmarkGetRelease (root package: pinpool/, seed/ and
// syncpool/ sub-benchmarks) measures the pool: alloc+free pairs of one
// 1080p NV12 frame (1920*1080*3/2 = 3,110,400 bytes) in a tight loop on T
// threads at once, reported as wall-clock nanoseconds per pair over all
// threads (Go's ns/op under RunParallel) and millions of pairs per second.
//
// The design is copied as the article wrote it, defects included, except
// its endless retry on a failed cudaMallocHost: an unordered_map from size
// to a list of idle blocks behind ONE mutex; a miss allocates 4 blocks with
// cudaMallocHost; free keeps at most 32 idle blocks per size and frees the
// rest with cudaFreeHost.
//
// Built and run by scripts/gpu-check.sh on the GPU host:
//   nvcc -O2 -x cu -o .gpu/seedpool scripts/ref/seedpool.cu -lcuda
//   .gpu/seedpool [threads,threads,...]     (SEED_SECONDS, SEED_REPEATS)
// Without CUDA (a local check of the harness; aligned_alloc stands in):
//   g++ -O2 -std=c++17 -x c++ -DSEED_NO_CUDA -pthread scripts/ref/seedpool.cu -o /tmp/seedpool
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#ifdef SEED_NO_CUDA
static const char *backendName = "aligned_alloc (SEED_NO_CUDA)";
static int hostAlloc(void **p, size_t n) {
	*p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
	return *p ? 0 : 1;
}
static int hostFree(void *p) {
	free(p);
	return 0;
}
static const char *errString(int) { return "allocation failed"; }
#else
#include <cuda_runtime.h>
static const char *backendName = "cudaMallocHost";
static int hostAlloc(void **p, size_t n) { return (int)cudaMallocHost(p, n); }
static int hostFree(void *p) { return (int)cudaFreeHost(p); }
static const char *errString(int e) { return cudaGetErrorString((cudaError_t)e); }
#endif

static void check(int e, const char *what) {
	if (e != 0) {
		fprintf(stderr, "seedpool: %s: %s\n", what, errString(e));
		exit(1);
	}
}

// The seed's pool.
class CudaMemoryPool {
  public:
	static const int kGrow = 4, kMaxIdle = 32;
	std::atomic<long> allocations{0};

	bool alloc(size_t size, uint8_t *&ptr) {
		std::lock_guard<std::mutex> lock(mu_);
		auto &idle = pool_[size];
		if (idle.empty()) {
			for (int i = 0; i < kGrow; i++) {
				void *p = nullptr;
				int e = hostAlloc(&p, size);
				if (e != 0) {
					if (i == 0) {
						fprintf(stderr, "seedpool: cudaMallocHost(%zu): %s\n", size, errString(e));
						return false;
					}
					break;
				}
				allocations++;
				idle.push_back((uint8_t *)p);
			}
		}
		ptr = idle.front();
		idle.pop_front();
		return true;
	}

	void free(size_t size, uint8_t *ptr) {
		std::lock_guard<std::mutex> lock(mu_);
		auto &idle = pool_[size];
		idle.push_back(ptr);
		while ((int)idle.size() > kMaxIdle) {
			check(hostFree(idle.back()), "cudaFreeHost");
			idle.pop_back();
		}
	}

	void destroy() {
		std::lock_guard<std::mutex> lock(mu_);
		for (auto &kv : pool_)
			for (auto *p : kv.second)
				check(hostFree(p), "cudaFreeHost");
		pool_.clear();
	}

  private:
	std::mutex mu_;
	std::unordered_map<size_t, std::list<uint8_t *>> pool_;
};

static const size_t kFrame = 1920 * 1080 * 3 / 2;

struct alignas(64) Count {
	long pairs;
};

// run measures one round: threads threads, for seconds, all started
// together; returns total pairs and wall seconds.
static void run(CudaMemoryPool &pool, int threads, double seconds, long &pairs, double &wall) {
	std::vector<Count> counts(threads);
	std::atomic<int> ready{0};
	std::atomic<bool> go{false}, stop{false};
	std::vector<std::thread> ts;
	for (int t = 0; t < threads; t++) {
		ts.emplace_back([&, t] {
			long n = 0;
			ready++;
			while (!go.load(std::memory_order_acquire)) {
			}
			while (!stop.load(std::memory_order_relaxed)) {
				for (int i = 0; i < 64; i++) {
					uint8_t *p;
					if (!pool.alloc(kFrame, p))
						exit(1);
					pool.free(kFrame, p);
				}
				n += 64;
			}
			counts[t].pairs = n;
		});
	}
	while (ready.load() < threads) {
	}
	auto t0 = std::chrono::steady_clock::now();
	go.store(true, std::memory_order_release);
	std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
	stop.store(true);
	for (auto &th : ts)
		th.join();
	wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	pairs = 0;
	for (auto &c : counts)
		pairs += c.pairs;
}

int main(int argc, char **argv) {
	int cpus = (int)std::thread::hardware_concurrency();
	std::vector<int> list;
	if (argc > 1) {
		std::string s = argv[1];
		size_t i = 0;
		while (i < s.size()) {
			size_t j = s.find(',', i);
			if (j == std::string::npos)
				j = s.size();
			list.push_back(atoi(s.substr(i, j - i).c_str()));
			i = j + 1;
		}
	} else {
		list = {1, 2, 4, 8, 16, 32, 64, cpus};
	}
	std::vector<int> threads;
	for (int t : list)
		if (t >= 1 && t <= 2 * cpus && std::find(threads.begin(), threads.end(), t) == threads.end())
			threads.push_back(t);
	std::sort(threads.begin(), threads.end());
	double seconds = getenv("SEED_SECONDS") ? atof(getenv("SEED_SECONDS")) : 0.5;
	int repeats = getenv("SEED_REPEATS") ? atoi(getenv("SEED_REPEATS")) : 3;
	printf("seedpool: frame %zu bytes, cpus %d, backend %s\n", kFrame, cpus, backendName);

	// Raw driver pair, one thread: what every frame would cost without a pool.
	{
		const int n = 200;
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < n; i++) {
			void *p;
			check(hostAlloc(&p, kFrame), "cudaMallocHost");
			check(hostFree(p), "cudaFreeHost");
		}
		double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
		printf("raw threads=1 ns_per_pair=%.0f\n", s * 1e9 / n);
	}

	CudaMemoryPool pool;
	// Warm: one block per thread of the largest run, so the loop never grows.
	{
		int most = threads.empty() ? 1 : threads.back();
		std::vector<uint8_t *> held(most);
		for (auto &p : held)
			if (!pool.alloc(kFrame, p))
				return 1;
		for (auto *p : held)
			pool.free(kFrame, p);
	}
	long warm = pool.allocations.load();
	for (int t : threads) {
		std::vector<double> ns;
		for (int r = 1; r <= repeats; r++) {
			long pairs;
			double wall;
			run(pool, t, seconds, pairs, wall);
			double per = wall * 1e9 / (double)pairs;
			ns.push_back(per);
			printf("seedpool threads=%d repeat=%d pairs=%ld seconds=%.3f ns_per_pair_wall=%.2f mpairs_per_s=%.1f\n",
			       t, r, pairs, wall, per, pairs / wall / 1e6);
		}
		std::sort(ns.begin(), ns.end());
		double med = ns[(ns.size() - 1) / 2];
		printf("seedpool threads=%d median ns_per_pair_wall=%.2f mpairs_per_s=%.1f\n", t, med, 1e3 / med);
		fflush(stdout);
	}
	printf("seedpool: allocations %ld during warm-up, %ld in the timed loops\n", warm,
	       pool.allocations.load() - warm);
	pool.destroy();
	printf("seedpool: done\n");
	return 0;
}
