// File: calibrate/gpu_bench.h
//
// The GPU microbenchmarks of stepcast-calibrate (need a CUDA device; used through
// calibrate/cuda_system.cc's GpuSystem):
//  * GEMM through cuBLASLt: bf16, fp16, fp8 (e4m3 inputs, bf16 output; compute capability 8.9+),
//    tf32, fp32; the shape's layout (TN forward, NN dgrad, NT wgrad; fp8 TN with fast
//    accumulation on forward shapes: calibrate/gemm_shapes.h); the heuristic's top 4 algorithms
//    with a workspace fit for the architecture (32 MiB on sm_90+, 4 MiB before, cuBLAS's
//    recommendation), the fastest kept; random inputs (never zero); L2 flushed before every timed
//    run; warm-up; per-run CUDA events with CUPTI off; median and best; 16 outputs verified.
//  * HBM: copy and triad with 16-byte vectors over arrays of max(8 x L2, 256 MiB), bytes read plus
//    bytes written; pinned host<->device copies.
//  * Contention: a bf16 GEMM alone and beside a communication-shaped kernel (kernels/comm_like.h).
//  * A sustained warm-up (a bf16 8192^3 GEMM back to back).
#ifndef STEPCAST_CALIBRATE_GPU_BENCH_H_
#define STEPCAST_CALIBRATE_GPU_BENCH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/cupti_timer.h"
#include "calibrate/gemm_shapes.h"
#include "calibrate/gpu_system.h"
#include "calibrate/iterations.h"
#include "core/dtype.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

// Every visible GPU with its PCI bus id and UUID. FailedPrecondition naming the CUDA error when
// there is no device or driver.
absl::StatusOr<std::vector<GpuInfo>> ListCudaGpus();

// One GEMM (see above). With `cupti`, the timed runs are traced by CUPTI instead (the cross-check
// pass) and cupti_median_s is filled. Rates count 2 m n k FLOPs. Errors: CUDA / cuBLASLt failures
// (a kernel image missing for this GPU's architecture names it), no algorithm, a wrong result.
// The timed runs are enqueued back to back, each between its own CUDA events, and synchronised
// once (Triton's do_bench), so that no run's window holds the host's launch latency.
absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& gpu, DType dtype, const GemmShape& shape,
                                         const BenchOptions& o, CuptiTimer* cupti);
absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& gpu, const BenchOptions& o);
// The contention sweep (gpu_system.h ContentionPlan). The GEMM and the competitor run on two
// non-blocking streams; per shape: cuBLASLt's first heuristic algorithm (as cublasGemmEx and
// torch.mm run it; with the SM target, the first for that target), warm-up, then TimedIterations
// runs alone; then, right after, the competitor is launched (per CTA count, cluster size and SM
// target), the host waits until every CTA holds its SM (at most 1 s), the same runs are queued
// beside it and the competitor is stopped after them. No L2 flush between runs (a training stream's GEMMs
// run back to back). Each sample: the alone and beside time summaries, the slowdown, the
// competitor's achieved copy rate over its whole run.
absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo& gpu, const ContentionPlan& plan,
                                                                  const BenchOptions& o);
// The host-call pass (gpu_system.h GpuSystem::BenchHostCalls; docs/CALIBRATION.md "Host calls"):
// "kernel_launch" (an empty kernel, kernels/stream.h LaunchEmptyKernel, and cudaGetLastError as
// Transformer Engine checks each launch) and "cublaslt_gemm_call" per dtype (bf16; fp8 e4m3 with
// fast accumulation and scale pointers on compute capability 8.9+) at one expert GEMM's shape,
// m = n = 1536, k = 2048 (Qwen3-30B-A3B's fc1 at 2,048 tokens an expert; the host's path does not
// depend on the shape once cuBLASLt's heuristic cache holds it). kHostCallBatches batches of
// kHostCallsPerBatch calls, each batch timed on the host's steady clock and divided by its calls,
// the device synchronised between batches outside the window; 2 untimed batches first.
absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo& gpu, const BenchOptions& o);
// The copy kernel's CUPTI kernel time and CUDA-event time over the same o.iters runs (medians).
absl::StatusOr<CuptiCheck> CuptiHbmCopy(const GpuInfo& gpu, const BenchOptions& o, CuptiTimer& cupti);
absl::Status SustainedWarmup(const GpuInfo& gpu, double seconds);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_GPU_BENCH_H_
