// The pages whose commands are not wired to cli/html.h yet, written from real inputs so that
// tests/pages_test.py renders and checks them like the others:
//   search.html     SearchPage over a TP x PP grid of real predictions (Llama 3 70B, 64 H100s,
//                   examples/llama3-70b-h100.yaml with each layout), the fastest that fits chosen;
//   calibrate.html  CalibrationPage of a run built from published measurements: nccl-tests logs
//                   as collective samples (busbw and time against size, the alpha-beta fit, the
//                   H100 preset's reference profile and datasheet link bandwidth) and TraceLens
//                   GEMM tables as GEMM samples (rate against 2mnk, the size fit);
//   calibrate-import.html  CalibrationPage of what `stepcast-calibrate import` makes of the same
//                   logs (calibrate/import.h ImportLogFiles over the H100 reference profile): the
//                   profile alone, its measured curves and shape-specific GEMM rates drawn;
//   timeline-1f1b.html, timeline-interleaved.html  the step timeline (cli/chart.h LayOutPipeline,
//                   RenderTimeline) of the hand-worked examples tests/pages_test.py checks: PP 4,
//                   8 micro-batches, forward 1 s and backward 2 s per stage (1F1B), and the same
//                   split into VPP 2 chunks of 0.5 s and 1 s (interleaved 1F1B).
//
//   pages_test_fixture OUT_DIR SOURCE_DIR intra:NCCL_LOG... inter:NCCL_LOG... gemm:TRACELENS_CSV...
//
// Paths are relative to SOURCE_DIR. The nccl-tests reader for the run form is a test fixture
// (out-of-place time column, microseconds); the import form uses the real importer.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "calibrate/fits.h"
#include "calibrate/import.h"
#include "cli/html.h"
#include "core/predict.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "tests/csv_line.h"

namespace stepcast {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << path << ": cannot open\n";
    std::exit(1);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// nccl-tests output: "# collective: all_reduce  ranks (from busbw/algbw): 8" and rows
// "size count type redop root time algbw busbw #wrong ..." (time in microseconds).
void AddNcclLog(const std::string& path, v1::Scope scope, v1::CalibrationRun& run) {
  v1::Collective collective = v1::COLLECTIVE_ALL_REDUCE;
  int ranks = 0;
  std::vector<std::pair<double, double>> size_time;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n')) {
    if (absl::StartsWith(line, "# collective:")) {
      if (absl::StrContains(line, "all_gather")) collective = v1::COLLECTIVE_ALL_GATHER;
      if (absl::StrContains(line, "reduce_scatter")) collective = v1::COLLECTIVE_REDUCE_SCATTER;
      const size_t colon = line.rfind(':');
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(colon + 1)), &ranks)) ranks = 0;
      continue;
    }
    // mpirun --tag-output prefixes "[1,0]<stdout>:".
    if (const size_t tag = line.find("<stdout>:"); tag != absl::string_view::npos) line = line.substr(tag + 9);
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    double size = 0, time_us = 0;
    if (f.size() < 8 || !absl::SimpleAtod(f[0], &size) || !absl::SimpleAtod(f[5], &time_us) || time_us <= 0 ||
        size <= 0) {
      continue;
    }
    size_time.emplace_back(size, time_us * 1e-6);
    v1::CollectiveSample* s = run.add_collectives();
    s->set_collective(collective);
    s->set_scope(scope);
    s->set_ranks(ranks);
    s->set_size_bytes(size);
    s->mutable_time()->set_count(1);
    s->mutable_time()->set_median_s(time_us * 1e-6);
    s->set_backend("nccl-tests (published log)");
  }
  const Collective c = CollectiveFromProto(collective);
  calibrate::AlphaBetaFit fit = calibrate::FitAlphaBeta(size_time, c, ranks);
  v1::CollectiveFit* out = run.add_fits();
  out->set_collective(collective);
  out->set_scope(scope);
  out->set_ranks(ranks);
  for (const auto& seg : fit.segments) *out->add_segments() = seg;
  out->set_median_relative_error(fit.median_relative_error);
  v1::CollectiveRate* rate = run.mutable_profile()->add_collectives();
  rate->set_collective(collective);
  rate->set_scope(scope);
  rate->set_group_size(ranks);
  rate->set_alpha_s(fit.alpha_s);
  rate->set_busbw_bytes_per_s(fit.busbw_bytes_per_s);
  for (const auto& [size, t] : size_time) {
    v1::CollectivePoint* p = rate->add_points();
    p->set_size_bytes(size);
    p->set_time_s(t);
  }
  rate->set_source(path);
}

// TraceLens GEMM.csv: param: M, N, K, dtype_A_B, TFLOPS/s_median (BF16 rows).
void AddTraceLensGemms(const std::string& path, v1::CalibrationRun& run, std::vector<std::pair<double, double>>& fit_in) {
  std::vector<std::string> header;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n')) {
    if (line.empty()) continue;
    std::vector<std::string> f = testing::SplitCsvLine(std::string(line));
    if (header.empty()) {
      header = f;
      continue;
    }
    auto col = [&](const std::string& name) -> std::string {
      for (size_t i = 0; i < header.size() && i < f.size(); ++i) {
        if (header[i] == name) return f[i];
      }
      return "";
    };
    int64_t m = 0, n = 0, k = 0;
    double tflops = 0;
    if (!absl::SimpleAtoi(col("param: M"), &m) || !absl::SimpleAtoi(col("param: N"), &n) ||
        !absl::SimpleAtoi(col("param: K"), &k) || !absl::SimpleAtod(col("TFLOPS/s_median"), &tflops) ||
        !absl::StrContains(col("param: dtype_A_B"), "BFloat16") || tflops <= 0) {
      continue;
    }
    v1::GemmSample* g = run.add_gemm();
    g->set_dtype(v1::D_TYPE_BF16);
    g->set_m(m);
    g->set_n(n);
    g->set_k(k);
    g->set_median_flops_per_s(tflops * 1e12);
    fit_in.emplace_back(2.0 * m * n * k, tflops * 1e12);
  }
}

// The timeline of a hand-worked pipeline: PP 4, 8 micro-batches; per micro-batch and chunk a
// forward of `forward_s` (3/4 compute, 1/4 exposed communication) and a backward of twice that
// (recompute none, dgrad 1/2, wgrad 3/8, communication 1/8); then 0.5 s DP sync, 0.25 s optimizer.
absl::Status WriteTimelinePage(const std::string& path, int64_t vpp, double forward_s) {
  html::PipelineStep step;
  step.pp = 4;
  step.vpp = vpp;
  step.micro_batches = 8;
  step.forward_s = 0.75 * forward_s;
  step.forward_comm_s = 0.25 * forward_s;
  step.backward_s = forward_s;
  step.weight_gradient_s = 0.75 * forward_s;
  step.backward_comm_s = 0.25 * forward_s;
  step.dp_comm_s = 0.5;
  step.optimizer_s = 0.25;
  absl::StatusOr<std::vector<std::vector<html::PipelineOp>>> ops = html::LayOutPipeline(step);
  if (!ops.ok()) return ops.status();
  html::TimelineChart chart = html::PipelineTimeline(step, *ops);
  chart.title = absl::StrCat("PP 4, VPP ", vpp, ", 8 micro-batches");
  html::Page page(chart.title);
  page.Svg(html::RenderTimeline(chart));
  return html::WritePage(path, page.Html());
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: pages_test_fixture OUT_DIR SOURCE_DIR intra:LOG inter:LOG gemm:CSV ...\n";
    return 2;
  }
  const std::string out = argv[1], root = argv[2];
  absl::StatusOr<Catalog> catalog = Catalog::Builtin();
  if (!catalog.ok()) {
    std::cerr << catalog.status() << "\n";
    return 1;
  }

  // Search: every TP x PP layout of the README's example on its 64 GPUs.
  v1::JobSpec base;
  const std::string job_path = root + "/examples/llama3-70b-h100.yaml";
  if (absl::Status s = ParseMessageFile(job_path, &base); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::vector<html::SearchCandidate> candidates;
  html::SearchCandidate chosen;
  for (int pp : {1, 2, 4, 8, 16}) {
    for (int tp : {1, 2, 4, 8}) {
      v1::JobSpec spec = base;
      spec.mutable_parallelism()->set_tp(tp);
      spec.mutable_parallelism()->set_pp(pp);
      spec.mutable_parallelism()->set_vpp(1);
      spec.mutable_parallelism()->set_dp(0);
      absl::StatusOr<Job> job = JobFromSpec(spec, *catalog, root + "/examples", nullptr);
      if (!job.ok()) continue;  // not a valid layout (the grid cell stays empty)
      absl::StatusOr<Prediction> p = Predict(*job);
      if (!p.ok()) continue;
      html::SearchCandidate c;
      c.row = absl::StrCat("PP=", pp);
      c.column = absl::StrCat("TP=", tp);
      c.layout = absl::StrCat("TP=", tp, " PP=", pp, " DP=", job->parallelism.dp, " VPP=", job->parallelism.vpp);
      c.step_time_s = p->step_time_s;
      c.mfu = p->mfu;
      c.fits = p->memory.fits;
      if (!c.fits) c.note = "does not fit in memory";
      if (c.fits && (chosen.layout.empty() || c.step_time_s < chosen.step_time_s)) chosen = c;
      candidates.push_back(c);
    }
  }
  html::SearchCounts counts;  // the grid above: every TP x PP pair, those that fit ranked
  counts.enumerated = 20;
  counts.evaluated = static_cast<int64_t>(candidates.size());
  counts.pruned = counts.enumerated - counts.evaluated;
  for (const auto& c : candidates) counts.fitting += c.fits;
  counts.listed = counts.evaluated;
  if (absl::Status s = html::WritePage(out + "/search.html", html::SearchPage("Llama 3 70B on 64 x H100 (TP x PP)",
                                                                              candidates, chosen, false, &counts));
      !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }

  // Calibration: published measurements as a run.
  v1::CalibrationRun run;
  run.mutable_conditions()->set_gpu_name("H100 80GB HBM3 (published measurements)");
  run.mutable_conditions()->set_gpu_count(8);
  run.mutable_profile()->set_name("published-h100");
  run.mutable_profile()->set_hardware("h100-sxm");
  std::vector<std::pair<double, double>> gemm_fit_in;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string path = root + "/" + a.substr(a.find(':') + 1);
    if (absl::StartsWith(a, "intra:")) AddNcclLog(path, v1::SCOPE_INTRA_NODE, run);
    if (absl::StartsWith(a, "inter:")) AddNcclLog(path, v1::SCOPE_INTER_NODE, run);
    if (absl::StartsWith(a, "gemm:")) AddTraceLensGemms(path, run, gemm_fit_in);
  }
  if (!gemm_fit_in.empty()) {
    const calibrate::GemmSizeFit fit = calibrate::FitGemmRate(gemm_fit_in);
    v1::GemmSizeFit* f = run.add_gemm_fits();
    f->set_dtype(v1::D_TYPE_BF16);
    f->set_r_max_flops_per_s(fit.r_max_flops_per_s);
    f->set_f_half_flops(fit.f_half_flops);
  }
  absl::StatusOr<Hardware> h100 = catalog->FindHardware("h100-sxm");
  if (!h100.ok()) {
    std::cerr << h100.status() << "\n";
    return 1;
  }
  if (absl::Status s = html::WritePage(out + "/calibrate.html", html::CalibrationPage(run, &*h100)); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }

  // The import of the same logs: a profile, no samples.
  std::vector<std::string> logs;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    logs.push_back(root + "/" + a.substr(a.find(':') + 1));
  }
  calibrate::ImportOptions options;
  options.hardware = "h100-sxm";
  absl::StatusOr<calibrate::ImportResult> imported =
      calibrate::ImportLogFiles(logs, *h100, h100->reference_profile, true, options);
  if (!imported.ok()) {
    std::cerr << imported.status() << "\n";
    return 1;
  }
  v1::CalibrationRun import_run;
  *import_run.mutable_profile() = imported->profile;
  if (absl::Status s = html::WritePage(out + "/calibrate-import.html", html::CalibrationPage(import_run, &*h100));
      !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  for (const auto& [name, vpp, forward_s] : {std::tuple{"timeline-1f1b", 1, 1.0}, std::tuple{"timeline-interleaved", 2, 0.5}}) {
    if (absl::Status s = WriteTimelinePage(absl::StrCat(out, "/", name, ".html"), vpp, forward_s); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace stepcast

int main(int argc, char** argv) { return stepcast::Main(argc, argv); }
