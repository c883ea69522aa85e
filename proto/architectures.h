// File: proto/architectures.h
//
// The architecture registry (presets/architectures/*.yaml, compiled in; schema
// proto/stepcast/v1/architecture.proto): one entry per model family, saying what each Hugging
// Face model_type, model name, Megatron-Bridge / NeMo provider and torchtitan module means for
// cost and memory. The Hugging Face importer (proto/hf_config.h) and the validation harness
// (proto/published_runs.h) read it; the Megatron and torchtitan importers can look families up
// by provider or module with the same API.
//
// Also the codec of ModelShape's architecture fields (proto fields 40+: local attention,
// attention sinks, soft-capping, position encoding, embedding norm, MTP layers).
#ifndef STEPCAST_PROTO_ARCHITECTURES_H_
#define STEPCAST_PROTO_ARCHITECTURES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model_shape.h"
#include "stepcast/v1/architecture.pb.h"
#include "stepcast/v1/model.pb.h"

namespace stepcast {

class ArchitectureRegistry {
 public:
  // The compiled-in registry, loaded once. An error is a malformed preset file (a build defect:
  // ArchitectureRegistry tests load it).
  static absl::StatusOr<const ArchitectureRegistry*> Builtin();

  // Adds one entry from YAML text; `origin` names the file in errors. InvalidArgument for a
  // malformed entry, an HF model_type or registry name already taken, an unknown keys_from, an
  // unknown field or rule in hf.keys.
  absl::Status Add(absl::string_view origin, absl::string_view yaml);
  // Checks cross-references once every entry is in (keys_from names an entry).
  absl::Status Check() const;

  // Lookups; nullptr when nothing matches.
  // The entry by its registry name ("gpt_oss").
  const v1::Architecture* Find(absl::string_view name) const;
  // The entry reading a config.json of this model_type (case-insensitive).
  const v1::Architecture* ForHfModelType(absl::string_view model_type) const;
  // The family a model name names ("GPT-OSS 120B", "Llama 4 Maverick 400B", "LLAMA3_8B"): when a
  // refused entry's pattern occurs anywhere in the lower-case name, only refused and hybrid entries
  // compete (a name stating Mamba layers names a hybrid, whatever transformer family it also names:
  // "Llama3.2-Mamba2-3B"; "Nemotron 3 Nano (hybrid Mamba-2)" is nemotron_h's); otherwise every
  // entry. Among them the entry whose model_names pattern occurs earliest wins, the longer pattern
  // at the same place ("Nemotron_3_Nano" is nemotron_h's "nemotron_3_nano", not nemotron's
  // "nemotron"; "Llama-3.1-Nemotron-Nano-8B" is llama's); between entries matching equally, the
  // one whose `moe` equals `moe`.
  const v1::Architecture* ForModelName(absl::string_view name, bool moe) const;
  // The named model of `family` that `name` names (its FamilyModel), or nullptr.
  static const v1::FamilyModel* ModelOf(const v1::Architecture& family, absl::string_view name);
  // By torchtitan module ("llama4", "deepseek_v3") and Megatron-Bridge / NeMo provider class.
  const v1::Architecture* ForTorchtitanModule(absl::string_view module) const;
  const v1::Architecture* ForMegatronProvider(absl::string_view provider) const;
  // The keys every config.json may carry (common.yaml).
  const v1::Architecture& Common() const { return common_; }

  // The entry's HF keys and listed keys with its keys_from chain applied (the base's first, an
  // entry of the family's own replacing a base entry sharing a key or alias).
  std::vector<v1::HfKey> HfKeys(const v1::Architecture& a) const;
  std::vector<v1::HfListedKey> HfListed(const v1::Architecture& a) const;

  // The HF model_types the registry reads (`refused` false) or refuses (true), sorted; every
  // registry name, sorted.
  std::vector<std::string> HfModelTypes(bool refused = false) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, v1::Architecture> entries_;   // by name
  std::map<std::string, std::string> hf_types_;       // model_type -> name
  v1::Architecture common_;
};

// Sets what `c` fixes in `shape` (a proto ModelShape under construction; callers apply the
// conventions first and then the values a row or config states): the FFN and norm type,
// biases, tied embeddings, position encoding, head size, local attention, sinks, soft-capping,
// embedding norm. The vocabulary and learned position table are not touched (callers decide).
void ApplyConventions(const v1::FamilyConventions& c, v1::ModelShape* shape);

// ModelShape fields 40+ between the proto and the core type. FromProto checks each value and
// names "<prefix>.<field>" in errors (local_attention_kind/position_encoding unknown values).
absl::Status ArchitectureFieldsFromProto(const v1::ModelShape& m, const std::string& prefix, ModelShape* s);
void ArchitectureFieldsToProto(const ModelShape& s, v1::ModelShape* m);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_ARCHITECTURES_H_
