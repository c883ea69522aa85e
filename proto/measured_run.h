// File: proto/measured_run.h
//
// Range checks of what a run reports it measured (`stepcast report` on the CLI side, ReportRun
// in the service): a measurement outside these ranges is a typo or a broken probe, and storing
// it would poison the comparison tables (issue 10: an MFU of 7,975,558% and a step time of
// 1e300 s were stored).
#ifndef STEPCAST_PROTO_MEASURED_RUN_H_
#define STEPCAST_PROTO_MEASURED_RUN_H_

#include <optional>

#include "absl/status/status.h"

namespace stepcast {

// Longest step time accepted, in seconds: one day. A training step of a real job is seconds to
// minutes; a day-long step is a unit error (ms or us given as s) or a stalled run.
inline constexpr double kMaxMeasuredStepTimeS = 86400.0;

// Checks one measurement. step_time_s and tokens_per_s: 0 means "not given" (report takes one
// of them); given values must be finite and > 0, the step time at most kMaxMeasuredStepTimeS.
// mfu (a fraction, 0.4 = 40%), when known (it needs the model FLOPs and the hardware peak):
// finite, >= 0 and at most 1 (a GPU cannot exceed its peak). InvalidArgument naming the field
// ("step_time_s: ...", "tokens_per_s: ...", "mfu: ...") and the reason.
absl::Status ValidateMeasuredRun(double step_time_s, double tokens_per_s, std::optional<double> mfu = std::nullopt);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_MEASURED_RUN_H_
