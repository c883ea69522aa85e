// File: calibrate/gpu_bench.h
//
// The GPU microbenchmarks of stepcast-calibrate (need a CUDA device):
//  * GEMM through cuBLASLt: bf16, fp16, fp8 (e4m3 inputs, bf16 output; Hopper and later), tf32,
//    fp32; TN layout; the heuristic's top 4 algorithms with a workspace fit for the architecture
//    (32 MiB on sm_90+, 4 MiB before, cuBLAS's recommendation), the fastest kept; random inputs
//    (never zero); L2 flushed before every timed run; warm-up; per-iteration CUDA events; median
//    and best; CUPTI kernel times beside them.
//  * HBM: copy and triad with 16-byte vectors over arrays of max(8 x L2, 256 MiB), bytes read
//    plus bytes written; pinned host<->device copies; CUPTI beside the events.
#ifndef STEPCAST_CALIBRATE_GPU_BENCH_H_
#define STEPCAST_CALIBRATE_GPU_BENCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/cupti_timer.h"
#include "calibrate/iterations.h"
#include "core/dtype.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

struct GpuInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t l2_bytes = 0;
  size_t memory_bytes = 0;
};
// Every visible GPU; FailedPrecondition naming the CUDA error when there is no device or driver.
absl::StatusOr<std::vector<GpuInfo>> ListGpus();

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  std::string what;  // "QKV h=8192 tp=4 tokens=8192", "square 8192"
};
// The shapes a transformer layer runs (QKV, attention output, MLP up/down for hidden sizes
// 4096/8192/16384, token counts per micro-batch 4096-16384, divided by TP 1-8) plus squares.
std::vector<GemmShape> TransformerShapes(bool quick);

// One GEMM through cuBLASLt: C[m,n] = A^T B (TN, column-major), the fastest of the heuristic's
// top-4 algorithms, random inputs, L2 flushed before every timed run, CUDA events per run.
// Rates count 2*m*n*k FLOPs. Errors: CUDA/cuBLASLt failures, no algorithm for the dtype.
absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& gpu, DType dtype, const GemmShape& shape,
                                         const BenchOptions& o, CuptiTimer* cupti);
absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& gpu, const BenchOptions& o, CuptiTimer* cupti);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_GPU_BENCH_H_
