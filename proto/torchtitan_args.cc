// torchtitan launch lines and TOML configs (proto/torchtitan_args.h).
#include "proto/torchtitan_args.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "toml++/toml.h"
#include "core/model_shape.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/launch_data.h"

namespace stepcast {
namespace {

constexpr int64_t kMaxSize = kMaxLaunchSize;
constexpr int64_t kMaxCount = kMaxLaunchCount;

// A Llama-style SwiGLU hidden size as torchtitan's FeedForward computes it
// (torchtitan/models/llama3/model/model.py FeedForward.__init__): int(2 * hidden / 3), times
// ffn_dim_multiplier, rounded up to multiple_of. `denominator` divides before the rounding
// (llama4 MoE auto_scale_hidden_dim: top_k + shared experts).
int64_t TorchtitanFfn(int64_t hidden, double multiplier, int64_t multiple_of, int64_t denominator = 1) {
  int64_t h = static_cast<int64_t>(2 * hidden / 3);
  if (multiplier > 0) h = static_cast<int64_t>(multiplier * h);
  h = h / denominator;
  return (h + multiple_of - 1) / multiple_of * multiple_of;
}

// The integer in a TOML node, if it holds one: an integer, or a float that is finite, integral and
// within +-2^53 (exactly representable). toml++'s node::value<int64_t>() casts a float node to
// int64 with no range check (toml++ impl/value.h, "float -> int"), undefined behaviour for
// |x| >= 2^63 (found by fuzz_torchtitan: `seq_len = 8.19e67`); so it is not used here.
std::optional<int64_t> TomlInteger(const toml::node& n) {
  if (const toml::value<int64_t>* i = n.as_integer()) return i->get();
  if (const toml::value<double>* f = n.as_floating_point()) {
    const double x = f->get();
    constexpr double kExact = 9007199254740992.0;  // 2^53
    if (std::isfinite(x) && std::trunc(x) == x && std::fabs(x) <= kExact) return static_cast<int64_t>(x);
  }
  return std::nullopt;
}

ModelShape Dense(const char* name, int64_t layers, int64_t dim, int64_t heads, int64_t kv, int64_t head_dim,
                 int64_t ffn, int64_t vocab, bool tied) {
  ModelShape m;
  m.name = name;
  m.layers = layers;
  m.hidden_size = dim;
  m.attention_heads = heads;
  m.kv_heads = kv;
  m.head_dim = head_dim;
  m.ffn_hidden_size = ffn;
  m.ffn_type = FfnType::kSwiGlu;
  m.vocab_size = vocab;
  m.tied_embeddings = tied;
  m.norm_type = NormType::kRmsNorm;
  return m;
}

// torchtitan/models/llama4/__init__.py llama4_configs: dim 5120 (or 256), MoEArgs defaults
// (8 experts, top 1, 1 shared expert), interleave_moe_layer_step (default 2: layers 1, 3, ...
// are MoE), vocab 202048 (2048 for the debug model), ffn_dim_multiplier 1.2, multiple_of 2048.
ModelShape Llama4(const char* name, int64_t layers, int64_t dim, int64_t heads, int64_t kv, int64_t vocab,
                  double mult, int64_t multiple_of, int64_t experts, int64_t step) {
  ModelShape m = Dense(name, layers, dim, heads, kv, 0, TorchtitanFfn(4 * dim, mult, multiple_of), vocab, false);
  m.moe.routed_experts = experts;
  m.moe.top_k = 1;
  m.moe.shared_experts = 1;
  m.moe.expert_ffn_hidden_size = TorchtitanFfn(4 * dim, mult, multiple_of, /*top_k + shared=*/2);
  m.moe.shared_expert_ffn_hidden_size = m.moe.expert_ffn_hidden_size;
  m.moe.first_dense_layers = step - 1;
  m.moe.layer_freq = step;
  return m;
}

// torchtitan/models/deepseek_v3/__init__.py (_debugmodel, _16b, _236b, _671b): MLA with
// kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128; shared experts of moe_hidden_dim each.
ModelShape DeepSeek(const char* name, int64_t layers, int64_t dim, int64_t heads, int64_t vocab, int64_t q_lora,
                    int64_t dense_ffn, int64_t moe_ffn, int64_t experts, int64_t shared, int64_t top_k,
                    int64_t dense_layers) {
  ModelShape m = Dense(name, layers, dim, heads, heads, 0, dense_ffn, vocab, false);
  m.mla.q_lora_rank = q_lora;
  m.mla.kv_lora_rank = 512;
  m.mla.qk_nope_head_dim = 128;
  m.mla.qk_rope_head_dim = 64;
  m.mla.v_head_dim = 128;
  m.moe.routed_experts = experts;
  m.moe.top_k = top_k;
  m.moe.expert_ffn_hidden_size = moe_ffn;
  m.moe.shared_experts = shared;
  m.moe.shared_expert_ffn_hidden_size = moe_ffn;
  m.moe.first_dense_layers = dense_layers;
  return m;
}

ModelShape QwenMoe(const char* name, int64_t layers, int64_t dim, int64_t heads, int64_t kv, int64_t ffn,
                   int64_t vocab, int64_t moe_ffn, int64_t experts) {
  ModelShape m = Dense(name, layers, dim, heads, kv, 128, ffn, vocab, false);
  m.moe.routed_experts = experts;
  m.moe.top_k = 8;
  m.moe.expert_ffn_hidden_size = moe_ffn;
  return m;
}

// Every flavor torchtitan ships for its core models, keyed "name/flavor". A preset name when
// the built-in catalog has the same model, else the shape.
struct Flavor {
  std::string preset;
  ModelShape shape;
  std::string refusal;  // non-empty: the flavor is known but not expressible (the reason)
};
const std::map<std::string, Flavor>& TorchtitanFlavors() {
  static const std::map<std::string, Flavor>* k = [] {
    auto* m = new std::map<std::string, Flavor>;
    // torchtitan/models/llama3/__init__.py llama3_args (debugmodel: dim 256, 6 layers, 16 heads,
    // vocab 2048, FFN int(2*1024/3) rounded up to 256 = 768).
    (*m)["llama3/debugmodel"] = {"", Dense("torchtitan-llama3-debugmodel", 6, 256, 16, 16, 0, 768, 2048, false), {}};
    // Llama 3.2 1B / 3B (torchtitan/models/llama3/__init__.py _1b, _3b at kTorchtitanCommit):
    // compute_ffn_hidden_dim(dim, multiple_of 1024, multiplier 1.5 / 1.0) = 8192, tied embeddings.
    (*m)["llama3/1B"] = {"", Dense("llama3.2-1b", 16, 2048, 32, 8, 0, TorchtitanFfn(4 * 2048, 1.5, 1024), 128256, true), {}};
    (*m)["llama3/3B"] = {"", Dense("llama3.2-3b", 28, 3072, 24, 8, 0, TorchtitanFfn(4 * 3072, 1.0, 1024), 128256, true), {}};
    (*m)["llama3/8B"] = {"llama3-8b", {}, {}};
    (*m)["llama3/70B"] = {"llama3-70b", {}, {}};
    (*m)["llama3/405B"] = {"llama3-405b", {}, {}};
    // Llama 4 Scout (17bx16e: every layer MoE) and Maverick (17bx128e: every other layer).
    (*m)["llama4/debugmodel"] = {"", Llama4("torchtitan-llama4-debugmodel", 6, 256, 16, 16, 2048, 0, 256, 8, 2), {}};
    (*m)["llama4/17bx16e"] = {"", Llama4("llama4-scout-17bx16e", 48, 5120, 40, 8, 202048, 1.2, 2048, 16, 1), {}};
    (*m)["llama4/17bx128e"] = {"", Llama4("llama4-maverick-17bx128e", 48, 5120, 40, 8, 202048, 1.2, 2048, 128, 2), {}};
    (*m)["deepseek_v3/debugmodel"] = {"", DeepSeek("torchtitan-deepseek-v3-debugmodel", 6, 256, 16, 2048, 0, 1024,
                                                   256, 8, 2, 3, 1), {}};
    (*m)["deepseek_v3/16B"] = {"", DeepSeek("deepseek-moe-16b", 27, 2048, 16, 102400, 0, 10944, 1408, 64, 2, 6, 1), {}};
    (*m)["deepseek_v3/236B"] = {"", DeepSeek("deepseek-v2-236b", 60, 5120, 128, 102400, 1536, 12288, 1536, 160, 2, 6, 1), {}};
    (*m)["deepseek_v3/671B"] = {"deepseek-v3", {}, {}};
    // torchtitan/models/qwen3/__init__.py qwen3_args (head_dim 128, vocab 151936, tied up to 4B).
    (*m)["qwen3/debugmodel"] = {"", Dense("torchtitan-qwen3-debugmodel", 8, 256, 16, 8, 128, 3072, 2048, true), {}};
    (*m)["qwen3/0.6B"] = {"", Dense("qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 151936, true), {}};
    (*m)["qwen3/1.7B"] = {"", Dense("qwen3-1.7b", 28, 2048, 16, 8, 128, 6144, 151936, true), {}};
    (*m)["qwen3/4B"] = {"", Dense("qwen3-4b", 36, 2560, 32, 8, 128, 9728, 151936, true), {}};
    (*m)["qwen3/8B"] = {"", Dense("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, false), {}};
    (*m)["qwen3/14B"] = {"", Dense("qwen3-14b", 40, 5120, 40, 8, 128, 17408, 151936, false), {}};
    (*m)["qwen3/32B"] = {"", Dense("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, false), {}};
    (*m)["qwen3/debugmodel_moe"] = {"", QwenMoe("torchtitan-qwen3-debugmodel-moe", 8, 256, 16, 8, 3072, 2048, 768, 64), {}};
    (*m)["qwen3/30B-A3B"] = {"", QwenMoe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 768, 128), {}};
    (*m)["qwen3/235B-A22B"] = {"", QwenMoe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 1536, 128), {}};
    // gpt-oss (torchtitan/models/gpt_oss/__init__.py _20b, _120b: the released models' shapes)
    // alternates 128-token sliding-window and full attention with learned attention sinks: the
    // model presets that describe them (presets/models/gpt-oss-*.yaml) when this build has them.
    for (const char* f : {"20b", "120b"}) {
      const std::string preset = absl::StrCat("gpt-oss-", f);
      bool have = false;
      for (const EmbeddedPreset& e : EmbeddedPresets()) have = have || std::string(e.path) == "models/" + preset + ".yaml";
      (*m)[absl::StrCat("gpt_oss/", f)] =
          have ? Flavor{preset, {}, ""}
               : Flavor{"", {}, "gpt-oss alternates 128-token sliding-window and full attention layers with learned "
                                "attention sinks, which this build's model shape cannot express (no gpt-oss model preset); "
                                "nothing is predicted rather than a full-attention model"};
    }
    (*m)["gpt_oss/debugmodel"] = {"", {}, "the gpt-oss debug model has sliding-window attention and sinks (not expressible "
                                          "here)"};
    for (auto& [key, f] : *m) f.shape.source = absl::StrCat("torchtitan flavor ", key);
    return m;
  }();
  return *k;
}

// The flavor without torchtitan's attention-variant suffixes ("8B_flex_attn", "debugmodel_irope"):
// same parameters, another attention kernel or mask.
std::string BaseFlavor(const std::string& flavor) {
  // "_non_fused_qkv": separate q/k/v projections, the same parameters (qwen3/__init__.py).
  for (const char* suffix : {"_flex_attn", "_varlen_attn", "_flex", "_varlen", "_irope", "_non_fused_qkv"}) {
    if (absl::EndsWith(flavor, suffix)) return flavor.substr(0, flavor.size() - strlen(suffix));
  }
  return flavor;
}

// torchtitan's pipeline_parallel_schedule names (torch.distributed.pipelining schedules) in
// ParallelismSpec.pp_schedule terms.
std::string PpSchedule(const std::string& name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "1f1b") return "1f1b";
  if (n == "interleaved1f1b" || n == "loopedbfs") return "interleaved-1f1b";
  if (n == "gpipe") return "gpipe";
  if (n == "interleavedzerobubble" || n == "zbvzerobubble") return "zero-bubble";
  if (n == "dualpipev") return "dualpipe";
  return "";
}

// Every leaf key path of a TOML table ("parallelism.tensor_parallel_degree",
// "quantize.linear.float8.fqns").
// The node at dotted `path` of `tbl` ("quantize.linear.float8.enable_fsdp_float8_all_gather"), or
// nullptr.
const toml::node* NodeAt(const toml::table& tbl, const std::string& path) {
  const toml::table* cur = &tbl;
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const toml::node* n = cur->get(parts[i]);
    if (n == nullptr || !n->is_table()) return nullptr;
    cur = n->as_table();
  }
  return cur->get(parts.back());
}

// A leaf's value as the TOML file writes it ("'64'", "true", "[\"float8\"]"), for the ignored list.
std::string TomlValueText(const toml::node& n) {
  std::string s;
  if (n.is_floating_point()) {
    s = absl::StrCat(*n.value<double>());  // 3e-4 reads back as 0.0003, not 0.00029999999999999997
  } else {
    std::ostringstream os;
    n.visit([&os](const auto& v) { os << v; });  // strings quoted, arrays bracketed, as TOML writes them
    s = os.str();
  }
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

void LeafPaths(const toml::table& t, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [key, node] : t) {
    const std::string path = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* sub = node.as_table()) {
      if (sub->empty()) out.push_back(path);  // an empty section (e.g. [quantize.linear.float8])
      LeafPaths(*sub, path, out);
    } else {
      out.push_back(path);
    }
  }
}

// The commit of pytorch/torchtitan the config registries in presets/torchtitan_configs/ were read
// from, and the modules it ships (torchtitan/models/__init__.py _supported_models).
constexpr char kTorchtitanCommit[] = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a";
constexpr char kTorchtitanModules[] = "deepseek_v3, flux, gpt_oss, kimi_k2_7, llama3, muse_glimmer, qwen3, qwen3_5";

// Keys of the previous configs (TOML era and the config registry before torchtitan #4121,
// 2026-08-20) and the current ones that say the same thing: a table gives one of each pair.
struct KeyAlias {
  const char* previous;
  const char* current;
};
constexpr KeyAlias kAliases[] = {
    {"training.seq_len", "training.max_context_length"},
    {"training.local_batch_size", "training.num_tokens_per_microbatch_per_dp_rank"},
    {"training.batch_size", "training.num_tokens_per_microbatch_per_dp_rank"},
    {"training.global_batch_size", "training.num_tokens_per_train_step"},
    {"parallelism.pipeline_parallel_microbatch_size", "parallelism.num_pp_microbatches"},
    {"parallelism.enable_async_tensor_parallel", "compile.enable_async_tensor_parallel"},
};

bool HasPath(const toml::table& tbl, const std::string& path) {
  const size_t dot = path.find('.');
  return static_cast<bool>(tbl[path.substr(0, dot)][path.substr(dot + 1)]);
}

void ErasePath(toml::table& tbl, const std::string& path) {
  const size_t dot = path.find('.');
  if (toml::table* sec = tbl[path.substr(0, dot)].as_table()) sec->erase(path.substr(dot + 1));
}

// Typed reads of a torchtitan config table: an absent key gives torchtitan's default, a key of
// another type an error naming it ("origin: section.key: why"), never the default in silence.
class TorchtitanReader {
 public:
  // `from_command_line`: the paths the command line set (ApplyTorchtitanOverrides), whose errors
  // name the flag rather than the config file.
  TorchtitanReader(const toml::table& tbl, absl::string_view origin, const std::set<std::string>* from_command_line = nullptr)
      : tbl_(tbl), origin_(origin), from_command_line_(from_command_line) {}
  const toml::table& tbl() const { return tbl_; }
  bool Has(const std::string& path) const { return HasPath(tbl_, path); }
  absl::Status Err(const std::string& key, const std::string& why) const {
    if (from_command_line_ != nullptr && from_command_line_->count(key)) {
      return absl::InvalidArgumentError(absl::StrCat("--", key, " (command line): ", why));
    }
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", key, ": ", why));
  }
  // An integer in [lo, hi].
  absl::Status Int(const char* section, const char* key, int64_t fallback, int64_t lo, int64_t hi, int64_t* v) const {
    const toml::node_view<const toml::node> n = tbl_[section][key];
    if (!n) {
      *v = fallback;
      return absl::OkStatus();
    }
    std::optional<int64_t> x = TomlInteger(*n.node());
    if (!x) return Err(absl::StrCat(section, ".", key), "must be an integer");
    if (*x < lo || *x > hi) return Err(absl::StrCat(section, ".", key), absl::StrCat(*x, " is out of range (", lo, " to ", hi, ")"));
    *v = *x;
    return absl::OkStatus();
  }
  absl::Status Str(const char* section, const char* key, const char* fallback, std::string* v) const {
    const toml::node_view<const toml::node> n = tbl_[section][key];
    if (!n) {
      *v = fallback;
      return absl::OkStatus();
    }
    if (!n.is_string()) return Err(absl::StrCat(section, ".", key), "must be a string");
    *v = *n.value<std::string>();
    return absl::OkStatus();
  }
  absl::Status Bool(const char* section, const char* key, bool* v, bool fallback = false) const {
    const toml::node_view<const toml::node> n = tbl_[section][key];
    if (!n) {
      *v = fallback;
      return absl::OkStatus();
    }
    if (!n.is_boolean()) return Err(absl::StrCat(section, ".", key), "must be true or false");
    *v = *n.value<bool>();
    return absl::OkStatus();
  }
  // A list of strings; empty when absent.
  absl::Status Strings(const char* section, const char* key, std::vector<std::string>* v) const {
    v->clear();
    const toml::node_view<const toml::node> n = tbl_[section][key];
    if (!n) return absl::OkStatus();
    const toml::array* arr = n.as_array();
    if (!arr) return Err(absl::StrCat(section, ".", key), "must be a list of strings");
    for (const auto& c : *arr) {
      if (!c.is_string()) return Err(absl::StrCat(section, ".", key), "must be a list of strings");
      v->push_back(*c.value<std::string>());
    }
    return absl::OkStatus();
  }

 private:
  const toml::table& tbl_;
  const std::set<std::string>* from_command_line_ = nullptr;
  std::string origin_;
};

#define TT_STR(var, section, key, fallback)                                              \
  std::string var;                                                                      \
  if (absl::Status _s = r.Str(section, key, fallback, &var); !_s.ok()) return _s;
#define TT_BOOL(var, section, key, ...)                                                  \
  bool var = false;                                                                     \
  if (absl::Status _s = r.Bool(section, key, &var, ##__VA_ARGS__); !_s.ok()) return _s;
#define TT_INT(var, section, key, fallback, lo, hi)                                      \
  int64_t var = 0;                                                                      \
  if (absl::Status _s = r.Int(section, key, fallback, lo, hi, &var); !_s.ok()) return _s;

// Which generation of torchtitan's config keys a table uses.
struct TorchtitanKeys {
  bool current = false;        // from the current config registry (presets/torchtitan_configs)
  bool current_keys = false;   // current, or a key only the current configs have
  bool previous_keys = false;  // a key only the previous configs (before torchtitan #4121) have
};

// Lists in out.ignored every leaf key the importer does not read (torchtitan/config/job_config.py,
// and torchtitan/config/configs.py at kTorchtitanCommit), tells the key generations apart
// (kAliases), and refuses a table giving both names of one setting.
absl::Status ListUnreadTorchtitanKeys(const TorchtitanReader& r, TorchtitanKeys& keys, ImportedJob& out) {
  // Keys read below (torchtitan/config/job_config.py, and torchtitan/config/configs.py at
  // kTorchtitanCommit). Everything else is listed.
  static const std::set<std::string> kUsed = {
      "model.name", "model.flavor", "model.converters", "training.seq_len", "training.local_batch_size",
      "training.batch_size", "training.global_batch_size", "training.steps", "training.mixed_precision_param",
      "training.mixed_precision_reduce", "parallelism.data_parallel_replicate_degree",
      "parallelism.data_parallel_shard_degree", "parallelism.tensor_parallel_degree",
      "parallelism.pipeline_parallel_degree", "parallelism.context_parallel_degree",
      "parallelism.pipeline_parallel_microbatch_size", "parallelism.pipeline_parallel_schedule",
      "parallelism.expert_parallel_degree", "parallelism.expert_tensor_parallel_degree",
      "parallelism.enable_async_tensor_parallel", "parallelism.disable_loss_parallel",
      "activation_checkpoint.mode", "activation_checkpoint.selective_ac_option",
      "float8.enable_fsdp_float8_all_gather", "quantize.linear.float8.enable_fsdp_float8_all_gather",
      "float8.recipe_name", "quantize.linear.float8.recipe_name",
      // The current keys (torchtitan #4121 "fold batch dim", #4045 async TP in compile, #3559
      // CUDA graphs).
      "training.max_context_length", "training.num_tokens_per_microbatch_per_dp_rank",
      "training.num_tokens_per_train_step", "parallelism.num_pp_microbatches", "parallelism.enable_sequence_parallel",
      "training.disable_cuda_graphs", "training.dtype", "compile.enable", "compile.components",
      "compile.enable_async_tensor_parallel", "model.moe_comm_backend", "model.non_blocking_capacity_factor",
      "model.attn_backend"};
  std::vector<std::string> paths;
  LeafPaths(r.tbl(), "", paths);
  keys.current_keys = keys.current;
  for (const std::string& path : paths) {
    if (!kUsed.count(path)) {
      // With its value, as the other launchers list theirs (docs/LAUNCHERS.md).
      const toml::node* n = NodeAt(r.tbl(), path);
      out.ignored.push_back(n != nullptr && !n->is_table() ? absl::StrCat(path, " = ", TomlValueText(*n)) : path);
    }
    for (const KeyAlias& a : kAliases) {
      keys.current_keys = keys.current_keys || path == a.current;
      keys.previous_keys = keys.previous_keys || path == a.previous;
    }
    keys.previous_keys = keys.previous_keys || path == "parallelism.expert_tensor_parallel_degree";
  }
  for (const KeyAlias& a : kAliases) {
    if (r.Has(a.previous) && r.Has(a.current)) {
      return r.Err(a.current, absl::StrCat("and ", a.previous, " are both given (the previous and the current name; "
                                                               "give one)"));
    }
  }
  return absl::OkStatus();
}

// The model from model.name and model.flavor (the flavors of torchtitan/models/*/__init__.py):
// a model preset or the flavor's shape; an unknown or unexpressible flavor is an error.
absl::Status SetTorchtitanModel(const TorchtitanReader& r, ImportedJob& out) {
  TT_STR(name, "model", "name", "");
  TT_STR(flavor, "model", "flavor", "");
  const auto& flavors = TorchtitanFlavors();
  auto it = flavors.find(name + "/" + BaseFlavor(flavor));
  if (it == flavors.end()) {
    std::vector<std::string> known;
    for (const auto& [k, f] : flavors) known.push_back(k);
    return r.Err("model.flavor", absl::StrCat("'", name, "' '", flavor, "' is not a torchtitan flavor known here (",
                                              absl::StrJoin(known, ", "), ")"));
  }
  if (!it->second.refusal.empty()) return r.Err("model.flavor", absl::StrCat("'", name, "' '", flavor, "': ", it->second.refusal));
  if (!it->second.preset.empty()) {
    out.spec.mutable_model()->set_preset(it->second.preset);
  } else {
    *out.spec.mutable_model()->mutable_shape() = ModelShapeToProto(it->second.shape);
  }
  return absl::OkStatus();
}

// The context length, the batch per data-parallel rank and per step, and the run length
// (training.* and parallelism.num_pp_microbatches / pipeline_parallel_microbatch_size, in the
// current and the previous key names; job_config.py / configs.py defaults). Sets *pp from
// parallelism.pipeline_parallel_degree.
absl::Status SetTorchtitanBatch(const TorchtitanReader& r, const TorchtitanKeys& keys, int64_t* pp_out,
                                v1::TrainingSpec& t, ImportedJob& out) {
  // Context length: training.max_context_length (current; default 2048), training.seq_len
  // (previous; default 2048). Positions reset every max_context_length tokens and at document
  // boundaries (#4121), so attention spans at most that many tokens: the modelled sequence.
  TT_INT(seq_prev, "training", "seq_len", 2048, 1, kMaxSize);
  TT_INT(seq, "training", "max_context_length", seq_prev, 1, kMaxSize);
  t.set_seq_length(seq);
  const char* seq_key = r.Has("training.max_context_length") || keys.current_keys ? "training.max_context_length"
                                                                                  : "training.seq_len";
  TT_INT(pp, "parallelism", "pipeline_parallel_degree", 1, 1, 65536);
  *pp_out = pp;
  // The batch per data-parallel rank: the current configs give token slots per micro-batch
  // (default 16384) and the number of PP micro-batches (default 1, one when PP is off); the
  // previous ones sequences (local_batch_size, default 8) and the PP micro-batch in sequences.
  int64_t micro_sequences = 0, local_sequences = 0;
  if (r.Has("training.num_tokens_per_microbatch_per_dp_rank") ||
      (keys.current_keys && !r.Has("training.local_batch_size") && !r.Has("training.batch_size"))) {
    TT_INT(tokens, "training", "num_tokens_per_microbatch_per_dp_rank", 16384, 1, kMaxCount);
    if (tokens % seq != 0) {
      return r.Err("training.num_tokens_per_microbatch_per_dp_rank",
                   absl::StrCat(tokens, " is not a multiple of ", seq_key, " ", seq,
                                ": a partial attention span per micro-batch is not modelled"));
    }
    micro_sequences = tokens / seq;
    TT_INT(pp_micro, "parallelism", "num_pp_microbatches", 1, 1, kMaxSize);
    local_sequences = micro_sequences * (pp > 1 ? pp_micro : 1);
  } else {
    TT_INT(old_batch, "training", "batch_size", 8, 1, kMaxSize);
    TT_INT(local, "training", "local_batch_size", old_batch, 1, kMaxSize);
    TT_INT(pp_mbs, "parallelism", "pipeline_parallel_microbatch_size", 1, 1, kMaxSize);
    local_sequences = local;
    micro_sequences = pp > 1 ? pp_mbs : local;
  }
  out.local_batch_size = local_sequences;
  t.set_micro_batch_size(micro_sequences);
  // The global batch: num_tokens_per_train_step (tokens; -1: one accumulation step) or
  // global_batch_size (sequences; -1: local x DP); else resolved by Finalize.
  TT_INT(global, "training", "global_batch_size", -1, -1, kMaxSize);
  if (global > 0) t.set_global_batch_size(global);
  TT_INT(step_tokens, "training", "num_tokens_per_train_step", -1, -1, kMaxCount);
  if (step_tokens == 0) return r.Err("training.num_tokens_per_train_step", "must be -1 or > 0");
  if (step_tokens > 0) {
    if (step_tokens % seq != 0) {
      return r.Err("training.num_tokens_per_train_step",
                   absl::StrCat(step_tokens, " is not a multiple of ", seq_key, " ", seq));
    }
    t.set_global_batch_size(step_tokens / seq);
  }
  TT_INT(steps, "training", "steps", keys.current ? 10000 : 0, 0, kMaxCount);
  t.set_train_iters(steps);
  return absl::OkStatus();
}

// Precision: training.mixed_precision_param / _reduce (FSDP2's MixedPrecisionPolicy),
// training.dtype (bf16 everything, configs.py), fp8 GEMMs from a float8 / mx converter
// (model.converters), float8.enable_fsdp_float8_all_gather.
absl::Status SetTorchtitanPrecision(const TorchtitanReader& r, v1::TrainingSpec& t) {
  TT_STR(mp, "training", "mixed_precision_param", "bfloat16");
  if (mp != "bfloat16" && mp != "float32") return r.Err("training.mixed_precision_param", "must be bfloat16 or float32");
  t.mutable_precision()->set_gemm(mp == "float32" ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  t.mutable_precision()->set_params(mp == "float32" ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  TT_STR(mr, "training", "mixed_precision_reduce", "float32");
  if (mr != "bfloat16" && mr != "float32") return r.Err("training.mixed_precision_reduce", "must be bfloat16 or float32");
  t.mutable_precision()->set_grad_reduce(mr == "bfloat16" ? v1::D_TYPE_BF16 : v1::D_TYPE_FP32);
  // training.dtype "bfloat16" (configs.py): parameters, gradients and optimizer states all in
  // bf16, no fp32 copy.
  TT_STR(dtype, "training", "dtype", "float32");
  if (dtype != "bfloat16" && dtype != "float32") return r.Err("training.dtype", "must be bfloat16 or float32");
  if (dtype == "bfloat16") {
    auto* pr = t.mutable_precision();
    pr->set_params(v1::D_TYPE_BF16), pr->set_grads(v1::D_TYPE_BF16), pr->set_master_weights(v1::D_TYPE_BF16);
    pr->set_optimizer_states(v1::D_TYPE_BF16), pr->set_grad_reduce(v1::D_TYPE_BF16);
  }
  // fp8 GEMMs: a float8 / mx converter (model.converters: the TOML names "float8",
  // "quantize.linear.float8", "mx"; the config registry's Float8LinearConverter, MXFP8...).
  bool fp8 = false, mx = false;
  std::vector<std::string> converters;
  if (absl::Status st = r.Strings("model", "converters", &converters); !st.ok()) return st;
  for (const std::string& v : converters) {
    if (v == "nvfp4" || absl::StrContains(v, "nvfp4")) {
      return r.Err("model.converters", "NVFP4 (NVFP4LinearConverter) is not modelled: stepcast has no fp4 GEMM dtype");
    }
    if (v == "lora") return r.Err("model.converters", "LoRA (LoRAConverter) fine-tuning is not modelled (frozen base weights)");
    fp8 = fp8 || absl::StrContains(v, "float8") || absl::StrContains(v, "mx");
    mx = mx || (absl::StrContains(v, "mx") && !absl::StrContains(v, "float8"));
  }
  if (fp8) t.mutable_precision()->set_gemm(v1::D_TYPE_FP8);
  // The mx converter (torchao MXLinear) trains MXFP8 block-scaled GEMMs: costed with the mxfp8
  // recipe (Transformer Engine's measured MXFP8 rates and traffic stand in for torchao's kernels);
  // float8 keeps the preset's tensorwise default.
  if (mx) t.mutable_precision()->set_fp8_recipe("mxfp8");
  // FSDP's float8 all-gather: [float8] enable_fsdp_float8_all_gather (job_config.py at 6404b93,
  // class Float8) or [quantize.linear.float8] enable_fsdp_float8_all_gather (the later TOML
  // configs, e.g. llama3_405b.toml), default False either way. Set explicitly, true or false: the
  // config is the whole job, so a framework recipe's value must not replace what it says (or its
  // default). It applies only with a float8 converter.
  const char* const kGatherKeys[] = {"float8.enable_fsdp_float8_all_gather",
                                     "quantize.linear.float8.enable_fsdp_float8_all_gather"};
  bool fp8_gather = false;
  for (const char* key : kGatherKeys) {
    const toml::node* n = NodeAt(r.tbl(), key);
    if (n == nullptr) continue;
    if (!n->is_boolean()) return r.Err(key, "must be true or false");
    fp8_gather = fp8_gather || *n->value<bool>();
  }
  t.set_fp8_param_gather(fp8 && fp8_gather);
  return absl::OkStatus();
}

// Activation checkpointing: mode (TOML [activation_checkpoint]; the registry's FullAC /
// SelectiveAC / None, SelectiveAC by default in Trainer.Config at kTorchtitanCommit).
absl::Status SetTorchtitanRecompute(const TorchtitanReader& r, v1::TrainingSpec& t) {
  TT_STR(mode, "activation_checkpoint", "mode", "selective");
  if (mode == "full") t.set_recompute(v1::RECOMPUTE_FULL);
  else if (mode == "selective") t.set_recompute(v1::RECOMPUTE_SELECTIVE);
  else if (mode == "none") t.set_recompute(v1::RECOMPUTE_NONE);
  else if (mode == "memory_budget" || mode == "memory-budget") {
    return r.Err("activation_checkpoint.mode", "memory-budget (MemoryBudgetAC, the compiler's min-cut) is not modelled");
  } else {
    return r.Err("activation_checkpoint.mode", absl::StrCat("'", mode, "' is not none, selective or full"));
  }
  return absl::OkStatus();
}

// The parallel degrees (parallelism.*: TP, CP, EP, ETP of the previous configs, SP, async TP,
// the PP schedule, FSDP / HSDP from data_parallel_shard/replicate_degree) and the framework
// preset (torchtitan-compile when compile.enable covers the model).
absl::Status SetTorchtitanParallelism(const TorchtitanReader& r, const TorchtitanKeys& keys, int64_t pp,
                                      ImportedJob& out) {
  v1::TrainingSpec& t = *out.spec.mutable_training();
  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  TT_INT(tp, "parallelism", "tensor_parallel_degree", 1, 1, 65536);
  TT_INT(cp, "parallelism", "context_parallel_degree", 1, 1, 65536);
  TT_INT(ep, "parallelism", "expert_parallel_degree", 1, 1, 65536);
  TT_INT(etp, "parallelism", "expert_tensor_parallel_degree", 1, 1, 65536);
  p.set_tp(tp);
  p.set_pp(pp);
  p.set_cp(cp);
  p.set_ep(ep);
  // ETP: the key of the previous configs; the current torchtitan has none (#3167 deprecated it):
  // "EP borrows ranks from FSDP and TP" (configs.py expert_parallel_degree), experts unsplit by TP.
  if (ep > 1) p.set_etp(r.Has("parallelism.expert_tensor_parallel_degree") ? etp : (keys.current_keys ? 1 : etp));
  TT_BOOL(sp, "parallelism", "enable_sequence_parallel", true);
  p.set_sequence_parallel(tp > 1 && sp);  // torchtitan's TP plan shards norms/dropout (SP) unless disabled
  TT_BOOL(async_tp_prev, "parallelism", "enable_async_tensor_parallel");
  TT_BOOL(async_tp, "compile", "enable_async_tensor_parallel", async_tp_prev);
  if (async_tp) t.set_overlap_tp_comm(true);
  TT_BOOL(compile, "compile", "enable");
  std::vector<std::string> components;
  if (absl::Status st = r.Strings("compile", "components", &components); !st.ok()) return st;
  if (!r.Has("compile.components")) components = {"model", "loss"};  // CompileConfig default
  const bool compiled_model = compile && std::find(components.begin(), components.end(), "model") != components.end();
  out.spec.mutable_framework()->set_preset(compiled_model ? "torchtitan-compile" : "torchtitan");
  TT_STR(schedule, "parallelism", "pipeline_parallel_schedule", "1F1B");
  if (pp > 1) {
    const std::string sch = PpSchedule(schedule);
    if (sch.empty()) return r.Err("parallelism.pipeline_parallel_schedule", absl::StrCat("'", schedule, "' is not modelled"));
    p.set_pp_schedule(sch);
  }
  TT_INT(replicate, "parallelism", "data_parallel_replicate_degree", 1, 1, kMaxSize);
  TT_INT(shard, "parallelism", "data_parallel_shard_degree", -1, std::numeric_limits<int64_t>::min(),
         std::numeric_limits<int64_t>::max());
  if (shard == 0 || shard < -1 || shard > kMaxSize) {
    return r.Err("parallelism.data_parallel_shard_degree", "must be -1 or 1 to 2^31-1");
  }
  if (shard != 1) t.set_sharding(v1::SHARDING_ZERO3);  // FSDP2 (HSDP when replicate > 1)
  else t.set_sharding(v1::SHARDING_NONE);  // DDP only
  if (replicate > 1 && shard != 1) p.set_dp_replicate(replicate);
  if (shard > 0) p.set_dp(replicate * shard);
  return absl::OkStatus();
}

// CUDA graphs (torchtitan #3559, the current trainer): the forward+backward step is captured
// unless training.disable_cuda_graphs; trainer.py _validate_cuda_graphs refuses pipeline
// parallelism, and expert parallelism with a token dispatcher that synchronizes with the host
// (all but MinimalAsyncEP and HybridEP with non_blocking_capacity_factor).
// A key of the previous configs on the command line means a torchtitan from before #4121,
// whose rules are not the pinned commit's: the CUDA graph rules are not applied then.
absl::Status SetTorchtitanCudaGraphs(const TorchtitanReader& r, const TorchtitanKeys& keys, int64_t pp, int64_t ep,
                                     v1::TrainingSpec& t) {
  if (!keys.current_keys || keys.previous_keys) return absl::OkStatus();
  TT_BOOL(no_graphs, "training", "disable_cuda_graphs");
  if (!no_graphs) {
    if (pp > 1) {
      return r.Err("training.disable_cuda_graphs",
                   "torchtitan refuses CUDA graphs with pipeline parallelism (trainer.py _validate_cuda_graphs: "
                   "'CUDA graphs do not support pipeline parallelism yet'); add --training.disable_cuda_graphs");
    }
    TT_STR(backend, "model", "moe_comm_backend", "standard");
    const bool capacity = static_cast<bool>(r.tbl()["model"]["non_blocking_capacity_factor"]);
    if (ep > 1 && !(backend == "minimal_async_ep" || (backend == "hybridep" && capacity))) {
      return r.Err("training.disable_cuda_graphs",
                   "torchtitan refuses CUDA graphs with expert parallelism over a dispatcher that synchronizes with "
                   "the host (trainer.py _validate_cuda_graphs); add --training.disable_cuda_graphs");
    }
  }
  t.set_cuda_graphs(!no_graphs);
  return absl::OkStatus();
}

// Layer SAC: an integer activation_checkpoint.selective_ac_option with mode "selective" (the
// TOML-era JobConfig, pytorch/torchtitan torchtitan/config/job_config.py @6404b93 class
// ActivationCheckpoint: selective_ac_option "2" by default, "'int' (e.g., 2) for every nth layer,
// or 'op' for op level ac"). torchtitan/distributed/activation_checkpoint.py @6404b93
// _apply_ac_to_transformer_block: a counter over the blocks wrapped on the rank, and the block
// whose count is a multiple of ac_freq is wrapped in a full checkpoint (ac_freq 0: every block);
// the others keep every activation. That is full recompute of floor(L_rank / n) of the rank's
// L_rank = layers / PP blocks: training.recompute full with recompute_num_layers per pipeline
// chunk (none recomputed when the floor is 0, every layer when it reaches L_rank). "op" keeps the
// per-op policy (training.recompute selective). The current config registry (b5bcd76) has no
// option: SelectiveAC is the per-op policy.
absl::Status SetTorchtitanLayerSac(const TorchtitanReader& r, const TorchtitanKeys& keys, ImportedJob& out) {
  v1::TrainingSpec& t = *out.spec.mutable_training();
  if (t.recompute() != v1::RECOMPUTE_SELECTIVE) return absl::OkStatus();
  const char* const key = "activation_checkpoint.selective_ac_option";
  std::string option = keys.current_keys ? "op" : "2";
  if (const toml::node* n = NodeAt(r.tbl(), key)) {
    if (n->is_string()) option = *n->value<std::string>();
    else if (n->is_integer()) option = absl::StrCat(*n->value<int64_t>());
    else return r.Err(key, "must be 'op' or a layer frequency (an integer >= 0)");
  }
  if (option == "op") return absl::OkStatus();
  int64_t every = 0;
  if (!absl::SimpleAtoi(option, &every) || every < 0 || option.empty() ||
      option.find_first_not_of("0123456789") != std::string::npos) {
    return r.Err(key, absl::StrCat("'", option.substr(0, 32), "' is not 'op' or a layer frequency (an integer >= 0)"));
  }
  int64_t layers = 0;
  if (out.spec.model().has_shape()) {
    layers = out.spec.model().shape().layers();
  } else {
    absl::StatusOr<Catalog> catalog = Catalog::Builtin(CatalogLoad::kOnUse);
    if (!catalog.ok()) return catalog.status();
    absl::StatusOr<const ModelShape*> m = catalog->LookupModel(out.spec.model().preset());
    if (!m.ok()) return m.status();
    layers = (*m)->layers;
  }
  const int64_t pp = std::max<int64_t>(1, out.spec.parallelism().pp());
  const int64_t chunks = std::max<int64_t>(1, out.spec.parallelism().vpp());
  const int64_t rank_layers = std::max<int64_t>(1, layers / pp);
  const int64_t checkpointed = every == 0 ? rank_layers : rank_layers / every;
  if (checkpointed == 0) {
    t.set_recompute(v1::RECOMPUTE_NONE);
  } else {
    t.set_recompute(v1::RECOMPUTE_FULL);
    if (checkpointed < rank_layers) {
      t.set_recompute_num_layers(std::max<int64_t>(1, (checkpointed + chunks / 2) / chunks));
    }
  }
  return absl::OkStatus();
}

#undef TT_INT
#undef TT_STR
#undef TT_BOOL

// Reads a torchtitan config table (TOML file, config registry entry, command-line overrides).
// `current`: the table comes from the current config registry (presets/torchtitan_configs), whose
// defaults and rules are those of kTorchtitanCommit (CUDA graphs on unless disabled, ETP gone).
absl::StatusOr<ImportedJob> JobFromTorchtitanTable(const toml::table& tbl, absl::string_view origin,
                                                   std::vector<std::string> extra_ignored, bool current = false,
                                                   const std::set<std::string>* from_command_line = nullptr) {
  ImportedJob out;
  out.source = "torchtitan";
  out.ignored = std::move(extra_ignored);
  const TorchtitanReader r(tbl, origin, from_command_line);
  TorchtitanKeys keys;
  keys.current = current;
  if (absl::Status s = ListUnreadTorchtitanKeys(r, keys, out); !s.ok()) return s;
  if (absl::Status s = SetTorchtitanModel(r, out); !s.ok()) return s;
  v1::TrainingSpec& t = *out.spec.mutable_training();
  int64_t pp = 1;
  if (absl::Status s = SetTorchtitanBatch(r, keys, &pp, t, out); !s.ok()) return s;
  if (absl::Status s = SetTorchtitanPrecision(r, t); !s.ok()) return s;
  // The float8 recipe: torchtitan's float8 converter at kTorchtitanCommit scales row-wise
  // (components/quantization/float8.py: recipe_name Literal["rowwise", "rowwise_with_gw_hp"] =
  // "rowwise"); the TOML-era configs took torchao's tensorwise Float8LinearConfig unless
  // [float8] recipe_name named one. "rowwise_with_gw_hp" keeps the weight-gradient GEMM in bf16,
  // which is not modelled apart: costed as rowwise, and said so.
  if (t.precision().gemm() == v1::D_TYPE_FP8 && t.precision().fp8_recipe().empty()) {
    std::string recipe = keys.current_keys ? "rowwise" : "";
    for (const char* key : {"float8.recipe_name", "quantize.linear.float8.recipe_name"}) {
      const toml::node* n = NodeAt(r.tbl(), key);
      if (n == nullptr) continue;
      if (!n->is_string()) return r.Err(key, "must be a string");
      recipe = **n->as_string();
    }
    if (recipe == "rowwise_with_gw_hp") {
      out.ignored.push_back("float8 recipe rowwise_with_gw_hp (its bf16 weight-gradient GEMM not modelled: costed as rowwise)");
      recipe = "rowwise";
    }
    if (recipe == "rowwise" || recipe == "tensorwise") {
      t.mutable_precision()->set_fp8_recipe(recipe);
    } else if (!recipe.empty()) {
      return r.Err("float8.recipe_name", absl::StrCat("'", recipe, "' is not a float8 recipe torchtitan runs (tensorwise, rowwise, rowwise_with_gw_hp)"));
    }
  }
  // The attention kernel of the current registry: its language models run FlexAttention or varlen
  // attention, not SDPA (models/common/config_utils.py @b5bcd76 get_attention_config: "sdpa is no
  // longer supported for language models"; model_registry(attn_backend="flex") for llama3 and
  // qwen3, "varlen" for gpt_oss). Neither has rates here: costed as the preset's SDPA kernel, and
  // listed.
  if (keys.current_keys || r.Has("model.attn_backend")) {
    std::string backend;
    if (absl::Status s = r.Str("model", "attn_backend", "", &backend); !s.ok()) return s;
    out.ignored.push_back(backend.empty()
                              ? "attention backend: the registry's default (flex or varlen: SDPA no longer runs for "
                                "language models), costed as the preset's SDPA kernel"
                              : absl::StrCat("model.attn_backend = \"", backend, "\" (costed as the preset's SDPA kernel)"));
  }
  if (absl::Status s = SetTorchtitanRecompute(r, t); !s.ok()) return s;
  t.set_overlap_dp_comm(true);
  if (absl::Status s = SetTorchtitanParallelism(r, keys, pp, out); !s.ok()) return s;
  if (absl::Status s = SetTorchtitanLayerSac(r, keys, out); !s.ok()) return s;
  if (absl::Status s = SetTorchtitanCudaGraphs(r, keys, pp, out.spec.parallelism().ep(), t); !s.ok()) return s;
  return out;
}

// Sets `path` (dotted, "training.local_batch_size") in `tbl` from a command-line string, typed
// as torchtitan's argument parser would (integer, float, true/false, else string; a
// comma-separated list for list keys such as model.converters). Setting one of a previous /
// current key pair (kAliases) drops the other: the command line wins over the config.
void SetTomlPath(toml::table& tbl, const std::string& path, const std::string& value) {
  for (const KeyAlias& a : kAliases) {
    if (path == a.previous) ErasePath(tbl, a.current);
    if (path == a.current) ErasePath(tbl, a.previous);
  }
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  toml::table* cur = &tbl;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = cur->get(parts[i]);
    if (!n || !n->is_table()) {
      cur->insert_or_assign(parts[i], toml::table{});
      n = cur->get(parts[i]);
    }
    cur = n->as_table();
  }
  const std::string& key = parts.back();
  int64_t iv = 0;
  double dv = 0;
  if (key == "converters" || key == "components" || key == "fqns") {
    toml::array arr;
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) arr.push_back(std::string(part));
    cur->insert_or_assign(key, std::move(arr));
  } else if (absl::SimpleAtoi(value, &iv)) {
    cur->insert_or_assign(key, iv);
  } else if (value == "true" || value == "True") {
    cur->insert_or_assign(key, true);
  } else if (value == "false" || value == "False") {
    cur->insert_or_assign(key, false);
  } else if (absl::SimpleAtod(value, &dv)) {
    cur->insert_or_assign(key, dv);
  } else {
    cur->insert_or_assign(key, value);
  }
}

// Applies torchtitan command-line overrides to `tbl` as its config manager does
// ("--section.key value", "--section.key=value", a bare "--section.flag" true,
// "--section.no_flag" / "--section.no-flag" false, tyro's subcommand word
// "activation-checkpoint:full"); non-dotted flags and stray words go to `ignored`.
void ApplyTorchtitanOverrides(toml::table& tbl, const std::vector<std::string>& overrides,
                              std::vector<std::string>& ignored, std::set<std::string>* set_paths = nullptr) {
  for (size_t i = 0; i < overrides.size(); ++i) {
    const std::string& tok = overrides[i];
    if (!absl::StartsWith(tok, "--")) {
      // tyro subcommand for the activation checkpoint policy (activation_checkpoint.py:
      // selective, full, memory-budget, none).
      for (const char* prefix : {"activation-checkpoint:", "activation_checkpoint:"}) {
        if (absl::StartsWith(tok, prefix)) {
          SetTomlPath(tbl, "activation_checkpoint.mode", tok.substr(strlen(prefix)));
          if (set_paths != nullptr) set_paths->insert("activation_checkpoint.mode");
          goto next;
        }
      }
      ignored.push_back(tok);
      continue;
    }
    {
      std::string key = tok.substr(2), value;
      bool has_value = false;
      if (size_t eq = key.find('='); eq != std::string::npos) {
        value = key.substr(eq + 1);
        key = key.substr(0, eq);
        has_value = true;
      } else if (i + 1 < overrides.size() && !absl::StartsWith(overrides[i + 1], "--") &&
                 !absl::StartsWith(overrides[i + 1], "activation-checkpoint:")) {
        value = overrides[++i];
        has_value = true;
      }
      if (key == "job.config_file" || key == "config" || key == "module") continue;  // handled by the caller
      if (key.find('.') == std::string::npos) {
        ignored.push_back(has_value ? absl::StrCat(tok, " ", value) : tok);
        continue;
      }
      std::replace(key.begin(), key.end(), '-', '_');
      // tyro's negative boolean form: --parallelism.no_enable_async_tensor_parallel.
      if (!has_value) {
        const size_t dot = key.rfind('.');
        if (key.compare(dot + 1, 3, "no_") == 0) {
          key = key.substr(0, dot + 1) + key.substr(dot + 4);
          value = "false";
        } else {
          value = "true";
        }
      }
      SetTomlPath(tbl, key, value);
      if (set_paths != nullptr) set_paths->insert(key);
    }
  next:;
  }
}

// The config registry entry `config` of `module` (presets/torchtitan_configs/<module>.toml), or
// an error saying why not (a module torchtitan does not ship, or one whose models are refused).
absl::StatusOr<toml::table> RegistryConfig(const std::string& module, const std::string& config) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--module ", module, ": ", why));
  };
  if (module == "kimi_k2") {
    return refuse(absl::StrCat(
        "torchtitan has no module 'kimi_k2' (its modules at commit ", std::string(kTorchtitanCommit).substr(0, 8), ": ",
        kTorchtitanModules, "); its Kimi module is kimi_k2_7 (Kimi K2.5, Moonlight, Kimi-VL), trained with "
        "distributed Muon, which is not modelled"));
  }
  if (module == "kimi_k2_7") {
    return refuse("its configs (kimi_k2_5, moonlight_16b_a3b, kimi_vl_a3b) train with the distributed Muon optimizer "
                  "(config_registry.py _dist_muon_optimizer), whose states and Newton-Schulz steps are not modelled; "
                  "kimi_k2_5 and kimi_vl_a3b also carry a vision tower");
  }
  if (module == "qwen3_5") {
    return refuse("Qwen3.5 is a hybrid of Gated DeltaNet (linear attention) and softmax attention layers, which the "
                  "model does not describe (it models softmax attention only)");
  }
  if (module == "flux") return refuse("FLUX is a diffusion transformer, not a decoder-only language model");
  if (module == "muse_glimmer") return refuse("not a decoder-only language model known here (multimodal)");
  const char* text = LaunchDataFile(absl::StrCat("torchtitan_configs/", module, ".toml"));
  if (!text) {
    return absl::NotFoundError(absl::StrCat("--module ", module, ": not a torchtitan module known here (", kTorchtitanModules,
                                            " at commit ", std::string(kTorchtitanCommit).substr(0, 8), ")"));
  }
  toml::table all;
  try {
    all = toml::parse(std::string_view(text), std::string_view(module));
  } catch (const toml::parse_error& e) {
    return absl::InternalError(absl::StrCat("presets/torchtitan_configs/", module, ".toml: ", std::string(e.description())));
  }
  const toml::table* entry = all[config].as_table();
  if (!entry) {
    std::vector<std::string> known;
    for (const auto& [k, v] : all) known.push_back(std::string(k.str()));
    return absl::InvalidArgumentError(absl::StrCat("--config: '", config, "' is not a config of torchtitan's ", module,
                                                   " registry at commit ", std::string(kTorchtitanCommit).substr(0, 8),
                                                   " (", absl::StrJoin(known, ", "), ")"));
  }
  toml::table out = *entry;
  // The module is the model name (Trainer.Config.model_spec = <module>.model_registry(flavor)).
  SetTomlPath(out, "model.name", module);
  return out;
}

}  // namespace

absl::StatusOr<ImportedJob> JobFromTorchtitanToml(absl::string_view text, absl::string_view origin) {
  return JobFromTorchtitanCommand(text, origin, {});
}

absl::StatusOr<ImportedJob> JobFromTorchtitanCommand(absl::string_view text, absl::string_view origin,
                                                     const std::vector<std::string>& overrides) {
  toml::table tbl;
  if (!text.empty()) {
    try {
      tbl = toml::parse(std::string_view(text.data(), text.size()), std::string_view(origin.data(), origin.size()));
    } catch (const toml::parse_error& e) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": line ", static_cast<int64_t>(e.source().begin.line),
                                                     ": ", std::string(e.description())));
    }
  }
  // Command-line overrides (torchtitan's config manager); the launcher's own flags before the
  // script are not passed here. Non-dotted flags and stray tokens are listed as ignored.
  std::vector<std::string> ignored;
  std::set<std::string> from_command_line;
  ApplyTorchtitanOverrides(tbl, overrides, ignored, &from_command_line);
  return JobFromTorchtitanTable(tbl, origin, std::move(ignored), false, &from_command_line);
}

namespace {

// "llama3_8b" -> "8B" for --module llama3 (torchtitan's config registry names,
// torchtitan/models/<module>/config_registry.py: "<module>_<flavor>"): the flavor of `module`
// whose lower-case name, with '.' and '-' as '_', equals the rest of the config name.
std::string FlavorOfConfig(const std::string& module, const std::string& config) {
  std::string rest = absl::StartsWith(config, module + "_") ? config.substr(module.size() + 1) : config;
  auto norm = [](std::string x) {
    x = absl::AsciiStrToLower(x);
    for (char& c : x) {
      if (c == '.' || c == '-') c = '_';
    }
    return x;
  };
  for (const auto& [key, f] : TorchtitanFlavors()) {
    if (!absl::StartsWith(key, module + "/")) continue;
    const std::string flavor = key.substr(module.size() + 1);
    if (norm(flavor) == norm(rest)) return flavor;
  }
  return "";
}

// The values of VAR=value words in front of the program (environment for run_train.sh).
std::map<std::string, std::string> Assignments(const std::vector<std::string>& argv, size_t program) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < std::min(program, argv.size()); ++i) {
    const size_t eq = argv[i].find('=');
    if (eq != std::string::npos && eq > 0 && argv[i][0] != '-') out[argv[i].substr(0, eq)] = argv[i].substr(eq + 1);
  }
  return out;
}


// The value of `flag` in `args` ("--flag value" or "--flag=value"), the first one given.
std::optional<std::string> ValueOf(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (absl::StartsWith(args[i], flag + "=")) return args[i].substr(flag.size() + 1);
  }
  return std::nullopt;
}

// run_train.sh (pytorch/torchtitan run_train.sh at kTorchtitanCommit): NGPU (default 8),
// MODULE (default llama3), CONFIG (default llama3_debugmodel); before the config registry,
// CONFIG_FILE (a TOML). Its torchrun line passes them as --module/--config and "$@": put in
// front of `args`; the GPU count is NGPU's.
absl::Status ApplyRunTrainSh(const std::vector<std::string>& argv, size_t program_index, std::vector<std::string>& args,
                             int64_t& gpus, std::string& gpus_from) {
  const std::map<std::string, std::string> env = Assignments(argv, program_index);
  auto get = [&](const char* k, const char* d) { auto it = env.find(k); return it == env.end() ? std::string(d) : it->second; };
  const std::string ngpu = get("NGPU", "8");
  int64_t n = 0;
  if (!absl::SimpleAtoi(ngpu, &n) || n <= 0 || n > kMaxSize) {
    return absl::InvalidArgumentError(absl::StrCat("NGPU: '", ngpu, "' is not a GPU count"));
  }
  gpus = n;
  gpus_from = absl::StrCat("run_train.sh NGPU=", ngpu);
  if (env.count("CONFIG_FILE")) {
    args.insert(args.begin(), {"--job.config_file", env.at("CONFIG_FILE")});
  } else {
    args.insert(args.begin(), {"--module", get("MODULE", "llama3"), "--config", get("CONFIG", "llama3_debugmodel")});
  }
  return absl::OkStatus();
}

// torchtitan before its move to Python configs: --job.config_file X.toml (relative to
// `base_dir`, a regular file of at most 16 MiB) plus the command line's overrides.
absl::StatusOr<ImportedJob> ImportTorchtitanConfigFile(const std::string& path, const std::string& base_dir,
                                                       const std::vector<std::string>& args) {
  std::filesystem::path p(path);
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  std::error_code ec;
  if (std::filesystem::exists(p, ec) &&
      (!std::filesystem::is_regular_file(p, ec) || std::filesystem::file_size(p, ec) > (uintmax_t{16} << 20))) {
    return absl::InvalidArgumentError(absl::StrCat("--job.config_file: ", p.string(),
                                                   " is not a regular file of at most 16 MiB"));
  }
  std::ifstream in(p);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--job.config_file: cannot read ", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return JobFromTorchtitanCommand(ss.str(), p.string(), args);
}

// torchtitan now: --module <model> --config <registry function> (plus overrides): the function's
// values as data (presets/torchtitan_configs/<module>.toml, read from torchtitan at
// kTorchtitanCommit), then the command line's overrides, as torchtitan applies them. A module
// the current torchtitan does not ship but an earlier config registry did (llama4): its flavor
// from the config name, the rest of the Python settings not read.
absl::StatusOr<ImportedJob> ImportTorchtitanModule(const std::string& module, const std::vector<std::string>& args) {
  const std::string config = ValueOf(args, "--config").value_or("");
  const std::string origin = absl::StrCat("torchtitan --module ", module, " --config ", config);
  absl::StatusOr<toml::table> entry = RegistryConfig(module, config);
  if (entry.ok()) {
    std::vector<std::string> ignored;
    std::set<std::string> from_command_line;
    ApplyTorchtitanOverrides(*entry, args, ignored, &from_command_line);
    absl::StatusOr<ImportedJob> job =
        JobFromTorchtitanTable(*entry, origin, std::move(ignored), /*current=*/true, &from_command_line);
    if (job.ok()) {
      job->ignored.push_back(absl::StrCat("--config ", config, " (its values read from torchtitan commit ",
                                          std::string(kTorchtitanCommit).substr(0, 8),
                                          " config_registry.py; optimizer, data and checkpoint settings not modelled)"));
    }
    return job;
  }
  if (entry.status().code() != absl::StatusCode::kNotFound) return entry.status();
  // A module the current torchtitan does not ship but an earlier config registry did
  // (llama4): its flavor from the config name; the rest of the Python settings not read.
  std::vector<std::string> with_model = args;
  if (!ValueOf(args, "--model.name")) with_model.insert(with_model.end(), {"--model.name", module});
  if (!ValueOf(args, "--model.flavor")) {
    const std::string flavor = FlavorOfConfig(module, config);
    if (flavor.empty()) return entry.status();
    with_model.insert(with_model.end(), {"--model.flavor", flavor});
  }
  auto job = JobFromTorchtitanCommand("", origin, with_model);
  if (job.ok()) {
    job->ignored.push_back(absl::StrCat("--config ", config, " (module ", module,
                                        " is not in torchtitan's registry at commit ",
                                        std::string(kTorchtitanCommit).substr(0, 8),
                                        "; its Python settings other than the model flavor are not read; torchtitan "
                                        "defaults assumed unless overridden)"));
  }
  return job;
}

}  // namespace

bool IsTorchtitanCommand(const std::vector<std::string>& argv) {
  const LauncherPrefix launch = ParseLauncherPrefix(argv, /*shell_scripts=*/true);
  // torchtitan's run_train.sh reads MODULE / CONFIG (or, before the config registry,
  // CONFIG_FILE) from the environment.
  const std::string program = launch.program.substr(launch.program.rfind('/') + 1);
  if (program == "run_train.sh") return true;
  const size_t start = launch.args_index;
  bool name = false, flavor = false;
  for (size_t i = std::min(start, argv.size()); i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const bool has_next = i + 1 < argv.size();
    for (const char* f : {"--job.config_file", "--module"}) {
      if ((a == f && has_next) || absl::StartsWith(a, absl::StrCat(f, "="))) return true;
    }
    name = name || (a == "--model.name" && has_next) || absl::StartsWith(a, "--model.name=");
    flavor = flavor || (a == "--model.flavor" && has_next) || absl::StartsWith(a, "--model.flavor=");
  }
  return name && flavor;
}

absl::StatusOr<ImportedJob> JobFromTorchtitanLaunch(const std::vector<std::string>& argv, const std::string& base_dir) {
  // The training program's arguments start after the script (train.py, run_train.sh) or
  // "-m module"; the launcher's flags before it (torchrun --nproc_per_node ...) are skipped.
  const LauncherPrefix launch = ParseLauncherPrefix(argv, /*shell_scripts=*/true);
  const size_t start = launch.args_index;
  std::vector<std::string> args(argv.begin() + static_cast<std::ptrdiff_t>(std::min(start, argv.size())), argv.end());
  int64_t gpus = launch.gpus;
  std::string gpus_from = launch.gpus_from;
  const std::string program = launch.program.substr(launch.program.rfind('/') + 1);
  if (program == "run_train.sh") {
    if (absl::Status s = ApplyRunTrainSh(argv, launch.program_index, args, gpus, gpus_from); !s.ok()) return s;
  }
  auto finish = [&](absl::StatusOr<ImportedJob> job) {
    if (job.ok()) {
      job->launcher_gpus = gpus;
      job->launcher_gpus_from = gpus_from;
      for (const std::string& a : args) {
        if (absl::StartsWith(a, "--")) job->flags.push_back(a.substr(0, a.find('=')));
      }
    }
    return job;
  };
  // finish() leaves an error as it is.
  if (auto path = ValueOf(args, "--job.config_file")) return finish(ImportTorchtitanConfigFile(*path, base_dir, args));
  if (auto module = ValueOf(args, "--module")) return finish(ImportTorchtitanModule(*module, args));
  // torchtitan overrides alone (--model.name ... --model.flavor ...).
  if (ValueOf(args, "--model.name") && ValueOf(args, "--model.flavor")) {
    return finish(JobFromTorchtitanCommand("", "torchtitan command line", args));
  }
  return absl::InvalidArgumentError(
      "not a torchtitan command (no --job.config_file, --module or --model.name/--model.flavor)");
}

LayoutAcceptance TorchtitanAcceptsLayout(const Job& job) {
  LayoutAcceptance out;
  const Parallelism& p = job.parallelism;
  // trainer.py _validate_cuda_graphs (kTorchtitanCommit): the captured step refuses PP.
  if (job.training.cuda_graphs && p.pp > 1) {
    out.accepted = false;
    out.reason = "torchtitan refuses CUDA graphs with pipeline parallelism (add --training.disable_cuda_graphs)";
    return out;
  }
  // configs.py expert_parallel_degree: "dp_shard * cp * tp == efsdp * ep" (EP borrows ranks
  // from FSDP and TP).
  if (p.ep > 1 && (p.dp * p.cp * p.tp) % p.ep != 0) {
    out.accepted = false;
    out.reason = absl::StrCat("parallelism.expert_parallel_degree ", p.ep, " does not divide dp_shard x cp x tp = ",
                              p.dp * p.cp * p.tp, " (torchtitan configs.py mesh constraint)");
    return out;
  }
  if (p.vpp > 1 && p.pp <= 1) {
    out.accepted = false;
    out.reason = "virtual stages need parallelism.pipeline_parallel_degree > 1";
  }
  return out;
}

std::string TorchtitanArgsForChange(const std::vector<std::string>& used, int64_t seq_length, absl::string_view field,
                                    absl::string_view before, absl::string_view after) {
  const std::string to(after);
  int64_t n = 0;
  const bool is_num = absl::SimpleAtoi(to, &n);
  auto was = [&](const char* f) { return std::find(used.begin(), used.end(), f) != used.end(); };
  if (field == "parallelism.tp") return absl::StrCat("--parallelism.tensor_parallel_degree ", to);
  if (field == "parallelism.pp") return absl::StrCat("--parallelism.pipeline_parallel_degree ", to);
  if (field == "parallelism.cp") return absl::StrCat("--parallelism.context_parallel_degree ", to);
  if (field == "parallelism.ep") return absl::StrCat("--parallelism.expert_parallel_degree ", to);
  if (field == "parallelism.etp") {
    // Gone from the current torchtitan (#3167); only a job that gave it may change it.
    return was("--parallelism.expert_tensor_parallel_degree") ? absl::StrCat("--parallelism.expert_tensor_parallel_degree ", to)
                                                                : "";
  }
  if (field == "parallelism.dp_replicate") return absl::StrCat("--parallelism.data_parallel_replicate_degree ", to);
  if (field == "parallelism.vpp") {
    return is_num && n > 1 ? "--parallelism.pipeline_parallel_schedule Interleaved1F1B"
                           : "--parallelism.pipeline_parallel_schedule 1F1B";
  }
  if (field == "parallelism.pp_schedule") {
    static const std::map<std::string, std::string> kNames = {{"1f1b", "1F1B"},
                                                              {"interleaved-1f1b", "Interleaved1F1B"},
                                                              {"gpipe", "GPipe"},
                                                              {"zero-bubble", "InterleavedZeroBubble"},
                                                              {"dualpipe", "DualPipeV"}};
    auto it = kNames.find(to);
    return it == kNames.end() ? "" : absl::StrCat("--parallelism.pipeline_parallel_schedule ", it->second);
  }
  if (field == "parallelism.sequence_parallel") {
    return to == "true" ? "--parallelism.enable_sequence_parallel" : "--parallelism.no_enable_sequence_parallel";
  }
  if (field == "training.micro_batch_size") {
    if (was("--training.local_batch_size")) return absl::StrCat("--training.local_batch_size ", to);
    return is_num && seq_length > 0
               ? absl::StrCat("--training.num_tokens_per_microbatch_per_dp_rank ", n * seq_length)
               : "";
  }
  if (field == "training.recompute") {
    if (to == "none" || to == "full" || to == "selective") return absl::StrCat("activation-checkpoint:", to);
    return "";
  }
  if (field == "training.sharding") {
    if (to == "zero3") return "--parallelism.data_parallel_shard_degree -1";
    if (to == "none") return "--parallelism.data_parallel_shard_degree 1";
    return "";  // ZeRO-1/2 are not torchtitan's (FSDP2 shards weights too)
  }
  if (field == "training.overlap_tp_comm") {
    return to == "true" ? "--compile.enable --compile.enable_async_tensor_parallel"
                        : "--compile.no_enable_async_tensor_parallel";
  }
  return "";  // the model's converters (fp8) are not on the current command line (model_spec)
}

bool IsTorchtitanCliKey(absl::string_view key) {
  static const std::set<std::string>* const kKeys = [] {
    auto* out = new std::set<std::string>;
    const char* text = LaunchDataFile("torchtitan_configs/cli_keys.txt");
    for (absl::string_view line : absl::StrSplit(text ? text : "", '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const std::string k(line.substr(0, line.find(' ')));
      out->insert(k);
      if (absl::EndsWith(line, " switch")) {  // tyro's negative form
        const size_t dot = k.rfind('.');
        out->insert(absl::StrCat(k.substr(0, dot + 1), "no_", k.substr(dot + 1)));
      }
    }
    return out;
  }();
  std::string k(key);
  if (!absl::StartsWith(k, "--") && !absl::StartsWith(k, "activation-checkpoint:")) k = "--" + k;
  return kKeys->count(k) > 0;
}

absl::StatusOr<v1::ModelSpec> TorchtitanFlavorModel(const std::string& module, const std::string& flavor) {
  auto it = TorchtitanFlavors().find(module + "/" + flavor);
  if (it == TorchtitanFlavors().end()) return absl::NotFoundError(absl::StrCat(module, "/", flavor, ": no such flavor"));
  if (!it->second.refusal.empty()) return absl::InvalidArgumentError(it->second.refusal);
  v1::ModelSpec out;
  if (!it->second.preset.empty()) {
    out.set_preset(it->second.preset);
  } else {
    *out.mutable_shape() = ModelShapeToProto(it->second.shape);
  }
  return out;
}

}  // namespace stepcast
