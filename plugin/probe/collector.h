// File: plugin/probe/collector.h
//
// The run probe's in-process state: activity records in, per-step measurements out, with bounded
// memory. Records (kernels, memcpy/memset, runtime launches, NVTX ranges) are buffered up to
// max_records; when the buffer is full, every complete step in it is measured and dropped, so
// memory stays bounded whatever the run length. Thread-safe (CUPTI delivers buffers on its own
// threads). The work done under the lock is bounded (reliability review M5): the period search
// compares at most max_period_comparisons names per compaction, open ranges are indexed by id,
// and compaction runs once per max_records records.
//
// Steps: the outermost NVTX ranges whose name marks a step (IsStepRangeName; M4: "forward_step"
// inside "train_step" is not a step). A kernel belongs to the step whose range contains its
// *launch* (the CUPTI runtime record with the same correlation id; gpu_code_review item 8, as
// HTA does); without launch records, to the range open when it starts (the older rule); without
// step ranges, steps come from the period of the compute stream's kernel sequence.
#ifndef STEPCAST_PLUGIN_PROBE_COLLECTOR_H_
#define STEPCAST_PLUGIN_PROBE_COLLECTOR_H_

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "plugin/probe/trace_analysis.h"

namespace stepcast::probe {

class Collector {
 public:
  struct Options {
    // NVTX ranges marking the steps: see IsStepRangeName ("step": ProfilerStep#N, train_step,
    // "step 12", ...; anything else: that exact name, case-insensitive).
    std::string step_pattern = "step";
    int warmup_steps = 2;
    size_t max_records = size_t{1} << 21;  // ~80 MiB of kernel records
    size_t max_steps = 100000;             // measured steps kept (the latest)
    // Work bound of one period search (name comparisons; PeriodOptions::max_comparisons).
    int64_t max_period_comparisons = 20'000'000;
  };
  explicit Collector(Options o) : options_(std::move(o)) {}

  // stream: CUDA stream id (-1 unknown); correlation: CUPTI correlation id (-1 unknown).
  void AddKernel(absl::string_view name, int64_t start_ns, int64_t end_ns, int32_t stream = -1,
                 int64_t correlation = -1);
  void AddMemory(bool memset, int64_t start_ns, int64_t end_ns, int32_t stream = -1, int64_t correlation = -1);
  // A runtime or driver API call that launched work (CUPTI RUNTIME / DRIVER record): CPU time of
  // the call. Given twice for one correlation id (a runtime launch and the driver call it makes),
  // the earlier time is kept.
  void AddLaunch(int64_t correlation, int64_t t_ns);
  void AddRangeStart(uint64_t id, absl::string_view name, int64_t t_ns);
  void AddRangeEnd(uint64_t id, int64_t t_ns);
  void AddDropped(int64_t n);

  // Measures what is buffered (the last step closes at the last boundary) and returns the report.
  v1::ProbeReport Finish();
  size_t buffered() const;
  int64_t kernels_seen() const;

 private:
  // Step starts in the buffer and how they were found. Sorts kernels_.
  std::vector<int64_t> Starts(std::string* source);
  void CompactLocked();

  const Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<KernelRecord> kernels_;
  std::vector<TimeRange> step_ranges_;                // CPU time; end 0 while open
  std::unordered_map<uint64_t, size_t> open_ranges_;  // NVTX id -> index in step_ranges_
  std::unordered_map<int64_t, int64_t> launches_;     // correlation -> CPU launch time
  std::vector<v1::StepMeasurement> done_;             // measured steps (global indices)
  int64_t steps_seen_ = 0;                            // steps finalized, incl. warm-up
  int64_t kernels_seen_ = 0, dropped_ = 0, steps_discarded_ = 0;
  std::string source_;
};

}  // namespace stepcast::probe

#endif  // STEPCAST_PLUGIN_PROBE_COLLECTOR_H_
