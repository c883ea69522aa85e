// Seed 001 (xrsrke/hf-notebooks diloco/03_diloco.ipynb): printed outputs and recomputed values
// from tests/data/seeds/seed_origins.md ("Seed 001" [R] and [C]). Constants from constants.py: 989e12 x 0.40 utilised bf16 FLOP/s, $2/h.
#include <cmath>

#include "core/scaling_estimates.h"
#include "gtest/gtest.h"

namespace stepcast::estimates {
namespace {

constexpr double kUtilized = 989e12 * 0.40;  // UTILIZED_BFLOAT16_FLOPS = 3.956e14
constexpr double kN = 70e9;

TEST(Seed001, ChinchillaAndTotals) {
  EXPECT_DOUBLE_EQ(ChinchillaDatasetTokens(kN), 1.4e12);
  EXPECT_DOUBLE_EQ(TrainingFlops(kN, 1.4e12) / 1e18, 588000.0);   // "588,000.0 EFLOPs"
  EXPECT_DOUBLE_EQ(TrainingFlops(kN, 20e12) / 1e18, 8400000.0);   // "8,400,000.0 EFLOPs"
}

TEST(Seed001, CriticalBatchSizeLaw) {
  // The law's arithmetic on the seed's argument: 0.2920 x (70e9)^0.3271 = 1029.946, x 4096 =
  // 4,218,658.48 tokens (the printed "4.218658M"). The seed applies DeepSeek LLM's law to N;
  // the law is in compute C = 6 N D, which gives ~17.4M tokens for 70B on 1.4T tokens.
  EXPECT_NEAR(CriticalBatchSizeTokens(kN), 1029.946, 1e-3);
  EXPECT_NEAR(CriticalBatchSizeTokens(kN) * 4096, 4218658.48, 0.5);
  EXPECT_NEAR(CriticalBatchSizeTokens(TrainingFlops(kN, 1.4e12)) / 1e6, 17.4, 0.05);
}

struct GbsRow { double gbs, steps_14, steps_20, pflops; double gpus_floor; double t_step; double days_14, days_20; };

TEST(Seed001, ComputeTable) {
  const GbsRow rows[] = {
      {8192, 170898437, 2441406250, 3.44064, 8, 1.087159, 2150.4, 30719.9},
      {1e6, 1400000, 20000000, 420, 1061, 1.000639, 16.2, 231.6},
      {2e6, 700000, 10000000, 840, 2123, 1.000168, 8.1, 115.8},
      {4e6, 350000, 5000000, 1680, 4246, 1.000168, 4.1, 57.9},
      {8e6, 175000, 2500000, 3360, 8493, 1.00005, 2.0, 28.9},
      {16e6, 87500, 1250000, 6720, 16986, 1.00005, 1.0, 14.5},
      {32e6, 43750, 625000, 13440, 33973, 1.000021, 0.5, 7.2},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.gbs);
    EXPECT_DOUBLE_EQ(TrainingSteps(1.4e12, r.gbs), r.steps_14);
    EXPECT_DOUBLE_EQ(TrainingSteps(20e12, r.gbs), r.steps_20);
    const double f = FlopsPerStep(kN, r.gbs);
    EXPECT_NEAR(f / 1e15, r.pflops, 1e-9);
    // The seed floors the GPU count (so its 1 s target is missed by t_step - 1).
    EXPECT_DOUBLE_EQ(std::floor(GpusForStepTime(f, kUtilized, 1.0)), r.gpus_floor);
    const double t = StepTimeSeconds(f, r.gpus_floor, kUtilized);
    EXPECT_NEAR(t, r.t_step, 1e-6);
    EXPECT_NEAR(t * r.steps_14 / 86400, r.days_14, 0.05);
    EXPECT_NEAR(t * r.steps_20 / 86400, r.days_20, 0.05);
    // Cost is independent of the batch: $825,749.9 (1.4T), $11,796,427.4 (20T) at $2/h.
    EXPECT_NEAR(TrainingCostUsd(r.gpus_floor, 2.0, t, r.steps_14), 825749.9, 0.1);
    EXPECT_NEAR(TrainingCostUsd(r.gpus_floor, 2.0, t, r.steps_20), 11796427.4, 1.0);
  }
}

TEST(Seed001, DataParallelAcrossDataCentres) {
  // 10 sites at 10 GiB/s shared; bf16 gradient volume N x 2 = 0.140 TB per step.
  const double bw = 10.0 * 1024 * 1024 * 1024;
  const double per_step_bf16 = CommTimeGivenVolume(kN * 2, bw, 10);
  EXPECT_NEAR(per_step_bf16, 130.385, 1e-3);
  const double steps = TrainingSteps(20e12, 8192);
  const double comm = per_step_bf16 * steps;
  EXPECT_NEAR(comm / 86400, 3684295.7, 0.5);
  EXPECT_NEAR(comm / (86400 * 365.25), 10087.05, 0.05);
  const double train = StepTimeSeconds(FlopsPerStep(kN, 8192), 8, kUtilized) * steps;
  EXPECT_NEAR(100 * comm / (train + comm), 99.17, 0.01);
  // DiLoCo: sync every 500 steps with the fp8 volume: "3684.3 days - 10.71%".
  const double diloco = DilocoCommTime(CommTimeGivenVolume(kN * 1, bw, 10), steps, 500);
  EXPECT_NEAR(diloco / 86400, 3684.3, 0.05);
  EXPECT_NEAR(100 * diloco / (diloco + train), 10.71, 0.01);
}

TEST(Seed001, LightSpeedLatencyBetweenSites) {
  // Jean Zay - Joliot Curie 383.216 km, Jean Zay - El Capitan 8930.918 km (geopy great_circle).
  const double jz_jc = GreatCircleDistanceKm(48.7071906, 2.1753469, 45.7826699, 4.8626);
  const double jz_ec = GreatCircleDistanceKm(48.7071906, 2.1753469, 37.6869634, -121.7084555);
  EXPECT_NEAR(jz_jc, 383.216, 0.01);
  EXPECT_NEAR(jz_ec, 8930.918, 0.05);
  // The seed divides km by m/s (1.2783e-6 "s"); the light time is 1000x that: 1.278 ms.
  EXPECT_NEAR(LightSpeedLatencySeconds(jz_jc), 1.278e-3, 1e-6);
  EXPECT_NEAR(LightSpeedLatencySeconds(jz_ec), 29.79e-3, 1e-5);
}

TEST(Seed001, Electricity) {
  // 1M-token batch: 1061 H100s x 1275 W = 1.353 MW.
  EXPECT_NEAR(ElectricityJoules(1275, 1.0, 1061) / 1e6, 1.353, 0.001);
}

}  // namespace
}  // namespace stepcast::estimates

#include "core/memory.h"

namespace stepcast::estimates {
namespace {

TEST(Seed001, GradientAccumulationColumns) {
  // 1M-token batch, 1.4T tokens: "0.22 years | 212.2 gpus" with 5 accumulation steps.
  const double f = FlopsPerStep(kN, 1e6);
  const double t = StepTimeSeconds(f, 1061, kUtilized) * TrainingSteps(1.4e12, 1e6);
  EXPECT_NEAR(5 * t / (365.25 * 86400), 0.22, 0.005);
  // The GPUs column: the seed's 1-second-step GPU count (ComputeTable: floor 1061) over the k = 5
  // accumulation steps.
  EXPECT_NEAR(std::floor(GpusForStepTime(f, kUtilized, 1.0)) / 5, 212.2, 1e-9);
}

TEST(Seed001, LlamaActivationMemoryIsKorthikanti) {
  // transformer_mem_functional.py on LLAMA3_70B_CONFIG (80 layers, h 8192, 64 heads), one 8192-token
  // sequence, no checkpointing, tp 1: sbhL(10 + 24/t + 5as/(ht)) = 1,900,523,028,480 bytes.
  ModelShape m;
  m.layers = 80; m.hidden_size = 8192; m.attention_heads = 64; m.ffn_type = FfnType::kGelu;
  m.vocab_size = 32000;
  LayerActivationInput in;
  in.seq_tokens = 8192; in.kv_tokens = 8192; in.micro_batch = 1; in.tp = 1; in.dropout = true;
  EXPECT_DOUBLE_EQ(80 * LayerActivationBytes(m, in), 1900523028480.0);
  // With checkpointing the seed keeps sbhL(10 + 24/t) (Korthikanti's selective count).
  in.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(80 * LayerActivationBytes(m, in), 8192.0 * 8192 * 80 * 34);
}

}  // namespace
}  // namespace stepcast::estimates
