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
#include "proto/codec.h"

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
};
const std::map<std::string, Flavor>& TorchtitanFlavors() {
  static const std::map<std::string, Flavor>* k = [] {
    auto* m = new std::map<std::string, Flavor>;
    // torchtitan/models/llama3/__init__.py llama3_args (debugmodel: dim 256, 6 layers, 16 heads,
    // vocab 2048, FFN int(2*1024/3) rounded up to 256 = 768).
    (*m)["llama3/debugmodel"] = {"", Dense("torchtitan-llama3-debugmodel", 6, 256, 16, 16, 0, 768, 2048, false)};
    (*m)["llama3/8B"] = {"llama3-8b", {}};
    (*m)["llama3/70B"] = {"llama3-70b", {}};
    (*m)["llama3/405B"] = {"llama3-405b", {}};
    // Llama 4 Scout (17bx16e: every layer MoE) and Maverick (17bx128e: every other layer).
    (*m)["llama4/debugmodel"] = {"", Llama4("torchtitan-llama4-debugmodel", 6, 256, 16, 16, 2048, 0, 256, 8, 2)};
    (*m)["llama4/17bx16e"] = {"", Llama4("llama4-scout-17bx16e", 48, 5120, 40, 8, 202048, 1.2, 2048, 16, 1)};
    (*m)["llama4/17bx128e"] = {"", Llama4("llama4-maverick-17bx128e", 48, 5120, 40, 8, 202048, 1.2, 2048, 128, 2)};
    (*m)["deepseek_v3/debugmodel"] = {"", DeepSeek("torchtitan-deepseek-v3-debugmodel", 6, 256, 16, 2048, 0, 1024,
                                                   256, 8, 2, 3, 1)};
    (*m)["deepseek_v3/16B"] = {"", DeepSeek("deepseek-moe-16b", 27, 2048, 16, 102400, 0, 10944, 1408, 64, 2, 6, 1)};
    (*m)["deepseek_v3/236B"] = {"", DeepSeek("deepseek-v2-236b", 60, 5120, 128, 102400, 1536, 12288, 1536, 160, 2, 6, 1)};
    (*m)["deepseek_v3/671B"] = {"deepseek-v3", {}};
    // torchtitan/models/qwen3/__init__.py qwen3_args (head_dim 128, vocab 151936, tied up to 4B).
    (*m)["qwen3/debugmodel"] = {"", Dense("torchtitan-qwen3-debugmodel", 8, 256, 16, 8, 128, 3072, 2048, true)};
    (*m)["qwen3/0.6B"] = {"", Dense("qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 151936, true)};
    (*m)["qwen3/1.7B"] = {"", Dense("qwen3-1.7b", 28, 2048, 16, 8, 128, 6144, 151936, true)};
    (*m)["qwen3/4B"] = {"", Dense("qwen3-4b", 36, 2560, 32, 8, 128, 9728, 151936, true)};
    (*m)["qwen3/8B"] = {"", Dense("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, false)};
    (*m)["qwen3/14B"] = {"", Dense("qwen3-14b", 40, 5120, 40, 8, 128, 17408, 151936, false)};
    (*m)["qwen3/32B"] = {"", Dense("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, false)};
    (*m)["qwen3/debugmodel_moe"] = {"", QwenMoe("torchtitan-qwen3-debugmodel-moe", 8, 256, 16, 8, 3072, 2048, 768, 64)};
    (*m)["qwen3/30B-A3B"] = {"", QwenMoe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 768, 128)};
    (*m)["qwen3/235B-A22B"] = {"", QwenMoe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 1536, 128)};
    for (auto& [key, f] : *m) f.shape.source = absl::StrCat("torchtitan flavor ", key);
    return m;
  }();
  return *k;
}

// The flavor without torchtitan's attention-variant suffixes ("8B_flex_attn", "debugmodel_irope"):
// same parameters, another attention kernel or mask.
std::string BaseFlavor(const std::string& flavor) {
  for (const char* suffix : {"_flex_attn", "_varlen_attn", "_flex", "_varlen", "_irope"}) {
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

absl::StatusOr<ImportedJob> JobFromTorchtitanTable(const toml::table& tbl, absl::string_view origin,
                                                   std::vector<std::string> extra_ignored) {
  ImportedJob out;
  out.source = "torchtitan";
  out.ignored = std::move(extra_ignored);
  auto err = [&](const std::string& key, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", key, ": ", why));
  };
  // Keys read below (torchtitan/config/job_config.py names). Everything else is listed.
  static const std::set<std::string> kUsed = {
      "model.name", "model.flavor", "model.converters", "training.seq_len", "training.local_batch_size",
      "training.batch_size", "training.global_batch_size", "training.steps", "training.mixed_precision_param",
      "training.mixed_precision_reduce", "parallelism.data_parallel_replicate_degree",
      "parallelism.data_parallel_shard_degree", "parallelism.tensor_parallel_degree",
      "parallelism.pipeline_parallel_degree", "parallelism.context_parallel_degree",
      "parallelism.pipeline_parallel_microbatch_size", "parallelism.pipeline_parallel_schedule",
      "parallelism.expert_parallel_degree", "parallelism.expert_tensor_parallel_degree",
      "parallelism.enable_async_tensor_parallel", "parallelism.disable_loss_parallel",
      "activation_checkpoint.mode", "float8.enable_fsdp_float8_all_gather"};
  std::vector<std::string> paths;
  LeafPaths(tbl, "", paths);
  for (const std::string& path : paths) {
    if (!kUsed.count(path)) out.ignored.push_back(path);
  }
  auto int_at = [&](const char* section, const char* key, int64_t fallback, int64_t lo, int64_t hi,
                    int64_t* v) -> absl::Status {
    const toml::node_view<const toml::node> n = tbl[section][key];
    if (!n) {
      *v = fallback;
      return absl::OkStatus();
    }
    std::optional<int64_t> x = TomlInteger(*n.node());
    if (!x) return err(absl::StrCat(section, ".", key), "must be an integer");
    if (*x < lo || *x > hi) return err(absl::StrCat(section, ".", key), absl::StrCat(*x, " is out of range (", lo, " to ", hi, ")"));
    *v = *x;
    return absl::OkStatus();
  };
  // A string or boolean key: absent -> the torchtitan default; present with another type -> an
  // error naming the key (never the default in silence).
  auto str_at = [&](const char* section, const char* key, const char* fallback, std::string* v) -> absl::Status {
    const toml::node_view<const toml::node> n = tbl[section][key];
    if (!n) {
      *v = fallback;
      return absl::OkStatus();
    }
    if (!n.is_string()) return err(absl::StrCat(section, ".", key), "must be a string");
    *v = *n.value<std::string>();
    return absl::OkStatus();
  };
  auto bool_at = [&](const char* section, const char* key, bool* v) -> absl::Status {
    const toml::node_view<const toml::node> n = tbl[section][key];
    if (!n) {
      *v = false;
      return absl::OkStatus();
    }
    if (!n.is_boolean()) return err(absl::StrCat(section, ".", key), "must be true or false");
    *v = *n.value<bool>();
    return absl::OkStatus();
  };
#define TT_STR(var, section, key, fallback)                                              \
  std::string var;                                                                      \
  if (absl::Status _s = str_at(section, key, fallback, &var); !_s.ok()) return _s;
#define TT_BOOL(var, section, key)                                                       \
  bool var = false;                                                                     \
  if (absl::Status _s = bool_at(section, key, &var); !_s.ok()) return _s;
#define TT_INT(var, section, key, fallback, lo, hi)                                      \
  int64_t var = 0;                                                                      \
  if (absl::Status _s = int_at(section, key, fallback, lo, hi, &var); !_s.ok()) return _s;

  TT_STR(name, "model", "name", "");
  TT_STR(flavor, "model", "flavor", "");
  const auto& flavors = TorchtitanFlavors();
  auto it = flavors.find(name + "/" + BaseFlavor(flavor));
  if (it == flavors.end()) {
    std::vector<std::string> known;
    for (const auto& [k, f] : flavors) known.push_back(k);
    return err("model.flavor", absl::StrCat("'", name, "' '", flavor, "' is not a torchtitan flavor known here (",
                                            absl::StrJoin(known, ", "), ")"));
  }
  if (!it->second.preset.empty()) {
    out.spec.mutable_model()->set_preset(it->second.preset);
  } else {
    *out.spec.mutable_model()->mutable_shape() = ModelShapeToProto(it->second.shape);
  }
  v1::TrainingSpec& t = *out.spec.mutable_training();
  // torchtitan defaults (job_config.py Training): seq_len 2048, local_batch_size 8.
  TT_INT(seq, "training", "seq_len", 2048, 1, kMaxSize);
  t.set_seq_length(seq);
  TT_INT(old_batch, "training", "batch_size", 8, 1, kMaxSize);
  TT_INT(local, "training", "local_batch_size", old_batch, 1, kMaxSize);
  out.local_batch_size = local;
  TT_INT(global, "training", "global_batch_size", -1, -1, kMaxSize);
  if (global > 0) t.set_global_batch_size(global);
  TT_INT(steps, "training", "steps", 0, 0, kMaxCount);
  t.set_train_iters(steps);
  TT_STR(mp, "training", "mixed_precision_param", "bfloat16");
  if (mp != "bfloat16" && mp != "float32") return err("training.mixed_precision_param", "must be bfloat16 or float32");
  t.mutable_precision()->set_gemm(mp == "float32" ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  t.mutable_precision()->set_params(mp == "float32" ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  TT_STR(mr, "training", "mixed_precision_reduce", "float32");
  if (mr != "bfloat16" && mr != "float32") return err("training.mixed_precision_reduce", "must be bfloat16 or float32");
  t.mutable_precision()->set_grad_reduce(mr == "bfloat16" ? v1::D_TYPE_BF16 : v1::D_TYPE_FP32);
  // fp8 GEMMs: a float8 / mx converter (model.converters = ["float8"] or
  // ["quantize.linear.float8"], torchtitan/components/quantization/).
  bool fp8 = false;
  if (const toml::node_view<const toml::node> cn = tbl["model"]["converters"]; cn) {
    const toml::array* conv = cn.as_array();
    if (!conv) return err("model.converters", "must be a list of strings");
    for (const auto& c : *conv) {
      if (!c.is_string()) return err("model.converters", "must be a list of strings");
      const std::string v = *c.value<std::string>();
      fp8 = fp8 || absl::StrContains(v, "float8") || v == "mx" || absl::StrContains(v, ".mx");
    }
  }
  if (fp8) t.mutable_precision()->set_gemm(v1::D_TYPE_FP8);
  TT_BOOL(fp8_gather, "float8", "enable_fsdp_float8_all_gather");
  if (fp8 && fp8_gather) t.set_fp8_param_gather(true);
  TT_STR(mode, "activation_checkpoint", "mode", "selective");
  if (mode == "full") t.set_recompute(v1::RECOMPUTE_FULL);
  else if (mode == "selective") t.set_recompute(v1::RECOMPUTE_SELECTIVE);
  else if (mode == "none") t.set_recompute(v1::RECOMPUTE_NONE);
  else return err("activation_checkpoint.mode", absl::StrCat("'", mode, "' is not none, selective or full"));
  t.set_overlap_dp_comm(true);
  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  TT_INT(tp, "parallelism", "tensor_parallel_degree", 1, 1, 65536);
  TT_INT(pp, "parallelism", "pipeline_parallel_degree", 1, 1, 65536);
  TT_INT(cp, "parallelism", "context_parallel_degree", 1, 1, 65536);
  TT_INT(ep, "parallelism", "expert_parallel_degree", 1, 1, 65536);
  TT_INT(etp, "parallelism", "expert_tensor_parallel_degree", 1, 1, 65536);
  p.set_tp(tp);
  p.set_pp(pp);
  p.set_cp(cp);
  p.set_ep(ep);
  if (ep > 1) p.set_etp(etp);
  p.set_sequence_parallel(tp > 1);  // torchtitan's TP plan shards norms/dropout (SP)
  TT_BOOL(async_tp, "parallelism", "enable_async_tensor_parallel");
  if (async_tp) t.set_overlap_tp_comm(true);
  TT_STR(schedule, "parallelism", "pipeline_parallel_schedule", "1F1B");
  if (pp > 1) {
    const std::string s = PpSchedule(schedule);
    if (s.empty()) return err("parallelism.pipeline_parallel_schedule", absl::StrCat("'", schedule, "' is not modelled"));
    p.set_pp_schedule(s);
  }
  TT_INT(replicate, "parallelism", "data_parallel_replicate_degree", 1, 1, kMaxSize);
  TT_INT(shard, "parallelism", "data_parallel_shard_degree", -1, std::numeric_limits<int64_t>::min(),
         std::numeric_limits<int64_t>::max());
  if (shard == 0 || shard < -1 || shard > kMaxSize) {
    return err("parallelism.data_parallel_shard_degree", "must be -1 or 1 to 2^31-1");
  }
  if (shard != 1) t.set_sharding(v1::SHARDING_ZERO3);  // FSDP2 (HSDP when replicate > 1)
  else t.set_sharding(v1::SHARDING_NONE);  // DDP only
  if (replicate > 1 && shard != 1) p.set_dp_replicate(replicate);
  if (shard > 0) p.set_dp(replicate * shard);
  TT_INT(pp_mbs, "parallelism", "pipeline_parallel_microbatch_size", 1, 1, kMaxSize);
  t.set_micro_batch_size(p.pp() > 1 ? pp_mbs : out.local_batch_size);
#undef TT_INT
#undef TT_STR
#undef TT_BOOL
  return out;
}

// Sets `path` (dotted, "training.local_batch_size") in `tbl` from a command-line string, typed
// as torchtitan's argument parser would (integer, float, true/false, else string; a
// comma-separated list for list keys such as model.converters).
void SetTomlPath(toml::table& tbl, const std::string& path, const std::string& value) {
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
  // Command-line overrides (torchtitan's config manager: "--section.key value",
  // "--section.key=value", a bare "--section.flag" is true); the launcher's own flags before
  // the script are not passed here. Non-dotted flags and stray tokens are listed as ignored.
  std::vector<std::string> ignored;
  for (size_t i = 0; i < overrides.size(); ++i) {
    const std::string& tok = overrides[i];
    if (!absl::StartsWith(tok, "--")) {
      ignored.push_back(tok);
      continue;
    }
    std::string key = tok.substr(2), value;
    bool has_value = false;
    if (size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    } else if (i + 1 < overrides.size() && !absl::StartsWith(overrides[i + 1], "--")) {
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
  }
  return JobFromTorchtitanTable(tbl, origin, std::move(ignored));
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

}  // namespace

bool IsTorchtitanCommand(const std::vector<std::string>& argv) {
  const size_t start = ProgramArgsStart(argv, /*shell_scripts=*/true);
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
  const size_t start = ProgramArgsStart(argv, /*shell_scripts=*/true);
  const std::vector<std::string> args(argv.begin() + static_cast<std::ptrdiff_t>(std::min(start, argv.size())), argv.end());
  auto value_of = [&](const std::string& flag) -> std::optional<std::string> {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
      if (absl::StartsWith(args[i], flag + "=")) return args[i].substr(flag.size() + 1);
    }
    return std::nullopt;
  };
  // torchtitan before its move to Python configs: --job.config_file X.toml plus overrides.
  if (auto path = value_of("--job.config_file")) {
    std::filesystem::path p(*path);
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
  // torchtitan now: --module <model> --config <registry function> (plus overrides). The
  // registry function's own training/parallelism settings are Python, not read here: they are
  // named in `ignored`, and torchtitan's defaults stand unless overridden on the line.
  if (auto module = value_of("--module")) {
    const std::string config = value_of("--config").value_or("");
    std::vector<std::string> with_model = args;
    if (!value_of("--model.name")) with_model.insert(with_model.end(), {"--model.name", *module});
    if (!value_of("--model.flavor")) {
      const std::string flavor = FlavorOfConfig(*module, config);
      if (flavor.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("--config: '", config, "' names no ", *module,
                                                       " flavor known here; add --model.flavor"));
      }
      with_model.insert(with_model.end(), {"--model.flavor", flavor});
    }
    auto job = JobFromTorchtitanCommand("", absl::StrCat("torchtitan --module ", *module, " --config ", config),
                                        with_model);
    if (job.ok()) {
      job->ignored.push_back(absl::StrCat("--config ", config,
                                          " (its Python settings other than the model flavor are not read; "
                                          "torchtitan defaults assumed unless overridden)"));
    }
    return job;
  }
  // torchtitan overrides alone (--model.name ... --model.flavor ...).
  if (value_of("--model.name") && value_of("--model.flavor")) {
    return JobFromTorchtitanCommand("", "torchtitan command line", args);
  }
  return absl::InvalidArgumentError(
      "not a torchtitan command (no --job.config_file, --module or --model.name/--model.flavor)");
}

}  // namespace stepcast
