// File: plugin/policy.h
//
// The pre-flight verdict: a prediction against a launcher's policy. Pure function.
#ifndef STEPCAST_PLUGIN_POLICY_H_
#define STEPCAST_PLUGIN_POLICY_H_

#include <string>

#include "absl/status/status.h"
#include "stepcast/v1/service.pb.h"

namespace stepcast {

// Rules, each giving one reason when triggered:
//   memory_fit           the job does not fit in memory                    -> FAIL (always)
//   memory_tight         over the capacity within the memory model's uncertainty -> WARN
//   max_memory_fraction  memory / capacity above the limit                 -> FAIL (WARN if limits_warn_only)
//   min_mfu              predicted MFU below the limit                     -> FAIL (WARN ...)
//   max_cost_per_run_usd, max_cost_per_hour_usd, max_step_time_s  above    -> FAIL (WARN ...)
//   bottleneck           the bottleneck is one of warn_on_bottlenecks      -> WARN
//   non_finite           a number of the prediction is NaN or infinite        -> FAIL (always)
// The verdict is the worst reason's, PASS when none triggers. A cost-per-run limit on a job with
// no dataset_tokens or train_iters cannot be checked and WARNs saying so.
// With the prediction's intervals (Prediction.step_time_interval, memory_interval; docs/
// VALIDATION.md "Intervals"): min_mfu, max_step_time_s and max_memory_fraction WARN, naming the
// limit and the interval, when the limit lies inside the interval, and give the breach verdict
// only when the whole interval breaks it; the memory verdict is the interval's (TIGHT -> WARN,
// does not fit even at its lower end -> FAIL). Without them, the point estimate decides.
struct PolicyResult {
  v1::Verdict verdict = v1::VERDICT_PASS;
  std::vector<v1::PreflightReason> reasons;
};
PolicyResult EvaluatePolicy(const v1::Prediction& prediction, const v1::PreflightPolicy& policy);

// The short lower-case name of a bottleneck kind for messages ("compute", "pipeline_bubble");
// "unknown(17)" for a value this build does not know (a newer server), never an exception.
std::string BottleneckKindShortName(int kind);

// A prediction from a server (or a stored one) is usable for a verdict only when its numbers are
// finite: NaN compares false with every limit, so a NaN step time would pass `max_step_time_s`.
// InvalidArgument naming the first non-finite field ("prediction.step_time_s: is NaN").
absl::Status CheckPredictionFinite(const v1::Prediction& prediction);

// Checks the policy's fields (non-negative limits, fractions and MFU at most 1, known
// bottleneck kinds). Errors name "policy.<field>".
absl::Status ValidatePolicy(const v1::PreflightPolicy& policy);

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_POLICY_H_
