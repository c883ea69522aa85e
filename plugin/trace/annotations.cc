#include "plugin/trace/annotations.h"

#include <algorithm>
#include <climits>
#include <map>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

namespace stepcast::trace {
namespace {

using probe::KernelCategory;
using probe::KernelRecord;
using Intervals = std::vector<std::pair<int64_t, int64_t>>;

// Disjoint segments [start, end) labelled with the innermost range open there.
struct Segment {
  int64_t start_ns, end_ns;
  int64_t range;  // index into KinetoTrace::annotations
};

// Sweep over ranges (indices into `all`, sorted by start): at each point the innermost open
// range is the latest-starting one (at equal starts the shorter), found with a heap and lazy
// removal of ended ranges.
std::vector<Segment> Flatten(const std::vector<CpuRange>& all, const std::vector<int64_t>& idx) {
  auto inner_first = [&](int64_t a, int64_t b) {  // heap: top = innermost
    if (all[a].start_ns != all[b].start_ns) return all[a].start_ns < all[b].start_ns;
    return all[a].end_ns > all[b].end_ns;
  };
  std::priority_queue<int64_t, std::vector<int64_t>, decltype(inner_first)> open(inner_first);
  // Ends, to know when the innermost changes.
  std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>, std::greater<>> ends;
  std::vector<Segment> out;
  auto emit = [&](int64_t from, int64_t to) {
    while (!open.empty() && all[open.top()].end_ns <= from) open.pop();
    if (open.empty() || to <= from) return;
    const int64_t r = open.top();
    if (!out.empty() && out.back().range == r && out.back().end_ns == from) {
      out.back().end_ns = to;
    } else {
      out.push_back({from, to, r});
    }
  };
  size_t k = 0;
  int64_t t = idx.empty() ? 0 : all[idx[0]].start_ns;
  while (k < idx.size() || !ends.empty()) {
    const int64_t next_start = k < idx.size() ? all[idx[k]].start_ns : INT64_MAX;
    const int64_t next_end = ends.empty() ? INT64_MAX : ends.top().first;
    const int64_t next = std::min(next_start, next_end);
    emit(t, next);
    t = next;
    while (!ends.empty() && ends.top().first <= t) ends.pop();
    while (k < idx.size() && all[idx[k]].start_ns <= t) {
      if (all[idx[k]].end_ns > all[idx[k]].start_ns) {
        open.push(idx[k]);
        ends.push({all[idx[k]].end_ns, idx[k]});
      }
      ++k;
    }
  }
  return out;
}

int64_t Lookup(const std::vector<Segment>& segs, int64_t t) {
  auto it = std::upper_bound(segs.begin(), segs.end(), t, [](int64_t v, const Segment& s) { return v < s.start_ns; });
  if (it == segs.begin()) return kNoAnnotation;
  --it;
  return t < it->end_ns ? it->range : kNoAnnotation;
}

Intervals Merge(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}
int64_t Length(const Intervals& u) {
  int64_t s = 0;
  for (const auto& iv : u) s += iv.second - iv.first;
  return s;
}
int64_t Intersection(const Intervals& a, const Intervals& b) {
  int64_t s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return s;
}

}  // namespace

std::vector<int64_t> AnnotationOfRecords(const KinetoTrace& t) {
  std::vector<int64_t> out(t.records.size(), kNoLaunch);
  std::unordered_map<uint64_t, std::vector<int64_t>> by_tid;
  std::vector<int64_t> every(t.annotations.size());
  for (size_t i = 0; i < t.annotations.size(); ++i) {
    by_tid[t.annotations[i].tid].push_back(static_cast<int64_t>(i));
    every[i] = static_cast<int64_t>(i);
  }
  std::unordered_map<uint64_t, std::vector<Segment>> segs_by_tid;
  for (const auto& [tid, idx] : by_tid) segs_by_tid[tid] = Flatten(t.annotations, idx);
  const std::vector<Segment> any = Flatten(t.annotations, every);
  for (size_t i = 0; i < t.records.size(); ++i) {
    const KernelRecord& r = t.records[i];
    auto l = std::lower_bound(t.launches.begin(), t.launches.end(), r.correlation,
                              [](const Launch& x, int64_t c) { return x.correlation < c; });
    if (r.correlation < 0 || l == t.launches.end() || l->correlation != r.correlation) continue;
    int64_t a = kNoAnnotation;
    if (auto s = segs_by_tid.find(l->tid); s != segs_by_tid.end()) a = Lookup(s->second, l->t_ns);
    if (a == kNoAnnotation) a = Lookup(any, l->t_ns);
    out[i] = a;
  }
  return out;
}

std::vector<v1::AnnotationTime> AnnotationBreakdown(const KinetoTrace& t) {
  const std::vector<int64_t> of = AnnotationOfRecords(t);
  struct Acc {
    v1::AnnotationTime a;
    Intervals all, compute, comm;
    std::map<int32_t, std::pair<int64_t, int64_t>> streams;  // stream -> (ns, records)
    int64_t sum_ns[probe::kCategoryCount] = {};
  };
  std::map<std::string, Acc> by_name;
  auto name_of = [&](int64_t a) -> std::string {
    if (a == kNoLaunch) return "(no launch)";
    if (a < 0) return "(none)";
    const uint32_t id = t.annotations[a].name_id;
    return id < t.annotation_names.size() ? t.annotation_names[id] : "?";
  };
  for (const CpuRange& r : t.annotations) {
    Acc& acc = by_name[t.annotation_names[r.name_id]];
    acc.a.set_instances(acc.a.instances() + 1);
    acc.a.set_cpu_range_s(acc.a.cpu_range_s() + (r.end_ns - r.start_ns) * 1e-9);
  }
  Intervals comm_all, compute_all;
  for (const KernelRecord& r : t.records) {
    if (r.category == KernelCategory::kCommunication) {
      comm_all.push_back({r.start_ns, r.end_ns});
    } else if (r.category != KernelCategory::kMemory) {
      compute_all.push_back({r.start_ns, r.end_ns});
    }
  }
  comm_all = Merge(std::move(comm_all));
  compute_all = Merge(std::move(compute_all));
  for (size_t i = 0; i < t.records.size(); ++i) {
    const KernelRecord& r = t.records[i];
    Acc& acc = by_name[name_of(of[i])];
    const int64_t d = r.end_ns - r.start_ns;
    acc.a.set_records(acc.a.records() + 1);
    acc.sum_ns[static_cast<int>(r.category)] += d;
    acc.all.push_back({r.start_ns, r.end_ns});
    (r.category == KernelCategory::kCommunication ? acc.comm : acc.compute).push_back({r.start_ns, r.end_ns});
    auto& st = acc.streams[r.stream];
    st.first += d;
    st.second += 1;
  }
  std::vector<v1::AnnotationTime> out;
  for (auto& entry : by_name) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const std::string& name = entry.first;
    Acc& acc = entry.second;
    if (acc.a.records() == 0) continue;
    v1::AnnotationTime a = std::move(acc.a);
    a.set_name(name);
    auto sec = [&](KernelCategory c) { return acc.sum_ns[static_cast<int>(c)] * 1e-9; };
    a.set_gemm_s(sec(KernelCategory::kGemm));
    a.set_attention_s(sec(KernelCategory::kAttention));
    a.set_convolution_s(sec(KernelCategory::kConvolution));
    a.set_elementwise_s(sec(KernelCategory::kElementwise));
    a.set_memory_copy_s(sec(KernelCategory::kMemory));
    a.set_communication_s(sec(KernelCategory::kCommunication));
    a.set_busy_s(Length(Merge(std::move(acc.all))) * 1e-9);
    a.set_compute_overlapped_by_communication_s(Intersection(Merge(std::move(acc.compute)), comm_all) * 1e-9);
    a.set_communication_overlapped_by_compute_s(Intersection(Merge(std::move(acc.comm)), compute_all) * 1e-9);
    for (const auto& [stream, v] : acc.streams) {
      v1::StreamTime* st = a.add_streams();
      st->set_stream(stream);
      st->set_time_s(v.first * 1e-9);
      st->set_records(v.second);
    }
    out.push_back(std::move(a));
  }
  auto total = [](const v1::AnnotationTime& a) {
    return a.gemm_s() + a.attention_s() + a.convolution_s() + a.elementwise_s() + a.memory_copy_s() +
           a.communication_s();
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const v1::AnnotationTime& x, const v1::AnnotationTime& y) { return total(x) > total(y); });
  return out;
}

}  // namespace stepcast::trace
