// File: core/flops.h
//
// FLOP counts of training steps. "Model FLOPs" count the work the model needs (PaLM App. B,
// Korthikanti et al. 2022 App. A): 6 FLOPs per GEMM weight per token (forward 2, backward 4) plus
// the attention core 12 * s * heads * head_dim per token and layer (non-causal convention, as
// Megatron-LM and PaLM count it). "Hardware FLOPs" add the recomputed forward work.
#ifndef STEPCAST_CORE_FLOPS_H_
#define STEPCAST_CORE_FLOPS_H_

#include <cstdint>

#include "core/job.h"
#include "core/model_shape.h"

namespace stepcast {

// Forward FLOPs per token of the GEMMs (all layers' active GEMM weights + the logits V*h), i.e.
// 2 * (GEMM parameters touched per token). Embedding lookup is free.
double ForwardGemmFlopsPerToken(const ModelShape& shape);

// Forward FLOPs per token of the attention core (QK^T and AV) over all layers at sequence length
// s, non-causal: 2 * s * heads * (qk_head_dim + v_head_dim) per attention layer (every layer,
// or a hybrid's '*' layers).
double ForwardAttentionFlopsPerToken(const ModelShape& shape, int64_t seq_length);

// Forward FLOPs per token of a hybrid model's Mamba-2 scans (0 without Mamba layers), counted
// as Megatron-LM counts them (megatron/training/training.py hybrid_flops / mamba_layer_flops:
// 7 * d_inner * state_dim per token and Mamba layer; its in_proj / out_proj are GEMMs above).
double ForwardSsdFlopsPerToken(const ModelShape& shape);

// Model FLOPs of one step of `sequences` sequences of seq_length tokens:
//   tokens * 3 * (ForwardGemmFlopsPerToken + ForwardAttentionFlopsPerToken
//                 + ForwardSsdFlopsPerToken).
// For a GPT (GELU, f = 4h, MHA) this equals Korthikanti et al. 2022 App. A:
//   72 * B * s * l * h^2 * (1 + s/(6h) + V/(12*l*h)).
double ModelFlopsPerStep(const ModelShape& shape, int64_t seq_length, double sequences);

// Hardware FLOPs: model FLOPs plus recomputation.
//   full: + one forward of every layer (not the logits): Narayanan et al. 2021 Eq. 3,
//         96 * B * s * l * h^2 * (1 + s/(6h) + V/(16*l*h)) for a GPT.
//   selective: + the attention-core term counted as Korthikanti et al. 2022 App. A do
//         (s/(3h) in place of s/(6h), i.e. + 12 * B * s^2 * h per layer), which reproduces
//         their Table 5 HFU/MFU ratios; nothing with FlashAttention, whose backward recompute
//         is part of the kernel (and of no framework's hardware-FLOP count).
double HardwareFlopsPerStep(const ModelShape& shape, int64_t seq_length, double sequences,
                            Recompute recompute, bool flash_attention = false);
// The same from ModelFlopsPerStep(shape, seq_length, sequences) already computed (`model_flops`).
double HardwareFlopsPerStep(const ModelShape& shape, int64_t seq_length, double sequences,
                            Recompute recompute, bool flash_attention, double model_flops);

// The papers' closed forms, for GPT shapes (tests compare the general counts against them).
// Narayanan et al. 2021 (SC21) Eq. 3, FLOPs per iteration with full recomputation.
double NarayananEq3Flops(double batch, double seq, double layers, double hidden, double vocab);
// Korthikanti et al. 2022 App. A model FLOPs per iteration.
double KorthikantiModelFlops(double batch, double seq, double layers, double hidden, double vocab);

}  // namespace stepcast

#endif  // STEPCAST_CORE_FLOPS_H_
