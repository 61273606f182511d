// kernels.cu: the readable CUDA C reference for kernels.ptx.
//
// kernels.ptx, which pinpool embeds and loads with cuModuleLoadData, was
// written by hand at PTX ISA 7.0 for sm_50 so that JetPack 5 drivers
// (CUDA 11.4) load it; nvcc 13 cannot target anything below sm_75, so it
// cannot produce that PTX. This file holds the same three kernels with the
// same names, parameters and results; scripts/gpu-run.sh compiles it on the
// GPU host with
//
//     nvcc -ptx -arch=compute_75 kernels.cu
//
// as a cross-check. The exact CPU results are in reference.go (PatternWord,
// FillPattern, Checksum, ReadSum).
//
// All kernels expect a 1-D launch and use grid-stride loops, so any grid size
// works. Sums are added to *out, which the caller zeroes first.

#include <stdint.h>

// word(seed, w): murmur3's finaliser over uint32(w) * 0x9E3779B1 + seed.
__device__ __forceinline__ uint32_t pinpool_word(uint32_t seed, uint64_t w)
{
    uint32_t x = (uint32_t)w * 0x9E3779B1u + seed;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return x;
}

// Adds sum to *out: reduced over the warp first when every warp is full
// (blockDim.x a multiple of 32, the same for the whole grid), else per thread.
__device__ __forceinline__ void pinpool_add_out(unsigned long long *out,
                                                unsigned long long sum)
{
    if ((blockDim.x & 31) == 0) {
        for (int off = 16; off > 0; off >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if ((threadIdx.x & 31) != 0)
            return;
    }
    if (sum != 0)
        atomicAdd(out, sum);
}

// dst[j] = byte (j & 3), little endian, of pinpool_word(seed, j >> 2), for
// every j < nbytes. dst needs no alignment; a full word at a 4-byte aligned
// dst is written with one 32-bit store, which stores the same bytes.
extern "C" __global__ void pinpool_fill(uint8_t *dst, uint64_t nbytes,
                                        uint32_t seed)
{
    uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t nfull = nbytes >> 2;
    uint64_t nwords = nfull + ((nbytes & 3) != 0);
    bool aligned = ((uintptr_t)dst & 3) == 0;

    for (; w < nwords; w += stride) {
        uint32_t x = pinpool_word(seed, w);
        uint64_t j = w << 2;
        if (aligned && w < nfull) {
            *(uint32_t *)(dst + j) = x;
        } else {
            uint64_t left = nbytes - j; // >= 1
            dst[j] = (uint8_t)x;
            if (left > 1) dst[j + 1] = (uint8_t)(x >> 8);
            if (left > 2) dst[j + 2] = (uint8_t)(x >> 16);
            if (left > 3) dst[j + 3] = (uint8_t)(x >> 24);
        }
    }
}

// *out += sum over j < nbytes of (src[j] + 1) * ((j * 0x9E3779B97F4A7C15) | 1),
// all mod 2^64.
extern "C" __global__ void pinpool_checksum(const uint8_t *src, uint64_t nbytes,
                                            unsigned long long *out)
{
    const uint64_t K = 0x9E3779B97F4A7C15ull;
    uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t sum = 0;

    for (; j < nbytes; j += stride)
        sum += ((uint64_t)src[j] + 1) * ((j * K) | 1);

    pinpool_add_out(out, sum);
}

// Read bandwidth: *out += sum of the little-endian uint32 words in
// src[0 : 16*(nbytes/16)] + sum of the remaining tail bytes, mod 2^64. The
// caller guarantees src is 16-byte aligned (the loop issues 16-byte loads);
// if it is not, a byte-wise path gives the same result instead of faulting.
extern "C" __global__ void pinpool_read_sum(const uint8_t *src, uint64_t nbytes,
                                            unsigned long long *out)
{
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t nvec = nbytes >> 4;
    uint64_t sum = 0;

    if (((uintptr_t)src & 15) == 0) {
        const uint4 *v = (const uint4 *)src;
        for (uint64_t i = t; i < nvec; i += stride) {
            uint4 q = v[i];
            sum += (uint64_t)q.x + q.y + q.z + q.w;
        }
        for (uint64_t j = (nvec << 4) + t; j < nbytes; j += stride)
            sum += src[j];
    } else {
        for (uint64_t j = t; j < nbytes; j += stride) {
            uint64_t b = src[j];
            sum += j < (nvec << 4) ? b << (8 * (j & 3)) : b;
        }
    }

    pinpool_add_out(out, sum);
}
