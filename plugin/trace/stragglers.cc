#include "plugin/trace/stragglers.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "plugin/probe/trace_analysis.h"

namespace stepcast::trace {
namespace {

constexpr double kNsToS = 1e-9;

// One matched collective instance: per participating rank (index into the input), its kernel.
struct Instance {
  std::vector<std::pair<size_t, const CollectiveKernel*>> kernels;
};

// Per rank, accumulated over the instances in the measured steps.
struct RankTotals {
  int32_t collectives = 0, arrived_last = 0;
  int64_t communication_ns = 0, wait_ns = 0, caused_ns = 0;
  std::map<size_t, int64_t> waited_for_ns;  // by index of the late rank
};

struct StepTotals {
  int32_t collectives = 0;
  int64_t critical_ns = 0;
  std::map<size_t, int64_t> by_latest_ns;  // critical lateness by index of the latest rank
};

// Instances of every (group, kind) key whose kernel count agrees on every rank that has it;
// notes for the others.
std::vector<Instance> MatchInstances(const std::vector<RankCollectives>& ranks, v1::StragglerReport* report) {
  std::map<std::string, std::vector<std::vector<const CollectiveKernel*>>> by_key;  // key -> per rank
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const CollectiveKernel& k : ranks[r].kernels) {
      auto& per_rank = by_key[k.key];
      per_rank.resize(ranks.size());
      per_rank[r].push_back(&k);
    }
  }
  std::vector<Instance> out;
  for (const auto& [key, per_rank] : by_key) {
    size_t count = 0, holders = 0;
    bool agree = true;
    std::string counts;
    for (size_t r = 0; r < per_rank.size(); ++r) {
      if (per_rank[r].empty()) continue;
      absl::StrAppend(&counts, counts.empty() ? "" : ", ", "rank ", ranks[r].rank, ": ", per_rank[r].size());
      if (holders++ > 0 && per_rank[r].size() != count) agree = false;
      count = per_rank[r].size();
    }
    if (holders < 2) {
      report->add_notes(absl::StrCat(key, ": on one rank only (", counts, "), not matched"));
      continue;
    }
    if (!agree) {
      report->add_notes(absl::StrCat(key, ": kernel counts differ between ranks (", counts, "), not matched"));
      continue;
    }
    for (size_t i = 0; i < count; ++i) {
      Instance inst;
      for (size_t r = 0; r < per_rank.size(); ++r) {
        if (!per_rank[r].empty()) inst.kernels.push_back({r, per_rank[r][i]});
      }
      out.push_back(std::move(inst));
    }
  }
  return out;
}

// The number of the rank's step whose window holds t, -1 for none.
int32_t StepOf(const RankCollectives& rank, int64_t t) {
  for (const StepWindow& w : rank.steps) {
    if (t >= w.start_ns && t < w.end_ns) return w.step;
  }
  return -1;
}

// The index with the largest value (ties: the first), or -1 when every value is 0.
template <typename Map>
int64_t ArgMax(const Map& m) {
  int64_t best = -1, best_v = 0;
  for (const auto& [k, v] : m) {
    if (v > best_v) {
      best = static_cast<int64_t>(k);
      best_v = v;
    }
  }
  return best;
}

// The report's figures from the totals: per rank, the slowest rank, per step.
void Summarize(const std::vector<RankCollectives>& ranks, const std::vector<RankTotals>& totals,
               const std::map<int32_t, StepTotals>& steps, v1::StragglerReport* out) {
  v1::StragglerReport& report = *out;
  int32_t collectives = 0;
  for (const auto& [j, st] : steps) collectives += st.collectives;
  report.set_collectives(collectives);
  std::map<size_t, int64_t> caused;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankTotals& t = totals[r];
    v1::RankCollectiveWait* w = report.add_ranks();
    w->set_rank(ranks[r].rank);
    w->set_collectives(t.collectives);
    w->set_communication_s(t.communication_ns * kNsToS);
    w->set_wait_for_other_ranks_s(t.wait_ns * kNsToS);
    const int64_t most = ArgMax(t.waited_for_ns);
    w->set_mostly_waited_for_rank(most >= 0 ? ranks[most].rank : -1);
    w->set_waited_for_that_rank_s(most >= 0 ? t.waited_for_ns.at(most) * kNsToS : 0);
    w->set_arrived_last(t.arrived_last);
    w->set_others_waited_for_it_s(t.caused_ns * kNsToS);
    caused[r] = t.caused_ns;
  }
  std::sort(report.mutable_ranks()->begin(), report.mutable_ranks()->end(),
            [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  const int64_t slowest = ArgMax(caused);
  report.set_slowest_rank(slowest >= 0 ? ranks[slowest].rank : -1);
  report.set_slowest_rank_caused_wait_s(slowest >= 0 ? caused[slowest] * kNsToS : 0);
  for (const auto& [j, st] : steps) {
    v1::StepLateness* s = report.add_steps();
    s->set_step(j);
    s->set_collectives(st.collectives);
    s->set_critical_lateness_s(st.critical_ns * kNsToS);
    const int64_t l = ArgMax(st.by_latest_ns);
    s->set_latest_rank(l >= 0 ? ranks[l].rank : -1);
  }
}

}  // namespace

RankCollectives CollectivesOfRank(const KinetoTrace& trace, const v1::TraceSummary& summary) {
  RankCollectives out;
  out.rank = trace.rank;
  for (const probe::KernelRecord& r : trace.records) {
    if (r.category != probe::KernelCategory::kCommunication) continue;
    CollectiveKernel k;
    k.start_ns = r.start_ns;
    k.end_ns = r.end_ns;
    auto pg = r.correlation >= 0 ? trace.process_group_of.find(r.correlation) : trace.process_group_of.end();
    const std::string group =
        pg != trace.process_group_of.end() ? absl::StrCat("pg ", pg->second) : absl::StrCat("stream ", r.stream);
    const std::string name = r.name_id < trace.names.size() ? trace.names[r.name_id] : std::string();
    k.key = absl::StrCat(group, " ", probe::CommunicationKind(name, r.collective));
    out.kernels.push_back(std::move(k));
  }
  for (const v1::StepMeasurement& m : summary.steps()) out.steps.push_back({m.step(), m.start_ns(), m.end_ns()});
  return out;
}

absl::StatusOr<v1::StragglerReport> AttributeCollectiveWaits(const std::vector<RankCollectives>& ranks) {
  if (ranks.size() < 2) return absl::InvalidArgumentError("straggler analysis: needs two or more ranks");
  std::set<int32_t> ids;
  for (const RankCollectives& r : ranks) {
    if (r.rank < 0) return absl::InvalidArgumentError("straggler analysis: a trace has no rank (distributedInfo.rank)");
    if (!ids.insert(r.rank).second) {
      return absl::InvalidArgumentError(absl::StrCat("straggler analysis: rank ", r.rank, " is given twice"));
    }
  }
  v1::StragglerReport report;
  report.set_method(
      "instances matched by order per (process group, else CUDA stream; collective kind) on every rank; arrival = "
      "GPU start of the rank's collective kernel; wait = min(latest arrival - own start, own kernel duration), "
      "attributed to the latest rank (HTA hta/analyzers/straggler.py premise: a blocking collective ends together "
      "on all ranks, so a late start delays the others)");
  std::vector<RankTotals> totals(ranks.size());
  std::map<int32_t, StepTotals> steps;
  int64_t outside = 0, clock_disorder = 0;
  for (const Instance& inst : MatchInstances(ranks, &report)) {
    // The latest arrival (ties: the lowest rank id, the input is not necessarily in rank order).
    size_t latest = inst.kernels[0].first;
    int64_t latest_ns = inst.kernels[0].second->start_ns;
    for (const auto& [r, k] : inst.kernels) {
      if (k->start_ns > latest_ns || (k->start_ns == latest_ns && ranks[r].rank < ranks[latest].rank)) {
        latest = r;
        latest_ns = k->start_ns;
      }
    }
    const int32_t step = StepOf(ranks[latest], latest_ns);
    if (step < 0) {
      ++outside;
      continue;
    }
    StepTotals& st = steps[step];
    ++st.collectives;
    int64_t largest_wait = 0;
    bool disorder = false;
    for (const auto& [r, k] : inst.kernels) {
      const int64_t dur = k->end_ns - k->start_ns;
      const int64_t wait = std::min(std::max<int64_t>(0, latest_ns - k->start_ns), dur);
      if (k->end_ns < latest_ns) disorder = true;
      RankTotals& t = totals[r];
      ++t.collectives;
      t.communication_ns += dur;
      if (r == latest) continue;
      t.wait_ns += wait;
      t.waited_for_ns[latest] += wait;
      totals[latest].caused_ns += wait;
      largest_wait = std::max(largest_wait, wait);
    }
    ++totals[latest].arrived_last;
    st.critical_ns += largest_wait;
    st.by_latest_ns[latest] += largest_wait;
    clock_disorder += disorder;
  }
  Summarize(ranks, totals, steps, &report);
  if (outside > 0) {
    report.add_notes(absl::StrCat(outside, " matched instances outside the measured steps (warm-up or the last, "
                                           "unclosed step) left out"));
  }
  if (clock_disorder > 0) {
    report.add_notes(absl::StrCat(clock_disorder, " instances where a rank's kernel ended before the latest rank's "
                                                  "started: the ranks' clocks disagree, waits are not reliable"));
  }
  return report;
}

}  // namespace stepcast::trace
