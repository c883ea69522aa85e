// Megatron-LM launch lines (proto/megatron_args.h).
#include "proto/megatron_args.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <filesystem>
#include <limits>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/codec.h"

namespace stepcast {
namespace {

// Megatron flags that take one value, and boolean switches, that are modelled (names as in
// megatron/training/arguments.py). Everything else is returned in ImportedJob::ignored.
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
      "expert-model-parallel-size",
      // Added for issue 10.
      "q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim",
      "num-virtual-stages-per-pipeline-rank", "expert-tensor-parallel-size", "padded-vocab-size",
      "data-parallel-sharding-strategy", "cuda-graph-impl"};
  return k;
}
// Flags with nargs='*' / '+' that are modelled.
const std::set<std::string>& ListFlags() {
  static const std::set<std::string> k = {"recompute-modules"};
  return k;
}
const std::set<std::string>& SwitchFlags() {
  static const std::set<std::string> k = {
      "group-query-attention", "swiglu", "disable-bias-linear", "untie-embeddings-and-output-weights",
      "bf16", "fp16", "recompute-activations", "use-distributed-optimizer", "use-torch-fsdp2",
      "use-megatron-fsdp", "overlap-grad-reduce", "tp-comm-overlap", "use-flash-attn", "sequence-parallel",
      // Added for issue 10.
      "multi-latent-attention", "quick-geglu", "squared-relu", "grad-reduce-in-bf16", "fp8-param-gather",
      "enable-cuda-graph", "external-cuda-graph", "checkpoint-activations"};
  return k;
}

absl::Status FlagError(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

// Bounds on integer flags (proto/launch_common.h).
constexpr int64_t kMaxSize = kMaxLaunchSize;
constexpr int64_t kMaxCount = kMaxLaunchCount;

// Parses Megatron's Python-list layer pattern (arguments.py _eval_pattern / moe_freq_type:
// only digits, ',', '[', ']', '(', ')', '+', '*'; e.g. "([0]*3+[1]*58)"). Values are lists or
// integers; list*int repeats, list+list concatenates. `max_len` bounds the result.
class PatternParser {
 public:
  PatternParser(absl::string_view text, size_t max_len) : t_(text), max_len_(max_len) {}
  absl::StatusOr<std::vector<int64_t>> Parse() {
    auto v = Expr();
    if (!v.ok()) return v.status();
    Skip();
    if (pos_ != t_.size()) return Err("unexpected text");
    if (!v->is_list) return Err("not a list");
    return v->list;
  }

 private:
  struct Value {
    bool is_list = false;
    int64_t num = 0;
    std::vector<int64_t> list;
  };
  absl::Status Err(const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(why, " at character ", pos_ + 1));
  }
  void Skip() {
    while (pos_ < t_.size() && t_[pos_] == ' ') ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < t_.size() && t_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::StatusOr<Value> Expr() {
    auto v = Term();
    if (!v.ok()) return v;
    while (Eat('+')) {
      auto r = Term();
      if (!r.ok()) return r;
      if (v->is_list != r->is_list) return Err("'+' of a list and a number");
      if (v->is_list) {
        if (v->list.size() + r->list.size() > max_len_) return Err("pattern longer than the layers");
        v->list.insert(v->list.end(), r->list.begin(), r->list.end());
      } else {
        if (v->num > kMaxSize || r->num > kMaxSize) return Err("number too large");
        v->num += r->num;
      }
    }
    return v;
  }
  absl::StatusOr<Value> Term() {
    auto v = Factor();
    if (!v.ok()) return v;
    while (Eat('*')) {
      auto r = Factor();
      if (!r.ok()) return r;
      if (v->is_list && r->is_list) return Err("'*' of two lists");
      if (!v->is_list && !r->is_list) {
        if (v->num > kMaxSize || r->num > kMaxSize) return Err("number too large");
        v->num *= r->num;
        continue;
      }
      Value& list = v->is_list ? *v : *r;
      const int64_t n = v->is_list ? r->num : v->num;
      if (n < 0 || (n > 0 && list.list.size() > max_len_ / static_cast<size_t>(n))) {
        return Err("pattern longer than the layers");
      }
      std::vector<int64_t> out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), list.list.begin(), list.list.end());
      Value res;
      res.is_list = true;
      res.list = std::move(out);
      *v = std::move(res);
    }
    return v;
  }
  absl::StatusOr<Value> Factor() {
    Skip();
    if (Eat('(')) {
      auto v = Expr();
      if (!v.ok()) return v;
      if (!Eat(')')) return Err("missing ')'");
      return v;
    }
    if (Eat('[')) {
      Value v;
      v.is_list = true;
      if (Eat(']')) return v;
      do {
        auto e = Expr();
        if (!e.ok()) return e;
        if (e->is_list) return Err("nested lists");
        if (v.list.size() >= max_len_) return Err("pattern longer than the layers");
        v.list.push_back(e->num);
      } while (Eat(','));
      if (!Eat(']')) return Err("missing ']'");
      return v;
    }
    Skip();
    size_t start = pos_;
    while (pos_ < t_.size() && absl::ascii_isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    if (start == pos_) return Err("expected a number, '[' or '('");
    Value v;
    if (!absl::SimpleAtoi(t_.substr(start, pos_ - start), &v.num) || v.num > kMaxSize) return Err("number too large");
    return v;
  }

  absl::string_view t_;
  size_t max_len_;
  size_t pos_ = 0;
};

// Vocabulary of a tokenizer known by name (substring of --tokenizer-model, lower case): the
// released model's config.json vocab_size (the embedding rows it ships), which Megatron's
// HuggingFaceTokenizer-derived vocabulary (len(tokenizer)) does not exceed.
int64_t KnownTokenizerVocab(const std::string& model_lower) {
  static const std::vector<std::pair<const char*, int64_t>> kKnown = {
      {"llama-3", 128256},  {"llama3", 128256},       {"meta-llama-3", 128256},
      {"mistral-nemo", 131072},                      // mistralai/Mistral-Nemo-Base-2407 config.json
      {"mixtral", 32000},   {"mistral-7b", 32000},   // mistralai/Mixtral-8x7B-v0.1, Mistral-7B-v0.1
      {"deepseek-v3", 129280}, {"deepseek-r1", 129280}, {"deepseek-v2", 102400},
      {"kimi-k2", 163840},  {"gpt-oss", 201088},
      {"qwen3", 151936},    {"qwen2.5", 151936},      {"qwen2", 151936},
      {"gemma-3", 262208},  {"gemma-2", 256000},      {"gemma2", 256000},
      {"gpt2", 50257},
  };
  for (const auto& [key, vocab] : kKnown) {
    if (absl::StrContains(model_lower, key)) return vocab;
  }
  return 0;
}

// vocab_size of a local Hugging Face tokenizer/model directory's config.json; 0 if none.
int64_t LocalTokenizerVocab(const std::string& path) {
  if (path.empty()) return 0;
  std::error_code ec;
  std::filesystem::path dir(path);
  if (!std::filesystem::is_directory(dir, ec)) return 0;
  if (!std::filesystem::is_regular_file(dir / "config.json", ec) ||
      std::filesystem::file_size(dir / "config.json", ec) > (uintmax_t{16} << 20)) {
    return 0;
  }
  std::ifstream in(dir / "config.json");
  if (!in) return 0;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  // A flat scan for "vocab_size": N (config.json is JSON; the key is unique at top level in
  // the model families above).
  const size_t k = text.find("\"vocab_size\"");
  if (k == std::string::npos) return 0;
  size_t i = text.find(':', k);
  if (i == std::string::npos) return 0;
  ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
  size_t j = i;
  while (j < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[j]))) ++j;
  int64_t v = 0;
  if (j == i || !absl::SimpleAtoi(text.substr(i, j - i), &v) || v <= 0 || v > kMaxSize) return 0;
  return v;
}

}  // namespace

bool IsModelledMegatronFlag(absl::string_view name) {
  std::string n(name);
  if (absl::StartsWith(n, "--")) n = n.substr(2);
  std::replace(n.begin(), n.end(), '_', '-');
  return ValueFlags().count(n) || SwitchFlags().count(n) || ListFlags().count(n);
}

absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv) {
  // Skip the launcher: start after the training script (or python -m module).
  const size_t start = ProgramArgsStart(argv, /*shell_scripts=*/false);
  ImportedJob out;
  out.source = "megatron";
  std::map<std::string, std::string> vals;
  std::map<std::string, std::vector<std::string>> lists;
  std::set<std::string> switches;
  auto is_flag = [](const std::string& t) { return absl::StartsWith(t, "--"); };
  for (size_t i = start; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (!is_flag(tok)) {
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
        if (i + 1 >= argv.size() || is_flag(argv[i + 1])) return FlagError(name, "needs a value");
        value = argv[++i];
      }
      vals[name] = value;
    } else if (ListFlags().count(name)) {
      std::vector<std::string>& l = lists[name];
      l.clear();
      if (has_inline) l.push_back(value);
      while (i + 1 < argv.size() && !is_flag(argv[i + 1])) l.push_back(argv[++i]);
    } else if (SwitchFlags().count(name)) {
      if (has_inline) return FlagError(name, "is a switch and takes no value");
      switches.insert(name);
    } else {
      // Not modelled: keep it with all its values (Megatron has no positional arguments, so
      // every token up to the next flag belongs to it: nargs '*' lists such as --data-path).
      std::string entry = tok;
      while (!has_inline && i + 1 < argv.size() && !is_flag(argv[i + 1])) absl::StrAppend(&entry, " ", argv[++i]);
      out.ignored.push_back(entry);
    }
  }
  auto has = [&](const char* f) { return vals.count(f) > 0; };
  auto int_of = [&](const char* f, int64_t fallback, int64_t max = kMaxSize) -> absl::StatusOr<int64_t> {
    auto it = vals.find(f);
    if (it == vals.end()) {
      if (fallback < 0) return FlagError(f, "required");
      return fallback;
    }
    int64_t v = 0;
    double d = 0;
    if (absl::SimpleAtoi(it->second, &v)) {
      // fall through to the range check
    } else if (absl::SimpleAtod(it->second, &d) && std::isfinite(d) && d == std::floor(d) &&
               std::fabs(d) <= static_cast<double>(max)) {
      v = static_cast<int64_t>(d);
    } else {
      return FlagError(f, absl::StrCat("'", it->second, "' is not an integer of at most ", max));
    }
    if (v < 0 || v > max) return FlagError(f, absl::StrCat(v, " is out of range (0 to ", max, ")"));
    return v;
  };
#define GET(var, flag, fallback, ...)              \
  int64_t var = 0;                                 \
  {                                                \
    auto _v = int_of(flag, fallback, ##__VA_ARGS__); \
    if (!_v.ok()) return _v.status();              \
    var = *_v;                                     \
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
  GET(etp, "expert-tensor-parallel-size", 0);
  GET(kv_channels, "kv-channels", 0);
  GET(experts, "num-experts", 0);
  GET(topk, "moe-router-topk", 2);
  GET(train_iters, "train-iters", 0, kMaxCount);
  GET(train_samples, "train-samples", 0, kMaxCount);
  GET(divisible, "make-vocab-size-divisible-by", 128);
  GET(padded_vocab, "padded-vocab-size", 0);
  const bool swiglu = switches.count("swiglu") > 0;
  const bool quick_geglu = switches.count("quick-geglu") > 0;
  const bool squared_relu = switches.count("squared-relu") > 0;
  if (int(swiglu) + int(quick_geglu) + int(squared_relu) > 1) {
    return FlagError(swiglu ? "swiglu" : "quick-geglu",
                     "only one of --swiglu, --quick-geglu, --squared-relu (arguments.py asserts not swiglu)");
  }
  // arguments.py: ffn_hidden_size defaults to 4h, or int((4h * 2 / 3) / 64) * 64 with --swiglu.
  int64_t ffn_default = 4 * hidden;
  if (swiglu) ffn_default = static_cast<int64_t>((4.0 * hidden * 2 / 3) / 64) * 64;
  GET(ffn, "ffn-hidden-size", ffn_default);
  GET(moe_ffn, "moe-ffn-hidden-size", ffn);
  GET(shared_ffn, "moe-shared-expert-intermediate-size", 0);
  GET(query_groups, "num-query-groups", heads);
  GET(max_pos, "max-position-embeddings", seq);
  GET(layers_per_vstage, "num-layers-per-virtual-pipeline-stage", 0);
  GET(vstages_per_rank, "num-virtual-stages-per-pipeline-rank", 0);
  GET(recompute_layers, "recompute-num-layers", 0);
  // MLA (arguments.py _add_mla_args defaults: q_lora_rank None, kv_lora_rank 32, qk_head_dim
  // 128, qk_pos_emb_head_dim 64, v_head_dim 128).
  GET(q_lora, "q-lora-rank", 0);
  GET(kv_lora, "kv-lora-rank", 32);
  GET(qk_head_dim, "qk-head-dim", 128);
  GET(qk_pos_dim, "qk-pos-emb-head-dim", 64);
  GET(v_head_dim, "v-head-dim", 128);
#undef GET
  if (layers == 0) return FlagError("num-layers", "must be > 0");
  if (hidden == 0) return FlagError("hidden-size", "must be > 0");
  if (heads == 0) return FlagError("num-attention-heads", "must be > 0");

  // Vocabulary: --padded-vocab-size, --vocab-size, else the tokenizer's, padded to
  // --make-vocab-size-divisible-by x TP as Megatron's _vocab_size_with_padding does
  // (megatron/training/tokenizer/tokenizer.py).
  int64_t vocab = 0;
  const std::string tok_type = vals["tokenizer-type"];
  const std::string tok_model = vals["tokenizer-model"];
  if (padded_vocab > 0) {
    vocab = padded_vocab;
  } else {
    if (has("vocab-size")) {
      auto v = int_of("vocab-size", -1);
      if (!v.ok()) return v.status();
      vocab = *v;
      if (vocab <= 0) return FlagError("vocab-size", "must be > 0");
    } else {
      const std::string model_lower = absl::AsciiStrToLower(tok_model);
      if (tok_type == "GPT2BPETokenizer") vocab = 50257;
      else if (tok_type == "Llama2Tokenizer") vocab = 32000;
      if (vocab == 0) vocab = LocalTokenizerVocab(tok_model);
      if (vocab == 0) vocab = KnownTokenizerVocab(model_lower);
      if (vocab == 0) {
        return FlagError("vocab-size", absl::StrCat(
            "required: the vocabulary of --tokenizer-type ", tok_type.empty() ? "(none)" : tok_type,
            tok_model.empty() ? "" : absl::StrCat(" --tokenizer-model ", tok_model),
            " is not known here (not a local directory with a config.json, not a known model name); "
            "add --vocab-size N"));
      }
    }
    const int64_t multiple = divisible * std::max<int64_t>(tp, 1);
    if (multiple > 0) vocab = (vocab + multiple - 1) / multiple * multiple;
  }

  v1::ModelShape& m = *out.spec.mutable_model()->mutable_shape();
  m.set_name(absl::StrCat("megatron-", layers, "L-", hidden, "h"));
  m.set_source("Megatron-LM arguments");
  m.set_layers(layers);
  m.set_hidden_size(hidden);
  m.set_attention_heads(heads);
  if (switches.count("group-query-attention")) m.set_kv_heads(query_groups);
  m.set_head_dim(kv_channels);
  m.set_ffn_hidden_size(ffn);
  // arguments.py core_transformer_config_from_args: --swiglu (SiLU GLU), --quick-geglu (gated
  // quick-GELU, gpt-oss), --squared-relu; else GELU.
  m.set_ffn_type(swiglu ? v1::FFN_TYPE_SWIGLU
                 : quick_geglu ? v1::FFN_TYPE_GEGLU
                 : squared_relu ? v1::FFN_TYPE_SQUARED_RELU
                                : v1::FFN_TYPE_GELU);
  m.set_vocab_size(vocab);
  m.set_tied_embeddings(!switches.count("untie-embeddings-and-output-weights"));
  m.set_linear_bias(!switches.count("disable-bias-linear"));
  const std::string pos = vals.count("position-embedding-type") ? vals["position-embedding-type"] : "learned_absolute";
  m.set_learned_position_embeddings(pos == "learned_absolute" ? max_pos : 0);
  m.set_norm_type(vals["normalization"] == "RMSNorm" ? v1::NORM_TYPE_RMSNORM : v1::NORM_TYPE_LAYERNORM);
  if (switches.count("multi-latent-attention")) {
    v1::MlaShape& mla = *m.mutable_mla();
    mla.set_q_lora_rank(q_lora);
    mla.set_kv_lora_rank(kv_lora);
    mla.set_qk_nope_head_dim(qk_head_dim);
    mla.set_qk_rope_head_dim(qk_pos_dim);
    mla.set_v_head_dim(v_head_dim);
    if (kv_lora <= 0) return FlagError("kv-lora-rank", "must be > 0 with --multi-latent-attention");
  }
  if (experts > 0) {
    m.mutable_moe()->set_routed_experts(experts);
    m.mutable_moe()->set_top_k(topk);
    m.mutable_moe()->set_expert_ffn_hidden_size(moe_ffn);
    if (shared_ffn > 0) {
      m.mutable_moe()->set_shared_experts(1);
      m.mutable_moe()->set_shared_expert_ffn_hidden_size(shared_ffn);
    }
    if (has("moe-layer-freq")) {
      const std::string& f = vals["moe-layer-freq"];
      int64_t freq = 0;
      if (f.find('[') == std::string::npos) {
        if (!absl::SimpleAtoi(f, &freq) || freq <= 0 || freq > layers) {
          return FlagError("moe-layer-freq", absl::StrCat("'", f, "' is not an integer in 1..num-layers"));
        }
        m.mutable_moe()->set_layer_freq(freq);
      } else {
        // A list pattern (1: MoE layer, 0: dense), its length num-layers (arguments.py).
        auto pattern = PatternParser(f, static_cast<size_t>(layers)).Parse();
        if (!pattern.ok()) return FlagError("moe-layer-freq", absl::StrCat("'", f, "': ", pattern.status().message()));
        if (static_cast<int64_t>(pattern->size()) != layers) {
          return FlagError("moe-layer-freq", absl::StrCat("'", f, "' has ", pattern->size(), " entries, not num-layers (",
                                                          layers, ")"));
        }
        int64_t first = 0;
        while (first < layers && (*pattern)[first] == 0) ++first;
        if (first == layers) return FlagError("moe-layer-freq", absl::StrCat("'", f, "' has no MoE layer"));
        // The shape models "first_dense_layers dense, then every layer_freq-th layer MoE".
        bool matched = false;
        for (int64_t fq = 1; fq <= layers - first && !matched; ++fq) {
          bool ok = true;
          for (int64_t i = 0; i < layers && ok; ++i) {
            const int64_t want = (i >= first && (i - first) % fq == 0) ? 1 : 0;
            ok = (*pattern)[i] == want;
          }
          if (ok) {
            m.mutable_moe()->set_first_dense_layers(first);
            m.mutable_moe()->set_layer_freq(fq);
            matched = true;
          }
        }
        if (!matched) {
          return FlagError("moe-layer-freq", absl::StrCat("'", f, "' is not modelled: only N leading dense layers "
                                                          "followed by every k-th layer MoE"));
        }
      }
    }
  }

  v1::TrainingSpec& t = *out.spec.mutable_training();
  t.set_seq_length(seq);
  t.set_global_batch_size(gbs);
  t.set_micro_batch_size(mbs);
  auto* prec = t.mutable_precision();
  // megatron/training/arguments.py validate_args: "if args.fp16: assert not args.bf16".
  if (switches.count("bf16") && switches.count("fp16")) {
    return FlagError("fp16", "and --bf16 are both given; Megatron refuses both (arguments.py validate_args)");
  }
  if (switches.count("bf16")) prec->set_params(v1::D_TYPE_BF16), prec->set_gemm(v1::D_TYPE_BF16);
  else if (switches.count("fp16")) prec->set_params(v1::D_TYPE_FP16), prec->set_gemm(v1::D_TYPE_FP16);
  else prec->set_params(v1::D_TYPE_FP32), prec->set_gemm(v1::D_TYPE_FP32), prec->set_grads(v1::D_TYPE_FP32);
  if (has("fp8-format")) prec->set_gemm(v1::D_TYPE_FP8);
  // --grad-reduce-in-bf16: the DP gradient reduction in bf16 (arguments.py mixed precision).
  // With --bf16 it also turns accumulate_allreduce_grads_in_fp32 off (arguments.py
  // validate_args), so the DDP gradient buffer is in the parameter dtype
  // (megatron/core/distributed/distributed_data_parallel.py: grad_dtype = torch.float if
  // grad_reduce_in_fp32 else param.dtype): bf16 gradients, half the fp32 buffer.
  if (switches.count("grad-reduce-in-bf16")) {
    prec->set_grad_reduce(v1::D_TYPE_BF16);
    if (switches.count("bf16")) prec->set_grads(v1::D_TYPE_BF16);
  }
  // --fp8-param-gather: weights kept and all-gathered in fp8 (TransformerConfig.fp8_param).
  if (switches.count("fp8-param-gather")) {
    if (!has("fp8-format")) return FlagError("fp8-param-gather", "needs --fp8-format");
    t.set_fp8_param_gather(true);
  }
  const std::string gran = vals["recompute-granularity"];
  if (gran == "full" || switches.count("checkpoint-activations")) t.set_recompute(v1::RECOMPUTE_FULL);
  else if (gran == "selective" || switches.count("recompute-activations")) t.set_recompute(v1::RECOMPUTE_SELECTIVE);
  else if (!gran.empty()) return FlagError("recompute-granularity", absl::StrCat("'", gran, "' is not full or selective"));
  else t.set_recompute(v1::RECOMPUTE_NONE);
  if (t.recompute() == v1::RECOMPUTE_FULL) {
    // --recompute-method block: recompute-num-layers layers per stage; uniform (or none):
    // every layer (in chunks of recompute-num-layers).
    const std::string method = vals["recompute-method"];
    if (!method.empty() && method != "uniform" && method != "block") {
      return FlagError("recompute-method", absl::StrCat("'", method, "' is not uniform or block"));
    }
    if (method == "block") t.set_recompute_num_layers(recompute_layers);
  }
  if (lists.count("recompute-modules")) {
    static const std::set<std::string> kModules = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                                   "mlp", "moe", "shared_experts"};
    for (const std::string& raw : lists["recompute-modules"]) {
      // Accepts the argparse form (core_attn mlp) and a Python-list-looking form
      // ("[core_attn,mlp]" or "core_attn,mlp") written by YAML-to-argv converters.
      std::string s = raw;
      for (char& c : s) {
        if (c == '[' || c == ']' || c == '\'' || c == '"' || c == ',') c = ' ';
      }
      for (absl::string_view part : absl::StrSplit(s, ' ', absl::SkipEmpty())) {
        if (!kModules.count(std::string(part))) {
          return FlagError("recompute-modules", absl::StrCat("'", part, "' is not one of core_attn, moe_act, "
                                                             "layernorm, mla_up_proj, mlp, moe, shared_experts"));
        }
        t.add_recompute_modules(std::string(part));
      }
    }
    if (t.recompute() == v1::RECOMPUTE_NONE && t.recompute_modules_size() > 0) {
      // Megatron applies --recompute-modules only with --recompute-granularity selective.
      out.ignored.push_back(absl::StrCat("--recompute-modules ", absl::StrJoin(t.recompute_modules(), " "),
                                         " (without --recompute-granularity selective: no effect)"));
      t.clear_recompute_modules();
    }
  }
  const std::string strategy = vals["data-parallel-sharding-strategy"];
  if (switches.count("use-torch-fsdp2")) {
    t.set_sharding(v1::SHARDING_ZERO3);
  } else if (switches.count("use-megatron-fsdp")) {
    // Megatron-FSDP --data-parallel-sharding-strategy (arguments.py choices no_shard, optim,
    // optim_grads, optim_grads_params). Not given: optim_grads_params, the strategy that
    // Megatron-FSDP is used for (docs/FRAMEWORKS.md), so that the flag alone still reads as FSDP.
    if (strategy == "optim") t.set_sharding(v1::SHARDING_ZERO1);
    else if (strategy == "optim_grads") t.set_sharding(v1::SHARDING_ZERO2);
    else if (strategy == "optim_grads_params" || strategy.empty()) t.set_sharding(v1::SHARDING_ZERO3);
    else if (strategy == "no_shard") t.set_sharding(v1::SHARDING_NONE);
    else return FlagError("data-parallel-sharding-strategy", absl::StrCat("'", strategy, "' is not modelled"));
  } else if (switches.count("use-distributed-optimizer")) {
    t.set_sharding(v1::SHARDING_ZERO1);
  } else {
    t.set_sharding(v1::SHARDING_NONE);
  }
  t.set_overlap_dp_comm(switches.count("overlap-grad-reduce") > 0);
  t.set_overlap_tp_comm(switches.count("tp-comm-overlap") > 0);
  const std::string backend = vals["attention-backend"];
  // Transformer Engine's flash and fused (cuDNN) attention take bf16/fp16 QKV only
  // (transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend,
  // "Filter: Data type"): naming either in an fp32 run (neither --bf16 nor --fp16) leaves TE no
  // backend. Under "auto" an fp32 run is left unstated: the job reader's default gives fp32 GEMMs
  // the unfused path and says why (proto/codec.cc).
  const bool fp32_activations = !switches.count("bf16") && !switches.count("fp16");
  if (fp32_activations && (backend == "flash" || backend == "fused")) {
    return FlagError("attention-backend", absl::StrCat("'", backend, "' needs --bf16 or --fp16 (Transformer Engine's ",
                                                       backend, " attention takes bf16/fp16 only)"));
  }
  if (backend == "unfused" || backend == "local") {
    t.set_flash_attention(false);
  } else if (!fp32_activations) {
    t.set_flash_attention(true);
  }
  const std::string graphs = vals["cuda-graph-impl"];
  if (!graphs.empty() && graphs != "none" && graphs != "local" && graphs != "transformer_engine") {
    return FlagError("cuda-graph-impl", absl::StrCat("'", graphs, "' is not none, local or transformer_engine"));
  }
  if ((!graphs.empty() && graphs != "none") || switches.count("enable-cuda-graph") || switches.count("external-cuda-graph")) {
    t.set_cuda_graphs(true);
  }
  double hd = 0.1, ad = 0.1;  // Megatron's default dropouts
  if (has("hidden-dropout") && (!absl::SimpleAtod(vals["hidden-dropout"], &hd) || !(hd >= 0 && hd <= 1))) {
    return FlagError("hidden-dropout", "not a probability");
  }
  if (has("attention-dropout") && (!absl::SimpleAtod(vals["attention-dropout"], &ad) || !(ad >= 0 && ad <= 1))) {
    return FlagError("attention-dropout", "not a probability");
  }
  t.set_dropout(hd > 0 || ad > 0);
  t.set_train_iters(train_iters);
  if (train_samples > 0) t.set_dataset_tokens(static_cast<double>(train_samples) * static_cast<double>(seq));

  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  p.set_tp(tp);
  p.set_pp(pp);
  p.set_cp(cp);
  p.set_ep(ep);
  if (etp > 0) p.set_etp(etp);
  if (layers_per_vstage > 0 && vstages_per_rank > 0) {
    return FlagError("num-virtual-stages-per-pipeline-rank",
                     "give it or --num-layers-per-virtual-pipeline-stage, not both (arguments.py asserts)");
  }
  if (layers_per_vstage > 0) {
    if (pp <= 0 || layers % pp != 0 || (layers / pp) % layers_per_vstage != 0) {
      return FlagError("num-layers-per-virtual-pipeline-stage", "must divide num-layers / pipeline size");
    }
    p.set_vpp((layers / pp) / layers_per_vstage);
  } else if (vstages_per_rank > 0) {
    p.set_vpp(vstages_per_rank);
  }
  p.set_sequence_parallel(switches.count("sequence-parallel") > 0);
  return out;
}

}  // namespace stepcast
