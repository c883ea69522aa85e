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

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Megatron-LM's training programs that do not build a GPT model (megatron/training/ and the
// repository root at the pinned commit): their launch lines are refused, not misread as GPT.
absl::Status CheckMegatronProgram(const std::string& program, const std::vector<std::string>& argv, size_t start) {
  const std::string base = Basename(program);
  // Hybrid Mamba / attention models (pretrain_mamba.py, pretrain_hybrid.py, Nemotron-H): their
  // layer pattern (--hybrid-override-pattern / --hybrid-layer-pattern, --hybrid-attention-ratio,
  // --hybrid-mlp-ratio) mixes Mamba-2 SSM layers, whose cost the model does not describe.
  std::string hybrid_flag;
  for (size_t i = start; i < argv.size(); ++i) {
    std::string a = argv[i];
    std::replace(a.begin(), a.end(), '_', '-');
    for (const char* f : {"--hybrid-override-pattern", "--hybrid-layer-pattern", "--hybrid-attention-ratio",
                          "--hybrid-mlp-ratio", "--is-hybrid-model", "--mamba-num-heads", "--mamba-state-dim"}) {
      if (a == f || absl::StartsWith(a, absl::StrCat(f, "="))) hybrid_flag = f;
    }
  }
  if (base == "pretrain_mamba.py" || base == "pretrain_hybrid.py" || !hybrid_flag.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        hybrid_flag.empty() ? base : hybrid_flag,
        ": hybrid Mamba/attention models (pretrain_mamba.py, pretrain_hybrid.py, Nemotron-H) are not modelled: "
        "the model describes transformer (attention + MLP/MoE) layers only, not Mamba-2 SSM layers; "
        "nothing is predicted rather than a wrong answer"));
  }
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

absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv) {
  // Skip the launchers (python, torchrun, srun and their options): start after the program.
  const LauncherPrefix launch = ParseLauncherPrefix(argv, /*shell_scripts=*/false);
  const size_t start = launch.args_index;
  ImportedJob out;
  out.source = "megatron";
  out.launcher_gpus = launch.gpus;
  out.launcher_gpus_from = launch.gpus_from;
  if (absl::Status s = CheckMegatronProgram(launch.program, argv, start); !s.ok()) return s;
  std::map<std::string, std::string> vals;
  std::map<std::string, std::vector<std::string>> lists;
  std::set<std::string> switches;
  // Flags that are not modelled, with their values: some decide whether Megatron accepts the
  // launch (--decoder-first-pipeline-num-layers, --ckpt-format, --overlap-param-gather, ...).
  std::map<std::string, std::vector<std::string>> others;
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
      std::vector<std::string>& values = others[name];
      values.clear();
      if (has_inline) values.push_back(value);
      while (!has_inline && i + 1 < argv.size() && !is_flag(argv[i + 1])) {
        values.push_back(argv[i + 1]);
        absl::StrAppend(&entry, " ", argv[++i]);
      }
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
  GET(gbs, "global-batch-size", 0);  // 0: micro-batch x DP (arguments.py), resolved by Finalize
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
  // Required by arguments.py validate_args (required_args: num_layers, hidden_size,
  // num_attention_heads, max_position_embeddings).
  GET(max_pos, "max-position-embeddings", -1);
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
  // Sizes and degrees that Megatron takes only >= 1 when given (issue 26 N8: 0 was replaced by
  // the default in silence). arguments.py validate_args asserts micro_batch_size > 0 and
  // global_batch_size > 0; parallel_state.initialize_model_parallel divides by the degrees;
  // TransformerConfig raises for num_moe_experts <= 0; a virtual stage of 0 layers divides by 0.
  for (const char* f : {"num-layers", "hidden-size", "num-attention-heads", "seq-length", "micro-batch-size",
                        "global-batch-size", "tensor-model-parallel-size", "pipeline-model-parallel-size",
                        "context-parallel-size", "expert-model-parallel-size", "expert-tensor-parallel-size",
                        "kv-channels", "num-experts", "moe-router-topk", "ffn-hidden-size", "moe-ffn-hidden-size",
                        "num-query-groups", "max-position-embeddings", "num-layers-per-virtual-pipeline-stage",
                        "num-virtual-stages-per-pipeline-rank", "make-vocab-size-divisible-by", "q-lora-rank",
                        "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim", "padded-vocab-size",
                        "vocab-size"}) {
    auto it = vals.find(f);
    if (it == vals.end()) continue;
    auto v = int_of(f, 0);
    if (!v.ok()) return v.status();
    if (*v == 0) return FlagError(f, "0 is not accepted (it must be >= 1)");
  }

  // Vocabulary: --padded-vocab-size, --vocab-size, else the tokenizer's, padded to
  // --make-vocab-size-divisible-by x TP as Megatron's _vocab_size_with_padding does
  // (megatron/training/tokenizer/tokenizer.py).
  int64_t vocab = 0;
  // No --tokenizer-type: pretrain_gpt.py's args_defaults {'tokenizer_type': 'GPT2BPETokenizer'}
  // (the GPT-2 BPE of --vocab-file/--merge-file); another script has no such default unless it
  // passes the GPT-2 files.
  std::string tok_type = vals["tokenizer-type"];
  if (tok_type.empty() && (Basename(launch.program) == "pretrain_gpt.py" || others.count("merge-file"))) {
    tok_type = "GPT2BPETokenizer";
  }
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
  // ---- What Megatron-LM asserts before it trains (arguments.py validate_args and
  // TransformerConfig.__post_init__, NVIDIA/Megatron-LM commit 000c4ac2): a launch it refuses is
  // an error naming the flag, never a prediction.
  auto other_int = [&](const char* f) -> absl::StatusOr<int64_t> {
    auto it = others.find(f);
    if (it == others.end()) return int64_t{0};
    int64_t v = 0;
    if (it->second.size() != 1 || !absl::SimpleAtoi(it->second[0], &v) || v <= 0 || v > kMaxSize) {
      return FlagError(f, absl::StrCat("'", absl::StrJoin(it->second, " "), "' is not an integer >= 1"));
    }
    return v;
  };
  auto given = [&](const char* f) { return others.count(f) > 0 || switches.count(f) > 0 || vals.count(f) > 0; };
  MegatronUnevenPipeline uneven;
  {
    auto first = other_int("decoder-first-pipeline-num-layers");
    if (!first.ok()) return first.status();
    auto last = other_int("decoder-last-pipeline-num-layers");
    if (!last.ok()) return last.status();
    uneven.first = *first;
    uneven.last = *last;
    uneven.account_embedding = given("account-for-embedding-in-pipeline-split");
    uneven.account_loss = given("account-for-loss-in-pipeline-split");
    uneven.layout = given("pipeline-model-parallel-layout");
  }
  if (int(layers_per_vstage > 0) + int(vstages_per_rank > 0) + int(uneven.layout) > 1) {
    return FlagError(layers_per_vstage > 0 ? "num-layers-per-virtual-pipeline-stage" : "num-virtual-stages-per-pipeline-rank",
                     "no more than one of --num-layers-per-virtual-pipeline-stage, "
                     "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout (arguments.py asserts)");
  }
  int64_t vpp = 1;
  if (uneven.layout) {
    // The layout fixes the stages: PP x VPP of them, holding exactly --num-layers decoder
    // layers (arguments.py validate_args; TransformerConfig validate_layer_layout).
    const std::string layout = absl::StrJoin(others["pipeline-model-parallel-layout"], " ");
    auto counts = PipelineLayoutCounts(layout);
    if (!counts.ok()) return FlagError("pipeline-model-parallel-layout", absl::StrCat("'", layout, "': ", counts.status().message()));
    if (counts->first % pp != 0) {
      return FlagError("pipeline-model-parallel-layout",
                       absl::StrCat("'", layout, "' has ", counts->first, " stages, not a multiple of "
                                    "--pipeline-model-parallel-size ", pp, " (arguments.py asserts it)"));
    }
    if (counts->second != layers) {
      return FlagError("pipeline-model-parallel-layout",
                       absl::StrCat("'", layout, "' places ", counts->second, " decoder layers ('t'), not --num-layers ",
                                    layers, " (pipeline_parallel_layer_layout.py validate_layer_layout)"));
    }
    vpp = counts->first / pp;
  } else if (layers_per_vstage > 0) {
    if (uneven.first > 0 || uneven.last > 0) {
      return FlagError("num-layers-per-virtual-pipeline-stage",
                       "with --decoder-first/last-pipeline-num-layers Megatron asks for "
                       "--num-virtual-stages-per-pipeline-rank instead (arguments.py validate_args)");
    }
    const int64_t counted = layers + (uneven.account_embedding ? 1 : 0) + (uneven.account_loss ? 1 : 0);
    if (counted % pp != 0 || (counted / pp) % layers_per_vstage != 0) {
      return FlagError("num-layers-per-virtual-pipeline-stage",
                       absl::StrCat(layers_per_vstage, " must divide num-layers / pipeline size (", counted, " / ", pp,
                                    "); arguments.py validate_args asserts it"));
    }
    vpp = (counted / pp) / layers_per_vstage;
  } else if (vstages_per_rank > 0) {
    vpp = vstages_per_rank;
  }
  if (vpp > 1 || layers_per_vstage > 0 || vstages_per_rank > 0) p.set_vpp(vpp);
  if (absl::Status st = CheckMegatronPipelineSplit(layers, pp, vpp, uneven); !st.ok()) return st;
  if (vpp > 1) {
    // arguments.py: the interleaved schedule needs PP > 1, and PP > 2 when p2p overlap is off.
    const bool p2p_overlap = !given("no-overlap-p2p-communication");
    if (pp <= (p2p_overlap ? 1 : 2)) {
      return FlagError(layers_per_vstage > 0 ? "num-layers-per-virtual-pipeline-stage" : "num-virtual-stages-per-pipeline-rank",
                       absl::StrCat("virtual pipeline stages need --pipeline-model-parallel-size > ", p2p_overlap ? 1 : 2,
                                    " (arguments.py validate_args: the interleaved schedule)"));
    }
  }
  // TransformerConfig.__post_init__: attention heads and query groups are split over TP.
  if (heads % tp != 0) {
    return FlagError("tensor-model-parallel-size",
                     absl::StrCat(tp, " does not divide --num-attention-heads ", heads,
                                  " (transformer_config.py: num_attention_heads must be a multiple of "
                                  "tensor_model_parallel_size)"));
  }
  if (switches.count("group-query-attention") && query_groups % tp != 0) {
    return FlagError("tensor-model-parallel-size",
                     absl::StrCat(tp, " does not divide --num-query-groups ", query_groups,
                                  " (transformer_config.py: num_query_groups must be a multiple of "
                                  "tensor_model_parallel_size)"));
  }
  if (kv_channels == 0 && hidden % heads != 0) {
    return FlagError("num-attention-heads", absl::StrCat(heads, " does not divide --hidden-size ", hidden,
                                                         " (arguments.py asserts it when --kv-channels is not given)"));
  }
  if (cp > 1 && seq % (2 * cp) != 0) {
    return FlagError("seq-length", absl::StrCat(seq, " must be a multiple of 2 x --context-parallel-size = ", 2 * cp,
                                                " (arguments.py validate_args)"));
  }
  if (max_pos < seq) {
    return FlagError("max-position-embeddings", absl::StrCat(max_pos, " is below --seq-length ", seq,
                                                             " (arguments.py validate_args asserts >=)"));
  }
  if (train_iters > 0 && train_samples > 0) {
    return FlagError("train-samples", "and --train-iters are both given (arguments.py: iteration- or sample-based)");
  }
  if (gran == "selective" && !vals["recompute-method"].empty()) {
    return FlagError("recompute-method", "is not supported with selective recompute (arguments.py validate_args)");
  }
  // Sequence parallelism is switched off at TP 1 (arguments.py), and TP communication overlap
  // needs it: 'Tensor parallel communication/GEMM overlap can happen only when sequence
  // parallelism is enabled'.
  if (switches.count("tp-comm-overlap")) {
    if (tp == 1) {
      return FlagError("tp-comm-overlap", "needs --tensor-model-parallel-size > 1: Megatron turns sequence parallelism "
                                          "off at TP 1 and then asserts it for TP overlap (arguments.py validate_args)");
    }
    if (!switches.count("sequence-parallel")) {
      return FlagError("tp-comm-overlap", "needs --sequence-parallel (arguments.py validate_args asserts it)");
    }
  }
  const bool dist_opt = switches.count("use-distributed-optimizer") > 0;
  const bool mfsdp = switches.count("use-megatron-fsdp") > 0;
  const bool fsdp2 = switches.count("use-torch-fsdp2") > 0;
  if (given("overlap-param-gather")) {
    if (!dist_opt && !mfsdp) {
      return FlagError("overlap-param-gather", "needs --use-distributed-optimizer or --use-megatron-fsdp "
                                               "(arguments.py validate_args)");
    }
    if (!switches.count("overlap-grad-reduce")) {
      return FlagError("overlap-param-gather", "needs --overlap-grad-reduce (arguments.py validate_args)");
    }
  }
  const std::string ckpt = others.count("ckpt-format") && !others["ckpt-format"].empty() ? others["ckpt-format"][0]
                                                                                          : "torch_dist";
  if (fsdp2) {
    const char* why = nullptr;
    if (pp > 1) why = "is not supported with pipeline parallelism";
    else if (ep > 1) why = "is not supported with expert parallelism";
    else if (dist_opt) why = "is not supported with --use-distributed-optimizer";
    else if (!switches.count("untie-embeddings-and-output-weights")) why = "needs --untie-embeddings-and-output-weights";
    else if (switches.count("fp16")) why = "is not supported with --fp16";
    else if (ckpt != "torch_dist" && ckpt != "torch_dcp") why = "needs --ckpt-format torch_dist or torch_dcp";
    if (why) return FlagError("use-torch-fsdp2", absl::StrCat(why, " (arguments.py validate_args)"));
  }
  if (mfsdp && ckpt != "fsdp_dtensor") {
    return FlagError("use-megatron-fsdp", "needs --ckpt-format fsdp_dtensor (arguments.py validate_args: 'Megatron FSDP "
                                          "only supports fsdp_dtensor checkpoint format')");
  }
  if (switches.count("fp8-param-gather") && !dist_opt && !fsdp2 && !mfsdp) {
    return FlagError("fp8-param-gather", "needs --use-distributed-optimizer, --use-torch-fsdp2 or --use-megatron-fsdp "
                                         "(arguments.py validate_args)");
  }
  if (ep > 1) {
    if (experts == 0) return FlagError("expert-model-parallel-size", "needs --num-experts (arguments.py validate_args)");
    if (experts % ep != 0) {
      return FlagError("expert-model-parallel-size", absl::StrCat(ep, " does not divide --num-experts ", experts,
                                                                  " (arguments.py validate_args)"));
    }
    if (switches.count("fp16")) {
      return FlagError("expert-model-parallel-size", "is not supported with --fp16 (arguments.py validate_args)");
    }
  }
  if (given("moe-grouped-gemm") && !switches.count("bf16")) {
    return FlagError("moe-grouped-gemm", "needs --bf16 (arguments.py validate_args: 'GroupedGEMM for MoE only supports "
                                         "bf16')");
  }
  if (given("mtp-num-layers") && pos != "rope" && pos != "none") {
    return FlagError("mtp-num-layers", "needs --position-embedding-type rope or none (arguments.py validate_args)");
  }
  if ((switches.count("enable-cuda-graph") || switches.count("external-cuda-graph")) && !graphs.empty() &&
      graphs != "none") {
    return FlagError("cuda-graph-impl", "with --enable-cuda-graph or --external-cuda-graph (arguments.py asserts)");
  }
  p.set_sequence_parallel(switches.count("sequence-parallel") > 0);
  return out;
}

}  // namespace stepcast
