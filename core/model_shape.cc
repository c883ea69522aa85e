#include "core/model_shape.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stepcast {

ModelShape ModelShape::Resolved() const {
  // Copies the dimensions only: name and source stay empty (this runs in the model's hot path).
  ModelShape s;
  s.layers = layers;
  s.hidden_size = hidden_size;
  s.attention_heads = attention_heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.ffn_hidden_size = ffn_hidden_size;
  s.ffn_type = ffn_type;
  s.vocab_size = vocab_size;
  s.tied_embeddings = tied_embeddings;
  s.linear_bias = linear_bias;
  s.learned_position_embeddings = learned_position_embeddings;
  s.norm_type = norm_type;
  s.moe = moe;
  s.mla = mla;
  s.local_attention_window = local_attention_window;
  s.local_attention_kind = local_attention_kind;
  s.global_attention_every = global_attention_every;
  s.attention_sinks = attention_sinks;
  s.activation_clamp = activation_clamp;
  s.rope_attention_factor = rope_attention_factor;
  s.attention_logit_softcap = attention_logit_softcap;
  s.final_logit_softcap = final_logit_softcap;
  s.position_encoding = position_encoding;
  s.embedding_norm = embedding_norm;
  s.mtp_layers = mtp_layers;
  s.mtp_repeated_layer = mtp_repeated_layer;
  s.hybrid_layer_pattern = hybrid_layer_pattern;
  s.hybrid_mtp_pattern = hybrid_mtp_pattern;
  s.mamba = mamba;
  if (s.Hybrid() && (s.hybrid_layer_pattern.find('M') != std::string::npos ||
                     s.hybrid_mtp_pattern.find('M') != std::string::npos)) {
    // Megatron-Core's defaults (transformer_config.py, mamba_mixer.py), for the Mamba layers.
    MambaShape& mb = s.mamba;
    if (mb.state_dim == 0) mb.state_dim = 128;
    if (mb.head_dim == 0) mb.head_dim = 64;
    if (mb.num_groups == 0) mb.num_groups = 8;
    if (mb.num_heads == 0 && mb.head_dim > 0) mb.num_heads = 2 * s.hidden_size / mb.head_dim;
    if (mb.conv_kernel == 0) mb.conv_kernel = 4;
    if (mb.chunk_size == 0) mb.chunk_size = 128;
  }
  if (s.kv_heads == 0) s.kv_heads = s.attention_heads;
  if (s.head_dim == 0 && s.attention_heads > 0) s.head_dim = s.hidden_size / s.attention_heads;
  if (s.ffn_hidden_size == 0) s.ffn_hidden_size = 4 * s.hidden_size;
  if (s.moe.layer_freq == 0) s.moe.layer_freq = 1;
  s.resolved = true;
  if (s.moe.shared_expert_ffn_hidden_size == 0) {
    s.moe.shared_expert_ffn_hidden_size = s.moe.expert_ffn_hidden_size;
  }
  return s;
}

namespace {
HybridLayerCounts CountSymbols(const std::string& pattern) {
  HybridLayerCounts c;
  for (char k : pattern) {
    switch (k) {
      case 'M': ++c.mamba; break;
      case '*': ++c.attention; break;
      case '-': ++c.mlp; break;
      case 'E': ++c.moe; break;
      default: break;  // refused by ValidateModelShape
    }
  }
  return c;
}
}  // namespace

HybridLayerCounts ModelShape::HybridCounts() const { return CountSymbols(hybrid_layer_pattern); }
HybridLayerCounts ModelShape::HybridMtpCounts() const { return CountSymbols(hybrid_mtp_pattern); }

int64_t ModelShape::AttentionLayerCount() const { return Hybrid() ? HybridCounts().attention : layers; }

int64_t ModelShape::MoeLayerCount() const {
  if (Hybrid()) return moe.enabled() ? HybridCounts().moe : 0;
  if (!moe.enabled()) return 0;
  // Layers first_dense_layers, +freq, +2 freq, ... below `layers`.
  const int64_t freq = moe.layer_freq > 0 ? moe.layer_freq : 1;
  const int64_t span = layers - moe.first_dense_layers;
  return span <= 0 ? 0 : (span + freq - 1) / freq;
}

bool ModelShape::IsMoeLayer(int64_t i) const {
  if (Hybrid()) {
    return moe.enabled() && i >= 0 && i < static_cast<int64_t>(hybrid_layer_pattern.size()) &&
           hybrid_layer_pattern[i] == 'E';
  }
  if (!moe.enabled() || i < moe.first_dense_layers || i >= layers) return false;
  const int64_t freq = moe.layer_freq > 0 ? moe.layer_freq : 1;
  return (i - moe.first_dense_layers) % freq == 0;
}

int64_t ModelShape::LocalAttentionLayerCount() const {
  if (local_attention_window <= 0 || Hybrid()) return 0;
  if (global_attention_every <= 0) return layers;
  return layers - layers / global_attention_every;
}

PositionEncoding ModelShape::Positions() const {
  if (position_encoding != PositionEncoding::kDefault) return position_encoding;
  return learned_position_embeddings > 0 ? PositionEncoding::kLearned : PositionEncoding::kRotary;
}

int64_t ModelShape::QkHeadDim() const {
  return mla.enabled() ? mla.qk_nope_head_dim + mla.qk_rope_head_dim : head_dim;
}
int64_t ModelShape::VHeadDim() const { return mla.enabled() ? mla.v_head_dim : head_dim; }

namespace {
absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("model.shape.", field, ": ", why));
}

// A hybrid pattern and its Mamba-2 dimensions (Megatron-Core hybrid_layer_allocation.py,
// mamba_mixer.py asserts).
absl::Status ValidateHybrid(const ModelShape& in, const ModelShape& s) {
  const std::string& p = in.hybrid_layer_pattern;
  for (size_t i = 0; i < p.size(); ++i) {
    const char k = p[i];
    if (IsHybridLayerSymbol(k)) continue;
    std::string why;
    switch (k) {
      case 'G': why = "a Gated DeltaNet layer, which the model does not describe"; break;
      case 'D': why = "a DeepSeek-style sparse attention layer, which the model does not describe"; break;
      case '+': why = "an MLA layer, which the model does not describe inside a hybrid"; break;
      case '|': why = "a pipeline-stage mark: give the layers only (the model splits them evenly)"; break;
      case '/': why = "an MTP separator: give the main pattern here, one MTP module's layers in hybrid_mtp_pattern and its depths in mtp_layers"; break;
      default: why = "not a layer symbol (M Mamba-2, * attention, - MLP, E MoE)"; break;
    }
    return Bad("hybrid_layer_pattern", absl::StrCat("'", std::string(1, k), "' at position ", i, " is ", why));
  }
  if (static_cast<int64_t>(p.size()) != in.layers) {
    return Bad("layers", absl::StrCat(in.layers, " is not the hybrid_layer_pattern's length ", p.size()));
  }
  const HybridLayerCounts c = in.HybridCounts();
  if (c.moe > 0 && !in.moe.enabled()) return Bad("moe.routed_experts", "must be > 0: the hybrid pattern has MoE ('E') layers");
  if (c.moe == 0 && in.HybridMtpCounts().moe == 0 && in.moe.enabled()) {
    return Bad("moe.routed_experts", "is set but the hybrid pattern (and its MTP pattern) has no MoE ('E') layer");
  }
  if (in.moe.first_dense_layers != 0 || in.moe.layer_freq > 1) {
    return Bad("moe.layer_freq", "a hybrid's MoE layers are its pattern's 'E' layers (leave layer_freq and first_dense_layers 0)");
  }
  if (in.mla.enabled()) return Bad("mla", "MLA inside a hybrid pattern is not modelled");
  if (in.local_attention_window > 0) return Bad("local_attention_window", "local attention inside a hybrid pattern is not modelled");
  const std::string& mp = in.hybrid_mtp_pattern;
  for (size_t i = 0; i < mp.size(); ++i) {
    if (!IsHybridLayerSymbol(mp[i])) {
      return Bad("hybrid_mtp_pattern", absl::StrCat("'", std::string(1, mp[i]), "' at position ", i,
                                                    " is not a layer symbol (M Mamba-2, * attention, - MLP, E MoE; "
                                                    "one module's layers, without '/')"));
    }
  }
  if (mp.size() > 64) return Bad("hybrid_mtp_pattern", absl::StrCat("has ", mp.size(), " layers (at most 64)"));
  if (in.mtp_layers > 0 && mp.empty()) {
    return Bad("hybrid_mtp_pattern", "must name the MTP module's layers (e.g. \"*E\") when a hybrid has mtp_layers");
  }
  const HybridLayerCounts mc = in.HybridMtpCounts();
  if (mc.moe > 0 && !in.moe.enabled()) return Bad("moe.routed_experts", "must be > 0: the MTP pattern has MoE ('E') layers");
  const MambaShape& m = in.mamba;
  for (auto [field, v] : {std::pair<const char*, int64_t>{"mamba.state_dim", m.state_dim}, {"mamba.head_dim", m.head_dim},
                          {"mamba.num_groups", m.num_groups}, {"mamba.num_heads", m.num_heads},
                          {"mamba.conv_kernel", m.conv_kernel}, {"mamba.chunk_size", m.chunk_size}}) {
    if (v < 0) return Bad(field, "must be >= 0 (0: Megatron-Core's default)");
    // Bounded so that the mixer's widths (2 heads x head_dim + 2 groups x state + heads) cannot
    // overflow int64 (review of 2026-11-29).
    if (v > (int64_t{1} << 20)) return Bad(field, absl::StrCat(v, " is above 2^20"));
  }
  if (c.mamba == 0 && mc.mamba == 0 && in.mamba != MambaShape{}) {
    return Bad("mamba", "is given but the hybrid pattern has no Mamba ('M') layer");
  }
  const MambaShape& r = s.mamba;
  if (c.mamba > 0 || mc.mamba > 0) {
    if (r.num_heads <= 0) {
      return Bad("mamba.num_heads", absl::StrCat("2 * hidden_size / head_dim is 0 (hidden_size ", in.hidden_size,
                                                 ", head_dim ", r.head_dim, ")"));
    }
    if (r.num_heads % r.num_groups != 0) {
      return Bad("mamba.num_groups", absl::StrCat(r.num_groups, " does not divide num_heads ", r.num_heads,
                                                  " (mamba_mixer.py: every group has whole heads)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelShape(const ModelShape& in) {
  if (in.layers <= 0) return Bad("layers", "must be > 0");
  if (in.hidden_size <= 0) return Bad("hidden_size", "must be > 0");
  if (in.attention_heads <= 0) return Bad("attention_heads", "must be > 0");
  if (in.kv_heads < 0) return Bad("kv_heads", "must be >= 0 (0 means attention_heads)");
  if (in.head_dim < 0) return Bad("head_dim", "must be >= 0");
  if (in.ffn_hidden_size < 0) return Bad("ffn_hidden_size", "must be >= 0");
  if (in.vocab_size <= 0) return Bad("vocab_size", "must be > 0");
  if (in.learned_position_embeddings < 0) return Bad("learned_position_embeddings", "must be >= 0");
  const ModelShape s = in.Resolved();
  if (s.head_dim == 0 && !s.mla.enabled()) {
    return Bad("head_dim", absl::StrCat("hidden_size ", s.hidden_size,
                                        " is smaller than attention_heads ", s.attention_heads));
  }
  if (s.attention_heads % s.kv_heads != 0) {
    return Bad("kv_heads", absl::StrCat(s.kv_heads, " does not divide attention_heads ",
                                        s.attention_heads, " (GQA groups must be equal)"));
  }
  if (s.kv_heads > s.attention_heads) return Bad("kv_heads", "exceeds attention_heads");
  // Megatron-LM asserts hidden_size % num_attention_heads == 0 unless --kv-channels gives the
  // head size (megatron/training/arguments.py); a truncated head_dim would be silently wrong
  // (reliability review M8: hidden 4100 with 32 heads gave head_dim 128).
  if (in.head_dim == 0 && !in.mla.enabled() && in.hidden_size % in.attention_heads != 0 &&
      in.hidden_size >= in.attention_heads) {
    return Bad("attention_heads", absl::StrCat(in.attention_heads, " does not divide hidden_size ", in.hidden_size,
                                               "; give head_dim"));
  }
  const MoeShape& m = s.moe;
  if (m.routed_experts < 0) return Bad("moe.routed_experts", "must be >= 0");
  if (!m.enabled() && m.latent_size != 0) return Bad("moe.latent_size", "needs MoE layers (moe.routed_experts > 0)");
  if (m.enabled()) {
    if (m.top_k <= 0) return Bad("moe.top_k", "must be > 0 when moe.routed_experts > 0");
    if (m.top_k > m.routed_experts) {
      return Bad("moe.top_k", absl::StrCat(m.top_k, " exceeds moe.routed_experts ", m.routed_experts));
    }
    if (m.expert_ffn_hidden_size <= 0) return Bad("moe.expert_ffn_hidden_size", "must be > 0");
    if (m.shared_experts < 0) return Bad("moe.shared_experts", "must be >= 0");
    if (m.layer_freq < 0) return Bad("moe.layer_freq", "must be >= 0");
    if (m.first_dense_layers < 0 || m.first_dense_layers >= s.layers) {
      return Bad("moe.first_dense_layers", "must be in [0, layers)");
    }
    if (m.latent_size < 0 || m.latent_size > (int64_t{1} << 20)) {
      return Bad("moe.latent_size", absl::StrCat(m.latent_size, " must be in [0, 2^20] (0: experts at hidden_size)"));
    }
    if (m.routed_groups < 0 || m.max_routed_groups < 0 || m.max_routed_groups > m.routed_groups ||
        (m.routed_groups > 0 && m.routed_experts % m.routed_groups != 0)) {
      return Bad("moe.routed_groups", "must divide routed_experts, with 0 <= max_routed_groups <= routed_groups");
    }
  }
  if (in.local_attention_window < 0) return Bad("local_attention_window", "must be >= 0 (0: no local attention)");
  if (in.global_attention_every < 0) return Bad("global_attention_every", "must be >= 0 (0: every layer local)");
  if (in.global_attention_every > 0 && in.local_attention_window == 0) {
    return Bad("global_attention_every", "needs local_attention_window > 0 (the local layers' window)");
  }
  for (auto [field, v] : {std::pair<const char*, double>{"attention_logit_softcap", in.attention_logit_softcap},
                          {"final_logit_softcap", in.final_logit_softcap}}) {
    if (!(v >= 0) || !std::isfinite(v)) return Bad(field, "must be a finite number >= 0 (0: no soft-capping)");
  }
  if (in.mtp_layers < 0) return Bad("mtp_layers", "must be >= 0");
  if (in.mtp_layers > in.layers) return Bad("mtp_layers", absl::StrCat(in.mtp_layers, " exceeds layers ", in.layers));
  if (in.position_encoding == PositionEncoding::kLearned && in.learned_position_embeddings == 0) {
    return Bad("position_encoding", "learned needs learned_position_embeddings > 0 (the table's rows)");
  }
  if ((in.position_encoding == PositionEncoding::kRotary || in.position_encoding == PositionEncoding::kAlibi) &&
      in.learned_position_embeddings > 0) {
    return Bad("learned_position_embeddings", "must be 0 with rotary or ALiBi positions (no position table)");
  }
  if (in.Hybrid()) {
    if (absl::Status st = ValidateHybrid(in, s); !st.ok()) return st;
  } else if (in.mamba != MambaShape{}) {
    return Bad("mamba", "needs hybrid_layer_pattern (the layers that are Mamba-2 mixers)");
  } else if (!in.hybrid_mtp_pattern.empty()) {
    return Bad("hybrid_mtp_pattern", "needs hybrid_layer_pattern (a transformer's MTP module is a block of its last layer's type)");
  }
  if (s.mla.enabled()) {
    if (s.mla.qk_rope_head_dim <= 0 || s.mla.qk_nope_head_dim <= 0 || s.mla.v_head_dim <= 0) {
      return Bad("mla", "qk_nope_head_dim, qk_rope_head_dim and v_head_dim must be > 0 with kv_lora_rank");
    }
    if (s.mla.q_lora_rank < 0) return Bad("mla.q_lora_rank", "must be >= 0");
  }
  return absl::OkStatus();
}

namespace {

// Every field CountParameters() reads (all but the name and source), trivially copyable so that
// the per-thread memo below needs no thread-exit destructor. Every member is 8 bytes (enums and
// flags widened), so the struct has no padding and the memo compares it with one memcmp: equal
// bytes are equal fields (two doubles equal as numbers but not as bits, 0 and -0, only miss).
struct Dimensions {
  int64_t layers, hidden_size, attention_heads, kv_heads, head_dim, ffn_hidden_size;
  int64_t ffn_type;
  int64_t vocab_size;
  int64_t tied_embeddings, linear_bias;
  int64_t learned_position_embeddings;
  int64_t norm_type;
  MoeShape moe;
  MlaShape mla;
  int64_t local_attention_window;
  int64_t local_attention_kind;
  int64_t global_attention_every;
  int64_t attention_sinks;
  double attention_logit_softcap, final_logit_softcap;
  int64_t position_encoding;
  int64_t embedding_norm;
  int64_t mtp_layers;
  int64_t mtp_repeated_layer;
  int64_t resolved;
  // A hybrid's layers by kind and its last layer's kind (the parameter counts depend on the
  // pattern only through these), and its Mamba-2 dimensions.
  HybridLayerCounts hybrid;
  int64_t hybrid_last;
  MambaShape mamba;
  HybridLayerCounts hybrid_mtp;  // one hybrid MTP module's layers by kind
};
static_assert(sizeof(MoeShape) % 8 == 0 && sizeof(MlaShape) % 8 == 0 && sizeof(MambaShape) % 8 == 0 &&
              sizeof(HybridLayerCounts) % 8 == 0 &&
              sizeof(Dimensions) ==
                  8 * 24 + sizeof(MoeShape) + sizeof(MlaShape) + 2 * sizeof(HybridLayerCounts) + sizeof(MambaShape));

Dimensions DimensionsOf(const ModelShape& s) {
  return {s.layers, s.hidden_size, s.attention_heads, s.kv_heads, s.head_dim, s.ffn_hidden_size,
          static_cast<int64_t>(s.ffn_type), s.vocab_size, s.tied_embeddings, s.linear_bias,
          s.learned_position_embeddings, static_cast<int64_t>(s.norm_type), s.moe, s.mla, s.local_attention_window,
          static_cast<int64_t>(s.local_attention_kind), s.global_attention_every, s.attention_sinks,
          s.attention_logit_softcap, s.final_logit_softcap, static_cast<int64_t>(s.position_encoding),
          s.embedding_norm, s.mtp_layers, s.mtp_repeated_layer, s.resolved, s.HybridCounts(),
          s.hybrid_layer_pattern.empty() ? 0 : static_cast<int64_t>(s.hybrid_layer_pattern.back()), s.mamba,
          s.HybridMtpCounts()};
}

ParameterCounts CountParametersUncached(const ModelShape& in);

}  // namespace

ParameterCounts CountParameters(const ModelShape& in) {
  // One prediction asks for the same shape's counts about seven times (FLOPs, memory of the
  // first and last stage, step time): the last shape's counts are kept per thread.
  thread_local struct {
    bool valid = false;
    Dimensions dims;
    ParameterCounts counts;
  } last;
  const Dimensions dims = DimensionsOf(in);
  if (last.valid && std::memcmp(&last.dims, &dims, sizeof dims) == 0) return last.counts;
  last.counts = CountParametersUncached(in);
  last.dims = dims;
  last.valid = true;
  return last.counts;
}

namespace {

ParameterCounts CountParametersUncached(const ModelShape& in) {
  ModelShape storage;
  const ModelShape& s = Resolve(in, storage);
  const double h = s.hidden_size;
  const double a = s.attention_heads;
  ParameterCounts c;

  // Attention projections (GEMM weights only).
  double attn = 0;
  double attn_extra = 0;  // biases, MLA's internal norms, sink logits
  if (s.mla.enabled()) {
    const double dqk = s.QkHeadDim(), dv = s.VHeadDim();
    const double rq = s.mla.q_lora_rank, rkv = s.mla.kv_lora_rank;
    const double q = rq > 0 ? h * rq + rq * a * dqk : h * a * dqk;
    const double kv = h * (rkv + s.mla.qk_rope_head_dim) + rkv * a * (s.mla.qk_nope_head_dim + dv);
    attn = q + kv + a * dv * h;
    attn_extra = rkv + (rq > 0 ? rq : 0);  // RMSNorms on the latent vectors
  } else {
    const double dh = s.head_dim, kv = s.kv_heads;
    attn = h * a * dh + 2 * h * kv * dh + a * dh * h;
    if (s.linear_bias) attn_extra = a * dh + 2 * kv * dh + h;
  }
  if (s.attention_sinks) attn_extra += a;

  const int f_mats = GatedFfn(s.ffn_type) ? 3 : 2;
  const double dense_ffn = f_mats * h * s.ffn_hidden_size;
  const double dense_ffn_bias = s.linear_bias ? s.ffn_hidden_size + h : 0;
  const double norm = (s.norm_type == NormType::kLayerNorm ? 2 : 1) * h;

  double moe_total = 0, moe_active = 0;
  if (s.moe.enabled()) {
    // Routed experts at their width w (latent MoE: latent_size, else h).
    const double w = static_cast<double>(s.moe.ExpertWidth(s.hidden_size));
    const double fe = f_mats * w * s.moe.expert_ffn_hidden_size;
    const double fs = f_mats * h * s.moe.shared_expert_ffn_hidden_size;
    // With linear_bias every expert carries its biases: the up (and gate) outputs and the down
    // output (GPT-OSS gate_up_proj_bias 2*f_e, down_proj_bias h), and the router its E.
    const double expert_bias = s.linear_bias ? (f_mats - 1) * s.moe.expert_ffn_hidden_size + w : 0;
    const double shared_bias = s.linear_bias ? (f_mats - 1) * s.moe.shared_expert_ffn_hidden_size + h : 0;
    const double router = h * s.moe.routed_experts + (s.linear_bias ? s.moe.routed_experts : 0);
    // Latent MoE: fc1_latent_proj h -> w and fc2_latent_proj w -> h (moe_layer.py TELinear,
    // bias = add_bias_linear), on every token's path.
    const double latent_proj = s.moe.latent_size > 0 ? 2 * h * w + (s.linear_bias ? w + h : 0.0) : 0.0;
    moe_total = s.moe.routed_experts * (fe + expert_bias) + s.moe.shared_experts * (fs + shared_bias) + router + latent_proj;
    moe_active = s.moe.top_k * (fe + expert_bias) + s.moe.shared_experts * (fs + shared_bias) + router + latent_proj;
  }

  // What every TP rank holds whole (ParameterCounts::tp_duplicated_*): each sub-layer's norm,
  // MLA's down projections and latent norms, row-parallel output biases, the router and latent
  // MoE's projections.
  double attn_dup = norm;
  if (s.mla.enabled()) {
    const double rq = s.mla.q_lora_rank, rkv = s.mla.kv_lora_rank;
    attn_dup += (rq > 0 ? h * rq + rq : 0.0) + h * (rkv + s.mla.qk_rope_head_dim) + rkv;
  }
  if (s.linear_bias) attn_dup += h;
  const double mlp_dup = norm + (s.linear_bias ? h : 0.0);
  double moe_dup = norm;
  if (s.moe.enabled()) {
    const double w = static_cast<double>(s.moe.ExpertWidth(s.hidden_size));
    moe_dup += h * s.moe.routed_experts + (s.linear_bias ? s.moe.routed_experts : 0.0) +
               (s.moe.latent_size > 0 ? 2 * h * w + (s.linear_bias ? w + h : 0.0) : 0.0) +
               (s.linear_bias && s.moe.shared_experts > 0 ? h : 0.0);
  }
  c.tp_duplicated_other_layer = attn_dup + mlp_dup;
  c.tp_duplicated_moe_layer = attn_dup + moe_dup;

  const double n_moe = s.MoeLayerCount();
  const double n_dense = s.DenseLayerCount();
  const double per_layer_fixed = attn + attn_extra + 2 * norm;
  double layers_total = n_dense * (per_layer_fixed + dense_ffn + dense_ffn_bias) +
                        n_moe * (per_layer_fixed + moe_total);
  double layers_active = n_dense * (per_layer_fixed + dense_ffn + dense_ffn_bias) +
                         n_moe * (per_layer_fixed + moe_active);
  // A hybrid: one block per layer, each with one pre-norm (Megatron-Core mamba_layer.py /
  // hybrid_layer_specs.py: the norm is fused into the first linear of the block).
  double mamba_gemm = 0, mamba_all = 0;
  const HybridLayerCounts hc = s.HybridCounts();
  if (s.Hybrid()) {
    const MambaShape& mb = s.mamba;
    const double d_in = mb.InnerSize();
    // in_proj [z, x, B, C, dt] and out_proj (no biases: mamba_mixer.py asserts not bias); the
    // depthwise conv's weights and biases; A_log, D (per head, D_has_hdim False) and dt_bias;
    // the gated RMSNorm over d_inner.
    mamba_gemm = h * mb.InProjOutputs() + d_in * h;
    mamba_all = mamba_gemm + static_cast<double>(mb.ConvChannels()) * (mb.conv_kernel + 1) + 3.0 * mb.num_heads + d_in +
                norm;
    const double attention_layer = attn + attn_extra + norm;
    const double mlp_layer = dense_ffn + dense_ffn_bias + norm;
    const double common = hc.mamba * mamba_all + hc.attention * attention_layer + hc.mlp * mlp_layer;
    layers_total = common + hc.moe * (moe_total + norm);
    layers_active = common + hc.moe * (moe_active + norm);
    // One pre-norm per block; a Mamba mixer's own gated norm, conv and per-head values are split
    // by TP with its channels (mamba_mixer.py: d_inner_local_tp).
    const double non_moe = static_cast<double>(hc.NonMoe());
    c.tp_duplicated_other_layer =
        non_moe > 0 ? (hc.mamba * norm + hc.attention * attn_dup + hc.mlp * mlp_dup) / non_moe : 0.0;
    c.tp_duplicated_moe_layer = moe_dup;
  }
  // The final norm, and BLOOM's norm on the embedding output.
  const double model_norms = norm * (s.embedding_norm ? 2 : 1);

  const bool learned = s.Positions() == PositionEncoding::kLearned;
  const double input_emb = s.vocab_size * h + (learned ? s.learned_position_embeddings * h : 0.0);
  const double output_head = s.tied_embeddings ? 0.0 : s.vocab_size * h;
  c.embedding = input_emb + output_head;
  c.total = layers_total + model_norms + c.embedding;
  c.active = layers_active + model_norms + c.embedding;
  // Without the input table (and positions); the output head is counted, tied or not: its
  // V x h matmul runs per token either way.
  c.active_without_input_embedding = layers_active + model_norms + s.vocab_size * h;
  c.non_embedding = c.total - c.embedding;
  {
    // One MTP module (DeepSeek-V3 Sec. 2.2, Fig. 3; Megatron-Core multi_token_prediction.py
    // MultiTokenPredictionLayer): a transformer block of the model's last layer type (a hybrid:
    // the layers of hybrid_mtp_pattern), the projection eh_proj (h x 2h) of [norm(h_i);
    // norm(emb)], those two norms (enorm, hnorm) and the module's final norm; the embedding and
    // output head are the main model's. Sized for every model: a job may train modules its shape
    // does not have (training.mtp_layers). Nemotron 3 Super's checkpoint, 123,611,033,088
    // elements, is the main model, one "*E" module and 41 router bias buffers (tested).
    const bool moe_block = s.IsMoeLayer(s.layers - 1);
    double block = per_layer_fixed + (moe_block ? moe_total : dense_ffn + dense_ffn_bias);
    if (s.Hybrid()) {
      const HybridLayerCounts mc = s.HybridMtpCounts();
      block = mc.mamba * mamba_all + mc.attention * (attn + attn_extra + norm) +
              mc.mlp * (dense_ffn + dense_ffn_bias + norm) + mc.moe * (moe_total + norm);
    }
    c.mtp_module = block + 2.0 * h * h + 3 * norm;
    double block_dup = moe_block ? attn_dup + moe_dup : attn_dup + mlp_dup;
    if (s.Hybrid()) {
      const HybridLayerCounts mc = s.HybridMtpCounts();
      block_dup = mc.mamba * norm + mc.attention * attn_dup + mc.mlp * mlp_dup + mc.moe * moe_dup;
    }
    c.tp_duplicated_mtp_module = block_dup + 3 * norm;
    c.mtp = s.MtpModulesWithWeights(s.mtp_layers) * c.mtp_module;
  }
  c.attention_gemm = attn;
  c.dense_layer_gemm = attn + dense_ffn;
  c.moe_layer_gemm_active = attn + moe_active;
  c.moe_layer_gemm_total = attn + moe_total;
  if (s.Hybrid()) {
    c.mamba_layer_gemm = mamba_gemm;
    c.mamba_layer = mamba_all;
    const double non_moe = static_cast<double>(hc.NonMoe());
    c.dense_layer_gemm = non_moe > 0 ? (hc.mamba * mamba_gemm + hc.attention * attn + hc.mlp * dense_ffn) / non_moe : 0.0;
    c.moe_layer_gemm_active = moe_active;
    c.moe_layer_gemm_total = moe_total;
  }
  return c;
}

}  // namespace

}  // namespace stepcast
