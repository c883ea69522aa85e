#include "proto/hf_config.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace stepcast {
namespace {

// Largest integer accepted in a config field: 2^31 - 1.
constexpr int64_t kMaxField = (int64_t{1} << 31) - 1;
// Largest config.json read: real ones are a few KB; a device or a huge file is refused instead of
// read until memory runs out (reliability review: hf_config: /dev/zero aborted the CLI).
constexpr uintmax_t kMaxConfigBytes = uintmax_t{16} << 20;

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
      const int64_t v = root_[key].as<int64_t>();
      // Bounded so that derived sizes (4 * n_embd, products of dims) cannot overflow int64
      // (reliability review: hf_config.cc 4 * n_embd with n_embd 4e18).
      if (v < 0 || v > kMaxField) {
        return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": ", v, " is out of range (0 to ", kMaxField, ")"));
      }
      return v;
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": '", root_[key].Scalar(),
                                                     "' is not an integer"));
    }
  }
  // A count the model needs at least one of (layers, hidden size, heads, vocabulary): an error
  // names the config's own key, not the job field it becomes (reliability review L3).
  absl::StatusOr<int64_t> Count(const char* key, int64_t fallback = -1) const {
    absl::StatusOr<int64_t> v = Int(key, fallback);
    if (v.ok() && *v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": must be at least 1 (got ", *v, ")"));
    }
    return v;
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
  const YAML::Node root_;  // a handle (copy is cheap), so temporaries can be read
  std::string origin_;
};

#define ASSIGN_OR_RETURN_INT(lhs, expr) \
  do {                                  \
    auto _v = (expr);                   \
    if (!_v.ok()) return _v.status();   \
    lhs = *_v;                          \
  } while (0)

// transformers' default of tie_word_embeddings per model_type, for configs that omit the key
// (each class's __init__ default in transformers/models/<type>/configuration_<type>.py; the
// base PretrainedConfig default is True). std::nullopt: the type is not known here.
std::optional<bool> TieWordEmbeddingsDefault(absl::string_view type) {
  // PretrainedConfig's default (configuration_utils.py: tie_word_embeddings=True) is what GPT-2
  // (configuration_gpt2.py passes nothing) and the Gemma family (configuration_gemma.py,
  // configuration_gemma2.py, configuration_gemma3.py: tie_word_embeddings=True) get.
  static const std::set<std::string> kTied = {"gpt2", "gemma", "gemma2", "gemma3", "gemma3_text"};
  // tie_word_embeddings=False in configuration_llama.py, _mistral.py, _mixtral.py, _qwen2.py,
  // _qwen2_moe.py, _qwen3.py, _qwen3_moe.py, _phi3.py, _olmo2.py, _deepseek_v2.py,
  // _deepseek_v3.py, _dbrx.py (which refuses True), _gpt_oss.py; Kimi-K2 ships DeepSeek-V3's
  // configuration class (moonshotai/Kimi-K2-Instruct configuration_deepseek.py).
  static const std::set<std::string> kUntied = {
      "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo", "olmo2",
      "deepseek_v2", "deepseek_v3", "kimi_k2", "dbrx", "gpt_oss"};
  const std::string t(type);
  if (kTied.count(t)) return true;
  if (kUntied.count(t)) return false;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not valid JSON: line ", e.mark.line + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(origin, ": expected a JSON object"));
  // Multimodal configs (Gemma 3, Llama 4, ...) keep the language model in "text_config"
  // (transformers' Gemma3Config.text_config); the decoder is what trains, the vision tower
  // (~0.4B for Gemma 3) is not counted.
  const YAML::Node text_node = root["text_config"];
  const bool nested = text_node && text_node.IsMap();
  const YAML::Node body = nested ? text_node : root;
  Reader top(root, origin);
  Reader r(body, nested ? absl::StrCat(origin, ": text_config") : std::string(origin));
  ModelShape s;
  std::string type = absl::AsciiStrToLower(r.Str("model_type"));
  if (type.empty()) type = absl::AsciiStrToLower(top.Str("model_type"));
  if (nested && type == "gemma3") type = "gemma3_text";
  s.name = top.Str("_name_or_path");
  if (s.name.empty()) {
    // The file's stem ("llama3-8b-config"), else the model type.
    std::string stem(origin);
    if (auto slash = stem.find_last_of('/'); slash != std::string::npos) stem = stem.substr(slash + 1);
    if (auto dot = stem.rfind('.'); dot != std::string::npos) stem = stem.substr(0, dot);
    s.name = stem.empty() || stem == "config" ? type : stem;
  }
  s.source = absl::StrCat("Hugging Face config.json (", origin, ")");

  // Tied input/output embeddings: the file's key (top level wins for nested configs), else
  // transformers' default for the model_type.
  bool tied = false;
  if (top.Has("tie_word_embeddings") || r.Has("tie_word_embeddings")) {
    tied = top.Has("tie_word_embeddings") ? top.Bool("tie_word_embeddings", false) : r.Bool("tie_word_embeddings", false);
  } else if (auto d = TieWordEmbeddingsDefault(type)) {
    tied = *d;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": tie_word_embeddings: missing, and model_type '", type,
        "' has no default known here (add \"tie_word_embeddings\": true or false to the file)"));
  }

  if (type == "gpt2") {
    ASSIGN_OR_RETURN_INT(s.layers, r.Count("n_layer"));
    ASSIGN_OR_RETURN_INT(s.hidden_size, r.Count("n_embd"));
    ASSIGN_OR_RETURN_INT(s.attention_heads, r.Count("n_head"));
    ASSIGN_OR_RETURN_INT(s.ffn_hidden_size, r.Int("n_inner", 4 * s.hidden_size));
    ASSIGN_OR_RETURN_INT(s.vocab_size, r.Count("vocab_size"));
    ASSIGN_OR_RETURN_INT(s.learned_position_embeddings, r.Int("n_positions", 1024));
    s.ffn_type = FfnType::kGelu;
    s.linear_bias = true;
    s.tied_embeddings = tied;
    s.norm_type = NormType::kLayerNorm;
  } else if (type == "dbrx") {
    // transformers configuration_dbrx.py: d_model, n_heads, n_layers, max_seq_len, vocab_size;
    // attn_config {kv_n_heads}; ffn_config {ffn_hidden_size, moe_num_experts, moe_top_k}.
    // DBRX experts are GLU with SiLU (modeling_dbrx.py DbrxExpertGLU: w1, v1, w2), no biases;
    // LayerNorm (its bias-free weight is counted as 2h here, a few thousand parameters more).
    const YAML::Node attn = body["attn_config"], ffn = body["ffn_config"];
    if (!ffn || !ffn.IsMap()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ffn_config: missing"));
    Reader ra(attn ? attn : body, absl::StrCat(origin, ": attn_config"));
    Reader rf(ffn, absl::StrCat(origin, ": ffn_config"));
    ASSIGN_OR_RETURN_INT(s.layers, r.Count("n_layers"));
    ASSIGN_OR_RETURN_INT(s.hidden_size, r.Count("d_model"));
    ASSIGN_OR_RETURN_INT(s.attention_heads, r.Count("n_heads"));
    ASSIGN_OR_RETURN_INT(s.vocab_size, r.Count("vocab_size"));
    ASSIGN_OR_RETURN_INT(s.kv_heads, ra.Int("kv_n_heads", 1));  // DbrxAttentionConfig default 1
    ASSIGN_OR_RETURN_INT(s.ffn_hidden_size, rf.Int("ffn_hidden_size", 3584));  // DbrxFFNConfig defaults
    ASSIGN_OR_RETURN_INT(s.moe.routed_experts, rf.Int("moe_num_experts", 4));
    ASSIGN_OR_RETURN_INT(s.moe.top_k, rf.Int("moe_top_k", 1));
    s.moe.expert_ffn_hidden_size = s.ffn_hidden_size;
    s.ffn_type = FfnType::kSwiGlu;
    s.norm_type = NormType::kLayerNorm;
    s.tied_embeddings = tied;
  } else {
    ASSIGN_OR_RETURN_INT(s.layers, r.Count("num_hidden_layers"));
    ASSIGN_OR_RETURN_INT(s.hidden_size, r.Count("hidden_size"));
    ASSIGN_OR_RETURN_INT(s.attention_heads, r.Count("num_attention_heads"));
    ASSIGN_OR_RETURN_INT(s.kv_heads, r.Int("num_key_value_heads", s.attention_heads));
    ASSIGN_OR_RETURN_INT(s.head_dim, r.Int("head_dim", 0));
    // Gemma3TextConfig's vocab_size default (262208) applies when text_config omits it, as the
    // released Gemma 3 configs do.
    ASSIGN_OR_RETURN_INT(s.vocab_size, r.Count("vocab_size", type == "gemma3_text" ? 262208 : -1));
    s.tied_embeddings = tied;
    // gpt-oss always has q/k/v/o biases (configuration_gpt_oss.py sets attention_bias = True).
    s.linear_bias = r.Bool("attention_bias", type == "gpt_oss") || r.Bool("mlp_bias", false);
    std::string act = absl::AsciiStrToLower(r.Str("hidden_activation"));  // Gemma's name
    if (act.empty()) act = absl::AsciiStrToLower(r.Str("hidden_act"));
    const bool gemma = type.rfind("gemma", 0) == 0;
    if (gemma) {
      // GemmaMLP: down(act(gate(x)) * up(x)) with a tanh-GELU: GeGLU (modeling_gemma2.py).
      s.ffn_type = FfnType::kGeGlu;
    } else if (act.empty() || act == "silu" || act == "swish") {
      s.ffn_type = FfnType::kSwiGlu;
    } else if (absl::StrContains(act, "gelu")) {
      // LlamaMLP-style gated block with a GELU activation.
      s.ffn_type = FfnType::kGeGlu;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": hidden_act: '", act,
                                                     "' is not modelled (silu, swish, gelu*)"));
    }
    s.norm_type = NormType::kRmsNorm;
    if (r.Has("intermediate_size")) {
      ASSIGN_OR_RETURN_INT(s.ffn_hidden_size, r.Int("intermediate_size"));
    }
    if (type == "mixtral" || type == "gpt_oss" || r.Has("num_local_experts")) {
      ASSIGN_OR_RETURN_INT(s.moe.routed_experts, r.Int("num_local_experts"));
      // gpt-oss's config.json names it experts_per_token (configuration_gpt_oss.py maps both).
      ASSIGN_OR_RETURN_INT(s.moe.top_k, r.Has("num_experts_per_tok") ? r.Int("num_experts_per_tok")
                                                                      : r.Int("experts_per_token"));
      s.moe.expert_ffn_hidden_size = s.ffn_hidden_size;
    } else if (r.Has("n_routed_experts")) {  // DeepSeek-V2/V3, Kimi-K2
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
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) > kMaxConfigBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file of at most 16 MiB"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ModelShapeFromHfConfig(ss.str(), path);
}

}  // namespace stepcast
