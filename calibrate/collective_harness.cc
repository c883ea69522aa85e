#include "calibrate/collective_harness.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/codec.h"

namespace stepcast::calibrate {

std::vector<double> SweepSizes(double min_bytes, double max_bytes, int ranks) {
  std::vector<double> out;
  const double unit = 4.0 * std::max(ranks, 1);  // floats, split across ranks
  for (double s = min_bytes; s <= max_bytes; s *= 2) {
    const double r = std::ceil(s / unit) * unit;
    if (out.empty() || r > out.back()) out.push_back(r);
  }
  return out;
}

absl::StatusOr<std::vector<v1::CollectiveSample>> Sweep(CollectiveBackend& b, const SweepOptions& o) {
  std::vector<v1::CollectiveSample> out;
  const std::vector<double> sizes = SweepSizes(o.min_bytes, std::min(o.max_bytes, b.max_bytes()), b.ranks());
  for (Collective c : o.collectives) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (o.progress && b.rank() == 0) {
        o.progress(absl::StrFormat("%s %s x%d: %.0f bytes (%d/%d)", CollectiveName(c), ScopeName(b.scope()), b.ranks(),
                                   sizes[i], static_cast<int>(i + 1), static_cast<int>(sizes.size())));
      }
      absl::StatusOr<std::vector<double>> t = b.Time(c, sizes[i], o.warmup, o.iters);
      if (!t.ok()) {
        return absl::Status(t.status().code(), absl::StrCat(CollectiveName(c), " at ", sizes[i], " bytes: ",
                                                            t.status().message()));
      }
      v1::CollectiveSample s;
      s.set_collective(CollectiveToProto(c));
      s.set_scope(b.scope() == Scope::kIntraNode ? v1::SCOPE_INTRA_NODE : v1::SCOPE_INTER_NODE);
      s.set_ranks(b.ranks());
      s.set_size_bytes(sizes[i]);
      *s.mutable_time() = Summarize(*t);
      s.set_algbw_bytes_per_s(AlgBw(sizes[i], s.time().median_s()));
      s.set_busbw_bytes_per_s(BusBw(c, b.ranks(), sizes[i], s.time().median_s()));
      s.set_backend(b.name());
      out.push_back(std::move(s));
    }
  }
  return out;
}

SweepFits FitSweep(const std::vector<v1::CollectiveSample>& samples) {
  std::map<std::tuple<int, int, int>, std::vector<const v1::CollectiveSample*>> groups;
  for (const auto& s : samples) groups[{s.collective(), s.scope(), s.ranks()}].push_back(&s);
  SweepFits out;
  for (const auto& [key, v] : groups) {
    const auto [coll_v1, scope_v1, ranks] = key;
    const Collective c = CollectiveFromProto(static_cast<v1::Collective>(coll_v1));
    std::vector<std::pair<double, double>> st;
    for (const auto* s : v) st.push_back({s->size_bytes(), s->time().median_s()});
    std::sort(st.begin(), st.end());
    const AlphaBetaFit fit = FitAlphaBeta(st, c, ranks);
    v1::CollectiveFit f;
    f.set_collective(static_cast<v1::Collective>(coll_v1));
    f.set_scope(static_cast<v1::Scope>(scope_v1));
    f.set_ranks(ranks);
    for (const auto& seg : fit.segments) *f.add_segments() = seg;
    f.set_median_relative_error(fit.median_relative_error);
    out.fits.push_back(f);
    CollectiveRate r;
    r.collective = c;
    r.scope = scope_v1 == v1::SCOPE_INTER_NODE ? Scope::kInterNode : Scope::kIntraNode;
    r.group_size = ranks;
    r.alpha_s = fit.alpha_s;
    r.busbw_bytes_per_s = fit.busbw_bytes_per_s;
    for (const auto& [s, t] : st) r.points.push_back({s, t});
    r.source = absl::StrFormat("stepcast-calibrate sweep, %d ranks, %s; median fit error %.1f%%", ranks,
                               v.front()->backend(), 100 * fit.median_relative_error);
    v1::CollectiveRate pr;
    pr.set_collective(f.collective());
    pr.set_scope(f.scope());
    pr.set_group_size(ranks);
    pr.set_alpha_s(r.alpha_s);
    pr.set_busbw_bytes_per_s(r.busbw_bytes_per_s);
    for (const auto& p : r.points) {
      auto* q = pr.add_points();
      q->set_size_bytes(p.size_bytes);
      q->set_time_s(p.time_s);
    }
    pr.set_source(r.source);
    out.rates.push_back(pr);
  }
  return out;
}

}  // namespace stepcast::calibrate
