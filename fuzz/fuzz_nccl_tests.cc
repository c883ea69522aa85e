// libFuzzer target: an nccl-tests log (calibrate/import_nccl_tests.h).
#include <cstdint>
#include <string>

#include "calibrate/import_nccl_tests.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  stepcast::calibrate::NcclTestsOptions options;
  (void)stepcast::calibrate::ParseNcclTestsLog(std::string(reinterpret_cast<const char*>(data), size), "fuzz.log",
                                               options);
  return 0;
}
