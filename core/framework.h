// File: core/framework.h
//
// What a training framework does to a layout: its attention kernel and that kernel's measured
// rates, how much HBM traffic its elementwise work and loss move, which communication it
// overlaps with compute and how much of it that hides, and how it shards (FSDP / ZeRO-3
// semantics). Values come from presets/frameworks/*.yaml (one per framework, every value with
// its source; docs/FRAMEWORKS.md); the defaults a framework gives unset job inputs are applied
// by the job codec (proto/codec.cc), which records each one as an AssumedInput.
#ifndef STEPCAST_CORE_FRAMEWORK_H_
#define STEPCAST_CORE_FRAMEWORK_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace stepcast {

// One measured attention-kernel rate (FlashAttention's FLOP convention: forward
// 4 * b * heads * s_q * s_kv * head_dim, halved when causal; backward 2.5x forward).
struct AttentionRate {
  std::string architecture;  // "ampere", "hopper", "blackwell", ...
  DType dtype = DType::kBF16;
  int64_t head_dim = 0;    // 0: any
  int64_t seq_length = 0;  // 0: any
  bool causal = true;
  double forward_flops_per_s = 0;
  double backward_flops_per_s = 0;
  std::string source;
  // Upper-case parts of hardware names this rate was measured on ("B300"); empty: the whole
  // architecture (framework.proto AttentionRate.hardware).
  std::vector<std::string> hardware;
  // A sliding-window measurement: the window in tokens, FLOPs counted over the band each query
  // visits (W (W + 1)/2 + (s - W) W score elements, cuDNN's SDPA benchmark); 0: the whole causal or
  // non-causal sequence (framework.proto AttentionRate.window).
  int64_t window = 0;
};

// A framework's table of attention rates, immutable and shared: a job copies its framework on
// every request (proto/codec.cc JobFromSpec), and a table of ~50 rates with their citations was
// ~6% of the request path's time in copies and frees (docs/PERFORMANCE.md, issue 30). Reads as a
// vector; ScaleRates (Transform) copies it first (copy on write); a new table is assigned whole.
class AttentionRateTable {
 public:
  AttentionRateTable() = default;
  // The rates are kept grouped by architecture (stable: the given order within one), so that a
  // lookup reads only its architecture's (AttentionKernel::Rate, once per prediction).
  AttentionRateTable(std::vector<AttentionRate> rates);  // NOLINT: implicit, as the vector was
  AttentionRateTable(std::initializer_list<AttentionRate> rates) : AttentionRateTable(std::vector<AttentionRate>(rates)) {}
  const AttentionRate* begin() const { return data_ ? data_->rates.data() : nullptr; }
  const AttentionRate* end() const { return data_ ? data_->rates.data() + data_->rates.size() : nullptr; }
  size_t size() const { return data_ ? data_->rates.size() : 0; }
  bool empty() const { return size() == 0; }
  const AttentionRate& operator[](size_t i) const { return data_->rates[i]; }
  // The rates of one architecture (exact name, as stored: lower case), [first, second).
  std::pair<const AttentionRate*, const AttentionRate*> OfArchitecture(std::string_view architecture) const;
  void clear() { data_.reset(); }
  // A private copy of the rates, `f` applied to each, shared from then on.
  template <typename F>
  void Transform(F f) {
    if (!data_) return;
    std::vector<AttentionRate> v = data_->rates;
    for (AttentionRate& r : v) f(r);
    *this = AttentionRateTable(std::move(v));
  }

 private:
  struct Data {
    std::vector<AttentionRate> rates;
    struct Range {
      std::string architecture;
      size_t first = 0, last = 0;
    };
    std::vector<Range> ranges;
  };
  std::shared_ptr<const Data> data_;
};

struct AttentionKernel {
  std::string kernel;  // "te-fused", "flash-attention-2", "sdpa-flash", "unfused", ...
  bool fused = true;   // flash-style: no s x s scores in HBM
  AttentionRateTable rates;

  struct Lookup {
    double forward_flops_per_s = 0;
    double backward_flops_per_s = 0;
    bool found = false;
    bool extrapolated = false;  // outside the measured sequence lengths, or dtype borrowed
  };
  // Rates for an architecture, dtype and sequence length: the rates of (architecture, dtype,
  // causal; the other kind marked extrapolated when the table has none)
  // interpolated linearly in log(seq_length) between measured lengths, held at the nearest end
  // outside them (marked extrapolated). FP8 falls back to BF16 rates (marked extrapolated).
  // `head_dim` (0: 128): the rates measured at the head dimension nearest it in log scale (ties to
  // the larger; a rate with head_dim 0 serves every one; another head dimension's is flagged): a
  // 64-wide head runs at ~0.70 of a 128-wide one forward and ~0.87 backward on Hopper
  // (FlashAttention-3 paper Fig. 5/6, cuDNN), while MLA's 192 / 128 heads run within 5% of 128
  // (cuDNN 9.19 on a GB200), so a table measured at 128 only serves all.
  // `window` > 0 (a sliding-window layer, tokens): the rates measured with a window (FLOPs over the
  // band), interpolated linearly in log(window) between the measured windows that bracket it; the
  // narrowest held below them (flagged); above the widest, toward the whole causal sequence's rate
  // at W = seq_length (a window as long as the sequence is the causal kernel). Windowed rates serve
  // only when measured at a head dimension as near `head_dim` as the whole-sequence rates'; else,
  // or without windowed rates, the band gets the whole-sequence rates, flagged (a narrow band runs
  // far below them: cuDNN 9.22 on a GB200 runs a 128-token window of 64-wide heads at 161 TFLOP/s
  // forward where a whole causal sequence of 128-wide heads runs at 856-1,335: docs/FRAMEWORKS.md).
  // found = false when the architecture has no rate. `hardware_name` (the job's Hardware::name,
  // any case): rates that name a part of it (AttentionRate::hardware) are used instead of the
  // architecture's general ones, at each step of the fallbacks above; rates naming other GPUs are
  // never used.
  Lookup Rate(const std::string& architecture, DType dtype, int64_t seq_length, bool causal = true,
              std::string_view hardware_name = {}, int64_t head_dim = 0, int64_t window = 0) const;
  // Every rate of the table (forward and backward FLOP/s) multiplied by `scale` > 0: the kernel on
  // a part clocked by that factor (hardware.overrides.compute_rate_scale; the interval's slow end of
  // a bounded profile, core/interval.h ComputeRatesScaled).
  void ScaleRates(double scale);
};

// What overlapping some communication with compute costs the step.
struct OverlapCost {
  double exposed_s = 0;     // communication not hidden: the compute waits for it
  double contention_s = 0;  // extra compute time: compute slowed while the hidden part ran beside it
  double total_s() const { return exposed_s + contention_s; }
};

// Exposed part of `comm_s` of communication issued in `chunks` equal pipelined pieces, each
// hidden behind the compute that follows its issue, against `window_s` of compute:
//   exposed = max(C/n, C - W (n-1)/n), clamped to [0, C]
// (n pieces in order on one stream: piece i can start when the compute has produced it, at
// i W/n, and the last piece always waits; for n = 1 nothing is hidden; as n grows, exposed ->
// max(0, C - W)). The same form is the FSDP prefetch of per-layer all-gathers (the first layer's
// gather is exposed) and Megatron-Core's bucketed gradient reduce (the last bucket is exposed).
// chunks < 1 counts as 1. Formula: docs/MODEL.md "Overlap".
double PipelinedExposed(double comm_s, double window_s, double chunks);

// Seconds of one GEMM of m x n x k split into `pieces` equal pieces along m (Transformer Engine
// userbuffers' chunked GEMMs), issued round-robin on `streams` compute streams so that up to
// `streams` pieces are in flight (comm_gemm_overlap.cpp `_stream_compute[i % size]`). The block
// scheduler issues a kernel's CTAs before the next kernel's, so the pieces still finish in order,
// each next one filling the SMs the previous one's last wave leaves: costed as rounds of `streams`
// pieces, each round one GEMM of its pieces' rows together, the last round the remaining pieces
// (between the pieces one after another and one GEMM of all rows); all on
// `sm_fraction` of the SMs (set_sm_margin: 1/sm_fraction as long). pieces and streams < 1 count as
// 1 (pieces rounded to a whole number); streams >= pieces: the unsplit GEMM. gemm_s(m, n, k):
// seconds of one GEMM (StepModel::EstimateGemm). Formula: docs/MODEL.md "TP overlap".
template <typename GemmSeconds>
double SplitGemmSeconds(const GemmSeconds& gemm_s, double m, double n, double k, double pieces, double streams,
                        double sm_fraction) {
  const double p = std::max(1.0, std::round(pieces));
  const double s = std::clamp(std::floor(streams), 1.0, p);
  const double f = sm_fraction > 0 ? sm_fraction : 1.0;
  const double full_rounds = std::floor(p / s), rest = p - full_rounds * s;
  double t = full_rounds * gemm_s(m * s / p, n, k);
  if (rest > 0) t += gemm_s(m * rest / p, n, k);
  return t / f;
}

// HBM bytes of the reduce kernel that ends Transformer Engine's ring-exchange reduce-scatter of an
// m x n GEMM output over `tp` ranks (comm_gemm_overlap.cpp CommOverlapP2PBase::split_overlap_rs ->
// reduce_bf16): it reads the tp partial m/tp x n outputs the ring delivered and writes their sum,
// m/tp x n, all in `element_bytes` (bf16: 2; the RS buffers are bf16, fp8_buf being for the
// all-gathers). Formula: docs/MODEL.md "TP overlap".
inline double RingReduceScatterReduceBytes(double m, double n, double tp, double element_bytes) {
  const double rows = m / std::max(1.0, tp);
  return (std::max(1.0, tp) * rows * n + rows * n) * element_bytes;
}

// HBM bytes of ring attention's merges over `cp` context-parallel ranks, per layer and micro-batch
// (Transformer Engine context_parallel.py AttnFuncWithCPAndKVP2P, cp_comm_type p2p, bf16, sbhd (Megatron's;
// sbhd), for the last rank: its dQ and output merges are whole at every step, which makes its total
// the largest (for equal Q and K+V widths 9cp units against rank 0's 9cp - 1; rank 0 merges more
// of dK / dV, whose steps are mostly halves on the last rank). Each
// step computes a partial output; the forward merges them with their log-sum-exp
// (flash_attn_fwd_out_correction_init: read one, write the output; flash_attn_fwd_out_correction,
// one fused kernel per further step: read the step's output, read and write the output), and
// concatenates K and V into the ring's send buffer (torch.cat: read both, write both). The backward
// copies K, V into its buffer again (p2p_comm_buffers[0][0].copy_), and accumulates each step's dQ
// (copy, then an add per step: read both, write one) and dK, dV (the last rank: copy of one half
// at step 0, adds of one half at steps 1 .. cp-2, an add of the whole at step cp-1). Not counted:
// bshd's .contiguous() of the K / V halves with micro-batches > 1, the fused backend making a
// non-contiguous V contiguous (both ~(K+V) per step at most); the dQ accumulation that runs inside
// the backward exchange's window is counted outside it (conservative).
// q_bytes / o_bytes / kv_bytes: the rank's Q, O and K + V tensors (its s/cp tokens; K + V at the KV
// heads' width). cp < 2: none. Formula: docs/MODEL.md "CP".
struct CpRingMerge {
  double forward_bytes = 0, backward_bytes = 0;
};
inline CpRingMerge CpRingMergeBytes(double q_bytes, double o_bytes, double kv_bytes, int64_t cp) {
  if (cp < 2) return {};
  const double n = static_cast<double>(cp);
  CpRingMerge m;
  m.forward_bytes = (2 + 3 * (n - 1)) * o_bytes + 2 * kv_bytes;
  const double dkv = 1 + 1.5 * (n - 2) + 3;  // in K + V bytes: copy of a half, adds of halves, one whole add
  m.backward_bytes = 2 * kv_bytes + (2 + 3 * (n - 1)) * q_bytes + dkv * kv_bytes;
  return m;
}

// The compute slowed by communication running beside it: compute of alone-duration x overlapped
// by communication takes x (1 + slowdown), so `hidden_s` of hidden communication adds
// hidden_s * slowdown / (1 + slowdown) to the step. slowdown >= 0.
double ContentionCost(double hidden_s, double slowdown);

// Overlap of one kind of communication with compute (framework.proto OverlapMechanism).
struct OverlapMechanism {
  bool supported = false;
  double efficiency = 0;  // legacy: 0..1, used only when no chunking is given
  // Chunking (see framework.proto): DDP buckets, per layer, or fixed chunks per operation.
  int64_t bucket_min_params = 0;
  int64_t bucket_params_per_dp_rank = 0;
  double bucket_bytes = 0;
  bool per_layer = false;
  int32_t chunks = 0;
  bool chunks_per_group_rank = false;
  bool low_confidence = false;
  double compute_sm_fraction = 0;  // 0: the profile's measured contention
  bool steady_state_only = false;  // pipeline p2p: warm-up / cool-down transfers exposed
  bool needs_vpp = false;          // pipeline p2p: overlapped only with VPP > 1
  bool concurrent = false;         // beside independent compute: exposed = max(0, C - W)
  bool backward_only = false;      // the forward's communication stays exposed
  bool ag_ring_first_chunk_local = false;  // TE userbuffers: AG ring (none exposed) + RS pipeline
  int32_t compute_streams = 0;             // TE userbuffers: split GEMM pieces on this many streams
  bool fp8_rs_ring_exchange = false;       // TE userbuffers: with fp8 GEMMs the RS half is a ring too

  // True when the chunking is given (the structured form).
  bool Structured() const {
    return bucket_min_params > 0 || bucket_params_per_dp_rank > 0 || bucket_bytes > 0 || per_layer || chunks > 0 ||
           chunks_per_group_rank || steady_state_only || concurrent || ag_ring_first_chunk_local;
  }
  // Legacy form: exposed seconds of `comm_s` overlapped with `compute_s` of independent work,
  //   exposed = comm - efficiency * min(comm, compute).
  double Exposed(double comm_s, double compute_s) const;
  // Number of DDP-style buckets of `params` parameters (elements) communicated in
  // `bytes_per_param` bytes each over a group of `dp` ranks: ceil(params / bucket), bucket =
  // max(bucket_min_params, bucket_params_per_dp_rank * dp) parameters or bucket_bytes bytes
  // (the larger count when both are given); 1 when no bucket size is given.
  double Buckets(double params, double bytes_per_param, int64_t dp) const;
  // The slowdown of compute beside this mechanism's communication: from compute_sm_fraction
  // when set (1/f - 1), else `measured` (the profile's contention for its kind of communication).
  double Slowdown(double measured) const {
    return compute_sm_fraction > 0 ? 1.0 / compute_sm_fraction - 1.0 : measured;
  }
};

struct OverlapModel {
  OverlapMechanism tp_comm, dp_grad_reduce, dp_param_gather, fsdp_param_gather, pp_p2p, cp_ring,
      ep_all_to_all;
  // The backward's TP communication beside the backward GEMMs when tp_comm is off (framework.proto).
  OverlapMechanism tp_comm_backward;
};

struct ShardingModel {
  bool reshard_after_forward = true;
  bool gather_once_per_step_with_pp = false;
  bool reduce_once_per_step_with_accumulation = false;
  bool sharded_params_are_master = false;  // FSDP: fp32 shards, no low-precision copy
  // FSDP2's copies on the compute stream around each collective (framework.proto ShardingModel):
  // all-gather copy-out (read + write of the gathered parameters) and reduce-scatter copy-in
  // (read the unsharded gradients, write the reduce-dtype input).
  bool gather_copy_out = false;
  bool reduce_scatter_copy_in = false;
  // FSDP1 BACKWARD_POST: the backward's all-gathers are not prefetched (framework.proto).
  bool backward_gathers_exposed = false;
  // ZeRO-2 is FSDP SHARD_GRAD_OP: per-unit gathers every forward, kept for the backward (framework.proto).
  bool zero2_is_shard_grad_op = false;
  // ZeRO-2 reduce-scatters every micro-batch, not once per step (framework.proto).
  bool zero2_reduces_every_micro_batch = false;
  // HSDP: the replica all-reduce follows every micro-batch's reduce-scatter, not only the last
  // one's (framework.proto; PyTorch FSDP's default without set_requires_all_reduce(False)).
  bool replica_all_reduce_every_micro_batch = false;
  // Memory beyond the sharded states (framework.proto ShardingModel fields 30-36; core/memory.cc).
  double gathered_units = 0;            // units of unsharded parameters alive; 0: 2
  double gather_prefetch_params = 0;    // prefetch window beyond the current unit, elements
  double max_live_params = 0;           // cap on gathered parameters alive, elements; 0: none
  double reduce_scatter_units = 0;      // units of reduce-scatter input (grad-reduce dtype) alive
  double grad_bucket_params = 0;        // flat gradient bucket, elements (grad-reduce dtype)
  bool accumulated_grad_dtype_set = false;
  DType accumulated_grad_dtype = DType::kFP32;  // unsharded grads held across micro-batches
};

// One grouped linear's launches for a GEMM dtype (framework.proto ExpertGemmLaunches).
struct ExpertGemmLaunches {
  DType gemm_dtype = DType::kBF16;
  double kernels_forward = 0, kernels_per_expert_forward = 0;
  double kernels_backward = 0, kernels_per_expert_backward = 0;
  // Of the per-expert kernels, the cuBLAS(Lt) GEMM calls (LaunchModel::gemm_call_overhead_s each).
  double gemms_per_expert_forward = 0, gemms_per_expert_backward = 0;
};

enum class MoeHostSync { kNone, kEveryLayer, kWithExpertParallel };

// An MoE layer's host work beyond a dense layer's (framework.proto MoeLaunchModel).
struct MoeLaunchModel {
  double kernels_before_sync = 0, kernels_after_sync = 0;
  MoeHostSync host_sync = MoeHostSync::kNone;
  double grouped_linears = 0;
  std::vector<ExpertGemmLaunches> expert_gemms;  // empty: an MoE layer launches as a dense one
  // The eager fc2-bias loop's kernels per local expert (with Framework::expert_bias_eager and a
  // biased model), issued from Python.
  double bias_loop_kernels_per_expert_forward = 0, bias_loop_kernels_per_expert_backward = 0;
  // Router and preprocess counts (framework.proto MoeLaunchModel 9-11, 13); 0: none.
  double group_limited_router_kernels = 0;
  double fused_router_kernels = 0;
  double flex_fused_router_kernels_before_sync = 0;
  double preprocess_kernels = 0;
  // The kernels an MoE layer's forward launches before the host waits for the token counts, a
  // count (host seconds = count x kernel_launch_overhead_s): the router's (the softmax router's
  // kernels_before_sync - preprocess_kernels, or group_limited_router_kernels; with the fused
  // router at most fused_router_kernels) + the EP preprocess (preprocess_kernels, none with a flex
  // dispatcher, which runs it inside its kernels); fused with a flex dispatcher at most
  // flex_fused_router_kernels_before_sync. Counts: NVIDIA's DeepSeek-V3 GB200 write-up (Megatron-LM
  // docs/discussions/deepseek-v3-gb200-optimization Sec. 2.1.4, 2.2.1) and the preset's hand counts.
  double RouterKernels(bool group_limited_router, bool router_fusion) const;
  double KernelsBeforeSync(bool group_limited_router, bool router_fusion, bool flex_dispatcher) const;
};

// Host cost of launching a layer's kernels (framework.proto LaunchModel).
struct LaunchModel {
  bool cuda_graphs = false;
  double kernel_launch_overhead_s = 0;   // per kernel the framework's code issues (Python, dispatch, launch)
  double looped_launch_overhead_s = 0;   // per kernel launched from a C++ loop inside one op (the launch call)
  // Per cuBLAS(Lt) GEMM call from such a loop (descriptors, heuristic query, runtime calls, launch),
  // on an x86 host; 0: the GEMM is a looped launch (looped_launch_overhead_s, x86 cost everywhere).
  double gemm_call_overhead_s = 0;
  double scaled_rope_kernels_forward = 0, scaled_rope_kernels_backward = 0;  // eager RoPE's extra kernels a layer
  int64_t kernels_per_layer_forward = 0;
  MoeLaunchModel moe;
};

// A framework as the model uses it.
struct Framework {
  std::string name = "megatron-core";
  std::string display_name;
  AttentionKernel attention;
  double elementwise_traffic_factor = 1.0;
  double cross_entropy_bytes_per_logit = 0;  // 0: the fused accounting of core/step_time.cc
  double loss_peak_bytes_per_logit = 0;      // memory at the loss's peak; 0: 4 (fp32 softmax)
  // An MoE layer's fc2 expert bias added in an eager loop per local expert (framework.proto
  // ElementwiseModel.expert_bias_eager; only for models with linear_bias).
  bool expert_bias_eager = false;
  // GPT-OSS's GLU clamp run as eager ops (ElementwiseModel.expert_clamp_eager; only for models
  // with activation_clamp).
  bool expert_clamp_eager = false;
  // RoPE as eager ops for a model with a YaRN attention factor (ElementwiseModel.scaled_rope_eager).
  bool scaled_rope_eager = false;
  // The input embedding's gather, TP reduce and dense gradient added to the gradient buffer
  // (ElementwiseModel.dense_embedding_grad; Megatron-Core).
  bool dense_embedding_grad = false;
  // torchao Float8Linear's fp8 cast of the weight at every use, forward and backward
  // (ElementwiseModel.fp8_weight_cast_every_use; core/step_time.cc GemmIn).
  bool fp8_weight_cast_every_use = false;
  OverlapModel overlap;
  ShardingModel sharding;
  std::string default_schedule = "1f1b";
  std::vector<std::string> selective_recompute_modules = {"core_attn"};
  LaunchModel launch;
  // Megatron-Core <= core_r0.9 expert layout (framework.proto MoeModel): EP groups stride TP x CP.
  bool expert_parallel_after_cp = false;
  // The input embedding and a learned position table looked up as one-hot matmuls (framework.proto
  // FrameworkSpec.embedding_lookup_matmul; Paxml / Praxis).
  bool embedding_lookup_matmul = false;
  std::vector<std::string> sources;
};

// An input the job did not state and the value used for it.
struct AssumedInput {
  std::string field;   // job field path, "training.sharding"
  std::string value;   // as written in a job file
  std::string source;  // "framework megatron-core default: <source>"
};

}  // namespace stepcast

#endif  // STEPCAST_CORE_FRAMEWORK_H_
