#include "plugin/trace/contention.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/trace/annotations.h"

namespace stepcast::trace {
namespace {

using probe::KernelCategory;
using probe::KernelRecord;

bool Measured(KernelCategory c) {
  return c == KernelCategory::kGemm || c == KernelCategory::kAttention || c == KernelCategory::kConvolution ||
         c == KernelCategory::kElementwise;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks (numpy's default).
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// Key of a kernel instance: (name, shape, container name, occurrence) with the last two -1 for
// the "shape" key.
using Key = std::tuple<uint32_t, uint32_t, int64_t, int64_t>;

struct Overlapped {
  size_t record;
  std::string kind;
  double fraction;
};

// MeasureContention in steps (contention.h): each instance's key, each instance classified
// (alone, overlapped, partly, beside other work), the overlapped instances' ratios grouped by
// (category, communication kind, GPU), the groups summarised, then the notes.

// The options contention.h allows. InvalidArgument naming the option otherwise.
absl::Status CheckOptions(const ContentionOptions& o) {
  if (o.key != "shape" && o.key != "position") {
    return absl::InvalidArgumentError(absl::StrCat("contention key '", o.key, "': must be shape or position"));
  }
  if (!(o.min_overlap_fraction > 0 && o.min_overlap_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min overlap fraction ", o.min_overlap_fraction, ": must be in (0, 1]"));
  }
  return absl::OkStatus();
}

// For the "position" key: the container of each record: the innermost annotation it was launched
// in (its name id, >= 0; plugin/trace/annotations.h), else -2 - the index of the ProfilerStep
// holding its launch, else -1 (none).
std::vector<int64_t> Containers(const KinetoTrace& t) {
  const std::vector<KernelRecord>& k = t.records;
  std::vector<int64_t> container(k.size(), -1);  // annotation name id (>= 0), or -2 - ProfilerStep index
  const std::vector<int64_t> of = AnnotationOfRecords(t);
  for (size_t i = 0; i < k.size(); ++i) {
    if (of[i] >= 0) {
      container[i] = of[i];
      continue;
    }
    // Else the ProfilerStep holding the launch.
    auto l = std::lower_bound(t.launches.begin(), t.launches.end(), k[i].correlation,
                              [](const Launch& x, int64_t c) { return x.correlation < c; });
    if (k[i].correlation < 0 || l == t.launches.end() || l->correlation != k[i].correlation) continue;
    auto it = std::upper_bound(t.profiler_steps.begin(), t.profiler_steps.end(), l->t_ns,
                               [](int64_t v, const CpuRange& c) { return v < c.start_ns; });
    if (it == t.profiler_steps.begin()) continue;
    --it;
    if (l->t_ns < it->end_ns) container[i] = -2 - (it - t.profiler_steps.begin());
  }
  return container;
}

// Step 1: the key of each record (contention.h ContentionOptions::key): (name, shape, -1, -1); with
// the "position" key and a container, (name, shape, the container's name, the occurrence of
// (name, shape) within that container instance, in start order).
std::vector<Key> InstanceKeys(const KinetoTrace& t, const ContentionOptions& o) {
  const std::vector<KernelRecord>& k = t.records;
  std::vector<Key> key(k.size());
  std::vector<int64_t> container(k.size(), -1);
  if (o.key == "position") container = Containers(t);
  // Occurrence of (name, shape) within each container instance, in start order.
  std::map<std::tuple<int64_t, uint32_t, uint32_t>, int64_t> seen;
  for (size_t i = 0; i < k.size(); ++i) {
    if (container[i] == -1) {
      key[i] = {k[i].name_id, k[i].shape_id, -1, -1};
      continue;
    }
    const int64_t occ = seen[{container[i], k[i].name_id, k[i].shape_id}]++;
    // The container's *name* (every instance of attn(F) alike); ProfilerSteps all alike.
    const int64_t cname = container[i] >= 0 ? static_cast<int64_t>(t.annotations[container[i]].name_id) : -2;
    key[i] = {k[i].name_id, k[i].shape_id, cname, occ};
  }
  return key;
}

// Length of the union of intervals [start, end).
int64_t CoveredLength(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  int64_t len = 0, cur_s = 0, cur_e = INT64_MIN;
  for (const auto& [s, e] : v) {
    if (s > cur_e) {
      if (cur_e > cur_s) len += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_s) len += cur_e - cur_s;
  return len;
}

// The instances of the measured categories, classified (step 2).
struct Classified {
  std::map<Key, std::vector<double>> alone;  // durations, ns
  std::map<Key, std::vector<Overlapped>> over;
  int64_t partly = 0, other_work = 0, n_alone = 0;
};

// Step 2: each instance of a measured category (contention.h): beside other work when any other
// non-communication record overlaps it; alone when nothing overlaps it; overlapped when the union
// of the communication kernels beside it covers at least min_overlap_fraction of it (its kind:
// the communication kind covering the most of it, probe::CommunicationKind); partly otherwise.
Classified ClassifyInstances(const KinetoTrace& t, const std::vector<Key>& key, const ContentionOptions& o) {
  const std::vector<KernelRecord>& k = t.records;
  const probe::RunningIndex index(k);
  Classified out;
  for (size_t i = 0; i < k.size(); ++i) {
    const KernelRecord& r = k[i];
    const int64_t d = r.end_ns - r.start_ns;
    if (!Measured(r.category) || d <= 0) continue;
    std::vector<std::pair<int64_t, int64_t>> comm;
    std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> by_kind;
    bool beside_other = false;
    auto visit = [&](size_t j) {
      if (j == i) return;
      const KernelRecord& x = k[j];
      const int64_t lo = std::max(x.start_ns, r.start_ns), hi = std::min(x.end_ns, r.end_ns);
      if (hi <= lo) return;
      if (x.category == KernelCategory::kCommunication) {
        comm.push_back({lo, hi});
        by_kind[probe::CommunicationKind(t.names[x.name_id], x.collective)].push_back({lo, hi});
      } else {
        beside_other = true;
      }
    };
    index.ForEachEndingAfter(k, i, r.start_ns, visit);
    for (size_t j = i + 1; j < k.size() && k[j].start_ns < r.end_ns; ++j) visit(j);
    if (beside_other) {
      ++out.other_work;
      continue;
    }
    if (comm.empty()) {
      out.alone[key[i]].push_back(static_cast<double>(d));
      ++out.n_alone;
      continue;
    }
    const double fraction = static_cast<double>(CoveredLength(comm)) / static_cast<double>(d);
    if (fraction < o.min_overlap_fraction) {
      ++out.partly;
      continue;
    }
    std::string kind;
    int64_t best = -1;
    for (const auto& [kd, v] : by_kind) {
      const int64_t c = CoveredLength(v);
      if (c > best) {
        best = c;
        kind = kd;
      }
    }
    out.over[key[i]].push_back({i, kind, fraction});
  }
  return out;
}

// The overlapped instances of one (category, communication kind, GPU) (step 3).
struct Group {
  std::vector<double> ratios, fractions, spreads;
  double sum_over = 0, sum_ref = 0;
  std::map<Key, bool> keys;
  int64_t alone_instances = 0;
};
using GroupId = std::tuple<std::string, std::string, std::string>;

// Counts of step 3 for the report.
struct GroupCounts {
  int64_t n_over = 0, without_ref = 0, too_short = 0;
};

// Step 3: each overlapped instance whose kernel has an alone median of at least min_duration_ns
// gives ratio = duration / that median (contention.h), in the group of its (category,
// communication kind, GPU); a kernel's alone instances count once per group, and its spread
// |alone / median - 1| when it has two or more.
std::map<GroupId, Group> GroupRatios(const KinetoTrace& t, const Classified& cl, const ContentionOptions& o,
                                     GroupCounts* counts) {
  const std::vector<KernelRecord>& k = t.records;
  std::map<GroupId, Group> groups;
  for (const auto& [kk, v] : cl.over) {
    counts->n_over += static_cast<int64_t>(v.size());
    auto a = cl.alone.find(kk);
    if (a == cl.alone.end()) {
      counts->without_ref += static_cast<int64_t>(v.size());
      continue;
    }
    const double ref = Quantile(a->second, 0.5);
    if (ref < static_cast<double>(o.min_duration_ns)) {
      counts->too_short += static_cast<int64_t>(v.size());
      continue;
    }
    for (const Overlapped& x : v) {
      const KernelRecord& r = k[x.record];
      const std::string gpu = r.device >= 0 && static_cast<size_t>(r.device) < t.device_names.size() &&
                                      !t.device_names[r.device].empty()
                                  ? t.device_names[r.device]
                                  : std::string("unknown GPU");
      Group& g = groups[{probe::CategoryName(r.category), x.kind, gpu}];
      const double d = static_cast<double>(r.end_ns - r.start_ns);
      g.ratios.push_back(d / ref);
      g.fractions.push_back(x.fraction);
      g.sum_over += d;
      g.sum_ref += ref;
      if (g.keys.emplace(kk, true).second) {
        g.alone_instances += static_cast<int64_t>(a->second.size());
        if (a->second.size() >= 2) {
          for (double al : a->second) g.spreads.push_back(std::fabs(al / ref - 1));
        }
      }
    }
  }
  return groups;
}

// Step 4: a group's summary: median, p10, p90 (linear interpolation, numpy's default), min and
// max of the ratio, the time-weighted ratio (sum of durations / sum of alone medians), the mean
// overlap fraction, and the alone spread's median.
v1::ContentionGroup SummarizeGroup(const GroupId& id, const Group& g) {
  v1::ContentionGroup c;
  c.set_category(std::get<0>(id));
  c.set_communication_kind(std::get<1>(id));
  c.set_gpu(std::get<2>(id));
  c.set_instances(static_cast<int32_t>(g.ratios.size()));
  c.set_kernels(static_cast<int32_t>(g.keys.size()));
  c.set_alone_instances(static_cast<int32_t>(g.alone_instances));
  c.set_median_ratio(Quantile(g.ratios, 0.5));
  c.set_p10_ratio(Quantile(g.ratios, 0.1));
  c.set_p90_ratio(Quantile(g.ratios, 0.9));
  c.set_min_ratio(*std::min_element(g.ratios.begin(), g.ratios.end()));
  c.set_max_ratio(*std::max_element(g.ratios.begin(), g.ratios.end()));
  c.set_time_weighted_ratio(g.sum_over / g.sum_ref);
  double mf = 0;
  for (double f : g.fractions) mf += f;
  c.set_mean_overlap_fraction(mf / static_cast<double>(g.fractions.size()));
  c.set_alone_spread(Quantile(g.spreads, 0.5));
  return c;
}

}  // namespace

absl::StatusOr<v1::ContentionReport> MeasureContention(const KinetoTrace& t, const ContentionOptions& o) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  v1::ContentionReport rep;
  rep.set_key(o.key);
  rep.set_min_overlap_fraction(o.min_overlap_fraction);
  const std::vector<KernelRecord>& k = t.records;

  const std::vector<Key> key = InstanceKeys(t, o);
  const Classified cl = ClassifyInstances(t, key, o);
  rep.set_alone_instances(cl.n_alone);
  rep.set_partly_overlapped(cl.partly);
  rep.set_beside_other_work(cl.other_work);

  GroupCounts counts;
  const std::map<GroupId, Group> groups = GroupRatios(t, cl, o, &counts);
  rep.set_overlapped_instances(counts.n_over);
  rep.set_overlapped_without_reference(counts.without_ref);
  rep.set_shorter_than_minimum(counts.too_short);
  rep.set_min_duration_s(o.min_duration_ns * 1e-9);
  std::vector<v1::ContentionGroup> out;
  for (const auto& [id, g] : groups) out.push_back(SummarizeGroup(id, g));
  // By category, then instances, the most first.
  std::stable_sort(out.begin(), out.end(), [](const v1::ContentionGroup& a, const v1::ContentionGroup& b) {
    return a.category() != b.category() ? a.category() < b.category() : a.instances() > b.instances();
  });
  for (auto& c : out) *rep.add_groups() = std::move(c);

  // Notes.
  bool shapes = false;
  for (const KernelRecord& r : k) shapes |= r.shape_id != 0;
  if (!shapes) rep.add_notes("the trace records no launch grid/block: kernels are matched by name only");
  if (rep.groups().empty()) {
    rep.add_notes(counts.n_over == 0 ? "no computation kernel ran beside communication only"
                                     : "no kernel that ran beside communication also ran alone: nothing to compare");
  }
  return rep;
}

}  // namespace stepcast::trace
