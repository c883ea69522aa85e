// Contention of compute beside communication-shaped work, measured on one GPU (issue 28 item 1;
// docs/CALIBRATION.md "Contention"). A bf16 cuBLAS GEMM is timed alone and while, on another
// stream, a kernel shaped like an NCCL collective runs: k CTAs (one per SM: each asks for more
// than half an SM's shared memory) that move data through HBM at a capped rate (NCCL's channels
// move a collective at the link's rate, ~360 GB/s of NVLink per H100/H200, not at HBM speed), or
// a copy-engine memcpy (copy-engine collectives, no SMs). The slowdown of the GEMM,
// duration(beside) / duration(alone) - 1, is the `contention` a rate profile holds
// (hardware.proto ComputeContention).
//
//   nvcc -O3 -arch=sm_90 -o contention_bench scripts/contention_bench.cu -lcublas
//   ./contention_bench [rate_GBps=360] [reps=20]
// Prints one line per (shape, competitor): alone and beside medians in ms and the slowdown.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(3);                                                                        \
    }                                                                                      \
  } while (0)
#define CB(x)                                                              \
  do {                                                                     \
    cublasStatus_t st_ = (x);                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                    \
      std::fprintf(stderr, "%s:%d %s: cublas %d\n", __FILE__, __LINE__, #x, (int)st_); \
      std::exit(3);                                                        \
    }                                                                      \
  } while (0)

// Each CTA copies its slice of src to dst in 16-byte words, round after round, until `*stop` is
// set, pacing itself to `bytes_per_ns` (its share of the target rate) with __nanosleep.
__global__ void comm_like(const int4* __restrict__ src, int4* __restrict__ dst, size_t words_per_cta,
                          const volatile int* stop, double bytes_per_ns_per_cta, unsigned long long* rounds) {
  extern __shared__ int4 stage[];
  const size_t base = blockIdx.x * words_per_cta;
  unsigned long long t0 = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  double moved = 0;
  unsigned long long r = 0;
  // Rounds of 1 MiB (64 Ki words), cycling through the CTA's slice, so the pacing is fine-grained.
  const size_t chunk = 65536, chunks = words_per_cta / chunk > 0 ? words_per_cta / chunk : 1;
  while (!*stop && r < (1ull << 40)) {
    const size_t off = base + (r % chunks) * chunk;
    for (size_t i = threadIdx.x; i < chunk; i += blockDim.x) {
      int4 v = src[off + i];
      stage[threadIdx.x] = v;
      dst[off + i] = stage[threadIdx.x];
    }
    __syncthreads();
    moved += 2.0 * 16.0 * chunk;  // read + write
    ++r;
    // Pace: wait until the clock catches up with the bytes moved at the target rate.
    for (;;) {
      unsigned long long now = 0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      const double due_ns = moved / bytes_per_ns_per_cta;
      if (static_cast<double>(now - t0) >= due_ns || *stop) break;
      __nanosleep(2000);
    }
  }
  if (threadIdx.x == 0) atomicAdd(rounds, r);
}

static float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const double rate_gbps = argc > 1 ? std::atof(argv[1]) : 360.0;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  int dev = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("# GPU %s, %d SMs; comm-like kernel at %.0f GB/s (read+write) total\n", prop.name,
              prop.multiProcessorCount, rate_gbps);
  cublasHandle_t h;
  CB(cublasCreate(&h));
  cudaStream_t s_gemm, s_comm;
  CK(cudaStreamCreateWithFlags(&s_gemm, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s_comm, cudaStreamNonBlocking));
  CB(cublasSetStream(h, s_gemm));
  const size_t max_n = 8192;
  __nv_bfloat16 *A, *B, *C;
  CK(cudaMalloc(&A, max_n * max_n * 2));
  CK(cudaMalloc(&B, max_n * max_n * 2));
  CK(cudaMalloc(&C, max_n * max_n * 2));
  CK(cudaMemset(A, 0x3c, max_n * max_n * 2));
  CK(cudaMemset(B, 0x3c, max_n * max_n * 2));
  const size_t comm_bytes = size_t(1) << 30;  // 1 GiB each way
  int4 *src, *dst;
  CK(cudaMalloc(&src, comm_bytes));
  CK(cudaMalloc(&dst, comm_bytes));
  CK(cudaMemset(src, 1, comm_bytes));
  int* stop;
  unsigned long long* rounds;
  CK(cudaHostAlloc(&stop, sizeof(int), cudaHostAllocMapped));
  CK(cudaMalloc(&rounds, sizeof(unsigned long long)));
  const int smem = static_cast<int>(prop.sharedMemPerMultiprocessor / 2 + 1024);  // one CTA per SM
  CK(cudaFuncSetAttribute(comm_like, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const float alpha = 1, beta = 0;
  struct Shape {
    int m, n, k;
  };
  const Shape shapes[] = {{8192, 8192, 8192}, {4096, 4096, 4096}, {8192, 4096, 2048}};
  auto gemm = [&](const Shape& s) {
    CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, B, CUDA_R_16BF, s.n, A, CUDA_R_16BF, s.k,
                    &beta, C, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto time_gemm = [&](const Shape& s) {
    CK(cudaEventRecord(e0, s_gemm));
    gemm(s);
    CK(cudaEventRecord(e1, s_gemm));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  for (const Shape& s : shapes) {
    for (int w = 0; w < 5; ++w) time_gemm(s);
    std::vector<float> alone;
    for (int r = 0; r < reps; ++r) alone.push_back(time_gemm(s));
    const float a = Median(alone);
    const double flops = 2.0 * s.m * s.n * s.k;
    std::printf("gemm %dx%dx%d bf16 alone %.4f ms (%.0f TFLOP/s)\n", s.m, s.n, s.k, a, flops / a / 1e9);
    // Competitors: k SM-resident CTAs at the capped rate; a copy-engine memcpy.
    for (int ctas : {8, 16, 24, 32, -1}) {
      std::vector<float> beside;
      for (int r = 0; r < reps; ++r) {
        *stop = 0;
        if (ctas > 0) {
          const size_t words = comm_bytes / 16 / ctas;
          comm_like<<<ctas, 1024, smem, s_comm>>>(src, dst, words, stop, rate_gbps / ctas, rounds);
          CK(cudaGetLastError());
        } else {
          for (int c = 0; c < 16; ++c) CK(cudaMemcpyAsync(dst, src, comm_bytes, cudaMemcpyDeviceToDevice, s_comm));
        }
        // Let the competitor occupy its SMs before the GEMM starts.
        cudaEvent_t started;
        CK(cudaEventCreate(&started));
        CK(cudaEventRecord(started, s_comm));
        beside.push_back(time_gemm(s));
        *stop = 1;
        CK(cudaStreamSynchronize(s_comm));
        CK(cudaEventDestroy(started));
      }
      const float b = Median(beside);
      if (ctas > 0) {
        std::printf("  beside %2d CTAs at %.0f GB/s: %.4f ms, slowdown %.3f\n", ctas, rate_gbps, b, b / a - 1);
      } else {
        std::printf("  beside a copy-engine memcpy: %.4f ms, slowdown %.3f\n", b, b / a - 1);
      }
    }
  }
  CB(cublasDestroy(h));
  return 0;
}
