#include "proto/published_runs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/flops.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/job_defaults.h"

namespace stepcast {
namespace {

std::string Str(const PublishedRow& r, const std::string& col) {
  auto it = r.find(col);
  return it == r.end() ? "" : it->second;
}
std::string Lower(const PublishedRow& r, const std::string& col) { return absl::AsciiStrToLower(Str(r, col)); }

// A number from a cell; NotFound-style false when blank or not a number.
bool Num(const PublishedRow& r, const std::string& col, double* out) {
  const std::string s = Str(r, col);
  return !s.empty() && absl::SimpleAtod(s, out) && std::isfinite(*out);
}
double NumOr(const PublishedRow& r, const std::string& col, double fallback) {
  double v = 0;
  return Num(r, col, &v) ? v : fallback;
}
absl::StatusOr<int64_t> Int(const PublishedRow& r, const std::string& col, bool required, int64_t fallback = 0) {
  double v = 0;
  if (!Num(r, col, &v)) {
    if (required) return absl::InvalidArgumentError(absl::StrCat(col, ": not given"));
    return fallback;
  }
  if (v < 0 || v != std::floor(v) || v > 1e15) {
    return absl::InvalidArgumentError(absl::StrCat(col, ": '", Str(r, col), "' is not a whole number >= 0"));
  }
  return static_cast<int64_t>(v);
}

// Architecture conventions of a model family, for what a row's dimensions leave open: the
// family's papers and reference configs, cited per entry.
struct Family {
  const char* name;
  std::vector<const char*> match;  // lowercase substrings of the model name (any)
  v1::FfnType ffn;
  v1::NormType norm;
  bool linear_bias;
  bool tied_embeddings;
  bool learned_positions;  // absolute positions of seq_length (else rotary)
  int64_t tokenizer_vocab;  // 0: none known
  const char* tokenizer;
  const char* source;
};

const std::vector<Family>& Families() {
  static const std::vector<Family> kFamilies = {
      {"nemotron-4", {"nemotron"}, v1::FFN_TYPE_SQUARED_RELU, v1::NORM_TYPE_LAYERNORM, false, false, false, 256000,
       "SentencePiece 256k (nemotron_2_256k)",
       "Nemotron-4 15B technical report (arXiv:2402.16819) Sec. 2: squared-ReLU MLP, RoPE, no bias, untied "
       "input-output embeddings, 256,000-token SentencePiece vocabulary"},
      {"grok-1", {"grok"}, v1::FFN_TYPE_GEGLU, v1::NORM_TYPE_RMSNORM, false, false, false, 131072, "Grok-1 SentencePiece",
       "xai-org/grok-1 model.py: gated GELU MoE FFN, RMSNorm, RoPE, no bias; vocab 131,072"},
      {"deepseek", {"deepseek"}, v1::FFN_TYPE_SWIGLU, v1::NORM_TYPE_RMSNORM, false, false, false, 129280,
       "DeepSeek-V3 tokenizer", "DeepSeek-V3 report (arXiv:2412.19437) Sec. 4.2 and its config.json"},
      {"mpt", {"mpt"}, v1::FFN_TYPE_GELU, v1::NORM_TYPE_LAYERNORM, false, true, true, 50368,
       "GPT-NeoX-20B BPE padded to 50,368",
       "llm-foundry configuration_mpt.py defaults (no_bias, tied embeddings) and the benchmark yamls "
       "(learned_pos_emb, vocab_size 50368)"},
      {"llama 3", {"llama 3", "llama3", "llama-3"}, v1::FFN_TYPE_SWIGLU, v1::NORM_TYPE_RMSNORM, false, false, false,
       128256, "Llama 3 tiktoken BPE", "Llama 3 herd paper (arXiv:2407.21783) Sec. 3.2.1 / Table 3: 128K vocabulary"},
      {"llama 2", {"llama 2", "llama2", "llama-2"}, v1::FFN_TYPE_SWIGLU, v1::NORM_TYPE_RMSNORM, false, false, false,
       32000, "Llama SentencePiece 32k", "Llama 2 paper (arXiv:2307.09288) Sec. 2.2: 32k-token vocabulary"},
      {"mixtral", {"mixtral", "mistral"}, v1::FFN_TYPE_SWIGLU, v1::NORM_TYPE_RMSNORM, false, false, false, 32000,
       "Mistral SentencePiece 32k", "Mixtral paper (arXiv:2401.04088) Table 1"},
      {"gpt", {"gpt", "mt-nlg"}, v1::FFN_TYPE_GELU, v1::NORM_TYPE_LAYERNORM, true, true, true, 50257, "GPT-2 BPE",
       "GPT-3 (Brown et al. 2020, arXiv:2005.14165 Sec. 2.1: the GPT-2 architecture and its 50,257-token BPE); "
       "Megatron-LM GPT defaults (learned absolute positions, biases, tied embeddings)"},
  };
  return kFamilies;
}

const Family* FamilyFor(const std::string& model) {
  const std::string m = absl::AsciiStrToLower(model);
  for (const Family& f : Families()) {
    for (const char* s : f.match) {
      if (absl::StrContains(m, s)) return &f;
    }
  }
  return nullptr;
}

// Normalised for matching named settings: lower case without spaces and punctuation.
std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

int YearInText(const std::string& text) {
  static const std::regex kYear(R"((^|[^0-9])((19|20)[0-9]{2})([^0-9]|$))");
  static const std::regex kRelease(R"((^|[^0-9.])([2-3][0-9])\.(0[1-9]|1[0-2])([^0-9]|$))");
  std::smatch m;
  if (std::regex_search(text, m, kYear)) return std::stoi(m[2].str());
  if (std::regex_search(text, m, kRelease)) return 2000 + std::stoi(m[2].str());
  return 0;
}

absl::StatusOr<std::pair<double, std::string>> MeasuredIterTime(const PublishedRow& r) {
  double v = 0;
  if (Num(r, "iter_time_s", &v) && v > 0) return std::make_pair(v, std::string("iter_time_s"));
  const double gpus = NumOr(r, "num_gpus", 0);
  double tokens = NumOr(r, "global_batch_seqs", 0) * NumOr(r, "seq_len", 0);
  if (tokens <= 0) tokens = NumOr(r, "global_batch_tokens", 0);
  if (Num(r, "tokens_per_s_per_gpu", &v) && v > 0 && gpus > 0 && tokens > 0) {
    return std::make_pair(tokens / (v * gpus), std::string("global_batch_tokens / (tokens_per_s_per_gpu x GPUs)"));
  }
  if (Num(r, "tflops_per_gpu", &v) && v > 0 && gpus > 0 && absl::StrContains(Str(r, "flops_definition"), "Eq.3")) {
    const double f = NarayananEq3Flops(NumOr(r, "global_batch_seqs", 0), NumOr(r, "seq_len", 0),
                                       NumOr(r, "n_layers", 0), NumOr(r, "d_model", 0), NumOr(r, "vocab", 0));
    return std::make_pair(f / (v * 1e12 * gpus), std::string("Megatron Eq. 3 FLOPs / (tflops_per_gpu x GPUs)"));
  }
  return absl::InvalidArgumentError("iter_time_s: no measured iteration time, tokens/s or Eq. 3 TFLOP/s in the row");
}

absl::StatusOr<PublishedRun> PublishedRunFromRow(const PublishedRow& r, const Catalog& catalog) {
  PublishedRun out;
  v1::JobSpec& spec = out.spec;
  spec.set_name(absl::StrCat("row ", Str(r, "row_id"), ": ", Str(r, "model")));

  // Framework: named in the row's framework text; its era from a version or year there, else
  // the publication year of the row's source.
  const std::string fw_text = Str(r, "framework");
  int year = YearInText(fw_text);
  if (year == 0) year = YearInText(Str(r, "source"));
  absl::StatusOr<Catalog::FrameworkMatch> fw = catalog.FrameworkForTextOrGeneric(fw_text, year);
  if (!fw.ok()) return absl::InvalidArgumentError(absl::StrCat("framework: ", fw.status().message()));
  spec.mutable_framework()->set_preset(fw->name);
  out.framework_fallback = fw->fallback;
  if (fw->fallback) out.assumed.push_back(Catalog::GenericFrameworkAssumed(fw_text));
  absl::StatusOr<v1::FrameworkSpec> fw_spec = catalog.FindFramework(fw->name);
  if (!fw_spec.ok()) return fw_spec.status();

  // Model: the row's dimensions; what they leave open from the family's conventions.
  const std::string model_name = Str(r, "model");
  const Family* family = FamilyFor(model_name);
  if (family == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("model: no architecture family known for '", model_name,
                                                   "' (gpt, llama, mpt, nemotron, grok, deepseek, mixtral)"));
  }
  const std::string notes = Lower(r, "notes") + " " + Lower(r, "framework");
  absl::StatusOr<int64_t> layers = Int(r, "n_layers", false);
  if (!layers.ok()) return layers.status();
  // A row naming DeepSeek-V3 runs its architecture (MLA, the dense first layers): the preset,
  // checked against the dimensions the row gives.
  const bool deepseek_v3 = std::string(family->name) == "deepseek" &&
                           (absl::StrContains(absl::AsciiStrToLower(model_name), "v3") ||
                            absl::StrContains(absl::AsciiStrToLower(model_name), "deepseekv3"));
  if (deepseek_v3) {
    absl::StatusOr<ModelShape> preset = catalog.FindModel("deepseek-v3");
    if (!preset.ok()) return preset.status();
    for (auto [col, want] : std::initializer_list<std::pair<const char*, int64_t>>{
             {"n_layers", preset->layers}, {"d_model", preset->hidden_size}, {"moe_routed_experts", preset->moe.routed_experts},
             {"moe_topk", preset->moe.top_k}}) {
      absl::StatusOr<int64_t> v = Int(r, col, false);
      if (!v.ok()) return v.status();
      if (*v != 0 && *v != want) {
        return absl::InvalidArgumentError(absl::StrCat(col, ": ", *v, " differs from DeepSeek-V3's ", want,
                                                       " (deepseek-v3 preset)"));
      }
    }
    spec.mutable_model()->set_preset("deepseek-v3");
    out.assumed.push_back({"model", "deepseek-v3",
                           absl::StrCat("the row names DeepSeek-V3: its architecture (MLA, 3 dense layers) from ",
                                        family->source)});
  } else {
    v1::ModelShape* s = spec.mutable_model()->mutable_shape();
    s->set_name(model_name);
    s->set_source(absl::StrCat("published run ", Str(r, "row_id"), "; conventions: ", family->source));
    for (auto [col, setter] : std::initializer_list<std::pair<const char*, void (v1::ModelShape::*)(int64_t)>>{
             {"n_layers", &v1::ModelShape::set_layers},
             {"d_model", &v1::ModelShape::set_hidden_size},
             {"n_heads", &v1::ModelShape::set_attention_heads},
             {"n_kv_heads", &v1::ModelShape::set_kv_heads},
             {"ffn_hidden", &v1::ModelShape::set_ffn_hidden_size}}) {
      absl::StatusOr<int64_t> v = Int(r, col, std::string(col) != "n_kv_heads" && std::string(col) != "ffn_hidden");
      if (!v.ok()) return v.status();
      (s->*setter)(*v);
    }
    // The FFN type a row's notes state wins over the family's.
    v1::FfnType ffn = family->ffn;
    if (absl::StrContains(notes, "squared-relu") || absl::StrContains(notes, "squared relu")) ffn = v1::FFN_TYPE_SQUARED_RELU;
    if (absl::StrContains(notes, "geglu")) ffn = v1::FFN_TYPE_GEGLU;
    if (absl::StrContains(notes, "swiglu")) ffn = v1::FFN_TYPE_SWIGLU;
    s->set_ffn_type(ffn);
    s->set_norm_type(family->norm);
    s->set_linear_bias(family->linear_bias);
    s->set_tied_embeddings(family->tied_embeddings);
    absl::StatusOr<int64_t> seq = Int(r, "seq_len", true);
    if (!seq.ok()) return seq.status();
    if (family->learned_positions) s->set_learned_position_embeddings(*seq);
    if (NumOr(r, "moe_routed_experts", 0) > 0) {
      auto* moe = s->mutable_moe();
      for (auto [col, setter] : std::initializer_list<std::pair<const char*, void (v1::MoeShape::*)(int64_t)>>{
               {"moe_routed_experts", &v1::MoeShape::set_routed_experts},
               {"moe_topk", &v1::MoeShape::set_top_k},
               {"moe_shared_experts", &v1::MoeShape::set_shared_experts},
               {"moe_expert_ffn", &v1::MoeShape::set_expert_ffn_hidden_size}}) {
        absl::StatusOr<int64_t> v = Int(r, col, false);
        if (!v.ok()) return v.status();
        (moe->*setter)(*v);
      }
      if (moe->expert_ffn_hidden_size() == 0) moe->set_expert_ffn_hidden_size(s->ffn_hidden_size());
      if (moe->top_k() == 0) return absl::InvalidArgumentError("moe_topk: not given for an MoE row");
    }
    // Vocabulary: the row's, else the family tokenizer's; padded as the framework pads it.
    absl::StatusOr<int64_t> vocab = Int(r, "vocab", false);
    if (!vocab.ok()) return vocab.status();
    int64_t v = *vocab;
    if (v == 0) {
      if (family->tokenizer_vocab == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("vocab: not given and no tokenizer is known for the ", family->name, " family"));
      }
      v = family->tokenizer_vocab;
      out.assumed.push_back({"model.shape.vocab_size", absl::StrCat(v),
                             absl::StrCat("the ", family->name, " family's tokenizer (", family->tokenizer, "): ",
                                          family->source)});
    }
    // Int(), not a cast of NumOr(): tp "1e300" is an error naming the column (the cast was UB).
    absl::StatusOr<int64_t> tp_col = Int(r, "tp", false, 1);
    if (!tp_col.ok()) return tp_col.status();
    const int64_t tp = std::max<int64_t>(1, *tp_col);
    if (fw_spec->vocab_pad_multiple() > 0) {
      const int64_t multiple = fw_spec->vocab_pad_multiple() * (fw_spec->vocab_pad_times_tp() ? tp : 1);
      const int64_t padded = (v + multiple - 1) / multiple * multiple;
      if (padded != v) {
        out.assumed.push_back({"model.shape.vocab_size", absl::StrCat(padded),
                               absl::StrCat(v, " padded to a multiple of ", multiple, " as ", fw->name,
                                            " pads the embedding table")});
      }
      v = padded;
    }
    s->set_vocab_size(v);
  }

  // Hardware.
  absl::StatusOr<std::string> hw = HardwarePresetForGpuName(Str(r, "gpu"));
  if (!hw.ok()) return absl::InvalidArgumentError(absl::StrCat("gpu: ", hw.status().message()));
  spec.mutable_hardware()->set_preset(*hw);

  // Layout.
  auto* par = spec.mutable_parallelism();
  for (auto [col, setter] : std::initializer_list<std::pair<const char*, void (v1::ParallelismSpec::*)(int64_t)>>{
           {"tp", &v1::ParallelismSpec::set_tp},
           {"pp", &v1::ParallelismSpec::set_pp},
           {"cp", &v1::ParallelismSpec::set_cp},
           {"ep", &v1::ParallelismSpec::set_ep},
           {"vpp", &v1::ParallelismSpec::set_vpp},
           {"dp", &v1::ParallelismSpec::set_dp}}) {
    absl::StatusOr<int64_t> v = Int(r, col, false);
    if (!v.ok()) return v.status();
    (par->*setter)(*v);
  }
  absl::StatusOr<int64_t> gpus = Int(r, "num_gpus", true);
  if (!gpus.ok()) return gpus.status();
  spec.mutable_cluster()->set_gpu_count(*gpus);
  if (par->dp() != 0 && par->dp() * std::max<int64_t>(1, par->tp()) * std::max<int64_t>(1, par->pp()) *
                                std::max<int64_t>(1, par->cp()) != *gpus) {
    par->set_dp(0);  // a "DP" column that counts something else: derive it from the GPUs
  }
  const std::string sp = Lower(r, "sp");
  if (absl::StartsWith(sp, "yes")) par->set_sequence_parallel(true);
  if (absl::StartsWith(sp, "no")) par->set_sequence_parallel(false);

  // Batch.
  auto* tr = spec.mutable_training();
  absl::StatusOr<int64_t> seq = Int(r, "seq_len", true);
  if (!seq.ok()) return seq.status();
  tr->set_seq_length(*seq);
  absl::StatusOr<int64_t> gbs = Int(r, "global_batch_seqs", false);
  if (!gbs.ok()) return gbs.status();
  if (*gbs > 0) {
    tr->set_global_batch_size(*gbs);
  } else {
    absl::StatusOr<int64_t> gbt = Int(r, "global_batch_tokens", true);
    if (!gbt.ok()) return absl::InvalidArgumentError("global_batch_seqs: not given, nor global_batch_tokens");
    tr->set_global_batch_tokens(*gbt);
  }
  absl::StatusOr<int64_t> mbs = Int(r, "micro_batch", false);
  if (!mbs.ok()) return mbs.status();
  if (*mbs > 0) tr->set_micro_batch_size(*mbs);

  // Precision.
  const std::string prec = Lower(r, "precision");
  if (absl::StrContains(prec, "fp8")) {
    tr->mutable_precision()->set_gemm(v1::D_TYPE_FP8);
    if (absl::StrContains(prec, "fp8_params") || absl::StrContains(prec, "fp8 params")) tr->set_fp8_param_gather(true);
  } else if (absl::StartsWith(prec, "bf16")) {
    tr->mutable_precision()->set_gemm(v1::D_TYPE_BF16);
  } else if (absl::StartsWith(prec, "fp16")) {
    tr->mutable_precision()->set_gemm(v1::D_TYPE_FP16);
  }
  // Recomputation.
  const std::string rc = Lower(r, "recompute");
  if (absl::StartsWith(rc, "full")) tr->set_recompute(v1::RECOMPUTE_FULL);
  if (absl::StartsWith(rc, "selective")) tr->set_recompute(v1::RECOMPUTE_SELECTIVE);
  if (absl::StartsWith(rc, "none")) tr->set_recompute(v1::RECOMPUTE_NONE);
  // Sharding, in the terms the sources use.
  const std::string shard = Lower(r, "optimizer_sharding");
  const bool fsdp_off = absl::StrContains(shard, "fsdp=0");
  if (!fsdp_off && (absl::StrContains(shard, "full_shard") || absl::StrContains(shard, "zero-3") ||
                    absl::StrContains(shard, "fsdp"))) {
    tr->set_sharding(absl::StrContains(shard, "shard_grad_op") ? v1::SHARDING_ZERO2 : v1::SHARDING_ZERO3);
  }
  if (absl::StrContains(shard, "shard_grad_op") || absl::StrContains(shard, "zero-2")) tr->set_sharding(v1::SHARDING_ZERO2);
  if (absl::StrContains(shard, "distributed optimizer") || absl::StrContains(shard, "zero-1") ||
      absl::StrContains(shard, "dist_optimizer=true")) {
    tr->set_sharding(v1::SHARDING_ZERO1);
  }
  if (absl::StartsWith(shard, "none")) tr->set_sharding(v1::SHARDING_NONE);
  // HSDP: the FSDP group a row names, and the data-parallel replicas over it.
  if (tr->sharding() == v1::SHARDING_ZERO3) {
    std::smatch m;
    const std::string dp_total = absl::StrCat(*gpus / std::max<int64_t>(1, par->tp() * std::max<int64_t>(1, par->pp()) *
                                                                          std::max<int64_t>(1, par->cp())));
    static const std::regex kOver(R"(over ([0-9]+) gpus)");
    static const std::regex kReplicas(R"(x ([0-9]+) data-parallel replica)");
    int64_t replicas = 0;
    // absl::SimpleAtoi, not std::stoll (which threw on a 30-digit count): an error naming the column.
    auto count = [&](const std::string& t, int64_t* v) -> absl::Status {
      if (!absl::SimpleAtoi(t, v)) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer_sharding: count '", t, "' is out of range"));
      }
      return absl::OkStatus();
    };
    if (std::regex_search(shard, m, kReplicas)) {
      if (absl::Status s = count(m[1].str(), &replicas); !s.ok()) return s;
    }
    if (replicas == 0 && std::regex_search(shard, m, kOver)) {
      int64_t group = 0;
      if (absl::Status s = count(m[1].str(), &group); !s.ok()) return s;
      if (group > 0 && *gpus % group == 0) replicas = *gpus / group;
    }
    if (replicas == 0 && absl::StrContains(shard, "within each node")) {
      absl::StatusOr<Hardware> h = catalog.FindHardware(*hw);
      if (h.ok() && h->gpus_per_node > 0 && *gpus % h->gpus_per_node == 0) replicas = *gpus / h->gpus_per_node;
    }
    if (replicas > 1) par->set_dp_replicate(replicas);
    (void)dp_total;
  }

  // Named settings of the framework stated anywhere in the row's text (flags, config values).
  const std::string text = Squash(absl::StrCat(Str(r, "precision"), " ", Str(r, "recompute"), " ",
                                               Str(r, "optimizer_sharding"), " ", fw_text, " ", Str(r, "notes")));
  for (const v1::NamedSetting& ns : fw_spec->settings()) {
    bool stated = false;
    for (const std::string& n : ns.names()) stated |= !Squash(n).empty() && absl::StrContains(text, Squash(n));
    if (!stated) continue;
    for (const v1::FrameworkDefault& v : ns.values()) {
      // A row's own explicit column wins over a setting inferred from free text.
      absl::StatusOr<bool> set = JobFieldIsSet(spec, v.field());
      if (!set.ok()) return set.status();
      if (*set) continue;
      if (absl::Status st = ApplyDefault(spec, v.field(), v.value(),
                                         absl::StrCat("stated by the row (", ns.names(0), "): ", ns.source()), nullptr);
          !st.ok()) {
        return st;
      }
    }
  }

  absl::StatusOr<std::pair<double, std::string>> measured = MeasuredIterTime(r);
  if (!measured.ok()) return measured.status();
  out.measured_iter_time_s = measured->first;
  out.measured_from = measured->second;

  // A weak-scaling series: same source, model, GPU, precision and layout except DP.
  out.experiment = absl::StrJoin({Str(r, "source_id"), model_name, *hw, Str(r, "precision"), Str(r, "tp"), Str(r, "pp"),
                                  Str(r, "cp"), Str(r, "ep"), Str(r, "vpp"), Str(r, "micro_batch"), Str(r, "seq_len"),
                                  Str(r, "recompute"), Str(r, "optimizer_sharding").substr(0, 20)},
                                 "|");
  return out;
}

}  // namespace stepcast
