// File: plugin/probe/collector.h
//
// The run probe's in-process state: activity records in, per-step measurements out, with bounded
// memory. Records (kernels, memcpy/memset, NVTX ranges) are buffered up to max_records; when the
// buffer is full, every complete step in it is measured and dropped, so memory stays bounded
// whatever the run length. Thread-safe (CUPTI delivers buffers on its own threads).
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
    std::string step_pattern = "step";  // NVTX ranges whose name contains this (case-insensitive)
    int warmup_steps = 2;
    size_t max_records = size_t{1} << 21;  // ~48 MiB of records
    size_t max_steps = 100000;             // measured steps kept (the latest)
  };
  explicit Collector(Options o) : options_(std::move(o)) {}

  void AddKernel(absl::string_view name, int64_t start_ns, int64_t end_ns);
  void AddMemory(bool memset, int64_t start_ns, int64_t end_ns);
  void AddRangeStart(uint64_t id, absl::string_view name, int64_t t_ns);
  void AddRangeEnd(uint64_t id, int64_t t_ns);
  void AddDropped(int64_t n);

  // Measures what is buffered (the last step closes at the last boundary) and returns the report.
  v1::ProbeReport Finish();
  size_t buffered() const;

 private:
  // Step starts in the buffer and how they were found.
  std::vector<int64_t> Starts(std::string* source);
  void CompactLocked();

  const Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<KernelRecord> kernels_;
  std::vector<TimeRange> step_ranges_;
  std::unordered_map<uint64_t, int64_t> open_ranges_;  // NVTX id -> start of a step range
  std::vector<v1::StepMeasurement> done_;              // measured steps (global indices)
  int64_t steps_seen_ = 0;                             // steps finalized, incl. warm-up
  int64_t kernels_seen_ = 0, dropped_ = 0, steps_discarded_ = 0;
  std::string source_;
};

}  // namespace stepcast::probe

#endif  // STEPCAST_PLUGIN_PROBE_COLLECTOR_H_
