#include "core/hardware.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace stepcast {

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kSendRecv: return "send_recv";
  }
  return "?";
}

const char* ScopeName(Scope s) {
  return s == Scope::kIntraNode ? "intra_node" : "inter_node";
}

const char* RateOriginName(RateOrigin o) {
  switch (o) {
    case RateOrigin::kUnknown: return "unknown";
    case RateOrigin::kMeasured: return "measured";
    case RateOrigin::kImported: return "imported";
    case RateOrigin::kReference: return "reference";
  }
  return "?";
}

namespace {

// The bodies of BusBwFactor, RingSteps and AlphaForGroup, inlined into EstimateCollective (the
// step model asks for ~10 collectives per prediction); the public functions call them.
inline double BusBwFactorOf(Collective c, int64_t n) {
  if (n <= 1) return 0.0;
  const double nn = static_cast<double>(n);
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (nn - 1) / nn;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return (nn - 1) / nn;
    case Collective::kSendRecv: return 1.0;
  }
  return 1.0;
}

inline double RingStepsOf(Collective c, int64_t n) {
  if (n <= 1) return 0;
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (n - 1);
    case Collective::kSendRecv: return 1.0;
    default: return static_cast<double>(n - 1);
  }
}

// NCCL's latency of a tree all-reduce over n ranks, `per_node` on each node, in us (src/graph/
// tuning.cc, LL protocol: baseLat Tree 6.8 + 2 ((nRanks/nNodes - 1) hwLat[NVLINK][Tree] 0.6 +
// log2i(nNodes) hwLat[NET][Tree] 5.0)). NCCL's double binary trees make an all-reduce's latency
// logarithmic in the nodes (NVIDIA, "Massively Scale Your Deep Learning Training with NCCL 2.4",
// 2019) where a ring's grows with every rank.
inline double TreeAllReduceLatencyUs(int64_t n, int64_t per_node) {
  per_node = std::max<int64_t>(1, std::min(per_node, n));
  int64_t nodes = (n + per_node - 1) / per_node, log2i = 0;
  while (nodes > 1) {
    nodes >>= 1;
    ++log2i;
  }
  return 6.8 + 2 * ((per_node - 1) * 0.6 + log2i * 5.0);
}

// The latency of n ranks (members_per_node on each node, 0 = not known) over that of the group the
// rate was measured on: the ring's steps (NCCL's ring latency is per step); for an all-reduce across
// nodes whose layouts are both known, the lower of that and the tree's latency ratio, as NCCL
// takes the faster algorithm (tuning.cc: the time of each algorithm, the smallest chosen).
inline double LatencyRatioOf(const CollectiveRate& rate, int64_t g0, int64_t n, int64_t members_per_node) {
  const double ring = RingStepsOf(rate.collective, n) / RingStepsOf(rate.collective, g0);
  if (rate.collective != Collective::kAllReduce || rate.scope != Scope::kInterNode || rate.ranks_per_node <= 0 ||
      members_per_node <= 0) {
    return ring;
  }
  return std::min(ring, TreeAllReduceLatencyUs(n, members_per_node) / TreeAllReduceLatencyUs(g0, rate.ranks_per_node));
}

inline double AlphaForGroupOf(const CollectiveRate& rate, int64_t n, int64_t members_per_node = 0) {
  if (rate.group_size <= 1 || n == rate.group_size) return rate.alpha_s;
  return rate.alpha_s * LatencyRatioOf(rate, rate.group_size, n, members_per_node);
}

}  // namespace

double BusBwFactor(Collective c, int64_t n) { return BusBwFactorOf(c, n); }

double RingSteps(Collective c, int64_t n) { return RingStepsOf(c, n); }

double AlphaForGroup(const CollectiveRate& rate, int64_t n) { return AlphaForGroupOf(rate, n); }

namespace {

// The curve's time at S (same group): interpolated, or held / continued at its ends (the reason,
// after `reason_prefix`, written only when `explain`).
CollectiveEstimate CurveTime(const CollectiveRate& rate, int64_t n, double size_bytes, bool explain,
                             absl::string_view reason_prefix) {
  const auto& pts = rate.points;
  CollectiveEstimate e;
  if (size_bytes < pts.front().size_bytes) {
    e.time_s = pts.front().time_s;
    e.extrapolated = true;
    if (!explain) return e;
    e.reason = absl::StrCat(reason_prefix, "below the smallest measured size (", pts.front().size_bytes,
                            " B): its time, the latency floor, holds");
    return e;
  }
  for (size_t i = 1; i < pts.size(); ++i) {
    if (size_bytes <= pts[i].size_bytes) {
      const double f = (size_bytes - pts[i - 1].size_bytes) / (pts[i].size_bytes - pts[i - 1].size_bytes);
      e.time_s = pts[i - 1].time_s + f * (pts[i].time_s - pts[i - 1].time_s);
      return e;
    }
  }
  const CollectivePoint& last = pts.back();
  const double factor = BusBwFactorOf(rate.collective, std::max<int64_t>(n, 2));
  double busbw = rate.busbw_bytes_per_s;
  if (!(busbw > 0)) busbw = last.size_bytes * factor / last.time_s;  // the last point's busbw
  e.time_s = last.time_s + (size_bytes - last.size_bytes) * factor / busbw;
  e.extrapolated = true;
  if (!explain) return e;
  e.reason = absl::StrCat(reason_prefix, "above the largest measured size (", last.size_bytes, " B): continued at busbw ",
                          busbw / 1e9, " GB/s");
  return e;
}

}  // namespace

CollectiveEstimate EstimateCollective(const CollectiveRate& rate, int64_t n, double size_bytes,
                                      int64_t members_per_node, bool explain, absl::string_view reason_prefix) {
  CollectiveEstimate e;
  if (n <= 1 || !(size_bytes > 0)) return e;
  const auto& pts = rate.points;
  if (pts.size() < 2) {
    const double busbw = rate.busbw_bytes_per_s;
    e.time_s = AlphaForGroupOf(rate, n, members_per_node) +
               (busbw > 0 ? size_bytes * BusBwFactorOf(rate.collective, n) / busbw : 0.0);
    e.extrapolated = true;
    if (!explain) return e;
    e.reason = absl::StrCat(reason_prefix, "no measured curve: alpha-beta form");
    if (rate.group_size > 1 && rate.group_size != n) {
      absl::StrAppend(&e.reason, " with alpha scaled by ring steps from ", rate.group_size, " to ", n, " ranks");
    }
    return e;
  }
  const int64_t g0 = rate.group_size > 0 ? rate.group_size : n;
  const bool layout_known = rate.scope == Scope::kInterNode && rate.ranks_per_node > 0 && members_per_node > 0;
  const bool same_layout = !layout_known || members_per_node == rate.ranks_per_node;
  if (g0 == n && same_layout) return CurveTime(rate, n, size_bytes, explain, reason_prefix);
  // Another group size or layout: scale the curve (busbw held, latency by ring steps, NICs in use).
  const double f_n = BusBwFactorOf(rate.collective, n), f_0 = BusBwFactorOf(rate.collective, g0);
  const double scaled = f_0 > 0 ? size_bytes * f_n / f_0 : size_bytes;
  double floor = pts.front().time_s;
  for (const auto& p : pts) floor = std::min(floor, p.time_s);
  const CollectiveEstimate at0 = CurveTime(rate, g0, scaled, explain, {});
  const double latency = RingStepsOf(rate.collective, g0) > 0 ? floor * LatencyRatioOf(rate, g0, n, members_per_node) : floor;
  double bandwidth = std::max(0.0, at0.time_s - floor);
  if (layout_known && members_per_node != rate.ranks_per_node) {
    bandwidth *= static_cast<double>(rate.ranks_per_node) / static_cast<double>(members_per_node);
  }
  e.time_s = latency + bandwidth;
  e.extrapolated = true;
  if (!explain) return e;
  if (!layout_known) {  // one append (one allocation) for the common case
    absl::StrAppend(&e.reason, reason_prefix, "curve measured at ", g0, " ranks, asked for ", n,
                    ": busbw held, latency scaled by ring steps");
    if (at0.extrapolated) absl::StrAppend(&e.reason, "; ", at0.reason);
    return e;
  }
  e.reason.reserve(256);  // the appends below without reallocating
  absl::StrAppend(&e.reason, reason_prefix, "curve measured at ", g0, " ranks");
  if (layout_known) absl::StrAppend(&e.reason, " (", rate.ranks_per_node, " per node)");
  absl::StrAppend(&e.reason, ", asked for ", n);
  if (layout_known) absl::StrAppend(&e.reason, " (", members_per_node, " per node)");
  absl::StrAppend(&e.reason, ": busbw held, latency scaled by ring steps");
  if (layout_known && members_per_node != rate.ranks_per_node) {
    absl::StrAppend(&e.reason, ", bandwidth by the NICs in use (", rate.ranks_per_node, "/", members_per_node, ")");
  }
  if (at0.extrapolated) absl::StrAppend(&e.reason, "; ", at0.reason);
  return e;
}

double CollectiveTime(const CollectiveRate& rate, int64_t n, double size_bytes) {
  return EstimateCollective(rate, n, size_bytes).time_s;
}

RateProfile::GemmLookup RateProfile::GemmRate(DType dtype, double m, double n, double k) const {
  // No allocation: this runs a dozen times per prediction. Find the dtype's points (or the
  // bf16/fp16 twin's), then the neighbours of log10(2mnk) among them.
  GemmLookup out;
  DType use = dtype;
  bool any = false;
  for (const auto& p : gemm) any = any || p.dtype == dtype;
  if (!any && (dtype == DType::kBF16 || dtype == DType::kFP16)) {
    use = dtype == DType::kBF16 ? DType::kFP16 : DType::kBF16;
    for (const auto& p : gemm) any = any || p.dtype == use;
    out.extrapolated = any;
  }
  if (!any) return out;
  out.found = true;
  const double x = std::log10(std::max(2.0 * m * n * k, 1.0));
  const GemmRatePoint *lo = nullptr, *hi = nullptr, *min_p = nullptr, *max_p = nullptr;
  double lo_x = 0, hi_x = 0, min_x = 0, max_x = 0;
  for (const auto& p : gemm) {
    if (p.dtype != use) continue;
    if (p.m == 0 && p.n == 0 && p.k == 0) {  // a flat rate answers every shape
      out.flops_per_s = p.flops_per_s;
      out.flat = true;
      return out;
    }
    const double px = std::log10(2.0 * p.m * p.n * p.k);
    if (px <= x && (lo == nullptr || px > lo_x)) { lo = &p; lo_x = px; }
    if (px >= x && (hi == nullptr || px < hi_x)) { hi = &p; hi_x = px; }
    if (min_p == nullptr || px < min_x) { min_p = &p; min_x = px; }
    if (max_p == nullptr || px > max_x) { max_p = &p; max_x = px; }
  }
  if (lo == nullptr) {  // below the smallest measured shape
    out.flops_per_s = min_p->flops_per_s;
    out.extrapolated = true;
  } else if (hi == nullptr) {  // above the largest
    out.flops_per_s = max_p->flops_per_s;
    out.extrapolated = true;
  } else if (hi_x - lo_x < 1e-12) {
    out.flops_per_s = lo->flops_per_s;
  } else {
    const double f = (x - lo_x) / (hi_x - lo_x);
    out.flops_per_s = lo->flops_per_s + f * (hi->flops_per_s - lo->flops_per_s);
  }
  return out;
}

RateProfile::ContentionLookup RateProfile::FindContention(std::string_view compute,
                                                         std::string_view communication) const {
  ContentionLookup any;
  for (const Contention& c : contention) {
    if (c.compute != compute) continue;
    if (c.communication == communication) return {c.slowdown, true};
    if (c.communication == "any" && !any.found) any = {c.slowdown, true};
  }
  return any;
}

const CollectiveRate* RateProfile::FindCollective(Collective c, Scope s) const {
  for (const auto& r : collectives) {
    if (r.collective == c && r.scope == s) return &r;
  }
  return nullptr;
}

const CollectiveRate* RateProfile::FindCollective(Collective c, Scope s, int64_t n, int64_t members_per_node) const {
  const CollectiveRate *exact = nullptr, *formula = nullptr, *nearest = nullptr;
  double nearest_d = 0;
  for (const auto& r : collectives) {
    if (r.collective != c || r.scope != s) continue;
    if (r.points.size() < 2) {
      if (formula == nullptr) formula = &r;
      continue;
    }
    const bool same_layout = s == Scope::kIntraNode || r.ranks_per_node <= 0 || members_per_node <= 0 ||
                             r.ranks_per_node == members_per_node;
    if ((r.group_size == n || r.group_size == 0) && same_layout) {
      if (exact == nullptr) exact = &r;
      continue;
    }
    const double d = std::fabs(std::log2(static_cast<double>(std::max<int64_t>(r.group_size, 1))) -
                               std::log2(static_cast<double>(std::max<int64_t>(n, 1)))) +
                     (same_layout ? 0.0 : 0.5);
    if (nearest == nullptr || d < nearest_d) {
      nearest = &r;
      nearest_d = d;
    }
  }
  if (exact) return exact;
  if (formula) return formula;
  return nearest;
}

absl::Status ValidateRateProfile(const RateProfile& p, const std::string& prefix) {
  // Field paths are built only for an error: this runs in every prediction.
  auto gemm_field = [&](size_t i) { return absl::StrCat(prefix, ".gemm[", i, "]"); };
  for (size_t i = 0; i < p.gemm.size(); ++i) {
    const auto& g = p.gemm[i];
    if (!(g.flops_per_s > 0) || !std::isfinite(g.flops_per_s)) {
      return absl::InvalidArgumentError(gemm_field(i) + ".flops_per_s: must be a finite number > 0");
    }
    if (g.m < 0 || g.n < 0 || g.k < 0) {
      return absl::InvalidArgumentError(gemm_field(i) + ": m, n, k must be >= 0");
    }
    const bool flat = g.m == 0 && g.n == 0 && g.k == 0;
    if (!flat && (g.m == 0 || g.n == 0 || g.k == 0)) {
      return absl::InvalidArgumentError(gemm_field(i) + ": give all of m, n, k or none (a flat rate)");
    }
  }
  if (p.gemm.empty()) return absl::InvalidArgumentError(prefix + ".gemm: no GEMM rates");
  if (!(p.hbm_bandwidth_bytes_per_s > 0) || !std::isfinite(p.hbm_bandwidth_bytes_per_s)) {
    return absl::InvalidArgumentError(prefix + ".hbm_bandwidth_bytes_per_s: must be a finite number > 0");
  }
  if (!(p.attention_flops_per_s >= 0) || !std::isfinite(p.attention_flops_per_s)) {
    return absl::InvalidArgumentError(prefix + ".attention_flops_per_s: must be a finite number >= 0");
  }
  auto coll_field = [&](size_t i) { return absl::StrCat(prefix, ".collectives[", i, "]"); };
  for (size_t i = 0; i < p.collectives.size(); ++i) {
    const auto& c = p.collectives[i];
    if (!(c.busbw_bytes_per_s > 0) && c.points.size() < 2) {
      return absl::InvalidArgumentError(coll_field(i) + ".busbw_bytes_per_s: must be > 0 (or give >= 2 points)");
    }
    if (!std::isfinite(c.busbw_bytes_per_s)) {
      return absl::InvalidArgumentError(coll_field(i) + ".busbw_bytes_per_s: must be a finite number");
    }
    if (!(c.alpha_s >= 0) || !std::isfinite(c.alpha_s)) {
      return absl::InvalidArgumentError(coll_field(i) + ".alpha_s: must be a finite number >= 0");
    }
    if (c.group_size < 0) return absl::InvalidArgumentError(coll_field(i) + ".group_size: must be >= 0");
    if (c.ranks_per_node < 0) return absl::InvalidArgumentError(coll_field(i) + ".ranks_per_node: must be >= 0");
    for (size_t j = 0; j < c.points.size(); ++j) {
      if (!(c.points[j].size_bytes > 0) || !(c.points[j].time_s > 0) || !std::isfinite(c.points[j].size_bytes) ||
          !std::isfinite(c.points[j].time_s)) {
        return absl::InvalidArgumentError(
            absl::StrCat(coll_field(i), ".points[", j, "]: size_bytes and time_s must be finite numbers > 0"));
      }
      if (j > 0 && c.points[j].size_bytes <= c.points[j - 1].size_bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(coll_field(i), ".points[", j, "].size_bytes: points must be in increasing size"));
      }
    }
  }
  return absl::OkStatus();
}

double WaveEfficiency(double m, double n, int64_t sm_count) {
  if (sm_count <= 0 || m <= 0 || n <= 0) return 1.0;
  auto eff = [&](double tm, double tn) {
    const double waves = std::ceil(m / tm) * std::ceil(n / tn) / static_cast<double>(sm_count);
    return waves <= 1.0 ? 1.0 : waves / std::ceil(waves);
  };
  return std::max(eff(256, 128), eff(128, 256));
}

double Hardware::PeakFlops(DType d) const {
  switch (d) {
    case DType::kBF16: return peak_bf16_flops_per_s;
    case DType::kFP16: return peak_fp16_flops_per_s > 0 ? peak_fp16_flops_per_s : peak_bf16_flops_per_s;
    case DType::kFP8: return peak_fp8_flops_per_s;
    case DType::kTF32: return peak_tf32_flops_per_s;
    case DType::kFP32: return peak_fp32_flops_per_s;
    case DType::kINT8: return peak_fp8_flops_per_s;
  }
  return 0;
}

absl::Status ValidateHardware(const Hardware& hw, const std::string& prefix) {
  auto bad = [&](const char* field, const char* why) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".", field, ": ", why));
  };
  if (!(hw.peak_bf16_flops_per_s > 0) && !(hw.peak_fp16_flops_per_s > 0)) {
    return bad("peak", "needs a bf16 or fp16 peak > 0");
  }
  if (!(hw.hbm_capacity_bytes > 0)) return bad("hbm_capacity_bytes", "must be > 0");
  if (!(hw.hbm_bandwidth_bytes_per_s > 0)) return bad("hbm_bandwidth_bytes_per_s", "must be > 0");
  if (!(hw.intra_node_bandwidth_bytes_per_s > 0)) {
    return bad("intra_node_bandwidth_bytes_per_s", "must be > 0");
  }
  if (!(hw.inter_node_bandwidth_bytes_per_s > 0)) {
    return bad("inter_node_bandwidth_bytes_per_s", "must be > 0");
  }
  if (hw.intra_node_latency_s < 0) return bad("intra_node_latency_s", "must be >= 0");
  if (hw.inter_node_latency_s < 0) return bad("inter_node_latency_s", "must be >= 0");
  if (hw.gpus_per_node <= 0) return bad("gpus_per_node", "must be > 0");
  if (hw.power_w < 0) return bad("power_w", "must be >= 0");
  if (hw.price_per_gpu_hour_usd < 0) return bad("price_per_gpu_hour_usd", "must be >= 0");
  return absl::OkStatus();
}

}  // namespace stepcast
