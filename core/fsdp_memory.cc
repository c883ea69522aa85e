#include "core/fsdp_memory.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace stepcast::seed003 {

FfnModelMemory FfnMemory(int64_t blocks, int64_t d_model, int64_t d_ff, double tokens) {
  FfnModelMemory m;
  m.params = static_cast<double>(blocks) * 2.0 * d_model * d_ff;
  m.params_bytes = 4 * m.params;
  m.grads_bytes = 4 * m.params;
  m.optimizer_bytes = 8 * m.params;
  m.static_bytes = m.params_bytes + m.grads_bytes + m.optimizer_bytes;
  m.activation_bytes = static_cast<double>(blocks) * (d_model + d_ff) * 2.0 * tokens;
  return m;
}

int64_t DevicesToFitUnsharded(const FfnModelMemory& m, double cap) {
  return static_cast<int64_t>(std::ceil((m.static_bytes + m.activation_bytes) / cap));
}

double PerDeviceBytes(const FfnModelMemory& m, double f, int64_t n) {
  return (m.static_bytes + f * m.activation_bytes) / n + (1 - f) * m.activation_bytes;
}

absl::StatusOr<int64_t> FsdpDegreeToFit(const FfnModelMemory& m, double f, double cap) {
  const double fixed = (1 - f) * m.activation_bytes;
  if (fixed >= cap) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no FSDP degree fits: the unsharded activations alone take %.1f GiB per device, over "
        "the %.1f GiB capacity",
        fixed / (1ull << 30), cap / (1ull << 30)));
  }
  return static_cast<int64_t>(std::ceil((m.static_bytes + f * m.activation_bytes) / (cap - fixed)));
}

}  // namespace stepcast::seed003
