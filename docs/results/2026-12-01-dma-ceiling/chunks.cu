// Does a pinned copy of 64 MiB in back-to-back chunks (one cudaMemcpyAsync
// each, as the staged chunked mode issues them) run slower than one copy?
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)
int main() {
  const size_t n = 64 << 20;
  char *pin, *dev; CK(cudaHostAlloc(&pin, n, 0)); memset(pin, 1, n); CK(cudaMalloc(&dev, n));
  cudaStream_t sts[4]; for (int i = 0; i < 4; i++) CK(cudaStreamCreateWithFlags(&sts[i], cudaStreamNonBlocking));
  cudaStream_t st = sts[0];
  cudaEvent_t j[4]; for (int i = 0; i < 4; i++) CK(cudaEventCreateWithFlags(&j[i], cudaEventDisableTiming));
  cudaEvent_t e0, e1, ev[64]; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 64; i++) CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  for (int round = 0; round < 3; round++)
  for (int dir = 0; dir < 2; dir++)
  for (size_t chunk : {(size_t)64 << 20, (size_t)4 << 20, (size_t)2 << 20}) for (int events = 1; events <= 4; events *= 2) {
    float total = 0; int reps = 20;
    for (int r = 0; r < reps + 2; r++) {
      int ns = events;
      CK(cudaEventRecord(e0, st));
      for (int k = 1; k < ns; k++) CK(cudaStreamWaitEvent(sts[k], e0, 0));
      for (size_t off = 0, i = 0; off < n; off += chunk, i++) {
        cudaStream_t s = sts[i % ns];
        if (dir == 0) CK(cudaMemcpyAsync(dev + off, pin + off, chunk, cudaMemcpyHostToDevice, s));
        else CK(cudaMemcpyAsync(pin + off, dev + off, chunk, cudaMemcpyDeviceToHost, s));
      }
      for (int k = 1; k < ns; k++) { CK(cudaEventRecord(j[k], sts[k])); CK(cudaStreamWaitEvent(st, j[k], 0)); }
      CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 2) total += ms;
    }
    printf("round %d %s 64MiB in %5zuKiB copies%s: %.1f GB/s\n", round, dir ? "D2H" : "H2D", chunk >> 10, events == 1 ? "" : events == 2 ? " on 2 streams" : " on 4 streams", n * (double)reps / (total / 1e3) / 1e9);
  }
  return 0;
}
