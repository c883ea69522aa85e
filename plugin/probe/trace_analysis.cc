#include "plugin/probe/trace_analysis.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stepcast::probe {

const char* const kCollectives[6] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv",
                                     "broadcast"};

const char* CategoryName(KernelCategory c) {
  switch (c) {
    case KernelCategory::kGemm: return "gemm";
    case KernelCategory::kAttention: return "attention";
    case KernelCategory::kCommunication: return "communication";
    case KernelCategory::kMemory: return "memory_copy";
    case KernelCategory::kElementwise: return "elementwise";
  }
  return "?";
}

KernelCategory ClassifyKernel(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  auto has = [&](absl::string_view s) { return absl::StrContains(n, s); };
  if (has("nccl")) return KernelCategory::kCommunication;
  if (absl::StartsWith(n, "memcpy") || absl::StartsWith(n, "memset") || has("copy_kernel") ||
      has("copykernel") || has("memcpy")) {
    return KernelCategory::kMemory;
  }
  if (has("flash_fwd") || has("flash_bwd") || has("flash::") || has("fmha") || has("sdpa") ||
      has("_attn_fwd") || has("_attn_bwd") || has("efficient_attention") || has("flash_attn") ||
      (has("cudnn") && (has("fprop") || has("bprop"))) || has("fused_attn")) {
    return KernelCategory::kAttention;
  }
  if (has("nvjet") || has("gemm") || has("gemv") || has("cutlass") || has("cublas") || has("xmma") ||
      has("s16816") || has("s1688") || has("wgmma") || has("hmma") || has("dot_kernel") || has("matmul")) {
    return KernelCategory::kGemm;
  }
  return KernelCategory::kElementwise;
}

std::string CollectiveOf(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (!absl::StrContains(n, "nccl")) return "";
  if (absl::StrContains(n, "allreduce")) return "all_reduce";
  if (absl::StrContains(n, "allgather")) return "all_gather";
  if (absl::StrContains(n, "reducescatter")) return "reduce_scatter";
  if (absl::StrContains(n, "alltoall")) return "all_to_all";
  if (absl::StrContains(n, "sendrecv") || absl::StrContains(n, "_send") || absl::StrContains(n, "_recv")) {
    return "send_recv";
  }
  if (absl::StrContains(n, "broadcast")) return "broadcast";
  return "other";
}

uint8_t CollectiveIndex(absl::string_view c) {
  for (int i = 0; i < 6; ++i) {
    if (c == kCollectives[i]) return static_cast<uint8_t>(i + 1);
  }
  return c.empty() ? 0 : 7;  // 7: other
}

std::vector<int64_t> StepStartsFromRanges(const std::vector<KernelRecord>& kernels,
                                          const std::vector<TimeRange>& ranges) {
  std::vector<int64_t> starts;
  for (const TimeRange& r : ranges) {
    auto it = std::lower_bound(kernels.begin(), kernels.end(), r.start_ns,
                               [](const KernelRecord& k, int64_t t) { return k.start_ns < t; });
    if (it == kernels.end()) break;
    if (starts.empty() || it->start_ns > starts.back()) starts.push_back(it->start_ns);
  }
  return starts;
}

absl::StatusOr<PeriodResult> StepStartsFromPeriod(const std::vector<KernelRecord>& k, int64_t min_period,
                                                  int64_t max_period) {
  const int64_t n = static_cast<int64_t>(k.size());
  // Judge periods on the tail (past warm-up, autotuning and first-step allocations).
  const int64_t tail_begin = n / 3;
  for (int64_t p = std::max<int64_t>(min_period, 1); p <= std::min(max_period, (n - tail_begin) / 3); ++p) {
    int64_t match = 0, total = 0;
    for (int64_t i = tail_begin; i + p < n; ++i) {
      ++total;
      match += k[i].name_id == k[i + p].name_id;
    }
    if (total == 0 || match < 0.9 * total) continue;
    // Phase: the kernel after the largest idle gap within one period of the tail.
    int64_t best = tail_begin, best_gap = -1;
    for (int64_t i = tail_begin + 1; i <= tail_begin + p && i < n; ++i) {
      const int64_t gap = k[i].start_ns - k[i - 1].end_ns;
      if (gap > best_gap) {
        best_gap = gap;
        best = i;
      }
    }
    const uint32_t anchor = k[best].name_id;
    PeriodResult r;
    r.period = p;
    // Every occurrence of the anchor kernel at (about) period spacing starts a step.
    int64_t last = -p;
    for (int64_t i = 0; i < n; ++i) {
      if (k[i].name_id == anchor && i - last >= p - p / 10) {
        r.starts.push_back(k[i].start_ns);
        last = i;
      }
    }
    return r;
  }
  return absl::NotFoundError("no repeating kernel sequence (steps cannot be found without an NVTX step range)");
}

namespace {

// Union length of intervals clipped to [a, b), and the union itself.
std::vector<std::pair<int64_t, int64_t>> Union(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}
int64_t Length(const std::vector<std::pair<int64_t, int64_t>>& u) {
  int64_t s = 0;
  for (const auto& iv : u) s += iv.second - iv.first;
  return s;
}
int64_t IntersectionLength(const std::vector<std::pair<int64_t, int64_t>>& a,
                           const std::vector<std::pair<int64_t, int64_t>>& b) {
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

v1::StepMeasurement AnalyzeWindow(const std::vector<KernelRecord>& kernels, int64_t a, int64_t b) {
  std::vector<std::pair<int64_t, int64_t>> by_cat[kCategoryCount], compute, all;
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> by_coll;
  int32_t count = 0;
  auto first = std::lower_bound(kernels.begin(), kernels.end(), a - int64_t{60'000'000'000},
                                [](const KernelRecord& k, int64_t t) { return k.start_ns < t; });
  for (auto it = first; it != kernels.end() && it->start_ns < b; ++it) {
    const int64_t s = std::max(it->start_ns, a), e = std::min(it->end_ns, b);
    if (e <= s) continue;
    if (it->start_ns >= a) ++count;
    by_cat[static_cast<int>(it->category)].push_back({s, e});
    all.push_back({s, e});
    if (it->category == KernelCategory::kCommunication) {
      by_coll[it->collective].push_back({s, e});
    } else {
      compute.push_back({s, e});
    }
  }
  v1::StepMeasurement m;
  m.set_step_time_s((b - a) * 1e-9);
  m.set_kernel_count(count);
  std::vector<std::pair<int64_t, int64_t>> u[kCategoryCount];
  for (int c = 0; c < kCategoryCount; ++c) u[c] = Union(by_cat[c]);
  auto* busy = m.mutable_busy();
  busy->set_gemm_s(Length(u[0]) * 1e-9);
  busy->set_attention_s(Length(u[1]) * 1e-9);
  busy->set_communication_s(Length(u[2]) * 1e-9);
  busy->set_memory_copy_s(Length(u[3]) * 1e-9);
  busy->set_elementwise_s(Length(u[4]) * 1e-9);
  const auto comp = Union(compute);
  m.set_exposed_communication_s((Length(u[2]) - IntersectionLength(u[2], comp)) * 1e-9);
  m.set_idle_s(((b - a) - Length(Union(all))) * 1e-9);
  for (auto& [idx, v] : by_coll) {
    const std::string name = idx >= 1 && idx <= 6 ? kCollectives[idx - 1] : "other";
    (*m.mutable_communication_by_collective_s())[name] = Length(Union(v)) * 1e-9;
  }
  return m;
}

v1::StepMeasurement MedianStep(const google::protobuf::RepeatedPtrField<v1::StepMeasurement>& steps) {
  v1::StepMeasurement out;
  if (steps.empty()) return out;
  auto med = [&](auto get) {
    std::vector<double> v;
    for (const auto& s : steps) v.push_back(get(s));
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  out.set_step(-1);
  out.set_step_time_s(med([](const auto& s) { return s.step_time_s(); }));
  out.set_exposed_communication_s(med([](const auto& s) { return s.exposed_communication_s(); }));
  out.set_idle_s(med([](const auto& s) { return s.idle_s(); }));
  out.set_kernel_count(static_cast<int32_t>(med([](const auto& s) { return double(s.kernel_count()); })));
  auto* b = out.mutable_busy();
  b->set_gemm_s(med([](const auto& s) { return s.busy().gemm_s(); }));
  b->set_attention_s(med([](const auto& s) { return s.busy().attention_s(); }));
  b->set_communication_s(med([](const auto& s) { return s.busy().communication_s(); }));
  b->set_memory_copy_s(med([](const auto& s) { return s.busy().memory_copy_s(); }));
  b->set_elementwise_s(med([](const auto& s) { return s.busy().elementwise_s(); }));
  std::map<std::string, bool> colls;
  for (const auto& s : steps)
    for (const auto& [k, v] : s.communication_by_collective_s()) colls[k] = true;
  for (const auto& [k, unused] : colls) {
    (*out.mutable_communication_by_collective_s())[k] = med([&](const auto& s) {
      auto it = s.communication_by_collective_s().find(k);
      return it == s.communication_by_collective_s().end() ? 0.0 : it->second;
    });
  }
  return out;
}

v1::ProbeReport BuildReport(const std::vector<KernelRecord>& kernels, const std::vector<int64_t>& starts,
                            const std::string& step_source, const ReportOptions& options) {
  v1::ProbeReport r;
  r.set_step_source(step_source);
  r.set_warmup_steps(options.warmup_steps);
  r.set_kernels_seen(static_cast<int64_t>(kernels.size()));
  r.set_rank_count(1);
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    if (static_cast<int>(i) < options.warmup_steps) continue;
    v1::StepMeasurement m = AnalyzeWindow(kernels, starts[i], starts[i + 1]);
    m.set_step(static_cast<int32_t>(i));
    *r.add_steps() = std::move(m);
  }
  if (r.steps().empty()) {
    r.add_notes(absl::StrCat("fewer than ", options.warmup_steps + 2, " step boundaries: no measured step"));
  }
  *r.mutable_median() = MedianStep(r.steps());
  return r;
}

absl::StatusOr<v1::ProbeReport> MergeRanks(const std::vector<v1::ProbeReport>& ranks) {
  if (ranks.empty()) return absl::InvalidArgumentError("no rank reports to merge");
  v1::ProbeReport out;
  out.set_rank(-1);
  out.set_rank_count(static_cast<int32_t>(ranks.size()));
  out.set_step_source(ranks[0].step_source());
  out.set_warmup_steps(ranks[0].warmup_steps());
  std::map<int32_t, std::vector<const v1::StepMeasurement*>> by_step;
  for (const auto& r : ranks) {
    out.set_kernels_seen(out.kernels_seen() + r.kernels_seen());
    out.set_records_dropped(out.records_dropped() + r.records_dropped());
    for (const auto& s : r.steps()) by_step[s.step()].push_back(&s);
    for (const auto& n : r.notes()) out.add_notes(absl::StrCat("rank ", r.rank(), ": ", n));
  }
  for (const auto& [step, v] : by_step) {
    if (v.size() != ranks.size()) continue;
    const v1::StepMeasurement* slowest = *std::max_element(
        v.begin(), v.end(), [](const auto* x, const auto* y) { return x->step_time_s() < y->step_time_s(); });
    *out.add_steps() = *slowest;
  }
  if (out.steps().empty()) return absl::FailedPreconditionError("the ranks share no measured step");
  *out.mutable_median() = MedianStep(out.steps());
  return out;
}

}  // namespace stepcast::probe
