#include "proto/measured_run.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepcast {

absl::Status ValidateMeasuredRun(double step_time_s, double tokens_per_s, std::optional<double> mfu) {
  if (!std::isfinite(step_time_s) || step_time_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step_time_s: ", step_time_s, " must be a finite number > 0"));
  }
  if (step_time_s > kMaxMeasuredStepTimeS) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step_time_s: %g s is more than a day (%g s); is the unit ms or us?", step_time_s, kMaxMeasuredStepTimeS));
  }
  if (!std::isfinite(tokens_per_s) || tokens_per_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tokens_per_s: ", tokens_per_s, " must be a finite number > 0"));
  }
  if (mfu.has_value()) {
    if (!std::isfinite(*mfu) || *mfu < 0) {
      return absl::InvalidArgumentError(absl::StrCat("mfu: ", *mfu, " must be a finite fraction >= 0"));
    }
    if (*mfu > 1.0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "mfu: the measurement implies %.1f%% of the GPUs' peak FLOP/s, above 100%%: check the step time, "
          "tokens/s, GPU count and hardware",
          100.0 * *mfu));
    }
  }
  return absl::OkStatus();
}

}  // namespace stepcast
