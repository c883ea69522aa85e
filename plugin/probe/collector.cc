#include "plugin/probe/collector.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stepcast::probe {

void Collector::AddKernel(absl::string_view name, int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = names_.try_emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  KernelRecord r;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.name_id = it->second;
  r.category = ClassifyKernel(name);
  if (r.category == KernelCategory::kCommunication) r.collective = CollectiveIndex(CollectiveOf(name));
  kernels_.push_back(r);
  ++kernels_seen_;
  if (kernels_.size() >= options_.max_records) CompactLocked();
}

void Collector::AddMemory(bool memset, int64_t start_ns, int64_t end_ns) {
  AddKernel(memset ? "Memset" : "Memcpy", start_ns, end_ns);
}

void Collector::AddRangeStart(uint64_t id, absl::string_view name, int64_t t) {
  if (!absl::StrContains(absl::AsciiStrToLower(name), absl::AsciiStrToLower(options_.step_pattern))) return;
  std::lock_guard<std::mutex> lock(mu_);
  open_ranges_[id] = t;
  step_ranges_.push_back({t, 0});
}

void Collector::AddRangeEnd(uint64_t id, int64_t t) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_ranges_.find(id);
  if (it == open_ranges_.end()) return;
  for (auto& r : step_ranges_)
    if (r.start_ns == it->second && r.end_ns == 0) r.end_ns = t;
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

std::vector<int64_t> Collector::Starts(std::string* source) {
  std::sort(kernels_.begin(), kernels_.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  if (!step_ranges_.empty()) {
    std::sort(step_ranges_.begin(), step_ranges_.end(),
              [](const TimeRange& a, const TimeRange& b) { return a.start_ns < b.start_ns; });
    *source = absl::StrCat("nvtx:", options_.step_pattern);
    return StepStartsFromRanges(kernels_, step_ranges_);
  }
  absl::StatusOr<PeriodResult> p = StepStartsFromPeriod(kernels_);
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
  for (size_t i = 0; i + 1 < starts.size(); ++i, ++steps_seen_) {
    if (steps_seen_ < options_.warmup_steps) continue;
    v1::StepMeasurement m = AnalyzeWindow(kernels_, starts[i], starts[i + 1]);
    m.set_step(static_cast<int32_t>(steps_seen_));
    done_.push_back(std::move(m));
  }
  if (done_.size() > options_.max_steps) {
    steps_discarded_ += static_cast<int64_t>(done_.size() - options_.max_steps);
    done_.erase(done_.begin(), done_.begin() + (done_.size() - options_.max_steps));
  }
  const int64_t keep_from = starts.back();
  kernels_.erase(std::remove_if(kernels_.begin(), kernels_.end(),
                                [&](const KernelRecord& k) { return k.start_ns < keep_from; }),
                 kernels_.end());
  // Keep the range that opened the kept step (it starts on the CPU before its first kernel).
  size_t first_kept = 0;
  for (size_t i = 0; i < step_ranges_.size(); ++i) {
    if (step_ranges_[i].start_ns <= keep_from) first_kept = i;
  }
  step_ranges_.erase(step_ranges_.begin(), step_ranges_.begin() + first_kept);
}

v1::ProbeReport Collector::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string source;
  const std::vector<int64_t> starts = Starts(&source);
  if (!source.empty() && source != "none") source_ = source;
  for (size_t i = 0; i + 1 < starts.size(); ++i, ++steps_seen_) {
    if (steps_seen_ < options_.warmup_steps) continue;
    v1::StepMeasurement m = AnalyzeWindow(kernels_, starts[i], starts[i + 1]);
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
