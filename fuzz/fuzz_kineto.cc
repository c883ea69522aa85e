// libFuzzer target: a PyTorch profiler (Kineto) trace -> ReadKinetoTrace -> AnalyzeKinetoTrace
// (plugin/trace/kineto_trace.h), which read a path: the input goes to a temporary file.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "plugin/trace/kineto_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  static const std::string path = "/tmp/stepcast-fuzz-" + std::to_string(::getpid()) + ".json";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<stepcast::trace::KinetoTrace> t = stepcast::trace::ReadKinetoTrace(path);
  if (t.ok()) (void)stepcast::trace::AnalyzeKinetoTrace(*t);
  return 0;
}
