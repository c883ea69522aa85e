// Fakes of stepcast-calibrate's GPU side for the CPU tests: a GpuSystem whose GPUs have known
// rates (some slow, some failing) and a CollectiveBackend with a known alpha-beta cost, so that the
// flow's exit codes, straggler naming, MPI gathering and profile writing are checked against
// numbers worked by hand.
#ifndef STEPCAST_TESTS_CALIBRATE_FAKES_H_
#define STEPCAST_TESTS_CALIBRATE_FAKES_H_

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "calibrate/collective_check.h"
#include "calibrate/fits.h"
#include "calibrate/gpu_system.h"
#include "proto/codec.h"

namespace stepcast::calibrate::testing {

struct FakeConfig {
  int gpus = 4;
  std::string name = "NVIDIA H100 80GB HBM3";
  int cc_major = 9, cc_minor = 0;
  bool no_gpu = false;
  double r_max_flops_per_s = 700e12;  // GEMM rate = r_max F / (F + f_half), F = 2mnk
  double f_half_flops = 2e9;
  double hbm_bytes_per_s = 3.0e12;
  std::map<int, double> gemm_scale, hbm_scale;  // CUDA index -> rate multiplier
  std::set<int> fail_gemm, fail_hbm, fail_contention, fail_host;
  // Host calls: seconds per call of the host-call pass's launch and GEMM call (bf16; fp8 x
  // host_fp8_factor), the GPU at CUDA index i x (1 + i / 10): the slowest GPU is the last.
  double host_launch_call_s = 4e-6, host_gemm_call_s = 11e-6, host_fp8_factor = 1.2;
  // Contention: a GEMM of m rows beside c CTAs in clusters of l takes (1 + contention_per_cta x c
  // x 8192 / m x the GPU's contention_scale / l) its time alone; with the SM target c / (SMs - c).
  double contention_per_cta = 0.01;
  bool refuse_clusters = false;  // the competitor's clusters refused (a sample with its error)
  std::map<int, double> contention_scale;
  double coll_alpha_s = 10e-6, coll_busbw_bytes_per_s = 300e9;
  double coll_fail_at_bytes = 0;  // the local backend's Check fails from this size on (0: never)
  bool cupti = true;
  double cupti_pass_scale = 1.0, cupti_event_gap = 0.0;
  int* aborted = nullptr;  // counts CollectiveBackend::Abort calls
};

class FakeBackend final : public CollectiveBackend {
 public:
  FakeBackend(const FakeConfig& c, int ranks, int local, Scope scope = Scope::kIntraNode)
      : c_(c), ranks_(ranks), local_(local), scope_(scope) {}
  std::string name() const override { return "fake"; }
  int ranks() const override { return ranks_; }
  int local_gpus() const override { return local_; }
  Scope scope() const override { return scope_; }
  double max_bytes() const override { return 1e12; }
  absl::Status Check(Collective, double size, int) override {
    if (c_.coll_fail_at_bytes > 0 && size >= c_.coll_fail_at_bytes) {
      return absl::DataLossError("GPU 1: all_reduce element 0 is nan, not 4");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::vector<double>>> TimeBatches(Collective c, double size, int, int, int batches) override {
    // GPU g of this process takes (1 + g/100) x the alpha-beta time: average and max differ.
    std::vector<std::vector<double>> out(local_);
    const double t = c_.coll_alpha_s + size * BusBwFactor(c, ranks_) / c_.coll_busbw_bytes_per_s;
    for (int g = 0; g < local_; ++g) out[g].assign(batches, t * (1 + g / 100.0));
    return out;
  }
  void Abort() override {
    if (c_.aborted) ++*c_.aborted;
  }

 private:
  FakeConfig c_;
  int ranks_, local_;
  Scope scope_;
};

class FakeGpuSystem final : public GpuSystem {
 public:
  explicit FakeGpuSystem(FakeConfig c) : c_(std::move(c)) {}
  absl::StatusOr<std::vector<GpuInfo>> ListGpus() override {
    if (c_.no_gpu) return absl::FailedPreconditionError("no usable CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)");
    std::vector<GpuInfo> out;
    for (int i = 0; i < c_.gpus; ++i) {
      GpuInfo g;
      g.index = i;
      g.name = c_.name;
      g.pci_bus_id = absl::StrFormat("0000:%02X:00.0", 0x18 + 0x10 * i);
      g.uuid = absl::StrFormat("GPU-0000000%d-1111-2222-3333-444444444444", i);
      g.cc_major = c_.cc_major;
      g.cc_minor = c_.cc_minor;
      g.sm_count = 132;
      g.l2_bytes = 50 << 20;
      g.memory_bytes = 80ull << 30;
      out.push_back(g);
    }
    return out;
  }
  GpuVersions Versions() override { return {"13.0", "130000", "2.27.3", "80-real;89-real;90-real;100"}; }
  absl::Status Warmup(const GpuInfo&, double) override { return absl::OkStatus(); }
  absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& g, DType d, const GemmShape& sh, const BenchOptions&) override {
    if (c_.fail_gemm.count(g.index)) return absl::InternalError("fill A: no kernel image is available for execution on the device");
    if (d == DType::kFP8 && !(g.cc_major > 8 || (g.cc_major == 8 && g.cc_minor >= 9))) {
      return absl::FailedPreconditionError("fp8 GEMMs need compute capability 8.9+");
    }
    const double f = 2.0 * sh.m * sh.n * sh.k;
    const double scale = c_.gemm_scale.count(g.index) ? c_.gemm_scale.at(g.index) : 1.0;
    const double rate = c_.r_max_flops_per_s * scale * f / (f + c_.f_half_flops) * (d == DType::kFP8 ? 2 : 1);
    v1::GemmSample s;
    s.set_gpu(g.index);
    s.set_dtype(DTypeToProto(d));
    s.set_m(sh.m);
    s.set_n(sh.n);
    s.set_k(sh.k);
    s.set_layout(GemmLayoutName(RunFor(d, sh).layout));
    s.set_what(sh.what);
    *s.mutable_time() = Summarize({f / rate, f / rate * 1.01, f / rate * 0.99});
    s.set_median_flops_per_s(f / s.time().median_s());
    s.set_best_flops_per_s(f / s.time().best_s());
    return s;
  }
  absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& g, const BenchOptions&) override {
    if (c_.fail_hbm.count(g.index)) return absl::InternalError("cudaMalloc: out of memory");
    const double scale = c_.hbm_scale.count(g.index) ? c_.hbm_scale.at(g.index) : 1.0;
    std::vector<v1::HbmSample> out;
    for (const char* k : {"copy", "triad"}) {
      v1::HbmSample s;
      s.set_gpu(g.index);
      s.set_kernel(k);
      s.set_bytes(1e9);
      *s.mutable_time() = Summarize({1e9 / (c_.hbm_bytes_per_s * scale)});
      s.set_median_bytes_per_s(c_.hbm_bytes_per_s * scale);
      s.set_best_bytes_per_s(c_.hbm_bytes_per_s * scale);
      out.push_back(s);
    }
    return out;
  }
  absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo& g, const ContentionPlan& plan,
                                                                    const BenchOptions&) override {
    if (c_.fail_contention.count(g.index)) return absl::InternalError("communication-shaped kernel: out of memory");
    const double scale = c_.contention_scale.count(g.index) ? c_.contention_scale.at(g.index) : 1.0;
    std::vector<v1::ContentionSample> out;
    for (const GemmShape& sh : plan.shapes) {
      const double alone = 2.0 * sh.m * sh.n * sh.k / c_.r_max_flops_per_s;
      for (int ctas : plan.ctas) {
        for (int cluster : plan.cluster_sizes) {
          for (bool target : {false, true}) {
            const double s = target ? static_cast<double>(ctas) / (g.sm_count - ctas)
                                    : c_.contention_per_cta * ctas * 8192.0 / sh.m * scale / cluster;
            v1::ContentionSample c = ContentionVariant(plan, sh, v1::D_TYPE_BF16, ctas, cluster, target);
            if (cluster > 1 && c_.refuse_clusters) {
              *c.mutable_alone() = Summarize({alone});
              c.set_error("communication-shaped kernel: cluster misconfiguration");
              out.push_back(c);
              continue;
            }
            c.set_achieved_bytes_per_s(plan.target_bytes_per_s * 0.99);
            SetContentionTimes({alone}, {alone * (1 + s)}, &c);
            out.push_back(c);
          }
        }
      }
    }
    return out;
  }
  absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo& g, const BenchOptions&) override {
    if (c_.fail_host.count(g.index)) return absl::InternalError("cublaslt_gemm_call bf16: cuBLASLt status 15");
    const double scale = 1 + g.index / 10.0;
    std::vector<v1::HostCallSample> out;
    auto add = [&](const char* call, v1::DType dtype, double s) {
      v1::HostCallSample x;
      x.set_call(call);
      x.set_dtype(dtype);
      x.set_calls_per_batch(kHostCallsPerBatch);
      *x.mutable_time() = Summarize({s * scale, s * scale * 1.02, s * scale * 0.98});
      out.push_back(x);
    };
    add("kernel_launch", v1::D_TYPE_UNSPECIFIED, c_.host_launch_call_s);
    add("cublaslt_gemm_call", v1::D_TYPE_BF16, c_.host_gemm_call_s);
    if (g.cc_major > 8 || (g.cc_major == 8 && g.cc_minor >= 9)) {
      add("cublaslt_gemm_call", v1::D_TYPE_FP8, c_.host_gemm_call_s * c_.host_fp8_factor);
    }
    return out;
  }
  // The CUPTI pass: its events take cupti_pass_scale x the sweep's time (another power state), its
  // CUPTI kernel times (1 - cupti_event_gap) x its events.
  absl::StatusOr<CuptiCheck> CuptiGemmCheck(const GpuInfo& g, DType d, const GemmShape& sh) override {
    if (!c_.cupti) return absl::UnavailableError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    absl::StatusOr<v1::GemmSample> s = BenchGemm(g, d, sh, {});
    if (!s.ok()) return s.status();
    const double events = s->time().median_s() * c_.cupti_pass_scale;
    return CuptiCheck{events * (1 - c_.cupti_event_gap), events};
  }
  absl::StatusOr<CuptiCheck> CuptiHbmCopyCheck(const GpuInfo&) override {
    if (!c_.cupti) return absl::UnavailableError("CUPTI unavailable");
    const double events = 1e9 / c_.hbm_bytes_per_s * c_.cupti_pass_scale;
    return CuptiCheck{events * (1 - c_.cupti_event_gap), events};
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> LocalCollectives(const std::vector<GpuInfo>& g, double,
                                                                      double) override {
    return std::unique_ptr<CollectiveBackend>(new FakeBackend(c_, static_cast<int>(g.size()), static_cast<int>(g.size())));
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> RankCollectives(const GpuInfo&, Communicator& comm, double,
                                                                     double) override {
    // As the NCCL backend: across nodes when the communicator spans several hosts.
    return std::unique_ptr<CollectiveBackend>(
        new FakeBackend(c_, comm.size(), 1, comm.hosts() > 1 ? Scope::kInterNode : Scope::kIntraNode));
  }

 private:
  FakeConfig c_;
};

}  // namespace stepcast::calibrate::testing

#endif  // STEPCAST_TESTS_CALIBRATE_FAKES_H_
