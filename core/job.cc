#include "core/job.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace stepcast {

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}
const char* Fp8RecipeName(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kTensorwise: return "tensorwise";
    case Fp8Recipe::kDelayed: return "delayed";
    case Fp8Recipe::kMxfp8: return "mxfp8";
    case Fp8Recipe::kRowwise: return "rowwise";
  }
  return "?";
}
bool Fp8RecipeFromName(std::string_view name, Fp8Recipe* out) {
  for (Fp8Recipe r : {Fp8Recipe::kTensorwise, Fp8Recipe::kDelayed, Fp8Recipe::kMxfp8, Fp8Recipe::kRowwise}) {
    if (name == Fp8RecipeName(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}
const char* ShardingName(Sharding s) {
  switch (s) {
    case Sharding::kNone: return "none";
    case Sharding::kZero1: return "zero1";
    case Sharding::kZero2: return "zero2";
    case Sharding::kZero3: return "zero3";
  }
  return "?";
}
const char* OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kAdamW: return "adamw";
    case Optimizer::kAdam: return "adam";
    case Optimizer::kSgd: return "sgd";
    case Optimizer::kAdamW8bit: return "adamw_8bit";
    case Optimizer::kMuon: return "muon";
  }
  return "?";
}

uint32_t RecomputeModuleBit(const std::string& name) {
  static const std::pair<const char*, uint32_t> kBits[] = {
      {"core_attn", kRecomputeCoreAttn}, {"mlp", kRecomputeMlp}, {"moe_act", kRecomputeMoeAct},
      {"layernorm", kRecomputeLayernorm}, {"mla_up_proj", kRecomputeMlaUpProj}, {"moe", kRecomputeMoe},
      {"shared_experts", kRecomputeSharedExperts}, {"mlp_up", kRecomputeMlpUp},
      {"activation_functions", kRecomputeActivationFunctions}, {"every_second_mm", kRecomputeEverySecondMm}};
  for (const auto& [n, bit] : kBits) {
    if (name == n) return bit;
  }
  return 0;
}

uint32_t RecomputeModuleMask(const std::vector<std::string>& names) {
  uint32_t mask = 0;
  for (const std::string& n : names) mask |= RecomputeModuleBit(n);
  return mask;
}

const char* PipelineScheduleName(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved-1f1b";
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::kZeroBubble: return "zero-bubble";
    case PipelineSchedule::kDualPipe: return "dualpipe";
  }
  return "?";
}

bool ModelChoices::Disable(const std::string& name) {
  bool* flags[] = {&framework_attention_rates, &elementwise_traffic_factor, &cross_entropy_bytes,
                   &overlap_efficiency, &launch_floor, &fsdp_semantics, &framework_recipes,
                   &alltoall_one_nic, &ep_overlap_default_off, &dp_collective_per_unit, &expert_bias_eager,
                   &expert_clamp_eager, &scaled_rope_eager, &attention_limits, &release_expert_layout,
                   &userbuffers_as_run, &embedding_lookup_matmul, &attention_shape_rates,
                   &cp_ring_merge, &input_embedding, &moe_router_kernels, &host_overhead_ratio,
                   &expert_gemm_calls};
  const std::vector<std::string>& names = Names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      *flags[i] = false;
      return true;
    }
  }
  return false;
}

const std::vector<std::string>& ModelChoices::Names() {
  static const std::vector<std::string> kNames = {"framework_attention_rates", "elementwise_traffic_factor",
                                                  "cross_entropy_bytes", "overlap_efficiency", "launch_floor",
                                                  "fsdp_semantics", "framework_recipes", "alltoall_one_nic",
                                                  "ep_overlap_default_off", "dp_collective_per_unit",
                                                  "expert_bias_eager", "expert_clamp_eager",
                                                  "scaled_rope_eager", "attention_limits",
                                                  "release_expert_layout", "userbuffers_as_run",
                                                  "embedding_lookup_matmul", "attention_shape_rates",
                                                  "cp_ring_merge", "input_embedding", "moe_router_kernels",
                                                  "host_overhead_ratio", "expert_gemm_calls"};
  return kNames;
}

namespace {

absl::Status Bad(absl::string_view field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

}  // namespace

absl::Status ValidateJob(const Job& job) {
  if (absl::Status s = ValidateModelShape(job.model); !s.ok()) return s;
  if (absl::Status s = ValidateHardware(job.hardware, "hardware"); !s.ok()) return s;
  // The rate profile is validated where it is read (RateProfileFromProto: every profile file,
  // preset and request passes there), not again per prediction; a profile built in code that
  // yields a non-finite result is refused by Predict's finite check.
  ModelShape storage;
  const ModelShape& m = Resolve(job.model, storage);
  const TrainingConfig& t = job.training;
  const Parallelism& p = job.parallelism;

  if (t.seq_length <= 0) return Bad("training.seq_length", "must be > 0");
  if (t.global_batch_size <= 0) return Bad("training.global_batch_size", "must be > 0 (sequences)");
  if (t.micro_batch_size <= 0) return Bad("training.micro_batch_size", "must be > 0");
  if (t.dataset_tokens < 0) return Bad("training.dataset_tokens", "must be >= 0");
  if (t.train_iters < 0) return Bad("training.train_iters", "must be >= 0");
  if (t.moe_pad_expert_input_to_capacity && (t.moe_dispatcher == MoeDispatcher::kDeepEP ||
                                             t.moe_dispatcher == MoeDispatcher::kDeepEPFp8)) {
    return Bad("training.moe_pad_expert_input_to_capacity",
               "is not supported with the DeepEP dispatcher (Megatron-Core transformer_config.py raises: \"Flex token "
               "dispatcher with deepep backend does not support moe_pad_expert_input_to_capacity\")");
  }
  if (t.cuda_graphs && t.cuda_graph_scope.moe && !t.moe_pad_expert_input_to_capacity) {
    return Bad("training.cuda_graph_scope",
               "'moe' captures an MoE layer's whole block, which needs token drop with padding "
               "(training.moe_pad_expert_input_to_capacity; Megatron-LM arguments.py: \"moe\" only supports token-drop MoE)");
  }
  if ((t.offload_moe_act_input || t.offload_expert_fc1_input) && t.recompute == Recompute::kSelective &&
      std::find(t.recompute_modules.begin(), t.recompute_modules.end(), "moe") != t.recompute_modules.end()) {
    return Bad("training.offload_modules",
               "cannot offload inside the MoE layer while recompute_modules has 'moe' (Megatron-Core "
               "transformer_config.py: \"Cannot offload ... while recomputing the entire MoE layer\")");
  }
  if (m.Hybrid() && t.overlap_ep_comm && p.ep > 1 && job.framework.overlap.ep_all_to_all.supported) {
    return Bad("training.overlap_ep_comm",
               "Megatron-Core's EP overlap runs GPT models only: combined_1f1b.py builds its schedule from "
               "GPTModel.build_schedule_plan (models/gpt/gpt_model.py), which a hybrid (Mamba) model's MambaModel does "
               "not have; set it false");
  }
  if (m.Hybrid() && t.mtp_layers > 0 && m.hybrid_mtp_pattern.empty()) {
    return Bad("training.mtp_layers", "the hybrid model has no MTP module (model.shape.hybrid_mtp_pattern is empty)");
  }
  if (t.precision.gemm != DType::kBF16 && t.precision.gemm != DType::kFP16 &&
      t.precision.gemm != DType::kFP8 && t.precision.gemm != DType::kTF32 &&
      t.precision.gemm != DType::kFP32) {
    return Bad("training.precision.gemm", "must be bf16, fp16, fp8, tf32 or fp32");
  }
  if (!(job.hardware.PeakFlops(t.precision.gemm) > 0)) {
    return Bad("training.precision.gemm",
               absl::StrCat(DTypeName(t.precision.gemm), " needs a hardware path with a peak; ",
                            job.hardware.name, " has none"));
  }
  if (!job.profile.GemmRate(t.precision.gemm, 4096, 4096, 4096).found) {
    return Bad("profile.gemm", absl::StrCat("no GEMM rate for ", DTypeName(t.precision.gemm),
                                            " in profile ", job.profile.name));
  }
  // MXFP8's block-scaled GEMMs run on Blackwell's tensor cores only (Megatron-Core
  // transformer_config.py fp8_recipe: "'mxfp8' for Blackwell architecture only"; Transformer Engine
  // MXFP8BlockScaling needs compute capability 10.0+).
  if (t.precision.gemm == DType::kFP8 && t.precision.fp8_recipe == Fp8Recipe::kMxfp8 &&
      job.hardware.architecture != "blackwell") {
    return Bad("training.precision.fp8_recipe",
               absl::StrCat("mxfp8 needs a Blackwell GPU (Transformer Engine MXFP8BlockScaling: compute capability "
                            "10.0+); ",
                            job.hardware.name, " is ",
                            job.hardware.architecture.empty() ? "not one" : job.hardware.architecture));
  }
  if (t.precision.params != DType::kBF16 && t.precision.params != DType::kFP16 &&
      t.precision.params != DType::kFP32) {
    return Bad("training.precision.params", "must be bf16, fp16 or fp32");
  }
  if (t.precision.grads == DType::kFP8 || t.precision.grads == DType::kINT8) {
    return Bad("training.precision.grads", "must be fp32, bf16 or fp16");
  }

  const struct { const char* name; int64_t v; } dims[] = {
      {"parallelism.tp", p.tp}, {"parallelism.pp", p.pp}, {"parallelism.dp", p.dp},
      {"parallelism.cp", p.cp}, {"parallelism.ep", p.ep}, {"parallelism.vpp", p.vpp}};
  for (const auto& d : dims) {
    if (d.v < 1) return Bad(d.name, absl::StrCat(d.v, " must be >= 1"));
    // Bounded before gpu_count() multiplies them (int64 overflow, reliability review M7).
    if (d.v > (int64_t{1} << 24)) return Bad(d.name, absl::StrCat(d.v, " must be at most 2^24"));
  }
  if (job.cluster.gpu_count <= 0) return Bad("cluster.gpu_count", "must be > 0");
  if (job.cluster.gpus_per_node < 0) return Bad("cluster.gpus_per_node", "must be >= 0");
  if (p.gpu_count() != job.cluster.gpu_count) {
    return Bad("cluster.gpu_count",
               absl::StrCat(job.cluster.gpu_count, " does not match tp*pp*dp*cp = ", p.tp, "*",
                            p.pp, "*", p.dp, "*", p.cp, " = ", p.gpu_count()));
  }
  if (m.attention_heads % p.tp != 0) {
    return Bad("parallelism.tp", absl::StrCat(p.tp, " does not divide model attention_heads ",
                                              m.attention_heads));
  }
  if (!m.mla.enabled() && m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
    return Bad("parallelism.tp", absl::StrCat(p.tp, " and model kv_heads ", m.kv_heads,
                                              " must divide one another"));
  }
  if (m.ffn_hidden_size % p.tp != 0) {
    return Bad("parallelism.tp", absl::StrCat(p.tp, " does not divide model ffn_hidden_size ",
                                              m.ffn_hidden_size));
  }
  if (m.Hybrid() && m.HybridCounts().mamba > 0) {
    // Megatron-Core mamba_mixer.py: every TP rank holds whole heads and whole groups.
    if (m.mamba.num_heads % p.tp != 0 || m.mamba.num_groups % p.tp != 0) {
      return Bad("parallelism.tp", absl::StrCat(p.tp, " does not divide the Mamba layers' num_heads ", m.mamba.num_heads,
                                                " and num_groups ", m.mamba.num_groups,
                                                " (mamba_mixer.py: whole heads and groups per TP rank)"));
    }
    if (p.cp > 1) {
      return Bad("parallelism.cp", "context parallelism of Mamba layers (Megatron-Core mamba_context_parallel.py: "
                                   "all-to-alls around the scan) is not modelled; use cp 1");
    }
  }
  // Uneven splits are allowed (Megatron's decoder_first/last_pipeline_num_layers or pipeline
  // layouts); the slowest stage carries ceil(layers / (pp * vpp)) layers per chunk.
  if (m.layers < p.pp * p.vpp) {
    return Bad("parallelism.pp", absl::StrCat("pp*vpp = ", p.pp * p.vpp, " exceeds model layers ",
                                              m.layers, " (every chunk needs a layer)"));
  }
  if (p.vpp > 1 && p.pp == 1) return Bad("parallelism.vpp", "interleaving needs pp > 1");
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0) {
    // Megatron-Core validate_args: the first/last-stage counts need a pipeline, and the other
    // stages must share the rest evenly (no virtual stages with them here).
    if (p.pp < 2) return Bad("parallelism.first_stage_layers", "an uneven first / last stage needs pp >= 2");
    if (p.vpp > 1) return Bad("parallelism.first_stage_layers", "uneven first / last stages with vpp > 1 are not modelled");
    const int64_t fixed = p.first_stage_layers + p.last_stage_layers;
    const int64_t middle = p.pp - (p.first_stage_layers > 0 ? 1 : 0) - (p.last_stage_layers > 0 ? 1 : 0);
    // PP 2 with both given: they hold every layer (middle 0). Otherwise the middle stages need at
    // least one layer each, the same number.
    if (fixed > m.layers || (middle > 0 && (fixed == m.layers || (m.layers - fixed) % middle != 0)) ||
        (middle == 0 && fixed != m.layers)) {
      return Bad("parallelism.first_stage_layers",
                 absl::StrCat("first ", p.first_stage_layers, " + last ", p.last_stage_layers,
                              " layers leave ", m.layers - fixed, " of the model's ", m.layers,
                              " layers for ", middle, " other stages: they must divide evenly"));
    }
  }
  if (p.cp > 1 && t.seq_length % (2 * p.cp) != 0) {
    return Bad("parallelism.cp", absl::StrCat("seq_length ", t.seq_length,
                                              " must be a multiple of 2*cp = ", 2 * p.cp,
                                              " (load-balanced causal chunks)"));
  }
  if (p.ep > 1) {
    if (!m.moe.enabled()) return Bad("parallelism.ep", "expert parallelism needs an MoE model");
    if (m.moe.routed_experts % p.ep != 0) {
      return Bad("parallelism.ep", absl::StrCat(p.ep, " does not divide model moe.routed_experts ",
                                                m.moe.routed_experts));
    }
    // Megatron-Core MoE parallel folding: the expert layout ETP x EP x EDP refolds the
    // TP x CP x DP ranks of a stage (megatron/core/parallel_state.py); without ETP this is the
    // classic condition that EP divides DP*CP.
    if ((p.tp * p.cp * p.dp) % (p.Etp() * p.ep) != 0) {
      return Bad("parallelism.ep",
                 absl::StrCat("etp*ep = ", p.Etp(), "*", p.ep, " does not divide tp*cp*dp = ",
                              p.tp * p.cp * p.dp,
                              p.etp == 0 ? " (set parallelism.etp to fold experts over TP ranks)" : ""));
    }
    if (m.moe.expert_ffn_hidden_size % p.Etp() != 0) {
      return Bad("parallelism.etp", absl::StrCat(p.Etp(), " does not divide model moe.expert_ffn_hidden_size ",
                                                 m.moe.expert_ffn_hidden_size));
    }
  }
  if (p.etp < 0) return Bad("parallelism.etp", absl::StrCat(p.etp, " must be >= 0 (0: tp)"));
  if (p.dp_replicate < 1) return Bad("parallelism.dp_replicate", absl::StrCat(p.dp_replicate, " must be >= 1"));
  if ((p.dp * p.cp) % p.dp_replicate != 0) {
    return Bad("parallelism.dp_replicate",
               absl::StrCat(p.dp_replicate, " does not divide dp*cp = ", p.dp * p.cp));
  }
  if (!(t.activation_offload_fraction >= 0 && t.activation_offload_fraction <= 1)) {
    return Bad("training.activation_offload_fraction", "must be in [0, 1]");
  }
  if (t.recompute_num_layers < 0) return Bad("training.recompute_num_layers", "must be >= 0");
  const int64_t per_step = t.micro_batch_size * p.dp;
  if (t.global_batch_size % per_step != 0) {
    return Bad("training.global_batch_size",
               absl::StrCat(t.global_batch_size, " is not a multiple of micro_batch_size*dp = ",
                            t.micro_batch_size, "*", p.dp, " = ", per_step));
  }
  const int64_t micro_batches = t.global_batch_size / per_step;
  if (p.vpp > 1 && micro_batches % p.pp != 0) {
    return Bad("training.global_batch_size",
               absl::StrCat("interleaved 1F1B needs micro-batches per step (", micro_batches,
                            ") to be a multiple of pp (", p.pp, ")"));
  }
  return absl::OkStatus();
}

namespace {

GroupPlacement Place(int64_t stride, int64_t size, int64_t gpus_per_node, int64_t world) {
  GroupPlacement g;
  g.size = size;
  if (stride * size <= gpus_per_node) {
    g.scope = Scope::kIntraNode;
    g.members_per_node = size;
    g.min_members_per_node = size;
    return g;
  }
  g.scope = Scope::kInterNode;
  g.members_per_node = std::clamp<int64_t>(gpus_per_node / stride, 1, size);
  g.min_members_per_node = g.members_per_node;
  // Groups are blocks of span = stride x size consecutive ranks (stride interleaved groups per
  // block). When the node size does not divide the span, node boundaries cut blocks into uneven
  // segments; a segment of L ranks holds floor(L / stride) members of each group (at least one of
  // some).
  const int64_t span = stride * size;
  if (gpus_per_node <= 0 || span % gpus_per_node == 0) return g;
  // A block's segments: the head up to the first node boundary, whole nodes, the tail after the
  // last boundary; O(1) per block. Blocks read: at most node / gcd(span, node) (the period), and
  // at most kMaxBlocks (a job file's extreme sizes); past that the fewest is taken as one member.
  constexpr int64_t kMaxBlocks = 1 << 16;
  const int64_t blocks_per_period = gpus_per_node / std::gcd(span, gpus_per_node);
  const int64_t blocks = world > 0 ? std::min(world / span, blocks_per_period) : blocks_per_period;
  int64_t min_segment = span;
  if (blocks > kMaxBlocks) {
    min_segment = 1;
  } else {
    const int64_t step = span % gpus_per_node;
    int64_t offset = 0;  // the block's first rank mod node (sums of two values below the node: no overflow)
    for (int64_t b = 0; b < blocks; ++b, offset = (offset + step) % gpus_per_node) {
      const int64_t head = offset == 0 ? std::min(span, gpus_per_node) : std::min(span, gpus_per_node - offset);
      const int64_t tail = (offset + step) % gpus_per_node;
      min_segment = std::min(min_segment, head);
      if (tail > 0 && span > head) min_segment = std::min(min_segment, tail);
      if (span > head + tail) min_segment = std::min(min_segment, std::min(span, gpus_per_node));
    }
  }
  g.min_members_per_node = std::clamp<int64_t>(min_segment / stride, 1, g.members_per_node);
  return g;
}

}  // namespace

Placement PlaceGroups(const Parallelism& p, int64_t gpus_per_node, bool expert_parallel_after_cp) {
  Placement out;
  const int64_t world = p.tp * p.cp * p.dp * p.pp;
  out.tp = Place(1, p.tp, gpus_per_node, world);
  out.etp = Place(1, p.Etp(), gpus_per_node, world);
  out.cp = Place(p.tp, p.cp, gpus_per_node, world);
  out.ep = Place(expert_parallel_after_cp ? p.tp * p.cp : p.Etp(), p.ep, gpus_per_node, world);
  out.dp = Place(p.tp * p.cp, p.dp, gpus_per_node, world);
  out.pp = Place(p.tp * p.cp * p.dp, p.pp, gpus_per_node, world);
  return out;
}

double MasterWeightBytes(const Precision& p) {
  if (p.master_weights == p.params) return 0.0;
  if (p.master_weight_remainders && p.master_weights == DType::kFP32 && p.params == DType::kBF16) return 2.0;
  return BytesPerElement(p.master_weights);
}

}  // namespace stepcast
