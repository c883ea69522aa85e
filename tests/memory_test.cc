// Per-GPU memory against Korthikanti et al. 2022 Table 2 (activations per layer), Megatron-LM's
// bytes per parameter (theoretical_memory_usage.py) and seed 004's exercise 1.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#include "core/memory.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

ModelShape Gpt22B() { return *testing::BuiltinCatalog().FindModel("gpt-22b"); }

LayerActivationInput Megatron2022(double t, bool sp, Recompute r) {
  LayerActivationInput in;
  in.seq_tokens = 2048; in.kv_tokens = 2048; in.micro_batch = 4; in.tp = t;
  in.sequence_parallel = sp; in.flash_attention = false; in.dropout = true; in.recompute = r;
  return in;
}

TEST(Activations, KorthikantiTable2) {
  const ModelShape m = Gpt22B();
  const double s = 2048, b = 4, h = 6144, a = 64;
  for (double t : {1.0, 2.0, 8.0}) {
    SCOPED_TRACE(t);
    const double sbh = s * b * h;
    // No parallelism beyond TP, no recompute: sbh(10 + 24/t + 5as/(ht)).
    EXPECT_NEAR(LayerActivationBytes(m, Megatron2022(t, false, Recompute::kNone)),
                sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1e-9 * sbh);
    // Sequence parallel: sbh/t (34 + 5as/h).
    EXPECT_NEAR(LayerActivationBytes(m, Megatron2022(t, true, Recompute::kNone)),
                sbh / t * (34 + 5 * a * s / h), 1e-9 * sbh);
    // Selective recompute: sbh(10 + 24/t); with SP: 34 sbh / t.
    EXPECT_NEAR(LayerActivationBytes(m, Megatron2022(t, false, Recompute::kSelective)),
                sbh * (10 + 24 / t), 1e-9 * sbh);
    EXPECT_NEAR(LayerActivationBytes(m, Megatron2022(t, true, Recompute::kSelective)),
                sbh * 34 / t, 1e-9 * sbh);
    // Full recompute: the 2sbh layer input.
    EXPECT_NEAR(LayerActivationBytes(m, Megatron2022(t, false, Recompute::kFull)), 2 * sbh, 1e-9 * sbh);
  }
}

TEST(Activations, Seed004PerLayerApproximation) {
  // Seed 004: B S H (34 + 5 A S / H) is Korthikanti's t = 1 count (exercise 1: 32.5 GB/layer).
  ModelShape m = *testing::BuiltinCatalog().FindModel("seed004-13b");
  LayerActivationInput in;
  in.seq_tokens = 4096; in.kv_tokens = 4096; in.micro_batch = 8; in.tp = 1; in.dropout = true;
  EXPECT_NEAR(LayerActivationBytes(m, in) / 1e9, 32.5, 0.1);
}

TEST(Memory, LayersOfStageMatchMegatronsLayerAssignment) {
  // Megatron-Core assigns chunk c (= pp rank + k x pp, k < vpp) the layers
  // [c x per_chunk, (c+1) x per_chunk), per_chunk = ceil(L / (pp x vpp)); layer i is MoE when
  // i >= first_dense_layers and (i - first_dense_layers) % layer_freq == 0 (DeepSeek-V3: 3 dense
  // layers first). Counted here layer by layer, against LayersOfStage's closed form, over layouts
  // that include uneven ones. DeepSeek-V3 (61 layers, 3 dense) at PP 4 VPP 4: per_chunk 4; the
  // first stage holds chunks 0, 4, 8, 12 = layers 0-3, 16-19, 32-35, 48-51: 3 dense, 13 MoE.
  Job job;
  job.model.layers = 61;
  job.model.moe.routed_experts = 256;
  job.model.moe.first_dense_layers = 3;
  job.parallelism.pp = 4;
  job.parallelism.vpp = 4;
  const StageLayers first = LayersOfStage(job, false);
  EXPECT_EQ(first.dense, 3);
  EXPECT_EQ(first.moe, 13);
  for (int64_t layers : {1, 7, 32, 61, 80, 126}) {
    for (int64_t fd : {0, 1, 3, 10}) {
      for (int64_t freq : {1, 2, 3}) {
        for (int64_t pp : {1, 2, 4, 8}) {
          for (int64_t vpp : {1, 2, 5}) {
            Job j;
            j.model.layers = layers;
            j.model.moe.routed_experts = 8;
            j.model.moe.first_dense_layers = fd;
            j.model.moe.layer_freq = freq;
            j.parallelism.pp = pp;
            j.parallelism.vpp = vpp;
            for (bool last : {false, true}) {
              const int64_t chunks = pp * vpp, per_chunk = (layers + chunks - 1) / chunks;
              int64_t dense = 0, moe = 0;
              for (int64_t k = 0; k < vpp; ++k) {
                const int64_t c = (last ? pp - 1 : 0) + k * pp;
                for (int64_t i = c * per_chunk; i < std::min(layers, (c + 1) * per_chunk); ++i) {
                  (i >= fd && (i - fd) % freq == 0 ? moe : dense) += 1;
                }
              }
              const StageLayers got = LayersOfStage(j, last);
              EXPECT_EQ(got.dense, dense) << layers << " " << fd << " " << freq << " " << pp << " " << vpp << " " << last;
              EXPECT_EQ(got.moe, moe) << layers << " " << fd << " " << freq << " " << pp << " " << vpp << " " << last;
            }
          }
        }
      }
    }
  }
}

TEST(Memory, MegatronBytesPerParameter) {
  // 18 bytes/param without the distributed optimizer; 6 + 12/DP with it
  // (Megatron-LM theoretical_memory_usage.py, bf16 with fp32 main grads).
  auto job = testing::JobFromYaml(R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 8})");
  ASSERT_TRUE(job.ok()) << job.status();
  const LocalParameters local = LocalParameterCount(*job);
  EXPECT_NEAR(local.total(), CountParameters(job->model).total, 1.0);
  // Llama 3 8B: 8,030,261,248 parameters (Meta's model card; torchtitan logs the same), from the
  // counts made here or passed in (the step model passes its own).
  EXPECT_DOUBLE_EQ(local.total(), 8030261248.0);
  EXPECT_DOUBLE_EQ(LocalParameterCount(*job, true, CountParameters(job->model)).total(), 8030261248.0);
  MemoryEstimate m = EstimateMemory(*job);
  EXPECT_DOUBLE_EQ((m.weights_bytes + m.gradients_bytes + m.optimizer_states_bytes) / local.total(), 18.0);
  job->training.sharding = Sharding::kZero1;
  m = EstimateMemory(*job);
  EXPECT_DOUBLE_EQ((m.weights_bytes + m.gradients_bytes + m.optimizer_states_bytes) / local.total(), 6.0 + 12.0 / 8);
}

TEST(Memory, MuonKeepsOneMomentumBuffer) {
  // Muon keeps one momentum buffer per parameter (Moonlight, arXiv:2502.16982, Algorithm 1:
  // "momentum buffer M"; no second moment): with the fp32 master, 4 + 4 bytes against AdamW's
  // 4 + 8. Llama 3 8B with the distributed optimizer on 8 GPUs: 6 + 8/8 bytes per parameter.
  auto job = testing::JobFromYaml(testing::kLlama3_8bMuonOn8H100);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->training.optimizer, Optimizer::kMuon);
  const double params = LocalParameterCount(*job).total();
  const MemoryEstimate m = EstimateMemory(*job);
  EXPECT_DOUBLE_EQ((m.weights_bytes + m.gradients_bytes + m.optimizer_states_bytes) / params, 6.0 + 8.0 / 8);
}

TEST(Memory, PrecisionAwareOptimizerKeepsMasterWeightRemainders) {
  // Megatron-Core's precision-aware optimizer with store_param_remainders (OptimizerConfig
  // default True; TE FusedAdam): the fp32 master weight is the bf16 weight plus a 16-bit
  // remainder, so the optimizer's per-parameter bytes are 2 + 4 + 4 = 10 instead of 4 + 4 + 4 = 12
  // (megatron/core/optimizer/optimizer_config.py). Llama 3 8B with the distributed optimizer on 8
  // GPUs: 6 + 10/8 bytes per parameter, from 6 + 12/8. Only with fp32 masters and bf16 weights.
  auto job = testing::JobFromYaml(R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 8, sharding: zero1,
           precision: {gemm: bf16, master_weight_remainders: true}})");
  ASSERT_TRUE(job.ok()) << job.status();
  const double params = LocalParameterCount(*job).total();
  MemoryEstimate m = EstimateMemory(*job);
  EXPECT_DOUBLE_EQ((m.weights_bytes + m.gradients_bytes + m.optimizer_states_bytes) / params, 6.0 + 10.0 / 8);
  EXPECT_DOUBLE_EQ(m.optimizer_states_bytes / params, 10.0 / 8);
  // fp16 weights: no remainder scheme (TE's needs bf16's 16 upper bits): 12 bytes again.
  job->training.precision.params = DType::kFP16;
  m = EstimateMemory(*job);
  EXPECT_DOUBLE_EQ(m.optimizer_states_bytes / params, 12.0 / 8);
}

TEST(Memory, NemoPerformanceScriptsUseTheRemaindersForBf16Only) {
  // NeMo 2's scripts/performance/helpers.py switches the precision-aware optimizer on for bf16
  // runs only; the nemo preset says so and the prediction lists it as assumed.
  for (const auto& [gemm, remainders] : {std::pair<std::string, bool>{"bf16", true}, {"fp8", false}}) {
    auto job = testing::JobFromYaml(absl::StrCat(R"(
model: llama3-8b
hardware: h100-sxm
framework: nemo
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 8, precision: {gemm: )", gemm, "}}"));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->training.precision.master_weight_remainders, remainders) << gemm;
    bool listed = false;
    for (const AssumedInput& a : *job->assumed) listed |= a.field == "training.precision.master_weight_remainders";
    EXPECT_EQ(listed, remainders) << gemm;
  }
}

TEST(Memory, Seed004Exercise1StaticUnderZero3) {
  // 13B, TP 4, ZeRO-3 over the 8-way DP (32 GPUs): 16 Psi / 32 of static memory, seed 004
  // prints 0.81 + 0.81 + 4.87 = 6.49 GB for Psi = 13e9 (our shape has 12.84e9 parameters).
  auto job = testing::JobFromYaml(R"(
model: seed004-13b
hardware: h100-sxm
cluster: {gpu_count: 32}
parallelism: {tp: 4}
training: {seq_length: 4096, global_batch_size: 64, micro_batch_size: 8, sharding: zero3,
           precision: {grads: bf16}})");
  ASSERT_TRUE(job.ok()) << job.status();
  const MemoryEstimate m = EstimateMemory(*job);
  const double psi = CountParameters(job->model).total;
  // Seed 004 splits every parameter 32 ways; Megatron-Core keeps each layer's two LayerNorms
  // (weight and bias, 2 x 5120 each, fused into the first linears) whole on every TP rank:
  // 40 layers x 2 x 10240 x (1 - 1/4) parameters more per TP rank, before the ZeRO-3 split over 8.
  const double norms = 40 * 2 * 10240.0 * (1 - 0.25) / 8;
  EXPECT_NEAR(m.weights_bytes, 2 * (psi / 32 + norms), 1e-6 * psi);
  EXPECT_NEAR(m.gradients_bytes, 2 * (psi / 32 + norms), 1e-6 * psi);
  EXPECT_NEAR(m.optimizer_states_bytes, 12 * (psi / 32 + norms), 1e-6 * psi);
  EXPECT_NEAR((m.weights_bytes + m.gradients_bytes + m.optimizer_states_bytes) * 13e9 / psi / 1e9, 6.5, 0.01);
  // Without recompute this batch does not fit in 80 GB (seed 004: ~125 GB); an answer, not an error.
  EXPECT_FALSE(m.fits);
  EXPECT_LT(m.headroom_bytes, 0);
}

TEST(Memory, PipelineInFlightAndInterleavingPenalty) {
  auto base = testing::JobFromYaml(R"(
model: gpt3-175b
hardware: a100-80gb
cluster: {gpu_count: 64}
parallelism: {tp: 8, pp: 8, sequence_parallel: true}
training: {seq_length: 2048, global_batch_size: 64, recompute: selective, flash_attention: false})");
  ASSERT_TRUE(base.ok()) << base.status();
  Job inter = *base;
  inter.parallelism.vpp = 3;
  const double a1 = EstimateMemory(*base).activations_bytes;
  const double a3 = EstimateMemory(inter).activations_bytes;
  // Megatron: interleaving multiplies the first stage's activations by 1 + (p-1)/(p v).
  EXPECT_NEAR(a3 / a1, 1 + 7.0 / 24, 0.01);
}

TEST(Memory, DoesNotFitIsAnAnswer) {
  auto job = testing::JobFromYaml(R"(
model: llama3-405b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 8})");
  ASSERT_TRUE(job.ok()) << job.status();
  auto p = Predict(*job);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->memory.fits);
  EXPECT_GT(p->memory.total_bytes, 405e9 * 18);
}

// The fixed per-GPU terms of core/memory.h by hand: 0.5 GiB of CUDA context on every GPU; 64 MiB
// of NCCL buffers per communicator in use (one per parallel dimension above 1); Megatron DDP's
// gradient buckets (2 x 40M parameters in the grad-reduce dtype) only where DP x CP > 1; the
// cuBLAS workspaces (2 x 32 MiB, Hopper size). Llama 3 8B on 16 H100s in three layouts.
TEST(Memory, FixedTermsCudaContextNcclBuffersPerCommunicatorAndDdpBuckets) {
  const double mib = 1 << 20;
  struct Case {
    const char* parallelism;
    int gpus;
    int communicators;
    bool ddp_buckets;
  } cases[] = {
      {"{tp: 1}", 1, 0, false},
      {"{tp: 8}", 8, 1, false},
      {"{tp: 4, pp: 2, dp: 2}", 16, 3, true},
      {"{tp: 2, cp: 2, pp: 2, dp: 2}", 16, 4, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.parallelism);
    auto job = testing::JobFromYaml(absl::StrCat(R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: )", c.gpus, R"(}
parallelism: )", c.parallelism, R"(
training: {seq_length: 4096, global_batch_size: 64})"));
    ASSERT_TRUE(job.ok()) << job.status();
    const MemoryEstimate m = EstimateMemory(*job);
    EXPECT_DOUBLE_EQ(m.cuda_context_bytes, 512 * mib);
    const double buckets = c.ddp_buckets ? 2 * 40e6 * BytesPerElement(job->training.precision.grad_reduce) : 0.0;
    EXPECT_DOUBLE_EQ(m.communication_buffers_bytes, buckets + c.communicators * 64 * mib);
    EXPECT_DOUBLE_EQ(m.workspace_bytes, 64 * mib);
  }
}

// PyTorch AMP (torch.autocast bf16 over fp32 weights; docs "Autocast Op Reference": layer_norm runs
// in float32, linear / SDPA in bf16; the cast cache keeps each weight's bf16 copy). Against the same
// job with bf16 weights, a GPT layer (h 2048, seq 2048, micro-batch 8, no TP) stores its two norm
// inputs in 4 bytes instead of 2: 2 x 2 x 2048 x 8 x 2048 = 134,217,728 bytes more per layer; the
// weight cache is 2 bytes per parameter; every other activation is bf16 in both.
TEST(Memory, AutocastKeepsTheResidualStreamInFp32AndTheWeightCache) {
  const std::string shape =
      "model: {shape: {layers: 24, hidden_size: 2048, attention_heads: 16, ffn_hidden_size: 8192, ffn_type: gelu, "
      "vocab_size: 50304, tied_embeddings: true, linear_bias: true, learned_position_embeddings: 2048, "
      "norm_type: layernorm}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\n"
      "training: {seq_length: 2048, global_batch_size: 8, micro_batch_size: 8, recompute: none, ";
  absl::StatusOr<Job> amp = testing::JobFromYaml(shape + "precision: {params: fp32, gemm: bf16}}\n");
  absl::StatusOr<Job> bf16 = testing::JobFromYaml(shape + "precision: {params: bf16, gemm: bf16}}\n");
  ASSERT_TRUE(amp.ok()) << amp.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_TRUE(amp->training.precision.Autocast());
  ASSERT_FALSE(bf16->training.precision.Autocast());
  const LayerActivationTerms a = ComputeLayerActivationTerms(*amp), b = ComputeLayerActivationTerms(*bf16);
  EXPECT_DOUBLE_EQ(a.dense_layer_bytes - b.dense_layer_bytes, 134217728.0);
  const MemoryEstimate ma = EstimateMemory(*amp), mb = EstimateMemory(*bf16);
  const double params = ma.weights_bytes / 4;  // fp32 weights
  EXPECT_NEAR(ma.workspace_bytes - mb.workspace_bytes, 2 * params, 1.0);
}

// ---------------------------------------------------------------------------------------------
// FSDP / ZeRO-3 memory against the frameworks' own figures (issue 21 item 2, issue 23 item 6).

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// torchtitan's published peaks (pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md,
// Tables 1 and 3, torchtitan 9dec370 / torch 1963fc8, H100 96 GB): Llama 3.1 8B, FSDP over all
// ranks, local batch 2, seq 8192 (llama3_8b.toml), selective (op) AC, eager: 82.4 GiB on 8 GPUs,
// 67.0 GiB on 128. torchtitan logs the caching allocator's peak *reserved* memory, which is at
// least the peak allocated that stepcast estimates; the fragmentation between them is taken as at
// most 15% here. The 8 -> 128 drop is the sharded states (16 B/param / 8 - / 128) only.
// Before the FSDP terms (loss peak, per-unit gradient buffers, selective working set) the
// estimates were 55.8 and 41.8 GiB: 32% and 38% under.
TEST(FsdpMemory, TorchtitanLlama31_8BPublishedPeaks) {
  auto job = [](int gpus) {
    return testing::JobFromYaml(absl::StrCat(R"(
model: llama3-8b
hardware: h100-sxm
framework: torchtitan
cluster: {gpu_count: )", gpus, R"(}
parallelism: {tp: 1, pp: 1}
training: {seq_length: 8192, global_batch_size: )", 2 * gpus, R"(, micro_batch_size: 2, sharding: zero3,
           precision: {gemm: bf16}, recompute: selective,
           recompute_modules: [activation_functions, every_second_mm]})"));
  };
  absl::StatusOr<Job> j8 = job(8), j128 = job(128);
  ASSERT_TRUE(j8.ok()) << j8.status();
  ASSERT_TRUE(j128.ok()) << j128.status();
  const double m8 = EstimateMemory(*j8).total_bytes / kGiB, m128 = EstimateMemory(*j128).total_bytes / kGiB;
  EXPECT_LE(m8, 82.4);
  EXPECT_GE(m8, 0.85 * 82.4);
  EXPECT_LE(m128, 67.0);
  EXPECT_GE(m128, 0.85 * 67.0);
  EXPECT_NEAR(m8 - m128, 82.4 - 67.0, 0.10 * (82.4 - 67.0));
}

// NVIDIA's documented minimum H100 configuration for DeepSeek-V3 with torchtitan
// (NVIDIA/dgxc-benchmarking deepseek_v3/pretrain/torchtitan, 841f546: 512 H100, DP shard 64,
// EP 64, PP 8 (1F1B), local batch 16, seq 4096, selective op AC, torch.compile) runs: it must fit
// (issue 23: predicted 44-60 GiB over before). With PP, torchtitan keeps the stage's parameters
// unsharded across the step and its unsharded gradients in fp32 (pipelining/stage.py); its op SAC
// saves the DeepEP dispatch output but not the experts' grouped-GEMM outputs or the MLA up
// projections.
TEST(FsdpMemory, DeepSeekV3TorchtitanDgxcMinimumH100Fits) {
  absl::StatusOr<Job> job = testing::JobFromYaml(R"(
model: deepseek-v3
hardware: h100-sxm
framework: torchtitan-compile
cluster: {gpu_count: 512}
parallelism: {tp: 1, pp: 8, ep: 64, etp: 1, pp_schedule: 1f1b}
training: {seq_length: 4096, global_batch_size: 1024, micro_batch_size: 1, sharding: zero3,
           precision: {gemm: bf16}, recompute: selective,
           recompute_modules: [activation_functions, every_second_mm]})");
  ASSERT_TRUE(job.ok()) << job.status();
  const MemoryEstimate m = EstimateMemory(*job);
  EXPECT_TRUE(m.fits || m.tight) << m.total_bytes / kGiB << " GiB of " << m.capacity_bytes / kGiB;
  // The unsharded fp32 gradients of the stage are held (not the sharded ones besides them).
  const LocalParameters local = LocalParameterCount(*job);
  EXPECT_DOUBLE_EQ(m.gradients_bytes, 4 * local.total());
}

// torchtitan's op SAC on a DeepSeek-V3 MoE layer, enumerated from its policy
// (torchtitan/distributed/activation_checkpoint.py @b5bcd76: outputs of mm / SDPA / topk /
// all_to_all / DeepEP dispatch saved, every second mm recomputed, grouped GEMMs not in the list):
// per token of the micro-batch, bf16, TP 1: the block input and the post-attention residual (2h),
// the two down-projected latents wq_a (q_lora_rank) and wkv_a (kv_lora_rank + rope dim) -- the 1st
// and 3rd mm, kept; wq_b and wkv_b (2nd, 4th) recomputed --, the SDPA output (heads x v_head_dim)
// and its fp32 log-sum-exp (4 bytes per head), one of the shared expert's two up projections
// (shared ffn), and the dispatched tokens (top_k copies of h).
TEST(FsdpMemory, TorchtitanOpSacOnADeepSeekV3MoeLayer) {
  const ModelShape m = *testing::BuiltinCatalog().FindModel("deepseek-v3");
  const ModelShape r = m.Resolved();
  LayerActivationInput in;
  in.seq_tokens = 4096; in.kv_tokens = 4096; in.micro_batch = 1; in.tp = 1; in.flash_attention = true;
  in.recompute = Recompute::kSelective;
  in.recompute_modules = RecomputeModuleMask({"activation_functions", "every_second_mm"});
  in.bytes_per_activation = 2; in.moe_layer = true; in.expert_tp = 1;
  const double h = r.hidden_size, a = r.attention_heads;
  const double per_token = 2 * (2 * h + r.mla.q_lora_rank + r.mla.kv_lora_rank + r.mla.qk_rope_head_dim + a * r.VHeadDim() +
                                r.moe.shared_experts * r.moe.shared_expert_ffn_hidden_size + r.moe.top_k * h) +
                           4 * a;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, in), 4096 * per_token);
}

// NeMo AutoModel's defer_fsdp_grad_sync (default True: set_requires_gradient_sync(is_optim_step),
// components/distributed/utils.py @36044ad): with gradient accumulation the unsharded gradients are
// held across micro-batches in the reduce dtype, fp32 (FSDP2 to_accumulated_grad_if_needed): 4
// bytes per local parameter. Its published Llama 3.1 70B benchmark (docs/performance-summary.mdx:
// 64 H100, FSDP 32 x CP 2, GBS 128, LBS 1, GA 4, seq 8192) turns it off because "True -> delayed
// resharding -> OOM" (custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml): 4 B x 70.6e9 = 282 GB.
TEST(FsdpMemory, NemoAutomodelDeferredGradSyncHoldsFp32UnshardedGradients) {
  const std::string layout = R"(
hardware: h100-sxm
framework: nemo-automodel
cluster: {gpu_count: 64}
parallelism: {tp: 1, pp: 1, cp: 2}
training: {seq_length: 8192, global_batch_size: 128, micro_batch_size: 1, precision: {gemm: bf16}})";
  // The same shape under a name no recipe matches: AutoModel's defaults.
  const ModelShape l70 = *testing::BuiltinCatalog().FindModel("llama3-70b");
  const std::string shape = absl::StrCat(
      "model: {shape: {name: my-70b, layers: ", l70.layers, ", hidden_size: ", l70.hidden_size,
      ", attention_heads: ", l70.attention_heads, ", kv_heads: ", l70.kv_heads, ", ffn_hidden_size: ",
      l70.ffn_hidden_size, ", ffn_type: swiglu, vocab_size: ", l70.vocab_size, ", norm_type: rmsnorm}}");
  absl::StatusOr<Job> deferred = testing::JobFromYaml(shape + layout);
  absl::StatusOr<Job> recipe = testing::JobFromYaml("model: llama3-70b" + layout);
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_TRUE(deferred->framework.sharding.reduce_once_per_step_with_accumulation);
  EXPECT_FALSE(recipe->framework.sharding.reduce_once_per_step_with_accumulation);
  const MemoryEstimate md = EstimateMemory(*deferred), mr = EstimateMemory(*recipe);
  const double local = LocalParameterCount(*deferred).total();
  EXPECT_DOUBLE_EQ(md.gradients_bytes, 4 * local);
  EXPECT_GT(md.gradients_bytes, 280e9);
  EXPECT_FALSE(md.fits || md.tight);
  // The benchmark's own settings (every micro-batch reduce-scatters): sharded gradients only.
  EXPECT_DOUBLE_EQ(mr.gradients_bytes, 2 * LocalParameterCount(*recipe).total() / 64);
  EXPECT_TRUE(mr.fits || mr.tight) << mr.total_bytes / kGiB;
}

// ZeRO-2 as PyTorch FSDP runs it (SHARD_GRAD_OP, reshard_after_forward=False; framework.proto
// zero2_is_shard_grad_op) accumulates gradients the way the same framework's ZeRO-3 does: with
// AutoModel's deferred gradient sync and 4 micro-batches both hold every unsharded gradient in fp32
// (4 bytes per local parameter, as the test above); only the parameters differ (ZeRO-2 keeps them
// unsharded).
TEST(FsdpMemory, ShardGradOpZeroTwoAccumulatesGradientsAsZeroThree) {
  const ModelShape l70 = *testing::BuiltinCatalog().FindModel("llama3-70b");
  const std::string job = absl::StrCat(
      "model: {shape: {name: my-70b, layers: ", l70.layers, ", hidden_size: ", l70.hidden_size,
      ", attention_heads: ", l70.attention_heads, ", kv_heads: ", l70.kv_heads, ", ffn_hidden_size: ",
      l70.ffn_hidden_size, ", ffn_type: swiglu, vocab_size: ", l70.vocab_size, ", norm_type: rmsnorm}}", R"(
hardware: h100-sxm
framework: nemo-automodel
cluster: {gpu_count: 64}
parallelism: {tp: 1, pp: 1, cp: 2}
training: {seq_length: 8192, global_batch_size: 128, micro_batch_size: 1, precision: {gemm: bf16}, sharding: zero2})");
  absl::StatusOr<Job> z2 = testing::JobFromYaml(job);
  ASSERT_TRUE(z2.ok()) << z2.status();
  Job z3 = *z2;
  z3.training.sharding = Sharding::kZero3;
  const double local = LocalParameterCount(*z2).total();
  EXPECT_DOUBLE_EQ(EstimateMemory(*z2).gradients_bytes, 4 * local);
  EXPECT_DOUBLE_EQ(EstimateMemory(z3).gradients_bytes, 4 * local);
  EXPECT_GT(EstimateMemory(*z2).weights_bytes, 10 * EstimateMemory(z3).weights_bytes);
}

// Gathered parameters alive at once, from each framework's documented defaults:
//  - FSDP1/FSDP2: current and next unit (BACKWARD_PRE, two all-gather outputs): 2 layers;
//  - DeepSpeed ZeRO-3: current module + stage3_prefetch_bucket_size 5e7, at most
//    stage3_max_live_parameters 1e9 (deepspeed/runtime/zero/config.py): a 405B layer (3.2e9
//    parameters) hits the cap, 1e9 x 2 bytes;
//  - Colossal-AI Gemini: the current op's chunks, two of 64 Mi elements;
//  - Megatron-FSDP: one unit plus suggested_AG_prefetch_size = max(1e9, 2 x unit) / 2 elements
//    (megatron_fsdp.py l.420-444), here as an inline spec on the megatron-core preset.
TEST(FsdpMemory, GatheredParametersPerFramework) {
  auto gathered = [](const std::string& model, int gpus, const std::string& framework) {
    absl::StatusOr<Job> j = testing::JobFromYaml(absl::StrCat("model: ", model, "\nhardware: h100-sxm\nframework: ",
                                                              framework, "\ncluster: {gpu_count: ", gpus, R"(}
parallelism: {tp: 1, pp: 1}
training: {seq_length: 4096, global_batch_size: )", gpus, R"(, micro_batch_size: 1, sharding: zero3, recompute: full,
           precision: {gemm: bf16, params: bf16}})"));
    EXPECT_TRUE(j.ok()) << j.status();
    const double cublas = 2 * 32.0 * (1 << 20);
    return std::make_pair(EstimateMemory(*j).workspace_bytes - cublas, LocalParameterCount(*j).total() / j->model.layers);
  };
  {
    auto [bytes, layer] = gathered("llama3-8b", 64, "pytorch-fsdp1");
    EXPECT_DOUBLE_EQ(bytes, 2 * layer * 2);
    auto [b2, l2] = gathered("llama3-8b", 64, "pytorch-fsdp2");
    EXPECT_DOUBLE_EQ(b2, 2 * l2 * 2);
  }
  {
    auto [bytes, layer] = gathered("llama3-405b", 512, "deepspeed");
    ASSERT_GT(layer + 5e7, 1e9);
    EXPECT_DOUBLE_EQ(bytes, 1e9 * 2);
    auto [b8, l8] = gathered("llama3-8b", 64, "deepspeed");
    EXPECT_DOUBLE_EQ(b8, (l8 + 5e7) * 2);
  }
  {
    auto [bytes, layer] = gathered("llama3-70b", 64, "colossalai-gemini");
    ASSERT_GT(layer, 2 * 64.0 * (1 << 20));
    EXPECT_DOUBLE_EQ(bytes, 2 * 64.0 * (1 << 20) * 2);
  }
  {
    auto [bytes, layer] = gathered("llama3-8b", 64,
                                   "{spec: {name: megatron-fsdp, base: megatron-core, sharding: {reshard_after_forward: true, "
                                   "gathered_units: 2, gather_prefetch_params: 500000000, memory_source: 'megatron_fsdp.py'}}}");
    ASSERT_LT(layer, 5e8);
    EXPECT_DOUBLE_EQ(bytes, (layer + 5e8) * 2);
  }
}

// The eager loss at its peak (the start of the backward): F.cross_entropy(logits.float()) holds the
// fp32 log_softmax output, nll_loss_backward's dense fp32 gradient and log_softmax_backward's fp32
// result, 12 bytes per logit, where a vocab-parallel fused loss keeps its fp32 softmax (4).
TEST(FsdpMemory, EagerLossPeakHoldsTwelveBytesPerLogit) {
  const std::string job = R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
parallelism: {tp: 1, pp: 1}
training: {seq_length: 8192, global_batch_size: 16, micro_batch_size: 2, sharding: zero3, precision: {gemm: bf16}, recompute: full}
framework: )";
  absl::StatusOr<Job> eager = testing::JobFromYaml(job + "torchtitan");
  absl::StatusOr<Job> fused = testing::JobFromYaml(
      job + "{spec: {name: fused-loss, base: torchtitan, elementwise: {traffic_factor: 3.0, "
            "cross_entropy_bytes_per_logit: 48, source: 'test'}}}");
  ASSERT_TRUE(eager.ok()) << eager.status();
  ASSERT_TRUE(fused.ok()) << fused.status();
  const double logits = 2.0 * 8192 * eager->model.vocab_size;
  EXPECT_DOUBLE_EQ(EstimateMemory(*eager).activations_bytes - EstimateMemory(*fused).activations_bytes, 8 * logits);
}

// Megatron-FSDP's gradients follow --megatron-fsdp-main-grads-dtype (Megatron-LM arguments.py
// @d98e8a6: "Data type for the main gradient buffer utilized for distributed optimization with
// Megatron-FSDP"): bf16 halves the sharded gradient memory of fp32.
TEST(FsdpMemory, MegatronFsdpMainGradsDtypeHalvesGradientMemory) {
  auto grads = [](const char* dtype) {
    absl::StatusOr<Job> j = testing::JobFromYaml(absl::StrCat(R"(
model: llama3-70b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 64}
training: {seq_length: 4096, global_batch_size: 64, micro_batch_size: 1, sharding: zero3, recompute: full,
           precision: {gemm: bf16, grads: )", dtype, "}}"));
    EXPECT_TRUE(j.ok()) << j.status();
    return EstimateMemory(*j).gradients_bytes;
  };
  EXPECT_DOUBLE_EQ(grads("bf16") * 2, grads("fp32"));
}

}  // namespace
}  // namespace stepcast
