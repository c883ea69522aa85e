// File: core/model_shape.h
//
// The shape of a decoder-only transformer and its parameter counts.
#ifndef STEPCAST_CORE_MODEL_SHAPE_H_
#define STEPCAST_CORE_MODEL_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace stepcast {

// Feed-forward block: GELU and squared ReLU have two matrices (h->f->h); SwiGLU and GeGLU three
// (gate, up, down; Shazeer 2020, arXiv:2002.05202).
enum class FfnType { kGelu, kSwiGlu, kGeGlu, kSquaredRelu };
// Three weight matrices (a gated unit) or two.
constexpr bool GatedFfn(FfnType t) { return t == FfnType::kSwiGlu || t == FfnType::kGeGlu; }
enum class NormType { kLayerNorm, kRmsNorm };
// Position encoding (proto PositionEncoding). kDefault: learned when learned_position_embeddings
// > 0, else rotary. ALiBi (Press et al. 2022, arXiv:2108.12409) has no parameters.
enum class PositionEncoding { kDefault, kRotary, kLearned, kAlibi };
// Local attention of a local/global pattern (proto LocalAttentionKind): each token attends to
// the previous `window` tokens (sliding), or causally within its chunk of `window` tokens
// (chunked, Llama 4).
enum class LocalAttentionKind { kSliding, kChunked };

// Mixture of experts. routed_experts == 0 means a dense model.
struct MoeShape {
  int64_t routed_experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn_hidden_size = 0;
  int64_t shared_experts = 0;
  int64_t shared_expert_ffn_hidden_size = 0;  // 0: expert_ffn_hidden_size
  int64_t layer_freq = 1;                     // every layer_freq-th layer is MoE
  int64_t first_dense_layers = 0;             // leading dense layers (DeepSeek-V3: 3)
  int64_t routed_groups = 0;                  // group-limited routing: groups (HF n_group); 0: none
  int64_t max_routed_groups = 0;              // groups a token may reach (HF topk_group); 0: no limit
  // Latent MoE (Nemotron 3 Super / Ultra; Megatron-Core moe_latent_size, moe_layer.py): the
  // routed experts run at this width; fc1_latent_proj (h -> latent_size) before the dispatch and
  // fc2_latent_proj (latent_size -> h) after the combine, both duplicated on every TP rank, so
  // tokens travel at latent_size. The router and shared experts keep hidden_size. 0: none.
  int64_t latent_size = 0;
  // The width the routed experts read and write and the dispatch moves: latent_size, else h.
  int64_t ExpertWidth(int64_t hidden_size) const { return latent_size > 0 ? latent_size : hidden_size; }
  bool enabled() const { return routed_experts > 0; }
  bool operator==(const MoeShape&) const = default;
};

// Multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1). kv_lora_rank == 0: off.
struct MlaShape {
  int64_t q_lora_rank = 0;  // 0: queries are a full h x (heads * qk_head_dim) projection
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  bool operator==(const MlaShape&) const = default;
};

// Mamba-2 mixer of a hybrid model (Dao & Gu 2024, arXiv:2405.21060 Sec. 7; Megatron-Core
// megatron/core/ssm/mamba_mixer.py MambaMixer). d_inner = num_heads * head_dim; in_proj packs
// [z, x, B, C, dt] (2 d_inner + 2 num_groups state_dim + num_heads outputs), a depthwise causal
// conv of conv_kernel taps runs over [x, B, C], the SSD scan in chunks of chunk_size tokens,
// a gated RMSNorm over d_inner, out_proj d_inner -> h. Fields left 0 take Megatron-Core's
// defaults in Resolved() (megatron/core/transformer/transformer_config.py mamba_state_dim 128,
// mamba_head_dim 64, mamba_num_groups 8, mamba_num_heads None = expand 2 x hidden / head_dim;
// MambaMixer d_conv 4, chunk_size 128).
struct MambaShape {
  int64_t state_dim = 0;
  int64_t head_dim = 0;
  int64_t num_groups = 0;
  int64_t num_heads = 0;
  int64_t conv_kernel = 0;
  int64_t chunk_size = 0;
  int64_t InnerSize() const { return num_heads * head_dim; }
  // [x, B, C]: the causal conv's channels.
  int64_t ConvChannels() const { return InnerSize() + 2 * num_groups * state_dim; }
  // [z, x, B, C, dt]: in_proj's outputs.
  int64_t InProjOutputs() const { return 2 * InnerSize() + 2 * num_groups * state_dim + num_heads; }
  bool operator==(const MambaShape&) const = default;
};

// The layer symbols of a hybrid pattern the model describes (Megatron-Core
// hybrid_layer_allocation.py Symbols): Mamba 'M', attention '*', MLP '-', MoE 'E'.
constexpr bool IsHybridLayerSymbol(char c) { return c == 'M' || c == '*' || c == '-' || c == 'E'; }

// Layers of a hybrid model by kind (Megatron-Core hybrid_layer_allocation.py Symbols): Mamba
// 'M', attention '*', MLP '-', MoE 'E', each one sub-layer with its own pre-norm and residual.
struct HybridLayerCounts {
  int64_t mamba = 0, attention = 0, mlp = 0, moe = 0;
  int64_t NonMoe() const { return mamba + attention + mlp; }
};

// A decoder-only transformer. All sizes are element counts. Fields left 0 where the comment
// gives a default are resolved by Resolved().
struct ModelShape {
  std::string name;
  int64_t layers = 0;
  int64_t hidden_size = 0;
  int64_t attention_heads = 0;
  int64_t kv_heads = 0;         // 0: attention_heads (MHA)
  int64_t head_dim = 0;         // 0: hidden_size / attention_heads
  int64_t ffn_hidden_size = 0;  // 0: 4 * hidden_size
  FfnType ffn_type = FfnType::kGelu;
  int64_t vocab_size = 0;
  bool tied_embeddings = false;
  bool linear_bias = false;
  int64_t learned_position_embeddings = 0;  // 0: rotary, no position table
  NormType norm_type = NormType::kLayerNorm;
  MoeShape moe;
  MlaShape mla;
  // Architecture-family fields (proto ModelShape fields 40+; presets/architectures/ says which
  // family has which). CountParameters() reads attention_sinks, position_encoding,
  // embedding_norm and mtp_layers; the others carry what the step-time model needs to know.
  // Local attention window in tokens; 0: every layer attends to the whole causal sequence.
  int64_t local_attention_window = 0;
  LocalAttentionKind local_attention_kind = LocalAttentionKind::kSliding;
  // With a window: layer i (from 0) is global when (i + 1) % global_attention_every == 0, the
  // others local; 0: every layer local (GPT-OSS, Gemma 2: 2; Gemma 3: 6; Llama 4: 4).
  int64_t global_attention_every = 0;
  bool attention_sinks = false;          // a learned sink logit per head (GPT-OSS)
  bool activation_clamp = false;         // the experts' GLU clamps its inputs (GPT-OSS swiglu_limit)
  double rope_attention_factor = 0;      // YaRN's factor on the rotary cos / sin (GPT-OSS 1.3466); 0 or 1: none
  double attention_logit_softcap = 0;    // cap * tanh(score / cap); 0: none (Gemma 2: 50)
  double final_logit_softcap = 0;        // the same on the output logits (Gemma 2: 30)
  PositionEncoding position_encoding = PositionEncoding::kDefault;
  bool embedding_norm = false;           // a norm after the embedding (BLOOM)
  int64_t mtp_layers = 0;                // multi-token-prediction modules (DeepSeek-V3 Sec. 2.2)
  // The MTP depths share one module's weights (Megatron-Core mtp_use_repeated_layer; HF
  // Nemotron-H mtp_use_repeated_layer): the parameters of one module, the compute of each depth.
  bool mtp_repeated_layer = false;
  // A hybrid's MTP module, one symbol per layer (Megatron-Core's pattern after '/', HF
  // mtp_hybrid_override_pattern; Nemotron 3 Super "*E": an attention and an MoE layer), with the
  // embedding projection and norms of a transformer's. Empty: a hybrid has no MTP module.
  std::string hybrid_mtp_pattern;
  // A hybrid Mamba-2 model: one symbol per layer, 'M' Mamba-2 mixer, '*' self-attention, '-'
  // MLP (ffn_hidden_size, ffn_type), 'E' MoE (moe); `layers` is its length. Empty: every layer
  // is attention + FFN (the transformer above). Megatron-Core --hybrid-layer-pattern (its '|'
  // stage marks are the importers'); Nemotron-H 8B "M-M-M-MM-M-M-M*-..." (52 layers).
  std::string hybrid_layer_pattern;
  MambaShape mamba;
  std::string source;
  // A new dimension must also be added to Dimensions (model_shape.cc), which keys the per-thread
  // memo of CountParameters(), and to Resolved().

  // True when every default above is filled in (set by Resolved(); the job codec stores resolved
  // shapes so the model's hot path does not resolve them again).
  bool resolved = false;

  // A copy of the dimensions with the defaults above filled in (name and source left empty).
  ModelShape Resolved() const;
  bool Hybrid() const { return !hybrid_layer_pattern.empty(); }
  // A hybrid's layers by kind (all zero when not hybrid).
  HybridLayerCounts HybridCounts() const;
  // The layers of one hybrid MTP module by kind (hybrid_mtp_pattern; all zero without one).
  HybridLayerCounts HybridMtpCounts() const;
  // MTP modules whose weights exist when `depths` are trained: one when they share a layer
  // (mtp_repeated_layer), else each.
  int64_t MtpModulesWithWeights(int64_t depths) const {
    return mtp_repeated_layer && depths > 0 ? 1 : depths;
  }
  // Layers with self-attention: every layer, or a hybrid's '*' layers.
  int64_t AttentionLayerCount() const;
  // Number of MoE layers and dense layers (they add up to `layers`). A hybrid's MoE layers are
  // its 'E' layers; its "dense" layers are the others (Mamba, attention, MLP).
  int64_t MoeLayerCount() const;
  int64_t DenseLayerCount() const { return layers - MoeLayerCount(); }
  // Width of the attention output (heads * value head dim) and of q/k per head.
  int64_t QkHeadDim() const;
  int64_t VHeadDim() const;
  // Layers with a local attention window (0 without a window): every layer that is not a
  // global one (see global_attention_every). GPT-OSS 120B: 18 of 36; Gemma 3 27B: 52 of 62.
  int64_t LocalAttentionLayerCount() const;
  // Whether layer i (from 0) is an MoE layer: moe enabled, i >= first_dense_layers and
  // (i - first_dense_layers) % layer_freq == 0, the layout MoeLayerCount() counts; a hybrid's
  // 'E' layers.
  bool IsMoeLayer(int64_t i) const;
  // The position encoding with kDefault resolved.
  PositionEncoding Positions() const;
};

// `in` itself when it is already resolved, else `storage` = in.Resolved(). For hot paths:
//   ModelShape storage; const ModelShape& s = Resolve(in, storage);
inline const ModelShape& Resolve(const ModelShape& in, ModelShape& storage) {
  if (in.resolved) return in;
  storage = in.Resolved();
  return storage;
}

// Checks a shape; errors name the field ("model.shape.<field>") and the reason.
absl::Status ValidateModelShape(const ModelShape& shape);

// Parameter counts of the whole model, in parameters.
//   attention: Q, K, V, O projections (GQA: K and V have kv_heads * head_dim outputs);
//              MLA per DeepSeek-V2 Sec. 2.1 (down/up projections, decoupled RoPE key);
//              + one sink logit per head with attention_sinks (GPT-OSS modeling_gpt_oss.py).
//   dense FFN: GELU 2*h*f, SwiGLU 3*h*f (Shazeer 2020, arXiv:2002.05202).
//   MoE layer: routed * 3*h*f_e + shared * 3*h*f_s + router h*E (SwiGLU experts); latent MoE:
//              routed experts at width moe.latent_size L (3*L*f_e) + 2*h*L projections; with
//              linear_bias each expert has its biases (gated: 2*f_e + h, else f_e + h) and the
//              router E (GPT-OSS gate_up_proj_bias, down_proj_bias, router.bias).
//   norms: 2 per layer + final (LayerNorm 2h, RMSNorm h), + 1 with embedding_norm (BLOOM);
//          biases when linear_bias.
//   embedding: V*h (+ positions when learned), output head V*h unless tied.
//   hybrid (hybrid_layer_pattern): each layer is one block with one pre-norm: 'M' in_proj
//          h*(2*d_in + 2*G*N + H) + conv (d_in + 2*G*N)*(K + 1) + A_log, D, dt_bias (H each) +
//          gated norm d_in + out_proj d_in*h (Megatron-Core mamba_mixer.py); '*' the attention
//          above; '-' the FFN above; 'E' the MoE block above. Nemotron-H 8B: 8.10e9 (tested).
// "total" is the main model: the MTP modules (mtp_layers) are counted apart in "mtp", as the
// DeepSeek-V3 card does (671B main model + 14B MTP module, its embedding and head shared).
// "active" counts top_k routed experts instead of all (the weights one token's path touches,
// the input table included): the convention of most model cards (Qwen3-30B-A3B "3.3B
// activated", Mixtral "12.9B", Llama 4 "17B", OLMoE "1.3B"; a dense model's active is its
// total). "active_without_input_embedding" leaves the input table (and positions) out and
// keeps the output head: the gpt-oss card's convention (arXiv:2508.10925 Table 1: gpt-oss-20b
// 3.61B active, 20.91B total), where the lookup is no matmul. "embedding" is the input table
// (with positions) plus the untied output head; non_embedding = total - embedding.
// Worked examples (tested): Llama 3 8B = 8.03e9 total; Mixtral 8x7B = 46.7e9 total, 12.9e9
// active; gpt-oss-20b 20.91e9 total, 3.61e9 active without the input embedding.
struct ParameterCounts {
  double total = 0;
  double active = 0;
  double active_without_input_embedding = 0;
  double embedding = 0;
  double non_embedding = 0;
  double mtp = 0;         // MtpModulesWithWeights(mtp_layers) x mtp_module
  double mtp_module = 0;  // one MTP module, whether the shape has any (a job's training.mtp_layers may)
  // Parameters of one layer's GEMM weights (no biases/norms), dense and MoE (active) layers;
  // the FLOP model uses these. A hybrid's "dense" layer is the mean of its Mamba, attention and
  // MLP layers (weighted by their counts), its MoE layer the 'E' block alone.
  double dense_layer_gemm = 0;
  double moe_layer_gemm_active = 0;
  double moe_layer_gemm_total = 0;
  double attention_gemm = 0;  // per layer, part of the two above
  double mamba_layer_gemm = 0;  // a hybrid's Mamba layer: in_proj + out_proj
  double mamba_layer = 0;       // and all its parameters (conv, A_log, D, dt_bias, norms)
  // Parameters every tensor-parallel rank holds whole (Megatron-Core builds them unsplit), per
  // layer: the layer norms (TE's fused LayerNormColumnParallelLinear keeps the full h-wide
  // weight), MLA's down projections and latent norms (multi_latent_attention.py: TELinear
  // parallel_mode "duplicated"), the router (moe/router.py: an unsplit E x h weight), latent
  // MoE's two projections (moe_layer.py: "duplicated"), and row-parallel output biases (h).
  // Per MoE layer, per other layer (a hybrid: the mean over its Mamba, attention and MLP
  // layers), and per MTP module (its block's, and its three norms).
  double tp_duplicated_moe_layer = 0;
  double tp_duplicated_other_layer = 0;
  double tp_duplicated_mtp_module = 0;
};
ParameterCounts CountParameters(const ModelShape& shape);

}  // namespace stepcast

#endif  // STEPCAST_CORE_MODEL_SHAPE_H_
