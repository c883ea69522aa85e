#include "kernels/stream.h"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/pattern.h"

namespace stepcast::kernels {
namespace {

constexpr int kBlock = 256;

int Blocks(size_t n) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const size_t want = (n + kBlock - 1) / kBlock;
  const size_t cap = static_cast<size_t>(sms > 0 ? sms : 132) * 32;  // grid-stride beyond this
  return static_cast<int>(want < cap ? (want > 0 ? want : 1) : cap);
}

// The STREAM kernels launch one thread per float4 (BabelStream's CUDA kernels: one element per
// thread) in blocks of 256. Measured with scripts/hbm_copy_variants.cu (1 GiB arrays, queued CUDA
// events, medians of 30, GB/s of bytes read + written): on an H200 (2026-11-27) blocks of 256
// copied 4275 GB/s, blocks of 1024 (BabelStream's TBSIZE) 4114, torch's copy_ (cudaMemcpyAsync)
// 4255; on an H100 80GB HBM3 the same day 3019, 3047 and 3005. Blocks of 256 are the only shape
// at or above cudaMemcpyAsync on both. A grid-stride loop over 32 blocks of 256 per SM copied
// 3976 / 2856 GB/s, and unrolling it 2x or 4x did not help; the loop stays as a guard for grids
// past the launch limit.
constexpr int kStreamBlock = 256;
int StreamBlocks(size_t n) {
  const size_t want = (n + kStreamBlock - 1) / kStreamBlock;
  return static_cast<int>(std::min<size_t>(std::max<size_t>(want, 1), 0x7fffffff));
}

__global__ void CopyKernel(const float4* __restrict__ a, float4* __restrict__ c, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    c[i] = a[i];
  }
}

__global__ void TriadKernel(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c,
                            float s, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

__device__ float Uniform(uint64_t seed, size_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;  // [-1, 1)
}

template <typename T>
__global__ void FillRandomKernel(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float v = Uniform(seed, i);
    if (v == 0.0f) v = 0.5f;
    p[i] = static_cast<T>(v);
  }
}

__global__ void FillConstantKernel(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = v;
  }
}

__global__ void FillPatternKernel(float* p, size_t n, int rank, int salt) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = PatternValue(rank, salt, i);
  }
}

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void GateKernel(const volatile int* open, int* timed_out, uint64_t timeout_ns) {
  const uint64_t t0 = GlobalTimerNs();
  while (*open == 0) {
    if (GlobalTimerNs() - t0 > timeout_ns) {
      *timed_out = 1;
      break;
    }
    __nanosleep(200);
  }
}

}  // namespace

cudaError_t LaunchFillPattern(float* p, size_t n, int rank, int salt, cudaStream_t s) {
  FillPatternKernel<<<Blocks(n), kBlock, 0, s>>>(p, n, rank, salt);
  return cudaGetLastError();
}

cudaError_t LaunchGate(const volatile int* open, int* timed_out, uint64_t timeout_ns, cudaStream_t s) {
  GateKernel<<<1, 1, 0, s>>>(open, timed_out, timeout_ns);
  return cudaGetLastError();
}

cudaError_t LaunchCopy(const void* a, void* c, size_t bytes, cudaStream_t s) {
  const size_t n = bytes / sizeof(float4);
  CopyKernel<<<StreamBlocks(n), kStreamBlock, 0, s>>>(static_cast<const float4*>(a), static_cast<float4*>(c), n);
  return cudaGetLastError();
}

cudaError_t LaunchTriad(void* a, const void* b, const void* c, float scalar, size_t bytes, cudaStream_t s) {
  const size_t n = bytes / sizeof(float4);
  TriadKernel<<<StreamBlocks(n), kStreamBlock, 0, s>>>(static_cast<float4*>(a), static_cast<const float4*>(b),
                                           static_cast<const float4*>(c), scalar, n);
  return cudaGetLastError();
}

cudaError_t LaunchFillRandom(void* p, size_t n, FillType type, uint64_t seed, cudaStream_t s) {
  switch (type) {
    case FillType::kFloat32: FillRandomKernel<float><<<Blocks(n), kBlock, 0, s>>>(static_cast<float*>(p), n, seed); break;
    case FillType::kBFloat16:
      FillRandomKernel<__nv_bfloat16><<<Blocks(n), kBlock, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed);
      break;
    case FillType::kFloat16: FillRandomKernel<__half><<<Blocks(n), kBlock, 0, s>>>(static_cast<__half*>(p), n, seed); break;
    case FillType::kFp8E4M3:
      FillRandomKernel<__nv_fp8_e4m3><<<Blocks(n), kBlock, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchFillConstant(float* p, size_t n, float v, cudaStream_t s) {
  FillConstantKernel<<<Blocks(n), kBlock, 0, s>>>(p, n, v);
  return cudaGetLastError();
}

__global__ void EmptyKernel() {}

cudaError_t LaunchEmptyKernel(cudaStream_t s) {
  EmptyKernel<<<1, 1, 0, s>>>();
  return cudaGetLastError();
}

cudaError_t LaunchFlush(void* buffer, size_t bytes, cudaStream_t s) {
  return cudaMemsetAsync(buffer, 0x5a, bytes, s);
}

}  // namespace stepcast::kernels
