#include "proto/launch_args.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "toml++/toml.h"

namespace stepcast {
namespace {

// Megatron flags that take a value, and boolean switches, that we map.
const std::set<std::string>& ValueFlags() {
  static const std::set<std::string> k = {
      "num-layers", "hidden-size", "num-attention-heads", "num-query-groups", "kv-channels",
      "ffn-hidden-size", "normalization", "position-embedding-type", "max-position-embeddings",
      "vocab-size", "tokenizer-type", "tokenizer-model", "make-vocab-size-divisible-by", "num-experts",
      "moe-router-topk", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size", "moe-layer-freq",
      "seq-length", "micro-batch-size", "global-batch-size", "fp8-format", "recompute-granularity",
      "recompute-method", "recompute-num-layers", "attention-backend", "hidden-dropout",
      "attention-dropout", "train-iters", "train-samples", "tensor-model-parallel-size",
      "pipeline-model-parallel-size", "num-layers-per-virtual-pipeline-stage", "context-parallel-size",
      "expert-model-parallel-size"};
  return k;
}
const std::set<std::string>& SwitchFlags() {
  static const std::set<std::string> k = {
      "group-query-attention", "swiglu", "disable-bias-linear", "untie-embeddings-and-output-weights",
      "bf16", "fp16", "recompute-activations", "use-distributed-optimizer", "use-torch-fsdp2",
      "use-megatron-fsdp", "overlap-grad-reduce", "tp-comm-overlap", "use-flash-attn", "sequence-parallel"};
  return k;
}

absl::Status FlagError(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

}  // namespace

absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv) {
  // Skip the launcher: start after the training script (or python -m module).
  size_t start = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (absl::EndsWith(argv[i], ".py")) {
      start = i + 1;
      break;
    }
    if (argv[i] == "-m" && i + 1 < argv.size()) {
      start = i + 2;
      break;
    }
  }
  ImportedJob out;
  out.source = "megatron";
  std::map<std::string, std::string> vals;
  std::set<std::string> switches;
  for (size_t i = start; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (!absl::StartsWith(tok, "--")) {
      out.ignored.push_back(tok);
      continue;
    }
    std::string name = tok.substr(2), value;
    bool has_inline = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    std::replace(name.begin(), name.end(), '_', '-');
    if (ValueFlags().count(name)) {
      if (!has_inline) {
        if (i + 1 >= argv.size() || absl::StartsWith(argv[i + 1], "--")) return FlagError(name, "needs a value");
        value = argv[++i];
      }
      vals[name] = value;
    } else if (SwitchFlags().count(name)) {
      switches.insert(name);
    } else {
      // Not modelled: keep it, with its value when it has one.
      if (!has_inline && i + 1 < argv.size() && !absl::StartsWith(argv[i + 1], "--")) {
        out.ignored.push_back(absl::StrCat(tok, " ", argv[++i]));
      } else {
        out.ignored.push_back(tok);
      }
    }
  }
  auto has = [&](const char* f) { return vals.count(f) > 0; };
  auto int_of = [&](const char* f, int64_t fallback) -> absl::StatusOr<int64_t> {
    auto it = vals.find(f);
    if (it == vals.end()) {
      if (fallback < 0) return FlagError(f, "required");
      return fallback;
    }
    int64_t v = 0;
    double d = 0;
    if (absl::SimpleAtoi(it->second, &v)) return v;
    if (absl::SimpleAtod(it->second, &d) && d == std::floor(d)) return static_cast<int64_t>(d);
    return FlagError(f, absl::StrCat("'", it->second, "' is not an integer"));
  };
#define GET(var, flag, fallback)             \
  int64_t var = 0;                           \
  {                                          \
    auto _v = int_of(flag, fallback);        \
    if (!_v.ok()) return _v.status();        \
    var = *_v;                               \
  }
  GET(layers, "num-layers", -1);
  GET(hidden, "hidden-size", -1);
  GET(heads, "num-attention-heads", -1);
  GET(seq, "seq-length", -1);
  GET(mbs, "micro-batch-size", 1);
  GET(gbs, "global-batch-size", -1);
  GET(tp, "tensor-model-parallel-size", 1);
  GET(pp, "pipeline-model-parallel-size", 1);
  GET(cp, "context-parallel-size", 1);
  GET(ep, "expert-model-parallel-size", 1);
  GET(kv_channels, "kv-channels", 0);
  GET(experts, "num-experts", 0);
  GET(topk, "moe-router-topk", 2);
  GET(train_iters, "train-iters", 0);
  GET(train_samples, "train-samples", 0);
  GET(divisible, "make-vocab-size-divisible-by", 128);
  const bool swiglu = switches.count("swiglu") > 0;
  int64_t ffn_default = 4 * hidden;
  if (swiglu) ffn_default = static_cast<int64_t>((4.0 * hidden * 2 / 3) / 64) * 64;
  GET(ffn, "ffn-hidden-size", ffn_default);
  GET(moe_ffn, "moe-ffn-hidden-size", ffn);
  GET(shared_ffn, "moe-shared-expert-intermediate-size", 0);
  GET(query_groups, "num-query-groups", heads);
  GET(max_pos, "max-position-embeddings", seq);
  GET(layers_per_vstage, "num-layers-per-virtual-pipeline-stage", 0);
#undef GET

  // Vocabulary: given, or from the tokenizer, padded as Megatron pads it.
  int64_t vocab = 0;
  if (has("vocab-size")) {
    if (!absl::SimpleAtoi(vals["vocab-size"], &vocab) || vocab <= 0) return FlagError("vocab-size", "must be > 0");
  } else {
    const std::string type = vals["tokenizer-type"];
    const std::string model = absl::AsciiStrToLower(vals["tokenizer-model"]);
    if (type == "GPT2BPETokenizer") vocab = 50257;
    else if (type == "Llama2Tokenizer") vocab = 32000;
    else if (absl::StrContains(model, "llama-3") || absl::StrContains(model, "llama3")) vocab = 128256;
    else if (absl::StrContains(model, "mixtral") || absl::StrContains(model, "mistral-7b")) vocab = 32000;
    else return FlagError("vocab-size", absl::StrCat("required: the vocabulary of tokenizer '", type, " ",
                                                     vals["tokenizer-model"], "' is unknown"));
  }
  const int64_t multiple = divisible * tp;
  if (multiple > 0) vocab = (vocab + multiple - 1) / multiple * multiple;

  v1::ModelShape& m = *out.spec.mutable_model()->mutable_shape();
  m.set_name(absl::StrCat("megatron-", layers, "L-", hidden, "h"));
  m.set_source("Megatron-LM arguments");
  m.set_layers(layers);
  m.set_hidden_size(hidden);
  m.set_attention_heads(heads);
  if (switches.count("group-query-attention")) m.set_kv_heads(query_groups);
  m.set_head_dim(kv_channels);
  m.set_ffn_hidden_size(ffn);
  m.set_ffn_type(swiglu ? v1::FFN_TYPE_SWIGLU : v1::FFN_TYPE_GELU);
  m.set_vocab_size(vocab);
  m.set_tied_embeddings(!switches.count("untie-embeddings-and-output-weights"));
  m.set_linear_bias(!switches.count("disable-bias-linear"));
  const std::string pos = vals.count("position-embedding-type") ? vals["position-embedding-type"] : "learned_absolute";
  m.set_learned_position_embeddings(pos == "learned_absolute" ? max_pos : 0);
  m.set_norm_type(vals["normalization"] == "RMSNorm" ? v1::NORM_TYPE_RMSNORM : v1::NORM_TYPE_LAYERNORM);
  if (experts > 0) {
    m.mutable_moe()->set_routed_experts(experts);
    m.mutable_moe()->set_top_k(topk);
    m.mutable_moe()->set_expert_ffn_hidden_size(moe_ffn);
    if (shared_ffn > 0) {
      m.mutable_moe()->set_shared_experts(1);
      m.mutable_moe()->set_shared_expert_ffn_hidden_size(shared_ffn);
    }
    if (has("moe-layer-freq")) {
      int64_t f = 0;
      if (!absl::SimpleAtoi(vals["moe-layer-freq"], &f) || f <= 0) {
        return FlagError("moe-layer-freq", "only an integer frequency is modelled");
      }
      m.mutable_moe()->set_layer_freq(f);
    }
  }

  v1::TrainingSpec& t = *out.spec.mutable_training();
  t.set_seq_length(seq);
  t.set_global_batch_size(gbs);
  t.set_micro_batch_size(mbs);
  auto* prec = t.mutable_precision();
  if (switches.count("bf16")) prec->set_params(v1::D_TYPE_BF16), prec->set_gemm(v1::D_TYPE_BF16);
  else if (switches.count("fp16")) prec->set_params(v1::D_TYPE_FP16), prec->set_gemm(v1::D_TYPE_FP16);
  else prec->set_params(v1::D_TYPE_FP32), prec->set_gemm(v1::D_TYPE_FP32), prec->set_grads(v1::D_TYPE_FP32);
  if (has("fp8-format")) prec->set_gemm(v1::D_TYPE_FP8);
  const std::string gran = vals["recompute-granularity"];
  if (gran == "full") t.set_recompute(v1::RECOMPUTE_FULL);
  else if (gran == "selective" || switches.count("recompute-activations")) t.set_recompute(v1::RECOMPUTE_SELECTIVE);
  else if (!gran.empty()) return FlagError("recompute-granularity", absl::StrCat("'", gran, "' is not full or selective"));
  else t.set_recompute(v1::RECOMPUTE_NONE);
  if (switches.count("use-torch-fsdp2") || switches.count("use-megatron-fsdp")) t.set_sharding(v1::SHARDING_ZERO3);
  else if (switches.count("use-distributed-optimizer")) t.set_sharding(v1::SHARDING_ZERO1);
  else t.set_sharding(v1::SHARDING_NONE);
  t.set_overlap_dp_comm(switches.count("overlap-grad-reduce") > 0);
  t.set_overlap_tp_comm(switches.count("tp-comm-overlap") > 0);
  const std::string backend = vals["attention-backend"];
  t.set_flash_attention(!(backend == "unfused" || backend == "local"));
  double hd = 0.1, ad = 0.1;  // Megatron's default dropouts
  if (has("hidden-dropout") && !absl::SimpleAtod(vals["hidden-dropout"], &hd)) return FlagError("hidden-dropout", "not a number");
  if (has("attention-dropout") && !absl::SimpleAtod(vals["attention-dropout"], &ad)) return FlagError("attention-dropout", "not a number");
  t.set_dropout(hd > 0 || ad > 0);
  t.set_train_iters(train_iters);
  if (train_samples > 0) t.set_dataset_tokens(static_cast<double>(train_samples) * seq);

  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  p.set_tp(tp);
  p.set_pp(pp);
  p.set_cp(cp);
  p.set_ep(ep);
  if (layers_per_vstage > 0) {
    if (pp <= 0 || layers % pp != 0 || (layers / pp) % layers_per_vstage != 0) {
      return FlagError("num-layers-per-virtual-pipeline-stage", "must divide num-layers / pipeline size");
    }
    p.set_vpp((layers / pp) / layers_per_vstage);
  }
  p.set_sequence_parallel(switches.count("sequence-parallel") > 0);
  return out;
}

absl::StatusOr<ImportedJob> JobFromTorchtitanToml(absl::string_view text, absl::string_view origin) {
  toml::table tbl;
  try {
    tbl = toml::parse(std::string_view(text.data(), text.size()), std::string_view(origin.data(), origin.size()));
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": line ", static_cast<int64_t>(e.source().begin.line), ": ",
                                                   std::string(e.description())));
  }
  ImportedJob out;
  out.source = "torchtitan";
  auto err = [&](const std::string& key, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", key, ": ", why));
  };
  static const std::set<std::string> kUsed = {
      "model.name", "model.flavor", "model.converters", "training.seq_len", "training.local_batch_size",
      "training.batch_size", "training.global_batch_size", "training.steps", "training.mixed_precision_param",
      "parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
      "parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree",
      "parallelism.context_parallel_degree", "parallelism.pipeline_parallel_microbatch_size",
      "activation_checkpoint.mode"};
  for (const auto& [section, node] : tbl) {
    if (const toml::table* sub = node.as_table()) {
      for (const auto& [key, v] : *sub) {
        const std::string path = std::string(section.str()) + "." + std::string(key.str());
        if (!kUsed.count(path) && section.str() != "float8") out.ignored.push_back(path);
      }
    }
  }
  const std::string name = tbl["model"]["name"].value_or(std::string());
  const std::string flavor = tbl["model"]["flavor"].value_or(std::string());
  static const std::map<std::string, std::string> kPresets = {
      {"llama3/8B", "llama3-8b"}, {"llama3/70B", "llama3-70b"}, {"llama3/405B", "llama3-405b"}};
  auto it = kPresets.find(name + "/" + flavor);
  if (it == kPresets.end()) {
    return err("model.flavor", absl::StrCat("'", name, "' '", flavor, "' is not a known torchtitan flavor (llama3 8B/70B/405B)"));
  }
  out.spec.mutable_model()->set_preset(it->second);
  v1::TrainingSpec& t = *out.spec.mutable_training();
  const int64_t seq = tbl["training"]["seq_len"].value_or(int64_t{2048});
  t.set_seq_length(seq);
  out.local_batch_size = tbl["training"]["local_batch_size"].value_or(tbl["training"]["batch_size"].value_or(int64_t{8}));
  const int64_t global = tbl["training"]["global_batch_size"].value_or(int64_t{-1});
  if (global > 0) t.set_global_batch_size(global);
  t.set_train_iters(tbl["training"]["steps"].value_or(int64_t{0}));
  const std::string mp = tbl["training"]["mixed_precision_param"].value_or(std::string("bfloat16"));
  if (mp != "bfloat16" && mp != "float32") return err("training.mixed_precision_param", "must be bfloat16 or float32");
  t.mutable_precision()->set_gemm(mp == "float32" ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  t.mutable_precision()->set_params(mp == "float32" ? v1::D_TYPE_FP32 : v1::D_TYPE_BF16);
  bool fp8 = tbl.contains("float8");
  if (const toml::array* conv = tbl["model"]["converters"].as_array()) {
    for (const auto& c : *conv) fp8 = fp8 || c.value_or(std::string()) == "float8";
  }
  if (fp8) t.mutable_precision()->set_gemm(v1::D_TYPE_FP8);
  const std::string mode = tbl["activation_checkpoint"]["mode"].value_or(std::string("selective"));
  if (mode == "full") t.set_recompute(v1::RECOMPUTE_FULL);
  else if (mode == "selective") t.set_recompute(v1::RECOMPUTE_SELECTIVE);
  else if (mode == "none") t.set_recompute(v1::RECOMPUTE_NONE);
  else return err("activation_checkpoint.mode", absl::StrCat("'", mode, "' is not none, selective or full"));
  t.set_overlap_dp_comm(true);
  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  p.set_tp(tbl["parallelism"]["tensor_parallel_degree"].value_or(int64_t{1}));
  p.set_pp(tbl["parallelism"]["pipeline_parallel_degree"].value_or(int64_t{1}));
  p.set_cp(tbl["parallelism"]["context_parallel_degree"].value_or(int64_t{1}));
  p.set_sequence_parallel(p.tp() > 1);  // torchtitan's TP plan shards norms/dropout (SP)
  const int64_t replicate = tbl["parallelism"]["data_parallel_replicate_degree"].value_or(int64_t{1});
  const int64_t shard = tbl["parallelism"]["data_parallel_shard_degree"].value_or(int64_t{-1});
  if (replicate < 1) return err("parallelism.data_parallel_replicate_degree", "must be >= 1");
  if (shard == 0 || shard < -1) return err("parallelism.data_parallel_shard_degree", "must be -1 or >= 1");
  if (shard != 1) t.set_sharding(v1::SHARDING_ZERO3);  // FSDP2 (HSDP when replicate > 1)
  if (shard > 0) p.set_dp(replicate * shard);
  const int64_t pp_mbs = tbl["parallelism"]["pipeline_parallel_microbatch_size"].value_or(int64_t{1});
  t.set_micro_batch_size(p.pp() > 1 ? pp_mbs : out.local_batch_size);
  return out;
}

absl::StatusOr<v1::JobSpec> ImportedJob::Finalize(int64_t gpu_count, const std::string& hardware,
                                                  int64_t gpus_per_node) const {
  if (gpu_count <= 0) return absl::InvalidArgumentError("cluster.gpu_count: the GPU count is required (> 0)");
  if (hardware.empty()) return absl::InvalidArgumentError("hardware: a hardware preset is required");
  v1::JobSpec spec = this->spec;
  spec.mutable_cluster()->set_gpu_count(gpu_count);
  if (gpus_per_node > 0) spec.mutable_cluster()->set_gpus_per_node(gpus_per_node);
  spec.mutable_hardware()->set_preset(hardware);
  if (local_batch_size > 0 && spec.training().global_batch_size() == 0) {
    const auto& p = spec.parallelism();
    const int64_t model_parallel = std::max<int64_t>(1, p.tp()) * std::max<int64_t>(1, p.pp()) * std::max<int64_t>(1, p.cp());
    const int64_t dp = p.dp() > 0 ? p.dp() : gpu_count / model_parallel;
    spec.mutable_training()->set_global_batch_size(local_batch_size * std::max<int64_t>(dp, 1));
  }
  return spec;
}

absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string path;
    if (argv[i] == "--job.config_file" && i + 1 < argv.size()) path = argv[i + 1];
    if (absl::StartsWith(argv[i], "--job.config_file=")) path = argv[i].substr(18);
    if (path.empty()) continue;
    std::filesystem::path p(path);
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    std::ifstream in(p);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("--job.config_file: cannot read ", p.string()));
    std::stringstream ss;
    ss << in.rdbuf();
    return JobFromTorchtitanToml(ss.str(), p.string());
  }
  bool megatron = false;
  for (const auto& a : argv) megatron = megatron || absl::StartsWith(a, "--num-layers") || absl::StartsWith(a, "--num_layers");
  if (!megatron) {
    return absl::InvalidArgumentError(
        "the command is neither Megatron-LM (no --num-layers) nor torchtitan (no --job.config_file)");
  }
  return JobFromMegatronArgs(argv);
}

}  // namespace stepcast
