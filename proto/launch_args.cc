#include "proto/launch_args.h"

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
#include "toml++/toml.h"
#include "proto/codec.h"
#include "proto/nemo_args.h"
#include "core/model_shape.h"

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

// Bound on any integer flag so that the products formed below (4 * hidden, the vocabulary
// multiple divisible * TP, train samples * sequence length) cannot overflow int64: 2^31 - 1
// for sizes and degrees, 2^53 for the run length (train iterations / samples).
constexpr int64_t kMaxSize = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxCount = int64_t{1} << 53;

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
  // Given as 0, these were replaced in silence (TP 0 -> 1, micro-batch 0 -> 1 "assumed", a
  // virtual stage of 0 layers ignored: reliability review 2, N8). Megatron-LM's arguments.py
  // divides the world size by tp * pp * cp (and the DP size by ep, etp), divides num_layers by
  // num_layers_per_virtual_pipeline_stage, and asserts micro_batch_size > 0, so 0 is an error
  // there too.
  for (const auto& [flag, value] : {std::pair{"tensor-model-parallel-size", tp}, {"pipeline-model-parallel-size", pp},
                                    {"context-parallel-size", cp}, {"expert-model-parallel-size", ep},
                                    {"expert-tensor-parallel-size", etp}, {"micro-batch-size", mbs},
                                    {"global-batch-size", gbs}, {"seq-length", seq},
                                    {"num-layers-per-virtual-pipeline-stage", layers_per_vstage},
                                    {"num-virtual-stages-per-pipeline-rank", vstages_per_rank}}) {
    if (value == 0 && has(flag)) {
      return FlagError(flag, "0 is not a size: must be >= 1 (Megatron-LM's arguments.py divides by it or asserts it "
                             "is positive)");
    }
  }
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

namespace {

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
    const int64_t dp = std::max<int64_t>(1, p.dp() > 0 ? p.dp() : gpu_count / model_parallel);
    if (local_batch_size > std::numeric_limits<int64_t>::max() / dp) {
      return absl::InvalidArgumentError(absl::StrCat("training.local_batch_size: ", local_batch_size, " x ", dp,
                                                     " data-parallel ranks overflows the global batch"));
    }
    spec.mutable_training()->set_global_batch_size(local_batch_size * dp);
  }
  return spec;
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

absl::StatusOr<ImportedJob> JobFromCommand(const std::vector<std::string>& argv, const std::string& base_dir) {
  // NeMo 2 (--factory) and Megatron-Bridge (--recipe) launch lines: proto/nemo_args.h.
  if (IsNemoCommand(argv)) return JobFromNemoCommand(argv);
  // The training program's arguments start after the script (train.py, run_train.sh) or
  // "-m module"; the launcher's flags before it (torchrun --nproc_per_node ...) are skipped.
  size_t start = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (absl::EndsWith(argv[i], ".py") || absl::EndsWith(argv[i], ".sh")) {
      start = i + 1;
      break;
    }
    if (argv[i] == "-m" && i + 1 < argv.size()) {
      start = i + 2;
      break;
    }
  }
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
  bool megatron = false;
  for (const auto& a : argv) megatron = megatron || absl::StartsWith(a, "--num-layers") || absl::StartsWith(a, "--num_layers");
  if (!megatron) {
    return absl::InvalidArgumentError(
        "the command is neither Megatron-LM (no --num-layers) nor torchtitan (no --job.config_file, "
        "--module or --model.name/--model.flavor)");
  }
  return JobFromMegatronArgs(argv);
}

}  // namespace stepcast
