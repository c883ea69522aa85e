// stepcast: predict what an LLM training job will do before it runs.
//
//   stepcast predict JOB.yaml [--json] [--profile FILE] [--mfu X]
//   stepcast plan --target-tokens-per-s 2e5 --hardware h100-sxm,h200,l4
//   stepcast plan --budget-usd 2e6 --days 30 --params 30e9 --tokens 600e9 --hardware h100-sxm
//   stepcast catalog
//   stepcast validate published_runs.csv [--json]
//
// Exit codes: 0 success; 1 an internal or I/O error; 2 invalid input (the message names the
// field and the reason).
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "proto/catalog.h"
#include "proto/codec.h"

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "stepcast: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound ||
                 s.code() == absl::StatusCode::kFailedPrecondition
             ? 2
             : 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stepcast;
  CLI::App app{"stepcast: a calibrated performance model for LLM training"};
  app.require_subcommand(1);
  std::string presets_dir;
  app.add_option("--presets", presets_dir, "extra preset directory (hardware/*.yaml, models/*.yaml)");

  // predict
  auto* predict = app.add_subcommand("predict", "predict step time, bottleneck, memory, MFU and cost of a job");
  std::string job_path, profile_path;
  bool json = false;
  std::optional<double> mfu;
  predict->add_option("job", job_path, "job file (.yaml, .json, .textproto)")->required();
  predict->add_flag("--json", json, "print the prediction as JSON (stepcast.v1.Prediction)");
  predict->add_option("--profile", profile_path, "rate profile file (from stepcast-calibrate)");
  predict->add_option("--mfu", mfu, "quick estimate at an assumed MFU in (0, 1] (seeds 001, 004)");

  // plan
  auto* plan = app.add_subcommand("plan", "size a cluster for a throughput target or a budget");
  cli::PlanOptions po;
  std::string hw_list;
  plan->add_option("--hardware", hw_list, "comma-separated hardware presets")->required();
  plan->add_option("--model", po.model, "model preset (default: seed 000's 70B, 80 layers, d 8192)");
  plan->add_option("--params", po.n_params, "parameters when no --model");
  plan->add_option("--layers", po.layers, "layers when no --model");
  plan->add_option("--d-model", po.d_model, "hidden size when no --model");
  plan->add_option("--target-tokens-per-s", po.target_tokens_per_s, "throughput target (seed 000)");
  plan->add_option("--dp", po.dp_world_size, "data-parallel degree for the DP all-reduce term");
  plan->add_option("--utilization", po.utilization, "efficiency applied to every bound");
  plan->add_option("--recompute-mult", po.recompute_mult, "FLOP multiplier of recomputation");
  plan->add_option("--alpha-opt", po.alpha_opt_bytes_per_param, "optimizer HBM bytes per parameter per step");
  plan->add_option("--c-act", po.c_act, "activation traffic coefficient");
  plan->add_option("--global-tokens", po.global_tokens_per_step, "tokens per step");
  plan->add_option("--budget-usd", po.budget_usd, "budget (seed 004)");
  plan->add_option("--days", po.days, "deadline in days (seed 004)");
  plan->add_option("--tokens", po.dataset_tokens, "training tokens (default 20 N)");
  plan->add_option("--price", po.price_override, "$/GPU-hour for every hardware");

  // catalog
  auto* catalog_cmd = app.add_subcommand("catalog", "list hardware and model presets with their sources");
  bool verbose = false;
  catalog_cmd->add_flag("-v,--verbose", verbose, "print every source line");

  // validate
  auto* validate = app.add_subcommand("validate", "compare predictions with published measured runs");
  std::string csv_path;
  bool validate_json = false;
  validate->add_option("csv", csv_path, "CSV with the columns of published_runs.csv")->required();
  validate->add_flag("--json", validate_json, "print rows and summary as JSON");

  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<Catalog> catalog = Catalog::Builtin();
  if (!catalog.ok()) return Fail(catalog.status());
  if (!presets_dir.empty()) {
    if (absl::Status s = catalog->AddDirectory(presets_dir); !s.ok()) return Fail(s);
  }

  if (*predict) {
    std::optional<RateProfile> profile;
    if (!profile_path.empty()) {
      absl::StatusOr<RateProfile> p = LoadRateProfile(profile_path);
      if (!p.ok()) return Fail(p.status());
      profile = *std::move(p);
    }
    absl::StatusOr<Job> job = LoadJob(job_path, *catalog, profile ? &*profile : nullptr);
    if (!job.ok()) return Fail(job.status());
    absl::StatusOr<Prediction> p = mfu ? PredictAtMfu(*job, *mfu) : Predict(*job);
    if (!p.ok()) return Fail(p.status());
    if (json) {
      std::cout << ToJson(PredictionToProto(*p));
    } else {
      std::cout << cli::FormatReport(*job, *p);
    }
    return 0;
  }
  if (*plan) {
    for (size_t start = 0; start <= hw_list.size();) {
      size_t comma = hw_list.find(',', start);
      if (comma == std::string::npos) comma = hw_list.size();
      if (comma > start) po.hardware.push_back(hw_list.substr(start, comma - start));
      start = comma + 1;
    }
    absl::StatusOr<std::string> out = cli::Plan(po, *catalog);
    if (!out.ok()) return Fail(out.status());
    std::cout << *out;
    return 0;
  }
  if (*catalog_cmd) {
    std::cout << absl::StrFormat("%-12s %-18s %10s %10s %9s %10s %9s %8s\n", "preset", "hardware", "bf16 TF/s",
                                 "GEMM TF/s", "HBM GiB", "HBM TB/s", "usable", "$/GPU-h");
    for (const auto& [key, h] : catalog->hardware()) {
      double gemm = h.reference_profile.GemmRate(DType::kBF16, 8192, 8192, 8192).flops_per_s;
      std::cout << absl::StrFormat("%-12s %-18s %10.0f %10.0f %9.1f %10.2f %9.2f %8.2f\n", key, h.name,
                                   h.peak_bf16_flops_per_s / 1e12, gemm / 1e12, h.hbm_capacity_bytes / (1ull << 30),
                                   h.hbm_bandwidth_bytes_per_s / 1e12,
                                   h.reference_profile.hbm_bandwidth_bytes_per_s / 1e12, h.price_per_gpu_hour_usd);
      if (verbose) {
        for (const auto& s : h.sources) std::cout << "    source: " << s << "\n";
        for (const auto& g : h.reference_profile.gemm) {
          std::cout << "    gemm " << DTypeName(g.dtype) << ": " << g.source << "\n";
        }
        std::cout << "    hbm: " << h.reference_profile.hbm_source << "\n";
      }
    }
    std::cout << absl::StrFormat("\n%-22s %-26s %10s %10s  %s\n", "preset", "model", "params", "active", "source");
    for (const auto& [key, m] : catalog->models()) {
      const ParameterCounts c = CountParameters(m);
      std::cout << absl::StrFormat("%-22s %-26s %9.2fB %9.2fB  %s\n", key, m.name, c.total / 1e9, c.active / 1e9,
                                   verbose ? m.source : m.source.substr(0, 60));
    }
    return 0;
  }
  if (*validate) {
    absl::StatusOr<v1::ValidationReport> r = cli::Validate(csv_path, *catalog);
    if (!r.ok()) return Fail(r.status());
    std::cout << (validate_json ? ToJson(*r) : cli::FormatValidation(*r));
    return 0;
  }
  return 0;
}
