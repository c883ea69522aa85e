// libFuzzer target: a job spec (YAML, JSON or text proto by STEPCAST_FUZZ_FORMAT) -> JobFromSpec
// -> Predict -> PredictionToProto -> JSON, the path of `stepcast predict` and of the service.
// Oracle: an accepted job gives a finite, positive step time (Predict's own check, and here).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "proto/catalog.h"
#include "proto/codec.h"

namespace {
const stepcast::Catalog& Cat() {
  static const stepcast::Catalog* c = new stepcast::Catalog(*stepcast::Catalog::Builtin());
  return *c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  stepcast::v1::JobSpec spec;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!stepcast::ParseMessage(text, stepcast::SpecFormat::STEPCAST_FUZZ_FORMAT, "fuzz", &spec).ok()) return 0;
  // The fuzzer opens no files: a Hugging Face config path is the HF target's job.
  if (spec.model().source_case() == stepcast::v1::ModelSpec::kHfConfig) return 0;
  absl::StatusOr<stepcast::Job> job = stepcast::JobFromSpec(spec, Cat(), "", nullptr);
  if (!job.ok()) return 0;
  absl::StatusOr<stepcast::Prediction> p = stepcast::Predict(*job);
  if (!p.ok()) return 0;
  if (!(std::isfinite(p->step_time_s) && p->step_time_s > 0)) std::abort();  // the oracle
  (void)stepcast::ToJson(stepcast::PredictionToProto(*p));
  return 0;
}
