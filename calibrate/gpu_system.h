// File: calibrate/gpu_system.h
//
// The GPU work of stepcast-calibrate behind one narrow interface, so that everything around it
// (the flow, exit codes, straggler naming, MPI gathering, error agreement, profile writing) runs
// and is tested on a CPU with a fake (tests/calibrate_fakes.h):
//   * CudaGpuSystem (calibrate/cuda_system.cc): cuBLASLt GEMMs, our HBM kernels, CUPTI, NCCL
//     (dlopen'ed), built when the CUDA toolkit is found;
//   * NoCudaGpuSystem: the build without CUDA; every call fails with the reason (the `import`
//     subcommand still works).
// Calls for different GPUs may run at the same time on different threads (one per GPU).
#ifndef STEPCAST_CALIBRATE_GPU_SYSTEM_H_
#define STEPCAST_CALIBRATE_GPU_SYSTEM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/collective_harness.h"
#include "calibrate/communicator.h"
#include "calibrate/gemm_shapes.h"
#include "calibrate/iterations.h"
#include "core/dtype.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

struct GpuInfo {
  int index = 0;           // CUDA device index in this process
  std::string name;        // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;  // "0000:1B:00.0" (cudaDeviceGetPCIBusId)
  std::string uuid;        // "GPU-8f5c..." (cudaDeviceProp::uuid, formatted as nvidia-smi does)
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t l2_bytes = 0;
  size_t memory_bytes = 0;
};

struct GpuVersions {
  std::string cuda_runtime, cublas, nccl, cuda_architectures;
};

// Medians (seconds) of one pass timed by CUPTI's kernel records and by CUDA events at once. The
// two timers over the same runs should agree to launch-gap noise; passes apart they need not (an
// H100 at its power limit ran a bf16 8192^3 GEMM 10% faster in a pass after a pause than in the
// sweep, 2026-11-25, docs/CALIBRATION.md).
struct CuptiCheck {
  double cupti_median_s = 0;
  double events_median_s = 0;
};

// The contention sweep of one GPU (docs/CALIBRATION.md "Contention"; hardware.proto
// ComputeContention): each bf16 GEMM shape timed alone, then beside a communication-shaped kernel
// (kernels/comm_like.h) of each CTA count, with cuBLASLt's default kernel and, where
// `with_sm_count_target`, with the GEMM sized for the SMs left.
struct ContentionPlan {
  std::vector<GemmShape> shapes;
  std::vector<int> ctas;
  int threads_per_cta = 544;
  double target_bytes_per_s = 0;  // copied by the competitor's CTAs together
  bool with_sm_count_target = true;
  // The competitor's thread-block cluster sizes, each swept (kernels/comm_like.h; 1: none).
  std::vector<int> cluster_sizes = {1};
};

// The sample of one variant of the contention sweep with what describes it: compute "gemm",
// `dtype`, the shape, the competitor's CTAs, threads per CTA, target bytes/s, cluster size and
// whether the GEMM was sized for the SMs left. The bench adds the times (fits.h
// SetContentionTimes) and the competitor's achieved rate, or the error of a refused variant.
inline v1::ContentionSample ContentionVariant(const ContentionPlan& plan, const GemmShape& shape, v1::DType dtype,
                                              int ctas, int cluster, bool sm_count_target) {
  v1::ContentionSample c;
  c.set_compute("gemm");
  c.set_dtype(dtype);
  c.set_m(shape.m);
  c.set_n(shape.n);
  c.set_k(shape.k);
  c.set_ctas(ctas);
  c.set_threads_per_cta(plan.threads_per_cta);
  c.set_target_bytes_per_s(plan.target_bytes_per_s);
  c.set_cluster_size(cluster);
  c.set_sm_count_target(sm_count_target);
  return c;
}

// The host-call pass's batches (GpuSystem::BenchHostCalls): 30 timed batches of 64 calls, after 2
// untimed ones. 64 launches stay far below a CUDA launch queue's depth (about a thousand), so no
// call in a batch waits for the queue to drain.
inline constexpr int kHostCallBatches = 30;
inline constexpr int kHostCallsPerBatch = 64;

class GpuSystem {
 public:
  virtual ~GpuSystem() = default;
  // Every visible GPU. FailedPrecondition naming the CUDA error when there is no device or driver.
  virtual absl::StatusOr<std::vector<GpuInfo>> ListGpus() = 0;
  virtual GpuVersions Versions() = 0;
  // A large bf16 GEMM back to back for `seconds`, so that the sweep measures a GPU at its
  // sustained clocks, not a cold one at boost (mamf-finder warms the accelerator for 30 s).
  virtual absl::Status Warmup(const GpuInfo& gpu, double seconds) = 0;
  // One GEMM of `shape` in `dtype` with RunFor(dtype, shape)'s layout: fastest of the heuristic's
  // top algorithms, random inputs, L2 flushed before every timed run, CUDA events per run (CUPTI
  // off), the result verified. Fills time, rates, m/n/k, dtype, layout, what, fast_accum; the
  // flow fills gpu_id and conditions.
  virtual absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& gpu, DType dtype, const GemmShape& shape,
                                                   const BenchOptions& options) = 0;
  // copy, triad, h2d_pinned, d2h_pinned.
  virtual absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& gpu, const BenchOptions& options) = 0;
  // The CUPTI cross-check of one GEMM / the HBM copy, in a pass of its own after the timed sweep:
  // CUPTI's kernel times and the CUDA-event times of the same runs. Unavailable when CUPTI cannot
  // be used (the reason).
  virtual absl::StatusOr<CuptiCheck> CuptiGemmCheck(const GpuInfo& gpu, DType dtype, const GemmShape& shape) = 0;
  virtual absl::StatusOr<CuptiCheck> CuptiHbmCopyCheck(const GpuInfo& gpu) = 0;
  // The contention sweep (ContentionPlan): one sample per (shape, CTA count, cluster size, SM
  // target or not).
  // Errors: CUDA / cuBLASLt failures, the competitor not resident within a second, its timeout.
  virtual absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo& gpu,
                                                                            const ContentionPlan& plan,
                                                                            const BenchOptions& options) = 0;
  // The host-call pass (docs/CALIBRATION.md "Host calls"): the host's seconds per call of an
  // empty kernel's launch and of a GEMM issued as Transformer Engine's cublas_gemm issues one per
  // expert (bf16; fp8 too on compute capability 8.9+), each timed on the host's steady clock over
  // batches of back-to-back calls with the device synchronised between batches. Fills call, dtype,
  // shape, calls_per_batch and time; the flow fills gpu_id and conditions. Errors: CUDA or
  // cuBLASLt failures (no algorithm for the shape), each naming the call.
  virtual absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo& gpu,
                                                                         const BenchOptions& options) = 0;
  // Collectives between this process's GPUs (one process, every local GPU).
  virtual absl::StatusOr<std::unique_ptr<CollectiveBackend>> LocalCollectives(const std::vector<GpuInfo>& gpus,
                                                                              double max_bytes, double timeout_s) = 0;
  // Collectives with one GPU per rank of `comm` (bootstrapped through it).
  virtual absl::StatusOr<std::unique_ptr<CollectiveBackend>> RankCollectives(const GpuInfo& gpu, Communicator& comm,
                                                                             double max_bytes, double timeout_s) = 0;
};

// The GpuSystem of this build: CUDA's when the toolkit was found, else one that says so.
std::unique_ptr<GpuSystem> MakeGpuSystem();

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_GPU_SYSTEM_H_
