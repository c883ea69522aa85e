// The GpuSystem of a CUDA build: calibrate/gpu_bench.cc (cuBLASLt, our kernels), CUPTI
// (calibrate/cupti_timer.cc) and NCCL (calibrate/nccl_backend.cc, dlopen'ed).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "calibrate/cupti_timer.h"
#include "calibrate/gpu_bench.h"
#include "calibrate/gpu_system.h"
#include "calibrate/nccl_backend.h"

#ifndef STEPCAST_CUDA_ARCHITECTURES
#define STEPCAST_CUDA_ARCHITECTURES ""
#endif

namespace stepcast::calibrate {
namespace {

class CudaGpuSystem final : public GpuSystem {
 public:
  absl::StatusOr<std::vector<GpuInfo>> ListGpus() override { return ListCudaGpus(); }
  GpuVersions Versions() override {
    GpuVersions v;
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess) v.cuda_runtime = absl::StrCat(rt / 1000, ".", (rt % 1000) / 10);
    v.cublas = absl::StrCat(cublasLtGetVersion());
    v.nccl = NcclVersion();
    v.cuda_architectures = STEPCAST_CUDA_ARCHITECTURES;
    return v;
  }
  absl::Status Warmup(const GpuInfo& gpu, double seconds) override { return SustainedWarmup(gpu, seconds); }
  absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& gpu, DType d, const GemmShape& sh,
                                           const BenchOptions& o) override {
    return calibrate::BenchGemm(gpu, d, sh, o, nullptr);
  }
  absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& gpu, const BenchOptions& o) override {
    return calibrate::BenchHbm(gpu, o);
  }
  absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo& gpu, const ContentionPlan& plan,
                                                                    const BenchOptions& o) override {
    return calibrate::BenchContention(gpu, plan, o);
  }
  absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo& gpu, const BenchOptions& o) override {
    return calibrate::BenchHostCalls(gpu, o);
  }
  absl::StatusOr<CuptiCheck> CuptiGemmCheck(const GpuInfo& gpu, DType d, const GemmShape& sh) override {
    std::lock_guard<std::mutex> l(cupti_mu_);  // CUPTI activity is process-wide: one window at a time
    CuptiTimer& c = Cupti();
    if (!c.enabled()) return absl::UnavailableError(c.why_disabled());
    absl::StatusOr<v1::GemmSample> s = calibrate::BenchGemm(gpu, d, sh, BenchOptions{}, &c);
    if (!s.ok()) return s.status();
    return CuptiCheck{s->cupti_median_s(), s->time().median_s()};
  }
  absl::StatusOr<CuptiCheck> CuptiHbmCopyCheck(const GpuInfo& gpu) override {
    std::lock_guard<std::mutex> l(cupti_mu_);
    return CuptiHbmCopy(gpu, BenchOptions{}, Cupti());
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> LocalCollectives(const std::vector<GpuInfo>& gpus, double max_bytes,
                                                                      double timeout_s) override {
    std::vector<int> ids;
    for (const auto& g : gpus) ids.push_back(g.index);
    return MakeNcclLocalBackend(ids, max_bytes, timeout_s);
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> RankCollectives(const GpuInfo& gpu, Communicator& comm,
                                                                     double max_bytes, double timeout_s) override {
    return MakeNcclRankBackend(gpu.index, comm, max_bytes, timeout_s);
  }

 private:
  CuptiTimer& Cupti() {
    if (!cupti_) cupti_ = std::make_unique<CuptiTimer>();
    return *cupti_;
  }
  std::mutex cupti_mu_;
  std::unique_ptr<CuptiTimer> cupti_;
};

}  // namespace

std::unique_ptr<GpuSystem> MakeGpuSystem() { return std::make_unique<CudaGpuSystem>(); }

}  // namespace stepcast::calibrate
