#include "proto/hf_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace stepcast {
namespace {

class Reader {
 public:
  Reader(const YAML::Node& root, absl::string_view origin) : root_(root), origin_(origin) {}

  bool Has(const char* key) const { return root_[key] && !root_[key].IsNull(); }
  // An integer field; `fallback` < 0 makes it required.
  absl::StatusOr<int64_t> Int(const char* key, int64_t fallback = -1) const {
    if (!Has(key)) {
      if (fallback >= 0) return fallback;
      return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": missing"));
    }
    try {
      return root_[key].as<int64_t>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": '", root_[key].Scalar(),
                                                     "' is not an integer"));
    }
  }
  bool Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    try {
      return root_[key].as<bool>();
    } catch (const YAML::Exception&) {
      return fallback;
    }
  }
  std::string Str(const char* key) const { return Has(key) && root_[key].IsScalar() ? root_[key].Scalar() : ""; }

 private:
  const YAML::Node& root_;
  std::string origin_;
};

#define ASSIGN_OR_RETURN_INT(lhs, expr) \
  do {                                  \
    auto _v = (expr);                   \
    if (!_v.ok()) return _v.status();   \
    lhs = *_v;                          \
  } while (0)

}  // namespace

absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not valid JSON: line ", e.mark.line + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(origin, ": expected a JSON object"));
  Reader r(root, origin);
  ModelShape s;
  const std::string type = absl::AsciiStrToLower(r.Str("model_type"));
  s.name = r.Str("_name_or_path");
  if (s.name.empty()) {
    // The file's stem ("llama3-8b-config"), else the model type.
    std::string stem(origin);
    if (auto slash = stem.find_last_of('/'); slash != std::string::npos) stem = stem.substr(slash + 1);
    if (auto dot = stem.rfind('.'); dot != std::string::npos) stem = stem.substr(0, dot);
    s.name = stem.empty() || stem == "config" ? type : stem;
  }
  s.source = absl::StrCat("Hugging Face config.json (", origin, ")");

  if (type == "gpt2") {
    ASSIGN_OR_RETURN_INT(s.layers, r.Int("n_layer"));
    ASSIGN_OR_RETURN_INT(s.hidden_size, r.Int("n_embd"));
    ASSIGN_OR_RETURN_INT(s.attention_heads, r.Int("n_head"));
    ASSIGN_OR_RETURN_INT(s.ffn_hidden_size, r.Int("n_inner", 4 * s.hidden_size));
    ASSIGN_OR_RETURN_INT(s.vocab_size, r.Int("vocab_size"));
    ASSIGN_OR_RETURN_INT(s.learned_position_embeddings, r.Int("n_positions", 1024));
    s.ffn_type = FfnType::kGelu;
    s.linear_bias = true;
    s.tied_embeddings = r.Bool("tie_word_embeddings", true);
    s.norm_type = NormType::kLayerNorm;
  } else {
    ASSIGN_OR_RETURN_INT(s.layers, r.Int("num_hidden_layers"));
    ASSIGN_OR_RETURN_INT(s.hidden_size, r.Int("hidden_size"));
    ASSIGN_OR_RETURN_INT(s.attention_heads, r.Int("num_attention_heads"));
    ASSIGN_OR_RETURN_INT(s.kv_heads, r.Int("num_key_value_heads", s.attention_heads));
    ASSIGN_OR_RETURN_INT(s.head_dim, r.Int("head_dim", 0));
    ASSIGN_OR_RETURN_INT(s.vocab_size, r.Int("vocab_size"));
    s.tied_embeddings = r.Bool("tie_word_embeddings", false);
    s.linear_bias = r.Bool("attention_bias", false) || r.Bool("mlp_bias", false);
    const std::string act = absl::AsciiStrToLower(r.Str("hidden_act"));
    s.ffn_type = (act.empty() || act == "silu" || act == "swish" || absl::StrContains(act, "gelu_pytorch") ||
                  type.rfind("gemma", 0) == 0)
                     ? FfnType::kSwiGlu
                     : FfnType::kGelu;
    s.norm_type = NormType::kRmsNorm;
    if (r.Has("intermediate_size")) {
      ASSIGN_OR_RETURN_INT(s.ffn_hidden_size, r.Int("intermediate_size"));
    }
    if (type == "mixtral" || r.Has("num_local_experts")) {
      ASSIGN_OR_RETURN_INT(s.moe.routed_experts, r.Int("num_local_experts"));
      ASSIGN_OR_RETURN_INT(s.moe.top_k, r.Int("num_experts_per_tok"));
      s.moe.expert_ffn_hidden_size = s.ffn_hidden_size;
    } else if (r.Has("n_routed_experts")) {  // DeepSeek-V2/V3
      ASSIGN_OR_RETURN_INT(s.moe.routed_experts, r.Int("n_routed_experts"));
      ASSIGN_OR_RETURN_INT(s.moe.top_k, r.Int("num_experts_per_tok"));
      ASSIGN_OR_RETURN_INT(s.moe.expert_ffn_hidden_size, r.Int("moe_intermediate_size"));
      ASSIGN_OR_RETURN_INT(s.moe.shared_experts, r.Int("n_shared_experts", 0));
      ASSIGN_OR_RETURN_INT(s.moe.first_dense_layers, r.Int("first_k_dense_replace", 0));
      ASSIGN_OR_RETURN_INT(s.moe.layer_freq, r.Int("moe_layer_freq", 1));
    } else if (r.Has("num_experts") && r.Has("moe_intermediate_size")) {  // Qwen2/3-MoE
      ASSIGN_OR_RETURN_INT(s.moe.routed_experts, r.Int("num_experts"));
      ASSIGN_OR_RETURN_INT(s.moe.top_k, r.Int("num_experts_per_tok"));
      ASSIGN_OR_RETURN_INT(s.moe.expert_ffn_hidden_size, r.Int("moe_intermediate_size"));
      ASSIGN_OR_RETURN_INT(s.moe.layer_freq, r.Int("decoder_sparse_step", 1));
      int64_t shared = 0;
      ASSIGN_OR_RETURN_INT(shared, r.Int("shared_expert_intermediate_size", 0));
      if (shared > 0) {
        s.moe.shared_experts = 1;
        s.moe.shared_expert_ffn_hidden_size = shared;
      }
    }
    if (r.Has("kv_lora_rank")) {
      ASSIGN_OR_RETURN_INT(s.mla.kv_lora_rank, r.Int("kv_lora_rank"));
      ASSIGN_OR_RETURN_INT(s.mla.q_lora_rank, r.Int("q_lora_rank", 0));
      ASSIGN_OR_RETURN_INT(s.mla.qk_nope_head_dim, r.Int("qk_nope_head_dim"));
      ASSIGN_OR_RETURN_INT(s.mla.qk_rope_head_dim, r.Int("qk_rope_head_dim"));
      ASSIGN_OR_RETURN_INT(s.mla.v_head_dim, r.Int("v_head_dim"));
    }
    if (s.ffn_hidden_size == 0 && !s.moe.enabled()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": intermediate_size: missing"));
    }
    if (s.ffn_hidden_size == 0) s.ffn_hidden_size = s.moe.expert_ffn_hidden_size;
  }
  if (absl::Status st = ValidateModelShape(s); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", st.message()));
  }
  return s;
}

absl::StatusOr<ModelShape> LoadHfConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ModelShapeFromHfConfig(ss.str(), path);
}

}  // namespace stepcast
