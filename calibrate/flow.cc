#include "calibrate/flow.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "calibrate/fits.h"
#include "calibrate/import.h"
#include "calibrate/nvml.h"
#include "google/protobuf/util/time_util.h"
#include "proto/codec.h"

extern char** environ;

namespace stepcast::calibrate {
namespace {

struct Injection {
  int rank = -1;
  std::string what;  // collective, hang, gemm, hbm, list
  double size_bytes = 0;
};

absl::StatusOr<Injection> ParseInjection(const std::string& s) {
  Injection in;
  if (s.empty()) return in;
  std::vector<std::string> p = absl::StrSplit(s, ':');
  if (p.size() < 2 || p.size() > 3 || !absl::SimpleAtoi(p[0], &in.rank) ||
      !(p[1] == "collective" || p[1] == "hang" || p[1] == "gemm" || p[1] == "hbm" || p[1] == "contention" || p[1] == "host" ||
        p[1] == "list") ||
      (p.size() == 3 && !absl::SimpleAtod(p[2], &in.size_bytes))) {
    return absl::InvalidArgumentError(absl::StrCat("--inject-failure: '", s,
                                                   "' is not RANK:WHAT[:SIZE] with WHAT collective, hang, gemm, hbm, contention, host or list"));
  }
  in.what = p[1];
  return in;
}

// The GPU system with the test hook's failures on one rank.
class InjectingGpuSystem final : public GpuSystem {
 public:
  InjectingGpuSystem(GpuSystem& inner, const Injection& in, int rank) : inner_(inner), in_(in), me_(in.rank == rank) {}
  absl::StatusOr<std::vector<GpuInfo>> ListGpus() override {
    if (me_ && in_.what == "list") return absl::FailedPreconditionError("no usable CUDA device (injected failure)");
    return inner_.ListGpus();
  }
  GpuVersions Versions() override { return inner_.Versions(); }
  absl::Status Warmup(const GpuInfo& g, double s) override { return inner_.Warmup(g, s); }
  absl::StatusOr<v1::GemmSample> BenchGemm(const GpuInfo& g, DType d, const GemmShape& sh, const BenchOptions& o) override {
    if (me_ && in_.what == "gemm") return absl::InternalError("injected failure");
    return inner_.BenchGemm(g, d, sh, o);
  }
  absl::StatusOr<std::vector<v1::HbmSample>> BenchHbm(const GpuInfo& g, const BenchOptions& o) override {
    if (me_ && in_.what == "hbm") return absl::InternalError("injected failure");
    return inner_.BenchHbm(g, o);
  }
  absl::StatusOr<CuptiCheck> CuptiGemmCheck(const GpuInfo& g, DType d, const GemmShape& sh) override {
    return inner_.CuptiGemmCheck(g, d, sh);
  }
  absl::StatusOr<CuptiCheck> CuptiHbmCopyCheck(const GpuInfo& g) override { return inner_.CuptiHbmCopyCheck(g); }
  absl::StatusOr<std::vector<v1::ContentionSample>> BenchContention(const GpuInfo& g, const ContentionPlan& p,
                                                                    const BenchOptions& o) override {
    if (me_ && in_.what == "contention") return absl::InternalError("injected failure");
    return inner_.BenchContention(g, p, o);
  }
  absl::StatusOr<std::vector<v1::HostCallSample>> BenchHostCalls(const GpuInfo& g, const BenchOptions& o) override {
    if (me_ && in_.what == "host") return absl::InternalError("injected failure");
    return inner_.BenchHostCalls(g, o);
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> LocalCollectives(const std::vector<GpuInfo>& g, double m,
                                                                      double t) override {
    return inner_.LocalCollectives(g, m, t);
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> RankCollectives(const GpuInfo& g, Communicator& c, double m,
                                                                     double t) override {
    return inner_.RankCollectives(g, c, m, t);
  }

 private:
  GpuSystem& inner_;
  Injection in_;
  bool me_;
};

// Ends the job when nothing has progressed for `timeout_s` (a hung kernel, driver or peer).
class Watchdog {
 public:
  Watchdog(Communicator& comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
    Beat("start");
    thread_ = std::thread([this] { Loop(); });
  }
  ~Watchdog() {
    stop_ = true;
    thread_.join();
  }
  void Beat(const std::string& stage) {
    std::lock_guard<std::mutex> l(mu_);
    stage_ = stage;
    last_ = std::chrono::steady_clock::now();
  }

 private:
  void Loop() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::string stage;
      double idle = 0;
      {
        std::lock_guard<std::mutex> l(mu_);
        idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
        stage = stage_;
      }
      if (idle > timeout_s_) {
        comm_.Abort(kExitTimeout, absl::StrFormat("no progress for %.0f s (3 x --timeout-s) in %s", idle, stage));
      }
    }
  }
  Communicator& comm_;
  double timeout_s_;
  std::mutex mu_;
  std::string stage_;
  std::chrono::steady_clock::time_point last_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

absl::StatusOr<std::vector<int>> ParseGpuList(const std::string& s) {
  std::vector<int> out;
  if (s.empty()) return out;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int id = 0;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--gpus: '", part, "' is not a GPU index (want e.g. 0,1,2)"));
    }
    out.push_back(id);
  }
  return out;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string GpuName(const v1::GpuId& id) {
  return absl::StrFormat("GPU %d (%s, %s%s)", id.index(), id.pci_bus_id().empty() ? "bus id ?" : id.pci_bus_id(),
                         id.uuid().empty() ? "uuid ?" : id.uuid(), id.host().empty() ? "" : " on " + id.host());
}

bool Fp8Capable(const GpuInfo& g) { return g.cc_major > 8 || (g.cc_major == 8 && g.cc_minor >= 9); }

// Runs f(i) for every i on its own thread.
template <typename F>
void ForEachConcurrently(size_t n, F f) {
  std::vector<std::thread> t;
  for (size_t i = 0; i < n; ++i) t.emplace_back([&f, i] { f(i); });
  for (auto& x : t) x.join();
}

// The per-run overhead of CUDA-event timing on each GPU (review 2 N10: 10.3 us by events where
// CUPTI's kernel time is 7.1 us at bf16 1024^3 on the H200 run, 27.5 vs 24.4 at 2048^3: an additive
// ~3 us): the median of events - CUPTI over the same runs of the GPU's CUPTI-checked GEMMs, by GPU
// name; GPUs without a positive overhead are left out. The GEMM model's per-kernel floor and its
// table are kernel durations (trace / CUPTI times, core/gemm_model.h), so the profile's points are
// too.
std::map<std::string, double> EventOverheadByGpu(const v1::CalibrationRun& run) {
  std::map<std::string, std::vector<double>> gaps;
  for (const auto& s : run.gemm()) {
    if (s.cupti_median_s() > 0 && s.cupti_events_median_s() > 0) {
      gaps[GpuName(s.gpu_id())].push_back(s.cupti_events_median_s() - s.cupti_median_s());
    }
  }
  std::map<std::string, double> out;
  for (auto& [gpu, v] : gaps) {
    std::sort(v.begin(), v.end());
    const double median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    if (median > 0) out[gpu] = median;
  }
  return out;
}

// A GEMM sample's rate with its GPU's event overhead taken out of its median time (never below
// half the time: an overhead that large is a broken cross-check, not a kernel time).
double KernelFlopsPerS(const v1::GemmSample& s, const std::map<std::string, double>& overhead_s) {
  const double rate = s.median_flops_per_s();
  auto it = overhead_s.find(GpuName(s.gpu_id()));
  if (it == overhead_s.end() || !(rate > 0)) return rate;
  const double flops = 2.0 * static_cast<double>(s.m()) * static_cast<double>(s.n()) * static_cast<double>(s.k());
  const double t = flops / rate;
  return flops / std::max(t - it->second, 0.5 * t);
}

// The contention sweep's CTA counts of the competitor (docs/CALIBRATION.md "Contention"), one CTA
// per SM held. NCCL: a ring all-gather / reduce-scatter inside an 8-GPU Hopper NVSwitch node runs
// 24 channels, one CTA each (NCCL_DEBUG=INFO of 8 x H100: "24 coll channels", NVIDIA/nccl#1906
// "Algo RING ... channel{Lo..Hi}={0..23}", an H100 trace of the ring kernel with grid 24 in
// NVIDIA/Fuser#4627; src/graph/search.cc and connect.cc double the search's 6 channels twice), of
// 544 threads (NCCL_SIMPLE_MAX_NTHREADS 512 + a sync warp) and 82,240 B of dynamic shared memory
// with 96 registers a thread, so no GEMM CTA shares its SM. DeepEP: deep_ep/buffer.py
// `Buffer.num_sms = 20` (Megatron-Core's `moe_deepep_num_sms = 20`). 8, 16 (NVLS's
// NCCL_NVLS_NCHANNELS on sm90) and 32 (NCCL's p2p channels: all-to-all) complete the curve.
// The profile's "nccl" and "deepep" figures are read at 24 and 20.
constexpr int kNcclCollectiveCtas = 24;
constexpr int kDeepEpCtas = 20;
constexpr int kNcclThreadsPerCta = 544;
// NCCL launches its kernels in thread-block clusters of 4 on sm_90+ (NCCL_CGA_CLUSTER_SIZE's
// default; src/init.cc). DeepEP's are swept without clusters (not checked).
constexpr int kNcclClusterSize = 4;

// The sweep: three bf16 GEMMs (a square at the profile's reference shape, a smaller square, a
// flat one of a TP-sharded layer), competitors of 8, 16, 20, 24 and 32 CTAs of 544 threads,
// copying at the reference profile's fastest intra-node all-gather bus
// bandwidth (the rate an NCCL collective moves data through each GPU), or 360 GB/s (the H100
// all-gather busbw of nccl-tests, docs/CALIBRATION.md) where the reference has none.
ContentionPlan PlanContention(const RateProfile& ref) {
  ContentionPlan p;
  p.shapes = {{8192, 8192, 8192, GemmPass::kSquare, "contention 8192^3"},
              {4096, 4096, 4096, GemmPass::kSquare, "contention 4096^3"},
              {8192, 4096, 2048, GemmPass::kForward, "contention 8192x4096x2048"}};
  p.ctas = {8, 16, kDeepEpCtas, kNcclCollectiveCtas, 32};
  p.threads_per_cta = kNcclThreadsPerCta;
  p.cluster_sizes = {1, kNcclClusterSize};
  for (const CollectiveRate& c : ref.collectives) {
    if (c.collective == Collective::kAllGather && c.scope == Scope::kIntraNode) {
      p.target_bytes_per_s = std::max(p.target_bytes_per_s, c.busbw_bytes_per_s);
    }
  }
  if (p.target_bytes_per_s <= 0) p.target_bytes_per_s = 360e9;
  return p;
}

// The profile's contention (hardware.proto ComputeContention): GEMM beside NCCL and beside
// DeepEP, each the median over the swept shapes of the slowest GPU's slowdown at that
// communication's CTA count, with cuBLASLt's default kernel (no SM target: PyTorch and Megatron's
// DP / FSDP overlap run their GEMMs so). Never below 0 (a GEMM is not faster beside work that
// takes its SMs: a negative median is noise). Every pair not measured keeps the reference
// profile's figure, marked so.
std::vector<RateProfile::Contention> ContentionOf(const v1::CalibrationRun& run, const RateProfile& ref) {
  std::vector<RateProfile::Contention> out;
  struct Footprint {
    const char* communication;
    int ctas, cluster;
  };
  for (const Footprint& f : {Footprint{"nccl", kNcclCollectiveCtas, kNcclClusterSize}, Footprint{"deepep", kDeepEpCtas, 1}}) {
    const char* communication = f.communication;
    const int ctas = f.ctas;
    // The footprint's cluster size where the GPU ran it (sm_90+), else without clusters.
    int cluster = 1;
    for (const auto& c : run.contention()) {
      if (c.ctas() == ctas && c.cluster_size() == f.cluster && c.error().empty()) cluster = f.cluster;
    }
    std::map<std::tuple<int64_t, int64_t, int64_t>, double> slowest;  // per shape, over GPUs
    std::set<std::string> gpus;
    double target = 0, achieved = 1e300;
    for (const auto& c : run.contention()) {
      if (c.compute() != "gemm" || c.ctas() != ctas || c.sm_count_target() || std::max(1, c.cluster_size()) != cluster ||
          !c.error().empty()) {
        continue;
      }
      auto [it, fresh] = slowest.try_emplace({c.m(), c.n(), c.k()}, c.slowdown());
      if (!fresh) it->second = std::max(it->second, c.slowdown());
      gpus.insert(GpuName(c.gpu_id()));
      target = c.target_bytes_per_s();
      achieved = std::min(achieved, c.achieved_bytes_per_s());
    }
    if (slowest.empty()) continue;
    std::vector<double> v;
    for (const auto& [shape, x] : slowest) v.push_back(x);
    const double median = Summarize(v).median_s();
    RateProfile::Contention c;
    c.compute = "gemm";
    c.communication = communication;
    c.slowdown = std::max(0.0, median);
    c.samples = static_cast<int64_t>(v.size() * gpus.size());
    c.source = absl::StrFormat(
        "stepcast-calibrate contention sweep: bf16 GEMMs (%d shapes, median; slowest of %d GPUs) beside %d CTAs "
        "of 544 threads, one per SM, in clusters of %d, copying %.0f GB/s (achieved %.0f GB/s at least), the %s "
        "footprint (docs/CALIBRATION.md \"Contention\")",
        static_cast<int>(v.size()), static_cast<int>(gpus.size()), ctas, cluster, target / 1e9, achieved / 1e9,
        communication == std::string("nccl") ? "NCCL collective's" : "DeepEP dispatch/combine's");
    out.push_back(c);
  }
  for (const RateProfile::Contention& r : ref.contention) {
    bool measured = false;
    for (const auto& c : out) measured |= c.compute == r.compute && c.communication == r.communication;
    if (measured) continue;
    RateProfile::Contention x = r;
    x.source = "not measured; reference profile: " + r.source;
    out.push_back(x);
  }
  return out;
}

// The summary's contention lines: per GPU, shape and competitor cluster size, the GEMM alone and
// its slowdown beside each CTA count (with the SM target in brackets); then the profile's figures.
std::vector<std::string> DescribeContention(const v1::CalibrationRun& run) {
  std::vector<std::string> lines;
  std::map<std::pair<std::string, std::string>, std::string> by_shape;  // (gpu, shape) -> line
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& c : run.contention()) {
    const int cluster = std::max(1, c.cluster_size());
    const std::pair<std::string, std::string> key{
        GpuName(c.gpu_id()), absl::StrFormat("%dx%dx%d%s", c.m(), c.n(), c.k(),
                                             cluster > 1 ? absl::StrFormat(" (competitor in clusters of %d)", cluster) : "")};
    auto [it, fresh] = by_shape.try_emplace(key);
    if (fresh) {
      order.push_back(key);
      it->second = absl::StrFormat("contention %s bf16 %s on %s: alone %.3f ms;", key.second, c.compute(), key.first,
                                   c.alone().median_s() * 1e3);
    }
    if (!c.error().empty()) {
      it->second += absl::StrFormat(" %d CTAs%s not run: %s", c.ctas(), c.sm_count_target() ? " (SM target)" : "", c.error());
      continue;
    }
    it->second += c.sm_count_target() ? absl::StrFormat(" (SM target %+.1f%%)", 100 * c.slowdown())
                                      : absl::StrFormat(" %d CTAs %+.1f%%", c.ctas(), 100 * c.slowdown());
  }
  for (const auto& k : order) lines.push_back(by_shape[k]);
  for (const auto& c : run.profile().contention()) {
    if (absl::StartsWith(c.source(), "stepcast-calibrate")) {
      lines.push_back(absl::StrFormat("contention in the profile: %s beside %s %+.1f%%", c.compute(), c.communication(),
                                      100 * c.slowdown()));
    }
  }
  return lines;
}

// The rate profile from what was measured, the rest from the hardware's reference (marked).
v1::RateProfile BuildProfile(const v1::CalibrationRun& run, const Hardware& hw, const std::string& hardware,
                             const std::string& name, const std::vector<CollectiveRate>& measured) {
  const RateProfile& ref = hw.reference_profile;
  RateProfile p;
  p.name = name;
  p.hardware = hardware;
  // GEMM: per (dtype, m, n, k, layout) the slowest GPU's median; per (dtype, m, n, k) the time
  // average over layouts (forward and dgrad of one linear layer can share m, n, k; each runs once).
  std::map<std::tuple<int, int64_t, int64_t, int64_t, std::string>, std::pair<double, int>> slowest;
  std::set<std::string> gpus;
  const std::map<std::string, double> overhead_s = EventOverheadByGpu(run);
  for (const auto& s : run.gemm()) {
    auto& [rate, count] = slowest[{s.dtype(), s.m(), s.n(), s.k(), s.layout()}];
    const double kernel_rate = KernelFlopsPerS(s, overhead_s);
    rate = count == 0 ? kernel_rate : std::min(rate, kernel_rate);
    ++count;
    gpus.insert(GpuName(s.gpu_id()));
  }
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::vector<std::pair<std::string, double>>> by_shape;
  for (const auto& [k, v] : slowest) {
    const auto& [d, m, n, kk, layout] = k;
    by_shape[{d, m, n, kk}].push_back({layout, v.first});
  }
  std::set<int> measured_dtypes;
  for (const auto& [k, v] : by_shape) {
    const auto& [d, m, n, kk] = k;
    double inv = 0;
    std::vector<std::string> layouts;
    for (const auto& [l, r] : v) {
      inv += 1.0 / r;
      layouts.push_back(l);
    }
    GemmRatePoint g;
    g.dtype = DTypeFromProto(static_cast<v1::DType>(d));
    g.m = m;
    g.n = n;
    g.k = kk;
    g.flops_per_s = v.size() / inv;
    g.source = absl::StrFormat("stepcast-calibrate cuBLASLt %s, slowest of %d GPUs, median of its timed runs%s%s",
                               absl::StrJoin(layouts, "+"), gpus.size(),
                               v.size() > 1 ? " (time average over the layouts)" : "",
                               overhead_s.empty() ? "" : ", CUDA events less the GPU's event overhead (CUPTI)");
    g.origin = RateOrigin::kMeasured;
    measured_dtypes.insert(d);
    p.gemm.push_back(g);
  }
  for (const auto& g : ref.gemm) {
    if (measured_dtypes.count(DTypeToProto(g.dtype))) continue;
    GemmRatePoint x = g;
    x.source = "not measured; reference profile: " + g.source;
    x.origin = RateOrigin::kReference;
    p.gemm.push_back(x);
  }
  // Used only while fp8 has no measured shapes (the sweep's backward shapes carry it).
  p.fp8_split_accumulation_fraction = ref.fp8_split_accumulation_fraction;
  p.fp8_split_accumulation_source = ref.fp8_split_accumulation_source;
  // A reference whose compute rates only bound its part's from above (RateProfile::
  // compute_rate_low_fraction, e.g. the 500 W HBM2e H100): the bound stays for the rates taken from
  // it (origin reference: the attention rate, unswept dtypes); the measured GEMM points are the
  // part's own and are not scaled (core/interval.h ComputeRatesScaled).
  p.compute_rate_low_fraction = ref.compute_rate_low_fraction;
  if (ref.compute_rate_low_fraction > 0) {
    p.compute_rate_low_source = "not measured; reference profile: " + ref.compute_rate_low_source;
  }
  p.contention = ContentionOf(run, ref);
  // Host calls (docs/CALIBRATION.md "Host calls"): per call the slowest GPU's median (every rank
  // of a synchronous job waits for the slowest host); the GEMM call the slowest over the dtypes
  // measured (Transformer Engine's fp8 call sets up to five attributes more than bf16's).
  double launch_s = 0, gemm_s = 0;
  std::set<std::string> host_gpus;
  for (const auto& s : run.host_calls()) {
    double& slowest = s.call() == "kernel_launch" ? launch_s : gemm_s;
    slowest = std::max(slowest, s.time().median_s());
    host_gpus.insert(GpuName(s.gpu_id()));
  }
  if (launch_s > 0 && gemm_s > 0) {
    p.host_launch_call_s = launch_s;
    p.host_gemm_call_s = gemm_s;
    p.host_calls_source = absl::StrFormat(
        "stepcast-calibrate host-call pass: an empty kernel's launch and a cuBLASLt GEMM call as Transformer "
        "Engine's cublas_gemm issues one, host steady clock, slowest of %d GPUs, median of %d batches of %d calls",
        static_cast<int>(host_gpus.size()), kHostCallBatches, kHostCallsPerBatch);
  } else {
    p.host_launch_call_s = ref.host_launch_call_s;
    p.host_gemm_call_s = ref.host_gemm_call_s;
    if (!ref.host_calls_source.empty()) p.host_calls_source = "not measured; reference profile: " + ref.host_calls_source;
  }
  p.attention_flops_per_s = ref.attention_flops_per_s;
  p.attention_source = "not measured; reference profile: " + ref.attention_source;
  p.attention_origin = RateOrigin::kReference;
  double hbm = 0;
  int hbm_gpus = 0;
  for (const auto& s : run.hbm()) {
    if (s.kernel() != "copy") continue;
    hbm = hbm_gpus == 0 ? s.median_bytes_per_s() : std::min(hbm, s.median_bytes_per_s());
    ++hbm_gpus;
  }
  p.hbm_bandwidth_bytes_per_s = hbm > 0 ? hbm : ref.hbm_bandwidth_bytes_per_s;
  p.hbm_source = hbm > 0 ? absl::StrFormat("stepcast-calibrate copy kernel (read + write), slowest of %d GPUs, median",
                                           hbm_gpus)
                         : "not measured; reference profile: " + ref.hbm_source;
  p.hbm_origin = hbm > 0 ? RateOrigin::kMeasured : RateOrigin::kReference;
  std::vector<CollectiveRate> base = ref.collectives;
  for (auto& c : base) {
    c.source = "not measured; reference profile: " + c.source;
    c.origin = RateOrigin::kReference;
    for (auto& pt : c.points) pt.origin = RateOrigin::kReference;
  }
  std::vector<CollectiveRate> mine = measured;
  for (auto& c : mine) {
    c.origin = RateOrigin::kMeasured;
    for (auto& pt : c.points) pt.origin = RateOrigin::kMeasured;
  }
  p.collectives = MergeCollectives(base, mine);
  for (const auto& w : run.warnings()) p.notes.push_back(w);
  for (const auto& f : run.failures()) p.notes.push_back("failed: " + f);
  // Provenance (hardware.proto ProfileProvenance): the run's conditions as fields.
  const v1::CalibrationConditions& cond = run.conditions();
  ProfileProvenance& prov = p.provenance;
  prov.tool = "stepcast-calibrate";
  prov.tool_version = STEPCAST_VERSION;
  prov.created_utc = google::protobuf::util::TimeUtil::ToString(cond.time());
  prov.gpu_name = cond.gpu_name();
  prov.gpu_count = cond.gpu_count();
  std::set<std::string> hosts;
  for (const auto& g : cond.gpus()) {
    if (!g.host().empty()) hosts.insert(g.host());
  }
  if (hosts.empty() && !cond.host().empty()) hosts.insert(cond.host());
  prov.hosts.assign(hosts.begin(), hosts.end());
  prov.host_count = static_cast<int64_t>(hosts.size());
  prov.driver_version = cond.driver_version();
  prov.cuda_version = cond.cuda_runtime_version();
  prov.nccl_version = cond.nccl_version();
  prov.base = absl::StrCat("reference profile ", hardware);
  return RateProfileToProto(p);
}

}  // namespace

// The intra-node sweep of a multi-node --mpi run (gpu code review 2, N7): every host's ranks form
// a communicator of their own (Communicator::SplitByHost) and sweep the collectives over it at
// once; the hosts' samples are gathered to rank 0, which keeps per (collective, ranks, size) the
// slowest host's median (a synchronous job waits for its slowest node) and fits the curves. Every
// status is agreed over all ranks. The samples go into `run` (rank 0), the curves into `rates`.
static absl::Status MeasureInsideEachHost(GpuSystem& gpus, const GpuInfo& gpu, Communicator& comm, double max_bytes,
                                   double timeout_s, const SweepOptions& so, v1::CalibrationRun& run,
                                   std::vector<CollectiveRate>& rates) {
  absl::StatusOr<std::unique_ptr<Communicator>> node = comm.SplitByHost();
  if (absl::Status s = AgreeOnStatus(comm, node.ok() ? absl::OkStatus() : node.status()); !s.ok()) return s;
  std::unique_ptr<CollectiveBackend> b;
  absl::Status made;
  if ((*node)->size() >= 2) {
    absl::StatusOr<std::unique_ptr<CollectiveBackend>> x = gpus.RankCollectives(gpu, **node, max_bytes, timeout_s);
    if (x.ok()) b = *std::move(x); else made = x.status();
  }
  if (absl::Status s = AgreeOnStatus(comm, made); !s.ok()) {
    if (b) b->Abort();
    return s;
  }
  SweepOptions local = so;
  local.inject = {};  // the injected failure belongs to the job-wide sweep
  SweepResult r;
  if (b) r = Sweep(*b, **node, local);
  if (absl::Status s = AgreeOnStatus(comm, r.status); !s.ok()) return s;
  // Each host's first rank sends its host's samples; rank 0 keeps the slowest host per size.
  v1::CalibrationRun mine;
  if ((*node)->rank() == 0) {
    for (const auto& s : r.samples) *mine.add_collectives() = s;
  }
  absl::StatusOr<std::vector<std::string>> all = comm.Gather(mine.SerializeAsString(), 0);
  if (!all.ok()) return all.status();
  if (comm.rank() != 0) return absl::OkStatus();
  std::map<std::tuple<int, int, double>, v1::CollectiveSample> slowest;
  for (const std::string& bytes : *all) {
    v1::CalibrationRun other;
    if (!other.ParseFromString(bytes)) return absl::DataLossError("a host's intra-node samples");
    for (const auto& s : other.collectives()) {
      *run.add_collectives() = s;
      auto [it, fresh] = slowest.insert({{s.collective(), s.ranks(), s.size_bytes()}, s});
      if (!fresh && s.time().median_s() > it->second.time().median_s()) it->second = s;
    }
  }
  std::vector<v1::CollectiveSample> kept;
  for (const auto& [k, s] : slowest) kept.push_back(s);
  SweepFits fits = FitSweep(kept, 0);
  for (auto& f : fits.fits) *run.add_fits() = f;
  for (auto& rate : fits.rates) {
    rate.source = absl::StrCat(rate.source, "; inside each of ", comm.hosts(), " hosts, the slowest host's time per size");
    rates.push_back(std::move(rate));
  }
  return absl::OkStatus();
}

namespace {

// Prints an error on rank 0 only.
void SayError(const Communicator& comm, const std::string& s) {
  if (comm.rank() == 0) std::fprintf(stderr, "stepcast-calibrate: %s\n", s.c_str());
}

// Agrees on the exit code (the largest over the ranks) and finalizes the communicator.
int Finish(Communicator& comm, int code) {
  absl::StatusOr<int> agreed = AllreduceMaxInt(comm, code);
  comm.Finalize();
  return agreed.ok() ? *agreed : code;
}

// One measurement, from the GPUs picked to the summary printed; RunMeasure's steps are its
// member functions, in the order Run calls them. Each step that can end the run returns the
// exit code (already agreed over the ranks by Finish), or nullopt to go on.
struct Measurement {
  Measurement(const MeasureOptions& options, GpuSystem& real_gpus, Communicator& comm, const Catalog& catalog,
              const Injection& inj, std::vector<int> gpu_ids)
      : o(options),
        comm(comm),
        catalog(catalog),
        inj(inj),
        gpu_ids(std::move(gpu_ids)),
        me(comm.rank()),
        root(me == 0),
        gpus(real_gpus, inj, me),
        watchdog(comm, 3 * o.timeout_s),
        cond(*run.mutable_conditions()) {}

  int Run();

  // The steps, in order.
  std::optional<int> PickGpusAndHardware();  // 1. GPUs and the hardware preset
  std::optional<int> RecordConditions();     // 2. identity and conditions
  void WarmUp();                             // 3. sustained warm-up on every GPU at once
  std::optional<int> MeasureGemm();          // 4. GEMM sweep, CUPTI cross-check
  std::optional<int> MeasureHbm();           // 5. HBM kernels, CUPTI cross-check
  std::optional<int> MeasureContention();    //    GEMMs beside a communication-shaped kernel
  std::optional<int> MeasureHostCalls();     //    the host's time per launch and per GEMM call
  std::optional<int> GatherGpuConditions();  //    every rank's GPU conditions to rank 0
  void FindStragglersAndFitGemm();           //    rank 0: stragglers, GEMM rate by size
  void MeasureCollectives();                 // 6. collective sweep (and inside each host)
  int WriteAndSummarize();                   // 7. the final write and the summary

  // Shared by the steps.
  void Progress(const std::string& s) const {
    if (root) std::fprintf(stderr, "[calibrate] %s\n", s.c_str());
  }
  int FinishWith(int code) { return Finish(comm, code); }
  void Warn(const std::string& w) {  // the per-GPU threads add warnings
    std::lock_guard<std::mutex> l(run_mu);
    run.add_warnings(w);
  }
  absl::Status Checkpoint(bool final_write);
  absl::Status Gather(v1::CalibrationRun mine);
  bool AnySample(int mine);
  // A part's samples of this rank, with (on ranks other than 0) the warnings so far.
  void MoveWarningsInto(v1::CalibrationRun& part);
  // Each local GPU's samples into this rank's part (and, on rank 0, the run) through `field`
  // (the run's repeated field of them), the part gathered to rank 0; `failure` recorded when no
  // GPU of any rank measured one. A value: the code to end with (the gather timed out).
  template <typename Sample, typename Field>
  std::optional<int> GatherSamples(std::vector<std::vector<Sample>>& samples, Field field, const char* failure) {
    int n = 0;
    v1::CalibrationRun part;
    for (auto& v : samples) {
      for (auto& s : v) {
        ++n;
        *field(part)->Add() = s;
        if (root) *field(run)->Add() = s;
      }
    }
    MoveWarningsInto(part);
    if (!Gather(part).ok()) return FinishWith(kExitTimeout);
    if (!AnySample(n)) {
      run.add_failures(failure);
      nothing_measured = true;
    }
    return std::nullopt;
  }
  // Every rank learns of rank 0's write failure and ends with it.
  std::optional<int> AgreeOnCheckpoint();
  // `bench` on every local GPU, at once (`concurrent`) or one after another; each GPU's samples
  // stamped with its id and the NVML window of its run, then gathered (GatherSamples) into the run's
  // `field`. A GPU whose bench fails is a warning ("`what` on GPU: ..."); `beat` names the part to
  // the watchdog.
  template <typename Sample, typename Bench, typename Field>
  std::optional<int> MeasureEachGpu(const char* beat, const char* what, const Bench& bench, Field field,
                                    const char* failure, bool concurrent = true) {
    std::vector<std::vector<Sample>> samples(local.size());
    auto one = [&](size_t i) {
      const double t0 = NvmlSampler::Now();
      absl::StatusOr<std::vector<Sample>> s = bench(local[i]);
      watchdog.Beat(beat);
      const v1::ClockWindow w = sampler->Window(buses[i], t0, NvmlSampler::Now());
      if (!s.ok()) {
        Warn(absl::StrCat(what, " on ", GpuName(ids[i]), ": ", s.status().message()));
        return;
      }
      for (auto& x : *s) {
        *x.mutable_gpu_id() = ids[i];
        *x.mutable_conditions() = w;
        samples[i].push_back(std::move(x));
      }
    };
    if (concurrent) {
      ForEachConcurrently(local.size(), one);
    } else {
      for (size_t i = 0; i < local.size(); ++i) one(i);
    }
    return GatherSamples(samples, field, failure);
  }

  MeasureOptions o;
  Communicator& comm;
  const Catalog& catalog;
  const Injection inj;
  const std::vector<int> gpu_ids;  // --gpus (empty: every visible GPU)
  const int me;
  const bool root;
  InjectingGpuSystem gpus;
  Watchdog watchdog;

  bool need_gpu = false;
  std::vector<GpuInfo> local;  // the GPUs this rank measures
  std::string hardware;
  std::optional<Hardware> hw;

  v1::CalibrationRun run;
  v1::CalibrationConditions& cond;
  std::vector<v1::GpuId> ids;             // per local GPU
  std::vector<v1::GpuCondition> gpu_cond;  // per local GPU
  std::vector<std::string> buses;          // per local GPU
  std::unique_ptr<Nvml> nvml;
  std::optional<NvmlSampler> sampler;
  BenchOptions bo;
  std::mutex run_mu;
  bool nothing_measured = false, failed = false;
  std::vector<CollectiveRate> measured_rates;
};

int Measurement::Run() {
  if (std::optional<int> exit = PickGpusAndHardware()) return *exit;
  if (std::optional<int> exit = RecordConditions()) return *exit;
  WarmUp();
  if (!o.skip_gemm && need_gpu) {
    if (std::optional<int> exit = MeasureGemm()) return *exit;
  }
  if (!o.skip_hbm && need_gpu) {
    if (std::optional<int> exit = MeasureHbm()) return *exit;
  }
  if (!o.skip_gemm && !o.skip_contention && need_gpu) {  // its GEMMs are part of the GEMM sweep
    if (std::optional<int> exit = MeasureContention()) return *exit;
  }
  if (!o.skip_gemm && !o.skip_host && need_gpu) {  // so are the host-call pass's
    if (std::optional<int> exit = MeasureHostCalls()) return *exit;
  }
  sampler->Stop();
  if (std::optional<int> exit = GatherGpuConditions()) return *exit;
  if (root) FindStragglersAndFitGemm();
  if (!o.skip_hbm && need_gpu) {
    if (std::optional<int> exit = AgreeOnCheckpoint()) return *exit;
  }
  if (!o.skip_collectives) MeasureCollectives();
  return WriteAndSummarize();
}

std::optional<int> Measurement::PickGpusAndHardware() {
  need_gpu = !(o.skip_gemm && o.skip_hbm && (o.skip_collectives || o.backend == "mpi"));
  std::vector<GpuInfo> all;
  if (need_gpu) {
    absl::StatusOr<std::vector<GpuInfo>> g = gpus.ListGpus();
    absl::Status listed = g.ok() ? absl::OkStatus() : g.status();
    if (listed.ok() && g->empty()) listed = absl::FailedPreconditionError("no usable CUDA device (0 listed)");
    absl::Status agreed = AgreeOnStatus(comm, listed);
    if (!agreed.ok()) {
      SayError(comm, std::string(agreed.message()));
      return FinishWith(kExitNoGpu);
    }
    all = *g;
  }
  absl::Status pick;
  if (need_gpu && o.mpi) {
    // One GPU per rank: the rank's index among the ranks of its host, within --gpus if given.
    // More ranks on a host than GPUs to give them is refused (gpu code review 2, N14: rank i took
    // GPU i % n, so two ranks shared a GPU and NCCL failed later with a duplicate-GPU error).
    const int i = comm.local_rank();
    const size_t choices = gpu_ids.empty() ? all.size() : gpu_ids.size();
    if (static_cast<size_t>(comm.local_size()) > choices) {
      pick = absl::InvalidArgumentError(absl::StrCat(
          comm.local_size(), " ranks on ", comm.host(), " but ", choices, gpu_ids.empty() ? " visible GPUs" : " GPUs in --gpus",
          ": --mpi takes one GPU per rank; start at most ", choices, " ranks per node"));
    } else if (!gpu_ids.empty()) {
      const int id = gpu_ids[i];
      if (id >= static_cast<int>(all.size())) {
        pick = absl::InvalidArgumentError(absl::StrCat("--gpus: no GPU ", id, " on ", comm.host(), " (", all.size(), " visible)"));
      } else {
        local.push_back(all[id]);
      }
    } else {
      local.push_back(all[i]);
    }
  } else if (need_gpu) {
    if (gpu_ids.empty()) {
      local = all;
    } else {
      for (int id : gpu_ids) {
        if (id >= static_cast<int>(all.size())) {
          pick = absl::InvalidArgumentError(absl::StrCat("--gpus: no GPU ", id, " (", all.size(), " visible)"));
          break;
        }
        local.push_back(all[id]);
      }
    }
  }
  if (absl::Status agreed = AgreeOnStatus(comm, pick); !agreed.ok()) {
    SayError(comm, std::string(agreed.message()));
    return FinishWith(kExitUsage);
  }
  // The hardware preset: rank 0's GPU name decides, for every rank.
  hardware = o.hardware;
  if (hardware.empty() && !local.empty()) {
    if (absl::StatusOr<std::string> h = HardwarePresetForGpuName(local[0].name); h.ok()) hardware = *h;
  }
  if (absl::Status s = comm.Broadcast(hardware, 0); !s.ok()) return FinishWith(kExitTimeout);
  if (hardware.empty()) {
    SayError(comm, "--hardware: required (the GPU name matches no preset)");
    return FinishWith(kExitUsage);
  }
  absl::StatusOr<Hardware> found = catalog.FindHardware(hardware);
  if (!found.ok()) {
    SayError(comm, absl::StrCat("--hardware: ", found.status().message()));
    return FinishWith(kExitUsage);
  }
  hw = *std::move(found);
  return std::nullopt;
}

std::optional<int> Measurement::RecordConditions() {
  cond.set_host(comm.host());
  *cond.mutable_time() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(absl::Now()));
  cond.set_command_line(o.command_line);
  cond.set_ranks(comm.size());
  cond.set_cuda_architectures(o.cuda_architectures);
  if (need_gpu) {
    const GpuVersions v = gpus.Versions();
    cond.set_cuda_runtime_version(v.cuda_runtime);
    cond.set_cublas_version(v.cublas);
    cond.set_nccl_version(v.nccl);
    if (cond.cuda_architectures().empty()) cond.set_cuda_architectures(v.cuda_architectures);
  }
  for (char** e = environ; e && *e; ++e) {
    if (absl::StartsWith(*e, "NCCL_")) cond.add_nccl_env(*e);
  }
  std::string nvml_why;
  nvml = local.empty() ? nullptr : Nvml::Load(o.nvml_library, &nvml_why);
  if (!local.empty() && !nvml) run.add_warnings(absl::StrCat("NVML unavailable on ", comm.host(), " (", nvml_why, "): no clocks, power or throttle reasons"));
  if (nvml) cond.set_driver_version(nvml->DriverVersion());
  for (const GpuInfo& g : local) {
    v1::GpuId id;
    id.set_host(comm.host());
    id.set_rank(me);
    id.set_index(g.index);
    id.set_pci_bus_id(g.pci_bus_id);
    id.set_uuid(g.uuid);
    id.set_name(g.name);
    v1::GpuCondition gc;
    gc.set_index(g.index);
    gc.set_name(g.name);
    gc.set_pci_bus_id(g.pci_bus_id);
    gc.set_host(comm.host());
    gc.set_rank(me);
    if (nvml) {
      absl::StatusOr<NvmlDeviceInfo> info = nvml->Info(g.pci_bus_id);
      if (info.ok()) {
        if (id.uuid().empty()) id.set_uuid(info->uuid);
        gc.set_power_limit_w(info->power_limit_w);
        gc.set_pcie_link_gen(info->pcie_link_gen);
        gc.set_pcie_link_width(info->pcie_link_width);
      } else {
        run.add_warnings(std::string(info.status().message()));
      }
      if (absl::StatusOr<NvmlReading> r = nvml->Read(g.pci_bus_id); r.ok()) {
        gc.set_sm_clock_mhz(r->sm_clock_mhz);  // before any load (the idle clock)
        gc.set_memory_clock_mhz(r->memory_clock_mhz);
        gc.set_temperature_c(r->temperature_c);
      }
    }
    gc.set_uuid(id.uuid());
    if (cond.gpu_name().empty()) cond.set_gpu_name(g.name);
    ids.push_back(id);
    gpu_cond.push_back(gc);
    buses.push_back(g.pci_bus_id);
  }
  std::vector<double> count = {static_cast<double>(local.size())};
  if (!comm.AllreduceSum(count).ok()) return FinishWith(kExitTimeout);
  cond.set_gpu_count(static_cast<int32_t>(count[0]));
  if (o.name.empty()) o.name = comm.host();
  sampler.emplace(nvml.get(), buses, 0.2);
  if (o.quick) bo = {5, 15};
  return std::nullopt;
}

// Rank 0 writes what it has after every part; under MPI the other ranks' samples come first.
absl::Status Measurement::Checkpoint(bool final_write) {
  if (!root) return absl::OkStatus();
  *run.mutable_profile() = BuildProfile(run, *hw, hardware, o.name, measured_rates);
  if (absl::StatusOr<RateProfile> check = RateProfileFromProto(run.profile(), "profile"); !check.ok()) {
    return absl::InternalError(absl::StrCat("the measured profile is invalid: ", check.status().message()));
  }
  if (absl::Status s = WriteFile(o.out, ToJson(run.profile())); !s.ok()) return s;
  if (absl::Status s = WriteFile(o.run_out, ToJson(run)); !s.ok()) return s;
  if (!final_write) Progress(absl::StrCat("wrote ", o.out, " and ", o.run_out, " (so far)"));
  return absl::OkStatus();
}

// Gathers this part's samples from every rank to rank 0.
absl::Status Measurement::Gather(v1::CalibrationRun mine) {
  if (comm.size() == 1) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> all_parts = comm.Gather(mine.SerializeAsString(), 0);
  if (!all_parts.ok()) return all_parts.status();
  if (!root) return absl::OkStatus();
  for (size_t r = 1; r < all_parts->size(); ++r) {
    v1::CalibrationRun other;
    if (!other.ParseFromString((*all_parts)[r])) return absl::DataLossError(absl::StrCat("rank ", r, "'s samples"));
    for (const auto& s : other.gemm()) *run.add_gemm() = s;
    for (const auto& s : other.hbm()) *run.add_hbm() = s;
    for (const auto& s : other.contention()) *run.add_contention() = s;
    for (const auto& s : other.host_calls()) *run.add_host_calls() = s;
    for (const auto& w : other.warnings()) run.add_warnings(w);
    for (const auto& g : other.conditions().gpus()) *cond.add_gpus() = g;
  }
  return absl::OkStatus();
}

bool Measurement::AnySample(int mine) {
  std::vector<double> n = {static_cast<double>(mine)};
  if (!comm.AllreduceSum(n).ok()) return false;
  return n[0] > 0;
}

void Measurement::MoveWarningsInto(v1::CalibrationRun& part) {
  if (root) return;
  std::lock_guard<std::mutex> l(run_mu);
  for (const auto& w : run.warnings()) part.add_warnings(w);
  run.clear_warnings();
}

std::optional<int> Measurement::AgreeOnCheckpoint() {
  // Every rank learns of rank 0's write failure and ends with it (gpu code review 2, N6: rank 0
  // alone in finish() while the others went on into the next part's collectives, ended only by
  // the 2 x --timeout-s abort).
  if (absl::Status s = AgreeOnStatus(comm, Checkpoint(false)); !s.ok()) {
    SayError(comm, std::string(s.message()));
    return FinishWith(kExitWriteFailed);
  }
  return std::nullopt;
}

void Measurement::WarmUp() {
  if (!((!o.skip_gemm || !o.skip_hbm) && !local.empty() && o.warmup_s > 0)) return;
  Progress(absl::StrFormat("warm-up: %.0f s of bf16 GEMMs on %d GPU(s) at once", o.warmup_s, static_cast<int>(local.size())));
  watchdog.Beat("the warm-up");
  ForEachConcurrently(local.size(), [&](size_t i) {
    const double t0 = NvmlSampler::Now();
    absl::Status s = gpus.Warmup(local[i], o.warmup_s);
    if (!s.ok()) Warn(absl::StrCat("warm-up on ", GpuName(ids[i]), ": ", s.message()));
    *gpu_cond[i].mutable_warmup() = sampler->Window(buses[i], t0, NvmlSampler::Now());
  });
}

std::optional<int> Measurement::MeasureGemm() {
  const std::vector<DType> dtypes = o.quick ? std::vector<DType>{DType::kBF16, DType::kFP8}
                                            : std::vector<DType>{DType::kBF16, DType::kFP16, DType::kFP8,
                                                                 DType::kTF32, DType::kFP32};
  const std::vector<GemmShape> shapes = TransformerShapes(o.quick);
  int per_gpu = 0;
  for (DType d : dtypes)
    for (const auto& sh : shapes) per_gpu += SweepRuns(d, sh);
  Progress(absl::StrFormat("GEMM: %d shapes x dtypes on each of %d GPU(s) at once", per_gpu, static_cast<int>(local.size())));
  std::vector<std::vector<v1::GemmSample>> samples(local.size());
  ForEachConcurrently(local.size(), [&](size_t i) {
    const double part0 = NvmlSampler::Now();
    int done = 0;
    for (DType d : dtypes) {
      if (d == DType::kFP8 && !Fp8Capable(local[i])) {
        Warn(absl::StrFormat("fp8 GEMMs skipped on %s: compute capability %d.%d (cuBLASLt fp8 needs 8.9+)",
                             GpuName(ids[i]), local[i].cc_major, local[i].cc_minor));
        continue;
      }
      for (const GemmShape& sh : shapes) {
        if (!SweepRuns(d, sh)) continue;
        ++done;
        const double t0 = NvmlSampler::Now();
        absl::StatusOr<v1::GemmSample> s = gpus.BenchGemm(local[i], d, sh, bo);
        watchdog.Beat("the GEMM sweep");
        if (!s.ok()) {
          Warn(absl::StrCat("GEMM ", DTypeName(d), " ", sh.what, " on ", GpuName(ids[i]), ": ", s.status().message()));
          continue;
        }
        *s->mutable_gpu_id() = ids[i];
        *s->mutable_conditions() = sampler->Window(buses[i], t0, NvmlSampler::Now());
        if (i == 0) {
          Progress(absl::StrFormat("gemm %d/%d %s %s %dx%dx%d %s: %.1f TFLOP/s median (SM %d MHz)", done, per_gpu,
                                   DTypeName(d), s->layout(), sh.m, sh.n, sh.k, sh.what, s->median_flops_per_s() / 1e12,
                                   s->conditions().sm_clock_mhz_median()));
        }
        samples[i].push_back(*std::move(s));
      }
    }
    *gpu_cond[i].mutable_gemm() = sampler->Window(buses[i], part0, NvmlSampler::Now());
  });
  // CUPTI cross-check, one GPU at a time (CUPTI is process-wide), CUPTI off during the sweep.
  bool cupti_warned = false;
  for (size_t i = 0; i < local.size(); ++i) {
    for (auto& s : samples[i]) {
      if (DTypeFromProto(s.dtype()) != DType::kBF16 || s.what().rfind("square", 0) != 0) continue;
      const GemmShape sh{s.m(), s.n(), s.k(), GemmPass::kSquare, s.what()};
      absl::StatusOr<CuptiCheck> c = gpus.CuptiGemmCheck(local[i], DType::kBF16, sh);
      if (!c.ok()) {
        if (!cupti_warned) Warn(absl::StrCat("CUPTI cross-check not done: ", c.status().message()));
        cupti_warned = true;
        break;
      }
      s.set_cupti_median_s(c->cupti_median_s);
      s.set_cupti_events_median_s(c->events_median_s);
      s.set_cupti_event_disagreement(std::fabs(c->cupti_median_s - c->events_median_s) / c->events_median_s);
      if (CuptiDisagrees(c->cupti_median_s, c->events_median_s)) {
        Warn(absl::StrFormat("GEMM bf16 %s on %s: CUPTI %.1f us vs CUDA events %.1f us over the same runs", s.what(),
                             GpuName(ids[i]), c->cupti_median_s * 1e6, c->events_median_s * 1e6));
      }
    }
  }
  if (std::optional<int> end = GatherSamples(samples, [](v1::CalibrationRun& r) { return r.mutable_gemm(); },
                                             "gemm: no GEMM was measured on any GPU (see the warnings)")) {
    return end;
  }
  return AgreeOnCheckpoint();
}

std::optional<int> Measurement::MeasureHbm() {
  Progress(absl::StrFormat("HBM: copy, triad, pinned host copies on %d GPU(s) at once", static_cast<int>(local.size())));
  std::vector<std::vector<v1::HbmSample>> samples(local.size());
  ForEachConcurrently(local.size(), [&](size_t i) {
    const double t0 = NvmlSampler::Now();
    absl::StatusOr<std::vector<v1::HbmSample>> h = gpus.BenchHbm(local[i], bo);
    watchdog.Beat("the HBM kernels");
    const v1::ClockWindow w = sampler->Window(buses[i], t0, NvmlSampler::Now());
    *gpu_cond[i].mutable_hbm() = w;
    if (!h.ok()) {
      Warn(absl::StrCat("HBM on ", GpuName(ids[i]), ": ", h.status().message()));
      return;
    }
    for (auto& s : *h) {
      *s.mutable_gpu_id() = ids[i];
      *s.mutable_conditions() = w;
      samples[i].push_back(s);
    }
  });
  for (size_t i = 0; i < local.size(); ++i) {
    for (auto& s : samples[i]) {
      if (s.kernel() != "copy") continue;
      absl::StatusOr<CuptiCheck> c = gpus.CuptiHbmCopyCheck(local[i]);
      if (!c.ok()) break;
      s.set_cupti_median_s(c->cupti_median_s);
      s.set_cupti_event_disagreement(std::fabs(c->cupti_median_s - c->events_median_s) / c->events_median_s);
      if (CuptiDisagrees(c->cupti_median_s, c->events_median_s)) {
        Warn(absl::StrFormat("HBM copy on %s: CUPTI %.1f us vs CUDA events %.1f us over the same runs", GpuName(ids[i]),
                             c->cupti_median_s * 1e6, c->events_median_s * 1e6));
      }
    }
  }
  return GatherSamples(samples, [](v1::CalibrationRun& r) { return r.mutable_hbm(); },
                       "hbm: no HBM kernel was measured on any GPU (see the warnings)");
}

std::optional<int> Measurement::MeasureContention() {
  const ContentionPlan plan = PlanContention(hw->reference_profile);
  Progress(absl::StrFormat("contention: %d bf16 GEMMs alone and beside %d CTA counts at %.0f GB/s on %d GPU(s) at once",
                           static_cast<int>(plan.shapes.size()), static_cast<int>(plan.ctas.size()),
                           plan.target_bytes_per_s / 1e9, static_cast<int>(local.size())));
  return MeasureEachGpu<v1::ContentionSample>(
      "the contention sweep", "contention", [&](const GpuInfo& g) { return gpus.BenchContention(g, plan, bo); },
      [](v1::CalibrationRun& r) { return r.mutable_contention(); },
      "contention: no GPU measured the contention sweep (see the warnings)");
}

// One local GPU after another: threads of one process share the CUDA driver's and cuBLASLt's
// process-wide state, which a job's ranks, separate processes, do not, so timing them at once here
// would charge each call a contention training does not have. Under --mpi every rank times its
// own GPU, all ranks at once, as a job's ranks issue from one host.
std::optional<int> Measurement::MeasureHostCalls() {
  Progress(absl::StrFormat("host calls: kernel launch and cuBLASLt GEMM call, %d x %d calls on %d GPU(s) %s",
                           kHostCallBatches, kHostCallsPerBatch, static_cast<int>(local.size()),
                           o.mpi ? "(every rank at once)" : "one after another"));
  return MeasureEachGpu<v1::HostCallSample>(
      "the host-call pass", "host calls", [&](const GpuInfo& g) { return gpus.BenchHostCalls(g, bo); },
      [](v1::CalibrationRun& r) { return r.mutable_host_calls(); },
      "host: no GPU measured the host-call pass (see the warnings)", /*concurrent=*/false);
}

std::optional<int> Measurement::GatherGpuConditions() {
  v1::CalibrationRun part;
  for (const auto& g : gpu_cond) {
    *part.mutable_conditions()->add_gpus() = g;
    if (root) *cond.add_gpus() = g;
  }
  if (!root) {
    for (const auto& w : run.warnings()) part.add_warnings(w);
    run.clear_warnings();
  }
  if (!Gather(part).ok()) return FinishWith(kExitTimeout);
  return std::nullopt;
}

// Stragglers among every measured GPU: bf16 GEMM (median over the shapes every GPU measured)
// and the HBM copy; then the GEMM rate by size per dtype over the slowest GPU's medians.
void Measurement::FindStragglersAndFitGemm() {
  std::map<std::string, std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, double>> rates;
  std::map<std::string, v1::GpuId> who;
  for (const auto& s : run.gemm()) {
    if (DTypeFromProto(s.dtype()) != DType::kBF16) continue;
    const std::string key = GpuName(s.gpu_id());
    who[key] = s.gpu_id();
    rates[key][{s.m(), s.n(), s.k(), s.layout()}] = s.median_flops_per_s();
  }
  std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, int> seen;
  for (const auto& [g, m] : rates)
    for (const auto& [shape, r] : m) ++seen[shape];
  std::vector<GpuValue> gemm_values, hbm_values;
  for (const auto& [g, m] : rates) {
    std::vector<double> common;
    for (const auto& [shape, r] : m) {
      if (seen[shape] == static_cast<int>(rates.size())) common.push_back(r);
    }
    if (!common.empty()) gemm_values.push_back({who[g], Summarize(common).median_s()});
  }
  for (const auto& s : run.hbm()) {
    if (s.kernel() == "copy") hbm_values.push_back({s.gpu_id(), s.median_bytes_per_s()});
  }
  for (auto& s : FindStragglers(gemm_values, "gemm")) *run.add_stragglers() = s;
  for (auto& s : FindStragglers(hbm_values, "hbm")) *run.add_stragglers() = s;
  // GEMM rate by size per dtype over the slowest GPU's medians (kept in the run).
  std::map<int, std::map<std::tuple<int64_t, int64_t, int64_t>, double>> slow;
  for (const auto& s : run.gemm()) {
    auto& r = slow[s.dtype()][{s.m(), s.n(), s.k()}];
    r = r == 0 ? s.median_flops_per_s() : std::min(r, s.median_flops_per_s());
  }
  for (const auto& [d, m] : slow) {
    std::vector<std::pair<double, double>> fr;
    for (const auto& [shape, r] : m) fr.push_back({2.0 * std::get<0>(shape) * std::get<1>(shape) * std::get<2>(shape), r});
    if (fr.size() < 2) continue;
    const GemmSizeFit fit = FitGemmRate(fr);
    std::vector<double> err;
    for (const auto& [f, r] : fr) err.push_back(std::fabs(fit.Rate(f) - r) / r);
    auto* g = run.add_gemm_fits();
    g->set_dtype(static_cast<v1::DType>(d));
    g->set_r_max_flops_per_s(fit.r_max_flops_per_s);
    g->set_f_half_flops(fit.f_half_flops);
    g->set_median_relative_error(Summarize(err).median_s());
  }
}

void Measurement::MeasureCollectives() {
  watchdog.Beat("setting up the collectives");
  std::unique_ptr<CollectiveBackend> b;
  absl::Status made;
  const bool host = o.backend == "mpi";
  if (host) {
    absl::StatusOr<std::unique_ptr<CollectiveBackend>> x = comm.HostCollectives(o.max_collective_bytes);
    if (x.ok()) b = *std::move(x); else made = x.status();
  } else if (o.mpi) {
    if (comm.size() < 2) {
      run.add_warnings("one rank: no collective to measure; collectives come from the reference profile");
    } else {
      absl::StatusOr<std::unique_ptr<CollectiveBackend>> x =
          gpus.RankCollectives(local[0], comm, o.max_collective_bytes, o.timeout_s);
      if (x.ok()) b = *std::move(x); else made = x.status();
    }
  } else if (local.size() >= 2) {
    absl::StatusOr<std::unique_ptr<CollectiveBackend>> x = gpus.LocalCollectives(local, o.max_collective_bytes, o.timeout_s);
    if (x.ok()) b = *std::move(x); else made = x.status();
  } else {
    run.add_warnings("one GPU: no collective to measure; collectives come from the reference profile");
  }
  absl::Status agreed = AgreeOnStatus(comm, made);
  SweepOptions so;
  so.max_bytes = o.max_collective_bytes;
  so.iters = o.quick ? 10 : 20;
  so.batches = o.quick ? 3 : 5;
  so.warmup = o.quick ? 3 : 5;
  so.progress = [this](const std::string& s) { Progress(s); };
  so.heartbeat = [&] { watchdog.Beat("the collective sweep"); };
  if (inj.what == "collective" || inj.what == "hang") so.inject = {inj.rank, inj.what == "hang", inj.size_bytes};
  // A multi-node run also measures inside each node (gpu code review 2, N7: one communicator of
  // all ranks gave no NVLink curve, and TP's collectives stayed the reference's): every host's
  // ranks sweep together, then the slowest host's time per size is kept.
  std::vector<CollectiveRate> intra_rates;
  bool intra_failed = false;
  if (agreed.ok() && b && o.mpi && !host && comm.hosts() > 1) {
    watchdog.Beat("the intra-node sweep of each host");
    absl::Status st = MeasureInsideEachHost(gpus, local[0], comm, o.max_collective_bytes, o.timeout_s, so, run,
                                            intra_rates);
    if (!st.ok()) {
      run.add_failures(absl::StrCat("collectives inside each node: ", st.message()));
      failed = intra_failed = true;
      b->Abort();
    }
  }
  if (!agreed.ok()) {
    run.add_failures(absl::StrCat("collectives: ", agreed.message()));
    failed = true;
    if (b) b->Abort();
  } else if (b && !intra_failed) {
    SweepResult r = Sweep(*b, comm, so);
    for (const auto& s : r.samples) *run.add_collectives() = s;
    const int rpn = comm.hosts() > 1 ? comm.local_size() : 0;
    SweepFits fits = FitSweep(r.samples, rpn);
    for (auto& f : fits.fits) *run.add_fits() = f;
    if (host) {
      run.add_warnings(absl::StrCat("collectives over ", b->name(),
                                    " are host-memory MPI rates: kept in the run, not written as GPU collective rates"));
    } else {
      measured_rates = std::move(fits.rates);
      measured_rates.insert(measured_rates.end(), intra_rates.begin(), intra_rates.end());
    }
    if (!r.status.ok()) {
      run.add_failures(absl::StrCat("collectives: ", r.status.message()));
      failed = true;
    } else if (r.samples.empty()) {
      run.add_failures("collectives: no size was measured");
      nothing_measured = true;
    }
  }
}

int Measurement::WriteAndSummarize() {
  const int code = failed ? kExitFailed : nothing_measured ? kExitNothingMeasured : kExitOk;
  run.set_exit_code(code);
  if (absl::Status s = Checkpoint(true); !s.ok()) {
    SayError(comm, std::string(s.message()));
    return FinishWith(kExitWriteFailed);
  }
  if (root) {
    absl::StatusOr<RateProfile> measured = RateProfileFromProto(run.profile(), "profile");
    const RateProfile& ref = hw->reference_profile;
    auto gemm_at = [&](const RateProfile& rp, DType d) { return rp.GemmRate(d, 8192, 8192, 8192).flops_per_s; };
    std::printf("\n%-30s %14s %14s %14s\n", "rate", "measured", "datasheet", "reference");
    auto cell = [](bool have, double v, const char* unit) {
      return have ? absl::StrFormat("%.1f %s", v, unit) : std::string("not measured");
    };
    bool have_gemm = run.gemm_size() > 0;
    for (DType d : {DType::kBF16, DType::kFP8}) {
      if (hw->PeakFlops(d) <= 0) continue;
      std::printf("%-30s %14s %14s %14s\n", absl::StrCat("GEMM ", DTypeName(d), " 8192^3").c_str(),
                  cell(have_gemm, gemm_at(*measured, d) / 1e12, "TF").c_str(), cell(true, hw->PeakFlops(d) / 1e12, "TF").c_str(),
                  cell(true, gemm_at(ref, d) / 1e12, "TF").c_str());
    }
    const bool have_hbm = absl::StartsWith(run.profile().hbm_source(), "stepcast-calibrate");
    std::printf("%-30s %14s %14s %14s\n", "HBM copy", cell(have_hbm, run.profile().hbm_bandwidth_bytes_per_s() / 1e9, "GB/s").c_str(),
                cell(true, hw->hbm_bandwidth_bytes_per_s / 1e9, "GB/s").c_str(),
                cell(true, ref.hbm_bandwidth_bytes_per_s / 1e9, "GB/s").c_str());
    for (const std::string& line : DescribeContention(run)) std::printf("%s\n", line.c_str());
    for (const auto& r : measured_rates) {
      const CollectiveRate* rr = ref.FindCollective(r.collective, r.scope);
      std::printf("%-30s %9.1f GB/s %14s %9.1f GB/s\n",
                  absl::StrFormat("%s %s busbw x%d", CollectiveName(r.collective), ScopeName(r.scope), r.group_size).c_str(),
                  r.busbw_bytes_per_s / 1e9, "-", rr ? rr->busbw_bytes_per_s / 1e9 : 0.0);
    }
    for (const auto& s : run.collectives()) {
      if (s.backend() == "mpi-host" && s.size_bytes() >= o.max_collective_bytes / 2) {
        std::printf("host MPI %s x%d at %.0f B: %.2f GB/s busbw (rank average; slowest rank %.1f us) [run only]\n",
                    v1::Collective_Name(s.collective()).c_str(), s.ranks(), s.size_bytes(), s.busbw_bytes_per_s() / 1e9,
                    s.slowest_rank_time().median_s() * 1e6);
      }
    }
    for (const auto& g : cond.gpus()) {
      if (g.gemm().samples() > 0) {
        std::printf("GPU %d %s on %s: under GEMM load SM %d MHz median (min %d), %.0f W mean, %d C max%s%s\n", g.index(),
                    g.pci_bus_id().c_str(), g.host().c_str(), g.gemm().sm_clock_mhz_median(), g.gemm().sm_clock_mhz_min(),
                    g.gemm().power_w_mean(), g.gemm().temperature_c_max(),
                    g.gemm().clocks_event_reason_names_size() ? ", throttled: " : "",
                    absl::StrJoin(g.gemm().clocks_event_reason_names(), ",").c_str());
      }
    }
    for (const auto& g : run.gemm_fits()) std::printf("%s\n", DescribeGemmFit(g).c_str());
    for (const auto& s : run.stragglers()) {
      std::printf("STRAGGLER: %s %s %.1f%% below the median of the measured GPUs\n", GpuName(s.gpu_id()).c_str(),
                  s.metric().c_str(), 100 * s.slowdown());
    }
    for (const auto& w : run.warnings()) std::printf("warning: %s\n", w.c_str());
    for (const auto& f : run.failures()) std::printf("FAILED: %s\n", f.c_str());
    std::printf("\nprofile %s, run %s (stepcast predict --profile %s JOB); exit %d\n", o.out.c_str(), o.run_out.c_str(),
                o.out.c_str(), code);
    std::fflush(stdout);
  }
  return FinishWith(code);
}

}  // namespace

int RunMeasure(const MeasureOptions& options, GpuSystem& real_gpus, Communicator& comm, const Catalog& catalog) {
  MeasureOptions o = options;
  absl::StatusOr<Injection> inj = ParseInjection(o.inject);
  if (!inj.ok()) {
    SayError(comm, std::string(inj.status().message()));
    return Finish(comm, kExitUsage);
  }
  absl::StatusOr<std::vector<int>> gpu_ids = ParseGpuList(o.gpus);
  if (!gpu_ids.ok()) {
    SayError(comm, std::string(gpu_ids.status().message()));
    return Finish(comm, kExitUsage);
  }
  if (o.run_out.empty()) o.run_out = o.out + ".run.json";
  if (o.max_collective_bytes <= 0) o.max_collective_bytes = o.quick ? 256.0 * (1 << 20) : 4.0 * (1ull << 30);
  if (o.warmup_s < 0) o.warmup_s = o.quick ? 5 : 30;
  Measurement m(o, real_gpus, comm, catalog, *inj, *std::move(gpu_ids));
  return m.Run();
}

}  // namespace stepcast::calibrate
