// File: core/memory.h
//
// Per-GPU memory of a training job: weights, gradients, optimizer states, activations,
// communication buffers, CUDA context and workspaces, against the device's capacity.
#ifndef STEPCAST_CORE_MEMORY_H_
#define STEPCAST_CORE_MEMORY_H_

#include <array>
#include <string>
#include <vector>

#include "core/job.h"

namespace stepcast {

// Activation bytes of ONE transformer layer for one micro-batch on one GPU, as stored for the
// backward pass. Korthikanti et al. 2022 (arXiv:2205.05198) Sec. 4 and Table 2, generalised:
//   per layer, with e = 2-byte activations, t = TP, s = tokens per CP rank, b = micro-batch:
//     attention  2sbh (QKV in) + 2sb(a + 2kv)d (Q, K, V) + 2sbad (proj in) [+ sbh mask]
//     core       2abs*s_kv (softmax) [+ abs*s_kv mask + 2abs*s_kv dropout]; 0 with flash
//     MLP        2sbh (in) + GELU 4sbf | SwiGLU 6sbf [+ sbh mask]; MoE: x top_k experts + shared
//     norms      4sbh
//   The parts Korthikanti call "10" (norm and GEMM inputs, masks) are split by TP only with
//   sequence parallelism; the rest by TP always. For GPT (f=4h, MHA, dropout) this reproduces
//   Table 2: sbh(10 + 24/t + 5as/(ht)) without SP, sbh/t(34 + 5as/h) with SP, and
//   selective recompute drops the core term: sbh(10 + 24/t) / sbh*34/t.
//   Full recompute keeps only the layer input: 2sbh (/t with SP).
//   Selective recompute drops the saved tensors of the recomputed modules (Megatron-Core
//   --recompute-modules; "core_attn" when none are given, Korthikanti's selective):
//     core_attn: the core term (flash: its fp32 log-sum-exp); mlp / mlp_up: the MLP internals;
//     moe_act: the experts' activation outputs; layernorm: the norm outputs (QKV and MLP GEMM
//     inputs); mla_up_proj: the heads made by MLA's up projections (latents kept); moe: the
//     MoE block's internals; shared_experts: the shared experts' internals;
//     activation_functions (op-level SAC): activation and norm outputs.
//   fp8 GEMMs save their inputs in fp8 (Transformer Engine Linear/LayerNormLinear keep the fp8
//   cast of the input for wgrad): QKV, projection, MLP and FC2 inputs at 1 byte.
//   torchtitan's op SAC (every_second_mm; torchtitan/distributed/activation_checkpoint.py): of
//   two consecutive up projections one output is saved (dense and shared-expert FFNs), MLA's up
//   projections (its 2nd and 4th mm) are recomputed, and routed experts keep only the
//   dispatched tokens (grouped GEMMs are not in its save list; the all-to-all output is).
//   A hybrid's layer (hybrid_kind) holds one sub-layer: its norm's input and output and one
//   mask, and that sub-layer's terms above; a Mamba-2 layer (Megatron-Core mamba_mixer.py
//   _ssm_training, memory-efficient path) keeps the contiguous in_proj output [z, x, B, C, dt]
//   (mamba_split_conv1d_scan_combined saves it and recomputes the conv in backward), the scan's
//   output, the norm's input and out_proj's input (dt and its cumulative sum are recomputed).
struct LayerActivationInput {
  double seq_tokens = 0;     // s: tokens of one sequence on this CP rank (seq_length / cp)
  double kv_tokens = 0;      // keys each query attends to (seq_length)
  double micro_batch = 1;    // b
  double tp = 1;             // t
  bool sequence_parallel = false;
  bool flash_attention = false;
  bool dropout = false;
  Recompute recompute = Recompute::kNone;
  double bytes_per_activation = 2;
  bool moe_layer = false;
  uint32_t recompute_modules = 0;  // RecomputeModule bits (selective); 0: core_attn
  double bytes_per_gemm_input = 0;             // 0: bytes_per_activation (fp8 GEMMs: 1)
  double bytes_per_norm_input = 0;             // the two norms' inputs (residual stream); 0: bytes_per_activation
  double expert_tp = 0;                        // ETP for expert internals; 0: tp
  double moe_tokens_factor = 1;                // rows per expert over its balanced share (capacity padding)
  bool offload_moe_act_input = false;          // the experts' fc1 output is in host memory (offload_modules)
  bool offload_expert_fc1_input = false;       // the experts' input rows are in host memory
  // A hybrid model's layer kind ('M' Mamba-2, '*' attention, '-' MLP, 'E' MoE: one sub-layer
  // with one norm); 0: a transformer layer (attention + MLP, or + MoE with moe_layer).
  char hybrid_kind = 0;
};
double LayerActivationBytes(const ModelShape& shape, const LayerActivationInput& in);

// Per-GPU memory of a pipeline stage (first or last; EstimateMemory reports the larger).
//   weights: local parameters x params dtype (/ dp*cp under ZeRO-3);
//   gradients: x grads dtype (/ dp*cp under ZeRO-2/3);
//   optimizer: Adam/AdamW master + 2 moments (SGD: master + momentum; 8-bit moments 1 byte + 
//              2% block scales), / dp*cp under ZeRO-1+ (Megatron distributed optimizer);
//              no separate master copy when master dtype == params dtype;
//   activations: layers per stage x in-flight micro-batches (InFlightMicroBatches: 1F1B pp on
//              the first stage and 1 on the last, interleaved x (1 + (p-1)/(p*v)), GPipe m,
//              DualPipe pp+1; Megatron-LM theoretical_memory_usage.py) + embedding output (first)
//              + the loss at its peak (last): Framework::loss_peak_bytes_per_logit per logit
//              (0: 4, the fp32 softmax of a vocab-parallel cross entropy; eager
//              F.cross_entropy(logits.float()): 12) + the recompute working set of one layer
//              (full recompute: its full activations; selective: what its recompute rebuilt),
//              less the offloaded fraction;
//   communication buffers: DP gradient buckets (2 x 40M params x grad dtype, Megatron DDP
//              default bucket; an FSDP framework that gives its unit structure instead: the
//              unit whose gradients are being computed (params dtype) + ShardingModel.
//              reduce_scatter_units units of reduce-scatter input (grad-reduce dtype) + its flat
//              grad_bucket_params bucket) + 64 MiB of NCCL buffers per communicator in use;
//   CUDA context: 0.5 GiB; workspaces: 32 MiB cuBLAS workspace per stream x 2 (Hopper size,
//              cuBLAS docs), + ZeRO-3 gathered parameters: one layer + max((gathered_units - 1)
//              layers, gather_prefetch_params), capped by max_live_params (gathered_units 0: 2,
//              FSDP's current and next unit), or the whole stage when PP gathers once per step;
//   ZeRO-3 gradients reduced once per step (no_sync / set_requires_gradient_sync(False), or PP
//              gathering once): the stage's unsharded gradients in ShardingModel.
//              accumulated_grad_dtype (default the grad-reduce dtype) instead of the shards.
//   The FSDP fields and their sources: framework.proto ShardingModel 30-36, docs/FRAMEWORKS.md
//   "FSDP memory".
struct MemoryItemBytes {
  const char* name = "";
  double bytes = 0;
};
struct MemoryEstimate {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_states_bytes = 0;
  double activations_bytes = 0;
  double communication_buffers_bytes = 0;
  double cuda_context_bytes = 0;
  double workspace_bytes = 0;
  double total_bytes = 0;
  double capacity_bytes = 0;
  bool fits = false;           // total <= capacity
  // Over the capacity by no more than the model's uncertainty (kMemoryUncertainty): it may or
  // may not fit; a pre-flight warns instead of refusing (docs/MODEL.md "Memory: how sure").
  bool tight = false;
  double headroom_bytes = 0;  // capacity - total
  const char* stage = "only";  // the pipeline stage reported: "first", "last" or "only"
  // The seven terms above by name, in this order (a fixed array: no allocation per estimate).
  std::array<MemoryItemBytes, 7> items{};
};
// Relative uncertainty of the per-GPU memory estimate: published comparisons of analytic
// Megatron memory estimators with measured peaks span -0.5% (Megatron-LM PR #482: Llama 2 7B,
// 68.8 GB estimated vs 69.1 measured) to +15% (aliyun/aicb PR #36: Qwen 7B, estimate above
// nvidia-smi), and torchtitan's measured peaks (docs/performance.md) run above ours for eager
// PyTorch; an estimate within 5% over the capacity is therefore "tight", not "does not fit".
inline constexpr double kMemoryUncertainty = 0.05;

// The more loaded of the first and last pipeline stages (the first holds the most in-flight
// micro-batches and the embedding; the last holds the output head and the loss's fp32 softmax).
MemoryEstimate EstimateMemory(const Job& job);
// One stage: the first (last_stage false) or the last.
MemoryEstimate EstimateStageMemory(const Job& job, bool last_stage);

// The per-layer activation bytes the stage estimates use: LayerActivationBytes of a dense and an
// MoE layer mixed by the model's MoE fraction, under the job's recompute (per_layer), without
// recompute (kept: only for full recompute of recompute_num_layers > 0 layers), and the working
// set while one layer is recomputed (full: its full activations; selective: its activations
// without recompute less those it stores, the larger of a dense and an MoE layer). They read the model, the precision,
// seq_length, micro_batch_size, flash_attention, dropout, recompute (and its modules), TP, CP,
// ETP and sequence parallelism, not PP, VPP, DP, EP, sharding or the schedule: layout search
// (core/search.cc) computes them once and reuses them across the other dimensions.
struct LayerActivationTerms {
  double dense_layer_bytes = 0;       // one dense layer, one micro-batch, as stored
  double moe_layer_bytes = 0;         // one MoE layer (= dense for a dense model)
  double kept_dense_layer_bytes = 0;  // without recomputation (partial full recompute)
  double kept_moe_layer_bytes = 0;
  double recompute_working_set_bytes = 0;  // full: a layer's full activations; selective: what its recompute rebuilds
  // One MTP depth's block as stored (a transformer's: a layer of its last layer's type; a
  // hybrid's: its hybrid_mtp_pattern's layers); 0 when the job trains no MTP depth.
  double mtp_block_bytes = 0;
};
LayerActivationTerms ComputeLayerActivationTerms(const Job& job);
// EstimateMemory with the terms given: equal, bit for bit, to EstimateMemory(job) when `terms`
// is ComputeLayerActivationTerms of a job with the same inputs listed above.
MemoryEstimate EstimateMemory(const Job& job, const LayerActivationTerms& terms);
// One stage's memory for given per-layer activation terms (all zero: the stage's memory
// without per-layer activations, a lower bound used by the layout search).
MemoryEstimate EstimateStageMemory(const Job& job, bool last_stage, const LayerActivationTerms& terms);

// Parameters held by one GPU of the most loaded stage (before ZeRO sharding), split into the
// dense part (sharded by TP) and the expert part (sharded by EP x TP). The last stage also holds
// the MTP modules (Megatron-Core puts them there): MtpModulesWithWeights(depths) of them.
struct LocalParameters {
  double dense = 0;
  double expert = 0;
  double total() const { return dense + expert; }
};
// The layers of the first (or last) pipeline stage, dense and MoE by position: chunk c holds
// layers [c*ceil(L/(pp*vpp)), ...), rank r the chunks r, r+pp, r+2pp, ... (Megatron-Core's
// interleaved assignment); MoE layers per the model's first_dense_layers and layer_freq.
struct StageLayers {
  int64_t dense = 0, moe = 0;
  int64_t total() const { return dense + moe; }
};
StageLayers LayersOfStage(const Job& job, bool last_stage);

LocalParameters LocalParameterCount(const Job& job);  // the first stage
LocalParameters LocalParameterCount(const Job& job, bool last_stage);
// The same from the model's counts already made (CountParameters of the resolved shape): the
// step model and the memory estimate count once per prediction.
LocalParameters LocalParameterCount(const Job& job, bool last_stage, const ParameterCounts& counts);

}  // namespace stepcast

#endif  // STEPCAST_CORE_MEMORY_H_
