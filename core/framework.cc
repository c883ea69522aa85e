#include "core/framework.h"

#include "absl/strings/match.h"

#include <algorithm>
#include <cmath>

namespace stepcast {

double PipelinedExposed(double comm_s, double window_s, double chunks) {
  if (!(comm_s > 0)) return 0;
  const double n = std::max(1.0, chunks);
  const double w = std::max(0.0, window_s);
  return std::clamp(std::max(comm_s / n, comm_s - w * (n - 1) / n), 0.0, comm_s);
}

double ContentionCost(double hidden_s, double slowdown) {
  if (!(hidden_s > 0) || !(slowdown > 0)) return 0;
  return hidden_s * slowdown / (1 + slowdown);
}

double OverlapMechanism::Buckets(double params, double bytes_per_param, int64_t dp) const {
  if (!(params > 0)) return 1;
  double n = 1;
  const double by_params =
      std::max(static_cast<double>(bucket_min_params), static_cast<double>(bucket_params_per_dp_rank) * std::max<int64_t>(1, dp));
  if (by_params > 0) n = std::max(n, std::ceil(params / by_params));
  if (bucket_bytes > 0 && bytes_per_param > 0) n = std::max(n, std::ceil(params * bytes_per_param / bucket_bytes));
  return n;
}

double OverlapMechanism::Exposed(double comm_s, double compute_s) const {
  if (!supported || comm_s <= 0) return std::max(comm_s, 0.0);
  const double eff = std::clamp(efficiency, 0.0, 1.0);
  return comm_s - eff * std::min(comm_s, std::max(compute_s, 0.0));
}

void AttentionKernel::ScaleRates(double scale) {
  rates.Transform([scale](AttentionRate& r) {
    r.forward_flops_per_s *= scale;
    r.backward_flops_per_s *= scale;
  });
}

AttentionKernel::Lookup AttentionKernel::Rate(const std::string& architecture, DType dtype,
                                              int64_t seq_length, bool causal,
                                              std::string_view hardware_name) const {
  // No allocation: one pass finds, among the rates of (architecture, dtype[, causal]), the
  // measured lengths that bracket seq_length (or the nearest end).
  Lookup out;
  struct Pick {
    const AttentionRate* below = nullptr;  // largest length <= seq
    const AttentionRate* above = nullptr;  // smallest length >= seq
    const AttentionRate* any = nullptr;    // a rate without a length
    bool found = false;
  };
  // The architecture compared by length and first character before its bytes (most rates are of
  // another GPU, often of a name as long: "ampere", "hopper").
  const char first = architecture.empty() ? '\0' : architecture[0];
  // A rate that names GPUs applies to a job whose hardware name holds one of them (in any case),
  // and then wins over the architecture's general rates.
  auto names_this_gpu = [&](const AttentionRate& r) {
    for (const std::string& part : r.hardware) {
      for (size_t i = 0; !part.empty() && i + part.size() <= hardware_name.size(); ++i) {
        if (absl::EqualsIgnoreCase(absl::string_view(hardware_name.data() + i, part.size()), part)) return true;
      }
    }
    return false;
  };
  auto scan = [&](DType d, bool want_causal) {
    Pick general, specific;
    for (const AttentionRate& r : rates) {
      if (r.dtype != d || r.causal != want_causal || r.architecture.size() != architecture.size() ||
          (!architecture.empty() && r.architecture[0] != first) || r.architecture != architecture) {
        continue;  // cheap tests first
      }
      Pick* p = &general;
      if (!r.hardware.empty()) {
        if (!names_this_gpu(r)) continue;
        p = &specific;
      }
      p->found = true;
      if (r.seq_length <= 0) {
        if (p->any == nullptr) p->any = &r;
        continue;
      }
      if (r.seq_length <= seq_length && (p->below == nullptr || r.seq_length > p->below->seq_length)) p->below = &r;
      if (r.seq_length >= seq_length && (p->above == nullptr || r.seq_length < p->above->seq_length)) p->above = &r;
    }
    return specific.found ? specific : general;
  };
  Pick p = scan(dtype, causal);
  if (!p.found) {  // the other kind (causal / not) of the same dtype
    p = scan(dtype, !causal);
    out.extrapolated = p.found;
  }
  if (!p.found && (dtype == DType::kFP8 || dtype == DType::kFP16)) {
    p = scan(DType::kBF16, causal);
    if (!p.found) p = scan(DType::kBF16, !causal);
    out.extrapolated = p.found;
  }
  if (!p.found) return out;
  out.found = true;
  const AttentionRate* lo = p.below;
  const AttentionRate* hi = p.above;
  if (lo == nullptr && hi == nullptr) {
    out.forward_flops_per_s = p.any->forward_flops_per_s;
    out.backward_flops_per_s = p.any->backward_flops_per_s;
    return out;
  }
  if (seq_length <= 0 || lo == nullptr || hi == nullptr || lo == hi || lo->seq_length == hi->seq_length) {
    const AttentionRate* r = hi != nullptr && (lo == nullptr || seq_length <= 0) ? hi : lo;
    out.forward_flops_per_s = r->forward_flops_per_s;
    out.backward_flops_per_s = r->backward_flops_per_s;
    if (r->seq_length != seq_length) out.extrapolated = true;
    return out;
  }
  // Linear in log(seq_length) between the bracketing lengths.
  const double x0 = std::log(static_cast<double>(lo->seq_length));
  const double x1 = std::log(static_cast<double>(hi->seq_length));
  const double w = (std::log(static_cast<double>(seq_length)) - x0) / (x1 - x0);
  out.forward_flops_per_s = lo->forward_flops_per_s + w * (hi->forward_flops_per_s - lo->forward_flops_per_s);
  out.backward_flops_per_s = lo->backward_flops_per_s + w * (hi->backward_flops_per_s - lo->backward_flops_per_s);
  return out;
}

}  // namespace stepcast
