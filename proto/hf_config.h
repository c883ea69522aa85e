// File: proto/hf_config.h
//
// Reads a Hugging Face `config.json` into a ModelShape through the architecture registry
// (proto/architectures.h, presets/architectures/*.yaml): the file's model_type names a family,
// whose entry says which key sets which shape field (with transformers' default for a key the
// file omits), which keys are known and not modelled (listed, with why; some only with given
// values), and what the family fixes (FFN and norm type, biases, head size, local/global
// attention, attention sinks, soft-capping, position encoding). Refused, each naming the type or
// key: an unknown model_type; a family the registry refuses (Mamba / linear-attention hybrids:
// Falcon-H1, Jamba, Nemotron-H, Qwen3-Next, MiniMax, ...); a key of a known family that is
// neither read nor listed; a listed key with a value that is not modelled (Qwen
// use_sliding_window true, non-empty mlp_only_layers); a layer pattern that is not periodic.
// Multimodal configs with a "text_config" (Gemma 3, Llama 4) are read from it (the decoder only).
// Errors name the file and the key ("config.json: num_hidden_layers: missing").
#ifndef STEPCAST_PROTO_HF_CONFIG_H_
#define STEPCAST_PROTO_HF_CONFIG_H_

#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "core/model_shape.h"

namespace stepcast {

// A config read: the shape, the registry family, and the family's listed keys the file has with
// their values and why they are not modelled ("swiglu_limit = 7: clamp inside the experts'
// SwiGLU: an elementwise pass"), for a user to see.
struct HfImport {
  ModelShape shape;
  std::string family;
  std::vector<std::string> listed;
};

absl::StatusOr<HfImport> ReadHfConfig(absl::string_view json_text, absl::string_view origin);
absl::StatusOr<HfImport> LoadHfConfigWithNotes(const std::string& path);
// The shape alone.
absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view json_text, absl::string_view origin);
absl::StatusOr<ModelShape> LoadHfConfig(const std::string& path);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_HF_CONFIG_H_
