#include "proto/published_runs.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/flop_conventions.h"
#include "core/flops.h"
#include "core/job.h"
#include "proto/architectures.h"
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

// Normalised for matching named settings: lower case without spaces and punctuation.
std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

// Plain scans, not std::regex: libstdc++'s regex executor recurses once per character and a
// 100 KB cell overflowed the stack (reliability review 2, N4). Each is linear in the text.
int ReleaseInText(const std::string& text) {
  auto digit = [&](size_t i) { return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); };
  for (size_t i = 0; i + 5 <= text.size(); ++i) {
    if (i > 0 && (digit(i - 1) || text[i - 1] == '.')) continue;
    if (!(text[i] == '2' || text[i] == '3') || !digit(i + 1) || text[i + 2] != '.' || !digit(i + 3) || !digit(i + 4) ||
        digit(i + 5)) {
      continue;
    }
    const int month = (text[i + 3] - '0') * 10 + (text[i + 4] - '0');
    if (month >= 1 && month <= 12) return ((text[i] - '0') * 10 + (text[i + 1] - '0')) * 100 + month;
  }
  return 0;
}

int ParseRelease(const std::string& field) { return field.size() == 5 ? ReleaseInText(field) : 0; }

int YearInText(const std::string& text) {
  auto digit = [&](size_t i) { return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); };
  // A maximal run of exactly four digits starting 19 or 20.
  for (size_t i = 0; i < text.size();) {
    if (!digit(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (digit(j)) ++j;
    if (j - i == 4 && (text.compare(i, 2, "19") == 0 || text.compare(i, 2, "20") == 0)) {
      return std::stoi(text.substr(i, 4));
    }
    i = j;
  }
  // A release "YY.MM" (ReleaseInText).
  const int release = ReleaseInText(text);
  return release > 0 ? 2000 + release / 100 : 0;
}

namespace {

// The digits between the first `prefix` that is followed by one or more digits and then
// `suffix` ("over 8 gpus" with "over ", " gpus"), or "" when there is none. Linear in the text
// for the prefixes used here (no character of them is a digit).
std::string DigitsBetween(const std::string& text, const std::string& prefix, const std::string& suffix) {
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    size_t j = at + prefix.size();
    const size_t begin = j;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j > begin && text.compare(j, suffix.size(), suffix) == 0) return text.substr(begin, j - begin);
  }
  return "";
}

}  // namespace

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

absl::StatusOr<ConvertedRate> StepTimeFromStatedRate(const PublishedRow& r, const ModelShape& model,
                                                     const std::string& family, int framework_year,
                                                     double peak_flops_per_s, absl::string_view peak_dtype) {
  ConvertedRate out;
  const double gpus = NumOr(r, "num_gpus", 0);
  double rate = 0, v = 0;
  std::string rate_from;
  if (Num(r, "tflops_per_gpu", &v) && v > 0) {
    rate = v * 1e12;
    rate_from = "tflops_per_gpu";
  } else if (Num(r, "mfu_pct", &v) && v > 0 && v <= 100) {
    // MFU of the datasheet dense peak for the run's GEMM precision (the sources' peaks: A100 312,
    // H100 989 bf16 / 1979 fp8 TFLOP/s), listed as assumed.
    rate = v / 100 * peak_flops_per_s;
    rate_from = absl::StrCat("mfu_pct x the ", peak_dtype, " datasheet peak");
    out.assumed.push_back({"measured.peak_flops_per_s", absl::StrCat(peak_flops_per_s),
                           absl::StrCat("the MFU's peak: the hardware preset's dense ", peak_dtype,
                                        " datasheet peak (the row states an MFU, not the peak's value)")});
  } else {
    return absl::InvalidArgumentError("tflops_per_gpu, mfu_pct: neither given");
  }
  absl::StatusOr<FlopConventionChoice> choice = FlopConventionFromText(Str(r, "flops_definition"), framework_year);
  if (!choice.ok()) return choice.status();
  FlopCountInput in;
  in.model = model;
  in.family = family;
  absl::StatusOr<int64_t> seq = Int(r, "seq_len", true);
  if (!seq.ok()) return seq.status();
  in.seq_length = *seq;
  in.sequences = NumOr(r, "global_batch_seqs", 0);
  in.stated_flops_per_sample = choice->stated_flops_per_sample;
  absl::StatusOr<double> flops = ConventionFlopsPerStep(choice->convention, in);
  if (!flops.ok()) return flops.status();
  absl::StatusOr<double> t = StepTimeFromFlopRate(*flops, rate, gpus);
  if (!t.ok()) return t.status();
  out.step_time_s = *t;
  out.convention = choice->convention;
  out.measured_from = absl::StrCat(FlopConventionName(choice->convention), " FLOPs per step (",
                                   FlopConventionSource(choice->convention), ") / (", rate_from, " x GPUs)");
  return out;
}

namespace {

// The framework a row ran: the preset its framework column names, and its era.
struct RowFramework {
  std::string text;  // the row's framework column
  int year = 0;      // from a version or year in that text, else the source's publication year
  std::string name;  // the framework preset
  v1::FrameworkSpec spec;
};

// Reads the row's framework and source columns: Catalog::FrameworkForTextOrGeneric picks the
// preset (the generic one, recorded in out.assumed, when none is named).
absl::StatusOr<RowFramework> RowFrameworkOf(const PublishedRow& r, const Catalog& catalog, PublishedRun& out) {
  RowFramework fw;
  fw.text = Str(r, "framework");
  fw.year = YearInText(fw.text);
  if (fw.year == 0) fw.year = YearInText(Str(r, "source"));
  absl::StatusOr<Catalog::FrameworkMatch> match = catalog.FrameworkForTextOrGeneric(fw.text, fw.year);
  if (!match.ok()) return absl::InvalidArgumentError(absl::StrCat("framework: ", match.status().message()));
  out.spec.mutable_framework()->set_preset(match->name);
  out.framework_fallback = match->fallback;
  if (match->fallback) out.assumed.push_back(Catalog::GenericFrameworkAssumed(fw.text));
  absl::StatusOr<v1::FrameworkSpec> spec = catalog.FindFramework(match->name);
  if (!spec.ok()) return spec.status();
  fw.name = match->name;
  fw.spec = *std::move(spec);
  // The container release the row states is the job's framework.release (release-dependent
  // mechanisms of the preset, e.g. MoeModel.folded_from_release).
  if (const int stated = ReleaseInText(fw.text); stated != 0) {
    out.spec.mutable_framework()->set_release(absl::StrFormat("%02d.%02d", stated / 100, stated % 100));
  }
  // A container release the row states outside the preset's (framework.proto first_release /
  // last_release): predicted with this preset, and said so.
  if (!fw.spec.first_release().empty() || !fw.spec.last_release().empty()) {
    const int first = ParseRelease(fw.spec.first_release()), last = ParseRelease(fw.spec.last_release());
    if (first == 0 || last == 0 || first > last) {
      return absl::InvalidArgumentError(absl::StrCat("framework ", fw.name, ": first_release '", fw.spec.first_release(),
                                                     "' / last_release '", fw.spec.last_release(),
                                                     "': expected two releases YY.MM, the first not after the last"));
    }
    if (const int stated = ReleaseInText(fw.text); stated != 0 && (stated < first || stated > last)) {
      const std::string release = absl::StrFormat("%02d.%02d", stated / 100, stated % 100);
      out.assumed.push_back(
          {"framework.release", release,
           absl::StrCat("the run states release ", release, "; the ", fw.name, " preset was read from releases ", fw.spec.first_release(), "-",
                        fw.spec.last_release(), " (", fw.spec.version(),
                        "): its defaults, recipes and mechanisms are assumed to hold for this run")});
    }
  }
  return fw;
}

// The architecture family of the row's model (presets/architectures/, found by the model name),
// and the text that cites it.
struct RowFamily {
  const v1::Architecture* family = nullptr;
  std::string source;
};

absl::StatusOr<RowFamily> RowFamilyOf(const std::string& model_name, bool row_moe) {
  absl::StatusOr<const ArchitectureRegistry*> registry = ArchitectureRegistry::Builtin();
  if (!registry.ok()) return registry.status();
  const v1::Architecture* family = (*registry)->ForModelName(model_name, row_moe);
  if (family == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: no architecture family of the registry (presets/architectures/) names '", model_name, "'"));
  }
  if (!family->refused().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: '", model_name, "' is ", family->display_name(), ", refused: it ", family->refused()));
  }
  return RowFamily{family, absl::StrCat(family->display_name(), " (presets/architectures/", family->name(), ".yaml: ",
                                        family->sources_size() ? family->sources(0) : "", ")")};
}

// A row naming a model whose shape the family's conventions cannot fix (DeepSeek-V3's MLA and
// dense first layers, Llama 4 Maverick's alternating dense/MoE layers) runs its preset, checked
// against every dimension the row gives (n_layers, d_model, n_heads, n_kv_heads, ffn_hidden,
// vocab, moe_*).
absl::Status SetRowModelPreset(const PublishedRow& r, const Catalog& catalog, const v1::FamilyModel& named,
                               const std::string& family_source, PublishedRun& out) {
  absl::StatusOr<ModelShape> preset = catalog.FindModel(named.preset());
  if (!preset.ok()) return preset.status();
  const ModelShape p = preset->Resolved();
  for (auto [col, want] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"n_layers", p.layers},
           {"d_model", p.hidden_size},
           {"n_heads", p.attention_heads},
           {"n_kv_heads", p.kv_heads},
           {"ffn_hidden", p.ffn_hidden_size},
           {"vocab", p.vocab_size},
           {"moe_routed_experts", p.moe.routed_experts},
           {"moe_topk", p.moe.top_k},
           {"moe_shared_experts", p.moe.shared_experts},
           {"moe_expert_ffn", p.moe.expert_ffn_hidden_size}}) {
    absl::StatusOr<int64_t> v = Int(r, col, false);
    if (!v.ok()) return v.status();
    if (*v != 0 && *v != want) {
      return absl::InvalidArgumentError(absl::StrCat(col, ": ", *v, " differs from ", preset->name, "'s ", want,
                                                     " (", named.preset(), " preset)"));
    }
  }
  out.spec.mutable_model()->set_preset(named.preset());
  out.assumed.push_back({"model", named.preset(),
                         absl::StrCat("the row names ", preset->name, ": its architecture from ", preset->source,
                                      "; family ", family_source)});
  return absl::OkStatus();
}

// The MoE columns (moe_routed_experts, moe_topk, moe_shared_experts, moe_expert_ffn; the expert
// FFN defaults to the dense one).
absl::Status SetRowMoe(const PublishedRow& r, v1::ModelShape* s) {
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
  return absl::OkStatus();
}

// Vocabulary: the row's vocab column, else the family tokenizer's (presets/architectures/);
// padded as the framework pads it (its preset's vocab_pad_multiple, times TP where it says so).
absl::Status SetRowVocab(const PublishedRow& r, const v1::Architecture& family, const std::string& family_source,
                         const RowFramework& fw, v1::ModelShape* s, PublishedRun& out) {
  absl::StatusOr<int64_t> vocab = Int(r, "vocab", false);
  if (!vocab.ok()) return vocab.status();
  int64_t v = *vocab;
  if (v == 0) {
    if (family.conventions().vocab_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab: not given and no tokenizer is known for the ", family.display_name(), " family"));
    }
    v = family.conventions().vocab_size();
    out.assumed.push_back({"model.shape.vocab_size", absl::StrCat(v),
                           absl::StrCat("the ", family.display_name(), " family's tokenizer (",
                                        family.conventions().tokenizer(), "): ", family_source)});
  }
  // Int(), not a cast of NumOr(): tp "1e300" is an error naming the column (the cast was UB).
  absl::StatusOr<int64_t> tp_col = Int(r, "tp", false, 1);
  if (!tp_col.ok()) return tp_col.status();
  const int64_t tp = std::max<int64_t>(1, *tp_col);
  if (fw.spec.vocab_pad_multiple() > 0) {
    const int64_t multiple = fw.spec.vocab_pad_multiple() * (fw.spec.vocab_pad_times_tp() ? tp : 1);
    const int64_t padded = (v + multiple - 1) / multiple * multiple;
    if (padded != v) {
      out.assumed.push_back({"model.shape.vocab_size", absl::StrCat(padded),
                             absl::StrCat(v, " padded to a multiple of ", multiple, " as ", fw.name,
                                          " pads the embedding table")});
    }
    v = padded;
  }
  s->set_vocab_size(v);
  return absl::OkStatus();
}

// The model shape from the row's dimensions (n_layers, d_model, n_heads, n_kv_heads, ffn_hidden,
// seq_len, the MoE columns, vocab); what they leave open from the family's conventions, the FFN
// type a row's notes state winning over the family's.
absl::Status SetRowModelShape(const PublishedRow& r, const std::string& model_name, const RowFamily& rf,
                              const RowFramework& fw, bool row_moe, PublishedRun& out) {
  const v1::Architecture& family = *rf.family;
  v1::ModelShape* s = out.spec.mutable_model()->mutable_shape();
  s->set_name(model_name);
  s->set_source(absl::StrCat("published run ", Str(r, "row_id"), "; conventions: ", rf.source));
  ApplyConventions(family.conventions(), s);
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
  if (family.conventions().head_dim() > 0) {
    out.assumed.push_back({"model.shape.head_dim", absl::StrCat(family.conventions().head_dim()),
                           absl::StrCat("every ", family.display_name(), " model's head size: ", rf.source)});
  }
  // The FFN type a row's notes state wins over the family's.
  const std::string notes = Lower(r, "notes") + " " + Lower(r, "framework");
  if (absl::StrContains(notes, "squared-relu") || absl::StrContains(notes, "squared relu")) {
    s->set_ffn_type(v1::FFN_TYPE_SQUARED_RELU);
  }
  if (absl::StrContains(notes, "geglu")) s->set_ffn_type(v1::FFN_TYPE_GEGLU);
  if (absl::StrContains(notes, "swiglu")) s->set_ffn_type(v1::FFN_TYPE_SWIGLU);
  absl::StatusOr<int64_t> seq = Int(r, "seq_len", true);
  if (!seq.ok()) return seq.status();
  if (family.conventions().position_encoding() == v1::POSITION_ENCODING_LEARNED) {
    // A learned table of the run's sequence length (+ the family's offset rows: OPT 2).
    s->set_learned_position_embeddings(*seq + family.conventions().learned_position_offset());
  }
  if (row_moe) {
    if (absl::Status st = SetRowMoe(r, s); !st.ok()) return st;
  }
  return SetRowVocab(r, family, rf.source, fw, s, out);
}

// The layout columns (tp, pp, cp, ep, vpp, dp, num_gpus, sp; ETP as the notes or framework text
// state it "ETP=1"); returns the GPU count. A DP that does not multiply out to the GPUs is
// derived instead, and a VPP printed beside PP 1 dropped (Megatron-Core refuses it).
absl::StatusOr<int64_t> SetRowLayout(const PublishedRow& r, const std::string& fw_text, PublishedRun& out) {
  v1::JobSpec& spec = out.spec;
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
  // A virtual pipeline printed beside PP 1 was not run: Megatron-Core refuses it
  // (megatron/core/parallel_state.py initialize_model_parallel: "pipeline-model-parallel size
  // should be greater than 1 with interleaved schedule").
  if (par->vpp() > 1 && par->pp() <= 1) {
    out.assumed.push_back({"parallelism.vpp", "1",
                           absl::StrCat("vpp ", par->vpp(), " printed with pp ", std::max<int64_t>(1, par->pp()),
                                        ": Megatron-Core's initialize_model_parallel refuses a virtual pipeline "
                                        "without a pipeline, so the run had none")});
    par->set_vpp(0);
  }
  // Expert tensor parallelism the row's text states ("ETP=1 printed").
  if (par->etp() == 0) {
    const std::string text_lower = absl::AsciiStrToLower(absl::StrCat(Str(r, "notes"), " ", fw_text));
    std::string etp = DigitsBetween(text_lower, "etp=", "");
    if (etp.empty()) etp = DigitsBetween(text_lower, "etp ", "");
    if (!etp.empty()) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(etp, &v) || v < 1 || v > (int64_t{1} << 31)) {
        return absl::InvalidArgumentError(absl::StrCat("notes: ETP '", etp.substr(0, 24), "' is not a degree"));
      }
      par->set_etp(v);
    }
  }
  const std::string sp = Lower(r, "sp");
  if (absl::StartsWith(sp, "yes")) par->set_sequence_parallel(true);
  if (absl::StartsWith(sp, "no")) par->set_sequence_parallel(false);
  return *gpus;
}

// The batch columns (seq_len, global_batch_seqs or global_batch_tokens, micro_batch), and MTP off
// for a model named "w/o MTP".
absl::Status SetRowBatch(const PublishedRow& r, const std::string& model_name, v1::TrainingSpec* tr) {
  // A row whose model says it ran without multi-token prediction ("DeepSeekV3 (w/o MTP)") states
  // mtp_layers 0, whatever the framework's recipe trains.
  {
    const std::string model_lower = absl::AsciiStrToLower(model_name);
    if (absl::StrContains(model_lower, "w/o mtp") || absl::StrContains(model_lower, "without mtp") ||
        absl::StrContains(model_lower, "no mtp")) {
      tr->set_mtp_layers(0);
    }
  }
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
  return absl::OkStatus();
}

// The precision column (fp8, fp8 params, its scaling recipe, bf16, fp16) and the recompute column (full, selective,
// none, and Megatron's --recompute-modules as a row states them).
void SetRowPrecisionAndRecompute(const PublishedRow& r, v1::TrainingSpec* tr) {
  const std::string prec = Lower(r, "precision");
  if (absl::StrContains(prec, "fp8")) {
    tr->mutable_precision()->set_gemm(v1::D_TYPE_FP8);
    if (absl::StrContains(prec, "fp8_params") || absl::StrContains(prec, "fp8 params")) tr->set_fp8_param_gather(true);
    // The FP8 scaling recipe where the row names it (Transformer Engine's names and Megatron-Bridge's
    // fp8_mx / fp8_cs); else the framework's default.
    if (absl::StrContains(prec, "mxfp8") || absl::StrContains(prec, "fp8-mx") || absl::StrContains(prec, "fp8_mx")) {
      tr->mutable_precision()->set_fp8_recipe("mxfp8");
    } else if (absl::StrContains(prec, "current scaling") || absl::StrContains(prec, "tensorwise") ||
               absl::StrContains(prec, "fp8-cs") || absl::StrContains(prec, "fp8_cs")) {
      tr->mutable_precision()->set_fp8_recipe("tensorwise");
    } else if (absl::StrContains(prec, "delayed")) {
      tr->mutable_precision()->set_fp8_recipe("delayed");
    }
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
  // Megatron's --recompute-modules as a row states them ("selective (recompute_modules
  // layernorm, moe_act)"): the module names that follow the word.
  std::vector<std::string> words;
  std::string w;
  for (char c : rc + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      w += c;
    } else if (!w.empty()) {
      words.push_back(w);
      w.clear();
    }
  }
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] != "recompute_modules") continue;
    for (size_t j = i + 1; j < words.size() && RecomputeModuleBit(words[j]) != 0; ++j) {
      tr->add_recompute_modules(words[j]);
    }
    break;
  }
}

// The optimizer_sharding column in the terms the sources use (FSDP full_shard / shard_grad_op,
// ZeRO-1/2/3, the distributed optimizer), and for HSDP the data-parallel replicas over the FSDP
// group it names ("x N data-parallel replicas", "over N GPUs", "within each node").
absl::Status SetRowSharding(const PublishedRow& r, const Catalog& catalog, const std::string& hw, int64_t gpus,
                            v1::JobSpec& spec) {
  auto* tr = spec.mutable_training();
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
  // The column also names the optimizer where it is not AdamW: "Muon optimizer" (Kimi K2's
  // Megatron-Bridge runs; kimi_k2_pretrain_config's optimizer_type default "muon").
  const std::vector<std::string> words = absl::StrSplit(shard, absl::ByAnyChar(" ,;:()/"), absl::SkipEmpty());
  if (std::find(words.begin(), words.end(), "muon") != words.end()) tr->set_optimizer(v1::OPTIMIZER_MUON);
  // HSDP: the FSDP group a row names, and the data-parallel replicas over it.
  if (tr->sharding() != v1::SHARDING_ZERO3) return absl::OkStatus();
  int64_t replicas = 0;
  // absl::SimpleAtoi, not std::stoll (which threw on a 30-digit count): an error naming the column.
  auto count = [&](const std::string& t, int64_t* v) -> absl::Status {
    if (!absl::SimpleAtoi(t, v)) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer_sharding: count '", t.substr(0, 24),
                                                     t.size() > 24 ? "...' is out of range" : "' is out of range"));
    }
    return absl::OkStatus();
  };
  if (const std::string n = DigitsBetween(shard, "x ", " data-parallel replica"); !n.empty()) {
    if (absl::Status s = count(n, &replicas); !s.ok()) return s;
  }
  // The FSDP group's size: "over 128 GPUs", or a product the text works out ("FSDP over 16 nodes x
  // 8 GPUs = 128 GPUs", dgxc-benchmarking's Paxml rows: configure.sh FSDP=16 nodes, DCN mesh
  // [nodes/16, 16, 1]; until 2026-11-30 not read, so row 177's 2,048 GPUs were one FSDP group).
  std::string group_text = DigitsBetween(shard, "over ", " gpus");
  if (group_text.empty() && absl::StrContains(shard, "fsdp over")) group_text = DigitsBetween(shard, "= ", " gpus");
  if (replicas == 0 && !group_text.empty()) {
    int64_t group = 0;
    if (absl::Status s = count(group_text, &group); !s.ok()) return s;
    if (group > 0 && gpus % group == 0) replicas = gpus / group;
  }
  if (replicas == 0 && absl::StrContains(shard, "within each node")) {
    absl::StatusOr<Hardware> h = catalog.FindHardware(hw);
    if (h.ok() && h->gpus_per_node > 0 && gpus % h->gpus_per_node == 0) replicas = gpus / h->gpus_per_node;
  }
  if (replicas > 1) spec.mutable_parallelism()->set_dp_replicate(replicas);
  return absl::OkStatus();
}

// The row's text squashed (Squash), with, for each squashed character, whether the word it belongs
// to follows a negation ("no", "not", "without": "EP64, no CUDA graphs, recompute ..."). A name
// that starts a word after one of them is not stated (held-out row 1049 read "no CUDA graphs" as
// graphs on: 2026-11-30 review).
struct SquashedText {
  std::string text;
  std::vector<bool> negated;  // per character of `text`
  // Whether `name` (squashed, non-empty) occurs starting a word not preceded by a negation.
  bool StatesName(const std::string& name) const {
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
      if (!negated[at]) return true;
    }
    return false;
  }
};
SquashedText SquashWithNegations(const std::string& s) {
  SquashedText out;
  bool after_negation = false;
  size_t i = 0;
  while (i < s.size()) {
    if (!std::isalnum(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    std::string word;
    while (j < s.size() && std::isalnum(static_cast<unsigned char>(s[j]))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(s[j])));
      ++j;
    }
    out.text += word;
    // The first character of the word carries the negation; the rest of a name starting mid-word
    // is not a word start and reads as stated.
    out.negated.push_back(after_negation);
    out.negated.insert(out.negated.end(), word.size() - 1, false);
    after_negation = word == "no" || word == "not" || word == "without";
    i = j;
  }
  return out;
}

// Named settings of the framework (its preset's settings: flags, config values) stated anywhere
// in the row's text, not after "no" / "not" / "without"; a row's own explicit column wins over a
// setting inferred from free text.
absl::Status ApplyRowStatedSettings(const PublishedRow& r, const RowFramework& fw, v1::JobSpec& spec) {
  const SquashedText text = SquashWithNegations(absl::StrCat(Str(r, "precision"), " ", Str(r, "recompute"), " ",
                                                             Str(r, "optimizer_sharding"), " ", fw.text, " ",
                                                             Str(r, "notes")));
  for (const v1::NamedSetting& ns : fw.spec.settings()) {
    bool stated = false;
    for (const std::string& n : ns.names()) stated |= !Squash(n).empty() && text.StatesName(Squash(n));
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
  return absl::OkStatus();
}

// The measured step time: the row's iteration time or throughput (MeasuredIterTime), else a
// TFLOP/s or MFU figure under the FLOP convention its flops_definition names, from the row's own
// model and batch (StepTimeFromStatedRate, core/flop_conventions.h).
absl::Status SetRowMeasuredTime(const PublishedRow& r, const Catalog& catalog, const std::string& family_name,
                                int year, const std::string& hw, PublishedRun& out) {
  const v1::JobSpec& spec = out.spec;
  absl::StatusOr<std::pair<double, std::string>> measured = MeasuredIterTime(r);
  if (!measured.ok()) {
    // A TFLOP/s or MFU figure under the FLOP convention the row's flops_definition names, from
    // the row's own model and batch (core/flop_conventions.h).
    absl::StatusOr<ModelShape> model = spec.model().has_shape() ? ModelShapeFromProto(spec.model().shape(), "model.shape")
                                                                : catalog.FindModel(spec.model().preset());
    if (!model.ok()) return model.status();
    absl::StatusOr<Hardware> h = catalog.FindHardware(hw);
    if (!h.ok()) return h.status();
    const v1::TrainingSpec& tr = spec.training();
    absl::StatusOr<ConvertedRate> conv = StepTimeFromStatedRate(
        r, *model, family_name, year, h->PeakFlops(DTypeFromProto(tr.precision().gemm())), DTypeName(
            DTypeFromProto(tr.precision().gemm())));
    if (!conv.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(measured.status().message(), "; ", conv.status().message()));
    }
    measured = std::make_pair(conv->step_time_s, conv->measured_from);
    out.assumed.insert(out.assumed.end(), conv->assumed.begin(), conv->assumed.end());
  }
  out.measured_iter_time_s = measured->first;
  out.measured_from = measured->second;
  return absl::OkStatus();
}

// The row's params_b (billions of parameters) against the total count of the model as read
// (CountParameters().total, core/model_shape.h; embeddings and, for MoE, every expert included:
// the table's MoE rows state totals, DeepSeek-V3 671, Grok-1 314, Llama 4 Maverick 400,
// GPT-OSS 120). A guard against a misread architecture (a hybrid read as a transformer, an MoE
// read as dense, the wrong family's conventions), not a fit: the two may differ by
// kStatedParamsFactor either way, which the rounding of a published size ("MPT-1B" is 1.3B) and
// the embedding conventions of the sources leave room for. InvalidArgument naming params_b, both
// counts and the family read; a cell that is not a positive number is an error too.
constexpr double kStatedParamsFactor = 1.5;
absl::Status CheckRowParams(const PublishedRow& r, const Catalog& catalog, const v1::Architecture& family,
                            const v1::JobSpec& spec) {
  const std::string cell = Str(r, "params_b");
  if (cell.empty()) return absl::OkStatus();
  double stated_b = 0;
  if (!Num(r, "params_b", &stated_b) || stated_b <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("params_b: '", cell, "' is not a positive number (billions of parameters)"));
  }
  absl::StatusOr<ModelShape> model = spec.model().has_shape() ? ModelShapeFromProto(spec.model().shape(), "model.shape")
                                                              : catalog.FindModel(spec.model().preset());
  if (!model.ok()) return model.status();
  const double counted_b = CountParameters(model->Resolved()).total / 1e9;
  const double ratio = counted_b / stated_b;
  if (ratio > kStatedParamsFactor || ratio < 1 / kStatedParamsFactor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params_b: ", cell, "B stated, but the model read (family ", family.display_name(), ") counts ",
        absl::StrFormat("%.2f", counted_b), "B parameters in total (presets/architectures/", family.name(),
        ".yaml; ratio ", absl::StrFormat("%.2f", ratio), ", more than ", kStatedParamsFactor,
        "x apart): the architecture was probably misread (a hybrid, MoE or family the model name does not reveal)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PublishedRun> PublishedRunFromRow(const PublishedRow& r, const Catalog& catalog) {
  PublishedRun out;
  v1::JobSpec& spec = out.spec;
  spec.set_name(absl::StrCat("row ", Str(r, "row_id"), ": ", Str(r, "model")));
  absl::StatusOr<RowFramework> fw = RowFrameworkOf(r, catalog, out);
  if (!fw.ok()) return fw.status();

  // Model: the row's dimensions; what they leave open from its family's entry in the
  // architecture registry (presets/architectures/), found by the model name.
  const std::string model_name = Str(r, "model");
  const bool row_moe = NumOr(r, "moe_routed_experts", 0) > 0;
  absl::StatusOr<RowFamily> family = RowFamilyOf(model_name, row_moe);
  if (!family.ok()) return family.status();
  absl::StatusOr<int64_t> layers = Int(r, "n_layers", false);
  if (!layers.ok()) return layers.status();
  if (const v1::FamilyModel* named = ArchitectureRegistry::ModelOf(*family->family, model_name); named != nullptr) {
    if (absl::Status s = SetRowModelPreset(r, catalog, *named, family->source, out); !s.ok()) return s;
  } else if (family->family->hybrid()) {
    // A hybrid's layer pattern is no column of the table: only a model the family names a preset
    // for can be read.
    std::vector<std::string> presets;
    for (const v1::FamilyModel& m : family->family->models()) presets.push_back(m.preset());
    return absl::InvalidArgumentError(absl::StrCat("model: '", model_name, "' is ", family->family->display_name(),
                                                   ", whose layer pattern the row does not give, and no model preset of "
                                                   "the family is named (",
                                                   absl::StrJoin(presets, ", "), ")"));
  } else {
    if (absl::Status s = SetRowModelShape(r, model_name, *family, *fw, row_moe, out); !s.ok()) return s;
  }
  if (absl::Status s = CheckRowParams(r, catalog, *family->family, spec); !s.ok()) return s;

  // Hardware.
  absl::StatusOr<std::string> hw = HardwarePresetForGpuName(Str(r, "gpu"));
  if (!hw.ok()) return absl::InvalidArgumentError(absl::StrCat("gpu: ", hw.status().message()));
  spec.mutable_hardware()->set_preset(*hw);

  absl::StatusOr<int64_t> gpus = SetRowLayout(r, fw->text, out);
  if (!gpus.ok()) return gpus.status();
  if (absl::Status s = SetRowBatch(r, model_name, spec.mutable_training()); !s.ok()) return s;
  SetRowPrecisionAndRecompute(r, spec.mutable_training());
  if (absl::Status s = SetRowSharding(r, catalog, *hw, *gpus, spec); !s.ok()) return s;
  if (absl::Status s = ApplyRowStatedSettings(r, *fw, spec); !s.ok()) return s;
  if (absl::Status s = SetRowMeasuredTime(r, catalog, family->family->name(), fw->year, *hw, out); !s.ok()) return s;

  // A weak-scaling series: same source, model, GPU, precision and layout except DP.
  out.experiment = absl::StrJoin({Str(r, "source_id"), model_name, *hw, Str(r, "precision"), Str(r, "tp"), Str(r, "pp"),
                                  Str(r, "cp"), Str(r, "ep"), Str(r, "vpp"), Str(r, "micro_batch"), Str(r, "seq_len"),
                                  Str(r, "recompute"), Str(r, "optimizer_sharding").substr(0, 20)},
                                 "|");
  return out;
}

}  // namespace stepcast
