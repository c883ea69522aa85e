// A known kernel sequence for the probe's injection test: 10 steps in NVTX ranges named
// "step", each a "gemm" kernel, an elementwise kernel and a second "gemm" kernel, synchronised
// at the end of the step. Exit 77 when there is no CUDA device (the test then skips).
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void fake_gemm_kernel(float* x, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int k = 0; k < iters; ++k) v = v * 1.0000001f + 0.5f;
  x[i] = v;
}

__global__ void elementwise_add_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  if (argc > 1 && std::strcmp(argv[1], "--check") == 0) return 0;
  const int n = 1 << 20;
  float* x = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 1;
  cudaMemset(x, 0, n * sizeof(float));
  for (int step = 0; step < 10; ++step) {
    nvtxRangePushA("step");
    fake_gemm_kernel<<<(n + 255) / 256, 256>>>(x, n, 2000);
    elementwise_add_kernel<<<(n + 255) / 256, 256>>>(x, n);
    fake_gemm_kernel<<<(n + 255) / 256, 256>>>(x, n, 1000);
    cudaDeviceSynchronize();
    nvtxRangePop();
  }
  cudaFree(x);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
