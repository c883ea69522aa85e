#include <chrono>
#include <cmath>
#include <filesystem>

#include "proto/launch_args.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "core/cost_per_bandwidth.h"
#include "core/scaling_estimates.h"
#include "core/search.h"
#include "proto/codec.h"
#include "proto/search_codec.h"

namespace stepcast::cli {

namespace {

// Seed 000's per-token model (datasheet peak and HBM, the NIC for the DP all-reduce, no memory)
// and seed 004's budget arithmetic, as the seeds wrote them (--seed-formulas).
absl::StatusOr<std::string> SeedPlan(const PlanOptions& o, const Catalog& catalog) {
  seed000::Model model{o.n_params, o.layers, o.d_model, 2};
  std::string model_name = absl::StrFormat("%.3gB params, %g layers, d_model %g", o.n_params / 1e9, o.layers, o.d_model);
  if (!o.model.empty()) {
    absl::StatusOr<ModelShape> m = catalog.FindModel(o.model);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("--model: ", m.status().message()));
    const ParameterCounts pc = CountParameters(*m);
    // MoE: seed 000's note, N -> active parameters.
    model = {pc.active, static_cast<double>(m->layers), static_cast<double>(m->hidden_size), 2};
    model_name = absl::StrFormat("%s (%.3gB active params)", m->name, pc.active / 1e9);
  }
  std::vector<Hardware> hws;
  for (const auto& name : o.hardware) {
    absl::StatusOr<Hardware> h = catalog.FindHardware(name);
    if (!h.ok()) return absl::InvalidArgumentError(absl::StrCat("--hardware: ", h.status().message()));
    hws.push_back(*h);
  }
  auto price = [&](const Hardware& h) { return o.price_override >= 0 ? o.price_override : h.price_per_gpu_hour_usd; };
  std::string out;
  if (o.target_tokens_per_s > 0) {
    seed000::TrainingCfg t;
    t.recompute_mult = o.recompute_mult;
    t.alpha_opt_bytes_per_param = o.alpha_opt_bytes_per_param;
    t.c_act = o.c_act;
    t.global_tokens_per_step = o.global_tokens_per_step;
    t.bytes_per_grad_elem = o.bytes_per_grad_elem;
    std::vector<seed000::Hardware> cands;
    for (const auto& h : hws) {
      seed000::Hardware s;
      s.name = h.name;
      s.peak_flops_tflops = h.peak_bf16_flops_per_s / 1e12;
      s.hbm_tbps = h.hbm_bandwidth_bytes_per_s / 1e12;
      s.nic_gbps = h.inter_node_bandwidth_bytes_per_s * 8 / 1e9;
      s.price_per_gpu_hr = price(h);
      s.utilization = o.utilization;
      cands.push_back(s);
    }
    absl::StrAppendFormat(&out,
                          "Cluster for %s tokens/s: %s, %g tokens/step, DP %d, utilization %.2f\n"
                          "(--seed-formulas: seed 000's per-token model from datasheet peak and HBM, the NIC for the "
                          "DP all-reduce; no memory check, no layout)\n\n",
                          absl::StrFormat("%.0f", o.target_tokens_per_s), model_name, o.global_tokens_per_step,
                          o.dp_world_size, o.utilization);
    absl::StrAppendFormat(&out, "%-18s %7s %11s %14s %9s %14s %12s\n", "hardware", "GPUs", "$/hour",
                          "tokens/s/GPU", "bound", "cluster TB/s", "$/TB/s-hr");
    for (const auto& p : seed000::CompareOptions(cands, model, t, o.target_tokens_per_s, o.dp_world_size)) {
      absl::StrAppendFormat(&out, "%-18s %7.0f %11.2f %14.2f %9s %14.3f %12.2f\n", p.hardware, p.gpus,
                            p.per_hr_usd, p.per_gpu_tokens_s, seed000::BoundName(p.bound), p.cluster_hbm_tbps,
                            p.per_tbps_hr_usd);
    }
  }
  if (o.budget_usd > 0) {
    if (o.days <= 0) return absl::InvalidArgumentError("--days: required (> 0) with --budget-usd");
    const double tokens = o.dataset_tokens > 0 ? o.dataset_tokens : estimates::ChinchillaDatasetTokens(model.n_params);
    if (!out.empty()) out += "\n";
    absl::StrAppendFormat(&out, "Budget $%.0f over %g days for %s on %.3g tokens%s (--seed-formulas: seed 004)\n\n", o.budget_usd,
                          o.days, model_name, tokens, o.dataset_tokens > 0 ? "" : " (Chinchilla 20 N)");
    absl::StrAppendFormat(&out, "%-18s %9s %12s %14s\n", "hardware", "$/GPU-hr", "GPUs", "required MFU");
    for (const auto& h : hws) {
      const double gpus = std::floor(estimates::GpusForBudget(o.budget_usd, price(h), o.days));
      const double mfu = estimates::RequiredMfu(model.n_params, tokens, o.days, gpus, h.peak_bf16_flops_per_s);
      absl::StrAppendFormat(&out, "%-18s %9.2f %12.0f %13.1f%%%s\n", h.name, price(h), gpus, 100 * mfu,
                            mfu > 0.6 ? "  (above what well-tuned runs reach)" : "");
    }
  }
  return out;
}

}  // namespace


namespace {

// GPU counts a plan tries, ascending: the divisors of a node below one node, then whole nodes
// x 2^k and x 3 * 2^k (the counts a power-of-two or 3 x 2^k global batch splits over), up to
// `max_gpus`.
std::vector<int64_t> PlanGpuCounts(int64_t gpus_per_node, int64_t max_gpus) {
  std::vector<int64_t> out;
  const int64_t node = std::max<int64_t>(1, gpus_per_node);
  for (int64_t d = 1; d < node && d <= max_gpus; ++d) {
    if (node % d == 0) out.push_back(d);
  }
  for (int64_t k = 1; node * k <= max_gpus; k *= 2) {
    out.push_back(node * k);
    if (k >= 2 && node * k / 2 * 3 <= max_gpus) out.push_back(node * k / 2 * 3);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// --time-limit's largest value (a week): a double -> duration cast above it could overflow.
constexpr double kMaxTimeLimitS = 7 * 86400;

std::string Money(double usd) {
  if (usd >= 1e6) return absl::StrFormat("$%.2fM", usd / 1e6);
  if (usd >= 1e3) return absl::StrFormat("$%.1fk", usd / 1e3);
  return absl::StrFormat("$%.2f", usd);
}

}  // namespace

namespace {

using PlanClock = std::chrono::steady_clock;

// The options the model-and-search plan needs beyond Plan's first checks: --days with a budget,
// --max-gpus in [1, the search's cap], --time-limit in [0, a week].
absl::Status CheckPlanOptions(const PlanOptions& o) {
  if (o.budget_usd > 0 && o.days <= 0) return absl::InvalidArgumentError("--days: required (> 0) with --budget-usd");
  if (o.max_gpus < 1) return absl::InvalidArgumentError(absl::StrCat("--max-gpus: ", o.max_gpus, " must be >= 1"));
  if (o.max_gpus > kSearchMaxGpuCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-gpus: ", o.max_gpus, " is above the layout search's cap of ", kSearchMaxGpuCount));
  }
  if (!(o.time_limit_s >= 0) || !std::isfinite(o.time_limit_s) || o.time_limit_s > kMaxTimeLimitS) {
    return absl::InvalidArgumentError(absl::StrCat("--time-limit: ", o.time_limit_s,
                                                   " must be a number of seconds in [0, ", kMaxTimeLimitS,
                                                   "] (0: none)"));
  }
  return absl::OkStatus();
}

// One deadline for the whole plan (every hardware, every GPU count): reliability review 2, N1.
// No --time-limit (0): none.
PlanClock::time_point PlanDeadline(const PlanOptions& o) {
  return o.time_limit_s > 0 ? PlanClock::now() + std::chrono::duration_cast<PlanClock::duration>(
                                                     std::chrono::duration<double>(o.time_limit_s))
                            : PlanClock::time_point::max();
}

// The job: a file (`dir`: its folder, which the file's paths are relative to), or a model preset
// with the batch; then --tokens and --price over it.
absl::Status PlanJobSpec(const PlanOptions& o, v1::JobSpec* spec, std::string* dir) {
  if (!o.job_path.empty()) {
    if (absl::Status s = ParseMessageFile(o.job_path, spec); !s.ok()) return s;
    *dir = std::filesystem::path(o.job_path).parent_path().string();
  } else if (!o.model.empty()) {
    if (o.seq_length <= 0) return absl::InvalidArgumentError("--seq-length: required (> 0) with --model");
    if (o.global_batch_size <= 0) return absl::InvalidArgumentError("--global-batch-size: required (> 0) with --model");
    spec->mutable_model()->set_preset(o.model);
    spec->mutable_training()->set_seq_length(o.seq_length);
    spec->mutable_training()->set_global_batch_size(o.global_batch_size);
    if (!o.framework.empty()) spec->mutable_framework()->set_preset(o.framework);
  } else {
    return absl::InvalidArgumentError(
        "plan: give a job file, or --model with --seq-length and --global-batch-size (or --seed-formulas for "
        "seed 000's per-token formulas)");
  }
  if (o.dataset_tokens > 0) spec->mutable_training()->set_dataset_tokens(o.dataset_tokens);
  if (o.price_override >= 0) spec->mutable_cluster()->set_price_per_gpu_hour_usd(o.price_override);
  return absl::OkStatus();
}

// --target-tokens-per-s on one hardware: the smallest count of `series` whose fastest layout
// reaches the target, one row of `target_table` (or why none: the time limit, the fastest found,
// or no layout fits). `stopped` is set when the time limit cut the plan short.
absl::Status AddTargetRow(const PlanOptions& o, const Job& job, const std::vector<int64_t>& series,
                          PlanClock::time_point deadline, std::string* stopped, std::string* target_table) {
  std::optional<RankedLayout> found, fastest;
  std::string why;
  int64_t stopped_at = 0;  // the GPU count the time limit stopped at
  for (int64_t g : series) {
    SearchOptions so;
    so.accept = FrameworkStartsLayout;
    so.top_n = 1;
    so.space.gpu_counts = {g};
    so.deadline = deadline;
    absl::StatusOr<SearchResult> r = SearchLayouts(job, so);
    if (!r.ok()) {
      if (r.status().code() == absl::StatusCode::kDeadlineExceeded) {
        *stopped = absl::StrCat("the time limit (--time-limit ", o.time_limit_s, " s) stopped the plan at ", g,
                                " GPUs on ", job.hardware.name);
        stopped_at = g;
        break;
      }
      if (r.status().code() != absl::StatusCode::kInvalidArgument) return r.status();
      why = std::string(r.status().message());
      continue;
    }
    if (r->partial && stopped->empty()) {
      *stopped = absl::StrCat("the time limit (--time-limit ", o.time_limit_s, " s) cut the search at ", g,
                              " GPUs on ", job.hardware.name, " short: the best found so far");
    }
    const RankedLayout& best = r->top.front();
    if (!fastest || best.prediction.tokens_per_s > fastest->prediction.tokens_per_s) fastest = best;
    if (best.prediction.tokens_per_s >= o.target_tokens_per_s) {
      found = best;
      break;
    }
  }
  if (found) {
    const Prediction& p = found->prediction;
    absl::StrAppendFormat(target_table, "%-18s %7d %-44s %9.4g %12s %6.1f%% %11s %10s %9.1f\n", job.hardware.name,
                          p.gpu_count, LayoutSummary(found->layout), p.step_time_s,
                          absl::StrFormat("%.0f", p.tokens_per_s), 100 * p.mfu, Money(p.cost.per_hour_usd),
                          absl::StrFormat("$%.3f", p.cost.per_step_usd / p.tokens_per_step * 1e6),
                          p.memory.total_bytes / (1024.0 * 1024 * 1024));
  } else if (stopped_at > 0) {
    absl::StrAppendFormat(target_table, "%-18s   not reached below %d GPUs before the time limit%s\n",
                          job.hardware.name, stopped_at,
                          fastest ? absl::StrFormat(": at most %.0f tokens/s (%d GPUs, %s)",
                                                    fastest->prediction.tokens_per_s, fastest->prediction.gpu_count,
                                                    LayoutSummary(fastest->layout))
                                  : "");
  } else if (fastest) {
    absl::StrAppendFormat(target_table, "%-18s   not reached up to %d GPUs: at most %.0f tokens/s (%d GPUs, %s)\n",
                          job.hardware.name, o.max_gpus, fastest->prediction.tokens_per_s,
                          fastest->prediction.gpu_count, LayoutSummary(fastest->layout));
  } else {
    absl::StrAppendFormat(target_table, "%-18s   no layout fits up to %d GPUs (%s)\n", job.hardware.name, o.max_gpus,
                          why);
  }
  return absl::OkStatus();
}

// --budget-usd on one hardware: the fastest layout on every count of `series`, then the rows of
// `budget_table`: the fewest GPUs that meet the deadline (--days) within budget, and the fastest
// run within budget (else the cheapest, over budget). `budget_tokens`: the tokens trained (the
// job's dataset_tokens, else train_iters x tokens per step, else Chinchilla's 20 N).
absl::Status AddBudgetRows(const PlanOptions& o, const Job& job, const std::vector<int64_t>& series,
                           PlanClock::time_point deadline, std::string* stopped, std::string* budget_table,
                           double* budget_tokens) {
  Job b = job;
  if (!(b.training.dataset_tokens > 0) && b.training.train_iters <= 0) {
    b.training.dataset_tokens = estimates::ChinchillaDatasetTokens(CountParameters(b.model).total);
  }
  *budget_tokens = b.training.dataset_tokens > 0 ? b.training.dataset_tokens
                                                 : static_cast<double>(b.training.train_iters) * b.TokensPerStep();
  // The fastest layout on every count up to --max-gpus (at a fixed count it is also the
  // cheapest: run cost = GPUs x price x time to train).
  SearchOptions so;
  so.accept = FrameworkStartsLayout;
  so.top_n = 1;
  so.space.gpu_counts = series;
  so.deadline = deadline;
  absl::StatusOr<SearchResult> r = SearchLayouts(b, so);
  if (!r.ok() && r.status().code() == absl::StatusCode::kDeadlineExceeded) {
    *stopped = absl::StrCat("the time limit (--time-limit ", o.time_limit_s, " s) stopped the plan on ",
                            job.hardware.name);
    absl::StrAppendFormat(budget_table, "%-18s   not searched: %s\n", job.hardware.name, *stopped);
    return absl::OkStatus();
  }
  if (r.ok() && r->partial && stopped->empty()) {
    *stopped = absl::StrCat("the time limit (--time-limit ", o.time_limit_s, " s) cut the search on ",
                            job.hardware.name, " short: the best found so far");
  }
  if (!r.ok()) {
    if (r.status().code() != absl::StatusCode::kInvalidArgument) return r.status();
    absl::StrAppendFormat(budget_table, "%-18s   %s\n", job.hardware.name, r.status().message());
    return absl::OkStatus();
  }
  const RankedLayout* fewest = nullptr;   // fewest GPUs that meet the deadline within budget
  const RankedLayout* fastest = nullptr;  // shortest run within budget
  const RankedLayout* cheapest = nullptr;
  for (const RankedLayout& x : r->best_per_gpu_count) {
    const CostEstimate& c = x.prediction.cost;
    if (cheapest == nullptr || c.per_run_usd < cheapest->prediction.cost.per_run_usd) cheapest = &x;
    if (c.per_run_usd > o.budget_usd) continue;
    if (fewest == nullptr && c.time_to_train_s <= o.days * 86400) fewest = &x;
    if (fastest == nullptr || c.time_to_train_s < fastest->prediction.cost.time_to_train_s) fastest = &x;
  }
  auto row = [&](const char* what, const RankedLayout& x) {
    const Prediction& p = x.prediction;
    absl::StrAppendFormat(budget_table, "%-18s %-26s %7d %-44s %8.1f %11s %6.1f%%\n", job.hardware.name, what,
                          p.gpu_count, LayoutSummary(x.layout), p.cost.time_to_train_s / 86400,
                          Money(p.cost.per_run_usd), 100 * p.mfu);
  };
  if (fewest != nullptr) {
    row("fewest GPUs by deadline", *fewest);
  } else {
    absl::StrAppendFormat(budget_table, "%-18s %-26s\n", job.hardware.name,
                          "no run meets both the deadline and the budget");
  }
  if (fastest != nullptr) {
    row("fastest within budget", *fastest);
  } else if (cheapest != nullptr) {
    row("cheapest (over budget)", *cheapest);
  }
  return absl::OkStatus();
}

// The plan's text: the target table and the budget table under their headers, then what the time
// limit cut short.
std::string FormatPlan(const PlanOptions& o, const v1::JobSpec& spec, const std::string& model_name,
                       const std::string& target_table, const std::string& budget_table, double budget_tokens,
                       const std::string& stopped) {
  std::string out;
  if (!target_table.empty()) {
    absl::StrAppendFormat(&out,
                          "GPUs for %.0f tokens/s: %s, global batch %d x %d tokens (stepcast model and layout search: "
                          "the fastest layout that fits on each GPU count; --seed-formulas for seed 000's estimate)\n\n",
                          o.target_tokens_per_s, model_name, spec.training().global_batch_size(),
                          spec.training().seq_length());
    absl::StrAppendFormat(&out, "%-18s %7s %-44s %9s %12s %7s %11s %10s %9s\n", "hardware", "GPUs", "layout", "step s",
                          "tokens/s", "MFU", "$/hour", "$/Mtok", "mem GiB");
    out += target_table;
  }
  if (!budget_table.empty()) {
    if (!out.empty()) out += "\n";
    absl::StrAppendFormat(&out,
                          "Budget %s over %g days for %s on %.3g tokens (the fastest layout that fits on each GPU "
                          "count up to %d; dataset: the job's, --tokens, else Chinchilla 20 N)\n\n",
                          Money(o.budget_usd), o.days, model_name, budget_tokens, o.max_gpus);
    absl::StrAppendFormat(&out, "%-18s %-26s %7s %-44s %8s %11s %7s\n", "hardware", "", "GPUs", "layout", "days",
                          "run cost", "MFU");
    out += budget_table;
  }
  if (!stopped.empty()) absl::StrAppend(&out, "\nPARTIAL: ", stopped, "\n");
  return out;
}

}  // namespace

absl::StatusOr<std::string> Plan(const PlanOptions& o, const Catalog& catalog) {
  if (o.hardware.empty()) return absl::InvalidArgumentError("--hardware: give at least one preset");
  if (o.target_tokens_per_s <= 0 && o.budget_usd <= 0) {
    return absl::InvalidArgumentError("give --target-tokens-per-s, or --budget-usd with --days");
  }
  if (o.seed_formulas) return SeedPlan(o, catalog);
  if (absl::Status s = CheckPlanOptions(o); !s.ok()) return s;
  const PlanClock::time_point deadline = PlanDeadline(o);
  std::string stopped;  // set when the time limit cut the plan short

  v1::JobSpec spec;
  std::string dir;
  if (absl::Status s = PlanJobSpec(o, &spec, &dir); !s.ok()) return s;

  std::string target_table, budget_table;
  std::string model_name;
  double budget_tokens = 0;
  for (const std::string& hw : o.hardware) {
    v1::JobSpec h = spec;
    h.mutable_hardware()->Clear();
    h.mutable_hardware()->set_preset(hw);
    absl::StatusOr<SearchBase> base = SearchBaseFromSpec(h, catalog, dir, nullptr);
    if (!base.ok()) {
      return absl::Status(base.status().code(), absl::StrCat("--hardware ", hw, ": ", base.status().message()));
    }
    const Job& job = base->job;
    model_name = job.model.name;
    const std::vector<int64_t> series = PlanGpuCounts(job.GpusPerNode(), o.max_gpus);
    {
      // The job's own fields against the search's caps, once (not "no layout fits" per count).
      SearchOptions so;
      so.accept = FrameworkStartsLayout;
      so.space.gpu_counts = series;
      if (absl::Status s = CheckSearchCaps(job, so); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(o.job_path.empty() ? "" : o.job_path + ": ", s.message()));
      }
    }
    if (o.target_tokens_per_s > 0) {
      if (absl::Status s = AddTargetRow(o, job, series, deadline, &stopped, &target_table); !s.ok()) return s;
    }
    if (o.budget_usd > 0) {
      if (absl::Status s = AddBudgetRows(o, job, series, deadline, &stopped, &budget_table, &budget_tokens); !s.ok()) {
        return s;
      }
    }
  }
  return FormatPlan(o, spec, model_name, target_table, budget_table, budget_tokens, stopped);
}

}  // namespace stepcast::cli
