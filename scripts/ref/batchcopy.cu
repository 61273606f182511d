// batchcopy: does cudaMemcpyBatchAsync hide the copy engine's per-copy cost
// of back-to-back 2 MiB copies, as a chunked transfer queues them? It moves
// 64 MiB of pinned memory in 2 MiB copies with cudaMemcpyAsync, and with
// cudaMemcpyBatchAsync in batches of 1, 2, 4 and 8, the host side of the
// copies contiguous or scattered (as staging buffers are), both ways,
// timed with events: the peer of transfer's BenchmarkChunkedDMA, built and
// run on the GPU host by scripts/gpu-run.sh (REF=batchcopy: only this one).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
static cudaError_t batch(void** d, void** s, size_t* sz, size_t n, cudaMemcpySrcAccessOrder order, cudaStream_t st) {
  cudaMemcpyAttributes a; memset(&a, 0, sizeof a); a.srcAccessOrder = order;
  size_t idx = 0;
#if CUDART_VERSION >= 13000
  return cudaMemcpyBatchAsync((const void**)d, (const void**)s, sz, n, &a, &idx, 1, st);
#else
  size_t fail; return cudaMemcpyBatchAsync(d, s, sz, n, &a, &idx, 1, &fail, st);
#endif
}
int main() {
  const size_t n = 64 << 20, chunk = 2 << 20, k = n / chunk;
  char *pin, *dev; CK(cudaHostAlloc(&pin, n, 0)); memset(pin, 1, n); CK(cudaMalloc(&dev, n));
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<cudaEvent_t> evs(k); for (auto& x : evs) CK(cudaEventCreateWithFlags(&x, cudaEventDisableTiming));
  for (int round = 0; round < 2; round++)
  for (int dir = 0; dir < 2; dir++)
  for (size_t per : {(size_t)0, (size_t)1, (size_t)2, (size_t)4, (size_t)8})
  for (int shuf = 0; shuf < 2; shuf++) { int ev = 1;
    std::vector<void*> d(k), s(k); std::vector<size_t> sz(k, chunk);
    // shuf: the host side of copy i is slot perm[i] of the pinned memory,
    // as staging buffers are: never next to the one of copy i+1.
    std::vector<size_t> perm(k); for (size_t i = 0; i < k; i++) perm[i] = shuf ? (i * 7 + 3) % k : i;
    for (size_t i = 0; i < k; i++) {
      if (dir == 0) { d[i] = dev + i * chunk; s[i] = pin + perm[i] * chunk; } else { d[i] = pin + perm[i] * chunk; s[i] = dev + i * chunk; }
    }
    float total = 0; int reps = 20;
    for (int r = 0; r < reps + 1; r++) {
      CK(cudaEventRecord(e0, st));
      for (size_t i = 0; i < k; i += (per ? per : 1)) {
        if (per == 0) CK(cudaMemcpyAsync(d[i], s[i], chunk, cudaMemcpyDefault, st));
        else CK(batch(&d[i], &s[i], &sz[i], per, cudaMemcpySrcAccessOrderStream, st));
        if (ev) for (size_t j = 0; j < (per ? per : 1); j++) CK(cudaEventRecord(evs[i + j], st));
      }
      CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 1) total += ms;
    }
    printf("round %d %s 64MiB in 2MiB copies, %s %2zu%s: %.2f GB/s\n", round, dir ? "D2H" : "H2D", per ? "cudaMemcpyBatchAsync of" : "cudaMemcpyAsync, batch", per, shuf ? ", host side scattered" : ", host side contiguous", n * (double)reps / (total / 1e3) / 1e9);
  }
  return 0;
}
