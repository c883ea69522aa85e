#include "core/flop_conventions.h"

#include <cctype>
#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stepcast {
namespace {

struct Info {
  FlopConvention c;
  const char* name;
  const char* source;
};
constexpr Info kInfo[] = {
    {FlopConvention::kNarayananEq3, "narayanan-eq3",
     "Narayanan et al. 2021 (SC21) Eq. 3: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)), full recompute counted"},
    {FlopConvention::kKorthikantiModel, "korthikanti-model",
     "Korthikanti et al. 2022 (arXiv:2205.05198) App. A model FLOPs: 72 B s L h^2 (1 + s/(6h) + V/(12 L h))"},
    {FlopConvention::kMegatron2024, "megatron-2024",
     "Megatron-LM megatron/training/training.py num_floating_point_operations, 2024 form: 12 B s L h^2 [(1 + g/a + "
     "s/h)(a d_h/h) + (f_e/h) k G + (f_sh/h) G + V/(2 L h)] (non-causal)"},
    {FlopConvention::kMegatron2025, "megatron-2025",
     "Megatron-LM megatron/training/training.py num_floating_point_operations -> transformer_flops @001b00c2 (causal "
     "attention, dense/MoE layer pattern, MLA, MTP); printed by Megatron-Bridge 25.11 / 26.02"},
    {FlopConvention::kNemoLlama, "nemo-llama",
     "NeMo nemo/utils/flops_formulas.py llama2/llama3/mixtral: B s L h^2 (12 + 12 g/a + 18 k f/h + 12 s/h + 6 V/(L "
     "h)), V = perf_metrics_utils.py LLM_VOCAB_SIZE_MAP of the family"},
    {FlopConvention::kNemoGpt3, "nemo-gpt3",
     "NeMo nemo/utils/flops_formulas.py gpt3: (24 B s h^2 + 4 B s^2 h)(3 L) + 6 B s h V, V = LLM_VOCAB_SIZE_MAP of "
     "the family"},
    {FlopConvention::kLlmFoundry, "llm-foundry",
     "llm-foundry scripts/train/benchmarking/collect_results.py: 6 N s + 12 L h s^2 per sequence, N every parameter"},
    {FlopConvention::kTorchtitan, "torchtitan",
     "torchtitan get_num_flop_per_token: 6 N + 12 L a d_h s per token, N without the input embedding "
     "(get_num_params(model, exclude_embedding=True))"},
    {FlopConvention::kTorchtitan2024, "torchtitan-2024",
     "torchtitan's first train.py: get_num_flop_per_token(get_num_params(model)): 6 N + 12 L a d_h s, N every "
     "parameter"},
    {FlopConvention::kPalm, "palm",
     "PaLM (arXiv:2204.02311) App. B / nanoGPT model.py estimate_mfu: 6 N + 12 L a d_h s per token, N without a "
     "learned position table"},
    {FlopConvention::kMlperfConstant, "mlperf-constant",
     "MLPerf Training NVIDIA configs MODEL_TFLOP_PER_SAMPLE (mlcommons/training_results_v5.1 config_common_405b.sh "
     "21508, config_common_8b.sh 421.59; 8192-token samples)"},
    {FlopConvention::kStatedPerSample, "stated-per-sample", "the FLOP count per sample the source states"},
};

const Info& InfoOf(FlopConvention c) {
  for (const Info& i : kInfo) {
    if (i.c == c) return i;
  }
  return kInfo[0];
}

// Lower case without spaces: formulas compare as written ("18 * L * ffn * h" = "18*l*ffn*h").
std::string Squash(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Numbers written with an exponent ("4.27E+15", "8.92e14") in the text, in order. A plain scan
// (no regular expression; linear in the text).
std::vector<double> ExponentNumbers(absl::string_view t) {
  std::vector<double> out;
  size_t i = 0;
  while (i < t.size()) {
    if (!std::isdigit(static_cast<unsigned char>(t[i])) || (i > 0 && (std::isalnum(static_cast<unsigned char>(t[i - 1])) ||
                                                                    t[i - 1] == '.'))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < t.size() && (std::isdigit(static_cast<unsigned char>(t[j])) || t[j] == '.')) ++j;
    if (j < t.size() && (t[j] == 'e' || t[j] == 'E')) {
      size_t k = j + 1;
      if (k < t.size() && (t[k] == '+' || t[k] == '-')) ++k;
      const size_t digits = k;
      while (k < t.size() && std::isdigit(static_cast<unsigned char>(t[k]))) ++k;
      double v = 0;
      if (k > digits && k - i < 32 && absl::SimpleAtod(t.substr(i, k - i), &v) && std::isfinite(v)) out.push_back(v);
      i = k;
      continue;
    }
    i = j;
  }
  return out;
}

// NeMo perf_metrics_utils.py LLM_VOCAB_SIZE_MAP, by architecture-registry family.
double NemoVocab(const std::string& family) {
  if (family == "llama") return 128256;  // "llama3"
  if (family == "llama2") return 32000;
  if (family == "mixtral") return 32000;
  if (family == "gpt") return 51200;  // "gpt3"
  if (family == "nemotron") return 256000;
  return 0;
}

// Megatron's --swiglu flag, which its FLOP count reads (3 FFN matrices if set, else 2): a gated
// unit with SiLU. GeGLU models, and GPT-OSS whose Megatron-Bridge provider runs its gated unit
// with quick_gelu (megatron/bridge/models/gpt_oss_provider.py GPTOSSProvider:
// gated_linear_unit True, `from megatron.core.fusions.fused_bias_geglu import quick_gelu`), are
// counted with 2; the 26.02 GPT-OSS 120B figures (163 TFLOP/s at 5993 tokens/s per GPU) agree
// with 2 within 0.2% and not with 3 (26% more).
bool MegatronSwiglu(const ModelShape& m, const std::string& family) {
  return m.ffn_type == FfnType::kSwiGlu && family != "gpt_oss";
}

// Megatron-LM megatron/training/training.py num_floating_point_operations -> hybrid_flops
// (@d98e8a6; Megatron-Bridge training/utils/flop_utils.py the same) for a resolved hybrid shape:
// forward FLOPs x 3 of its layers by kind, per forward over T = B s tokens,
//   attention  4 T h p (h + h g / a) + 2 B s^2 h p, p = d_h a / h (causal: the /2 cancels the FMA 2)
//   MLP        4 T h f G, G = 3/2 under --swiglu
//   Mamba      2 T h (2 d_in + 2 G_m N + H) + 7 T d_in N + 2 T d_in h, with d_in = 2 h as that code
//              hard-codes it (it ignores mamba_num_heads x head_dim; H is mamba_num_heads)
//   MoE        4 T h f_e k G + 4 T h f_sh G (f_sh the shared experts' total width); latent MoE
//              (moe_latent_size L): 4 T L f_e k G + 4 T h L (routed experts at L, the two
//              latent projections) + the shared term
//   logits     2 T h V (1 + D)
// with the MTP modules' layers (the pattern after '/', hybrid_mtp_pattern) counted once per
// depth D (get_hybrid_layer_counts) and nothing for their projections and norms. Nemotron 3
// Super at 4096 tokens: 83.72 GFLOP per token, Megatron-Bridge's printed 248.61 TFLOP/s per GPU
// at 2969.3 tokens/s per GPU (tested).
double MegatronHybridFlops(const ModelShape& m, double B, double s, bool swiglu, double mtp_depths) {
  const double T = B * s, h = m.hidden_size, a = m.attention_heads, g = m.kv_heads, dh = m.head_dim;
  const double G = swiglu ? 1.5 : 1.0, p = dh * a / h, d_in = 2 * h;
  HybridLayerCounts n = m.HybridCounts();
  const HybridLayerCounts mtp = m.HybridMtpCounts();
  const auto D = static_cast<int64_t>(mtp_depths);
  n.mamba += D * mtp.mamba, n.attention += D * mtp.attention, n.mlp += D * mtp.mlp, n.moe += D * mtp.moe;
  const double attn = 4 * T * h * p * (h + h * g / a) + 2 * B * s * s * h * p;
  const double mlp = 4 * T * h * m.ffn_hidden_size * G;
  const double mamba = 2 * T * h * (2 * d_in + 2.0 * m.mamba.num_groups * m.mamba.state_dim + m.mamba.num_heads) +
                       7 * T * d_in * m.mamba.state_dim + 2 * T * d_in * h;
  const double lat = static_cast<double>(m.moe.latent_size);
  const double routed = lat > 0 ? 4 * T * lat * m.moe.expert_ffn_hidden_size * m.moe.top_k * G + 4 * T * h * lat
                                : 4 * T * h * m.moe.expert_ffn_hidden_size * m.moe.top_k * G;
  const double moe = m.moe.enabled()
                         ? routed + 4 * T * h * m.moe.shared_experts * m.moe.shared_expert_ffn_hidden_size * G
                         : 0.0;
  const double logits = 2 * T * h * m.vocab_size * (1 + mtp_depths);
  return 3 * (n.attention * attn + n.mlp * mlp + n.mamba * mamba + n.moe * moe + logits);
}

double ParamsOf(const ModelShape& m, bool with_input_embedding, bool with_positions) {
  const ParameterCounts c = CountParameters(m);
  double n = c.total;
  const bool learned = m.Positions() == PositionEncoding::kLearned;
  const double positions = learned ? static_cast<double>(m.learned_position_embeddings) * m.hidden_size : 0.0;
  if (!with_input_embedding) n -= static_cast<double>(m.vocab_size) * m.hidden_size + positions;
  if (with_input_embedding && !with_positions) n -= positions;
  return n;
}

}  // namespace

absl::string_view FlopConventionName(FlopConvention c) { return InfoOf(c).name; }
absl::string_view FlopConventionSource(FlopConvention c) { return InfoOf(c).source; }

absl::StatusOr<FlopConventionChoice> FlopConventionFromText(absl::string_view definition, int framework_year) {
  const std::string t = Squash(definition);
  const std::string lower = absl::AsciiStrToLower(definition);
  auto pick = [](FlopConvention c, double v = 0) { return FlopConventionChoice{c, v}; };
  if (absl::StrContains(t, "eq.3") || absl::StrContains(t, "96*b*s*l*h^2")) return pick(FlopConvention::kNarayananEq3);
  if (absl::StrContains(t, "model_tflop_per_sample")) return pick(FlopConvention::kMlperfConstant);
  if (absl::StrContains(t, "persample") || absl::StrContains(lower, "per sample")) {
    std::vector<double> v = ExponentNumbers(definition);
    std::vector<double> big;
    for (double x : v) {
      if (x >= 1e9) big.push_back(x);
    }
    if (big.size() == 1) return pick(FlopConvention::kStatedPerSample, big[0]);
  }
  if (absl::StrContains(lower, "appendix a") || absl::StrContains(t, "72*b*s*l*h^2")) {
    return pick(FlopConvention::kKorthikantiModel);
  }
  if (absl::StrContains(t, "18*l*ffn*h")) return pick(FlopConvention::kNemoLlama);
  if (absl::StrContains(t, "24*l*h^2+12*l*h*s")) return pick(FlopConvention::kNemoGpt3);
  if (absl::StrContains(t, "collect_results.py") || absl::StrContains(t, "6*n*s+12*n_layers*d_model*s^2") ||
      absl::StrContains(t, "llm-foundry")) {
    return pick(FlopConvention::kLlmFoundry);
  }
  if (absl::StrContains(t, "get_num_flop_per_token") || absl::StrContains(t, "torchtitan")) {
    const bool all = absl::StrContains(lower, "every parameter") || absl::StrContains(lower, "all parameters") ||
                     absl::StrContains(t, "get_num_params(model)");
    return pick(all ? FlopConvention::kTorchtitan2024 : FlopConvention::kTorchtitan);
  }
  if (absl::StrContains(t, "nanogpt") || absl::StrContains(t, "estimate_mfu") || absl::StrContains(t, "palm") ||
      absl::StrContains(t, "6n+12")) {
    return pick(FlopConvention::kPalm);
  }
  if (absl::StrContains(t, "num_floating_point_operations") || absl::StrContains(t, "frameworkanalytic") ||
      absl::StrContains(t, "frameworkmodel-flops") || absl::StrContains(t, "frameworkmodelflops")) {
    return pick(framework_year >= 2025 ? FlopConvention::kMegatron2025 : FlopConvention::kMegatron2024);
  }
  return absl::NotFoundError(absl::StrCat("flops_definition: no FLOP convention recognised in '",
                                          definition.substr(0, 120), definition.size() > 120 ? "...'" : "'"));
}

absl::StatusOr<double> StepTimeFromFlopRate(double flops_per_step, double flops_per_s_per_gpu, double gpus) {
  for (double v : {flops_per_step, flops_per_s_per_gpu, gpus}) {
    if (!(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat("FLOPs per step ", flops_per_step, ", FLOP/s per GPU ",
                                                     flops_per_s_per_gpu, " and GPUs ", gpus,
                                                     " must all be finite and > 0"));
    }
  }
  return flops_per_step / (flops_per_s_per_gpu * gpus);
}

absl::StatusOr<double> ConventionFlopsPerStep(FlopConvention c, const FlopCountInput& in) {
  if (in.seq_length <= 0 || !(in.sequences > 0) || !std::isfinite(in.sequences)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a FLOP count needs seq_length and sequences > 0 (got ", in.seq_length, ", ", in.sequences, ")"));
  }
  ModelShape storage;
  const ModelShape& m = Resolve(in.model, storage);
  if (m.layers <= 0 || m.hidden_size <= 0 || m.attention_heads <= 0 || m.vocab_size <= 0) {
    return absl::InvalidArgumentError("a FLOP count needs layers, hidden_size, attention_heads and vocab_size > 0");
  }
  const double B = in.sequences, s = static_cast<double>(in.seq_length), L = m.layers, h = m.hidden_size,
               a = m.attention_heads, g = m.kv_heads, dh = m.head_dim, V = m.vocab_size, f = m.ffn_hidden_size;
  // The 6N + 12 L a d_h s conventions' attention term counts the layers with attention (a
  // hybrid's '*' layers; every layer of a transformer).
  const double La = static_cast<double>(m.AttentionLayerCount());
  const double k = m.moe.enabled() ? m.moe.top_k : 1;
  const double fe = m.moe.enabled() ? m.moe.expert_ffn_hidden_size : f;
  const double fsh = m.moe.enabled() ? m.moe.shared_experts * m.moe.shared_expert_ffn_hidden_size : 0;
  // MTP depths trained: the job's (in.mtp_depths), else the shape's modules.
  const double mtp_depths = static_cast<double>(in.mtp_depths >= 0 ? in.mtp_depths : m.mtp_layers);
  // A hybrid Mamba-2 model under Megatron's count: its hybrid_flops branch.
  if (m.Hybrid() && (c == FlopConvention::kMegatron2024 || c == FlopConvention::kMegatron2025)) {
    return MegatronHybridFlops(m, B, s, MegatronSwiglu(m, in.family), mtp_depths);
  }
  switch (c) {
    case FlopConvention::kNarayananEq3:
      return 96.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
    case FlopConvention::kKorthikantiModel:
      return 72.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h));
    case FlopConvention::kMegatron2024: {
      const double G = MegatronSwiglu(m, in.family) ? 1.5 : 1.0;
      if (!m.mla.enabled()) {
        return 12.0 * B * s * L * h * h *
               ((1.0 + g / a + s / h) * (a * dh / h) + (fe / h) * k * G + (fsh / h) * G + V / (2.0 * L * h));
      }
      // That version's MLA branch (q_lora_rank 0: a full query projection).
      const double qk = m.mla.qk_nope_head_dim, pe = m.mla.qk_rope_head_dim, vd = m.mla.v_head_dim;
      const double ql = m.mla.q_lora_rank, kvl = m.mla.kv_lora_rank;
      const double q = ql > 0 ? h * ql + ql * a * (qk + pe) : h * a * (qk + pe);
      const double E = m.moe.routed_experts;
      return 6.0 * B * s * L *
             (q + h * (kvl + pe) + a * kvl * (qk + vd) + a * s * (qk + pe) + a * s * vd + a * vd * h + h * E +
              2.0 * h * fe * k * G + 2.0 * h * fsh * G + V * h / L);
    }
    case FlopConvention::kMegatron2025: {
      // transformer_flops: 3 (fwd, wgrad, dgrad) x 2 (FMA) per GEMM weight and token.
      const double ffn_mats = MegatronSwiglu(m, in.family) ? 3.0 : 2.0;
      const double mtp = mtp_depths;
      double n_moe = m.MoeLayerCount(), n_dense = m.DenseLayerCount();
      const bool last_moe = m.IsMoeLayer(m.layers - 1);
      // MTP modules are blocks of the last layer's type (num_moe_layers += last_layer_is_moe x mtp).
      if (last_moe) n_moe += mtp; else n_dense += mtp;
      const double layers = L + mtp;
      double attn = 0;
      if (m.mla.enabled()) {
        const double qk = m.mla.qk_nope_head_dim, pe = m.mla.qk_rope_head_dim, vd = m.mla.v_head_dim;
        const double ql = m.mla.q_lora_rank, kvl = m.mla.kv_lora_rank;
        const double q_term = ql > 0 ? ql * (h + a * (qk + pe) + 1) : h * a * (qk + pe);
        attn = 6.0 * (q_term + kvl * (h + a * (qk + vd) + 1) + h * pe + a * vd * h + s * (a * (qk + pe)) / 2.0 +
                      s * a * vd / 2.0);
      } else {
        const double qp = dh * a, kp = dh * g;
        attn = 6.0 * (h * (qp + 2.0 * kp) + qp * s / 2.0 * 2.0 + qp * h);
      }
      // Latent MoE: routed experts at moe_latent_size (fe k ffn_mats L / h) + 2 L for the projections.
      const double lat = static_cast<double>(m.moe.latent_size);
      const double routed = lat > 0 ? fe * k * ffn_mats * lat / h + 2.0 * lat : fe * k * ffn_mats;
      const double mlp = 6.0 * h * (f * ffn_mats * n_dense + routed * n_moe + fsh * ffn_mats * n_moe);
      const double mtp_proj = 6.0 * mtp * (3.0 * h + 2.0 * h * h);
      return B * s * (mlp + attn * layers + mtp_proj + 6.0 * h * V * (mtp + 1.0));
    }
    case FlopConvention::kNemoLlama: {
      const double v = NemoVocab(in.family);
      if (v == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("NeMo's llama FLOP formula has no vocabulary constant for family '", in.family, "'"));
      }
      return B * s * L * h * h * (12.0 + 12.0 * g / a + 18.0 * k * fe / h + 12.0 * s / h + 6.0 * v / (L * h));
    }
    case FlopConvention::kNemoGpt3: {
      const double v = NemoVocab(in.family);
      if (v == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("NeMo's gpt3 FLOP formula has no vocabulary constant for family '", in.family, "'"));
      }
      return (24.0 * B * s * h * h + 4.0 * B * s * s * h) * (3.0 * L) + 6.0 * B * s * h * v;
    }
    case FlopConvention::kLlmFoundry:
      return B * (6.0 * ParamsOf(m, true, true) * s + 12.0 * La * h * s * s);
    case FlopConvention::kTorchtitan:
      return B * s * (6.0 * ParamsOf(m, false, false) + 12.0 * La * a * dh * s);
    case FlopConvention::kTorchtitan2024:
      return B * s * (6.0 * ParamsOf(m, true, true) + 12.0 * La * a * dh * s);
    case FlopConvention::kPalm:
      return B * s * (6.0 * ParamsOf(m, true, false) + 12.0 * La * a * dh * s);
    case FlopConvention::kMlperfConstant: {
      // MODEL_TFLOP_PER_SAMPLE of the benchmark whose model this is (8192-token samples).
      double per_sample = 0;
      if (in.family == "llama" && m.layers == 126 && m.hidden_size == 16384) per_sample = 21508e12;
      if (in.family == "llama" && m.layers == 32 && m.hidden_size == 4096) per_sample = 421.59e12;
      if (per_sample == 0 || in.seq_length != 8192) {
        return absl::InvalidArgumentError(absl::StrCat(
            "MLPerf MODEL_TFLOP_PER_SAMPLE is known for Llama 3.1 405B and 8B at 8192 tokens only (got family '",
            in.family, "', ", m.layers, " layers x ", m.hidden_size, ", sequence ", in.seq_length, ")"));
      }
      return B * per_sample;
    }
    case FlopConvention::kStatedPerSample:
      if (!(in.stated_flops_per_sample > 0) || !std::isfinite(in.stated_flops_per_sample)) {
        return absl::InvalidArgumentError("a stated FLOP count per sample must be > 0");
      }
      return B * in.stated_flops_per_sample;
  }
  return absl::InternalError("unknown FLOP convention");
}

}  // namespace stepcast
