// Run 9's program: does cudaMemcpyBatchAsync hide the copy engine's
// per-copy cost of back-to-back 2 MiB copies? And what does it do for
// pageable memory?
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
  const size_t n = 64 << 20;
  char *pin, *dev, *pageable; CK(cudaHostAlloc(&pin, n, 0)); memset(pin, 1, n); CK(cudaMalloc(&dev, n));
  pageable = (char*)aligned_alloc(4096, n); memset(pageable, 2, n);
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int round = 0; round < 2; round++)
  for (int dir = 0; dir < 2; dir++)
  for (int mem = 0; mem < 2; mem++)
  for (size_t chunk : {(size_t)64 << 20, (size_t)2 << 20})
  for (int how = 0; how < 2; how++) {
    char* host = mem ? pageable : pin;
    size_t k = n / chunk;
    std::vector<void*> d(k), s(k); std::vector<size_t> sz(k, chunk);
    for (size_t i = 0; i < k; i++) {
      if (dir == 0) { d[i] = dev + i * chunk; s[i] = host + i * chunk; } else { d[i] = host + i * chunk; s[i] = dev + i * chunk; }
    }
    float total = 0; int reps = mem ? 3 : 20; bool bad = false;
    for (int r = 0; r < reps + 1; r++) {
      CK(cudaEventRecord(e0, st));
      if (how == 0) {
        for (size_t i = 0; i < k; i++) CK(cudaMemcpyAsync(d[i], s[i], chunk, cudaMemcpyDefault, st));
      } else {
        cudaError_t e = batch(d.data(), s.data(), sz.data(), k, mem ? cudaMemcpySrcAccessOrderAny : cudaMemcpySrcAccessOrderStream, st);
        if (e != cudaSuccess) { printf("batch: %s\n", cudaGetErrorString(e)); bad = true; cudaGetLastError(); break; }
      }
      CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 1) total += ms;
    }
    if (!bad) printf("round %d %s %-8s 64MiB in %5zuKiB copies, %-7s: %.1f GB/s\n", round, dir ? "D2H" : "H2D", mem ? "pageable" : "pinned", chunk >> 10, how ? "batch" : "each", n * (double)reps / (total / 1e3) / 1e9);
  }
  return 0;
}
