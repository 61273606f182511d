// arena: the fastest way a C++ program can reserve a large pinned arena on
// this host, and what that costs a neighbour, as the bound for pinpool's
// growth (cudahost's Register pipeline, Reserve, Close) and issue 35's goals
// (>= 20 GB/s while another stream's 64 KiB copy keeps p99 <= 1 ms and max
// <= 5 ms; a 32 GiB arena freed in <= 0.5 s).
//
// A neighbour thread (its own thread with the primary context current, its
// own non-blocking stream, a 64 KiB cuMemHostAlloc source and a device
// buffer made before anything else) copies 64 KiB host to device every
// 200 us and times each copy, cuMemcpyHtoDAsync to the end of
// cuStreamSynchronize, the way `pinpool arena`'s neighbour goroutine does.
// Each configuration then reserves N bytes of pinned memory and frees it:
//
//	phased     mmap (2 MiB aligned, MADV_HUGEPAGE when huge=1), prefault all
//	           of it with P threads (MADV_POPULATE_WRITE, or a write per 4 KiB
//	           page with pf=touch or where the kernel lacks it), then
//	           cuMemHostRegister it in pieces of S bytes from R threads
//	batched    the same in batches of B bytes (whole pieces): prefault one,
//	           then register it, then the next; prefault and registration
//	           never run at once (cudahost's default design with
//	           B=64M:U=4M:S=16M:R=2:P=16:gate=100)
//	pipelined  the same, but a piece is registered as soon as its pages are
//	           faulted in, so prefault of the next pieces overlaps the
//	           registration of this one (prefault in units of U, default
//	           32 MiB or less that divide S)
//	touch      mmap and prefault only, no registration: the prefault's rate,
//	           and, as the first row, a warmup of the machine's memory
//	hostalloc  cuMemHostAlloc in pieces of S bytes from R threads (S=all:
//	           one call of the whole)
//
// With gate=US the locked calls (register, unregister, cuMemHostAlloc,
// cuMemFreeHost) run one at a time, each at least US microseconds after the
// previous one ended, so that a thread waiting for the driver's lock gets it
// in between (as cudahost's lockGate does); gate=off lets the R (F) threads
// call at once. The free unregisters (cuMemFreeHost for hostalloc) and
// munmaps piece by piece from F threads. Every configuration checks that the
// first and the last piece are pinned (cuMemHostGetFlags) and reports: the
// reserve's GB/s (mmap to the last registration), for phased the prefault and
// registration times, the share of the arena on transparent huge pages
// (AnonHugePages of /proc/self/smaps_rollup), the neighbour's p50/p99/max
// during the reserve, the free's time and the neighbour during the free. The
// summary names the fastest configuration, and the fastest whose neighbour
// stayed within p99 <= 1 ms and max <= 5 ms during the reserve (the bound).
//
// It needs no CUDA headers: the few driver entry points are declared here and
// looked up in libcuda.so.1 at run time. Built and run on the GPU host by
// scripts/gpu-run.sh (REF=arena):
//
//	g++ -O2 -std=c++17 -pthread -o arena arena.cpp -ldl
//	./arena GIB [quick|full|SPEC]...
//
// GIB is the arena's size; quick, full and frontier are grids of
// configurations (quick is register, the grid of the mmap and register
// ways, then hostallocs, the three cuMemHostAlloc rows at 8 GiB; frontier,
// about 25 s at 32 GiB, the few at the bound beside pinpool's design); a SPEC
// is one configuration, WAY[:KEY=VALUE]... with keys S (piece: 2M, 1G, ...),
// R, P, F (threads), huge (0|1), gate (microseconds or off), pf
// (populate|touch), U (prefault unit; phased, batched and touch: 32M), B
// (batched's batch), nice (the prefault threads' nice value, 1 to 19: other
// processes' threads then win the cores) and N (this row's size instead of
// GIB: 96G), for example
// pipelined:S=32M:R=2:gate=200. Defaults: S=32M R=2 P=8 F=8 huge=1 gate=200
// pf=populate. The grids sweep S, R, P, huge and the gate around these, and
// end with the hostalloc rows (quick's at 8 GiB: they run at ~2 GB/s and
// stall the neighbour for seconds whatever the size). A first round of the first configuration, reported as warmup,
// runs before the rest (the first large allocation on a fresh machine runs
// slower).
//
// With ARENA_JSON=FILE every row is also appended to FILE as one JSON line
// with its CLOCK_MONOTONIC stamps (start_mono_ns, made_mono_ns,
// freed_mono_ns, and for phased prefaulted_mono_ns, the end of its
// prefault), the free's time (close_ns) and the neighbour thread's copies
// during the reserve (neighbour: p50_ns, p99_ns, max_ns), so that
// scripts/ref/torch_pin.py split sets a second process's waits beside each
// row, and for phased beside its prefault and its registration apart.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// The driver API, as cuda.h declares it.
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef unsigned long long CUdeviceptr;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream*, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*MemHostAlloc)(void**, size_t, unsigned);
  CUresult (*MemFreeHost)(void*);
  CUresult (*MemHostRegister)(void*, size_t, unsigned);
  CUresult (*MemHostUnregister)(void*);
  CUresult (*MemHostGetFlags)(unsigned*, void*);
  CUresult (*GetErrorName)(CUresult, const char**);
} cu;

static CUcontext g_ctx;

static std::string errName(CUresult r) {
  const char* s = nullptr;
  if (cu.GetErrorName && cu.GetErrorName(r, &s) == 0 && s) return s;
  return "CUresult " + std::to_string(r);
}

#define CK(x) do { CUresult r_ = (x); if (r_ != 0) { fprintf(stderr, "arena: %s: %s\n", #x, errName(r_).c_str()); exit(1); } } while (0)

static void loadDriver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "arena: no CUDA driver here (dlopen libcuda.so.1: %s): this reference measures pinned memory and needs a GPU host\n", dlerror());
    exit(2);
  }
  auto sym = [&](const char* name) {
    void* p = dlsym(h, name);
    if (!p) { fprintf(stderr, "arena: libcuda.so.1 lacks %s\n", name); exit(2); }
    return p;
  };
#define SYM(field, name) cu.field = reinterpret_cast<decltype(cu.field)>(sym(name))
  SYM(GetErrorName, "cuGetErrorName");
  SYM(Init, "cuInit");
  SYM(DeviceGet, "cuDeviceGet");
  SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  SYM(CtxSetCurrent, "cuCtxSetCurrent");
  SYM(StreamCreate, "cuStreamCreate");
  SYM(StreamSynchronize, "cuStreamSynchronize");
  SYM(MemAlloc, "cuMemAlloc_v2");
  SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  SYM(MemHostAlloc, "cuMemHostAlloc");
  SYM(MemFreeHost, "cuMemFreeHost");
  SYM(MemHostRegister, "cuMemHostRegister_v2");
  SYM(MemHostUnregister, "cuMemHostUnregister");
  SYM(MemHostGetFlags, "cuMemHostGetFlags");
#undef SYM
  CUresult r = cu.Init(0);
  if (r != 0) {
    fprintf(stderr, "arena: cuInit: %s: this reference needs a GPU\n", errName(r).c_str());
    exit(2);
  }
  CUdevice dev;
  CK(cu.DeviceGet(&dev, 0));
  CK(cu.PrimaryCtxRetain(&g_ctx, dev));
  CK(cu.CtxSetCurrent(g_ctx));
}

static int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleepUntil(int64_t t) {
  timespec ts{time_t(t / 1000000000LL), long(t % 1000000000LL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {}
}

// The neighbour: one copy every 200 us, its start and latency recorded.
struct Sample { int64_t start, lat; };
static std::mutex g_nbMu;
static std::vector<Sample> g_nb;
static std::atomic<bool> g_nbStop{false};

static void neighbour(std::atomic<bool>* ready) {
  CK(cu.CtxSetCurrent(g_ctx));
  const size_t n = 64 << 10;
  const int64_t gap = 200000;
  void* src;
  CK(cu.MemHostAlloc(&src, n, 0));
  memset(src, 1, n);
  CUdeviceptr dst;
  CK(cu.MemAlloc(&dst, n));
  CUstream s;
  CK(cu.StreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */));
  ready->store(true);
  int64_t next = nowNs();
  while (!g_nbStop.load()) {
    next += gap;
    int64_t t = nowNs();
    if (next < t) next = t;  // late (a stalled copy): no burst to catch up
    sleepUntil(next);
    int64_t t0 = nowNs();
    CK(cu.MemcpyHtoDAsync(dst, src, n, s));
    CK(cu.StreamSynchronize(s));
    int64_t t1 = nowNs();
    std::lock_guard<std::mutex> l(g_nbMu);
    g_nb.push_back({t0, t1 - t0});
  }
}

struct Lat { size_t n = 0; double p50 = 0, p99 = 0, max = 0; };  // ms

// latency summarises the neighbour's copies that started in [from, to).
static Lat latency(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  {
    std::lock_guard<std::mutex> l(g_nbMu);
    for (const Sample& s : g_nb)
      if (s.start >= from && s.start < to) v.push_back(s.lat);
  }
  Lat r;
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  r.n = v.size();
  r.p50 = v[v.size() / 2] / 1e6;
  r.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)] / 1e6;
  r.max = v.back() / 1e6;
  return r;
}

// Gate: the locked calls one at a time, pause_us apart (< 0: no gate).
struct Gate {
  explicit Gate(long us) : pauseUs(us) {}
  long pauseUs;
  std::mutex mu;
  int64_t next = 0;
  template <class F> CUresult run(F f) {
    if (pauseUs < 0) return f();
    std::lock_guard<std::mutex> l(mu);
    if (next > nowNs()) sleepUntil(next);
    CUresult r = f();
    next = nowNs() + pauseUs * 1000;
    return r;
  }
};

struct Cfg {
  std::string way = "pipelined";
  size_t n = 0;            // bytes (0: the size on the command line)
  size_t piece = 32 << 20; // 0: the whole arena
  int reg = 2, pre = 8, fre = 8;
  bool huge = true, touch = false;
  long gateUs = 200;       // < 0: off
  size_t unit = 0;         // prefault unit (0: the way's default)
  size_t batch = 0;        // batched: bytes prefaulted, then registered, in turn
  int nice = 0;            // the prefault threads' nice value (0: as the process)
};

static std::string sizeStr(size_t b) {
  char s[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) snprintf(s, sizeof s, "%zuG", b >> 30);
  else if (b % (1 << 20) == 0) snprintf(s, sizeof s, "%zuM", b >> 20);
  else snprintf(s, sizeof s, "%zuK", b >> 10);
  return s;
}

static std::string label(const Cfg& c) {
  std::string s = c.way + ":S=" + (c.piece ? sizeStr(c.piece) : std::string("all")) + ":R=" + std::to_string(c.reg);
  if (c.way != "hostalloc") s += ":P=" + std::to_string(c.pre) + ":huge=" + (c.huge ? "1" : "0");
  s += ":F=" + std::to_string(c.fre) + ":gate=" + (c.gateUs < 0 ? std::string("off") : std::to_string(c.gateUs));
  if (c.touch) s += ":pf=touch";
  if (c.unit) s += ":U=" + sizeStr(c.unit);
  if (c.batch) s += ":B=" + sizeStr(c.batch);
  if (c.nice) s += ":nice=" + std::to_string(c.nice);
  return s;
}

static bool parseSize(const std::string& v, size_t* out) {
  char* end;
  unsigned long long x = strtoull(v.c_str(), &end, 10);
  std::string u(end);
  size_t m = 1;
  if (u == "K" || u == "KiB") m = 1 << 10;
  else if (u == "M" || u == "MiB") m = 1 << 20;
  else if (u == "G" || u == "GiB") m = 1ull << 30;
  else if (!u.empty()) return false;
  *out = x * m;
  return x > 0 && *out % (2 << 20) == 0;
}

static bool parseCfg(const std::string& spec, Cfg* c) {
  size_t i = spec.find(':');
  c->way = spec.substr(0, i);
  if (c->way != "phased" && c->way != "pipelined" && c->way != "batched" && c->way != "hostalloc" && c->way != "touch") return false;
  while (i != std::string::npos) {
    size_t j = spec.find(':', i + 1);
    std::string kv = spec.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
    i = j;
    size_t e = kv.find('=');
    if (e == std::string::npos) return false;
    std::string k = kv.substr(0, e), v = kv.substr(e + 1);
    if (k == "S") { if (v == "all") c->piece = 0; else if (!parseSize(v, &c->piece)) return false; }
    else if (k == "N") { if (!parseSize(v, &c->n)) return false; }
    else if (k == "U") { if (!parseSize(v, &c->unit)) return false; }
    else if (k == "B") { if (!parseSize(v, &c->batch)) return false; }
    else if (k == "R") c->reg = atoi(v.c_str());
    else if (k == "P") c->pre = atoi(v.c_str());
    else if (k == "F") c->fre = atoi(v.c_str());
    else if (k == "huge") c->huge = v == "1";
    else if (k == "pf") { if (v != "touch" && v != "populate") return false; c->touch = v == "touch"; }
    else if (k == "gate") c->gateUs = v == "off" ? -1 : atol(v.c_str());
    else if (k == "nice") {  // 0 to 19, whole: a thread may lower its own priority only
      char* end;
      long x = strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 0 || x > 19) return false;
      c->nice = int(x);
    }
    else return false;
  }
  if (c->way == "batched" && (!c->batch || !c->piece || c->batch % c->piece)) return false;  // whole pieces per batch
  return c->reg > 0 && c->pre > 0 && c->fre > 0;
}

static bool g_populate = true;  // MADV_POPULATE_WRITE works here

static int g_nice = 0;  // the configuration's nice value for prefault threads

static void fault(char* p, size_t n, bool touch) {
  // Each prefault thread (made for one configuration, or for one call of
  // runThreads) lowers its own priority once, so that other processes'
  // threads win the cores.
  static thread_local bool niced = false;
  if (g_nice && !niced) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), g_nice);
    niced = true;
  }
  if (!touch && g_populate && madvise(p, n, MADV_POPULATE_WRITE) == 0) return;
  for (size_t o = 0; o < n; o += 4096) reinterpret_cast<volatile char*>(p)[o] = 0;
}

// Crew is k standing threads, each with the context current, that run
// f(i) for i in [0, n) together, one job at a time (run returns when the
// job is done): batched's prefault and registration threads, made once per
// configuration, as pinpool's standing goroutines are, instead of a fresh
// set of threads for every batch.
class Crew {
 public:
  explicit Crew(int k) {
    for (int t = 0; t < k; t++) ts_.emplace_back([this] { loop(); });
  }
  ~Crew() {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& t : ts_) t.join();
  }
  void run(size_t n, const std::function<void(size_t)>& f) {
    std::unique_lock<std::mutex> l(mu_);
    job_ = &f, n_ = n, next_ = 0, busy_ = int(ts_.size()), gen_++;
    cv_.notify_all();
    done_.wait(l, [&] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop() {
    CK(cu.CtxSetCurrent(g_ctx));
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(size_t)>* f;
      size_t n;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return quit_ || gen_ != seen; });
        if (quit_) return;
        seen = gen_, f = job_, n = n_;
      }
      for (size_t i; (i = next_.fetch_add(1)) < n;) (*f)(i);
      std::lock_guard<std::mutex> l(mu_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
  std::vector<std::thread> ts_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  int busy_ = 0;
  uint64_t gen_ = 0;
  bool quit_ = false;
};

// runThreads runs f(i) for i in [0, n) on k fresh threads (a crew of its
// own), each with the context current.
static void runThreads(int k, size_t n, const std::function<void(size_t)>& f) { Crew(k).run(n, f); }

static long anonHugeKiB() {
  FILE* f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

struct Result {
  double gbps = 0, pfS = -1, regS = -1, freeS = 0, hugePct = -1;
  int64_t start = 0, prefaulted = 0, made = 0, freed = 0;  // CLOCK_MONOTONIC ns (prefaulted: phased only)
  Lat nbReserve, nbFree;
  std::string err;
};

static Result measure(const Cfg& c, size_t total) {
  Result res;
  g_nice = c.nice;
  const size_t n = c.n ? c.n : total;
  const size_t piece = c.piece ? c.piece : n;
  const size_t pieces = (n + piece - 1) / piece;
  auto pieceLen = [&](size_t i) { return std::min(piece, n - i * piece); };
  std::vector<char*> ptr(pieces, nullptr);
  std::vector<char> ok(pieces, 0);
  std::mutex errMu;
  auto fail = [&](const char* what, CUresult r) {
    std::lock_guard<std::mutex> l(errMu);
    if (res.err.empty()) res.err = std::string(what) + ": " + errName(r);
  };
  Gate gate(c.gateUs);
  // phased and batched run on standing threads (Crew), as pinpool's
  // goroutines stand: made before the clock starts, they cost the rate
  // nothing, however many batches there are.
  std::unique_ptr<Crew> pre, regs;
  if (c.way == "phased" || c.way == "batched") pre.reset(new Crew(c.pre)), regs.reset(new Crew(c.reg));
  long huge0 = anonHugeKiB();
  char* base = nullptr;
  int64_t t0 = nowNs(), tPf = 0;
  if (c.way == "hostalloc") {
    runThreads(c.reg, pieces, [&](size_t i) {
      void* p = nullptr;
      CUresult r = gate.run([&] { return cu.MemHostAlloc(&p, pieceLen(i), 0); });
      if (r != 0) return fail("cuMemHostAlloc", r);
      ptr[i] = static_cast<char*>(p), ok[i] = 1;
    });
  } else {
    const size_t align = 2 << 20;
    char* m = static_cast<char*>(mmap(nullptr, n + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (m == MAP_FAILED) { res.err = std::string("mmap: ") + strerror(errno); return res; }
    base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(m) + align - 1) & ~(align - 1));
    if (base > m) munmap(m, base - m);
    munmap(base + n, m + n + align - (base + n));
    if (c.huge) madvise(base, n, MADV_HUGEPAGE);
    for (size_t i = 0; i < pieces; i++) ptr[i] = base + i * piece;
    auto reg = [&](size_t i) {
      CUresult r = gate.run([&] { return cu.MemHostRegister(ptr[i], pieceLen(i), 0); });
      if (r != 0) return fail("cuMemHostRegister", r);
      ok[i] = 1;
    };
    if (c.way == "touch") {
      const size_t unit = c.unit ? c.unit : 32 << 20;
      runThreads(c.pre, (n + unit - 1) / unit, [&](size_t u) { fault(base + u * unit, std::min(unit, n - u * unit), c.touch); });
    } else if (c.way == "phased" || c.way == "batched") {
      // Prefault a batch (phased: all of it) with P threads, then register
      // its pieces with R threads, then the next batch: never both at once.
      const size_t unit = c.unit ? c.unit : 32 << 20, batch = c.way == "phased" ? n : c.batch;
      int64_t pfNs = 0;
      for (size_t b0 = 0; b0 < n; b0 += batch) {
        const size_t bn = std::min(batch, n - b0);
        int64_t a = nowNs();
        pre->run((bn + unit - 1) / unit, [&](size_t u) { fault(base + b0 + u * unit, std::min(unit, bn - u * unit), c.touch); });
        pfNs += nowNs() - a;
        const size_t p0 = b0 / piece, np = (bn + piece - 1) / piece;
        regs->run(np, [&](size_t i) { reg(p0 + i); });
      }
      tPf = t0 + pfNs;  // pf s: the prefault phases' sum; reg s: the rest
    } else {
      // Prefault units in address order; a piece whose units are all done
      // goes to the registration threads at once.
      size_t unit = c.unit && piece % c.unit == 0 ? c.unit : piece;  // a divisor of the piece, at most 32 MiB where it can be
      while (unit > (32 << 20) && unit % (4 << 20) == 0) unit /= 2;
      const size_t perPiece = piece / unit, units = (n + unit - 1) / unit;
      std::vector<std::atomic<int>> left(pieces);
      for (size_t i = 0; i < pieces; i++) left[i] = int((pieceLen(i) + unit - 1) / unit);
      std::mutex qmu;
      std::condition_variable qcv;
      std::deque<size_t> q;
      std::thread faulting([&] {
        runThreads(c.pre, units, [&](size_t u) {
          fault(base + u * unit, std::min(unit, n - u * unit), c.touch);
          size_t i = u / perPiece;
          if (left[i].fetch_sub(1) == 1) {
            std::lock_guard<std::mutex> l(qmu);
            q.push_back(i);
            qcv.notify_one();
          }
        });
      });
      std::vector<std::thread> rs;
      size_t taken = 0;
      for (int t = 0; t < c.reg; t++)
        rs.emplace_back([&] {
          CK(cu.CtxSetCurrent(g_ctx));
          for (;;) {
            size_t i;
            {
              std::unique_lock<std::mutex> l(qmu);
              qcv.wait(l, [&] { return !q.empty() || taken == pieces; });
              if (q.empty()) return;
              i = q.front();
              q.pop_front();
              if (++taken == pieces) qcv.notify_all();
            }
            reg(i);
          }
        });
      for (auto& t : rs) t.join();
      faulting.join();
    }
  }
  int64_t t1 = nowNs();
  long huge1 = anonHugeKiB();
  res.gbps = n / double(t1 - t0);
  if (tPf) res.pfS = (tPf - t0) / 1e9, res.regS = (t1 - tPf) / 1e9;
  if (c.way != "hostalloc" && huge0 >= 0 && huge1 >= 0) res.hugePct = 100.0 * (huge1 - huge0) * 1024.0 / n;
  if (res.err.empty() && c.way != "touch") {
    unsigned fl;
    CUresult r = cu.MemHostGetFlags(&fl, ptr[0]);
    if (r == 0) r = cu.MemHostGetFlags(&fl, ptr[pieces - 1] + pieceLen(pieces - 1) - 1);
    if (r != 0) fail("cuMemHostGetFlags (is it pinned?)", r);
  }
  res.nbReserve = latency(t0, t1);
  // Free, piece by piece, from F threads.
  int64_t t2 = nowNs();
  runThreads(c.fre, pieces, [&](size_t i) {
    if (c.way == "hostalloc") {
      if (ok[i]) {
        CUresult r = gate.run([&] { return cu.MemFreeHost(ptr[i]); });
        if (r != 0) fail("cuMemFreeHost", r);
      }
      return;
    }
    if (ok[i]) {
      CUresult r = gate.run([&] { return cu.MemHostUnregister(ptr[i]); });
      if (r != 0) fail("cuMemHostUnregister", r);
    }
    munmap(ptr[i], pieceLen(i));
  });
  int64_t t3 = nowNs();
  res.freeS = (t3 - t2) / 1e9;
  res.nbFree = latency(t2, t3);
  res.start = t0, res.made = t1, res.freed = t3;
  if (c.way == "phased" && tPf) res.prefaulted = tPf;
  return res;
}

// availBytes is MemAvailable (0 when unknown).
static size_t availBytes() {
  FILE* f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
  fclose(f);
  return kb << 10;
}

static std::vector<Cfg> grid(const std::string& name) {
  std::vector<Cfg> v;
  auto add = [&](const char* way, size_t piece, int reg, int pre, bool huge, long gate, bool touch = false, size_t n = 0) {
    Cfg c;
    c.way = way, c.piece = piece, c.reg = reg, c.pre = pre, c.huge = huge, c.gateUs = gate, c.touch = touch, c.n = n;
    v.push_back(c);
  };
  // cuMemHostAlloc: one call of the whole, and 2 MiB and 64 MiB pieces.
  auto hostalloc = [&](size_t n) {
    add("hostalloc", 0, 1, 1, false, -1, false, n);
    add("hostalloc", 2 << 20, 1, 1, false, -1, false, n);
    add("hostalloc", 64 << 20, 1, 1, false, -1, false, n);
  };
  const size_t M = 1 << 20, G = 1ull << 30;
  const size_t sizes[] = {2 * M, 8 * M, 32 * M, 128 * M, G};
  const bool quick = name == "quick" || name == "register";
  if (quick) {
    // Prefault and registration alone (phased, ungated), then the
    // pipeline's piece, threads, gate and prefault threads.
    for (int p : {4, 8, 16}) add("phased", 32 * M, 1, p, true, -1);
    add("phased", 32 * M, 4, 8, true, -1);
    for (int p : {8, 16}) add("phased", 32 * M, 1, p, false, -1);
    for (size_t s : sizes) add("pipelined", s, 2, 8, true, -1);
    for (size_t s : {2 * M, 8 * M, 16 * M, 32 * M, 64 * M, 128 * M, G}) add("pipelined", s, 2, 8, true, 200);
    for (int r : {1, 4, 8}) add("pipelined", 32 * M, r, 8, true, -1);
    add("pipelined", 16 * M, 2, 8, true, 100);
    add("pipelined", 32 * M, 2, 8, true, 100);
    add("pipelined", 32 * M, 2, 8, true, 400);
    for (int p : {4, 12, 16}) add("pipelined", 32 * M, 2, p, true, 200);
    add("pipelined", 32 * M, 2, 16, false, 200);
    add("pipelined", 32 * M, 4, 16, false, -1);
    add("pipelined", 32 * M, 2, 8, true, 200, true);
  }
  if (name == "quick" || name == "hostallocs") hostalloc(8 * G);
  if (name == "frontier") {
    // The configurations at the bound: the memory warmed first, then
    // cudahost's default design (64 MiB batches of 4 MiB prefault units,
    // 16 MiB pieces, two registration threads, a 100 us gate), the whole
    // arena as one batch, and the pipelined way beside them.
    Cfg w;
    w.way = "touch", w.pre = 16, w.n = std::min(64 * G, availBytes() / 2 / (2 * M) * (2 * M));
    v.push_back(w);
    add("batched", 16 * M, 2, 16, true, 100);
    v.back().batch = 64 * M, v.back().unit = 4 * M;
    add("phased", 16 * M, 1, 16, true, 100);
    add("pipelined", 32 * M, 2, 8, true, 200);
    v.back().unit = 4 * M;
  }
  if (name == "full") {
    for (size_t s : sizes)
      for (int r : {1, 2, 4, 8})
        for (long g : {-1L, 200L}) add("pipelined", s, r, 8, true, g);
    for (size_t s : {8 * M, 32 * M, 128 * M})
      for (int r : {2, 8})
        for (long g : {-1L, 200L}) add("pipelined", s, r, 16, false, g);
    for (int p : {4, 8, 16})
      for (bool h : {true, false}) add("phased", 32 * M, 1, p, h, -1);
    for (int p : {4, 16}) add("pipelined", 32 * M, 2, p, true, 200);
    hostalloc(0);
  }
  return v;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s GIB [quick|register|hostallocs|full|frontier|SPEC]...  (SPEC: WAY[:S=32M][:R=2][:P=8][:F=8][:huge=1][:gate=200|off][:pf=populate|touch][:N=96G])\n", argv[0]);
    return 2;
  }
  size_t total = size_t(atol(argv[1])) << 30;
  std::vector<Cfg> cfgs;
  for (int i = 2; i < argc; i++) {
    std::vector<Cfg> g = grid(argv[i]);
    if (g.empty()) {
      Cfg c;
      if (!parseCfg(argv[i], &c)) { fprintf(stderr, "arena: bad configuration %s\n", argv[i]); return 2; }
      g.push_back(c);
    }
    cfgs.insert(cfgs.end(), g.begin(), g.end());
  }
  if (total == 0 || cfgs.empty()) {
    fprintf(stderr, "arena: want a size in GiB and at least one configuration\n");
    return 2;
  }
  loadDriver();
  {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_populate = p != MAP_FAILED && madvise(p, 4096, MADV_POPULATE_WRITE) == 0;
    if (p != MAP_FAILED) munmap(p, 4096);
  }
  auto cat = [](const char* path) {
    char b[256] = "?";
    FILE* f = fopen(path, "r");
    if (f) { if (!fgets(b, sizeof b, f)) strcpy(b, "?"); fclose(f); }
    b[strcspn(b, "\n")] = 0;
    return std::string(b);
  };
  printf("# arena: %zu GiB, %zu configurations, %ld CPUs, THP enabled %s, defrag %s, MADV_POPULATE_WRITE %s\n", total >> 30, cfgs.size(),
         sysconf(_SC_NPROCESSORS_ONLN), cat("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
         cat("/sys/kernel/mm/transparent_hugepage/defrag").c_str(), g_populate ? "yes" : "no (touch)");
  std::atomic<bool> ready{false};
  std::thread nb(neighbour, &ready);
  while (!ready.load()) usleep(1000);
  int64_t q0 = nowNs();
  usleep(500000);
  Lat idle = latency(q0, nowNs());
  printf("# neighbour idle: p50/p99/max %.3f/%.3f/%.3f ms (%zu copies)\n", idle.p50, idle.p99, idle.max, idle.n);
  printf("%-52s %4s %6s %6s %6s %5s %-20s %6s %-20s %s\n", "configuration", "GiB", "GB/s", "pf s", "reg s", "huge%", "nb reserve p50/p99/max", "free s",
         "nb free p50/p99/max", "error");
  fflush(stdout);
  struct Row { Cfg c; size_t n; Result r; };
  std::vector<Row> rows;
  // A first round of the first configuration, unless that is a touch row
  // (which then warms the machine's memory itself).
  for (size_t i = cfgs[0].way == "touch" ? 1 : 0; i <= cfgs.size(); i++) {
    const Cfg& c = cfgs[i == 0 ? 0 : i - 1];
    Result r = measure(c, total);
    size_t n = c.n ? c.n : total;
    std::string name = (i == 0 ? "warmup " : "") + label(c);
    auto lat = [](const Lat& l) { char b[64]; snprintf(b, sizeof b, "%.2f/%.2f/%.2f", l.p50, l.p99, l.max); return std::string(b); };
    auto secs = [](double s) { char b[16]; if (s < 0) strcpy(b, "-"); else snprintf(b, sizeof b, "%.2f", s); return std::string(b); };
    char hp[16];
    if (r.hugePct < 0) strcpy(hp, "-"); else snprintf(hp, sizeof hp, "%.0f", r.hugePct);
    printf("%-52s %4zu %6.1f %6s %6s %5s %-20s %6.2f %-20s %s\n", name.c_str(), n >> 30, r.gbps, secs(r.pfS).c_str(), secs(r.regS).c_str(), hp,
           lat(r.nbReserve).c_str(), r.freeS, lat(r.nbFree).c_str(), r.err.c_str());
    fflush(stdout);
    if (const char* path = getenv("ARENA_JSON")) {
      // One JSON line per row, in the form `pinpool arena --json` writes,
      // for torch_pin.py split to set a second process's waits beside it.
      if (FILE* f = fopen(path, "a")) {
        fprintf(f, "{\"way\":\"arena.cpp:%s\",\"bytes\":%zu,\"gb_per_s\":%.3f,\"start_mono_ns\":%lld,\"made_mono_ns\":%lld,\"freed_mono_ns\":%lld",
                name.c_str(), n, r.gbps, (long long)r.start, (long long)r.made, (long long)r.freed);
        if (r.prefaulted) fprintf(f, ",\"prefaulted_mono_ns\":%lld", (long long)r.prefaulted);
        fprintf(f, ",\"close_ns\":%lld", (long long)(r.freeS * 1e9));
        if (r.nbReserve.n > 0)
          fprintf(f, ",\"neighbour\":{\"count\":%zu,\"p50_ns\":%lld,\"p99_ns\":%lld,\"max_ns\":%lld}", r.nbReserve.n,
                  (long long)(r.nbReserve.p50 * 1e6), (long long)(r.nbReserve.p99 * 1e6), (long long)(r.nbReserve.max * 1e6));
        if (!r.err.empty()) fprintf(f, ",\"error\":\"%s\"", r.err.c_str());
        fprintf(f, "}\n");
        fclose(f);
      }
    }
    if (i > 0) rows.push_back({c, n, r});
  }
  g_nbStop = true;
  nb.join();
  // The summary: per size, the fastest, and the fastest within the bound.
  auto within = [](const Lat& l) { return l.n > 0 && l.p99 <= 1.0 && l.max <= 5.0; };
  std::vector<size_t> sizes;
  for (const Row& w : rows)
    if (w.c.way != "touch" && std::find(sizes.begin(), sizes.end(), w.n) == sizes.end()) sizes.push_back(w.n);
  printf("\n# summary (bound: neighbour p99 <= 1 ms and max <= 5 ms)\n");
  for (size_t n : sizes) {
    const Row *best = nullptr, *bound = nullptr, *freeBound = nullptr;
    for (const Row& w : rows) {
      if (w.n != n || !w.r.err.empty() || w.c.way == "touch") continue;
      if (!best || w.r.gbps > best->r.gbps) best = &w;
      if (within(w.r.nbReserve) && (!bound || w.r.gbps > bound->r.gbps)) bound = &w;
      if (within(w.r.nbFree) && (!freeBound || w.r.freeS < freeBound->r.freeS)) freeBound = &w;
    }
    auto show = [&](const char* what, const Row* w) {
      if (!w) { printf("%4zu GiB %-22s none\n", n >> 30, what); return; }
      printf("%4zu GiB %-22s %-52s %6.1f GB/s  nb %.2f/%.2f/%.2f ms  free %.2f s (nb %.2f/%.2f/%.2f)\n", n >> 30, what, label(w->c).c_str(), w->r.gbps,
             w->r.nbReserve.p50, w->r.nbReserve.p99, w->r.nbReserve.max, w->r.freeS, w->r.nbFree.p50, w->r.nbFree.p99, w->r.nbFree.max);
    };
    show("fastest", best);
    show("fastest within bound", bound);
    show("fastest free in bound", freeBound);
  }
  return 0;
}
