#include "calibrate/collective_harness.h"

#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "calibrate/import.h"
#include "proto/codec.h"

namespace stepcast::calibrate {

std::vector<double> SweepSizes(Collective c, double min_bytes, double max_bytes, int ranks) {
  const double n = std::max(ranks, 1);
  double unit = 4;
  if (c == Collective::kAllGather || c == Collective::kReduceScatter) unit = 4 * n;
  if (c == Collective::kAllToAll) unit = 16 * n;
  std::vector<double> out;
  for (double s = min_bytes; s <= max_bytes; s *= 2) {
    const double r = std::ceil(s / unit) * unit;
    if (r <= max_bytes && (out.empty() || r > out.back())) out.push_back(r);
  }
  return out;
}

SweepResult Sweep(CollectiveBackend& b, Communicator& comm, const SweepOptions& o) {
  SweepResult out;
  const int me = comm.rank();
  // Total GPUs over the ranks, for the rank average.
  std::vector<double> gpus = {static_cast<double>(b.local_gpus())};
  if (absl::Status s = comm.AllreduceSum(gpus); !s.ok()) {
    out.status = s;
    return out;
  }
  for (Collective c : o.collectives) {
    const std::vector<double> sizes = SweepSizes(c, o.min_bytes, std::min(o.max_bytes, b.max_bytes()), b.ranks());
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double size = sizes[i];
      if (o.progress && me == 0) {
        o.progress(absl::StrFormat("%s %s x%d: %.0f bytes (%d/%d)", CollectiveName(c), ScopeName(b.scope()), b.ranks(),
                                   size, static_cast<int>(i + 1), static_cast<int>(sizes.size())));
      }
      absl::Status local;
      absl::StatusOr<std::vector<std::vector<double>>> t;
      const bool injected = o.inject.rank == me && size >= o.inject.size_bytes;
      if (injected && o.inject.hang) {
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // only the job's timeout ends this
      }
      local = b.Check(c, size, static_cast<int>(i));
      // An injected failure stands for a wrong result found by this rank's check: every rank ran
      // the collective, so every rank reaches the agreement below.
      if (local.ok() && injected) local = absl::DataLossError("injected failure (--inject-failure)");
      // Agree after the check, before the timed runs (which every rank must enter together), and
      // again after them.
      for (int phase = 0; phase < 2; ++phase) {
        if (phase == 1 && local.ok()) {
          t = b.TimeBatches(c, size, o.warmup, o.iters, o.batches);
          if (!t.ok()) local = t.status();
        }
        if (!local.ok()) {
          local = absl::Status(local.code(), absl::StrCat(CollectiveName(c), " at ", size, " bytes: ", local.message()));
        }
        if (absl::Status agreed = AgreeOnStatus(comm, local); !agreed.ok()) {
          b.Abort();
          out.status = agreed;
          return out;
        }
      }
      // Rank average and slowest GPU of each batch.
      std::vector<double> sum(o.batches, 0.0), worst(o.batches, 0.0);
      for (const auto& gpu : *t) {
        for (int j = 0; j < o.batches && j < static_cast<int>(gpu.size()); ++j) {
          sum[j] += gpu[j];
          worst[j] = std::max(worst[j], gpu[j]);
        }
      }
      absl::Status s1 = comm.AllreduceSum(sum);
      absl::Status s2 = s1.ok() ? comm.AllreduceMax(worst) : s1;
      if (!s2.ok()) {
        b.Abort();
        out.status = s2;
        return out;
      }
      for (double& x : sum) x /= std::max(gpus[0], 1.0);
      v1::CollectiveSample smp;
      smp.set_collective(CollectiveToProto(c));
      smp.set_scope(b.scope() == Scope::kIntraNode ? v1::SCOPE_INTRA_NODE : v1::SCOPE_INTER_NODE);
      smp.set_ranks(b.ranks());
      smp.set_size_bytes(size);
      *smp.mutable_time() = Summarize(sum);
      *smp.mutable_slowest_rank_time() = Summarize(worst);
      smp.set_algbw_bytes_per_s(AlgBw(size, smp.time().median_s()));
      smp.set_busbw_bytes_per_s(BusBw(c, b.ranks(), size, smp.time().median_s()));
      smp.set_backend(b.name());
      smp.set_iterations_per_batch(o.iters);
      smp.set_batches(o.batches);
      out.samples.push_back(std::move(smp));
      if (o.heartbeat) o.heartbeat();
    }
  }
  return out;
}

SweepFits FitSweep(const std::vector<v1::CollectiveSample>& samples, int ranks_per_node) {
  std::map<std::tuple<int, int, int>, std::vector<const v1::CollectiveSample*>> groups;
  for (const auto& s : samples) groups[{s.collective(), s.scope(), s.ranks()}].push_back(&s);
  SweepFits out;
  for (const auto& [key, v] : groups) {
    const auto [coll_v1, scope_v1, ranks] = key;
    const Collective c = CollectiveFromProto(static_cast<v1::Collective>(coll_v1));
    const Scope scope = scope_v1 == v1::SCOPE_INTER_NODE ? Scope::kInterNode : Scope::kIntraNode;
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
    std::vector<CollectivePoint> pts;
    for (const auto& [s, t] : st) pts.push_back({s, t});
    const std::string source = absl::StrFormat(
        "stepcast-calibrate sweep (%s), %d ranks: rank-average time of %d back-to-back runs behind a gate kernel, "
        "median of %d batches; the alpha-beta fit errs %.1f%% (median) on these points",
        v.front()->backend(), ranks, v.front()->iterations_per_batch(), v.front()->batches(),
        100 * fit.median_relative_error);
    out.rates.push_back(CurveFromPoints(c, scope, ranks, ranks_per_node, pts, source));
  }
  return out;
}

}  // namespace stepcast::calibrate
