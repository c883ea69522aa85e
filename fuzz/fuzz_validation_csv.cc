// libFuzzer target: a published-runs CSV through `stepcast validate` (cli::Validate), which
// reads a path: the input is written to a per-process temporary file.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "cli/cli.h"
#include "proto/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  static const stepcast::Catalog* cat = new stepcast::Catalog(*stepcast::Catalog::Builtin());
  static const std::string path = "/tmp/stepcast-fuzz-" + std::to_string(::getpid()) + ".csv";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  (void)stepcast::cli::Validate(path, *cat);
  return 0;
}
