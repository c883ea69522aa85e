// File: core/step_time.h
//
// Step time of a training job on its rate profile, with the breakdown by term.
//
// Method (per micro-batch, per transformer layer, on one GPU of the slowest pipeline stage):
//  * every GEMM (QKV/MLA projections, attention output, MLP or MoE experts, logits) and the
//    attention core is a roofline: time = max(FLOPs / rate, bytes / HBM bandwidth), the rate
//    from the profile by dtype and shape (Williams et al. 2009, "Roofline"); backward = 2x
//    forward (dgrad + wgrad); fused attention (FlashAttention) backward = 2.5x forward FLOPs
//    (Dao 2023, arXiv:2307.08691 Sec. 4), causal half executed;
//  * elementwise work (norms, residual adds, dropout, activations, rotary, fp8 casts, MoE
//    permutes, cross entropy) is bytes / HBM bandwidth, backward 2x forward;
//  * recomputation adds the forward of every layer (full) or of the attention core (selective);
//  * TP: per layer 2 all-reduces forward and 2 backward of s*b*h activations, or with sequence
//    parallelism 2 all-gathers + 2 reduce-scatters each way (Korthikanti et al. 2022 Sec. 4.2.2);
//    CP: ring exchange of K,V (cp-1 steps forward, 2x backward) overlapped with attention;
//    EP: 2 all-to-alls forward (dispatch, combine) and 2 backward per MoE layer;
//    PP: one send/recv of the stage output per micro-batch and chunk, each way;
//    each costed by the profile's collective model for the group's scope (core/job.h
//    PlaceGroups); groups spanning nodes with k members per node stripe over k NICs;
//  * step = m x (slowest stage per micro-batch) + bubble (p-1)/v x (average stage)
//    (Narayanan et al. 2021 Sec. 2.2, interleaved 1F1B) + exposed DP communication (overlapped
//    with the last backward / next forward when overlap_dp_comm) + optimizer step (bytes / HBM).
#ifndef STEPCAST_CORE_STEP_TIME_H_
#define STEPCAST_CORE_STEP_TIME_H_

#include <memory>
#include <string>
#include <vector>

#include "core/job.h"

namespace stepcast {

// Seconds per term; the terms add up to the step time.
struct StepBreakdown {
  double gemm_s = 0;
  double attention_s = 0;
  double elementwise_s = 0;
  double recompute_s = 0;
  double tp_comm_s = 0;
  double cp_comm_s = 0;
  double ep_comm_s = 0;
  double pp_comm_s = 0;
  double dp_comm_s = 0;
  double pipeline_bubble_s = 0;
  double optimizer_s = 0;
  double launch_overhead_s = 0;  // host kernel-launch time beyond the GPU time (eager, no CUDA graphs)
  double Total() const {
    return gemm_s + attention_s + elementwise_s + recompute_s + tp_comm_s + cp_comm_s +
           ep_comm_s + pp_comm_s + dp_comm_s + pipeline_bubble_s + optimizer_s + launch_overhead_s;
  }
};

struct StepTimeEstimate {
  StepBreakdown breakdown;
  double step_time_s = 0;
  // The same step split by limiting resource (adds up to step_time_s).
  double compute_bound_s = 0;   // ops whose FLOP time exceeds their byte time
  double memory_bound_s = 0;    // elementwise, optimizer, and GEMMs under the roofline ridge
  double network_intra_node_s = 0;
  double network_inter_node_s = 0;
  double bubble_s = 0;
  // Per GPU per step (executed work, incl. recompute), for seed 000's intensity test.
  double executed_flops = 0;
  double hbm_bytes = 0;
  double machine_balance_flops_per_byte = 0;  // GEMM rate / HBM bandwidth of the profile
  std::vector<std::string> warnings;
};

// The Mamba-2 SSD chunk scan's rate (a hybrid's Mamba layers, StepModel::MambaMixer), the
// published measurements at a stated shape:
// - kSsdPeakFraction (the point estimate): mamba_ssm's Triton chunk-scan forward kernel
//   (`mamba_ssm.ops.triton.ssd_chunk_scan._chunk_scan_fwd`, the kernel of the SSD Megatron-Core
//   runs; mamba-ssm 2.2.6.post3, Triton 3.5.0) at about 91 TFLOP/s on an H800 SXM (989.4 TFLOP/s
//   dense bf16) at batch 8, 80 heads, 1 group, chunk 256, head dim 64, state 128, 8K-32K tokens
//   (90-91 there; 106-110 at 1K-4K), by the count 2 B L Q H P / 2 + 2 B L H P N used here: the
//   Triton bars of tile-ai/tilelang benchmark/mamba2/mamba_benchmark_result.png (the chart as of
//   @4f3523d, read off: approximate; the baseline's versions and its `chunk_scan_triton` =
//   `_chunk_scan_fwd` from @95e7bc3, #1131: README "Compare with Baselines",
//   benchmark_mamba_chunk_scan.py), beside the tuned TileLang kernel's 134-136 (its README's
//   table, kSsdTunedFlopsPerS), as a fraction of the GPU's dense bf16 peak. Until 2026-11-29 the
//   point was the tuned kernel's, which Megatron-Core does not run;
// - kSsdTritonFlopsPerS: mamba_ssm's whole mamba_chunk_scan_combined forward (its five Triton
//   kernels), bf16, batch 16, 8 heads of 128, 8 groups of state 128, chunk 64, 2K-16K tokens:
//   0.76 ms per 1K tokens (6.25 ms at 8K; fla-org/flash-linear-attention PR #50,
//   benchmarks/ops/benchmark_simple_gla_vs_mamba2.py @3e820d1, mamba-ssm 2.2.2, triton 2.3.1; its
//   GPU is not stated), 15.1 TFLOP/s by the same count.
// The point is one kernel of the five (the others are not measured alone): the step leans fast, and the
// interval's upper end holds the step with the scan at kSsdTritonShare of the point rate (the
// whole op's measurement over the kernel's: the GPU of the first is not stated, so its share, not
// its absolute rate, is carried to other GPUs).
inline constexpr double kSsdTunedFlopsPerS = 135e12;
inline constexpr double kSsdTritonChunkScanFlopsPerS = 91e12;
inline constexpr double kSsdPeakFraction = kSsdTritonChunkScanFlopsPerS / 989.4e12;
inline constexpr double kSsdTritonFlopsPerS = 15.1e12;
inline constexpr double kSsdTritonShare = kSsdTritonFlopsPerS / kSsdTritonChunkScanFlopsPerS;

// HBM bytes per element that quantizing one bf16/fp16 tensor (`input_bytes` per element) to fp8
// moves under Transformer Engine's recipe `r` (transformer_engine/pytorch/csrc/quantizer.cpp,
// common/cast): the reads, then the row-wise fp8 copy the forward GEMM reads, and with
// `column_wise` the copy the backward GEMMs read:
// - reads: tensorwise (Float8CurrentScaling) an amax pass, then the cast: 2 e; delayed
//   (DelayedScaling: scale from the amax history, the amax taken inside the cast) and mxfp8
//   (MXFP8BlockScaling: per-block scales computed in the cast): e;
// - the row-wise copy: 1 byte, mxfp8 + one E8M0 scale per 32 elements;
// - the column-wise copy: mxfp8 a second 1 + 1/32 (scaled along the other axis); per-tensor
//   scaling a transposed copy (1 byte) only where the GPU's fp8 GEMMs take TN layouts alone
//   (`fp8_transpose`: Hopper; Blackwell runs non-TN fp8 GEMMs and reuses the row-wise data:
//   quantizer.cpp with_transpose = columnwise_usage && !is_non_tn_fp8_gemm_supported()).
// So in training (both copies) on Hopper: 2 e + 2, e + 2, e + 2 + 2/32; on Blackwell 2 e + 1,
// e + 1, e + 2 + 2/32. torchao's row-wise (its own casts, any GPU): the forward cast keeps a bf16
// copy that the backward casts along the other axis, 3 e + 2 (torchao roofline_utils.py: 5 + 3). Not modelled: TE's fused paths (a LayerNormLinear's norm writing fp8 or
// taking the amax itself, activation + quantize kernels), which move fewer bytes. Checked against
// TE's own benchmark (tests/gemm_model_test.cc GemmModel.TeGemmProfilingPerLayerTimes).
double Fp8QuantizeBytesPerElement(Fp8Recipe r, double input_bytes, bool column_wise, bool fp8_transpose);

// The share of the profile's HBM bandwidth Transformer Engine's quantize kernels reach, by recipe
// and GPU generation: TE's own benchmark (docs/examples/gemm_profiling/gemm_profiling.rst
// @d0067d0: a 5B layer's 12 te.Linear calls, autocast minus --pre-quantize) against
// Fp8QuantizeBytesPerElement's bytes at the b300 preset's 7.17 TB/s: on a B300 tensorwise
// (current scaling: amax, scale and cast kernels) 1.732 / 2.335 ms = 0.742 and MXFP8 1.265 /
// 1.823 = 0.694 of it; delayed 1.049 and, on an H200 NVL, tensorwise 0.977 and delayed 1.003:
// taken as 1 (within 5%, the benchmark's repeat spread). tests/gemm_model_test.cc recomputes them.
double Fp8QuantizeBandwidthFraction(Fp8Recipe r, bool blackwell);

// Requires ValidateJob(job).ok().
StepTimeEstimate EstimateStepTime(const Job& job);

// One transformer layer's time per micro-batch by module, as a trace's module annotations
// divide it (the DeepSeek-V3 profile's attn / mlp / dispatch / combine; tests/data/real_data/
// deepseek_v3_modules.json): seconds on one GPU.
//   attention: input norm, QKV (or MLA) projections, RoPE, attention core, output projection,
//              residual add (half of the layer's norm and residual traffic);
//   mlp: the post-attention norm, MLP or router + experts + shared experts, activations,
//        permutes, residual add;
//   tp / ep / cp: the layer's communication as exposed by the framework's overlap (EP: dispatch
//   and combine together).
// Backward includes dgrad and wgrad (the trace's B + W). Recompute and the launch floor are not
// included. `moe_layer` false gives a dense layer (an MoE model's first dense layers). A hybrid
// model's layers are one kind each: this gives the transformer layer of its dimensions, which it
// does not have (the DeepSeek-V3 trace comparison is its only use).
struct LayerModuleTimes {
  double attention_fwd_s = 0, attention_bwd_s = 0;
  double mlp_fwd_s = 0, mlp_bwd_s = 0;
  // The GEMMs' share of the above (a trace shows what SMs they ran on).
  double attention_gemm_fwd_s = 0, attention_gemm_bwd_s = 0;
  double mlp_gemm_fwd_s = 0, mlp_gemm_bwd_s = 0;
  double tp_fwd_s = 0, tp_bwd_s = 0;
  double ep_fwd_s = 0, ep_bwd_s = 0;
  // The EP dispatch + combine transfer time of one direction before any overlap.
  double ep_transfer_s = 0;
  double cp_s = 0;
};
LayerModuleTimes EstimateLayerModules(const Job& job, bool moe_layer);

// For layout search (core/search.h): the per-micro-batch costs of a dense layer, an MoE layer
// and the output layer (opaque). They read the model, hardware, profile, framework, model
// choices, precision, seq_length, micro_batch_size, flash_attention, dropout, overlap_tp_comm,
// cuda_graphs and cuda_graph_scope, moe_router_fusion, the MoE dispatcher and padding,
// fp8_param_gather (torchao's weight casts, ElementwiseModel.fp8_weight_cast_every_use), TP, CP, EP,
// ETP, sequence parallelism and GPUs per node (and the hardware's host_overhead_ratio with the rest of
// the hardware), not PP, VPP, DP, the schedule,
// sharding, HSDP replicas, recompute or overlap_dp_comm, so one computation serves every job
// that differs from `job` only in those. `gemm_model`: GemmModel::Create(job.hardware,
// job.profile) built once by the caller, or nullptr to build it here.
struct StepLayerCosts;
class GemmModel;
std::shared_ptr<const StepLayerCosts> ComputeStepLayerCosts(const Job& job, const GemmModel* gemm_model = nullptr);
// EstimateStepTime with the layer costs given: step time, breakdown and split equal, bit for
// bit, to EstimateStepTime(job) when `layers` came from a job that shares the inputs listed
// above (tests/search_test.cc checks random layouts); warnings raised while computing the layer
// costs (extrapolated GEMM rates, datasheet links) are not repeated.
StepTimeEstimate EstimateStepTime(const Job& job, const StepLayerCosts& layers);

}  // namespace stepcast

#endif  // STEPCAST_CORE_STEP_TIME_H_
