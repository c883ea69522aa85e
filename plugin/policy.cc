#include "plugin/policy.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepcast {

PolicyResult EvaluatePolicy(const v1::Prediction& p, const v1::PreflightPolicy& policy) {
  PolicyResult out;
  auto add = [&](const char* rule, v1::Verdict v, std::string msg, double value, double limit) {
    v1::PreflightReason r;
    r.set_rule(rule);
    r.set_verdict(v);
    r.set_message(std::move(msg));
    r.set_value(value);
    r.set_limit(limit);
    out.reasons.push_back(std::move(r));
    if (v > out.verdict) out.verdict = v;
  };
  const v1::Verdict breach = policy.limits_warn_only() ? v1::VERDICT_WARN : v1::VERDICT_FAIL;
  const auto& m = p.memory();
  const double gib = 1024.0 * 1024 * 1024;
  if (!m.fits()) {
    add("memory_fit", v1::VERDICT_FAIL,
        absl::StrFormat("needs %.1f GiB per GPU, %.1f GiB over the %.1f GiB capacity", m.total_bytes() / gib,
                        -m.headroom_bytes() / gib, m.capacity_bytes() / gib),
        m.total_bytes(), m.capacity_bytes());
  }
  if (policy.max_memory_fraction() > 0 && m.capacity_bytes() > 0) {
    const double frac = m.total_bytes() / m.capacity_bytes();
    if (frac > policy.max_memory_fraction() && m.fits()) {
      add("max_memory_fraction", breach,
          absl::StrFormat("uses %.0f%% of GPU memory, above the %.0f%% limit", 100 * frac,
                          100 * policy.max_memory_fraction()),
          frac, policy.max_memory_fraction());
    }
  }
  if (policy.min_mfu() > 0 && p.mfu() < policy.min_mfu()) {
    add("min_mfu", breach,
        absl::StrFormat("predicted MFU %.1f%% is below %.1f%%", 100 * p.mfu(), 100 * policy.min_mfu()), p.mfu(),
        policy.min_mfu());
  }
  if (policy.max_cost_per_run_usd() > 0) {
    if (p.cost().steps_per_run() <= 0) {
      add("max_cost_per_run_usd", v1::VERDICT_WARN,
          "cannot check the run cost: the job gives neither dataset_tokens nor train_iters", 0,
          policy.max_cost_per_run_usd());
    } else if (p.cost().per_run_usd() > policy.max_cost_per_run_usd()) {
      add("max_cost_per_run_usd", breach,
          absl::StrFormat("the run costs $%.0f, above $%.0f", p.cost().per_run_usd(), policy.max_cost_per_run_usd()),
          p.cost().per_run_usd(), policy.max_cost_per_run_usd());
    }
  }
  if (policy.max_cost_per_hour_usd() > 0 && p.cost().per_hour_usd() > policy.max_cost_per_hour_usd()) {
    add("max_cost_per_hour_usd", breach,
        absl::StrFormat("costs $%.2f per hour, above $%.2f", p.cost().per_hour_usd(), policy.max_cost_per_hour_usd()),
        p.cost().per_hour_usd(), policy.max_cost_per_hour_usd());
  }
  if (policy.max_step_time_s() > 0 && p.step_time_s() > policy.max_step_time_s()) {
    add("max_step_time_s", breach,
        absl::StrFormat("step time %.3f s is above %.3f s", p.step_time_s(), policy.max_step_time_s()),
        p.step_time_s(), policy.max_step_time_s());
  }
  for (int k : policy.warn_on_bottlenecks()) {
    if (k == p.bottleneck().kind()) {
      add("bottleneck", v1::VERDICT_WARN,
          absl::StrCat("bottleneck is ", v1::BottleneckKind_Name(p.bottleneck().kind()), ": ",
                       p.bottleneck().reason()),
          p.bottleneck().share(), 0);
    }
  }
  return out;
}

absl::Status ValidatePolicy(const v1::PreflightPolicy& p) {
  auto bad = [](const char* f, const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("policy.", f, ": ", why));
  };
  auto finite_nonneg = [](double x) { return std::isfinite(x) && x >= 0; };
  if (!finite_nonneg(p.min_mfu()) || p.min_mfu() > 1) return bad("min_mfu", "must be in [0, 1]");
  if (!finite_nonneg(p.max_memory_fraction()) || p.max_memory_fraction() > 1) {
    return bad("max_memory_fraction", "must be in [0, 1]");
  }
  if (!finite_nonneg(p.max_cost_per_run_usd())) return bad("max_cost_per_run_usd", "must be >= 0");
  if (!finite_nonneg(p.max_cost_per_hour_usd())) return bad("max_cost_per_hour_usd", "must be >= 0");
  if (!finite_nonneg(p.max_step_time_s())) return bad("max_step_time_s", "must be >= 0");
  for (int k : p.warn_on_bottlenecks()) {
    if (!v1::BottleneckKind_IsValid(k) || k == v1::BOTTLENECK_KIND_UNSPECIFIED) {
      return bad("warn_on_bottlenecks", "unknown bottleneck kind");
    }
  }
  return absl::OkStatus();
}

}  // namespace stepcast
