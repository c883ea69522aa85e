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

#include <cstdint>
#include <string>
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
};

struct AttentionKernel {
  std::string kernel;  // "te-fused", "flash-attention-2", "sdpa-flash", "unfused", ...
  bool fused = true;   // flash-style: no s x s scores in HBM
  std::vector<AttentionRate> rates;

  struct Lookup {
    double forward_flops_per_s = 0;
    double backward_flops_per_s = 0;
    bool found = false;
    bool extrapolated = false;  // outside the measured sequence lengths, or dtype borrowed
  };
  // Rates for an architecture, dtype and sequence length: the rates of (architecture, dtype,
  // causal; the other kind marked extrapolated when the table has none)
  // interpolated linearly in log(seq_length) between measured lengths, held at the nearest end
  // outside them (marked extrapolated). FP8 falls back to BF16 rates (marked extrapolated);
  // head_dim is matched when a rate gives one, else ignored. found = false when the
  // architecture has no rate.
  Lookup Rate(const std::string& architecture, DType dtype, int64_t seq_length, bool causal = true) const;
};

// Overlap of one kind of communication with compute.
//   exposed = comm - efficiency * min(comm, overlappable compute)
struct OverlapMechanism {
  bool supported = false;
  double efficiency = 0;  // 0..1
  // Exposed seconds of `comm_s` overlapped with `compute_s` of independent work.
  double Exposed(double comm_s, double compute_s) const;
};

struct OverlapModel {
  OverlapMechanism tp_comm, dp_grad_reduce, dp_param_gather, fsdp_param_gather, pp_p2p, cp_ring,
      ep_all_to_all;
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
};

struct LaunchModel {
  bool cuda_graphs = false;
  double kernel_launch_overhead_s = 0;
  int64_t kernels_per_layer_forward = 0;
};

// A framework as the model uses it.
struct Framework {
  std::string name = "megatron-core";
  std::string display_name;
  AttentionKernel attention;
  double elementwise_traffic_factor = 1.0;
  double cross_entropy_bytes_per_logit = 0;  // 0: the fused accounting of core/step_time.cc
  OverlapModel overlap;
  ShardingModel sharding;
  std::string default_schedule = "1f1b";
  std::vector<std::string> selective_recompute_modules = {"core_attn"};
  LaunchModel launch;
  // Megatron-Core <= core_r0.9 expert layout (framework.proto MoeModel): EP groups stride TP x CP.
  bool expert_parallel_after_cp = false;
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
