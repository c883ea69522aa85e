// The GpuSystem of a build without the CUDA toolkit: stepcast-calibrate still builds and its
// `import` runs; measuring says why it cannot (exit 2).
#include "calibrate/gpu_system.h"

namespace stepcast::calibrate {
namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "no usable CUDA device: this stepcast-calibrate was built without the CUDA toolkit; only "
      "`stepcast-calibrate import` works (rebuild where nvcc, cuBLASLt and CUPTI are found to measure)");
}

class NoCudaGpuSystem final : public GpuSystem {
 public:
  absl::StatusOr<std::vector<GpuInfo>> ListGpus() override { return NoCuda(); }
  GpuVersions Versions() override { return {}; }
  absl::Status Warmup(const GpuInfo&, double) override { return NoCuda(); }
  absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo&, DType, const GemmShape&, const BenchOptions&) override {
    return NoCuda();
  }
  absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo&, const BenchOptions&) override { return NoCuda(); }
  absl::StatusOr<CuptiCheck> CuptiGemmCheck(const GpuInfo&, DType, const GemmShape&) override { return NoCuda(); }
  absl::StatusOr<CuptiCheck> CuptiHbmCopyCheck(const GpuInfo&) override { return NoCuda(); }
  absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo&, const ContentionPlan&,
                                                                    const BenchOptions&) override {
    return NoCuda();
  }
  absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo&, const BenchOptions&) override {
    return NoCuda();
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> LocalCollectives(const std::vector<GpuInfo>&, double,
                                                                      double) override {
    return NoCuda();
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> RankCollectives(const GpuInfo&, Communicator&, double,
                                                                     double) override {
    return NoCuda();
  }
};

}  // namespace

std::unique_ptr<GpuSystem> MakeGpuSystem() { return std::make_unique<NoCudaGpuSystem>(); }

}  // namespace stepcast::calibrate
