// File: core/job.h
//
// A training job: model, hardware, rates, training settings, parallel layout, cluster. Plain
// values; ValidateJob() is the one place that says whether a combination makes sense.
#ifndef STEPCAST_CORE_JOB_H_
#define STEPCAST_CORE_JOB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "core/framework.h"
#include "core/hardware.h"
#include "core/model_shape.h"

namespace stepcast {

class IntervalTable;  // core/interval.h

enum class Optimizer { kAdamW, kAdam, kSgd, kAdamW8bit, kMuon };
enum class Recompute { kNone, kSelective, kFull };
// ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054): stage 1 shards optimizer states (= Megatron
// distributed optimizer), stage 2 also gradients, stage 3 (= FSDP) also weights.
enum class Sharding { kNone, kZero1, kZero2, kZero3 };
// Pipeline schedules: 1F1B (Narayanan et al. 2021 Sec. 2.2.1, PipeDream-Flush), interleaved 1F1B
// (Sec. 2.2.2), GPipe (all forwards then all backwards: m micro-batches in flight), zero-bubble
// ZB-H1 (Qi et al. 2023, arXiv:2401.10241: bubble a third of 1F1B's), DualPipe (DeepSeek-V3
// report Sec. 3.2.1).
enum class PipelineSchedule { k1F1B, kInterleaved1F1B, kGPipe, kZeroBubble, kDualPipe };
// MoE token dispatch (job.proto TrainingSpec.moe_dispatcher): NCCL all-to-all of permuted tokens
// (Megatron-Core MoEAlltoAllTokenDispatcher); DeepEP's kernels (deepseek-ai/DeepEP: tokens sent
// once per destination node over RDMA and forwarded over NVLink) in Megatron-Core's flex
// dispatcher, which permutes the received rows into expert order after the dispatch (bf16), or
// in DeepSeek's own stack with fp8 dispatch; NVIDIA's HybridEP (the same hierarchical traffic,
// the permute inside its dispatch / combine kernels).
enum class MoeDispatcher { kAllToAll, kDeepEP, kDeepEPFp8, kHybridEP };

const char* RecomputeName(Recompute r);
const char* ShardingName(Sharding s);
const char* OptimizerName(Optimizer o);
const char* PipelineScheduleName(PipelineSchedule s);

// Modules selective recomputation can rerun (Megatron-Core --recompute-modules names, plus
// "mlp_up" and "activation_functions"; docs/MODEL.md "Recomputation"), as bits.
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeMlp = 1u << 1,
  kRecomputeMoeAct = 1u << 2,
  kRecomputeLayernorm = 1u << 3,
  kRecomputeMlaUpProj = 1u << 4,
  kRecomputeMoe = 1u << 5,
  kRecomputeSharedExperts = 1u << 6,
  kRecomputeMlpUp = 1u << 7,
  kRecomputeActivationFunctions = 1u << 8,
  // torchtitan's op-level SAC also recomputes every second aten.mm of a block (the policy counts
  // the block's mm calls and saves only the odd ones: torchtitan/distributed/activation_checkpoint.py
  // _get_custom_policy, "mm_count % 2 == 0" -> recompute): for a Llama block wk, wo and w3.
  kRecomputeEverySecondMm = 1u << 9,
};
// The bit of a module name; 0 for an unknown name.
uint32_t RecomputeModuleBit(const std::string& name);
// The bits of a list of names (unknown names ignored).
uint32_t RecomputeModuleMask(const std::vector<std::string>& names);

// Mixed precision. Defaults are Megatron-LM's bf16 recipe: bf16 weights and GEMMs, fp32 main
// gradients, fp32 master weights and Adam moments (18 bytes/parameter before sharding;
// Megatron-LM theoretical_memory_usage.py).
// FP8 scaling recipes (job.proto PrecisionSpec.fp8_recipe): Transformer Engine's per-tensor current
// scaling, delayed scaling (amax history) and MXFP8 block scaling (Megatron-Core --fp8-recipe), and
// torchao's row-wise scaling.
// kRowwise: torchao's row-wise scaling (Float8LinearConfig "rowwise", torchtitan's float8 default).
enum class Fp8Recipe : uint8_t { kTensorwise, kDelayed, kMxfp8, kRowwise };
const char* Fp8RecipeName(Fp8Recipe r);
// The recipe Fp8RecipeName gives `name` ("tensorwise", "delayed", "mxfp8", "rowwise"); false for any
// other name (blockwise, custom: not modelled). The one list the job codec and the launch
// importers read names against.
bool Fp8RecipeFromName(std::string_view name, Fp8Recipe* out);

struct Precision {
  DType gemm = DType::kBF16;
  DType params = DType::kBF16;
  DType grads = DType::kFP32;
  DType master_weights = DType::kFP32;
  DType optimizer_states = DType::kFP32;
  // Dtype of the DP gradient reduction (Megatron: fp32 unless --grad-reduce-in-bf16; FSDP
  // reduce_dtype). Also the dtype of the DDP gradient buffer Megatron keeps.
  DType grad_reduce = DType::kFP32;
  // fp32 master weights stored as 16-bit remainders of the bf16 weights (Megatron-Core
  // OptimizerConfig.store_param_remainders with use_precision_aware_optimizer, TE FusedAdam):
  // effective only when master_weights is fp32 and params bf16 (MasterWeightBytes).
  bool master_weight_remainders = false;
  // FP8 scaling recipe (job.proto PrecisionSpec.fp8_recipe); meaningful with gemm fp8 only.
  Fp8Recipe fp8_recipe = Fp8Recipe::kTensorwise;

  // PyTorch automatic mixed precision (torch.autocast): fp32 weights and residual stream, GEMMs
  // and attention in bf16/fp16. PyTorch's AMP docs (torch.amp, "Autocast Op Reference"): linear,
  // matmul and scaled_dot_product_attention autocast to the lower dtype; layer_norm, softmax,
  // log_softmax autocast to float32; autocast's cache (cache_enabled, default on) keeps the
  // lower-precision copy of each weight cast inside the region, and autograd keeps it for the
  // backward.
  bool Autocast() const {
    return params == DType::kFP32 && (gemm == DType::kBF16 || gemm == DType::kFP16);
  }
};

// Bytes per parameter of the optimizer's master copy beyond the working weights: 0 when the
// master is the working dtype itself; 2 for fp32 masters kept as remainders of bf16 weights
// (Precision::master_weight_remainders: the bf16 weight holds the upper 16 bits of the fp32
// value, TE FusedAdam's store_param_remainders keeps the lower 16); else the master dtype's size.
double MasterWeightBytes(const Precision& p);

struct TrainingConfig {
  int64_t seq_length = 0;
  int64_t global_batch_size = 0;  // sequences
  int64_t micro_batch_size = 1;   // sequences
  Precision precision;
  Optimizer optimizer = Optimizer::kAdamW;
  Recompute recompute = Recompute::kNone;
  bool flash_attention = true;
  Sharding sharding = Sharding::kNone;
  bool overlap_dp_comm = true;
  bool overlap_tp_comm = false;
  double dataset_tokens = 0;
  int64_t train_iters = 0;
  bool dropout = false;  // hidden + attention dropout masks (GPT-style training)
  // Selective recompute: the modules recomputed (Megatron --recompute-modules names: core_attn,
  // mlp, moe_act, layernorm, mla_up_proj, moe, shared_experts; "activation_functions" for
  // op-level SAC that saves GEMM outputs; "every_second_mm" for torchtitan's op SAC, which also
  // recomputes every second GEMM of a block). Empty: the framework's selective set.
  std::vector<std::string> recompute_modules;
  // Full recompute: layers per stage recomputed (block method); 0: all.
  int64_t recompute_num_layers = 0;
  bool fp8_param_gather = false;  // fp8 weights gathered/stored (Megatron --fp8-param-gather)
  bool cuda_graphs = false;       // CUDA graphs: no host launch floor, or, with a partial cuda_graph_scope, less of one
  // With cuda_graphs, the parts captured (job.proto TrainingSpec.cuda_graph_scope; Megatron-Core
  // --cuda-graph-scope with --cuda-graph-impl transformer_engine): none set = the whole layer (or
  // step). attn: TransformerLayer._forward_attention; mlp: a dense layer's _forward_mlp; moe: an
  // MoE layer's _forward_mlp (token drop only); moe_router: _forward_mlp up to the router (the
  // pre-MLP norm, shared experts, router); moe_preprocess: MoELayer.preprocess; mamba: a Mamba layer.
  struct CudaGraphScope {
    bool attn = false, mlp = false, moe = false, moe_router = false, moe_preprocess = false, mamba = false;
    bool Partial() const { return attn || mlp || moe || moe_router || moe_preprocess || mamba; }
  };
  CudaGraphScope cuda_graph_scope;
  // The host launch floor applies: no CUDA graphs, or graphs of some parts only.
  bool HostLaunchesLayers() const { return !cuda_graphs || cuda_graph_scope.Partial(); }
  // The parts partial graphs capture: cuda_graph_scope with graphs on, none without.
  CudaGraphScope GraphedParts() const { return cuda_graphs ? cuda_graph_scope : CudaGraphScope{}; }
  double activation_offload_fraction = 0;  // of activation memory, moved to host
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  bool overlap_ep_comm = false;  // MoE all-to-all beside another micro-batch's compute
  // Transformer Engine's fused MoE router (job.proto TrainingSpec.moe_router_fusion): fewer kernels
  // before the dispatch's host wait (framework.proto MoeLaunchModel.fused_router_kernels_before_sync).
  bool moe_router_fusion = false;
  int64_t mtp_layers = -1;       // MTP modules trained; -1: the model shape's mtp_layers
  // MoE expert capacity with padding (Megatron-Core moe_expert_capacity_factor,
  // moe_pad_expert_input_to_capacity; job.proto): each expert computes `factor` x its balanced
  // share of rows. 0 / false: none.
  double moe_expert_capacity_factor = 0;
  bool moe_pad_expert_input_to_capacity = false;
  // The rows each expert computes over its balanced share: the capacity factor when its input is
  // padded to capacity, else 1 (token_dispatcher.py drop_and_pad).
  double MoePaddedRowsFactor() const {
    return moe_pad_expert_input_to_capacity && moe_expert_capacity_factor > 0 ? moe_expert_capacity_factor : 1.0;
  }
  // Fine-grained activation offloading (job.proto offload_modules): the routed experts' fc1
  // output ("moe_act") and their input rows ("expert_fc1") kept in host memory.
  bool offload_moe_act_input = false;
  bool offload_expert_fc1_input = false;
};

// Parallel layout. Ranks are ordered as in Megatron-Core: TP innermost, then CP, then DP (EP
// groups are carved from DP x CP), then PP outermost.
struct Parallelism {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 1;
  int64_t cp = 1;
  int64_t ep = 1;
  int64_t vpp = 1;
  bool sequence_parallel = false;
  int64_t etp = 0;           // expert tensor parallel; 0 means tp (Megatron's default)
  int64_t dp_replicate = 1;  // HSDP replicas (ZeRO/FSDP shards over dp / dp_replicate)
  // Uneven pipeline (job.proto ParallelismSpec): decoder layers on the first / last stage; 0: even.
  int64_t first_stage_layers = 0, last_stage_layers = 0;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t gpu_count() const { return tp * pp * dp * cp; }
  // Sequence parallelism runs only with TP > 1 (it splits the TP group's activations; Megatron
  // turns it off at TP 1, arguments.py): whether the job runs it.
  bool SequenceParallelOn() const { return sequence_parallel && tp > 1; }
  int64_t Etp() const { return etp > 0 ? etp : tp; }
  // The schedule that runs: 1F1B with virtual stages is interleaved 1F1B.
  PipelineSchedule Schedule() const {
    return schedule == PipelineSchedule::k1F1B && vpp > 1 ? PipelineSchedule::kInterleaved1F1B : schedule;
  }
  // Expert data parallel size: (tp * cp * dp) / (etp * ep) (Megatron-Core MoE parallel folding).
  int64_t Edp() const { return tp * cp * dp / (Etp() * ep); }
  // Ranks each ZeRO/FSDP shard group spans: dp * cp / dp_replicate.
  int64_t ShardGroup() const { return dp * cp / (dp_replicate > 0 ? dp_replicate : 1); }
};

struct Cluster {
  std::string name;
  int64_t gpu_count = 0;
  int64_t gpus_per_node = 0;            // 0: hardware.gpus_per_node
  double price_per_gpu_hour_usd = -1;   // < 0: hardware price
};

// Mechanisms of the model that validation can switch off: leave-one-source-out scores a source
// with every mechanism that was added after reading that source's rows switched off
// (docs/VALIDATION.md). Predictions use them all.
struct ModelChoices {
  bool framework_attention_rates = true;   // off: the profile's attention rate
  bool elementwise_traffic_factor = true;  // off: the fused accounting (factor 1)
  bool cross_entropy_bytes = true;         // off: the fused loss accounting
  bool overlap_efficiency = true;          // off: overlap hides all it can (efficiency 1)
  bool launch_floor = true;                // off: the eager presets' former host cost per kernel (5 us,
                                           // before the DeepSeek-V3 trace's 42 us; step_time.cc)
  bool fsdp_semantics = true;              // off: ZeRO-3 gathers twice and reduces every micro-batch
  // off: the framework's per-model recipe defaults are not applied (only its framework-wide
  // defaults). Used where jobs are built (the validation harness), not by the step model.
  bool framework_recipes = true;
  // off: an all-to-all across nodes is striped over the node's NICs like the ring collectives
  // (before 2026-11-27; on: one NIC per GPU, nccl-tests #267).
  bool alltoall_one_nic = true;
  // off: Megatron-Core's EP all-to-all overlapped at the former 0.6 efficiency (before 2026-11-25;
  // on: off as --overlap-moe-expert-parallel-comm defaults).
  bool ep_overlap_default_off = true;
  // off: a DP collective's bytes are one collective with one latency (before 2026-11-28; on:
  // one collective per FSDP unit or bucket, each with its latency: StepModel::DpReduceIn).
  bool dp_collective_per_unit = true;
  // off: an MoE expert's fc2 bias costs nothing (before 2026-11-28; on: the framework's
  // ElementwiseModel.expert_bias_eager, Megatron-Core's loop per local expert).
  bool expert_bias_eager = true;
  // off: GPT-OSS's clamped GLU costs what an unclamped one does (before 2026-11-28; on: the
  // framework's ElementwiseModel.expert_clamp_eager, Megatron-Core's eager clamp and cat).
  bool expert_clamp_eager = true;
  // off: a YaRN-scaled RoPE costs what a plain one does (before 2026-11-28; on: the framework's
  // ElementwiseModel.scaled_rope_eager, Megatron-Core's unfused RoPE).
  bool scaled_rope_eager = true;
  // off: the framework preset's attention_limits are not applied (before 2026-11-28; on: e.g.
  // nemo's MLA on Blackwell trains unfused, Transformer Engine <= 2.4). Used where jobs are built.
  bool attention_limits = true;
  // off: the preset's expert layout ignores the job's release (MoeModel.folded_from_release; before
  // 2026-11-28 a NeMo 25.04 job was laid out as core_r0.9). Used where jobs are built.
  bool release_expert_layout = true;
  // off: Transformer Engine userbuffers' split GEMM pieces run one after another, an fp8 job's
  // reduce-scatter half is the BF16 pipeline, and the pipelined reduce-scatter's hidden part is
  // charged the measured contention beside its SM margin (before 2026-11-29; on: the pieces on TE's
  // three compute streams, the fp8 ring exchange, the margin as that half's contention:
  // OverlapMechanism::compute_streams / fp8_rs_ring_exchange, StepModel::UserbuffersCost).
  bool userbuffers_as_run = true;
  // off: the input embedding is a free gather in every framework (before 2026-11-29; on: the
  // framework's FrameworkSpec.embedding_lookup_matmul, Paxml's one-hot matmul lookup).
  bool embedding_lookup_matmul = true;
  // off: every layer takes the attention table's 128-wide whole-sequence rates, a sliding window's
  // band at them too (before 2026-11-29, sixteenth session; on: the rates measured at the head
  // dimension nearest the model's and, for sliding-window layers, at a window: AttentionRate
  // head_dim / window, core/framework.h AttentionKernel::Rate).
  bool attention_shape_rates = true;
  // off: context-parallel ring attention costs its attention and its exchange only (before
  // 2026-11-29, sixteenth session; on: also the merges of its partial outputs and gradients,
  // CpRingMergeBytes, Transformer Engine's AttnFuncWithCPAndKVP2P).
  bool cp_ring_merge = true;
  // off: the input embedding costs nothing (before 2026-11-29, sixteenth session; on: the
  // framework's ElementwiseModel.dense_embedding_grad, StepModel::InputEmbedding).
  bool input_embedding = true;
  // off: an MoE layer launches the preset's kernels_before_sync before the dispatch's host wait,
  // whatever its router and dispatcher (before 2026-11-29, seventeenth session; on: the
  // group-limited router's, the fused router's and the flex dispatcher's counts,
  // MoeLaunchModel::KernelsBeforeSync).
  bool moe_router_kernels = true;
  // off: the framework's host cost per kernel is the x86 hosts' on every machine (before
  // 2026-11-29, seventeenth session; on: scaled by Hardware::host_overhead_ratio, Grace 2.46-2.75).
  bool host_overhead_ratio = true;
  // off: a per-expert GEMM of a grouped linear costs a bare launch call, like its quantize kernels
  // (before 2026-11-30, eighteenth session; on: a cuBLAS(Lt) call, LaunchModel::gemm_call_overhead_s,
  // the host time a cuBLAS GEMM takes beyond an elementwise op in a real H100 trace).
  bool expert_gemm_calls = true;
  // The names above, for files and flags ("overlap_efficiency"); false for an unknown name.
  bool Disable(const std::string& name);
  static const std::vector<std::string>& Names();
};

struct Job {
  std::string name;
  ModelShape model;
  Hardware hardware;
  RateProfile profile;  // usable rates; usually hardware.reference_profile or a calibration
  TrainingConfig training;
  Parallelism parallelism;
  Cluster cluster;
  Framework framework;
  // Inputs the job did not state and the defaults used (filled by the job codec; shared, so a
  // prediction carries it without copying). May be null: nothing assumed.
  std::shared_ptr<const std::vector<AssumedInput>> assumed;
  ModelChoices choices;
  // The residual table behind the prediction intervals (core/interval.h; the codec sets the
  // built-in one, presets/intervals.yaml). Null: predictions carry no step-time interval.
  std::shared_ptr<const IntervalTable> intervals;

  int64_t GpusPerNode() const {
    return cluster.gpus_per_node > 0 ? cluster.gpus_per_node : hardware.gpus_per_node;
  }
  double PricePerGpuHourUsd() const {
    return cluster.price_per_gpu_hour_usd >= 0 ? cluster.price_per_gpu_hour_usd
                                               : hardware.price_per_gpu_hour_usd;
  }
  // Micro-batches each pipeline processes per step: global / (micro * dp).
  int64_t MicroBatchesPerStep() const {
    return training.global_batch_size / (training.micro_batch_size * parallelism.dp);
  }
  // MTP depths trained: training.mtp_layers when stated (a recipe's), else the model shape's.
  int64_t MtpDepths() const { return training.mtp_layers >= 0 ? training.mtp_layers : model.mtp_layers; }
  double TokensPerStep() const {
    return static_cast<double>(training.global_batch_size) * training.seq_length;
  }
};

// Checks every field and every combination; the error names the field path as in the job file
// ("parallelism.tp") and the reason, e.g. "parallelism.tp: 3 does not divide
// model attention_heads 64". Does not check memory: not fitting is an answer, not an error.
absl::Status ValidateJob(const Job& job);

// Where a parallel group's members sit, from the rank order above and GPUs per node.
//   span = stride * size consecutive-rank block; intra-node iff span <= gpus_per_node (the
//   scheduler aligns groups to NVLink domains). members_per_node: members that share a node
//   (> 1 for hierarchical groups, which then have that many NICs to stripe over).
//   min_members_per_node: the fewest members any node holds, over the job's groups of this kind
//   (ranks tp x cp x dp x pp). It is members_per_node when the span and the node size divide one
//   another; otherwise a group straddles node boundaries unevenly (GB200 NVL72: 72 GPUs per
//   domain, an EP span of 128), and its members on the node that holds the fewest send the most
//   bytes through their NICs (the one-NIC all-to-all, StepModel::Comm).
struct GroupPlacement {
  int64_t size = 1;
  Scope scope = Scope::kIntraNode;
  int64_t members_per_node = 1;
  int64_t min_members_per_node = 1;
};
struct Placement {
  GroupPlacement tp, cp, ep, dp, pp;
  GroupPlacement etp;  // expert tensor parallel: ETP consecutive ranks (= the TP group when ETP = TP)
};
// `expert_parallel_after_cp`: Megatron-Core <= core_r0.9's order tp-cp-ep-dp-pp (EP ranks TP x CP
// apart); otherwise the folded expert layout etp-ep-edp (EP ranks ETP apart; framework.proto
// MoeModel).
Placement PlaceGroups(const Parallelism& par, int64_t gpus_per_node, bool expert_parallel_after_cp = false);

}  // namespace stepcast

#endif  // STEPCAST_CORE_JOB_H_
