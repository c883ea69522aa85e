// libFuzzer target: a Hugging Face config.json -> ModelShape (proto/hf_config.h).
#include <cstdint>
#include <string>

#include "proto/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  (void)stepcast::ModelShapeFromHfConfig(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  return 0;
}
