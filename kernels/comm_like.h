// File: kernels/comm_like.h
//
// A communication-shaped kernel for the contention sweep (calibrate/gpu_bench.h BenchContention;
// docs/CALIBRATION.md "Contention"): it holds SMs and moves bytes through HBM the way an NCCL
// collective's kernel does while a GEMM runs beside it on another stream, on one GPU.
//   * one CTA per SM: each asks for `smem_bytes` of dynamic shared memory (more than half an SM's,
//     so no two land on one SM, and no Hopper GEMM CTA, which takes ~200 KiB, shares its SM: an
//     NCCL CTA, 512-640 threads compiled for one block per SM, leaves none either);
//   * `threads` per CTA (NCCL's ring kernel: NCCL_SIMPLE_MAX_NTHREADS 512 + a sync warp = 544);
//   * paced: each CTA copies 16-byte words from `src` to `dst` in rounds of 512 KiB of its own
//     slice and sleeps (__nanosleep) until %globaltimer catches up with `bytes_per_s / ctas`, so the
//     CTAs together copy at the collective's bus bandwidth (HBM sees 2x: the reads and the writes,
//     as a ring or NVLS collective reads what it sends and has written what it receives);
//   * runs until the host sets `*stop` (mapped host memory), or `timeout_ns` (it then sets
//     `*timed_out`), so it can never hang a stream;
//   * CTA i sets started[i] = 1 (mapped host memory) when it runs, so the host can start the GEMM
//     only once every CTA holds its SM; the bytes copied are added to `*copied_bytes` (device).
#ifndef STEPCAST_KERNELS_COMM_LIKE_H_
#define STEPCAST_KERNELS_COMM_LIKE_H_

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace stepcast::kernels {

struct CommLikeArgs {
  const void* src = nullptr;  // device, at least `bytes`
  void* dst = nullptr;        // device, at least `bytes`
  size_t bytes = 0;           // split into `ctas` slices of whole 512 KiB rounds (at least one each)
  int ctas = 0;
  int threads = 544;
  int smem_bytes = 0;
  double bytes_per_s = 0;            // copied by all CTAs together; <= 0: unpaced
  const volatile int* stop = nullptr;  // mapped host memory
  volatile int* started = nullptr;     // mapped host memory, `ctas` ints
  int* timed_out = nullptr;            // mapped host memory
  unsigned long long* copied_bytes = nullptr;  // device
  uint64_t timeout_ns = 0;
  // > 1: launched in thread-block clusters of this many CTAs with the spread scheduling policy, as
  // NCCL launches its kernels on sm_90+ (NCCL_CGA_CLUSTER_SIZE, default 4); `ctas` must be a
  // multiple of it.
  int cluster_size = 1;
};

// cudaErrorInvalidValue when `bytes` holds less than one round per CTA, a pointer is missing or
// `ctas` is not a multiple of `cluster_size`.
cudaError_t LaunchCommLike(const CommLikeArgs& args, cudaStream_t stream);

}  // namespace stepcast::kernels

#endif  // STEPCAST_KERNELS_COMM_LIKE_H_
