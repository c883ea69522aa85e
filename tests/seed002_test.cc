// Seed 002 (davidsj/ml_par_sim): README example 2 (simple_transformer.py at 4a9489e) and the
// efficiency constraints of example 1 (transformer.py).
#include "core/ml_par_sim.h"
#include "gtest/gtest.h"

namespace stepcast::seed002 {
namespace {

TEST(Seed002, SimpleTransformerExample2) {
  // --chip A100_40GB --n_layers 120 --d_model 12288 --batch_size 30720 --microbatch_size 48
  // --n_experts 16 --n_routed_experts 2 --pp 15 --pipeline_interleaving 8 --tp 8 --dp 12
  SimpleConfig c;
  c.chip = A100_40GB();
  c.n_layers = 120; c.d_model = 12288; c.batch_size = 30720; c.microbatch_size = 48;
  c.n_experts = 16; c.n_routed_experts = 2; c.pp = 15; c.pipeline_interleaving = 8; c.tp = 8; c.dp = 12;
  auto r = SimpleTransformer(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->params_total, 2.90e12, 0.005e12);       // "Parameters: 2.90e+12"
  EXPECT_NEAR(r->dataset_tokens, 5.80e13, 0.005e13);     // "Training Tokens: 5.80e+13"
  EXPECT_EQ(r->chips, 23040);
  EXPECT_EQ(r->boundary_interval, 1);
  EXPECT_EQ(r->bubble_layers, 14);
  EXPECT_NEAR(r->flop_per_batch, 1.37e20, 0.005e20);
  EXPECT_NEAR(r->bubble_s, 0.0273, 0.00005);
  EXPECT_NEAR(r->full_s, 9.5150, 0.00005);
  EXPECT_NEAR(r->grad_s, 0.0050, 0.00005);
  EXPECT_NEAR(r->batch_s, 9.5473, 0.00005);
  EXPECT_NEAR(r->utilization, 0.9966, 0.00005);
  EXPECT_NEAR(r->days, 101.8, 0.05);
}

TEST(Seed002, SimpleTransformerRejectsTheScriptsAssertCases) {
  SimpleConfig c;
  c.chip = A100_40GB();
  c.n_layers = 120; c.d_model = 12288; c.n_experts = 3; c.n_routed_experts = 2;
  EXPECT_FALSE(SimpleTransformer(c).ok());  // e % k
  c.n_experts = 1; c.n_routed_experts = 1; c.pp = 7;
  EXPECT_FALSE(SimpleTransformer(c).ok());  // L % (pp interleave)
  c.pp = 1; c.pipeline_interleaving = 2;
  EXPECT_FALSE(SimpleTransformer(c).ok());  // interleave needs pp > 1
}

TEST(Seed002, EfficiencyConstraintsExample1) {
  // --num_experts 8 --batch_size 8192 --seq_len 8192 --num_layers 120 --d_model 15360
  // --p_pipe 15 --p_data 16 --p_seq 1 --p_exp 8 --p_tensor_int 8 --p_tensor_ext 1
  EfficiencyConfig c;
  c.num_experts = 8; c.batch_size = 8192; c.seq_len = 8192; c.num_layers = 120; c.d_model = 15360;
  c.d_ffn = 4 * 15360; c.p_pipe = 15; c.p_data = 16; c.p_exp = 8; c.p_tensor_int = 8;
  const EfficiencyResult r = CheckEfficiency(c);
  EXPECT_NEAR(r.params, 2.267e12, 0.0005e12);            // "N: 2.267e+12"
  EXPECT_NEAR(r.params_effective, 2.834e11, 0.0005e11);  // "(2.834e+11 effective)"
  EXPECT_TRUE(r.gradient_noise_ok);
  EXPECT_TRUE(r.pipeline_ok);
  EXPECT_TRUE(r.tensor_ok);
  EXPECT_EQ(r.allowed_micro_batches, (std::vector<int64_t>{16, 32, 64, 128}));
  // The earlier README example (--p_pipe 120 --p_tensor_int 1) allows only 16.
  c.p_pipe = 120; c.p_tensor_int = 1;
  EXPECT_EQ(CheckEfficiency(c).allowed_micro_batches, (std::vector<int64_t>{16}));
}

}  // namespace
}  // namespace stepcast::seed002

namespace stepcast::seed002 {
namespace {

// transformer.py --cluster_flop_rate 156e12 --num_experts 8 --batch_size 8192 --seq_len 8192
// --dataset_size 13e12 --num_layers 120 --d_model 15360 --p_data 16 --p_seq 1 --p_exp 8
// --p_tensor_ext 1, with the given --p_pipe and --p_tensor_int.
AccountingConfig ReadmeExample(int64_t p_pipe, int64_t p_tensor_int) {
  AccountingConfig c;
  c.cluster_flop_rate = 156e12; c.num_experts = 8; c.batch_size = 8192; c.seq_len = 8192;
  c.dataset_tokens = 13e12; c.num_layers = 120; c.d_model = 15360; c.p_pipe = p_pipe; c.p_data = 16;
  c.p_exp = 8; c.p_tensor_int = p_tensor_int;
  return c;
}

// The README prints 4 significant digits.
void Near4(double got, double printed) { EXPECT_NEAR(got / printed, 1.0, 6e-4) << got; }

TEST(Seed002, AccountingExample1) {
  // --p_pipe 15 --p_tensor_int 8: the README's printed table.
  auto r = TransformerAccounting(ReadmeExample(15, 8));
  ASSERT_TRUE(r.ok()) << r.status();
  auto near4 = Near4;
  near4(r->params, 2.267e12);
  near4(r->dataset_tokens, 1.300e13);
  EXPECT_EQ(r->chips, 15360);
  near4(r->flop_fwd, 8.198e24);
  near4(r->flop_bwd, 1.640e25);
  near4(r->flop_total(), 2.460e25);
  near4(r->tx_fwd, 1.923e20);
  near4(r->tx_bwd, 2.308e20);
  near4(r->tx_total(), 4.231e20);
  near4(r->rx_fwd, 3.746e20);
  near4(r->rx_bwd, 3.746e20);
  near4(r->rx_total(), 7.492e20);
  near4(r->tx_fwd + r->rx_fwd, 5.669e20);
  near4(r->tx_bwd + r->rx_bwd, 6.054e20);
  near4(r->cluster_bytes_per_s, 1.487e10);
  near4(r->cluster_tx_bytes_per_s, 5.367e9);
  near4(r->cluster_rx_bytes_per_s, 9.501e9);
  near4(r->total_flop_per_s, 2.396e18);
  near4(r->total_bytes_per_s, 2.284e14);
  EXPECT_NEAR(r->runtime_s / 86400, 118.8, 0.05);
}

TEST(Seed002, AccountingEarlierReadmeExample) {
  // ec5fbb8's README: --p_pipe 120 --p_tensor_int 1 -> FLOP 2.447e25, Tx 5.650e19,
  // Rx 6.384e19, net 1.203e20; cluster 1.534e9 B/s; total 2.357e13 B/s; 118.2 days.
  auto r = TransformerAccounting(ReadmeExample(120, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  auto near4 = Near4;
  near4(r->flop_total(), 2.447e25);
  near4(r->tx_total(), 5.650e19);
  near4(r->rx_total(), 6.384e19);
  near4(r->tx_total() + r->rx_total(), 1.203e20);
  near4(r->cluster_bytes_per_s, 1.534e9);
  near4(r->total_bytes_per_s, 2.357e13);
  EXPECT_NEAR(r->runtime_s / 86400, 118.2, 0.05);
}

}  // namespace
}  // namespace stepcast::seed002
