// Per-GPU memory against Korthikanti et al. 2022 Table 2 (activations per layer), Megatron-LM's
// bytes per parameter (theoretical_memory_usage.py) and seed 004's exercise 1.
#include <algorithm>

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
  EXPECT_NEAR(m.weights_bytes, 2 * psi / 32, 1e-6 * psi);
  EXPECT_NEAR(m.gradients_bytes, 2 * psi / 32, 1e-6 * psi);
  EXPECT_NEAR(m.optimizer_states_bytes, 12 * psi / 32, 1e-6 * psi);
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

}  // namespace
}  // namespace stepcast
