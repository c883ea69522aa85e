// stepcast-calibrate: measure the usable rates of the actual GPUs and write a rate profile.
//
//   stepcast-calibrate [--quick] [--out profile.json] [--name CLUSTER] [--gpus 0,1,...]
//   mpirun -np 16 stepcast-calibrate --mpi ...          # across nodes, one rank per GPU
//   mpirun -np 2 stepcast-calibrate --backend mpi --skip-gemm --skip-hbm --hardware h100-sxm
//
// Measures GEMM (cuBLASLt), HBM (our stream kernels) and collectives (NCCL, or MPI in host memory),
// flags stragglers (> 5% below the node median), writes the profile (stepcast.v1.RateProfile, for
// `stepcast predict --profile` and the service's PutProfile) and the full run (CalibrationRun:
// every sample summary, the fits, the conditions), and prints each rate beside the hardware
// preset's datasheet figure and reference profile. Without a GPU or driver it exits 2 saying so.
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <cmath>
#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "calibrate/collective_harness.h"
#include "calibrate/conditions.h"
#include "calibrate/cupti_timer.h"
#include "calibrate/fits.h"
#include "calibrate/gpu_bench.h"
#include "calibrate/mpi_backend.h"
#include "calibrate/nccl_backend.h"
#include "proto/catalog.h"
#include "proto/codec.h"

using namespace stepcast;
using namespace stepcast::calibrate;

namespace {

int rank_ = 0;
void Progress(const std::string& s) {
  if (rank_ == 0) std::fprintf(stderr, "[calibrate] %s\n", s.c_str());
}
int Fail(const std::string& s, int code = 2) {
  if (rank_ == 0) std::fprintf(stderr, "stepcast-calibrate: %s\n", s.c_str());
  return code;
}

// "0,2,3" -> {0, 2, 3}; empty -> every GPU. Errors name --gpus and the bad entry.
absl::StatusOr<std::vector<int>> ParseGpus(const std::string& s, int count) {
  std::vector<int> out;
  if (s.empty()) {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int id = 0;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--gpus: '", part, "' is not a GPU index (want e.g. 0,1,2)"));
    }
    out.push_back(id);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepcast-calibrate: measure GEMM, HBM and collective rates and write a rate profile"};
  std::string out = "stepcast-profile.json", run_out, name, gpus_arg, backend = "nccl", hardware;
  bool quick = false, use_mpi = false, skip_gemm = false, skip_hbm = false, skip_coll = false;
  double max_coll = 0;
  app.add_option("--out", out, "rate profile to write (stepcast.v1.RateProfile JSON)")->capture_default_str();
  app.add_option("--run-out", run_out, "full run to write (CalibrationRun JSON; default <out>.run.json)");
  app.add_option("--name", name, "cluster name of the profile (default: host)");
  app.add_flag("--quick", quick, "reduced sweep (~20 s on one GPU)");
  app.add_option("--gpus", gpus_arg, "GPUs to measure (default: all visible)");
  app.add_flag("--mpi", use_mpi, "one rank per GPU under mpirun/srun: collectives across nodes");
  app.add_option("--backend", backend, "collectives over nccl or mpi (host memory)")->check(CLI::IsMember({"nccl", "mpi"}));
  app.add_flag("--skip-gemm", skip_gemm, "no GEMM sweep");
  app.add_flag("--skip-hbm", skip_hbm, "no HBM kernels");
  app.add_flag("--skip-collectives", skip_coll, "no collective sweep");
  app.add_option("--max-collective-bytes", max_coll, "largest collective size (default 4 GiB, quick 256 MiB)");
  app.add_option("--hardware", hardware, "hardware preset to compare with (default: from the GPU name)");
  CLI11_PARSE(app, argc, argv);
  if (absl::StatusOr<std::vector<int>> ids = ParseGpus(gpus_arg, 0); !ids.ok()) {
    return Fail(std::string(ids.status().message()), 1);
  }
  if (run_out.empty()) run_out = out + ".run.json";
  if (max_coll <= 0) max_coll = quick ? 256.0 * (1 << 20) : 4.0 * (1ull << 30);
  const bool mpi = use_mpi || backend == "mpi";
  int ranks = 1;
  if (mpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  }
  auto finish = [&](int code) {
    if (mpi) MPI_Finalize();
    return code;
  };

  absl::StatusOr<Catalog> catalog = Catalog::Builtin();
  if (!catalog.ok()) return finish(Fail(std::string(catalog.status().message()), 1));
  const bool need_gpu = !(skip_gemm && skip_hbm && (skip_coll || backend == "mpi"));
  std::vector<GpuInfo> all;
  if (need_gpu) {
    absl::StatusOr<std::vector<GpuInfo>> g = ListGpus();
    if (!g.ok()) return finish(Fail(std::string(g.status().message())));
    all = *g;
  }
  absl::StatusOr<std::vector<int>> parsed_ids = ParseGpus(gpus_arg, static_cast<int>(all.size()));
  if (!parsed_ids.ok()) return finish(Fail(std::string(parsed_ids.status().message())));
  std::vector<int> gpu_ids = *parsed_ids;
  if (use_mpi && !all.empty()) {
    // One GPU per rank: the rank's index among the ranks of its node (any placement).
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    int local_rank = 0;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    gpu_ids = {local_rank % static_cast<int>(all.size())};
  }
  std::vector<GpuInfo> gpus;
  for (int id : gpu_ids) {
    if (id < 0 || id >= static_cast<int>(all.size())) {
      if (need_gpu) return finish(Fail(absl::StrCat("--gpus: no GPU ", id)));
      continue;
    }
    gpus.push_back(all[id]);
  }
  if (hardware.empty() && !gpus.empty()) {
    if (absl::StatusOr<std::string> h = HardwarePresetForGpuName(gpus[0].name); h.ok()) hardware = *h;
  }
  if (hardware.empty()) return finish(Fail("--hardware: required (the GPU name matches no preset)"));
  absl::StatusOr<Hardware> hw = catalog->FindHardware(hardware);
  if (!hw.ok()) return finish(Fail(absl::StrCat("--hardware: ", hw.status().message())));

  v1::CalibrationRun run;
  *run.mutable_conditions() = Conditions(argc, argv, gpu_ids);
  run.mutable_conditions()->set_ranks(ranks);
  if (name.empty()) name = run.conditions().host();
  CuptiTimer cupti;
  if (!gpus.empty() && !cupti.enabled()) run.add_warnings("CUPTI unavailable (" + cupti.why_disabled() + "): no cross-check");
  BenchOptions bo;
  if (quick) bo = {5, 15};

  // GEMM.
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, double> slowest_gemm;  // (dtype, m, n, k) -> flops
  if (!skip_gemm && !gpus.empty()) {
    std::vector<DType> dtypes = quick ? std::vector<DType>{DType::kBF16, DType::kFP8}
                                      : std::vector<DType>{DType::kBF16, DType::kFP16, DType::kFP8, DType::kTF32, DType::kFP32};
    const std::vector<GemmShape> shapes = TransformerShapes(quick);
    int done = 0;
    const int total = static_cast<int>(dtypes.size() * shapes.size() * gpus.size());
    std::vector<std::vector<double>> per_gpu_bf16(gpus.size());
    for (DType d : dtypes) {
      for (const GemmShape& sh : shapes) {
        // tf32/fp32 only on the square shapes (they are not training GEMMs).
        const bool square = sh.what.rfind("square", 0) == 0;
        for (size_t gi = 0; gi < gpus.size(); ++gi) {
          ++done;
          if ((d == DType::kTF32 || d == DType::kFP32) && !square) continue;
          if (d == DType::kFP8 && gpus[gi].cc_major < 9) continue;
          absl::StatusOr<v1::GemmSample> s = BenchGemm(gpus[gi], d, sh, bo, cupti.enabled() ? &cupti : nullptr);
          if (!s.ok()) {
            run.add_warnings(absl::StrCat("GEMM ", DTypeName(d), " ", sh.what, " on GPU ", gpus[gi].index, ": ",
                                          s.status().message()));
            continue;
          }
          Progress(absl::StrFormat("gemm %d/%d GPU %d %s %dx%dx%d (%s): %.1f TFLOP/s median, %.1f best", done, total,
                                   gpus[gi].index, DTypeName(d), sh.m, sh.n, sh.k, sh.what,
                                   s->median_flops_per_s() / 1e12, s->best_flops_per_s() / 1e12));
          if (s->cupti_event_disagreement() > 0.02) {
            run.add_warnings(absl::StrFormat("GEMM %s %dx%dx%d GPU %d: CUPTI and CUDA events disagree by %.1f%%",
                                             DTypeName(d), sh.m, sh.n, sh.k, gpus[gi].index,
                                             100 * s->cupti_event_disagreement()));
          }
          auto key = std::make_tuple(static_cast<int>(d), sh.m, sh.n, sh.k);
          auto it = slowest_gemm.find(key);
          if (it == slowest_gemm.end() || s->median_flops_per_s() < it->second) slowest_gemm[key] = s->median_flops_per_s();
          if (d == DType::kBF16) per_gpu_bf16[gi].push_back(s->median_flops_per_s());
          *run.add_gemm() = *s;
        }
      }
    }
    std::vector<double> gpu_rate;
    for (const auto& v : per_gpu_bf16) gpu_rate.push_back(v.empty() ? 0 : Summarize(v).median_s());
    for (auto& s : FindStragglers(gpu_rate, "gemm")) *run.add_stragglers() = s;
  }

  // HBM.
  double hbm = 0;
  if (!skip_hbm && !gpus.empty()) {
    std::vector<double> copy_rate;
    for (const GpuInfo& g : gpus) {
      Progress(absl::StrFormat("hbm GPU %d: copy, triad, pinned h2d/d2h", g.index));
      absl::StatusOr<std::vector<v1::HbmSample>> h = BenchHbm(g, bo, cupti.enabled() ? &cupti : nullptr);
      if (!h.ok()) {
        run.add_warnings(absl::StrCat("HBM on GPU ", g.index, ": ", h.status().message()));
        continue;
      }
      for (const auto& s : *h) {
        Progress(absl::StrFormat("  %s: %.0f GB/s median", s.kernel(), s.median_bytes_per_s() / 1e9));
        if (s.kernel() == "copy") copy_rate.push_back(s.median_bytes_per_s());
        if (s.cupti_event_disagreement() > 0.02) {
          run.add_warnings(absl::StrFormat("HBM %s GPU %d: CUPTI and CUDA events disagree by %.1f%%", s.kernel(),
                                           g.index, 100 * s.cupti_event_disagreement()));
        }
        *run.add_hbm() = s;
      }
    }
    if (!copy_rate.empty()) hbm = *std::min_element(copy_rate.begin(), copy_rate.end());  // the slowest GPU
    for (auto& s : FindStragglers(copy_rate, "hbm")) *run.add_stragglers() = s;
  }

  // Collectives.
  std::vector<v1::CollectiveRate> measured_rates;
  if (!skip_coll) {
    std::unique_ptr<CollectiveBackend> b;
    if (backend == "mpi") {
      b = MakeMpiBackend(max_coll, Scope::kIntraNode);
    } else if (use_mpi) {
      absl::StatusOr<std::unique_ptr<CollectiveBackend>> nb = MakeNcclMpiBackend(gpus[0].index, max_coll);
      if (!nb.ok()) return finish(Fail(std::string(nb.status().message()), 1));
      b = *std::move(nb);
    } else if (gpus.size() >= 2) {
      absl::StatusOr<std::unique_ptr<CollectiveBackend>> nb = MakeNcclLocalBackend(gpu_ids, max_coll);
      if (!nb.ok()) return finish(Fail(std::string(nb.status().message()), 1));
      b = *std::move(nb);
    } else {
      run.add_warnings("one GPU: no collective to measure; collectives come from the reference profile");
    }
    if (b) {
      SweepOptions so;
      so.max_bytes = max_coll;
      so.iters = quick ? 10 : 20;
      so.warmup = quick ? 3 : 5;
      so.progress = Progress;
      absl::StatusOr<std::vector<v1::CollectiveSample>> samples = Sweep(*b, so);
      if (!samples.ok()) return finish(Fail(std::string(samples.status().message()), 1));
      for (const auto& s : *samples) *run.add_collectives() = s;
      SweepFits fits = FitSweep(*samples);
      for (auto& f : fits.fits) *run.add_fits() = f;
      measured_rates = std::move(fits.rates);
    }
  }

  // GEMM rate by size per dtype, over the slowest GPU's medians.
  std::map<int, std::vector<std::pair<double, double>>> by_dtype;  // dtype -> (flops, rate)
  for (const auto& [key, rate] : slowest_gemm) {
    by_dtype[std::get<0>(key)].push_back({2.0 * std::get<1>(key) * std::get<2>(key) * std::get<3>(key), rate});
  }
  for (const auto& [d, fr] : by_dtype) {
    if (fr.size() < 2) continue;
    const GemmSizeFit fit = FitGemmRate(fr);
    std::vector<double> err;
    for (const auto& [f, r] : fr) err.push_back(std::abs(fit.Rate(f) - r) / r);
    auto* g = run.add_gemm_fits();
    g->set_dtype(DTypeToProto(static_cast<DType>(d)));
    g->set_r_max_flops_per_s(fit.r_max_flops_per_s);
    g->set_f_half_flops(fit.f_half_flops);
    g->set_median_relative_error(Summarize(err).median_s());
  }

  // The profile: measured rates; anything not measured carried from the reference profile.
  const RateProfile& ref = hw->reference_profile;
  const v1::RateProfile ref_proto = RateProfileToProto(ref);
  v1::RateProfile& p = *run.mutable_profile();
  p.set_name(name);
  p.set_hardware(hardware);
  for (const auto& [key, flops] : slowest_gemm) {
    auto* g = p.add_gemm();
    g->set_dtype(DTypeToProto(static_cast<DType>(std::get<0>(key))));
    g->set_m(std::get<1>(key));
    g->set_n(std::get<2>(key));
    g->set_k(std::get<3>(key));
    g->set_flops_per_s(flops);
    g->set_source(absl::StrFormat("stepcast-calibrate cuBLASLt, slowest of %d GPUs, median", static_cast<int>(gpus.size())));
  }
  if (slowest_gemm.empty()) {
    for (const auto& g : ref_proto.gemm()) {
      auto* x = p.add_gemm();
      *x = g;
      x->set_source("not measured; reference profile: " + g.source());
    }
  }
  p.set_attention_flops_per_s(ref.attention_flops_per_s);
  p.set_attention_source("not measured; reference profile: " + ref.attention_source);
  p.set_hbm_bandwidth_bytes_per_s(hbm > 0 ? hbm : ref.hbm_bandwidth_bytes_per_s);
  p.set_hbm_source(hbm > 0 ? "stepcast-calibrate copy kernel (read + write), slowest GPU, median"
                           : "not measured; reference profile: " + ref.hbm_source);
  for (const auto& r : measured_rates) *p.add_collectives() = r;
  for (const auto& r : ref_proto.collectives()) {
    bool have = false;
    for (const auto& m : measured_rates) have = have || (m.collective() == r.collective() && m.scope() == r.scope());
    if (!have) {
      auto* x = p.add_collectives();
      *x = r;
      x->set_source("not measured; reference profile: " + r.source());
    }
  }
  for (const auto& w : run.warnings()) p.add_notes(w);

  if (rank_ == 0) {
    if (absl::StatusOr<RateProfile> check = RateProfileFromProto(p, "profile"); !check.ok()) {
      return finish(Fail(absl::StrCat("the measured profile is invalid: ", check.status().message()), 1));
    }
    std::ofstream(out) << ToJson(p);
    std::ofstream(run_out) << ToJson(run);
    // Summary: each rate beside the datasheet and the reference profile.
    auto gemm_at = [&](const RateProfile& rp, DType d) { return rp.GemmRate(d, 8192, 8192, 8192).flops_per_s; };
    absl::StatusOr<RateProfile> measured = RateProfileFromProto(p, "profile");
    std::printf("\n%-28s %14s %14s %14s\n", "rate", "measured", "datasheet", "reference");
    auto cell = [](bool have, double v, const char* unit) {
      return have ? absl::StrFormat("%.1f %s", v, unit) : std::string("not measured");
    };
    for (DType d : {DType::kBF16, DType::kFP8}) {
      if (hw->PeakFlops(d) <= 0) continue;
      std::printf("%-28s %14s %14s %14s\n", absl::StrCat("GEMM ", DTypeName(d), " 8192^3").c_str(),
                  cell(!slowest_gemm.empty(), gemm_at(*measured, d) / 1e12, "TF").c_str(),
                  cell(true, hw->PeakFlops(d) / 1e12, "TF").c_str(), cell(true, gemm_at(ref, d) / 1e12, "TF").c_str());
    }
    std::printf("%-28s %14s %14s %14s\n", "HBM copy", cell(hbm > 0, hbm / 1e9, "GB/s").c_str(),
                cell(true, hw->hbm_bandwidth_bytes_per_s / 1e9, "GB/s").c_str(),
                cell(true, ref.hbm_bandwidth_bytes_per_s / 1e9, "GB/s").c_str());
    for (const auto& r : measured_rates) {
      const CollectiveRate* rr = ref.FindCollective(CollectiveFromProto(r.collective()),
                                                    r.scope() == v1::SCOPE_INTER_NODE ? Scope::kInterNode : Scope::kIntraNode);
      std::printf("%-28s %10.0f GB/s %14s %10.0f GB/s\n",
                  absl::StrFormat("%s busbw x%d", v1::Collective_Name(r.collective()).substr(11), r.group_size()).c_str(),
                  r.busbw_bytes_per_s() / 1e9, "-", rr ? rr->busbw_bytes_per_s / 1e9 : 0.0);
    }
    for (const auto& g : run.gemm_fits()) {
      std::printf("GEMM %s by size: r_max %.1f TF, half rate at %.2f GFLOP per GEMM (fit error %.1f%%)\n",
                  DTypeName(DTypeFromProto(g.dtype())), g.r_max_flops_per_s() / 1e12, g.f_half_flops() / 1e9,
                  100 * g.median_relative_error());
    }
    for (const auto& s : run.stragglers()) {
      std::printf("STRAGGLER: GPU %d %s %.1f%% below the node median\n", s.gpu(), s.metric().c_str(), 100 * s.slowdown());
    }
    for (const auto& w : run.warnings()) std::printf("warning: %s\n", w.c_str());
    std::printf("\nprofile %s, run %s (stepcast predict --profile %s JOB)\n", out.c_str(), run_out.c_str(), out.c_str());
  }
  return finish(0);
}
