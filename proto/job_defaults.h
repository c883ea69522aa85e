// File: proto/job_defaults.h
//
// The defaults of a job's unset inputs, and the record of each one used. A job names its
// framework (default megatron-core); every input it leaves unset takes the framework preset's
// documented default (presets/frameworks/*.yaml `defaults`), else stepcast's own fallback, and
// each such value is recorded as an AssumedInput that predictions report.
#ifndef STEPCAST_PROTO_JOB_DEFAULTS_H_
#define STEPCAST_PROTO_JOB_DEFAULTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/framework.h"
#include "stepcast/v1/framework.pb.h"
#include "stepcast/v1/job.pb.h"

namespace stepcast {

class Catalog;

// The framework a spec names, with its base chain resolved: `framework.preset` looked up in
// the catalog, an inline `framework.spec` laid over its `base` preset (if any), or megatron-core
// when the spec names none (recorded in `assumed`). Errors name "framework.preset" /
// "framework.spec".
absl::StatusOr<v1::FrameworkSpec> ResolveJobFramework(const v1::JobSpec& spec, const Catalog& catalog,
                                                      std::vector<AssumedInput>* assumed);

// Lays `child` over `base`: sub-messages and strings set in the child replace the base's,
// `defaults` replace by field, `sources` add up, `aliases` are the child's.
v1::FrameworkSpec OverlayFramework(const v1::FrameworkSpec& base, const v1::FrameworkSpec& child);

// True when the job field at `path` ("training.precision.grad_reduce") is set in `spec`: a
// message or optional field present, a repeated field non-empty, a plain proto3 scalar not
// zero/empty. InvalidArgument when the path names no field.
absl::StatusOr<bool> JobFieldIsSet(const v1::JobSpec& spec, const std::string& path);

// Sets the field at `path` to `value` (written as in a job file: "zero1", "true", "fp32",
// "core_attn,mlp" for a list) when it is unset, and records it in `assumed` with `source`.
// Errors name the path and the value.
absl::Status ApplyDefault(v1::JobSpec& spec, const std::string& path, const std::string& value,
                          const std::string& source, std::vector<AssumedInput>* assumed);

// Applies the defaults of the framework's recipes whose model (and GPU architecture, precision)
// match `model_name` / `architecture` / `gemm` ("bf16", "fp8"; "" matches any), for fields the
// spec leaves unset; each recorded in `assumed` with the recipe's source.
// `hardware` is the job's hardware preset name (matched against Recipe.hardware). Among
// matching recipes the most specific model name applies first. `sharding` (optional): receives
// the first matching recipe's Recipe.sharding, if any (left untouched otherwise); the caller
// replaces the framework's sharding semantics with it.
absl::Status ApplyRecipeDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework, const std::string& model_name,
                                 const std::string& architecture, const std::string& gemm,
                                 std::vector<AssumedInput>* assumed, const std::string& hardware = "",
                                 v1::ShardingModel* sharding = nullptr);

// Applies every default of `framework` (FrameworkSpec.defaults) that the spec leaves unset.
absl::Status ApplyFrameworkDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework,
                                    std::vector<AssumedInput>* assumed);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_JOB_DEFAULTS_H_
