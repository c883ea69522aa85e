// File: proto/hf_config.h
//
// Reads a Hugging Face `config.json` into a ModelShape. Supported model_type families and the
// fields read:
//   llama, mistral, qwen2, qwen3, gemma*, (any with the same names): num_hidden_layers,
//     hidden_size, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
//     vocab_size, tie_word_embeddings, hidden_act (silu/swish -> SwiGLU, gelu* -> GELU);
//   mixtral: + num_local_experts, num_experts_per_tok (every layer MoE, expert FFN =
//     intermediate_size);
//   qwen2_moe, qwen3_moe: + num_experts, num_experts_per_tok, moe_intermediate_size,
//     shared_expert_intermediate_size, decoder_sparse_step;
//   deepseek_v2, deepseek_v3: + n_routed_experts, n_shared_experts, num_experts_per_tok,
//     moe_intermediate_size, first_k_dense_replace, moe_layer_freq, q_lora_rank, kv_lora_rank,
//     qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
//   gpt2: n_layer, n_embd, n_head, n_inner, n_positions (learned positions, biases, tied);
//   gpt_oss: + num_local_experts, experts_per_token | num_experts_per_tok (attention biases);
//   dbrx: d_model, n_heads, n_layers, vocab_size, attn_config.kv_n_heads,
//     ffn_config.{ffn_hidden_size, moe_num_experts, moe_top_k} (GLU experts, LayerNorm);
//   kimi_k2: as deepseek_v3.
// Multimodal configs with a "text_config" (Gemma 3) are read from it (the decoder only).
// tie_word_embeddings, when absent, is transformers' default for the model_type (true for
// gpt2 and the gemma family, false for the others above); an unknown model_type without the
// key is an error. Gemma (hidden_activation gelu_pytorch_tanh) and any gated "gelu*" act are
// GeGLU; silu/swish SwiGLU.
// Errors name the file and the field ("config.json: num_hidden_layers: missing").
#ifndef STEPCAST_PROTO_HF_CONFIG_H_
#define STEPCAST_PROTO_HF_CONFIG_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "core/model_shape.h"

namespace stepcast {

absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view json_text, absl::string_view origin);
absl::StatusOr<ModelShape> LoadHfConfig(const std::string& path);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_HF_CONFIG_H_
