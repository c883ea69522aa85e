#include "core/framework.h"

#include <algorithm>
#include <cmath>

namespace stepcast {

double OverlapMechanism::Exposed(double comm_s, double compute_s) const {
  if (!supported || comm_s <= 0) return std::max(comm_s, 0.0);
  const double eff = std::clamp(efficiency, 0.0, 1.0);
  return comm_s - eff * std::min(comm_s, std::max(compute_s, 0.0));
}

AttentionKernel::Lookup AttentionKernel::Rate(const std::string& architecture, DType dtype,
                                              int64_t seq_length, bool causal) const {
  Lookup out;
  // Causal rates for causal training; the other kind only when a table has none.
  auto collect = [&](DType d) {
    std::vector<const AttentionRate*> v, other;
    for (const AttentionRate& r : rates) {
      if (r.architecture != architecture || r.dtype != d) continue;
      (r.causal == causal ? v : other).push_back(&r);
    }
    if (v.empty() && !other.empty()) {
      out.extrapolated = true;
      return other;
    }
    return v;
  };
  std::vector<const AttentionRate*> pts = collect(dtype);
  if (pts.empty() && (dtype == DType::kFP8 || dtype == DType::kFP16)) {
    pts = collect(DType::kBF16);
    out.extrapolated = !pts.empty();
  }
  if (pts.empty()) return out;
  out.found = true;
  std::sort(pts.begin(), pts.end(),
            [](const AttentionRate* a, const AttentionRate* b) { return a->seq_length < b->seq_length; });
  // Rates that give no length hold for every length.
  if (pts.front()->seq_length <= 0 || seq_length <= 0) {
    const AttentionRate* r = pts.front()->seq_length <= 0 ? pts.front() : pts.back();
    out.forward_flops_per_s = r->forward_flops_per_s;
    out.backward_flops_per_s = r->backward_flops_per_s;
    return out;
  }
  const double x = std::log(static_cast<double>(seq_length));
  if (seq_length <= pts.front()->seq_length || seq_length >= pts.back()->seq_length) {
    const AttentionRate* r = seq_length <= pts.front()->seq_length ? pts.front() : pts.back();
    out.forward_flops_per_s = r->forward_flops_per_s;
    out.backward_flops_per_s = r->backward_flops_per_s;
    if (seq_length != r->seq_length) out.extrapolated = true;
    return out;
  }
  for (size_t i = 1; i < pts.size(); ++i) {
    if (seq_length > pts[i]->seq_length) continue;
    const double x0 = std::log(static_cast<double>(pts[i - 1]->seq_length));
    const double x1 = std::log(static_cast<double>(pts[i]->seq_length));
    const double w = x1 > x0 ? (x - x0) / (x1 - x0) : 0.0;
    out.forward_flops_per_s =
        pts[i - 1]->forward_flops_per_s + w * (pts[i]->forward_flops_per_s - pts[i - 1]->forward_flops_per_s);
    out.backward_flops_per_s =
        pts[i - 1]->backward_flops_per_s + w * (pts[i]->backward_flops_per_s - pts[i - 1]->backward_flops_per_s);
    break;
  }
  return out;
}

}  // namespace stepcast
