#include "calibrate/fits.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "proto/codec.h"

namespace stepcast::calibrate {

v1::SampleSummary Summarize(std::vector<double> t) {
  v1::SampleSummary s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  auto at = [&](double q) { return t[std::min(n - 1, static_cast<size_t>(std::floor(q * (n - 1) + 0.5)))]; };
  s.set_count(static_cast<int32_t>(n));
  s.set_median_s(n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]));
  s.set_p10_s(at(0.10));
  s.set_p90_s(at(0.90));
  s.set_best_s(t.front());
  return s;
}

void SetContentionTimes(std::vector<double> alone_s, std::vector<double> beside_s, v1::ContentionSample* c) {
  *c->mutable_alone() = Summarize(std::move(alone_s));
  *c->mutable_beside() = Summarize(std::move(beside_s));
  c->set_slowdown(c->beside().median_s() / c->alone().median_s() - 1);
}

double AlgBw(double size_bytes, double time_s) { return time_s > 0 ? size_bytes / time_s : 0; }

double BusBw(Collective c, int64_t ranks, double size_bytes, double time_s) {
  return AlgBw(size_bytes, time_s) * BusBwFactor(c, ranks);
}

namespace {

// Weighted least squares of y = a + b x with weights w; a fixed when fix_a.
std::pair<double, double> Wls(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w,
                              bool fix_a, double a_fixed) {
  if (fix_a) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += w[i] * x[i] * (y[i] - a_fixed);
      den += w[i] * x[i] * x[i];
    }
    return {a_fixed, den > 0 ? num / den : 0};
  }
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sw += w[i];
    sx += w[i] * x[i];
    sy += w[i] * y[i];
    sxx += w[i] * x[i] * x[i];
    sxy += w[i] * x[i] * y[i];
  }
  const double det = sw * sxx - sx * sx;
  if (std::fabs(det) < 1e-300) return Wls(x, y, w, true, a_fixed);
  const double b = (sw * sxy - sx * sy) / det;
  return {(sy - b * sx) / sw, b};
}

}  // namespace

AlphaBetaFit FitAlphaBeta(const std::vector<std::pair<double, double>>& st, Collective c, int64_t ranks) {
  AlphaBetaFit fit;
  if (st.empty()) return fit;
  const double factor = BusBwFactor(c, ranks) > 0 ? BusBwFactor(c, ranks) : 1.0;
  double floor = st.front().second;
  int small = 0;
  for (const auto& [s, t] : st) {
    if (s <= 4096 || small < 4) {
      floor = std::min(floor, t);
      ++small;
    }
  }
  fit.alpha_s = floor;
  const double bounds[4] = {0, 64 * 1024.0, 4 * 1024.0 * 1024, 1e300};
  for (int seg = 0; seg < 3; ++seg) {
    std::vector<double> x, y, w;
    for (const auto& [s, t] : st) {
      if (s >= bounds[seg] && s < bounds[seg + 1]) {
        x.push_back(s * factor);
        y.push_back(t);
        w.push_back(1.0 / (t * t));
      }
    }
    if (x.empty()) continue;
    std::pair<double, double> ab;
    if (x.size() == 1 || seg == 0) {
      ab = Wls(x, y, w, true, floor);
    } else {
      ab = Wls(x, y, w, false, floor);
      if (ab.first < 0 || ab.second <= 0) ab = Wls(x, y, w, true, floor);
    }
    v1::AlphaBetaSegment out;
    out.set_min_size_bytes(bounds[seg]);
    out.set_max_size_bytes(seg == 2 ? 0 : bounds[seg + 1]);
    out.set_alpha_s(ab.first);
    out.set_busbw_bytes_per_s(ab.second > 0 ? 1.0 / ab.second : 0);
    fit.segments.push_back(out);
  }
  if (!fit.segments.empty()) fit.busbw_bytes_per_s = fit.segments.back().busbw_bytes_per_s();
  std::vector<double> rel;
  for (const auto& [s, t] : st) rel.push_back(std::fabs(FitTime(fit, c, ranks, s) - t) / t);
  std::sort(rel.begin(), rel.end());
  fit.median_relative_error = rel.empty() ? 0 : rel[rel.size() / 2];
  return fit;
}

double FitTime(const AlphaBetaFit& fit, Collective c, int64_t ranks, double size) {
  const double factor = BusBwFactor(c, ranks) > 0 ? BusBwFactor(c, ranks) : 1.0;
  const v1::AlphaBetaSegment* seg = fit.segments.empty() ? nullptr : &fit.segments.back();
  for (const auto& s : fit.segments) {
    if (size >= s.min_size_bytes() && (s.max_size_bytes() == 0 || size < s.max_size_bytes())) {
      seg = &s;
      break;
    }
  }
  if (seg == nullptr || seg->busbw_bytes_per_s() <= 0) return fit.alpha_s;
  return seg->alpha_s() + size * factor / seg->busbw_bytes_per_s();
}

GemmSizeFit FitGemmRate(const std::vector<std::pair<double, double>>& fr) {
  std::vector<double> x, y, w;
  for (const auto& [f, r] : fr) {
    if (f <= 0 || r <= 0) continue;
    x.push_back(1.0 / f);
    y.push_back(1.0 / r);
    w.push_back(r * r);  // relative error on 1/rate
  }
  GemmSizeFit out;
  if (x.empty()) return out;
  auto [a, b] = Wls(x, y, w, x.size() == 1, x.size() == 1 ? y[0] : 0);
  if (a <= 0) {  // noise below the knee: a flat rate at the best sample
    double best = 0;
    for (const auto& [f, r] : fr) best = std::max(best, r);
    out.r_max_flops_per_s = best;
    return out;
  }
  out.r_max_flops_per_s = 1.0 / a;
  out.f_half_flops = std::max(0.0, b / a);
  return out;
}

std::string DescribeGemmFit(const v1::GemmSizeFit& g) {
  const std::string head = absl::StrFormat("GEMM %s by size: r_max %.1f TF, ", DTypeName(DTypeFromProto(g.dtype())),
                                           g.r_max_flops_per_s() / 1e12);
  const std::string tail = absl::StrFormat(" (fit error %.1f%%)", 100 * g.median_relative_error());
  if (!(g.f_half_flops() > 0)) {
    return head + "no small-GEMM knee in the measured sizes (the rate does not fall below them)" + tail;
  }
  return head + absl::StrFormat("half rate at %.2f GFLOP per GEMM", g.f_half_flops() / 1e9) + tail;
}

std::vector<v1::Straggler> FindStragglers(const std::vector<GpuValue>& v, const std::string& metric, double threshold) {
  std::vector<v1::Straggler> out;
  if (v.size() < 2) return out;
  std::vector<double> s;
  for (const auto& g : v) s.push_back(g.value);
  std::sort(s.begin(), s.end());
  const double median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  for (const GpuValue& g : v) {
    if (g.value < (1 - threshold) * median) {
      v1::Straggler st;
      st.set_gpu(g.id.index());
      *st.mutable_gpu_id() = g.id;
      st.set_metric(metric);
      st.set_value(g.value);
      st.set_node_median(median);
      st.set_slowdown(1 - g.value / median);
      out.push_back(st);
    }
  }
  return out;
}

bool CuptiDisagrees(double cupti_s, double event_s) {
  if (!(event_s > 0) || !(cupti_s > 0)) return false;
  return std::fabs(cupti_s - event_s) / event_s > 0.02 + 2.5e-6 / event_s;
}

}  // namespace stepcast::calibrate
