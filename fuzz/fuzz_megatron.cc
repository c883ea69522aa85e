// libFuzzer target: a Megatron-LM command line (one argument per line) -> ImportedJob ->
// Finalize on 8 H100s -> JobFromSpec -> Predict (proto/launch_args.h).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/launch_args.h"

namespace {
const stepcast::Catalog& Cat() {
  static const stepcast::Catalog* c = new stepcast::Catalog(*stepcast::Catalog::Builtin());
  return *c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 14)) return 0;
  std::vector<std::string> argv = absl::StrSplit(std::string(reinterpret_cast<const char*>(data), size), '\n');
  absl::StatusOr<stepcast::ImportedJob> imported = stepcast::JobFromMegatronArgs(argv);
  if (!imported.ok()) return 0;
  absl::StatusOr<stepcast::v1::JobSpec> spec = imported->Finalize(8, "h100-sxm", 8);
  if (!spec.ok()) return 0;
  absl::StatusOr<stepcast::Job> job = stepcast::JobFromSpec(*spec, Cat(), "", nullptr);
  if (job.ok()) (void)stepcast::Predict(*job);
  return 0;
}
