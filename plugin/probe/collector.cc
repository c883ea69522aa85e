#include "plugin/probe/collector.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stepcast::probe {

void Collector::AddKernel(absl::string_view name, int64_t start_ns, int64_t end_ns, int32_t stream,
                          int64_t correlation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = names_.try_emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  KernelRecord r;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.name_id = it->second;
  r.category = ClassifyKernel(name);
  if (r.category == KernelCategory::kCommunication) r.collective = CollectiveIndex(CollectiveOf(name));
  r.stream = stream;
  r.correlation = correlation;
  kernels_.push_back(r);
  ++kernels_seen_;
  if (kernels_.size() >= options_.max_records) CompactLocked();
}

void Collector::AddMemory(bool memset, int64_t start_ns, int64_t end_ns, int32_t stream, int64_t correlation) {
  AddKernel(memset ? "Memset" : "Memcpy", start_ns, end_ns, stream, correlation);
}

void Collector::AddLaunch(int64_t correlation, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  // A runtime launch and the driver call it makes share the correlation id (both recorded since
  // the driver's launches are: gpu code review 2, N8): the launch is the earlier, the runtime's.
  auto [it, fresh] = launches_.try_emplace(correlation, t_ns);
  if (!fresh) it->second = std::min(it->second, t_ns);
  if (launches_.size() > 2 * options_.max_records) {
    // Launches whose kernels never came (or came long ago): keep the newest half.
    std::vector<int64_t> times;
    times.reserve(launches_.size());
    for (const auto& [c, t] : launches_) times.push_back(t);
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    const int64_t cut = times[times.size() / 2];
    std::erase_if(launches_, [cut](const auto& kv) { return kv.second < cut; });
  }
}

void Collector::AddRangeStart(uint64_t id, absl::string_view name, int64_t t) {
  if (!IsStepRangeName(name, options_.step_pattern)) return;
  std::lock_guard<std::mutex> lock(mu_);
  open_ranges_[id] = step_ranges_.size();
  step_ranges_.push_back({t, 0});
}

void Collector::AddRangeEnd(uint64_t id, int64_t t) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_ranges_.find(id);
  if (it == open_ranges_.end()) return;
  if (it->second < step_ranges_.size()) step_ranges_[it->second].end_ns = t;
  open_ranges_.erase(it);
}

void Collector::AddDropped(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_ += n;
}

size_t Collector::buffered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_.size();
}

int64_t Collector::kernels_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_seen_;
}

std::vector<int64_t> Collector::Starts(std::string* source) {
  std::sort(kernels_.begin(), kernels_.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  if (!step_ranges_.empty()) {
    // Outermost step ranges only (M4); ranges still open extend to the end.
    const std::vector<TimeRange> steps = OutermostRanges(step_ranges_);
    // Through the launch (correlation): each kernel's step is the range holding its launch.
    std::vector<int32_t> iteration(kernels_.size(), -1);
    int64_t linked = 0;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      auto l = launches_.find(kernels_[i].correlation);
      if (kernels_[i].correlation < 0 || l == launches_.end()) continue;
      const int64_t t = l->second;
      auto r = std::upper_bound(steps.begin(), steps.end(), t,
                                [](int64_t v, const TimeRange& x) { return v < x.start_ns; });
      if (r == steps.begin()) continue;
      --r;
      if (r->end_ns != 0 && t >= r->end_ns) continue;
      iteration[i] = static_cast<int32_t>(r - steps.begin());
      ++linked;
    }
    if (linked > 0) {
      *source = absl::StrCat("nvtx:", options_.step_pattern, " (launch correlation)");
      return StepStartsFromIterations(kernels_, iteration);
    }
    *source = absl::StrCat("nvtx:", options_.step_pattern);
    return StepStartsFromRanges(kernels_, steps);
  }
  PeriodOptions po;
  po.max_comparisons = options_.max_period_comparisons;
  absl::StatusOr<PeriodResult> p = StepStartsFromPeriod(kernels_, po);
  if (!p.ok()) {
    *source = "none";
    return {};
  }
  *source = absl::StrCat("period:", p->period);
  return p->starts;
}

void Collector::CompactLocked() {
  std::string source;
  const std::vector<int64_t> starts = Starts(&source);
  if (starts.size() < 2) {
    // No step structure yet: keep the newest half so memory stays bounded.
    kernels_.erase(kernels_.begin(), kernels_.begin() + kernels_.size() / 2);
    steps_discarded_ += 1;
    return;
  }
  source_ = source;
  const int64_t lookback = MaxDurationNs(kernels_);
  for (size_t i = 0; i + 1 < starts.size(); ++i, ++steps_seen_) {
    if (steps_seen_ < options_.warmup_steps) continue;
    v1::StepMeasurement m = AnalyzeWindow(kernels_, starts[i], starts[i + 1], lookback);
    m.set_step(static_cast<int32_t>(steps_seen_));
    done_.push_back(std::move(m));
  }
  if (done_.size() > options_.max_steps) {
    steps_discarded_ += static_cast<int64_t>(done_.size() - options_.max_steps);
    done_.erase(done_.begin(), done_.begin() + (done_.size() - options_.max_steps));
  }
  const int64_t keep_from = starts.back();
  // Launch times of the measured kernels are no longer needed.
  for (const KernelRecord& k : kernels_) {
    if (k.start_ns < keep_from && k.correlation >= 0) launches_.erase(k.correlation);
  }
  kernels_.erase(std::remove_if(kernels_.begin(), kernels_.end(),
                                [&](const KernelRecord& k) { return k.start_ns < keep_from; }),
                 kernels_.end());
  // Keep the outermost range that opened the kept step (it starts on the CPU before its first
  // kernel) and everything after it; re-index the open ranges.
  const std::vector<TimeRange> outer = OutermostRanges(step_ranges_);
  int64_t keep_range_from = INT64_MIN;
  for (const TimeRange& r : outer) {
    if (r.start_ns <= keep_from) keep_range_from = r.start_ns;
  }
  std::vector<TimeRange> kept;
  std::unordered_map<size_t, size_t> moved;
  for (size_t i = 0; i < step_ranges_.size(); ++i) {
    if (step_ranges_[i].start_ns >= keep_range_from) {
      moved[i] = kept.size();
      kept.push_back(step_ranges_[i]);
    }
  }
  for (auto it = open_ranges_.begin(); it != open_ranges_.end();) {
    auto m = moved.find(it->second);
    if (m == moved.end()) {
      it = open_ranges_.erase(it);
    } else {
      it->second = m->second;
      ++it;
    }
  }
  step_ranges_ = std::move(kept);
}

v1::ProbeReport Collector::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string source;
  const std::vector<int64_t> starts = Starts(&source);
  if (!source.empty() && source != "none") source_ = source;
  const int64_t lookback = MaxDurationNs(kernels_);
  for (size_t i = 0; i + 1 < starts.size(); ++i, ++steps_seen_) {
    if (steps_seen_ < options_.warmup_steps) continue;
    v1::StepMeasurement m = AnalyzeWindow(kernels_, starts[i], starts[i + 1], lookback);
    m.set_step(static_cast<int32_t>(steps_seen_));
    done_.push_back(std::move(m));
  }
  kernels_.clear();
  v1::ProbeReport r;
  r.set_rank_count(1);
  r.set_step_source(source_.empty() ? "none" : source_);
  r.set_warmup_steps(options_.warmup_steps);
  r.set_kernels_seen(kernels_seen_);
  r.set_records_dropped(dropped_);
  for (auto& m : done_) *r.add_steps() = m;
  if (r.steps().empty()) {
    r.add_notes(source_.empty() || source_ == "none"
                    ? "no steps found: no NVTX step range and no repeating kernel sequence"
                    : "no step after the warm-up steps");
  }
  if (steps_discarded_ > 0) r.add_notes(absl::StrCat(steps_discarded_, " older steps or windows discarded to bound memory"));
  *r.mutable_median() = MedianStep(r.steps());
  return r;
}

}  // namespace stepcast::probe
