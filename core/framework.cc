#include "core/framework.h"

#include "absl/container/inlined_vector.h"
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

double MoeLaunchModel::RouterKernels(bool group_limited_router, bool router_fusion) const {
  double router = group_limited_router && group_limited_router_kernels > 0
                      ? group_limited_router_kernels
                      : std::max(0.0, kernels_before_sync - preprocess_kernels);
  if (router_fusion && fused_router_kernels > 0) router = std::min(router, fused_router_kernels);
  return router;
}

double MoeLaunchModel::KernelsBeforeSync(bool group_limited_router, bool router_fusion, bool flex_dispatcher) const {
  const double router = RouterKernels(group_limited_router, router_fusion);
  if (!flex_dispatcher) return router + preprocess_kernels;
  if (router_fusion && flex_fused_router_kernels_before_sync > 0) {
    return std::min(router, flex_fused_router_kernels_before_sync);
  }
  return router;
}

AttentionRateTable::AttentionRateTable(std::vector<AttentionRate> rates) {
  if (rates.empty()) return;
  auto d = std::make_shared<Data>();
  // Each rate's group (architectures in order of first appearance) found before any is moved.
  std::vector<size_t> group(rates.size());
  for (size_t i = 0; i < rates.size(); ++i) {
    size_t g = 0;
    while (g < d->ranges.size() && d->ranges[g].architecture != rates[i].architecture) ++g;
    if (g == d->ranges.size()) d->ranges.push_back({rates[i].architecture, 0, 0});
    group[i] = g;
  }
  d->rates.reserve(rates.size());
  for (size_t g = 0; g < d->ranges.size(); ++g) {
    d->ranges[g].first = d->rates.size();
    for (size_t i = 0; i < rates.size(); ++i) {
      if (group[i] == g) d->rates.push_back(std::move(rates[i]));
    }
    d->ranges[g].last = d->rates.size();
  }
  data_ = std::move(d);
}

std::pair<const AttentionRate*, const AttentionRate*> AttentionRateTable::OfArchitecture(
    std::string_view architecture) const {
  if (!data_) return {nullptr, nullptr};
  for (const Data::Range& g : data_->ranges) {
    if (g.architecture == architecture) {
      return {data_->rates.data() + g.first, data_->rates.data() + g.last};
    }
  }
  return {nullptr, nullptr};
}

void AttentionKernel::ScaleRates(double scale) {
  rates.Transform([scale](AttentionRate& r) {
    r.forward_flops_per_s *= scale;
    r.backward_flops_per_s *= scale;
  });
}

AttentionKernel::Lookup AttentionKernel::Rate(const std::string& architecture, DType dtype,
                                              int64_t seq_length, bool causal,
                                              std::string_view hardware_name, int64_t head_dim,
                                              int64_t window) const {
  // No allocation (inline vectors of the candidates): one pass over the architecture's rates per
  // (dtype, causal, kind) tried gathers the GPU-specific or the general ones; then their
  // nearest head dimension, the windows that bracket `window`, the lengths that bracket seq_length.
  //
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
  // 0: not a candidate; 1: a general rate of the architecture; 2: a rate naming this GPU.
  // (Not a structured binding: clang 14, the fuzz and sanitizer builds' compiler, cannot capture one.)
  const std::pair<const AttentionRate*, const AttentionRate*> arch = rates.OfArchitecture(architecture);
  const AttentionRate* const arch_first = arch.first;
  const AttentionRate* const arch_last = arch.second;
  auto candidate = [&](const AttentionRate& r, DType d, bool want_causal, bool windowed) -> int {
    if (r.dtype != d || r.causal != want_causal || (r.window > 0) != windowed) return 0;
    if (r.hardware.empty()) return 1;
    return names_this_gpu(r) ? 2 : 0;
  };
  // The head dimension asked for (0: the presets' 128); a measured head dimension's distance from
  // it in log scale, ties to the larger one.
  const double hd = head_dim > 0 ? static_cast<double>(head_dim) : 128.0;
  auto hd_distance = [&](int64_t r_hd) {  // the ratio >= 1, monotone in |log(r_hd / hd)|
    const double x = static_cast<double>(r_hd);
    return x > hd ? x / hd : hd / x;
  };
  // Rates linearly interpolated in log(x) between (xa, a) and (xb, b), at `x`.
  auto lerp_log = [](double x, double xa, double fwd_a, double bwd_a, double xb, double fwd_b, double bwd_b,
                     Lookup* out) {
    const double f = (std::log(x) - std::log(xa)) / (std::log(xb) - std::log(xa));
    out->forward_flops_per_s = fwd_a + f * (fwd_b - fwd_a);
    out->backward_flops_per_s = bwd_a + f * (bwd_b - bwd_a);
  };
  // Rates of `group` at one window (0: whole-sequence rates), interpolated linearly in
  // log(seq_length) between the bracketing lengths, the nearest end held outside them.
  using Group = absl::InlinedVector<const AttentionRate*, 24>;
  auto at_window = [&](const Group& group, int64_t w) {
    Lookup out;
    const AttentionRate *lo = nullptr, *hi = nullptr, *any = nullptr;
    for (const AttentionRate* r : group) {
      if (r->window != w) continue;
      out.found = true;
      if (r->seq_length <= 0) {
        if (any == nullptr) any = r;
        continue;
      }
      if (r->seq_length <= seq_length && (lo == nullptr || r->seq_length > lo->seq_length)) lo = r;
      if (r->seq_length >= seq_length && (hi == nullptr || r->seq_length < hi->seq_length)) hi = r;
    }
    if (!out.found) return out;
    if (lo == nullptr && hi == nullptr) {
      out.forward_flops_per_s = any->forward_flops_per_s;
      out.backward_flops_per_s = any->backward_flops_per_s;
      return out;
    }
    if (seq_length <= 0 || lo == nullptr || hi == nullptr || lo == hi || lo->seq_length == hi->seq_length) {
      const AttentionRate* r = hi != nullptr && (lo == nullptr || seq_length <= 0) ? hi : lo;
      out.forward_flops_per_s = r->forward_flops_per_s;
      out.backward_flops_per_s = r->backward_flops_per_s;
      if (r->seq_length != seq_length) out.extrapolated = true;
      return out;
    }
    lerp_log(static_cast<double>(seq_length), static_cast<double>(lo->seq_length), lo->forward_flops_per_s,
             lo->backward_flops_per_s, static_cast<double>(hi->seq_length), hi->forward_flops_per_s,
             hi->backward_flops_per_s, &out);
    return out;
  };
  // One (dtype, causal, kind): one pass over the architecture's rates gathers the candidates (the
  // GPU's own rates if any, else the architecture's general ones), then the nearest head
  // dimension's (`hd_out`: the one taken, 0 when none is named). Whole-sequence rates; or, for a
  // window, the windowed ones interpolated linearly in log(window) between the measured windows
  // that bracket it; below the narrowest the narrowest held (flagged); above the widest toward
  // `whole` (the whole causal sequence's rates, which are a window of seq_length's), or the widest
  // held (flagged) when `whole` was not found.
  auto scan = [&](DType d, bool want_causal, bool windowed, int64_t* hd_out, const Lookup& whole) {
    Group general, specific;
    for (const AttentionRate* r = arch_first; r != arch_last; ++r) {
      const int cls = candidate(*r, d, want_causal, windowed);
      if (cls == 1) general.push_back(r);
      if (cls == 2) specific.push_back(r);
    }
    Group& all = specific.empty() ? general : specific;
    if (all.empty()) return Lookup{};
    int64_t best_hd = 0;
    for (const AttentionRate* r : all) {
      if (r->head_dim <= 0 || r->head_dim == best_hd) continue;
      const double dr = hd_distance(r->head_dim), db = best_hd > 0 ? hd_distance(best_hd) : 0;
      if (best_hd == 0 || dr < db - 1e-12 || (std::fabs(dr - db) <= 1e-12 && r->head_dim > best_hd)) best_hd = r->head_dim;
    }
    *hd_out = best_hd;
    Group group;
    for (const AttentionRate* r : all) {
      if (r->head_dim == best_hd || r->head_dim <= 0) group.push_back(r);
    }
    if (!windowed) return at_window(group, 0);
    int64_t wlo = 0, whi = 0;
    for (const AttentionRate* r : group) {
      if (r->window <= window && r->window > wlo) wlo = r->window;
      if (r->window >= window && (whi == 0 || r->window < whi)) whi = r->window;
    }
    auto between = [&](const Lookup& a, double wa, const Lookup& b, double wb) {
      Lookup out = a;
      out.extrapolated = a.extrapolated || b.extrapolated;
      lerp_log(static_cast<double>(window), wa, a.forward_flops_per_s, a.backward_flops_per_s, wb,
               b.forward_flops_per_s, b.backward_flops_per_s, &out);
      return out;
    };
    if (whi == 0 && whole.found && seq_length > wlo) {  // wider than every measured window
      return between(at_window(group, wlo), static_cast<double>(wlo), whole, static_cast<double>(seq_length));
    }
    if (wlo == 0 || whi == 0 || wlo == whi) {
      const int64_t w = wlo != 0 ? wlo : whi;
      Lookup out = at_window(group, w);
      if (w != window) out.extrapolated = true;
      return out;
    }
    return between(at_window(group, wlo), static_cast<double>(wlo), at_window(group, whi), static_cast<double>(whi));
  };
  // The fallbacks: the other kind (causal / not) of the same dtype, then bf16 for fp8 / fp16.
  auto fallbacks = [&](bool windowed, int64_t* hd_out, const Lookup& whole) {
    Lookup out = scan(dtype, causal, windowed, hd_out, whole);
    if (!out.found) {
      out = scan(dtype, !causal, windowed, hd_out, whole);
      out.extrapolated = out.extrapolated || out.found;
    }
    if (!out.found && (dtype == DType::kFP8 || dtype == DType::kFP16)) {
      out = scan(DType::kBF16, causal, windowed, hd_out, whole);
      if (!out.found) out = scan(DType::kBF16, !causal, windowed, hd_out, whole);
      out.extrapolated = out.extrapolated || out.found;
    }
    return out;
  };
  int64_t whole_hd = 0;
  Lookup whole = fallbacks(false, &whole_hd, Lookup{});
  // A rate taken at another head dimension than the job's is flagged.
  if (whole.found && head_dim > 0 && whole_hd > 0 && whole_hd != head_dim) whole.extrapolated = true;
  if (window <= 0 || (seq_length > 0 && window >= seq_length)) return whole;  // as long as the sequence: whole
  // The windowed rates serve only when measured at a head dimension as near the job's as the
  // whole-sequence rates' (64-wide windowed measurements do not serve a 128-wide model); else the
  // band runs at the whole-sequence rate, flagged.
  int64_t window_hd = 0;
  Lookup windowed = fallbacks(true, &window_hd, whole);
  if (windowed.found && (whole_hd == 0 || window_hd == 0 || hd_distance(window_hd) <= hd_distance(whole_hd) + 1e-12)) {
    if (head_dim > 0 && window_hd > 0 && window_hd != head_dim) windowed.extrapolated = true;
    return windowed;
  }
  whole.extrapolated = whole.extrapolated || whole.found;
  return whole;
}

}  // namespace stepcast
