// Seed 000 (jman4162, "Sizing AI Training by Cost per Memory Bandwidth"): the notebook's
// printed compare_options() table and the per-resource rates recomputed in tests/data/seeds/seed_origins.md
// ("Seed 000": [C] values come from running the notebook's code unmodified).
#include "core/cost_per_bandwidth.h"
#include "gtest/gtest.h"

namespace stepcast::seed000 {
namespace {

// The seed's "placeholder" catalog and example model.
const Hardware kH100{"H100-SXM", 900, 3.35, 200, 3.93};
const Hardware kH200{"H200", 1000, 4.80, 400, 4.33};
const Hardware kL4{"L4", 120, 0.30, 100, 1.15};
const Model kModel{70e9, 80, 8192, 2};
TrainingCfg Cfg() {
  TrainingCfg t;
  t.recompute_mult = 1.2;
  t.alpha_opt_bytes_per_param = 16.0;
  t.c_act = 5.0;
  t.global_tokens_per_step = 512000;
  t.bytes_per_grad_elem = 2;
  return t;
}

TEST(Seed000, PerTokenQuantities) {
  EXPECT_DOUBLE_EQ(PerTokenFlops(kModel, Cfg()), 5.04e11);
  EXPECT_DOUBLE_EQ(PerTokenHbmBytes(kModel, Cfg()), 2187500 + 6553600);
  const TokenRate r = TokensPerSecPerGpu(kH100, kModel, Cfg(), 8);
  EXPECT_NEAR(r.intensity_flops_per_byte, 57658.647, 1e-3);
  EXPECT_NEAR(r.machine_balance_flops_per_byte, 268.657, 1e-3);
  EXPECT_NEAR(kH200.machine_balance_flops_per_byte(), 208.333, 1e-3);
  EXPECT_NEAR(kL4.machine_balance_flops_per_byte(), 400.0, 1e-9);
}

TEST(Seed000, NetworkBytesUseTheCorrectedRingTraffic) {
  // The README's 2 N b_g / B_g (546,875 B/token at p = 8) undercounts the ring: commit 91f7f8e
  // fixed it to 2 (p-1) N b_g / B_g = 3,828,125 B/token. We implement the fix.
  EXPECT_DOUBLE_EQ(PerTokenNetBytes(kModel, Cfg(), 8), 3828125);
  EXPECT_DOUBLE_EQ(PerTokenNetBytes(kModel, Cfg(), 1), 0);
  // Eff-scaled rates of the fixed version (tests/data/seeds/seed_origins.md, Seed 000 [C]).
  const TokenRate h100 = TokensPerSecPerGpu(kH100, kModel, Cfg(), 8);
  EXPECT_NEAR(h100.r_comp, 1339.286, 1e-3);
  EXPECT_NEAR(h100.r_mem, 287435.22, 1e-2);
  EXPECT_NEAR(h100.r_net, 4897.959, 1e-3);
  const TokenRate h200 = TokensPerSecPerGpu(kH200, kModel, Cfg(), 8);
  EXPECT_NEAR(h200.r_net, 9795.918, 1e-3);
  EXPECT_NEAR(h200.r_mem, 411847.479, 1e-2);
  const TokenRate l4 = TokensPerSecPerGpu(kL4, kModel, Cfg(), 8);
  EXPECT_NEAR(l4.r_net, 2448.98, 1e-2);
  EXPECT_NEAR(l4.r_mem, 25740.467, 1e-2);
}

TEST(Seed000, CompareOptionsPrintedTable) {
  // pprint(compare_options()): target 200k tokens/s, dp 8; identical in both seed versions.
  const auto plans = CompareOptions({kH100, kH200, kL4}, kModel, Cfg(), 200000, 8);
  ASSERT_EQ(plans.size(), 3u);
  struct Row { const char* hw; double gpus, per_hr, per_gpu, hbm, per_tbs; };
  const Row rows[] = {{"H200", 135, 584.55, 1488.1, 1.748, 0.9},
                      {"H100-SXM", 150, 589.5, 1339.29, 1.748, 1.17},
                      {"L4", 1120, 1288.0, 178.57, 1.748, 3.83}};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(rows[i].hw);
    EXPECT_EQ(plans[i].hardware, rows[i].hw);
    EXPECT_DOUBLE_EQ(plans[i].gpus, rows[i].gpus);
    EXPECT_NEAR(plans[i].per_hr_usd, rows[i].per_hr, 0.005);
    EXPECT_NEAR(plans[i].per_gpu_tokens_s, rows[i].per_gpu, 0.01);
    EXPECT_EQ(plans[i].bound, Bound::kCompute);
    EXPECT_NEAR(plans[i].cluster_hbm_tbps, rows[i].hbm, 0.0005);
    EXPECT_NEAR(plans[i].per_tbps_hr_usd, rows[i].per_tbs, 0.005);
  }
}

TEST(Seed000, BoundFollowsIntensityVsBalance) {
  // A tiny-batch, huge-activation case is memory-bound: intensity below the machine balance.
  TrainingCfg t = Cfg();
  t.global_tokens_per_step = 1000;
  t.c_act = 1e6;
  const TokenRate r = TokensPerSecPerGpu(kH100, kModel, t, 1);
  EXPECT_EQ(r.bound, Bound::kMemory);
  EXPECT_LT(r.intensity_flops_per_byte, r.machine_balance_flops_per_byte);
}

}  // namespace
}  // namespace stepcast::seed000
