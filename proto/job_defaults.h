// File: proto/job_defaults.h
//
// The defaults of a job's unset inputs, and the record of each one used. A job names its
// framework (default megatron-core); every input it leaves unset takes the framework preset's
// documented default (presets/frameworks/*.yaml `defaults`), else stepcast's own fallback, and
// each such value is recorded as an AssumedInput that predictions report.
#ifndef STEPCAST_PROTO_JOB_DEFAULTS_H_
#define STEPCAST_PROTO_JOB_DEFAULTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/framework.h"
#include "stepcast/v1/framework.pb.h"
#include "stepcast/v1/job.pb.h"

namespace stepcast {

class Catalog;

// One default (a job field path and a value written as in a job file), compiled once: the
// field's descriptor chain and the value read into a one-field JobSpec by the job file reader
// (same names and checks). Apply() then costs a presence check and a message merge, not a parse.
// Construction never fails: a path that names no job field, or a value the reader refuses, is
// kept and returned by Apply() exactly where ApplyDefault() returns it (a bad value only when
// the field is unset, since a set field is never touched).
class CompiledDefault {
 public:
  CompiledDefault(std::string path, std::string value);

  const std::string& path() const { return path_; }
  const std::string& value() const { return value_; }

  // ApplyDefault(spec, path(), value(), source, assumed), bit for bit: OK and nothing recorded
  // when the field is set; else the value merged in and {path, value, source} appended to
  // `assumed` (when non-null). Errors: "<path>: no job field 'x'" (unknown path), "<path>: default
  // '<value>' (<source>): default of <path>: <why>" (a value the job file reader refuses).
  absl::Status Apply(v1::JobSpec& spec, const std::string& source, std::vector<AssumedInput>* assumed) const;
  // The same with the source built only when it is used (recorded or in an error).
  template <typename SourceFn>
  absl::Status ApplyWith(v1::JobSpec& spec, const SourceFn& source, std::vector<AssumedInput>* assumed) const {
    absl::StatusOr<bool> set = IsSet(spec);
    if (!set.ok()) return set.status();
    if (*set) return absl::OkStatus();
    return Merge(spec, source(), assumed);
  }
  // True when the field is set in `spec` (JobFieldIsSet); the path error when it names no field.
  absl::StatusOr<bool> IsSet(const v1::JobSpec& spec) const;

 private:
  absl::Status Merge(v1::JobSpec& spec, const std::string& source, std::vector<AssumedInput>* assumed) const;

  std::string path_, value_;
  absl::Status path_error_;                                   // the path names no job field
  std::vector<const google::protobuf::FieldDescriptor*> chain_;  // JobSpec -> ... -> the field
  std::vector<const google::protobuf::Reflection*> reflections_;  // of each level's message type
  absl::Status value_error_;                                  // the reader's error for the value
  v1::JobSpec patch_;                                         // the value as a one-field job
};

// One FrameworkDefault.when condition ("<job field path>=<v1>|<v2>...", framework.proto), compiled
// once: the field's descriptor chain and the accepted values read for the field's type, so that
// Holds() costs a presence check and a comparison, not a parse. The condition depends on the
// job's own fields, so it is evaluated per job (as the defaults before it left the job).
// Matching: an enum by its value name's last part (SHARDING_ZERO3 -> zero3), a bool by
// true/false, a string (case-insensitive) or an integer by its text; an unset field matches only
// the value "unset" ("parallelism.vpp=unset|1"). Construction never fails: a condition without
// '=' or naming no job field is kept and returned by Holds().
class CompiledCondition {
 public:
  explicit CompiledCondition(std::string condition);

  const std::string& condition() const { return condition_; }
  // Whether `spec` meets the condition. Errors: "when '<c>': expected <field path>=<value>[|<value>]",
  // "<path>: no job field 'x'" (the path), and, only when the field is set, "when '<c>': a
  // repeated field" / "when '<c>': unsupported field type" (a double, float or message field).
  absl::StatusOr<bool> Holds(const v1::JobSpec& spec) const;

 private:
  std::string condition_;
  absl::Status error_;  // no '=', or the path names no job field
  std::vector<const google::protobuf::FieldDescriptor*> chain_;
  std::vector<const google::protobuf::Reflection*> reflections_;
  std::vector<std::string> values_;  // lower case, whitespace stripped
  bool matches_unset_ = false;       // one of values_ is "unset"
  std::vector<int> enum_numbers_;    // an enum field: the numbers whose name's last part is in values_
  bool matches_true_ = false, matches_false_ = false;  // a bool field
  std::vector<int64_t> integers_;    // an integer field: the values written as an integer's text
};

// A recipe's sharding semantics (framework.proto Recipe.sharding), converted once with the
// framework they belong to: they replace the framework's for a job the recipe matches.
struct RecipeSharding {
  v1::ShardingModel spec;  // as written
  // spec is not empty: the job's framework sharding is replaced (an empty `sharding: {}` is
  // recorded but replaces nothing).
  bool replaces = false;
  // FrameworkFromProto(the framework with `spec` as its sharding, "framework.recipes.sharding")'s
  // sharding, or its error.
  absl::StatusOr<ShardingModel> core;
};

// A framework's defaults and per-model recipes, compiled once (CompiledDefault each, their `when`
// conditions as CompiledCondition, a recipe's sharding converted) from its resolved
// FrameworkSpec, with the recipe model names squashed for matching and the recorded sources of
// the framework defaults built. What ApplyRecipeDefaults / ApplyFrameworkDefaults below do with
// a FrameworkSpec, these do with no parsing; `when` conditions are evaluated per job.
class FrameworkDefaults {
 public:
  explicit FrameworkDefaults(const v1::FrameworkSpec& framework);

  // As ApplyRecipeDefaults(spec, framework, ...) below; `sharding` (optional) receives the first
  // matching recipe's RecipeSharding, if any (left untouched otherwise), recorded in `assumed` as
  // framework.sharding = recipe.
  absl::Status ApplyRecipes(v1::JobSpec& spec, const std::string& model_name, const std::string& architecture,
                            const std::string& gemm, std::vector<AssumedInput>* assumed,
                            const std::string& hardware = "", const RecipeSharding** sharding = nullptr) const;
  // As ApplyFrameworkDefaults(spec, framework, ...) below.
  absl::Status ApplyDefaults(v1::JobSpec& spec, std::vector<AssumedInput>* assumed) const;

 private:
  struct Default {
    CompiledDefault value;
    std::vector<CompiledCondition> when;
    std::string source;  // as recorded: "framework <name> default: <source>"
  };
  struct Value {
    CompiledDefault value;
    std::vector<CompiledCondition> when;
    std::string source;  // the value's own source, else the recipe's
  };
  struct Recipe {
    std::vector<std::string> models;           // as written
    std::vector<std::string> squashed_models;  // lower-case letters and digits only
    std::vector<std::string> architectures, hardware, precisions;
    bool sets_gemm = false;  // one of its values is training.precision.gemm
    std::vector<Value> values;
    bool has_sharding = false;
    RecipeSharding sharding;
    std::string sharding_source;  // Recipe.sharding.source, else the recipe's
  };
  // The recipes whose model names match a model name: (recipe index, model index, squashed
  // length), in recipe order. Kept per thread for the last (framework, model name) asked: a
  // service answers the same few models over and over.
  struct Candidate {
    uint32_t recipe, model;
    size_t length;
  };
  const std::vector<Candidate>& Candidates(const std::string& model_name) const;

  uint64_t id_;  // unique per construction: the per-thread memo's key
  std::string name_;
  std::vector<Default> defaults_;
  std::vector<Recipe> recipes_;
};

// A framework with its base chain resolved, converted to the core type and its defaults and
// recipes compiled: everything a job needs of its framework that depends only on the preset.
// The catalog builds one per preset when it loads (Catalog::LookupFramework); an inline
// `framework.spec` gets one per job.
struct ResolvedFramework {
  // Resolves nothing: `spec` must have its base chain applied already. `prefix` names the spec
  // in errors ("framework", "framework.spec").
  ResolvedFramework(v1::FrameworkSpec spec, const std::string& prefix);

  v1::FrameworkSpec spec;  // base chain applied, base cleared
  // FrameworkFromProto(spec, prefix): its error, if any (then `core` is default-constructed).
  absl::Status status;
  Framework core;
  FrameworkDefaults defaults;
  // The preset's own assumptions (FrameworkSpec.assumptions: the generic preset's model-level
  // choices) as every job under it lists them: source "framework <name> assumption: <source>".
  std::vector<AssumedInput> assumptions;
  // AttentionKernelFromProto of each spec.alternative_attention(i), path
  // "framework.alternative_attention" (as a job that selects it reports its error).
  std::vector<absl::StatusOr<AttentionKernel>> alternative_attention;
  // spec.last_release() and spec.moe().folded_from_release() as ParseRelease reads them (0: unset
  // or not a release; the catalog refuses a preset whose fields do not parse), once per preset.
  int last_release = 0;
  int folded_from_release = 0;
};

// The framework of one job: a catalog preset by reference, or an inline spec resolved for the job
// (owned). Movable; the catalog must outlive it.
class JobFramework {
 public:
  explicit JobFramework(const ResolvedFramework* preset) : fw_(preset) {}
  explicit JobFramework(std::unique_ptr<const ResolvedFramework> owned) : fw_(owned.get()), owned_(std::move(owned)) {}
  const ResolvedFramework& operator*() const { return *fw_; }
  const ResolvedFramework* operator->() const { return fw_; }

 private:
  const ResolvedFramework* fw_;
  std::unique_ptr<const ResolvedFramework> owned_;
};

// What ResolveJobFramework resolves, without a copy for a preset: `framework.preset` looked up in
// the catalog (resolved when it loaded; a text that is no preset name: the preset it names, else
// the generic preset, recorded with Catalog::GenericFrameworkAssumed), an inline `framework.spec`
// laid over its `base` preset (if any) and resolved here, or megatron-core when the spec names
// none (recorded in `assumed`). A preset or inline spec also records its `assumptions`.
// Errors are ResolveJobFramework's, and a preset whose conversion fails returns that error
// (naming "framework.<field>").
absl::StatusOr<JobFramework> LookupJobFramework(const v1::JobSpec& spec, const Catalog& catalog,
                                                std::vector<AssumedInput>* assumed);

// The framework a spec names, with its base chain resolved: `framework.preset` looked up in
// the catalog (a text that names no preset: the generic preset, recorded), an inline
// `framework.spec` laid over its `base` preset (if any), or megatron-core when the spec names
// none (recorded in `assumed`); the preset's `assumptions` recorded. Errors name
// "framework.preset" (a near miss of a preset name: "did you mean") / "framework.spec".
absl::StatusOr<v1::FrameworkSpec> ResolveJobFramework(const v1::JobSpec& spec, const Catalog& catalog,
                                                      std::vector<AssumedInput>* assumed);

// Lays `child` over `base`: sub-messages and strings set in the child replace the base's,
// `defaults` replace by field and `when` conditions, `sources` add up, `aliases` and
// `assumptions` are the child's.
v1::FrameworkSpec OverlayFramework(const v1::FrameworkSpec& base, const v1::FrameworkSpec& child);

// True when the job field at `path` ("training.precision.grad_reduce") is set in `spec`: a
// message or optional field present, a repeated field non-empty, a plain proto3 scalar not
// zero/empty. InvalidArgument when the path names no field.
absl::StatusOr<bool> JobFieldIsSet(const v1::JobSpec& spec, const std::string& path);

// Sets the field at `path` to `value` (written as in a job file: "zero1", "true", "fp32",
// "core_attn,mlp" for a list) when it is unset, and records it in `assumed` with `source`.
// Errors name the path and the value. (CompiledDefault does the same without parsing each time.)
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

// Applies every default of `framework` (FrameworkSpec.defaults) that the spec leaves unset and
// whose `when` conditions hold (evaluated on the job as the defaults before it left it).
absl::Status ApplyFrameworkDefaults(v1::JobSpec& spec, const v1::FrameworkSpec& framework,
                                    std::vector<AssumedInput>* assumed);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_JOB_DEFAULTS_H_
