// libFuzzer target: a PyTorch profiler (Kineto) trace -> ReadKinetoTrace -> AnalyzeKinetoTrace
// with the per-annotation breakdown and both contention keys (plugin/trace/), which read a path:
// the input goes to a temporary file. Small input bounds (KinetoOptions) so the fuzzer reaches
// the bound checks too.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "plugin/trace/contention.h"
#include "plugin/trace/kineto_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  static const std::string path = "/tmp/stepcast-fuzz-" + std::to_string(::getpid()) + ".json";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  stepcast::trace::KinetoOptions ko;
  ko.max_string_bytes = 4096;
  ko.max_records = 4096;
  ko.max_launches = 4096;
  ko.max_annotations = 4096;
  ko.max_name_bytes = 1 << 20;
  absl::StatusOr<stepcast::trace::KinetoTrace> t = stepcast::trace::ReadKinetoTrace(path, ko);
  if (!t.ok()) return 0;
  stepcast::trace::AnalyzeOptions o;
  o.annotations = true;
  o.contention = true;
  (void)stepcast::trace::AnalyzeKinetoTrace(*t, o);
  stepcast::trace::ContentionOptions co;
  co.key = "position";
  co.min_duration_ns = 0;
  (void)stepcast::trace::MeasureContention(*t, co);
  return 0;
}
