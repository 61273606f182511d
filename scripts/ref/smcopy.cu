// smcopy: does an SM-based copy (a kernel that reads mapped pinned host
// memory) read lines that CPU cores have just written, and which sit in
// their L2, faster than the copy engine does? It times the copy engine and
// the kernel (1, 2, 4 and 8 blocks of 512 threads per SM) on 2 and 16 MiB of
// pinned memory, cold, just written by one thread and by 8 threads, and
// checks the kernel's bytes. Built and run on the GPU host by
// scripts/gpu-run.sh (REF=smcopy: only this one).
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void smcopy(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

static void touch(char* region, const char* src, size_t n, int k) {
  std::vector<std::thread> ts;
  size_t s = (n + k - 1) / k;
  for (int j = 0; j < k; j++) ts.emplace_back([=] { size_t lo = j * s, hi = lo + s > n ? n : lo + s; if (lo < hi) memcpy(region + lo, src + lo, hi - lo); });
  for (auto& t : ts) t.join();
}

int main() {
  const size_t arena = 256 << 20;
  char* pin; CK(cudaHostAlloc(&pin, arena, cudaHostAllocMapped));
  char* host = (char*)malloc(16 << 20); for (size_t i = 0; i < (16 << 20); i++) host[i] = (char)(i * 7);
  memset(pin, 1, arena);
  char* dev; CK(cudaMalloc(&dev, 16 << 20));
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  size_t sizes[] = {2 << 20, 16 << 20};
  int states[] = {0, 1, 8};
  const char* names[] = {"cold", "touched-by-1", "touched-by-8"};
  for (int blocksPerSM : {0, 1, 2, 4, 8}) {
    for (size_t n : sizes) for (int si = 0; si < 3; si++) {
      float total = 0; size_t off = 0; int reps = 50;
      for (int r = 0; r < reps + 2; r++) {
        off = (off + (16 << 20)) % arena;
        char* region = pin + off;
        if (states[si]) touch(region, host, n, states[si]);
        CK(cudaEventRecord(e0, st));
        if (blocksPerSM == 0) CK(cudaMemcpyAsync(dev, region, n, cudaMemcpyHostToDevice, st));
        else smcopy<<<sms * blocksPerSM, 512, 0, st>>>((uint4*)dev, (const uint4*)region, n / 16);
        CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 2) total += ms;
      }
      printf("%-6s blocks/SM=%d size=%5zuKiB %-13s %6.1f GB/s\n", blocksPerSM ? "kernel" : "CE", blocksPerSM, n >> 10, names[si], n * (double)reps / (total / 1e3) / 1e9);
    }
  }
  // check the kernel's bytes
  touch(pin, host, 16 << 20, 8);
  smcopy<<<sms * 4, 512, 0, st>>>((uint4*)dev, (const uint4*)pin, (16 << 20) / 16);
  char* back = (char*)malloc(16 << 20);
  CK(cudaMemcpyAsync(back, dev, 16 << 20, cudaMemcpyDeviceToHost, st)); CK(cudaStreamSynchronize(st));
  printf("kernel copy %s\n", memcmp(back, host, 16 << 20) ? "WRONG" : "byte-exact");
  return 0;
}
