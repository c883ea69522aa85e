#include "plugin/policy.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepcast {

std::string BottleneckKindShortName(int kind) {
  if (!v1::BottleneckKind_IsValid(kind)) return absl::StrCat("unknown(", kind, ")");
  std::string n = v1::BottleneckKind_Name(static_cast<v1::BottleneckKind>(kind));
  if (absl::StartsWith(n, "BOTTLENECK_KIND_")) n = n.substr(16);
  if (n.empty()) return absl::StrCat("unknown(", kind, ")");
  return absl::AsciiStrToLower(n);
}

absl::Status CheckPredictionFinite(const v1::Prediction& p) {
  auto check = [](const char* field, double x) -> absl::Status {
    if (std::isfinite(x)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("prediction.", field, ": is ", std::isnan(x) ? "NaN" : "infinite",
                     " (an input of the job is out of range)"));
  };
  const std::pair<const char*, double> fields[] = {
      {"step_time_s", p.step_time_s()},
      {"tokens_per_step", p.tokens_per_step()},
      {"tokens_per_s", p.tokens_per_s()},
      {"model_flops_per_step", p.model_flops_per_step()},
      {"peak_flops_per_s_per_gpu", p.peak_flops_per_s_per_gpu()},
      {"mfu", p.mfu()},
      {"hfu", p.hfu()},
      {"memory.total_bytes", p.memory().total_bytes()},
      {"memory.capacity_bytes", p.memory().capacity_bytes()},
      {"memory.headroom_bytes", p.memory().headroom_bytes()},
      {"cost.per_hour_usd", p.cost().per_hour_usd()},
      {"cost.per_step_usd", p.cost().per_step_usd()},
      {"cost.per_run_usd", p.cost().per_run_usd()},
      {"cost.energy_per_step_j", p.cost().energy_per_step_j()},
      {"cost.energy_per_run_kwh", p.cost().energy_per_run_kwh()},
      {"cost.steps_per_run", p.cost().steps_per_run()},
      {"bottleneck.share", p.bottleneck().share()},
  };
  for (const auto& [field, x] : fields) {
    if (absl::Status s = check(field, x); !s.ok()) return s;
  }
  if (!(p.step_time_s() > 0)) return absl::InvalidArgumentError("prediction.step_time_s: must be > 0");
  return absl::OkStatus();
}

namespace {

// EvaluatePolicy's rules (policy.h), one function each, in the order they are checked (the order
// of the reasons).

// Adds a reason to the result; the verdict is the worst reason's.
class AddReason {
 public:
  explicit AddReason(PolicyResult* out) : out_(out) {}
  void operator()(const char* rule, v1::Verdict v, std::string msg, double value, double limit) const {
    v1::PreflightReason r;
    r.set_rule(rule);
    r.set_verdict(v);
    r.set_message(std::move(msg));
    r.set_value(value);
    r.set_limit(limit);
    out_->reasons.push_back(std::move(r));
    if (v > out_->verdict) out_->verdict = v;
  }

 private:
  PolicyResult* out_;
};

// The prediction's intervals (docs/VALIDATION.md "Intervals"), when usable (present, finite, upper
// end above 0): a limit inside an interval WARNs with both numbers; only a limit the whole
// interval breaks gives the breach verdict. Without a step-time interval, both step ends are the
// point estimate.
struct Intervals {
  bool step_interval = false;
  double step_lo = 0, step_hi = 0;
  bool memory_interval = false;
};
Intervals IntervalsOf(const v1::Prediction& p) {
  Intervals iv;
  iv.step_interval = p.has_step_time_interval() && p.step_time_interval().high_s() > 0 &&
                     std::isfinite(p.step_time_interval().low_s()) && std::isfinite(p.step_time_interval().high_s());
  iv.step_lo = iv.step_interval ? p.step_time_interval().low_s() : p.step_time_s();
  iv.step_hi = iv.step_interval ? p.step_time_interval().high_s() : p.step_time_s();
  const auto& mi = p.memory_interval();
  iv.memory_interval = p.has_memory_interval() && mi.available() && std::isfinite(mi.low_bytes()) &&
                       std::isfinite(mi.high_bytes()) && mi.high_bytes() > 0;
  return iv;
}

// memory_tight / memory_fit: the memory interval's verdict (TIGHT -> WARN, does not fit even at
// its lower end -> FAIL); without it, the point estimate's (over the capacity within the memory
// model's uncertainty, core/memory.h -> WARN; beyond it -> FAIL).
void MemoryFitRule(const v1::Prediction& p, const Intervals& iv, const AddReason& add) {
  const auto& m = p.memory();
  const auto& mi = p.memory_interval();
  const bool memory_interval = iv.memory_interval;
  const double gib = 1024.0 * 1024 * 1024;
  if (memory_interval && mi.verdict() == v1::MEMORY_VERDICT_TIGHT) {
    add("memory_tight", v1::VERDICT_WARN,
        absl::StrFormat("the %.1f GiB capacity lies inside the %.0f%% interval %.1f-%.1f GiB of the memory per GPU "
                        "(predicted %.1f GiB): it may not fit",
                        m.capacity_bytes() / gib, 100 * mi.coverage(), mi.low_bytes() / gib, mi.high_bytes() / gib,
                        m.total_bytes() / gib),
        m.total_bytes(), m.capacity_bytes());
  } else if (memory_interval && mi.verdict() == v1::MEMORY_VERDICT_DOES_NOT_FIT) {
    add("memory_fit", v1::VERDICT_FAIL,
        absl::StrFormat("needs %.1f GiB per GPU (%.0f%% interval %.1f-%.1f GiB), over the %.1f GiB capacity even at "
                        "the interval's lower end",
                        m.total_bytes() / gib, 100 * mi.coverage(), mi.low_bytes() / gib, mi.high_bytes() / gib,
                        m.capacity_bytes() / gib),
        m.total_bytes(), m.capacity_bytes());
  } else if (memory_interval) {
    // Fits at the interval's upper end.
  } else if (!m.fits() && m.tight()) {
    // Over the capacity only within the memory model's uncertainty (core/memory.h): WARN.
    add("memory_tight", v1::VERDICT_WARN,
        absl::StrFormat("needs %.1f GiB per GPU, %.1f GiB over the %.1f GiB capacity but within the memory "
                        "model's uncertainty: may not fit",
                        m.total_bytes() / gib, -m.headroom_bytes() / gib, m.capacity_bytes() / gib),
        m.total_bytes(), m.capacity_bytes());
  } else if (!m.fits()) {
    add("memory_fit", v1::VERDICT_FAIL,
        absl::StrFormat("needs %.1f GiB per GPU, %.1f GiB over the %.1f GiB capacity", m.total_bytes() / gib,
                        -m.headroom_bytes() / gib, m.capacity_bytes() / gib),
        m.total_bytes(), m.capacity_bytes());
  }
}

// max_memory_fraction: memory / capacity above the limit; with the memory interval, the breach
// only when its lower end is above the limit (and the job fits at it: memory_fit already FAILs),
// WARN when the limit lies inside it.
void MaxMemoryFractionRule(const v1::Prediction& p, const v1::PreflightPolicy& policy, const Intervals& iv,
                           v1::Verdict breach, const AddReason& add) {
  const auto& m = p.memory();
  const auto& mi = p.memory_interval();
  if (policy.max_memory_fraction() > 0 && m.capacity_bytes() > 0) {
    const double frac = m.total_bytes() / m.capacity_bytes();
    const double lim = policy.max_memory_fraction();
    if (iv.memory_interval) {
      const double lo = mi.low_bytes() / m.capacity_bytes(), hi = mi.high_bytes() / m.capacity_bytes();
      if (lo > lim && mi.verdict() != v1::MEMORY_VERDICT_DOES_NOT_FIT) {
        add("max_memory_fraction", breach,
            absl::StrFormat("uses %.0f%% of GPU memory (%.0f%% interval %.0f-%.0f%%), above the %.0f%% limit even at "
                            "the interval's lower end",
                            100 * frac, 100 * mi.coverage(), 100 * lo, 100 * hi, 100 * lim),
            frac, lim);
      } else if (hi > lim && lo <= lim) {
        add("max_memory_fraction", v1::VERDICT_WARN,
            absl::StrFormat("the %.0f%% memory limit lies inside the %.0f%% interval %.0f-%.0f%% of GPU memory "
                            "(predicted %.0f%%)",
                            100 * lim, 100 * mi.coverage(), 100 * lo, 100 * hi, 100 * frac),
            frac, lim);
      }
    } else if (frac > lim && m.fits()) {
      add("max_memory_fraction", breach,
          absl::StrFormat("uses %.0f%% of GPU memory, above the %.0f%% limit", 100 * frac, 100 * lim), frac, lim);
    }
  }
}

// min_mfu: predicted MFU below the limit; MFU scales as 1 / step time, so the step-time
// interval's upper end is the MFU interval's lower end.
void MinMfuRule(const v1::Prediction& p, const v1::PreflightPolicy& policy, const Intervals& iv, v1::Verdict breach,
                const AddReason& add) {
  const bool step_interval = iv.step_interval;
  if (policy.min_mfu() > 0) {
    // MFU scales as 1 / step time: the interval's upper step end is its lower MFU end.
    const double mfu_lo = p.mfu() * p.step_time_s() / iv.step_hi, mfu_hi = p.mfu() * p.step_time_s() / iv.step_lo;
    const double lim = policy.min_mfu();
    if (step_interval && mfu_hi < lim) {
      add("min_mfu", breach,
          absl::StrFormat("predicted MFU %.1f%% (%.0f%% interval %.1f-%.1f%%) is below %.1f%% even at the "
                          "interval's upper end",
                          100 * p.mfu(), 100 * p.step_time_interval().coverage(), 100 * mfu_lo, 100 * mfu_hi, 100 * lim),
          p.mfu(), lim);
    } else if (step_interval && mfu_lo < lim) {
      add("min_mfu", v1::VERDICT_WARN,
          absl::StrFormat("the %.1f%% minimum MFU lies inside the %.0f%% interval %.1f-%.1f%% (predicted %.1f%%)",
                          100 * lim, 100 * p.step_time_interval().coverage(), 100 * mfu_lo, 100 * mfu_hi,
                          100 * p.mfu()),
          p.mfu(), lim);
    } else if (!step_interval && p.mfu() < lim) {
      add("min_mfu", breach,
          absl::StrFormat("predicted MFU %.1f%% is below %.1f%%", 100 * p.mfu(), 100 * lim), p.mfu(), lim);
    }
  }
}

// max_cost_per_run_usd (WARNs that it cannot be checked when the job gives neither dataset_tokens
// nor train_iters) and max_cost_per_hour_usd.
void CostRules(const v1::Prediction& p, const v1::PreflightPolicy& policy, v1::Verdict breach, const AddReason& add) {
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
}

// max_step_time_s: with the step-time interval, the breach only when its lower end is above the
// limit, WARN when the limit lies inside it.
void MaxStepTimeRule(const v1::Prediction& p, const v1::PreflightPolicy& policy, const Intervals& iv,
                     v1::Verdict breach, const AddReason& add) {
  const bool step_interval = iv.step_interval;
  const double step_lo = iv.step_lo, step_hi = iv.step_hi;
  if (policy.max_step_time_s() > 0) {
    const double lim = policy.max_step_time_s();
    if (step_interval && step_lo > lim) {
      add("max_step_time_s", breach,
          absl::StrFormat("step time %.3f s (%.0f%% interval %.3f-%.3f s) is above %.3f s even at the interval's "
                          "lower end",
                          p.step_time_s(), 100 * p.step_time_interval().coverage(), step_lo, step_hi, lim),
          p.step_time_s(), lim);
    } else if (step_interval && step_hi > lim) {
      add("max_step_time_s", v1::VERDICT_WARN,
          absl::StrFormat("the %.3f s limit lies inside the %.0f%% interval %.3f-%.3f s of the step time "
                          "(predicted %.3f s)",
                          lim, 100 * p.step_time_interval().coverage(), step_lo, step_hi, p.step_time_s()),
          p.step_time_s(), lim);
    } else if (!step_interval && p.step_time_s() > lim) {
      add("max_step_time_s", breach,
          absl::StrFormat("step time %.3f s is above %.3f s", p.step_time_s(), lim), p.step_time_s(), lim);
    }
  }
}

// bottleneck: the prediction's bottleneck is one of warn_on_bottlenecks -> WARN.
void BottleneckRule(const v1::Prediction& p, const v1::PreflightPolicy& policy, const AddReason& add) {
  for (int k : policy.warn_on_bottlenecks()) {
    if (k == p.bottleneck().kind()) {
      add("bottleneck", v1::VERDICT_WARN,
          absl::StrCat("bottleneck is ", BottleneckKindShortName(p.bottleneck().kind()), ": ",
                       p.bottleneck().reason()),
          p.bottleneck().share(), 0);
    }
  }
}

}  // namespace

PolicyResult EvaluatePolicy(const v1::Prediction& p, const v1::PreflightPolicy& policy) {
  PolicyResult out;
  const AddReason add(&out);
  // NaN compares false with every limit below: a prediction that is not finite FAILs outright.
  if (absl::Status s = CheckPredictionFinite(p); !s.ok()) {
    add("non_finite", v1::VERDICT_FAIL, std::string(s.message()), 0, 0);
    return out;
  }
  const v1::Verdict breach = policy.limits_warn_only() ? v1::VERDICT_WARN : v1::VERDICT_FAIL;
  const Intervals iv = IntervalsOf(p);
  MemoryFitRule(p, iv, add);
  MaxMemoryFractionRule(p, policy, iv, breach, add);
  MinMfuRule(p, policy, iv, breach, add);
  CostRules(p, policy, breach, add);
  MaxStepTimeRule(p, policy, iv, breach, add);
  BottleneckRule(p, policy, add);
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
