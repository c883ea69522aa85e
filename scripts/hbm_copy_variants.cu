// HBM copy kernel variants on one GPU: the measurement behind kernels/stream.cu's launch shape
// (docs/CALIBRATION.md, "What the first run found"). Arrays of 400 MiB, 1 GiB and 4 GiB; each
// variant's median of 30 runs, enqueued between CUDA events after 5 warm-up runs; GB/s counts the
// bytes read and written. Build and run on a GPU machine:
//   nvcc -O3 -arch=sm_90a -o hbm_copy_variants scripts/hbm_copy_variants.cu && ./hbm_copy_variants
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CK(x)                                                      \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e != cudaSuccess) {                                        \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));          \
      return 1;                                                    \
    }                                                              \
  } while (0)

// The grid-stride loop kernels/stream.cu used before 2026-11-25.
__global__ void GridStride(const float4* __restrict__ a, float4* __restrict__ c, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) c[i] = a[i];
}
// BabelStream's: one element per thread.
__global__ void OnePerThread(const float4* __restrict__ a, float4* __restrict__ c, size_t n) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i];
}
// The grid-stride loop with U independent loads in flight per thread.
template <int U>
__global__ void GridStrideUnrolled(const float4* __restrict__ a, float4* __restrict__ c, size_t n) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = a[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) c[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) c[i] = a[i];
}
// K consecutive float4 per thread, a block copying K * blockDim contiguous elements (loads first).
template <int K>
__global__ void KPerThread(const float4* __restrict__ a, float4* __restrict__ c, size_t n) {
  const size_t base = blockIdx.x * (size_t)blockDim.x * K + threadIdx.x;
  float4 v[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const size_t i = base + (size_t)k * blockDim.x;
    if (i < n) v[k] = a[i];
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const size_t i = base + (size_t)k * blockDim.x;
    if (i < n) c[i] = v[k];
  }
}
// One per thread with streaming cache hints (ld.global.cs / st.global.cs: evict first).
__global__ void OnePerThreadStreaming(const float4* __restrict__ a, float4* __restrict__ c, size_t n) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) __stcs(c + i, __ldcs(a + i));
}
__global__ void Fill(float* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    p[i] = (float)(i % 977) * 0.5f + 1.0f;
  }
}

template <class F>
double MedianSeconds(F f, int iters = 30) {
  for (int i = 0; i < 5; ++i) f();
  std::vector<cudaEvent_t> s(iters), e(iters);
  for (int i = 0; i < iters; ++i) {
    cudaEventCreate(&s[i]);
    cudaEventCreate(&e[i]);
  }
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(s[i]);
    f();
    cudaEventRecord(e[i]);
  }
  cudaEventSynchronize(e[iters - 1]);
  std::vector<double> t(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, s[i], e[i]);
    t[i] = ms * 1e-3;
    cudaEventDestroy(s[i]);
    cudaEventDestroy(e[i]);
  }
  std::sort(t.begin(), t.end());
  return t[iters / 2];
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);
  for (size_t bytes : {size_t(400) << 20, size_t(1) << 30, size_t(4) << 30}) {
    const size_t n = bytes / 16;
    float4 *a = nullptr, *c = nullptr;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&c, bytes));
    Fill<<<sms * 8, 256>>>(reinterpret_cast<float*>(a), bytes / 4);
    Fill<<<sms * 8, 256>>>(reinterpret_cast<float*>(c), bytes / 4);
    CK(cudaDeviceSynchronize());
    auto gbs = [&](double t) { return 2.0 * bytes / t / 1e9; };
    std::printf("array %.0f MiB\n", bytes / 1048576.0);
    std::printf("  grid-stride, 32 x 256 per SM     %7.1f GB/s\n", gbs(MedianSeconds([&] { GridStride<<<sms * 32, 256>>>(a, c, n); })));
    std::printf("  grid-stride, 8 x 256 per SM      %7.1f GB/s\n", gbs(MedianSeconds([&] { GridStride<<<sms * 8, 256>>>(a, c, n); })));
    std::printf("  one per thread, blocks of 256    %7.1f GB/s\n", gbs(MedianSeconds([&] { OnePerThread<<<(n + 255) / 256, 256>>>(a, c, n); })));
    std::printf("  one per thread, blocks of 1024   %7.1f GB/s\n", gbs(MedianSeconds([&] { OnePerThread<<<(n + 1023) / 1024, 1024>>>(a, c, n); })));
    std::printf("  one per thread, blocks of 512    %7.1f GB/s\n", gbs(MedianSeconds([&] { OnePerThread<<<(n + 511) / 512, 512>>>(a, c, n); })));
    std::printf("  one per thread, streaming, 1024  %7.1f GB/s\n", gbs(MedianSeconds([&] { OnePerThreadStreaming<<<(n + 1023) / 1024, 1024>>>(a, c, n); })));
    std::printf("  2 per thread, blocks of 1024     %7.1f GB/s\n", gbs(MedianSeconds([&] { KPerThread<2><<<(n + 2047) / 2048, 1024>>>(a, c, n); })));
    std::printf("  2 per thread, blocks of 256      %7.1f GB/s\n", gbs(MedianSeconds([&] { KPerThread<2><<<(n + 511) / 512, 256>>>(a, c, n); })));
    std::printf("  4 per thread, blocks of 256      %7.1f GB/s\n", gbs(MedianSeconds([&] { KPerThread<4><<<(n + 1023) / 1024, 256>>>(a, c, n); })));
    std::printf("  4 per thread, blocks of 512      %7.1f GB/s\n", gbs(MedianSeconds([&] { KPerThread<4><<<(n + 2047) / 2048, 512>>>(a, c, n); })));
    std::printf("  8 per thread, blocks of 128      %7.1f GB/s\n", gbs(MedianSeconds([&] { KPerThread<8><<<(n + 1023) / 1024, 128>>>(a, c, n); })));
    std::printf("  unrolled 2x, 8 x 256 per SM      %7.1f GB/s\n", gbs(MedianSeconds([&] { GridStrideUnrolled<2><<<sms * 8, 256>>>(a, c, n); })));
    std::printf("  unrolled 4x, 8 x 256 per SM      %7.1f GB/s\n", gbs(MedianSeconds([&] { GridStrideUnrolled<4><<<sms * 8, 256>>>(a, c, n); })));
    std::printf("  unrolled 4x, 32 x 256 per SM     %7.1f GB/s\n", gbs(MedianSeconds([&] { GridStrideUnrolled<4><<<sms * 32, 256>>>(a, c, n); })));
    std::printf("  cudaMemcpyAsync D2D              %7.1f GB/s\n",
                gbs(MedianSeconds([&] { cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice); })));
    CK(cudaGetLastError());
    CK(cudaFree(a));
    CK(cudaFree(c));
  }
  return 0;
}
