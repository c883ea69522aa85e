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
#include "core/model_shape.h"
#include "proto/codec.h"
#include "proto/launch_data.h"

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
      "data-parallel-sharding-strategy", "cuda-graph-impl",
      // Hybrid Mamba-2 models (eleventh session).
      "hybrid-layer-pattern", "hybrid-override-pattern", "hybrid-attention-ratio", "hybrid-mlp-ratio",
      "mamba-state-dim", "mamba-head-dim", "mamba-num-groups", "mamba-num-heads",
      // Latent MoE and MTP (twelfth session).
      "moe-latent-size", "mtp-num-layers", "mtp-hybrid-override-pattern", "moe-expert-capacity-factor",
      "moe-token-dispatcher-type", "moe-flex-dispatcher-backend", "fp8-recipe",
      // Group-limited routing (eighteenth session).
      "moe-router-num-groups", "moe-router-group-topk"};
  return k;
}
// Flags with nargs='*' / '+' that are modelled.
const std::set<std::string>& ListFlags() {
  static const std::set<std::string> k = {"recompute-modules", "cuda-graph-scope"};
  return k;
}
const std::set<std::string>& SwitchFlags() {
  static const std::set<std::string> k = {
      "group-query-attention", "swiglu", "disable-bias-linear", "untie-embeddings-and-output-weights",
      "bf16", "fp16", "recompute-activations", "use-distributed-optimizer", "use-torch-fsdp2",
      "use-megatron-fsdp", "overlap-grad-reduce", "tp-comm-overlap", "use-flash-attn", "sequence-parallel",
      // Added for issue 10.
      "multi-latent-attention", "quick-geglu", "squared-relu", "grad-reduce-in-bf16", "fp8-param-gather",
      "accumulate-allreduce-grads-in-fp32",
      "enable-cuda-graph", "external-cuda-graph", "checkpoint-activations", "is-hybrid-model",
      "mtp-use-repeated-layer", "moe-pad-expert-input-to-capacity", "moe-enable-deepep",
      // Seventeenth session.
      "moe-router-fusion"};
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

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Megatron-LM's training programs that do not build a GPT or hybrid model (megatron/training/ and
// the repository root at the pinned commit): their launch lines are refused, not misread as GPT.
// pretrain_mamba.py / pretrain_hybrid.py build hybrid Mamba-2 models (MegatronHybridPattern).
absl::Status CheckMegatronProgram(const std::string& program) {
  const std::string base = Basename(program);
  for (const char* other : {"pretrain_bert.py", "pretrain_t5.py", "pretrain_vlm.py", "pretrain_retro.py",
                            "pretrain_ict.py", "pretrain_vision_classify.py", "pretrain_vision_dino.py",
                            "pretrain_vision_inpaint.py"}) {
    if (base == other) {
      return absl::InvalidArgumentError(absl::StrCat(
          base, ": not a GPT model; stepcast reads Megatron-LM's decoder-only GPT launch lines (pretrain_gpt.py "
                "or a script passing its arguments)"));
    }
  }
  return absl::OkStatus();
}

// A --pipeline-model-parallel-layout string ("Et|(tt|)*30mL") as Megatron-Core reads it
// (megatron/core/transformer/pipeline_parallel_layer_layout.py parse_str_to_list: commas
// dropped, "(...)*n" then "x*n" unrolled, stages split on '|'): {stages, decoder layers 't'}.
absl::StatusOr<std::pair<int64_t, int64_t>> PipelineLayoutCounts(const std::string& layout) {
  constexpr size_t kMaxExpanded = 1 << 20;
  std::string s;
  for (char c : layout) {
    if (c != ',') s += c;
  }
  auto unroll = [&](bool parens) -> absl::Status {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      size_t body_start = i, body_end = i + 1, next = i + 1;
      if (parens) {
        if (s[i] != '(') {
          out += s[i++];
          continue;
        }
        const size_t close = s.find(')', i + 1);
        if (close == std::string::npos) return absl::InvalidArgumentError("unbalanced '('");
        body_start = i + 1, body_end = close, next = close + 1;
      }
      if (next < s.size() && s[next] == '*') {
        size_t j = next + 1;
        while (j < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[j]))) ++j;
        int64_t n = 0;
        if (j == next + 1 || !absl::SimpleAtoi(s.substr(next + 1, j - next - 1), &n) || n < 0 ||
            static_cast<size_t>(n) * (body_end - body_start) + out.size() > kMaxExpanded) {
          return absl::InvalidArgumentError("a repeat count is missing or too large");
        }
        for (int64_t k = 0; k < n; ++k) out += s.substr(body_start, body_end - body_start);
        i = j;
      } else {
        if (parens) return absl::InvalidArgumentError("'(...)' without '*n'");
        out += s[i++];
      }
    }
    s = std::move(out);
    return absl::OkStatus();
  };
  if (absl::Status st = unroll(true); !st.ok()) return st;
  if (absl::Status st = unroll(false); !st.ok()) return st;
  int64_t stages = 1, decoder = 0;
  for (char c : s) {
    if (c == '|') ++stages;
    else if (c == 't') ++decoder;
    else if (c != 'E' && c != 'L' && c != 'm' && c != ' ') return absl::InvalidArgumentError(absl::StrCat("'", std::string(1, c), "' is not E, t, m, L or |"));
  }
  return std::make_pair(stages, decoder);
}

}  // namespace

std::string MegatronPipelineLayout(int64_t layers, int64_t pp, int64_t vpp) {
  const int64_t stages = std::max<int64_t>(1, pp) * std::max<int64_t>(1, vpp);
  if (stages < 2 || layers < stages || layers > 100000 || stages > 100000) return "";
  // As even as possible; the extra layers go to the middle stages first (the first stage also
  // holds the embedding, the last the loss).
  std::vector<int64_t> sizes(static_cast<size_t>(stages), layers / stages);
  int64_t rem = layers % stages;
  for (int64_t i = 1; i + 1 < stages && rem > 0; ++i, --rem) ++sizes[static_cast<size_t>(i)];
  for (int64_t i : {stages - 1, int64_t{0}}) {
    if (rem > 0) ++sizes[static_cast<size_t>(i)], --rem;
  }
  auto body = [](int64_t c) { return c == 0 ? std::string() : c == 1 ? std::string("t") : absl::StrCat("t*", c); };
  std::string out = absl::StrCat("E", body(sizes[0]), "|");
  for (int64_t i = 1; i + 1 < stages;) {
    int64_t j = i;
    while (j + 1 < stages && sizes[static_cast<size_t>(j)] == sizes[static_cast<size_t>(i)]) ++j;
    const int64_t run = j - i;
    absl::StrAppend(&out, run > 1 ? absl::StrCat("(", body(sizes[static_cast<size_t>(i)]), "|)*", run)
                                  : absl::StrCat(body(sizes[static_cast<size_t>(i)]), "|"));
    i = j;
  }
  absl::StrAppend(&out, body(sizes[static_cast<size_t>(stages - 1)]), "L");
  return out;
}

std::string MegatronUnevenPipelineAdvice(int64_t layers, int64_t pp, int64_t vpp) {
  if (pp <= 1 || layers <= 0 || layers > 100000) return "";
  const int64_t v = std::max<int64_t>(1, vpp);
  std::vector<std::string> out;
  // --account-for-embedding/loss-in-pipeline-split: the embedding and the loss count as one
  // layer each in the split (TransformerConfig: (num_layers + 2) % pp, and per rank % vpp).
  for (int extra : {2, 1}) {
    const int64_t total = layers + extra;
    if (total % pp == 0 && (total / pp) % v == 0) {
      out.push_back(absl::StrCat(extra == 2 ? "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
                                            : "--account-for-loss-in-pipeline-split",
                                 " (", total, " = ", pp, " x ", total / pp, ")"));
      break;
    }
  }
  // --decoder-first/last-pipeline-num-layers F, L: the other pp - 2 stages take
  // (layers - F - L) / (pp - 2) each (TransformerConfig: divisible; F, L, and the middle ranks'
  // layers multiples of vpp). The most even split: the smallest largest stage, then the first
  // stage (it also holds the embedding) no larger than the last.
  int64_t best_f = 0, best_l = 0, best_m = 0, best_max = std::numeric_limits<int64_t>::max();
  for (int64_t m = (pp > 2 ? v : 0);; m += v) {
    const int64_t rem = layers - m * (pp - 2);  // layers for the first and last stages
    if (rem < 2 * v) break;
    // The most even first/last pair for this middle size (first <= last).
    const int64_t half = rem / 2 / v * v;
    for (int64_t f : {half - v, half, half + v}) {
      const int64_t l = rem - f;
      if (f < v || l < v || l % v != 0) continue;
      const int64_t mx = std::max({f, l, m});
      if (mx < best_max || (mx == best_max && f <= l && std::abs(f - l) < std::abs(best_f - best_l))) {
        best_f = f, best_l = l, best_m = m, best_max = mx;
      }
    }
    if (pp <= 2) break;
  }
  if (best_f > 0) {
    out.push_back(absl::StrCat("--decoder-first-pipeline-num-layers ", best_f, " --decoder-last-pipeline-num-layers ",
                               best_l,
                               pp > 2 ? absl::StrCat(" (", best_m, " on each of the ", pp - 2, " other stages)") : "",
                               v > 1 ? absl::StrCat(" with --num-virtual-stages-per-pipeline-rank ", v) : ""));
  }
  if (out.empty()) {
    // An explicit layout places any split (pipeline_parallel_layer_layout.py).
    const std::string layout = MegatronPipelineLayout(layers, pp, v);
    if (!layout.empty()) {
      out.push_back(absl::StrCat("--pipeline-model-parallel-layout ", layout, " (", pp * v, " stages of ", layers / (pp * v),
                                 " or ", layers / (pp * v) + 1, " layers)"));
    }
  }
  return absl::StrJoin(out, ", or ");
}

absl::Status CheckMegatronPipelineSplit(int64_t layers, int64_t pp, int64_t vpp, const MegatronUnevenPipeline& u) {
  const int64_t v = std::max<int64_t>(1, vpp);
  if (pp <= 1) return absl::OkStatus();
  if (u.layout) return absl::OkStatus();  // --pipeline-model-parallel-layout: checked by Megatron against the layout
  auto advice = [&] {
    const std::string a = MegatronUnevenPipelineAdvice(layers, pp, vpp);
    return a.empty() ? std::string("; no split fits: change --pipeline-model-parallel-size or the virtual stages")
                     : absl::StrCat("; Megatron accepts it with ", a);
  };
  if (u.first > 0 || u.last > 0) {
    // TransformerConfig.__post_init__ "Uneven PP".
    int64_t rest = layers, stages = pp;
    if (u.first > 0) {
      if (u.first % v != 0) {
        return absl::InvalidArgumentError(absl::StrCat("--decoder-first-pipeline-num-layers: ", u.first,
                                                       " is not a multiple of the virtual stages per rank (", v, ")"));
      }
      rest -= u.first, --stages;
    }
    if (u.last > 0) {
      if (u.last % v != 0) {
        return absl::InvalidArgumentError(absl::StrCat("--decoder-last-pipeline-num-layers: ", u.last,
                                                       " is not a multiple of the virtual stages per rank (", v, ")"));
      }
      rest -= u.last, --stages;
    }
    if (rest < 0 || (stages == 0 && rest != 0) || (stages > 0 && rest <= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          u.first > 0 ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers",
          ": the first/last stage layers leave ", rest, " of --num-layers ", layers, " for ", stages,
          " other stages"));
    }
    if (stages > 0 && (rest % stages != 0 || (rest / stages) % v != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          u.first > 0 ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers",
          ": the ", rest, " layers left for the ", stages, " middle stages do not divide evenly",
          v > 1 ? absl::StrCat(" into multiples of ", v, " virtual stages") : "",
          " (megatron/core/transformer/transformer_config.py: 'number of layers at middle stage ... must be "
          "divisible by the middle pipeline model parallel size')",
          advice()));
    }
    return absl::OkStatus();
  }
  const int64_t total = layers + (u.account_embedding ? 1 : 0) + (u.account_loss ? 1 : 0);
  if (total % pp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num-layers: ", layers,
        (u.account_embedding || u.account_loss) ? absl::StrCat(" (", total, " with the embedding/loss accounted)") : "",
        " is not divisible by --pipeline-model-parallel-size ", pp,
        "; Megatron-LM refuses the launch (arguments.py validate_args: 'Number of layers should be divisible by the "
        "pipeline-model-parallel size')",
        advice()));
  }
  if ((total / pp) % v != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num-virtual-stages-per-pipeline-rank: ", total / pp, " layers per pipeline rank do not split into ", v,
        " virtual stages (transformer_config.py / arguments.py: layers per stage must be divisible by the virtual "
        "stages)"));
  }
  return absl::OkStatus();
}

bool IsMegatronArgument(absl::string_view name) {
  static const std::set<std::string>* const kArgs = [] {
    auto* out = new std::set<std::string>;
    const char* text = LaunchDataFile("launchers/megatron_args.txt");
    for (absl::string_view line : absl::StrSplit(text ? text : "", '\n')) {
      if (line.empty() || line[0] == '#') continue;
      out->insert(std::string(line.substr(0, line.find(' '))));
    }
    return out;
  }();
  std::string n(name);
  if (!absl::StartsWith(n, "--")) n = "--" + n;
  return kArgs->count(n) > 0;
}

absl::Status CheckMegatronAllocation(v1::JobSpec& spec, int64_t gpu_count) {
  const v1::ParallelismSpec& p = spec.parallelism();
  const int64_t tp = std::max<int64_t>(1, p.tp()), pp = std::max<int64_t>(1, p.pp()), cp = std::max<int64_t>(1, p.cp());
  const int64_t model_parallel = tp * pp * cp;
  // arguments.py validate_args: 'world size is not divisible by total_model_size'.
  if (gpu_count % model_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-model-parallel-size x --pipeline-model-parallel-size x --context-parallel-size = ", tp, " x ", pp,
        " x ", cp, " = ", model_parallel, " does not divide the ", gpu_count,
        " GPUs (arguments.py validate_args: the world size must be divisible by it)"));
  }
  const int64_t dp = gpu_count / model_parallel;
  v1::TrainingSpec& t = *spec.mutable_training();
  const int64_t mbs = std::max<int64_t>(1, t.micro_batch_size());
  if (t.global_batch_size() == 0) {
    // arguments.py: global_batch_size = micro_batch_size x data_parallel_size when not given.
    t.set_global_batch_size(mbs * dp);
  } else if (t.global_batch_size() % (mbs * dp) != 0) {
    // megatron/core/num_microbatches_calculator.py ConstantNumMicroBatchesCalculator asserts it.
    return absl::InvalidArgumentError(absl::StrCat(
        "--global-batch-size: ", t.global_batch_size(), " is not a multiple of --micro-batch-size x data-parallel size = ",
        mbs, " x ", dp, " = ", mbs * dp, " (num_microbatches_calculator.py asserts it)"));
  }
  if (p.ep() > 1) {
    // parallel_state.initialize_model_parallel: the expert layout ETP x EP x EDP folds the
    // TP x CP x DP ranks of a pipeline stage.
    const int64_t etp = p.etp() > 0 ? p.etp() : tp;
    if ((tp * cp * dp) % (etp * p.ep()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--expert-model-parallel-size: ", p.ep(), p.etp() > 0 ? " x --expert-tensor-parallel-size " : " x TP ", etp,
          " does not divide TP x CP x DP = ", tp * cp * dp,
          " (parallel_state.py: the expert layout folds the TP x CP x DP ranks)",
          p.etp() > 0 ? "" : "; --expert-tensor-parallel-size 1 folds experts over TP ranks"));
    }
  }
  if (p.vpp() > 1) {
    // The interleaved schedule runs micro-batches in groups of PP
    // (megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving).
    const int64_t micro_batches = t.global_batch_size() / (mbs * dp);
    if (micro_batches % pp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--global-batch-size: ", t.global_batch_size(), " gives ", micro_batches,
          " micro-batches per step, not a multiple of --pipeline-model-parallel-size ", pp,
          " (the interleaved schedule, schedules.py, asserts it)"));
    }
  }
  return absl::OkStatus();
}

LayoutAcceptance MegatronAcceptsLayout(const Job& job) {
  LayoutAcceptance out;
  auto refuse = [&](std::string why) {
    out.accepted = false;
    out.reason = std::move(why);
    return out;
  };
  const ModelShape& m = job.model;
  const Parallelism& p = job.parallelism;
  const TrainingConfig& t = job.training;
  const int64_t tp = std::max<int64_t>(1, p.tp);
  if (m.attention_heads % tp != 0) {
    return refuse(absl::StrCat("--tensor-model-parallel-size ", tp, " does not divide the ", m.attention_heads,
                               " attention heads (transformer_config.py)"));
  }
  if (!m.mla.enabled() && m.kv_heads > 0 && m.kv_heads != m.attention_heads && m.kv_heads % tp != 0) {
    return refuse(absl::StrCat("--tensor-model-parallel-size ", tp, " does not divide the ", m.kv_heads,
                               " query groups (transformer_config.py)"));
  }
  if (m.ffn_hidden_size > 0 && m.ffn_hidden_size % tp != 0) {
    return refuse(absl::StrCat("--tensor-model-parallel-size ", tp, " does not divide --ffn-hidden-size ",
                               m.ffn_hidden_size, " (tensor_parallel/layers.py ColumnParallelLinear divides it)"));
  }
  if (p.ep > 1) {
    if (!m.moe.enabled()) return refuse("--expert-model-parallel-size needs --num-experts (arguments.py)");
    if (m.moe.routed_experts % p.ep != 0) {
      return refuse(absl::StrCat("--expert-model-parallel-size ", p.ep, " does not divide the ", m.moe.routed_experts,
                                 " experts (arguments.py)"));
    }
  }
  if (p.vpp > 1 && p.pp <= 1) return refuse("virtual pipeline stages need --pipeline-model-parallel-size > 1 (arguments.py)");
  if (absl::Status st = CheckMegatronPipelineSplit(m.layers, p.pp, p.vpp, {}); !st.ok()) {
    const std::string advice = MegatronUnevenPipelineAdvice(m.layers, p.pp, p.vpp);
    if (advice.empty()) return refuse(std::string(st.message()));
    // The first option of the advice ("A (x), or B (y)"): the flags only.
    std::string first = advice.substr(0, advice.find(", or "));
    first = first.substr(0, first.find(" ("));
    out.needs = first;
    out.reason = absl::StrCat(m.layers, " layers do not split evenly over PP ", p.pp,
                              p.vpp > 1 ? absl::StrCat(" x VPP ", p.vpp) : "", "; Megatron-LM accepts it with ", advice);
  }
  if (t.overlap_tp_comm && (tp == 1 || !p.sequence_parallel)) {
    return refuse(tp == 1 ? "--tp-comm-overlap at TP 1: Megatron turns sequence parallelism off and then asserts it"
                          : "--tp-comm-overlap needs --sequence-parallel (arguments.py)");
  }
  if (m.moe.enabled() && tp > 1 && !p.sequence_parallel) {
    return refuse("MoE at --tensor-model-parallel-size > 1 needs --sequence-parallel (moe_layer.py raises in training)");
  }
  if (t.fp8_param_gather && t.sharding == Sharding::kNone) {
    return refuse("--fp8-param-gather needs the distributed optimizer or FSDP (arguments.py)");
  }
  if (p.dp_replicate > 1 && t.sharding != Sharding::kZero1) {
    return refuse("--num-distributed-optimizer-instances needs --use-distributed-optimizer");
  }
  if (p.cp > 1 && t.seq_length % (2 * p.cp) != 0) {
    return refuse(absl::StrCat("--seq-length ", t.seq_length, " is not a multiple of 2 x --context-parallel-size (arguments.py)"));
  }
  return out;
}

namespace {

bool Used(const std::vector<std::string>& flags, absl::string_view f) {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

// "remove --a --b" for those of `candidates` the job used; "" when it used none.
std::string RemoveUsed(const std::vector<std::string>& flags, std::initializer_list<const char*> candidates) {
  std::vector<std::string> used;
  for (const char* c : candidates) {
    if (Used(flags, c)) used.push_back(c);
  }
  return used.empty() ? "" : absl::StrCat("remove ", absl::StrJoin(used, " "));
}

std::string Join2(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return absl::StrCat(a, "; ", b);
}

}  // namespace

std::string MegatronArgsForChange(const std::vector<std::string>& used, absl::string_view field,
                                  absl::string_view before, absl::string_view after) {
  const std::string to(after);
  int64_t n = 0;
  const bool is_num = absl::SimpleAtoi(to, &n);
  const bool yes = to == "true";
  if (field == "parallelism.tp") return absl::StrCat("--tensor-model-parallel-size ", to);
  if (field == "parallelism.pp") return absl::StrCat("--pipeline-model-parallel-size ", to);
  if (field == "parallelism.cp") return absl::StrCat("--context-parallel-size ", to);
  if (field == "parallelism.ep") return absl::StrCat("--expert-model-parallel-size ", to);
  if (field == "parallelism.etp") return absl::StrCat("--expert-tensor-parallel-size ", to);
  if (field == "parallelism.vpp") {
    // Megatron-LM has no --virtual-pipeline-model-parallel-size (that is NeMo's field name):
    // --num-virtual-stages-per-pipeline-rank, replacing --num-layers-per-virtual-pipeline-stage.
    const std::string drop = RemoveUsed(used, {"--num-layers-per-virtual-pipeline-stage"});
    if (is_num && n > 1) return Join2(absl::StrCat("--num-virtual-stages-per-pipeline-rank ", n), drop);
    return RemoveUsed(used, {"--num-virtual-stages-per-pipeline-rank", "--num-layers-per-virtual-pipeline-stage"});
  }
  if (field == "parallelism.sequence_parallel") {
    return yes ? "--sequence-parallel" : RemoveUsed(used, {"--sequence-parallel"});
  }
  if (field == "parallelism.dp_replicate") {
    return is_num && n > 1 ? absl::StrCat("--num-distributed-optimizer-instances ", n)
                           : RemoveUsed(used, {"--num-distributed-optimizer-instances"});
  }
  if (field == "training.micro_batch_size") return absl::StrCat("--micro-batch-size ", to);
  if (field == "training.recompute") {
    const std::string all = RemoveUsed(used, {"--recompute-granularity", "--recompute-activations", "--checkpoint-activations",
                                              "--recompute-method", "--recompute-num-layers", "--recompute-modules"});
    if (to == "none") return all;
    if (to == "selective") {
      return Join2("--recompute-granularity selective",
                   RemoveUsed(used, {"--recompute-activations", "--checkpoint-activations", "--recompute-method",
                                     "--recompute-num-layers"}));
    }
    if (to == "full") {
      return Join2("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
                   RemoveUsed(used, {"--recompute-activations", "--checkpoint-activations", "--recompute-modules"}));
    }
    return "";
  }
  if (field == "training.recompute_modules") {
    std::vector<std::string> mods = absl::StrSplit(to, ',', absl::SkipEmpty());
    return mods.empty() ? RemoveUsed(used, {"--recompute-modules"}) : absl::StrCat("--recompute-modules ", absl::StrJoin(mods, " "));
  }
  if (field == "training.recompute_num_layers") {
    return is_num && n > 0 ? absl::StrCat("--recompute-method block --recompute-num-layers ", n)
                           : "--recompute-method uniform --recompute-num-layers 1";
  }
  if (field == "training.sharding") {
    const std::string drop = RemoveUsed(used, {"--use-distributed-optimizer", "--use-torch-fsdp2", "--use-megatron-fsdp",
                                               "--data-parallel-sharding-strategy"});
    if (to == "zero1") {
      return Join2("--use-distributed-optimizer",
                   RemoveUsed(used, {"--use-torch-fsdp2", "--use-megatron-fsdp", "--data-parallel-sharding-strategy"}));
    }
    // Megatron-FSDP (arguments.py: --use-megatron-fsdp needs --ckpt-format fsdp_dtensor); torch
    // FSDP2 would also need PP 1, EP 1 and untied embeddings.
    if (to == "zero2" || to == "zero3") {
      return Join2(absl::StrCat("--use-megatron-fsdp --data-parallel-sharding-strategy ",
                                to == "zero2" ? "optim_grads" : "optim_grads_params", " --ckpt-format fsdp_dtensor"),
                   RemoveUsed(used, {"--use-torch-fsdp2"}));
    }
    if (to == "none") return drop;
    return "";
  }
  if (field == "training.overlap_tp_comm") {
    return yes ? (Used(used, "--sequence-parallel") ? "--tp-comm-overlap" : "--tp-comm-overlap --sequence-parallel")
               : RemoveUsed(used, {"--tp-comm-overlap"});
  }
  if (field == "training.overlap_dp_comm") {
    if (!yes) return RemoveUsed(used, {"--overlap-grad-reduce", "--overlap-param-gather"});
    const bool sharded = Used(used, "--use-distributed-optimizer") || Used(used, "--use-megatron-fsdp");
    return sharded ? "--overlap-grad-reduce --overlap-param-gather" : "--overlap-grad-reduce";
  }
  if (field == "training.precision.gemm") {
    return to == "fp8" ? "--fp8-format hybrid" : RemoveUsed(used, {"--fp8-format", "--fp8-param-gather"});
  }
  if (field == "training.fp8_param_gather") return yes ? "--fp8-param-gather" : RemoveUsed(used, {"--fp8-param-gather"});
  return "";  // parallelism.dp (what is left), parallelism.pp_schedule (no Megatron-LM argument)
}

bool IsModelledMegatronFlag(absl::string_view name) {
  std::string n(name);
  if (absl::StartsWith(n, "--")) n = n.substr(2);
  std::replace(n.begin(), n.end(), '_', '-');
  return ValueFlags().count(n) || SwitchFlags().count(n) || ListFlags().count(n);
}

namespace {

// The program's arguments sorted by kind (names as in megatron/training/arguments.py, '_'
// read as '-').
struct MegatronFlags {
  std::map<std::string, std::string> vals;                // ValueFlags(): the last value given
  std::map<std::string, std::vector<std::string>> lists;  // ListFlags()
  std::set<std::string> switches;                         // SwitchFlags()
  // Flags that are not modelled, with their values: some decide whether Megatron accepts the
  // launch (--decoder-first-pipeline-num-layers, --ckpt-format, --overlap-param-gather, ...).
  std::map<std::string, std::vector<std::string>> others;

  bool Has(const char* f) const { return vals.count(f) > 0; }
  bool On(const char* f) const { return switches.count(f) > 0; }
  // Whether the flag is on the line at all (modelled or not).
  bool Given(const char* f) const { return others.count(f) > 0 || switches.count(f) > 0 || vals.count(f) > 0; }
  // A value flag's text; "" when it is not given.
  std::string Val(const char* f) const {
    auto it = vals.find(f);
    return it == vals.end() ? std::string() : it->second;
  }
  // A value flag as an integer in 0..max ("8" or "8.0"); `fallback` when not given, an error
  // "required" when not given and fallback < 0.
  absl::StatusOr<int64_t> Int(const char* f, int64_t fallback, int64_t max = kMaxSize) const {
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
  }
  // An unmodelled flag's single value as an integer >= 1; 0 when it is not given.
  absl::StatusOr<int64_t> OtherInt(const char* f) const {
    auto it = others.find(f);
    if (it == others.end()) return int64_t{0};
    int64_t v = 0;
    if (it->second.size() != 1 || !absl::SimpleAtoi(it->second[0], &v) || v <= 0 || v > kMaxSize) {
      return FlagError(f, absl::StrCat("'", absl::StrJoin(it->second, " "), "' is not an integer >= 1"));
    }
    return v;
  }
};

// Reads argv[start...] (the program's arguments, after the launchers) into `f`: each flag's name
// goes to out.flags, each token that is not a modelled flag to out.ignored with its values.
// Reads: Megatron-LM's argparse conventions (megatron/training/arguments.py: "--flag value",
// "--flag=value", nargs '*' lists, store_true switches; no positional arguments).
absl::Status SortMegatronFlags(const std::vector<std::string>& argv, size_t start, MegatronFlags& f,
                               ImportedJob& out) {
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
    out.flags.push_back("--" + name);
    if (ValueFlags().count(name)) {
      if (!has_inline) {
        if (i + 1 >= argv.size() || is_flag(argv[i + 1])) return FlagError(name, "needs a value");
        value = argv[++i];
      }
      f.vals[name] = value;
    } else if (ListFlags().count(name)) {
      std::vector<std::string>& l = f.lists[name];
      l.clear();
      if (has_inline) l.push_back(value);
      while (i + 1 < argv.size() && !is_flag(argv[i + 1])) l.push_back(argv[++i]);
    } else if (SwitchFlags().count(name)) {
      if (has_inline) return FlagError(name, "is a switch and takes no value");
      f.switches.insert(name);
    } else {
      // Not modelled: keep it with all its values (Megatron has no positional arguments, so
      // every token up to the next flag belongs to it: nargs '*' lists such as --data-path).
      std::string entry = tok;
      std::vector<std::string>& values = f.others[name];
      values.clear();
      if (has_inline) values.push_back(value);
      while (!has_inline && i + 1 < argv.size() && !is_flag(argv[i + 1])) {
        values.push_back(argv[i + 1]);
        absl::StrAppend(&entry, " ", argv[++i]);
      }
      out.ignored.push_back(entry);
    }
  }
  return absl::OkStatus();
}

// The integer flags and the FFN activation of a launch line, Megatron's defaults where a flag is
// not given.
struct MegatronNumbers {
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, mbs = 0, gbs = 0;
  int64_t tp = 0, pp = 0, cp = 0, ep = 0, etp = 0;
  int64_t kv_channels = 0, experts = 0, topk = 0, train_iters = 0, train_samples = 0;
  int64_t divisible = 0, padded_vocab = 0;
  int64_t ffn = 0, moe_ffn = 0, shared_ffn = 0, query_groups = 0, max_pos = 0;
  int64_t layers_per_vstage = 0, vstages_per_rank = 0, recompute_layers = 0;
  int64_t q_lora = 0, kv_lora = 0, qk_head_dim = 0, qk_pos_dim = 0, v_head_dim = 0;
  bool swiglu = false, quick_geglu = false, squared_relu = false;
  // A hybrid pattern with '|' segments: they are the stages, of any length (arguments.py skips the
  // layers % PP check with a hybrid pattern).
  bool hybrid_segments = false;
};

// One integer flag: its name, its default (-1: required), the field it fills, its upper bound.
struct MegatronIntFlag {
  const char* flag;
  int64_t fallback;
  int64_t MegatronNumbers::*field;
  int64_t max = kMaxSize;
};

absl::Status ReadMegatronInts(const MegatronFlags& f, std::initializer_list<MegatronIntFlag> flags, MegatronNumbers& n) {
  for (const MegatronIntFlag& i : flags) {
    absl::StatusOr<int64_t> v = f.Int(i.flag, i.fallback, i.max);
    if (!v.ok()) return v.status();
    n.*(i.field) = *v;
  }
  return absl::OkStatus();
}

// Megatron-Core hybrid_layer_allocation.py pattern_from_ratios: `layers` Mamba layers with
// round(layers x attention_ratio) attention layers spaced evenly (starting and ending with Mamba),
// then round(layers x mlp_ratio) of the Mamba layers made MLP layers, spaced the same way.
std::string HybridPatternFromRatios(int64_t layers, double attention_ratio, double mlp_ratio) {
  std::string t(static_cast<size_t>(layers), 'M');
  const int64_t attention = static_cast<int64_t>(std::nearbyint(layers * attention_ratio));
  int64_t mamba = layers - attention;
  const double section = static_cast<double>(mamba) / static_cast<double>(attention + 1);
  double x = section;
  for (int64_t i = 0; i < layers; ++i) {
    if (x < 0.5) {
      t[i] = '*';
      x += section;
    } else {
      x -= 1;
    }
  }
  const int64_t mlp = static_cast<int64_t>(std::nearbyint(layers * mlp_ratio));
  if (mlp > 0) {
    mamba -= mlp;
    const double ratio = static_cast<double>(mamba) / static_cast<double>(mlp);
    x = ratio;
    for (int64_t i = 0; i < layers; ++i) {
      if (t[i] != 'M') continue;
      if (x < 0.5) {
        t[i] = '-';
        x += ratio;
      } else {
        x -= 1;
      }
    }
  }
  return t;
}

// A hybrid model's layer pattern (megatron/training/arguments.py validate_args, Megatron-Core
// hybrid_layer_allocation.py): --hybrid-layer-pattern (or the deprecated
// --hybrid-override-pattern, not both), its '|' pipeline-segment marks removed (`segments` gets
// their count, 1 without marks; the model splits the layers evenly); else, for pretrain_mamba.py /
// pretrain_hybrid.py / --is-hybrid-model / the ratio flags, pattern_from_ratios over --num-layers.
// Empty: not a hybrid. Layer kinds other than M * - E are refused. The MTP module's pattern goes
// to `mtp` and its depth count to `mtp_depths` (0: none): the unified pattern's parts after '/'
// (parse_hybrid_pattern: one per depth, all identical), or the legacy --mtp-hybrid-override-pattern
// repeated --mtp-num-layers times (arguments.py's backward-compatible conversion).
absl::StatusOr<std::string> MegatronHybridPattern(const MegatronFlags& f, const std::string& program, int64_t* segments,
                                                  std::string* mtp, int64_t* mtp_depths) {
  *segments = 1;
  mtp->clear();
  *mtp_depths = 0;
  if (f.Has("hybrid-layer-pattern") && f.Has("hybrid-override-pattern")) {
    return FlagError("hybrid-override-pattern",
                     "and --hybrid-layer-pattern cannot both be specified (arguments.py validate_args)");
  }
  const char* flag = f.Has("hybrid-layer-pattern") ? "hybrid-layer-pattern" : "hybrid-override-pattern";
  double ratio[2] = {0, 0};
  int k = 0;
  for (const char* r : {"hybrid-attention-ratio", "hybrid-mlp-ratio"}) {
    if (f.Has(r) && (!absl::SimpleAtod(f.Val(r), &ratio[k]) || !(ratio[k] >= 0 && ratio[k] <= 1))) {
      return FlagError(r, absl::StrCat("'", f.Val(r), "' is not a ratio in [0, 1]"));
    }
    ++k;
  }
  if (f.Has(flag)) {
    std::string pattern = f.Val(flag);
    if (size_t slash = pattern.find('/'); slash != std::string::npos) {
      const std::vector<std::string> parts = absl::StrSplit(pattern.substr(slash + 1), '/');
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i] != parts[0]) {
          return FlagError(flag, absl::StrCat("MTP pattern ", i + 1, " '", parts[i].substr(0, 32), "' differs from the first '",
                                              parts[0].substr(0, 32),
                                              "' (hybrid_layer_allocation.py parse_hybrid_pattern: all depths identical)"));
        }
      }
      for (size_t i = 0; i < parts[0].size(); ++i) {
        if (!IsHybridLayerSymbol(parts[0][i])) {
          return FlagError(flag, absl::StrCat("'", std::string(1, parts[0][i]), "' at position ", i,
                                              " of the MTP pattern is not a layer the model describes (M Mamba-2, * "
                                              "attention, - MLP, E MoE)"));
        }
      }
      if (parts[0].size() > 64) return FlagError(flag, "an MTP pattern of more than 64 layers");
      if (!parts[0].empty()) {
        *mtp = parts[0];
        *mtp_depths = static_cast<int64_t>(parts.size());
      }
      pattern = pattern.substr(0, slash);
    } else if (f.Has("mtp-hybrid-override-pattern")) {
      absl::StatusOr<int64_t> depths = f.Int("mtp-num-layers", 0, 16);
      if (!depths.ok()) return depths.status();
      if (*depths > 0) {
        *mtp = f.Val("mtp-hybrid-override-pattern");
        *mtp_depths = *depths;
        for (size_t i = 0; i < mtp->size(); ++i) {
          if (!IsHybridLayerSymbol((*mtp)[i])) {
            return FlagError("mtp-hybrid-override-pattern",
                             absl::StrCat("'", std::string(1, (*mtp)[i]), "' at position ", i,
                                          " is not a layer the model describes (M Mamba-2, * attention, - MLP, E MoE)"));
          }
        }
        if (mtp->empty() || mtp->size() > 64) return FlagError("mtp-hybrid-override-pattern", "must name 1 to 64 layers");
      }
    }
    for (char c : pattern) *segments += c == '|' ? 1 : 0;
    pattern.erase(std::remove(pattern.begin(), pattern.end(), '|'), pattern.end());
    for (size_t i = 0; i < pattern.size(); ++i) {
      const char c = pattern[i];
      if (!IsHybridLayerSymbol(c)) {
        return FlagError(flag, absl::StrCat("'", std::string(1, c), "' at position ", i,
                                            " is not a layer the model describes (M Mamba-2, * attention, - MLP, E MoE)"));
      }
    }
    if (pattern.empty() || static_cast<int64_t>(pattern.size()) > kMaxCount) {
      return FlagError(flag, "must name at least one layer");
    }
    // The ratio flags (older Megatron-LM, mamba_hybrid_layer_allocation.py allocate_layers) beside
    // a pattern: accepted when the pattern has the layers they allocate ("The number of each type
    // of layer in the override pattern must match the number in the overridden pattern").
    if (ratio[0] > 0 || ratio[1] > 0) {
      const std::string allocated = HybridPatternFromRatios(static_cast<int64_t>(pattern.size()), ratio[0], ratio[1]);
      for (char kind : {'*', '-'}) {
        const auto have = std::count(pattern.begin(), pattern.end(), kind);
        const auto want = std::count(allocated.begin(), allocated.end(), kind);
        if (have != want) {
          return FlagError(kind == '*' ? "hybrid-attention-ratio" : "hybrid-mlp-ratio",
                           absl::StrCat("allocates ", want, kind == '*' ? " attention" : " MLP", " layers of ",
                                        pattern.size(), "; --", flag, " has ", have,
                                        " (mamba_hybrid_layer_allocation.py: the counts must match)"));
        }
      }
    }
    return pattern;
  }
  const std::string base = Basename(program);
  const bool ratios = f.Has("hybrid-attention-ratio") || f.Has("hybrid-mlp-ratio");
  if (!ratios && !f.On("is-hybrid-model") && base != "pretrain_mamba.py" && base != "pretrain_hybrid.py") return std::string();
  absl::StatusOr<int64_t> layers = f.Int("num-layers", -1, kMaxCount);
  if (!layers.ok()) return layers.status();
  if (ratio[0] + ratio[1] > 1) return FlagError("hybrid-mlp-ratio", "the two ratios add up to more than 1");
  return HybridPatternFromRatios(*layers, ratio[0], ratio[1]);
}

// Reads the integer flags in Megatron-LM's order of checks, with the defaults of
// megatron/training/arguments.py (required: num_layers, hidden_size, num_attention_heads,
// max_position_embeddings, seq_length; ffn_hidden_size 4h, or int((4h * 2 / 3) / 64) * 64 with
// --swiglu; MLA: q_lora_rank None, kv_lora_rank 32, qk_head_dim 128, qk_pos_emb_head_dim 64,
// v_head_dim 128), and refuses a 0 where Megatron takes only >= 1.
absl::Status ReadMegatronNumbers(const MegatronFlags& f, MegatronNumbers& n, int64_t layers_default = -1) {
  using N = MegatronNumbers;
  if (absl::Status s = ReadMegatronInts(
          f,
          {{"num-layers", layers_default, &N::layers},
           {"hidden-size", -1, &N::hidden},
           {"num-attention-heads", -1, &N::heads},
           {"seq-length", -1, &N::seq},
           {"micro-batch-size", 1, &N::mbs},
           {"global-batch-size", 0, &N::gbs},  // 0: micro-batch x DP (arguments.py), resolved by Finalize
           {"tensor-model-parallel-size", 1, &N::tp},
           {"pipeline-model-parallel-size", 1, &N::pp},
           {"context-parallel-size", 1, &N::cp},
           {"expert-model-parallel-size", 1, &N::ep},
           {"expert-tensor-parallel-size", 0, &N::etp},
           {"kv-channels", 0, &N::kv_channels},
           {"num-experts", 0, &N::experts},
           {"moe-router-topk", 2, &N::topk},
           {"train-iters", 0, &N::train_iters, kMaxCount},
           {"train-samples", 0, &N::train_samples, kMaxCount},
           {"make-vocab-size-divisible-by", 128, &N::divisible},
           {"padded-vocab-size", 0, &N::padded_vocab}},
          n);
      !s.ok()) {
    return s;
  }
  n.swiglu = f.On("swiglu");
  n.quick_geglu = f.On("quick-geglu");
  n.squared_relu = f.On("squared-relu");
  if (int(n.swiglu) + int(n.quick_geglu) + int(n.squared_relu) > 1) {
    return FlagError(n.swiglu ? "swiglu" : "quick-geglu",
                     "only one of --swiglu, --quick-geglu, --squared-relu (arguments.py asserts not swiglu)");
  }
  // arguments.py: ffn_hidden_size defaults to 4h, or int((4h * 2 / 3) / 64) * 64 with --swiglu.
  const bool swiglu = n.swiglu;
  const int64_t hidden = n.hidden;
  int64_t ffn_default = 4 * hidden;
  if (swiglu) ffn_default = static_cast<int64_t>((4.0 * hidden * 2 / 3) / 64) * 64;
  if (absl::Status s = ReadMegatronInts(f, {{"ffn-hidden-size", ffn_default, &N::ffn}}, n); !s.ok()) return s;
  if (absl::Status s = ReadMegatronInts(
          f,
          {{"moe-ffn-hidden-size", n.ffn, &N::moe_ffn},
           {"moe-shared-expert-intermediate-size", 0, &N::shared_ffn},
           {"num-query-groups", n.heads, &N::query_groups},
           // Required by arguments.py validate_args (required_args: num_layers, hidden_size,
           // num_attention_heads, max_position_embeddings).
           {"max-position-embeddings", -1, &N::max_pos},
           {"num-layers-per-virtual-pipeline-stage", 0, &N::layers_per_vstage},
           {"num-virtual-stages-per-pipeline-rank", 0, &N::vstages_per_rank},
           {"recompute-num-layers", 0, &N::recompute_layers},
           // MLA (arguments.py _add_mla_args defaults: q_lora_rank None, kv_lora_rank 32,
           // qk_head_dim 128, qk_pos_emb_head_dim 64, v_head_dim 128).
           {"q-lora-rank", 0, &N::q_lora},
           {"kv-lora-rank", 32, &N::kv_lora},
           {"qk-head-dim", 128, &N::qk_head_dim},
           {"qk-pos-emb-head-dim", 64, &N::qk_pos_dim},
           {"v-head-dim", 128, &N::v_head_dim}},
          n);
      !s.ok()) {
    return s;
  }
  // Sizes and degrees that Megatron takes only >= 1 when given (issue 26 N8: 0 was replaced by
  // the default in silence). arguments.py validate_args asserts micro_batch_size > 0 and
  // global_batch_size > 0; parallel_state.initialize_model_parallel divides by the degrees;
  // TransformerConfig raises for num_moe_experts <= 0; a virtual stage of 0 layers divides by 0.
  for (const char* flag : {"num-layers", "hidden-size", "num-attention-heads", "seq-length", "micro-batch-size",
                           "global-batch-size", "tensor-model-parallel-size", "pipeline-model-parallel-size",
                           "context-parallel-size", "expert-model-parallel-size", "expert-tensor-parallel-size",
                           "kv-channels", "num-experts", "moe-router-topk", "ffn-hidden-size", "moe-ffn-hidden-size",
                           "num-query-groups", "max-position-embeddings", "num-layers-per-virtual-pipeline-stage",
                           "num-virtual-stages-per-pipeline-rank", "make-vocab-size-divisible-by", "q-lora-rank",
                           "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim", "padded-vocab-size",
                           "vocab-size"}) {
    if (!f.Has(flag)) continue;
    auto v = f.Int(flag, 0);
    if (!v.ok()) return v.status();
    if (*v == 0) return FlagError(flag, "0 is not accepted (it must be >= 1)");
  }
  return absl::OkStatus();
}

// The vocabulary (embedding rows): --padded-vocab-size, --vocab-size, else the tokenizer's,
// padded to --make-vocab-size-divisible-by x TP as Megatron's _vocab_size_with_padding does
// (megatron/training/tokenizer/tokenizer.py). `program`: the script the launchers start.
absl::StatusOr<int64_t> MegatronVocab(const MegatronFlags& f, const MegatronNumbers& n, const std::string& program) {
  if (n.padded_vocab > 0) return n.padded_vocab;
  int64_t vocab = 0;
  // No --tokenizer-type: pretrain_gpt.py's args_defaults {'tokenizer_type': 'GPT2BPETokenizer'}
  // (the GPT-2 BPE of --vocab-file/--merge-file); another script has no such default unless it
  // passes the GPT-2 files.
  std::string tok_type = f.Val("tokenizer-type");
  if (tok_type.empty() && (Basename(program) == "pretrain_gpt.py" || f.others.count("merge-file"))) {
    tok_type = "GPT2BPETokenizer";
  }
  const std::string tok_model = f.Val("tokenizer-model");
  if (f.Has("vocab-size")) {
    auto v = f.Int("vocab-size", -1);
    if (!v.ok()) return v.status();
    vocab = *v;
    if (vocab <= 0) return FlagError("vocab-size", "must be > 0");
  } else {
    const std::string model_lower = absl::AsciiStrToLower(tok_model);
    // GPT2BPETokenizer: len(encoder) of GPT-2's gpt2-vocab.json, 50,257 entries
    // (megatron/training/tokenizer/tokenizer.py _GPT2BPETokenizer.vocab_size; the gpt2
    // config.json's vocab_size).
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
  const int64_t multiple = n.divisible * std::max<int64_t>(n.tp, 1);
  if (multiple > 0) vocab = (vocab + multiple - 1) / multiple * multiple;
  return vocab;
}

// --position-embedding-type, arguments.py's default learned_absolute when not given.
std::string MegatronPositionEmbedding(const MegatronFlags& f) {
  return f.Has("position-embedding-type") ? f.Val("position-embedding-type") : "learned_absolute";
}

// --moe-layer-freq: an integer k (every k-th layer MoE) or a list pattern, 1 for an MoE layer and
// 0 for a dense one, of --num-layers entries (arguments.py moe_freq_type). The shape models "N
// leading dense layers, then every k-th layer MoE"; any other pattern is an error.
absl::Status SetMoeLayerFreq(const std::string& f, int64_t layers, v1::MoeShape& moe) {
  int64_t freq = 0;
  if (f.find('[') == std::string::npos) {
    if (!absl::SimpleAtoi(f, &freq) || freq <= 0 || freq > layers) {
      return FlagError("moe-layer-freq", absl::StrCat("'", f, "' is not an integer in 1..num-layers"));
    }
    moe.set_layer_freq(freq);
    return absl::OkStatus();
  }
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
      moe.set_first_dense_layers(first);
      moe.set_layer_freq(fq);
      matched = true;
    }
  }
  if (!matched) {
    return FlagError("moe-layer-freq", absl::StrCat("'", f, "' is not modelled: only N leading dense layers "
                                                    "followed by every k-th layer MoE"));
  }
  return absl::OkStatus();
}

// The model shape from the model flags: layers, sizes, attention (GQA --group-query-attention,
// MLA --multi-latent-attention), FFN activation, embeddings, norm, MoE. Reads arguments.py
// core_transformer_config_from_args.
absl::Status SetMegatronModel(const MegatronFlags& f, const MegatronNumbers& n, int64_t vocab, const std::string& hybrid,
                              v1::ModelShape& m) {
  m.set_name(absl::StrCat("megatron-", n.layers, "L-", n.hidden, "h"));
  if (!hybrid.empty()) {
    // A hybrid Mamba-2 model (pretrain_mamba.py / pretrain_hybrid.py): its pattern and the mixer's
    // dimensions (TransformerConfig mamba_state_dim 128, mamba_head_dim 64, mamba_num_groups 8,
    // mamba_num_heads None; 0 leaves ModelShape's same defaults).
    m.set_hybrid_layer_pattern(hybrid);
    v1::MambaShape& mb = *m.mutable_mamba();
    for (auto [flag, setter] : std::initializer_list<std::pair<const char*, void (v1::MambaShape::*)(int64_t)>>{
             {"mamba-state-dim", &v1::MambaShape::set_state_dim},
             {"mamba-head-dim", &v1::MambaShape::set_head_dim},
             {"mamba-num-groups", &v1::MambaShape::set_num_groups},
             {"mamba-num-heads", &v1::MambaShape::set_num_heads}}) {
      absl::StatusOr<int64_t> v = f.Int(flag, 0, kMaxSize);
      if (!v.ok()) return v.status();
      if (f.Has(flag) && *v < 1) return FlagError(flag, "must be at least 1");
      (mb.*setter)(*v);
    }
  } else {
    for (const char* flag : {"mamba-state-dim", "mamba-head-dim", "mamba-num-groups", "mamba-num-heads"}) {
      if (f.Has(flag)) return FlagError(flag, "is given without a hybrid layer pattern (--hybrid-layer-pattern)");
    }
  }
  m.set_source("Megatron-LM arguments");
  m.set_layers(n.layers);
  m.set_hidden_size(n.hidden);
  m.set_attention_heads(n.heads);
  if (f.On("group-query-attention")) m.set_kv_heads(n.query_groups);
  m.set_head_dim(n.kv_channels);
  m.set_ffn_hidden_size(n.ffn);
  // arguments.py core_transformer_config_from_args: --swiglu (SiLU GLU), --quick-geglu (gated
  // quick-GELU, gpt-oss), --squared-relu; else GELU.
  m.set_ffn_type(n.swiglu ? v1::FFN_TYPE_SWIGLU
                 : n.quick_geglu ? v1::FFN_TYPE_GEGLU
                 : n.squared_relu ? v1::FFN_TYPE_SQUARED_RELU
                                  : v1::FFN_TYPE_GELU);
  m.set_vocab_size(vocab);
  m.set_tied_embeddings(!f.On("untie-embeddings-and-output-weights"));
  m.set_linear_bias(!f.On("disable-bias-linear"));
  m.set_learned_position_embeddings(MegatronPositionEmbedding(f) == "learned_absolute" ? n.max_pos : 0);
  m.set_norm_type(f.Val("normalization") == "RMSNorm" ? v1::NORM_TYPE_RMSNORM : v1::NORM_TYPE_LAYERNORM);
  if (f.On("multi-latent-attention")) {
    v1::MlaShape& mla = *m.mutable_mla();
    mla.set_q_lora_rank(n.q_lora);
    mla.set_kv_lora_rank(n.kv_lora);
    mla.set_qk_nope_head_dim(n.qk_head_dim);
    mla.set_qk_rope_head_dim(n.qk_pos_dim);
    mla.set_v_head_dim(n.v_head_dim);
    if (n.kv_lora <= 0) return FlagError("kv-lora-rank", "must be > 0 with --multi-latent-attention");
  }
  if (n.experts > 0) {
    v1::MoeShape& moe = *m.mutable_moe();
    moe.set_routed_experts(n.experts);
    moe.set_top_k(n.topk);
    moe.set_expert_ffn_hidden_size(n.moe_ffn);
    if (n.shared_ffn > 0) {
      moe.set_shared_experts(1);
      moe.set_shared_expert_ffn_hidden_size(n.shared_ffn);
    }
    if (f.Has("moe-layer-freq")) {
      if (absl::Status s = SetMoeLayerFreq(f.Val("moe-layer-freq"), n.layers, moe); !s.ok()) return s;
    }
    // --moe-router-num-groups / --moe-router-group-topk (TransformerConfig moe_router_num_groups /
    // moe_router_group_topk): group-limited routing, the experts in num_groups groups and each token
    // routed within group_topk of them, as transformer_config.py __post_init__ checks them (group-topk
    // needs num-groups, the experts divide into the groups, group-topk at most num-groups). The
    // node-limited all-to-all and the group-limited router's launches read them (docs/MODEL.md).
    if (f.Has("moe-router-num-groups") || f.Has("moe-router-group-topk")) {
      absl::StatusOr<int64_t> groups = f.Int("moe-router-num-groups", 0, 1 << 20);
      if (!groups.ok()) return groups.status();
      absl::StatusOr<int64_t> group_topk = f.Int("moe-router-group-topk", 0, 1 << 20);
      if (!group_topk.ok()) return group_topk.status();
      if (*group_topk > 0 && *groups < 1) {
        return FlagError("moe-router-group-topk", "needs --moe-router-num-groups (transformer_config.py: \"When using group "
                                                  "limited routing, moe_router_num_groups must be specified.\")");
      }
      if (*groups > 0 && n.experts % *groups != 0) {
        return FlagError("moe-router-num-groups", absl::StrCat(*groups, " must divide --num-experts ", n.experts));
      }
      if (*group_topk > *groups) {
        return FlagError("moe-router-group-topk", absl::StrCat(*group_topk, " exceeds --moe-router-num-groups ", *groups));
      }
      moe.set_routed_groups(*groups);
      moe.set_max_routed_groups(*group_topk);
    }
    // --moe-latent-size (arguments.py: "MoE latent projection dimension has to be greater than
    // zero"): the routed experts' width (Megatron-Core moe_layer.py).
    if (f.Has("moe-latent-size")) {
      absl::StatusOr<int64_t> lat = f.Int("moe-latent-size", 0, 1 << 20);
      if (!lat.ok()) return lat.status();
      if (*lat < 1) return FlagError("moe-latent-size", "must be greater than zero (arguments.py validate_args)");
      moe.set_latent_size(*lat);
    }
  }
  return absl::OkStatus();
}

// Precision from --bf16 / --fp16 (else fp32), --fp8-format, --fp8-recipe, --grad-reduce-in-bf16 and
// --fp8-param-gather (arguments.py validate_args and its mixed-precision arguments).
absl::Status SetMegatronPrecision(const MegatronFlags& f, v1::TrainingSpec& t, std::vector<std::string>& ignored) {
  auto* prec = t.mutable_precision();
  // megatron/training/arguments.py validate_args: "if args.fp16: assert not args.bf16".
  if (f.On("bf16") && f.On("fp16")) {
    return FlagError("fp16", "and --bf16 are both given; Megatron refuses both (arguments.py validate_args)");
  }
  if (f.On("bf16")) prec->set_params(v1::D_TYPE_BF16), prec->set_gemm(v1::D_TYPE_BF16);
  else if (f.On("fp16")) prec->set_params(v1::D_TYPE_FP16), prec->set_gemm(v1::D_TYPE_FP16);
  else prec->set_params(v1::D_TYPE_FP32), prec->set_gemm(v1::D_TYPE_FP32), prec->set_grads(v1::D_TYPE_FP32);
  if (f.Has("fp8-format")) prec->set_gemm(v1::D_TYPE_FP8);
  // --fp8-recipe (TransformerConfig.fp8_recipe; without --fp8-format Megatron trains no fp8 and
  // ignores it). Unset: the megatron-core preset's default (delayed).
  if (f.Has("fp8-recipe") && f.Has("fp8-format")) {
    // blockwise and custom have no measured GEMM rate here: the job keeps the preset's default
    // recipe (docs/LAUNCHERS.md).
    const std::string recipe(f.Val("fp8-recipe"));
    Fp8Recipe parsed;
    if (Fp8RecipeFromName(recipe, &parsed) && parsed == Fp8Recipe::kRowwise) {
      // torchao's recipe, not one of TransformerConfig.fp8_recipe's choices.
      return FlagError("fp8-recipe", "'rowwise' is not a Megatron-LM recipe (tensorwise, delayed, mxfp8, blockwise, custom)");
    }
    if (Fp8RecipeFromName(recipe, &parsed)) {
      prec->set_fp8_recipe(recipe);
    } else {
      ignored.push_back(absl::StrCat("--fp8-recipe ", recipe, " (not modelled: costed with the framework's default recipe)"));
    }
  }
  // --grad-reduce-in-bf16: the DP gradient reduction in bf16 (arguments.py mixed precision).
  // With --bf16 it also turns accumulate_allreduce_grads_in_fp32 off (arguments.py
  // validate_args), so the DDP gradient buffer is in the parameter dtype
  // (megatron/core/distributed/distributed_data_parallel.py: grad_dtype = torch.float if
  // grad_reduce_in_fp32 else param.dtype): bf16 gradients, half the fp32 buffer.
  if (f.On("grad-reduce-in-bf16")) {
    prec->set_grad_reduce(v1::D_TYPE_BF16);
    if (f.On("bf16")) prec->set_grads(v1::D_TYPE_BF16);
  }
  // --fp16: accumulate_allreduce_grads_in_fp32 stays False unless given (validate_args sets it
  // True only under --bf16), so the gradient buffer and its reduction are fp16; with
  // --accumulate-allreduce-grads-in-fp32 both are fp32 (distributed_data_parallel.py).
  if (f.On("fp16") && !f.On("grad-reduce-in-bf16")) {
    const v1::DType d = f.On("accumulate-allreduce-grads-in-fp32") ? v1::D_TYPE_FP32 : v1::D_TYPE_FP16;
    prec->set_grad_reduce(d);
    prec->set_grads(d);
  }
  // --fp8-param-gather: weights kept and all-gathered in fp8 (TransformerConfig.fp8_param).
  if (f.On("fp8-param-gather")) {
    if (!f.Has("fp8-format")) return FlagError("fp8-param-gather", "needs --fp8-format");
    t.set_fp8_param_gather(true);
  }
  return absl::OkStatus();
}

// Activation recomputation from --recompute-granularity (or the older --recompute-activations /
// --checkpoint-activations), --recompute-method, --recompute-num-layers and --recompute-modules
// (arguments.py). Modules given without selective recompute are listed in `ignored`.
absl::Status SetMegatronRecompute(const MegatronFlags& f, const MegatronNumbers& n, v1::TrainingSpec& t,
                                  std::vector<std::string>& ignored) {
  const std::string gran = f.Val("recompute-granularity");
  if (gran == "full" || f.On("checkpoint-activations")) t.set_recompute(v1::RECOMPUTE_FULL);
  else if (gran == "selective" || f.On("recompute-activations")) t.set_recompute(v1::RECOMPUTE_SELECTIVE);
  else if (!gran.empty()) return FlagError("recompute-granularity", absl::StrCat("'", gran, "' is not full or selective"));
  else t.set_recompute(v1::RECOMPUTE_NONE);
  // TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py @000c4ac):
  // full granularity needs --recompute-method (block or uniform) and --recompute-num-layers;
  // selective takes neither. Block recomputes the first recompute-num-layers layers of each
  // stage (transformer_block.py: layer_idx < recompute_num_layers; 0 recomputes none), uniform
  // every layer in chunks of that many. (--checkpoint-activations is the 2021-22 spelling, with
  // Megatron-LM's own defaults then: every layer.)
  const std::string method = f.Val("recompute-method");
  if (!method.empty() && method != "uniform" && method != "block") {
    return FlagError("recompute-method", absl::StrCat("'", method, "' is not uniform or block"));
  }
  const bool has_num_layers = f.Has("recompute-num-layers");
  if (gran == "full") {
    if (method.empty()) {
      return FlagError("recompute-method", "required with --recompute-granularity full: block or uniform "
                                           "(transformer_config.py raises 'recompute_method must be \"block\" or \"uniform\"')");
    }
    if (!has_num_layers) {
      return FlagError("recompute-num-layers", "required with --recompute-granularity full (transformer_config.py: "
                                               "'recompute_num_layers must be between 1 and num_layers_per_pipeline_rank')");
    }
  } else if (t.recompute() == v1::RECOMPUTE_SELECTIVE && has_num_layers) {
    return FlagError("recompute-num-layers", "must not be given with selective recompute (transformer_config.py: "
                                             "'recompute_num_layers must be None')");
  } else if (t.recompute() == v1::RECOMPUTE_NONE && (!method.empty() || has_num_layers)) {
    ignored.push_back(absl::StrCat(method.empty() ? "" : absl::StrCat("--recompute-method ", method),
                                   !method.empty() && has_num_layers ? " " : "",
                                   has_num_layers ? absl::StrCat("--recompute-num-layers ", n.recompute_layers) : "",
                                   " (without --recompute-granularity: no effect)"));
  }
  if (t.recompute() == v1::RECOMPUTE_FULL && method == "block") {
    if (n.recompute_layers == 0) {
      t.set_recompute(v1::RECOMPUTE_NONE);  // block of 0 layers: nothing recomputed
    } else {
      t.set_recompute_num_layers(n.recompute_layers);
    }
  }
  auto modules = f.lists.find("recompute-modules");
  if (modules == f.lists.end()) return absl::OkStatus();
  static const std::set<std::string> kModules = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                                 "mlp", "moe", "shared_experts"};
  for (const std::string& raw : modules->second) {
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
    ignored.push_back(absl::StrCat("--recompute-modules ", absl::StrJoin(t.recompute_modules(), " "),
                                   " (without --recompute-granularity selective: no effect)"));
    t.clear_recompute_modules();
  }
  return absl::OkStatus();
}

// Optimizer sharding (--use-distributed-optimizer, --use-torch-fsdp2, --use-megatron-fsdp with
// --data-parallel-sharding-strategy) and the overlaps (--overlap-grad-reduce, --tp-comm-overlap)
// as arguments.py defines them.
absl::Status SetMegatronSharding(const MegatronFlags& f, v1::TrainingSpec& t) {
  const std::string strategy = f.Val("data-parallel-sharding-strategy");
  if (f.On("use-torch-fsdp2")) {
    t.set_sharding(v1::SHARDING_ZERO3);
  } else if (f.On("use-megatron-fsdp")) {
    // Megatron-FSDP --data-parallel-sharding-strategy (arguments.py choices no_shard, optim,
    // optim_grads, optim_grads_params). Not given: optim_grads_params, the strategy that
    // Megatron-FSDP is used for (docs/FRAMEWORKS.md), so that the flag alone still reads as FSDP.
    if (strategy == "optim") t.set_sharding(v1::SHARDING_ZERO1);
    else if (strategy == "optim_grads") t.set_sharding(v1::SHARDING_ZERO2);
    else if (strategy == "optim_grads_params" || strategy.empty()) t.set_sharding(v1::SHARDING_ZERO3);
    else if (strategy == "no_shard") t.set_sharding(v1::SHARDING_NONE);
    else return FlagError("data-parallel-sharding-strategy", absl::StrCat("'", strategy, "' is not modelled"));
  } else if (f.On("use-distributed-optimizer")) {
    t.set_sharding(v1::SHARDING_ZERO1);
  } else {
    t.set_sharding(v1::SHARDING_NONE);
  }
  t.set_overlap_dp_comm(f.On("overlap-grad-reduce"));
  t.set_overlap_tp_comm(f.On("tp-comm-overlap"));
  return absl::OkStatus();
}

// The attention backend (--attention-backend), CUDA graphs (--cuda-graph-impl,
// --enable-cuda-graph, --external-cuda-graph), dropout (--hidden-dropout, --attention-dropout,
// Megatron's defaults 0.1) and the run length (--train-iters, --train-samples).
absl::Status SetMegatronKernelsAndLength(const MegatronFlags& f, const MegatronNumbers& n, v1::TrainingSpec& t) {
  const std::string backend = f.Val("attention-backend");
  // Transformer Engine's flash and fused (cuDNN) attention take bf16/fp16 QKV only
  // (transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend,
  // "Filter: Data type"): naming either in an fp32 run (neither --bf16 nor --fp16) leaves TE no
  // backend. Under "auto" an fp32 run is left unstated: the job reader's default gives fp32 GEMMs
  // the unfused path and says why (proto/codec.cc).
  const bool fp32_activations = !f.On("bf16") && !f.On("fp16");
  if (fp32_activations && (backend == "flash" || backend == "fused")) {
    return FlagError("attention-backend", absl::StrCat("'", backend, "' needs --bf16 or --fp16 (Transformer Engine's ",
                                                       backend, " attention takes bf16/fp16 only)"));
  }
  if (backend == "unfused" || backend == "local") {
    t.set_flash_attention(false);
  } else if (!fp32_activations) {
    t.set_flash_attention(true);
  }
  const std::string graphs = f.Val("cuda-graph-impl");
  if (!graphs.empty() && graphs != "none" && graphs != "local" && graphs != "transformer_engine") {
    return FlagError("cuda-graph-impl", absl::StrCat("'", graphs, "' is not none, local or transformer_engine"));
  }
  if ((!graphs.empty() && graphs != "none") || f.On("enable-cuda-graph") || f.On("external-cuda-graph")) {
    t.set_cuda_graphs(true);
    // --cuda-graph-scope (nargs='+', default []: the whole layer; "full" the same, deprecated):
    // the parts captured, the others' launches stay on the host. arguments.py: "full_iteration
    // scope is only supported with --cuda-graph-impl=local, other scopes are only supported with
    // --cuda-graph-impl=transformer_engine" (--enable-cuda-graph is local, --external-cuda-graph
    // transformer_engine).
    const bool te = graphs == "transformer_engine" || (graphs.empty() && f.On("external-cuda-graph"));
    if (auto scopes = f.lists.find("cuda-graph-scope"); scopes != f.lists.end()) {
      for (const std::string& scope : scopes->second) {
        if (scope == "full" || scope == "full_iteration") continue;
        if (!te) {
          return FlagError("cuda-graph-scope", absl::StrCat("'", scope, "' needs --cuda-graph-impl transformer_engine "
                                                             "(arguments.py: other scopes than full_iteration are only "
                                                             "supported with transformer_engine)"));
        }
        t.add_cuda_graph_scope(scope);
      }
    }
  }
  // The MoE token dispatcher (TransformerConfig moe_token_dispatcher_type "allgather" (default) /
  // "alltoall" / "flex"; flex runs moe_flex_dispatcher_backend, "deepep" by default, or the older
  // --moe-enable-deepep): allgather is not modelled (left to the framework's default, listed).
  const MegatronMoeDispatcher d =
      ReadMegatronMoeDispatcher(f.Val("moe-token-dispatcher-type"), f.Val("moe-flex-dispatcher-backend"));
  if (!d.bad.empty()) {
    return FlagError(d.bad == "type" ? "moe-token-dispatcher-type" : "moe-flex-dispatcher-backend", d.why);
  }
  if (!d.dispatcher.empty()) t.set_moe_dispatcher(d.dispatcher);
  // Transformer Engine's fused router (arguments.py --moe-router-fusion, store_true).
  if (f.On("moe-router-fusion")) t.set_moe_router_fusion(true);
  // MoE capacity (arguments.py: --moe-expert-capacity-factor, --moe-pad-expert-input-to-capacity
  // "requires --moe-expert-capacity-factor"): the padded rows the experts compute.
  if (f.Has("moe-expert-capacity-factor")) {
    double cap = 0;
    if (!absl::SimpleAtod(f.Val("moe-expert-capacity-factor"), &cap) || !std::isfinite(cap)) {
      return FlagError("moe-expert-capacity-factor", absl::StrCat("'", f.Val("moe-expert-capacity-factor"), "' is not a number"));
    }
    // transformer_config.py: a negative factor is None (dropless, no padding).
    if (cap > 0) t.set_moe_expert_capacity_factor(cap);
  }
  if (f.On("moe-pad-expert-input-to-capacity")) {
    if (!f.Has("moe-expert-capacity-factor") || t.moe_expert_capacity_factor() <= 0) {
      return FlagError("moe-pad-expert-input-to-capacity", "needs --moe-expert-capacity-factor (arguments.py validate_args)");
    }
    t.set_moe_pad_expert_input_to_capacity(true);
  }
  double hd = 0.1, ad = 0.1;  // Megatron's default dropouts
  if (f.Has("hidden-dropout") && (!absl::SimpleAtod(f.Val("hidden-dropout"), &hd) || !(hd >= 0 && hd <= 1))) {
    return FlagError("hidden-dropout", "not a probability");
  }
  if (f.Has("attention-dropout") && (!absl::SimpleAtod(f.Val("attention-dropout"), &ad) || !(ad >= 0 && ad <= 1))) {
    return FlagError("attention-dropout", "not a probability");
  }
  t.set_dropout(hd > 0 || ad > 0);
  t.set_train_iters(n.train_iters);
  if (n.train_samples > 0) t.set_dataset_tokens(static_cast<double>(n.train_samples) * static_cast<double>(n.seq));
  return absl::OkStatus();
}

// The virtual pipeline size and the uneven split: --pipeline-model-parallel-layout,
// --num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank, with
// --decoder-first/last-pipeline-num-layers and --account-for-embedding/loss-in-pipeline-split, as
// Megatron-LM asserts them before it trains (arguments.py validate_args and
// TransformerConfig.__post_init__, NVIDIA/Megatron-LM commit 000c4ac2; layouts as
// pipeline_parallel_layer_layout.py reads them). A launch it refuses is an error naming the flag.
absl::Status SetMegatronPipeline(const MegatronFlags& f, const MegatronNumbers& n, v1::ParallelismSpec& p) {
  MegatronUnevenPipeline uneven;
  {
    auto first = f.OtherInt("decoder-first-pipeline-num-layers");
    if (!first.ok()) return first.status();
    auto last = f.OtherInt("decoder-last-pipeline-num-layers");
    if (!last.ok()) return last.status();
    uneven.first = *first;
    uneven.last = *last;
    uneven.account_embedding = f.Given("account-for-embedding-in-pipeline-split");
    uneven.account_loss = f.Given("account-for-loss-in-pipeline-split");
    uneven.layout = f.Given("pipeline-model-parallel-layout");
  }
  if (int(n.layers_per_vstage > 0) + int(n.vstages_per_rank > 0) + int(uneven.layout) > 1) {
    return FlagError(n.layers_per_vstage > 0 ? "num-layers-per-virtual-pipeline-stage" : "num-virtual-stages-per-pipeline-rank",
                     "no more than one of --num-layers-per-virtual-pipeline-stage, "
                     "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout (arguments.py asserts)");
  }
  int64_t vpp = 1;
  if (uneven.layout) {
    // The layout fixes the stages: PP x VPP of them, holding exactly --num-layers decoder
    // layers (arguments.py validate_args; TransformerConfig validate_layer_layout).
    const std::string layout = absl::StrJoin(f.others.at("pipeline-model-parallel-layout"), " ");
    auto counts = PipelineLayoutCounts(layout);
    if (!counts.ok()) return FlagError("pipeline-model-parallel-layout", absl::StrCat("'", layout, "': ", counts.status().message()));
    if (counts->first % n.pp != 0) {
      return FlagError("pipeline-model-parallel-layout",
                       absl::StrCat("'", layout, "' has ", counts->first, " stages, not a multiple of "
                                    "--pipeline-model-parallel-size ", n.pp, " (arguments.py asserts it)"));
    }
    if (counts->second != n.layers) {
      return FlagError("pipeline-model-parallel-layout",
                       absl::StrCat("'", layout, "' places ", counts->second, " decoder layers ('t'), not --num-layers ",
                                    n.layers, " (pipeline_parallel_layer_layout.py validate_layer_layout)"));
    }
    vpp = counts->first / n.pp;
  } else if (n.layers_per_vstage > 0) {
    if (uneven.first > 0 || uneven.last > 0) {
      return FlagError("num-layers-per-virtual-pipeline-stage",
                       "with --decoder-first/last-pipeline-num-layers Megatron asks for "
                       "--num-virtual-stages-per-pipeline-rank instead (arguments.py validate_args)");
    }
    const int64_t counted = n.layers + (uneven.account_embedding ? 1 : 0) + (uneven.account_loss ? 1 : 0);
    if (counted % n.pp != 0 || (counted / n.pp) % n.layers_per_vstage != 0) {
      return FlagError("num-layers-per-virtual-pipeline-stage",
                       absl::StrCat(n.layers_per_vstage, " must divide num-layers / pipeline size (", counted, " / ",
                                    n.pp, "); arguments.py validate_args asserts it"));
    }
    vpp = (counted / n.pp) / n.layers_per_vstage;
  } else if (n.vstages_per_rank > 0) {
    vpp = n.vstages_per_rank;
  }
  if (vpp > 1 || n.layers_per_vstage > 0 || n.vstages_per_rank > 0) p.set_vpp(vpp);
  if (!n.hybrid_segments) {
    if (absl::Status st = CheckMegatronPipelineSplit(n.layers, n.pp, vpp, uneven); !st.ok()) return st;
  }
  if (vpp > 1) {
    // arguments.py: the interleaved schedule needs PP > 1, and PP > 2 when p2p overlap is off.
    const bool p2p_overlap = !f.Given("no-overlap-p2p-communication");
    if (n.pp <= (p2p_overlap ? 1 : 2)) {
      return FlagError(n.layers_per_vstage > 0 ? "num-layers-per-virtual-pipeline-stage" : "num-virtual-stages-per-pipeline-rank",
                       absl::StrCat("virtual pipeline stages need --pipeline-model-parallel-size > ", p2p_overlap ? 1 : 2,
                                    " (arguments.py validate_args: the interleaved schedule)"));
    }
  }
  return absl::OkStatus();
}

// The uneven split as the job's first / last stage layers (ParallelismSpec.first_stage_layers,
// without virtual stages, as the job allows them): --decoder-first/last-pipeline-num-layers
// as given; --account-for-embedding/loss-in-pipeline-split (without them) count the embedding /
// the loss as one layer of the first / last stage, which then holds (layers + accounted) / PP - 1
// decoder layers (megatron/core/transformer/transformer_block.py get_num_layers_to_build, at the
// pinned commit). What is read leaves the ignored list; with virtual stages it stays listed.
absl::Status SetMegatronUnevenStages(const MegatronFlags& f, const MegatronNumbers& n, v1::ParallelismSpec& p,
                                     std::vector<std::string>& ignored) {
  if (n.pp <= 1 || p.vpp() > 1 || f.Given("pipeline-model-parallel-layout")) return absl::OkStatus();
  auto first = f.OtherInt("decoder-first-pipeline-num-layers");
  if (!first.ok()) return first.status();
  auto last = f.OtherInt("decoder-last-pipeline-num-layers");
  if (!last.ok()) return last.status();
  const bool emb = f.Given("account-for-embedding-in-pipeline-split");
  const bool loss = f.Given("account-for-loss-in-pipeline-split");
  const int64_t per_stage = (n.layers + (emb ? 1 : 0) + (loss ? 1 : 0)) / n.pp;
  int64_t first_layers = *first, last_layers = *last;
  if (first_layers == 0 && emb) first_layers = per_stage - 1;
  if (last_layers == 0 && loss) last_layers = per_stage - 1;
  if (first_layers > 0) p.set_first_stage_layers(first_layers);
  if (last_layers > 0) p.set_last_stage_layers(last_layers);
  for (const char* read : {"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                           "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}) {
    ignored.erase(std::remove_if(ignored.begin(), ignored.end(),
                                 [&](const std::string& e) { return e == read || absl::StartsWith(e, absl::StrCat(read, " ")); }),
                  ignored.end());
  }
  return absl::OkStatus();
}

// What Megatron-LM asserts of the shape, the sequence and the run length before it trains
// (TransformerConfig.__post_init__: heads and query groups split over TP; arguments.py
// validate_args: head size, CP, positions, iteration- or sample-based, recompute method).
absl::Status CheckMegatronShapeAsserts(const MegatronFlags& f, const MegatronNumbers& n) {
  // TransformerConfig.__post_init__: attention heads and query groups are split over TP.
  if (n.heads % n.tp != 0) {
    return FlagError("tensor-model-parallel-size",
                     absl::StrCat(n.tp, " does not divide --num-attention-heads ", n.heads,
                                  " (transformer_config.py: num_attention_heads must be a multiple of "
                                  "tensor_model_parallel_size)"));
  }
  if (f.On("group-query-attention") && n.query_groups % n.tp != 0) {
    return FlagError("tensor-model-parallel-size",
                     absl::StrCat(n.tp, " does not divide --num-query-groups ", n.query_groups,
                                  " (transformer_config.py: num_query_groups must be a multiple of "
                                  "tensor_model_parallel_size)"));
  }
  if (n.kv_channels == 0 && n.hidden % n.heads != 0) {
    return FlagError("num-attention-heads", absl::StrCat(n.heads, " does not divide --hidden-size ", n.hidden,
                                                         " (arguments.py asserts it when --kv-channels is not given)"));
  }
  if (n.cp > 1 && n.seq % (2 * n.cp) != 0) {
    return FlagError("seq-length", absl::StrCat(n.seq, " must be a multiple of 2 x --context-parallel-size = ", 2 * n.cp,
                                                " (arguments.py validate_args)"));
  }
  if (n.max_pos < n.seq) {
    return FlagError("max-position-embeddings", absl::StrCat(n.max_pos, " is below --seq-length ", n.seq,
                                                             " (arguments.py validate_args asserts >=)"));
  }
  if (n.train_iters > 0 && n.train_samples > 0) {
    return FlagError("train-samples", "and --train-iters are both given (arguments.py: iteration- or sample-based)");
  }
  if (f.Val("recompute-granularity") == "selective" && !f.Val("recompute-method").empty()) {
    return FlagError("recompute-method", "is not supported with selective recompute (arguments.py validate_args)");
  }
  return absl::OkStatus();
}

// What Megatron-LM asserts of the overlaps, the sharding, the checkpoint format, expert
// parallelism, MTP and CUDA graphs before it trains (arguments.py validate_args).
absl::Status CheckMegatronRuntimeAsserts(const MegatronFlags& f, const MegatronNumbers& n) {
  // Sequence parallelism is switched off at TP 1 (arguments.py), and TP communication overlap
  // needs it: 'Tensor parallel communication/GEMM overlap can happen only when sequence
  // parallelism is enabled'.
  if (f.On("tp-comm-overlap")) {
    if (n.tp == 1) {
      return FlagError("tp-comm-overlap", "needs --tensor-model-parallel-size > 1: Megatron turns sequence parallelism "
                                          "off at TP 1 and then asserts it for TP overlap (arguments.py validate_args)");
    }
    if (!f.On("sequence-parallel")) {
      return FlagError("tp-comm-overlap", "needs --sequence-parallel (arguments.py validate_args asserts it)");
    }
  }
  // MoELayer.forward (megatron/core/transformer/moe/moe_layer.py @000c4ac): "During training,
  // performance may degrade if MoE and tensor parallelism are enabled without also enabling
  // sequence parallelism" is a ValueError, so such a launch never trains.
  if (n.experts > 0 && n.tp > 1 && !f.On("sequence-parallel")) {
    return FlagError("sequence-parallel", "required with --num-experts at --tensor-model-parallel-size > 1 "
                                          "(moe_layer.py raises ValueError in training without it)");
  }
  const bool dist_opt = f.On("use-distributed-optimizer");
  const bool mfsdp = f.On("use-megatron-fsdp");
  const bool fsdp2 = f.On("use-torch-fsdp2");
  if (f.Given("overlap-param-gather")) {
    if (!dist_opt && !mfsdp) {
      return FlagError("overlap-param-gather", "needs --use-distributed-optimizer or --use-megatron-fsdp "
                                               "(arguments.py validate_args)");
    }
    if (!f.On("overlap-grad-reduce")) {
      return FlagError("overlap-param-gather", "needs --overlap-grad-reduce (arguments.py validate_args)");
    }
  }
  auto ckpt_it = f.others.find("ckpt-format");
  const std::string ckpt = ckpt_it != f.others.end() && !ckpt_it->second.empty() ? ckpt_it->second[0] : "torch_dist";
  if (fsdp2) {
    const char* why = nullptr;
    if (n.pp > 1) why = "is not supported with pipeline parallelism";
    else if (n.ep > 1) why = "is not supported with expert parallelism";
    else if (dist_opt) why = "is not supported with --use-distributed-optimizer";
    else if (!f.On("untie-embeddings-and-output-weights")) why = "needs --untie-embeddings-and-output-weights";
    else if (f.On("fp16")) why = "is not supported with --fp16";
    else if (ckpt != "torch_dist" && ckpt != "torch_dcp") why = "needs --ckpt-format torch_dist or torch_dcp";
    if (why) return FlagError("use-torch-fsdp2", absl::StrCat(why, " (arguments.py validate_args)"));
  }
  if (mfsdp && ckpt != "fsdp_dtensor") {
    return FlagError("use-megatron-fsdp", "needs --ckpt-format fsdp_dtensor (arguments.py validate_args: 'Megatron FSDP "
                                          "only supports fsdp_dtensor checkpoint format')");
  }
  if (f.On("fp8-param-gather") && !dist_opt && !fsdp2 && !mfsdp) {
    return FlagError("fp8-param-gather", "needs --use-distributed-optimizer, --use-torch-fsdp2 or --use-megatron-fsdp "
                                         "(arguments.py validate_args)");
  }
  if (n.ep > 1) {
    if (n.experts == 0) return FlagError("expert-model-parallel-size", "needs --num-experts (arguments.py validate_args)");
    if (n.experts % n.ep != 0) {
      return FlagError("expert-model-parallel-size", absl::StrCat(n.ep, " does not divide --num-experts ", n.experts,
                                                                  " (arguments.py validate_args)"));
    }
    if (f.On("fp16")) {
      return FlagError("expert-model-parallel-size", "is not supported with --fp16 (arguments.py validate_args)");
    }
  }
  if (f.Given("moe-grouped-gemm") && !f.On("bf16")) {
    return FlagError("moe-grouped-gemm", "needs --bf16 (arguments.py validate_args: 'GroupedGEMM for MoE only supports "
                                         "bf16')");
  }
  const std::string pos = MegatronPositionEmbedding(f);
  if (f.Given("mtp-num-layers") && pos != "rope" && pos != "none") {
    return FlagError("mtp-num-layers", "needs --position-embedding-type rope or none (arguments.py validate_args)");
  }
  const std::string graphs = f.Val("cuda-graph-impl");
  if ((f.On("enable-cuda-graph") || f.On("external-cuda-graph")) && !graphs.empty() && graphs != "none") {
    return FlagError("cuda-graph-impl", "with --enable-cuda-graph or --external-cuda-graph (arguments.py asserts)");
  }
  return absl::OkStatus();
}

}  // namespace

// The MTP modules (megatron/training/arguments.py validate_args; Megatron-Core
// multi_token_prediction.py): a hybrid's from its pattern (MegatronHybridPattern: `mtp_pattern`,
// `mtp_depths`), --mtp-num-layers giving way to the pattern's depth count as Megatron-LM does (with
// a warning there, a note here); a transformer's --mtp-num-layers blocks of its last layer's type.
// --mtp-use-repeated-layer: the depths share one module's weights. A hybrid with --mtp-num-layers
// and no MTP pattern is refused (Megatron-LM warns and has no module to build).
absl::Status SetMegatronMtp(const MegatronFlags& f, const std::string& hybrid, const std::string& mtp_pattern,
                            int64_t mtp_depths, ImportedJob& out) {
  v1::ModelShape& ms = *out.spec.mutable_model()->mutable_shape();
  absl::StatusOr<int64_t> given = f.Int("mtp-num-layers", 0, 16);
  if (!given.ok()) return given.status();
  int64_t depths = *given;
  if (!hybrid.empty()) {
    if (mtp_depths > 0 && f.Has("mtp-num-layers") && *given != mtp_depths) {
      out.ignored.push_back(absl::StrCat("--mtp-num-layers ", *given, " (the hybrid pattern has ", mtp_depths,
                                         " MTP depths, which Megatron-LM uses)"));
    }
    if (mtp_depths == 0 && depths > 0) {
      return FlagError("mtp-num-layers", "a hybrid model needs its MTP module's layers: give them after '/' in "
                                         "--hybrid-layer-pattern (e.g. 'M*M*/*E/*E')");
    }
    depths = mtp_depths;
    if (depths > 0) ms.set_hybrid_mtp_pattern(mtp_pattern);
    if (f.Has("mtp-hybrid-override-pattern") &&
        (f.Val("hybrid-layer-pattern") + f.Val("hybrid-override-pattern")).find('/') != std::string::npos) {
      // arguments.py converts the legacy flag only when the pattern has no '/'.
      out.ignored.push_back(absl::StrCat("--mtp-hybrid-override-pattern ", f.Val("mtp-hybrid-override-pattern"),
                                         " (the hybrid pattern's '/' parts are the MTP module)"));
    }
  } else if (f.Has("mtp-hybrid-override-pattern")) {
    out.ignored.push_back(absl::StrCat("--mtp-hybrid-override-pattern ", f.Val("mtp-hybrid-override-pattern"),
                                       " (for hybrid models only: arguments.py ignores it for GPT models)"));
  }
  if (depths > 0) {
    ms.set_mtp_layers(depths);
    ms.set_mtp_repeated_layer(f.On("mtp-use-repeated-layer"));
  } else if (f.On("mtp-use-repeated-layer")) {
    out.ignored.push_back("--mtp-use-repeated-layer (no MTP layers)");
  }
  return absl::OkStatus();
}

absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv) {
  // Skip the launchers (python, torchrun, srun and their options): start after the program.
  const LauncherPrefix launch = ParseLauncherPrefix(argv, /*shell_scripts=*/false);
  ImportedJob out;
  out.source = "megatron";
  out.launcher_gpus = launch.gpus;
  out.launcher_gpus_from = launch.gpus_from;
  if (absl::Status s = CheckMegatronProgram(launch.program); !s.ok()) return s;
  MegatronFlags f;
  if (absl::Status s = SortMegatronFlags(argv, launch.args_index, f, out); !s.ok()) return s;
  int64_t segments = 1, mtp_depths = 0;
  std::string mtp_pattern;
  absl::StatusOr<std::string> hybrid = MegatronHybridPattern(f, launch.program, &segments, &mtp_pattern, &mtp_depths);
  if (!hybrid.ok()) return hybrid.status();
  MegatronNumbers n;
  if (absl::Status s = ReadMegatronNumbers(f, n, hybrid->empty() ? -1 : static_cast<int64_t>(hybrid->size())); !s.ok()) {
    return s;
  }
  if (!hybrid->empty() && n.layers != static_cast<int64_t>(hybrid->size())) {
    // arguments.py: the pattern's count wins over --num-layers (a warning there).
    out.ignored.push_back(absl::StrCat("--num-layers ", n.layers, " (the hybrid layer pattern has ", hybrid->size(),
                                       " layers, which Megatron-LM uses)"));
    n.layers = static_cast<int64_t>(hybrid->size());
  }
  absl::StatusOr<int64_t> vocab = MegatronVocab(f, n, launch.program);
  if (!vocab.ok()) return vocab.status();
  if (absl::Status s = SetMegatronModel(f, n, *vocab, *hybrid, *out.spec.mutable_model()->mutable_shape()); !s.ok()) {
    return s;
  }
  if (!hybrid->empty() && (*hybrid + mtp_pattern).find('M') == std::string::npos && out.spec.model().shape().has_mamba()) {
    // No Mamba layer: the mixer's flags build nothing.
    for (const char* flag : {"mamba-state-dim", "mamba-head-dim", "mamba-num-groups", "mamba-num-heads"}) {
      if (f.Has(flag)) out.ignored.push_back(absl::StrCat("--", flag, " ", f.Val(flag), " (the hybrid layer pattern has no Mamba 'M' layer)"));
    }
    out.spec.mutable_model()->mutable_shape()->clear_mamba();
  }
  if (absl::Status s = SetMegatronMtp(f, *hybrid, mtp_pattern, mtp_depths, out); !s.ok()) return s;
  if (f.lists.count("cuda-graph-scope") > 0 && !out.spec.training().cuda_graphs()) {
    out.ignored.push_back(absl::StrCat("--cuda-graph-scope ", absl::StrJoin(f.lists.at("cuda-graph-scope"), " "),
                                       " (no CUDA graphs without --cuda-graph-impl)"));
  }
  if (absl::AsciiStrToLower(f.Val("moe-token-dispatcher-type")) == "allgather") {
    out.ignored.push_back("--moe-token-dispatcher-type allgather (not modelled: costed as the framework's dispatcher)");
  }
  if (f.Has("moe-latent-size") && n.experts == 0) {
    // Without experts the latent projections build nothing (moe_layer.py is not used).
    out.ignored.push_back(absl::StrCat("--moe-latent-size ", f.Val("moe-latent-size"), " (no --num-experts)"));
  }
  if (!hybrid->empty() && out.spec.model().shape().has_moe()) {
    // A hybrid's MoE blocks are its pattern's E layers (hybrid_layer_specs.py): without one the
    // MoE flags build nothing, and --moe-layer-freq places nothing.
    v1::ModelShape& ms = *out.spec.mutable_model()->mutable_shape();
    if ((*hybrid + mtp_pattern).find('E') == std::string::npos) {
      out.ignored.push_back(absl::StrCat("--num-experts ", n.experts, " (the hybrid layer pattern has no MoE 'E' layer)"));
      ms.clear_moe();
    } else if (ms.moe().layer_freq() > 1 || ms.moe().first_dense_layers() > 0) {
      out.ignored.push_back(absl::StrCat("--moe-layer-freq ", f.Val("moe-layer-freq"),
                                         " (a hybrid's MoE layers are its pattern's 'E' layers)"));
      ms.mutable_moe()->clear_layer_freq();
      ms.mutable_moe()->clear_first_dense_layers();
    }
  }

  v1::TrainingSpec& t = *out.spec.mutable_training();
  t.set_seq_length(n.seq);
  t.set_global_batch_size(n.gbs);
  t.set_micro_batch_size(n.mbs);
  if (absl::Status s = SetMegatronPrecision(f, t, out.ignored); !s.ok()) return s;
  if (absl::Status s = SetMegatronRecompute(f, n, t, out.ignored); !s.ok()) return s;
  if (absl::Status s = SetMegatronSharding(f, t); !s.ok()) return s;
  if (absl::Status s = SetMegatronKernelsAndLength(f, n, t); !s.ok()) return s;

  v1::ParallelismSpec& p = *out.spec.mutable_parallelism();
  p.set_tp(n.tp);
  p.set_pp(n.pp);
  p.set_cp(n.cp);
  p.set_ep(n.ep);
  if (n.etp > 0) p.set_etp(n.etp);
  // What Megatron-LM asserts before it trains: a launch it refuses is an error naming the flag,
  // never a prediction.
  if (!hybrid->empty()) {
    // arguments.py validate_args with --hybrid-layer-pattern: the pattern's '|' segments are the
    // pipeline (and virtual) stages; the layout flags are refused beside it.
    for (const char* flag : {"num-layers-per-virtual-pipeline-stage", "num-virtual-stages-per-pipeline-rank",
                             "pipeline-model-parallel-layout"}) {
      if (f.Has(flag)) return FlagError(flag, "should not be used with a hybrid layer pattern (its '|' segments are the stages)");
    }
    if (segments > 1) {
      if (segments % n.pp != 0) {
        return FlagError("pipeline-model-parallel-size", absl::StrCat(n.pp, " does not divide the hybrid pattern's ",
                                                                      segments, " '|' segments (arguments.py asserts)"));
      }
      if (segments > n.pp) n.vstages_per_rank = segments / n.pp;
      n.hybrid_segments = true;
      out.ignored.push_back(absl::StrCat("the hybrid pattern's ", segments,
                                         " '|' segments (stages are costed as an even split of the layers)"));
    }
  }
  if (absl::Status s = SetMegatronPipeline(f, n, p); !s.ok()) return s;
  if (absl::Status s = SetMegatronUnevenStages(f, n, p, out.ignored); !s.ok()) return s;
  if (absl::Status s = CheckMegatronShapeAsserts(f, n); !s.ok()) return s;
  if (absl::Status s = CheckMegatronRuntimeAsserts(f, n); !s.ok()) return s;
  p.set_sequence_parallel(f.On("sequence-parallel"));
  return out;
}

}  // namespace stepcast
