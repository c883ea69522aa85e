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
  std::string source;
  // A new dimension must also be added to Dimensions (model_shape.cc), which keys the per-thread
  // memo of CountParameters().

  // True when every default above is filled in (set by Resolved(); the job codec stores resolved
  // shapes so the model's hot path does not resolve them again).
  bool resolved = false;

  // A copy of the dimensions with the defaults above filled in (name and source left empty).
  ModelShape Resolved() const;
  // Number of MoE layers and dense layers (they add up to `layers`).
  int64_t MoeLayerCount() const;
  int64_t DenseLayerCount() const { return layers - MoeLayerCount(); }
  // Width of the attention output (heads * value head dim) and of q/k per head.
  int64_t QkHeadDim() const;
  int64_t VHeadDim() const;
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
//              MLA per DeepSeek-V2 Sec. 2.1 (down/up projections, decoupled RoPE key).
//   dense FFN: GELU 2*h*f, SwiGLU 3*h*f (Shazeer 2020, arXiv:2002.05202).
//   MoE layer: routed * 3*h*f_e + shared * 3*h*f_s + router h*E (SwiGLU experts).
//   norms: 2 per layer + final (LayerNorm 2h, RMSNorm h); biases when linear_bias.
//   embedding: V*h (+ positions), output head V*h unless tied.
// "active" counts top_k routed experts instead of all; "embedding" is the input table plus
// the untied output head; non_embedding = total - embedding.
// Worked example (tested): Llama 3 8B = 8.03e9 total; Mixtral 8x7B = 46.7e9 total, 12.9e9 active.
struct ParameterCounts {
  double total = 0;
  double active = 0;
  double embedding = 0;
  double non_embedding = 0;
  // Parameters of one layer's GEMM weights (no biases/norms), dense and MoE (active) layers;
  // the FLOP model uses these.
  double dense_layer_gemm = 0;
  double moe_layer_gemm_active = 0;
  double moe_layer_gemm_total = 0;
  double attention_gemm = 0;  // per layer, part of the two above
};
ParameterCounts CountParameters(const ModelShape& shape);

}  // namespace stepcast

#endif  // STEPCAST_CORE_MODEL_SHAPE_H_
