// staged: the best staged host-to-device copy of pageable memory that a
// C++ program can make on this machine, as the bound for pinpool's chunked
// mode (transfer/staged.go) and issue 17's goal of 45 GB/s from 64 MiB.
//
// T threads, each pinned to a core of its own, claim the chunks of a
// pageable source in order, copy each into one of their own pinned staging
// slots (the window shared out among the threads) and queue its DMA on one
// stream under a mutex, with an event after it; a thread reuses a slot once
// that event has completed. It sweeps the threads, the chunk, the window,
// the store (cached memcpy, streaming stores, streaming stores for the
// first round only, rep movsb), pairs of chunks issued as one
// cudaMemcpyBatchAsync from the second round while the stream has two
// issues queued (as the Go engine does), and the demotion (CLDEMOTE) of a
// thread's chunks still in flight once it has no chunk left. Every
// configuration's result is checked byte for byte.
//
// The grid runs at 64 MiB; then the rematch runs its five best and the
// configuration that matches the Go engine's defaults, at 64 and 256 MiB,
// in rounds beside the pinned copy ("focus" runs the rematch only, with
// fixed finalists). Warm transfers of one source buffer, back to back; each
// configuration reports the mean (bytes over time), median, min and max
// GB/s, and the mean time before the first issue, from the first to the
// last, and from the last to the stream's completion.
//
// Built and run on the GPU host by scripts/gpu-run.sh (REF=staged):
//
//	nvcc -O3 -std=c++17 -Xcompiler -O3,-mavx2,-pthread -o staged staged.cpp
//	./staged [reps [grid|focus [rounds]]]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static cudaError_t batch(void** d, void** s, size_t* sz, size_t n, cudaStream_t st) {
  cudaMemcpyAttributes a; memset(&a, 0, sizeof a); a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx = 0;
#if CUDART_VERSION >= 13000
  return cudaMemcpyBatchAsync((const void**)d, (const void**)s, sz, n, &a, &idx, 1, st);
#else
  size_t fail; return cudaMemcpyBatchAsync(d, s, sz, n, &a, &idx, 1, &fail, st);
#endif
}

enum Store { CACHED, STREAM, STREAM_FIRST, MOVSB, NSTORES };
static const char* storeName[] = {"cached", "stream", "stream-first-round", "rep-movsb"};

// copyCached copies in 256 KiB steps, below glibc's threshold for
// non-temporal stores, so the destination stays in the caches.
static void copyCached(char* d, const char* s, size_t n) {
  const size_t step = 256 << 10;
  while (n > step) { memcpy(d, s, step); d += step; s += step; n -= step; }
  memcpy(d, s, n);
}

// copyStream copies n bytes (a multiple of 128; d 32-byte aligned) with
// non-temporal stores.
static void copyStream(char* d, const char* s, size_t n) {
  for (size_t i = 0; i < n; i += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i*)(s + i));
    __m256i b = _mm256_loadu_si256((const __m256i*)(s + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i*)(s + i + 64));
    __m256i e = _mm256_loadu_si256((const __m256i*)(s + i + 96));
    _mm256_stream_si256((__m256i*)(d + i), a);
    _mm256_stream_si256((__m256i*)(d + i + 32), b);
    _mm256_stream_si256((__m256i*)(d + i + 64), c);
    _mm256_stream_si256((__m256i*)(d + i + 96), e);
  }
  _mm_sfence();
}

static void copyMovsb(char* d, const char* s, size_t n) {
  asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

// demote runs CLDEMOTE (0F 1C /0; a no-op where the CPU lacks it) over n bytes at p.
static void demote(const char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) asm volatile(".byte 0x0f, 0x1c, 0x00" : : "a"(p + i) : "memory");
}

struct Config {
  size_t chunk, window; int threads; Store store; int batch; bool demote;
  std::string name() const {
    char b[160];
    snprintf(b, sizeof b, "threads=%d chunk=%zuKiB window=%zuMiB store=%s batch=%d demote=%d", threads, chunk >> 10, window >> 20, storeName[store], batch, (int)demote);
    return b;
  }
};

struct Slot { char* buf; cudaEvent_t ev; bool used, pending; };
struct Pend { char* d; char* s; size_t n; Slot* slot; };

struct Engine {
  cudaStream_t st;
  std::mutex mu;                    // guards pend, issues, marks, Slot::pending
  std::vector<Pend> pend;
  std::vector<cudaEvent_t> marks;   // an event recorded after each issue, a ring
  size_t issues = 0;
  double tFirst = 0, tLast = 0;     // when the first and the last issue were made
  std::vector<std::pair<double, size_t>> issueAt; // each issue's time and chunks, this transfer
  Config c; const char* src; char* dst; size_t size, nchunks;
  std::atomic<size_t> next{0};
  std::atomic<int> gen{0}, done{0};
  std::atomic<bool> quit{false};
  std::vector<std::vector<Slot>> slots; // per thread
};

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static void issueLocked(Engine& e) {
  size_t n = e.pend.size();
  if (n == 0) return;
  e.tLast = now();
  if (e.issues == 0) e.tFirst = e.tLast;
  e.issueAt.push_back({e.tLast, n});
  if (n == 1) {
    CK(cudaMemcpyAsync(e.pend[0].d, e.pend[0].s, e.pend[0].n, cudaMemcpyHostToDevice, e.st));
  } else {
    std::vector<void*> d(n), s(n); std::vector<size_t> sz(n);
    for (size_t i = 0; i < n; i++) { d[i] = e.pend[i].d; s[i] = e.pend[i].s; sz[i] = e.pend[i].n; }
    CK(batch(d.data(), s.data(), sz.data(), n, e.st));
  }
  for (auto& p : e.pend) { CK(cudaEventRecord(p.slot->ev, e.st)); p.slot->pending = false; }
  CK(cudaEventRecord(e.marks[e.issues % e.marks.size()], e.st));
  e.issues++;
  e.pend.clear();
}

// busyLocked reports whether the stream has two issues or more queued.
static bool busyLocked(Engine& e) {
  if (e.issues < 2) return false;
  cudaError_t r = cudaEventQuery(e.marks[(e.issues - 2) % e.marks.size()]);
  if (r != cudaSuccess && r != cudaErrorNotReady) CK(r);
  return r == cudaErrorNotReady;
}

static void waitEvent(cudaEvent_t ev) {
  for (;;) {
    cudaError_t r = cudaEventQuery(ev);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) CK(r);
    for (int i = 0; i < 32; i++) _mm_pause();
  }
}

static void pin(int core) {
  cpu_set_t set; CPU_ZERO(&set); CPU_SET(core % std::max(1u, std::thread::hardware_concurrency()), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void worker(Engine* ep, int id) {
  Engine& e = *ep;
  pin(id + 1);
  int seen = 0;
  for (;;) {
    int g;
    while ((g = e.gen.load(std::memory_order_acquire)) == seen) {
      if (e.quit.load(std::memory_order_acquire)) return;
      _mm_pause();
    }
    seen = g;
    const Config& c = e.c;
    std::vector<Slot>& my = e.slots[id];
    size_t j = 0;
    for (;;) {
      size_t k = e.next.fetch_add(1);
      if (k >= e.nchunks) break;
      Slot& s = my[j++ % my.size()];
      {
        std::lock_guard<std::mutex> l(e.mu);
        if (s.pending) issueLocked(e);
      }
      if (s.used) waitEvent(s.ev);
      size_t off = k * c.chunk, n = std::min(c.chunk, e.size - off);
      Store m = c.store == STREAM_FIRST ? (k < (size_t)c.threads ? STREAM : CACHED) : c.store;
      switch (m) {
      case STREAM: copyStream(s.buf, e.src + off, n); break;
      case MOVSB: copyMovsb(s.buf, e.src + off, n); break;
      default: copyCached(s.buf, e.src + off, n); break;
      }
      s.used = true;
      std::lock_guard<std::mutex> l(e.mu);
      s.pending = true;
      e.pend.push_back({e.dst + off, s.buf, n, &s});
      bool secondRound = k >= (size_t)c.threads;
      if (c.batch < 2 || !secondRound || e.pend.size() >= (size_t)c.batch || !busyLocked(e)) issueLocked(e);
    }
    {
      std::lock_guard<std::mutex> l(e.mu);
      issueLocked(e);
    }
    if (c.demote)
      for (auto& s : my)
        if (s.used && cudaEventQuery(s.ev) == cudaErrorNotReady) demote(s.buf, c.chunk);
    e.done.fetch_add(1, std::memory_order_release);
  }
}

struct Bench {
  char* staging; size_t stagingSize;
  const char* src; char* dst; char* check; size_t size;
  cudaStream_t st; std::vector<cudaEvent_t> marks;
};

// Run is what runConfig measured: each transfer's GB/s, sorted, their mean
// (bytes over time), and the mean time before the first issue, from the
// first to the last, and from the last to the stream's completion.
struct Run { std::vector<double> gbps; double mean = 0, first = 0, span = 0, drain = 0; bool ok = false; std::string timeline; };

// runConfig makes reps warm transfers of one configuration, back to back;
// gbps is empty when the window is too small for the threads. ok reports
// whether the device holds the source afterwards.
static Run runConfig(Bench& b, const Config& c, int reps) {
  Run run;
  std::vector<double>& r = run.gbps;
  size_t perThread = c.window / c.chunk / c.threads;
  if (perThread == 0 || c.window > b.stagingSize) return run;
  Engine e;
  e.st = b.st; e.marks = b.marks; e.c = c; e.src = b.src; e.dst = b.dst; e.size = b.size;
  e.nchunks = (b.size + c.chunk - 1) / c.chunk;
  e.slots.resize(c.threads);
  size_t idx = 0;
  for (int t = 0; t < c.threads; t++)
    for (size_t j = 0; j < perThread; j++) {
      Slot s{b.staging + idx++ * c.chunk, nullptr, false, false};
      CK(cudaEventCreateWithFlags(&s.ev, cudaEventDisableTiming));
      e.slots[t].push_back(s);
    }
  CK(cudaMemsetAsync(b.dst, 0, b.size, b.st)); CK(cudaStreamSynchronize(b.st));
  std::vector<std::thread> ts;
  for (int t = 0; t < c.threads; t++) ts.emplace_back(worker, &e, t);
  double total = 0;
  for (int i = 0; i < reps + 1; i++) {
    e.next.store(0); e.done.store(0); e.issues = 0; e.issueAt.clear();
    double t0 = now();
    e.gen.fetch_add(1, std::memory_order_release);
    while (e.done.load(std::memory_order_acquire) < c.threads) _mm_pause();
    CK(cudaStreamSynchronize(b.st));
    double t1 = now();
    if (i > 0) {
      r.push_back(b.size / (t1 - t0) / 1e9);
      total += t1 - t0;
      run.first += (e.tFirst - t0) * 1e6 / reps;
      run.span += (e.tLast - e.tFirst) * 1e6 / reps;
      run.drain += (t1 - e.tLast) * 1e6 / reps;
    }
    if (i == reps) {
      char b[64];
      run.timeline = "issued:";
      for (auto& x : e.issueAt) { snprintf(b, sizeof b, " %.0f(x%zu)", (x.first - t0) * 1e6, x.second); run.timeline += b; }
      snprintf(b, sizeof b, "; total %.0f us", (t1 - t0) * 1e6); run.timeline += b;
    }
  }
  run.mean = b.size * (double)reps / total / 1e9;
  e.quit.store(true, std::memory_order_release);
  for (auto& t : ts) t.join();
  for (auto& v : e.slots) for (auto& s : v) CK(cudaEventDestroy(s.ev));
  CK(cudaMemcpy(b.check, b.dst, b.size, cudaMemcpyDeviceToHost));
  run.ok = memcmp(b.check, b.src, b.size) == 0;
  std::sort(r.begin(), r.end());
  return run;
}

static void printRun(const char* prefix, const Config& c, const char* tag, const Run& r) {
  printf("%s %s%s mean=%.1f median=%.1f min=%.1f max=%.1f GB/s first=%.0f span=%.0f drain=%.0f us %s\n", prefix, c.name().c_str(), tag,
         r.mean, r.gbps[r.gbps.size() / 2], r.gbps.front(), r.gbps.back(), r.first, r.span, r.drain, r.ok ? "ok" : "MISMATCH");
  if (strstr(tag, "go-like")) printf("  timeline of the last: %s\n", r.timeline.c_str());
  fflush(stdout);
}

static double median(const std::vector<double>& v) { return v.empty() ? 0 : v[v.size() / 2]; }

// pinnedCopy times reps copies of size bytes from pinned memory (one
// cudaMemcpyAsync, wall time to completion); pageableCopy the driver's copy
// of the pageable source (cudaMemcpy).
static double pinnedCopy(Bench& b, char* pinned, int reps) {
  std::vector<double> r;
  for (int i = 0; i < reps + 1; i++) {
    double t0 = now();
    CK(cudaMemcpyAsync(b.dst, pinned, b.size, cudaMemcpyHostToDevice, b.st)); CK(cudaStreamSynchronize(b.st));
    if (i > 0) r.push_back(b.size / (now() - t0) / 1e9);
  }
  std::sort(r.begin(), r.end()); return median(r);
}
static double pageableCopy(Bench& b, int reps) {
  std::vector<double> r;
  for (int i = 0; i < reps + 1; i++) {
    double t0 = now();
    CK(cudaMemcpy(b.dst, b.src, b.size, cudaMemcpyHostToDevice));
    if (i > 0) r.push_back(b.size / (now() - t0) / 1e9);
  }
  std::sort(r.begin(), r.end()); return median(r);
}

static Bench makeBench(size_t size, char* staging, size_t stagingSize, cudaStream_t st, std::vector<cudaEvent_t>& marks) {
  Bench b; b.staging = staging; b.stagingSize = stagingSize; b.size = size; b.st = st; b.marks = marks;
  char* src = (char*)aligned_alloc(4096, size);
  for (size_t i = 0; i < size; i++) src[i] = (char)(i * 131 + (i >> 20));
  b.src = src;
  b.check = (char*)aligned_alloc(4096, size); memset(b.check, 0, size);
  CK(cudaMalloc(&b.dst, size));
  return b;
}

// main runs the grid at 64 MiB and then the rematch of its five best
// (argument "grid", the default), or only the rematch of fixed finalists
// (argument "focus"): the Go engine's defaults and the configurations that
// led earlier grids. The first argument is the repetitions a configuration.
int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  bool grid = argc <= 2 || strcmp(argv[2], "focus") != 0;
  int rounds = argc > 3 ? atoi(argv[3]) : 3;
  const size_t MiB = 1 << 20, stagingSize = 64 * MiB;
  char* staging; CK(cudaHostAlloc(&staging, stagingSize, 0)); memset(staging, 0, stagingSize);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> marks(64);
  for (auto& m : marks) CK(cudaEventCreateWithFlags(&m, cudaEventDisableTiming));
  pin(0);
  printf("staged bound: %u CPUs, CUDA runtime %d, %d repetitions a configuration, %s\n", std::thread::hardware_concurrency(), CUDART_VERSION, reps, grid ? "grid" : "focus");

  Bench b64 = makeBench(64 * MiB, staging, stagingSize, st, marks);
  char* pinned; CK(cudaHostAlloc(&pinned, 256 * MiB, 0)); memset(pinned, 1, 256 * MiB);
  printf("size=64MiB pinned=%.1f pageable=%.1f GB/s\n", pinnedCopy(b64, pinned, reps), pageableCopy(b64, reps));

  const Config goLike{2 * MiB, 32 * MiB, 8, CACHED, 2, true};
  std::vector<Config> finalists;
  int bad = 0;
  if (grid) {
    struct Result { Config c; double med; };
    std::vector<Result> all;
    for (int threads : {4, 6, 8, 10, 12, 15})
      for (size_t chunk : {512 * 1024ul, 1 * MiB, 2 * MiB, 4 * MiB})
        for (size_t window : {16 * MiB, 32 * MiB, 64 * MiB})
          for (int store = 0; store < NSTORES; store++)
            for (int bt : {1, 2})
              for (int dm : {0, 1}) {
                if (dm && store == STREAM) continue;
                Config c{chunk, window, threads, (Store)store, bt, dm == 1};
                Run r = runConfig(b64, c, reps);
                if (r.gbps.empty()) continue;
                if (!r.ok) bad++;
                printRun("size=64MiB", c, "", r);
                all.push_back({c, r.gbps[r.gbps.size() / 2]});
              }
    std::sort(all.begin(), all.end(), [](const Result& a, const Result& b) { return a.med > b.med; });
    printf("\nbest of the grid at 64 MiB (median GB/s):\n");
    for (size_t i = 0; i < std::min<size_t>(10, all.size()); i++) printf("  %.1f  %s\n", all[i].med, all[i].c.name().c_str());
    for (size_t i = 0; i < std::min<size_t>(5, all.size()); i++) finalists.push_back(all[i].c);
  } else {
    finalists = {
        {2 * MiB, 32 * MiB, 8, CACHED, 1, true},
        {2 * MiB, 32 * MiB, 8, CACHED, 2, false},
        {1 * MiB, 32 * MiB, 8, STREAM_FIRST, 2, true},
        {1 * MiB, 32 * MiB, 6, CACHED, 2, true},
        {2 * MiB, 32 * MiB, 8, MOVSB, 2, true},
    };
  }
  finalists.push_back(goLike);

  // The rematch: the finalists, ending with the Go engine's defaults, in
  // alternating rounds beside the pinned copy, at 64 and 256 MiB.
  Bench b256 = makeBench(256 * MiB, staging, stagingSize, st, marks);
  printf("\nrematch, %d rounds:\n", rounds);
  for (int round = 1; round <= rounds; round++)
    for (Bench* bp : {&b64, &b256}) {
      printf("round=%d size=%zuMiB pinned=%.1f GB/s\n", round, bp->size / MiB, pinnedCopy(*bp, pinned, reps));
      char prefix[64]; snprintf(prefix, sizeof prefix, "round=%d size=%zuMiB", round, bp->size / MiB);
      for (size_t i = 0; i < finalists.size(); i++) {
        Run r = runConfig(*bp, finalists[i], reps);
        if (!r.ok) bad++;
        printRun(prefix, finalists[i], i + 1 == finalists.size() ? " (go-like)" : "", r);
      }
    }
  printf("size=256MiB pageable=%.1f GB/s\n", pageableCopy(b256, reps));
  if (bad) { printf("%d configurations did not copy the source exactly\n", bad); return 1; }
  return 0;
}
