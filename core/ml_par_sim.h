// File: core/ml_par_sim.h
//
// Seed 002: davidsj/ml_par_sim. Two parts:
//  * SimpleTransformer: simple_transformer.py at 4a9489e (the README's example 2): an MoE
//    transformer's batch time as pipeline bubble + full pipeline + gradient reduction, every
//    matmul a roofline max(FLOP time, IO time), every reduction a fabric-reduced tx/rx.
//  * Efficiency constraints of transformer.py (example 1): gradient-noise limit, pipeline
//    depth, arithmetic-intensity minimum micro-batch, TP degree limits, and its parameter count.
#ifndef STEPCAST_CORE_ML_PAR_SIM_H_
#define STEPCAST_CORE_ML_PAR_SIM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace stepcast::seed002 {

struct Chip {
  double flop8_per_s = 0;  // 8-bit FLOP/s
  double io_bytes_per_s = 0;
  double net_bytes_per_s = 0;
};
// simple_transformer.py's chips.
Chip A100_40GB();
Chip H100();

struct SimpleConfig {
  int64_t n_layers = 0, d_model = 0;
  int64_t d_internal_ratio = 5;
  int64_t n_experts = 1, n_routed_experts = 1;
  double precision_bits = 8;
  double dataset_tokens = 0;  // 0: 20 x P
  int64_t batch_size = 2048, microbatch_size = 1, seq_len = 2048;
  int64_t pp = 1, pipeline_interleaving = 1, dp = 1, tp = 1, tp2 = 1;
  Chip chip;
};
struct SimpleResult {
  double params_total = 0, params_active = 0, dataset_tokens = 0;
  int64_t chips = 0, boundary_interval = 0, bubble_layers = 0;
  double flop_per_batch = 0;
  double matmul_time_s = 0;
  double bubble_s = 0, full_s = 0, grad_s = 0, batch_s = 0;
  double utilization = 0, days = 0;
};
// Errors (InvalidArgument) for the script's asserts: e % k, b % m, (m l k) % (dp e),
// L % (pp interleave), interleave == 1 when pp == 1, (m l) % dp, d_int % tp, d % tp2.
absl::StatusOr<SimpleResult> SimpleTransformer(const SimpleConfig& c);

struct EfficiencyConfig {
  int64_t batch_size = 2048, seq_len = 2048, num_experts = 1;
  int64_t num_layers = 0, d_model = 0, d_ffn = 0, d_head = 64;
  int64_t p_pipe = 1, p_data = 1, p_seq = 1, p_exp = 1, p_tensor_int = 1, p_tensor_ext = 1;
  bool multi_query = true, use_glu = false;
};
struct EfficiencyResult {
  double params = 0, params_effective = 0;
  bool gradient_noise_ok = false;   // b x l/e <= 4096 x 2048
  bool pipeline_ok = false;         // b / p_data >= 4 p_pipe
  bool tensor_ok = false;           // p_tint <= d_ffn/1024 and heads*d_head/1024; p_text <= d/1024
  std::vector<int64_t> allowed_micro_batches;
};
EfficiencyResult CheckEfficiency(const EfficiencyConfig& c);

}  // namespace stepcast::seed002

#endif  // STEPCAST_CORE_ML_PAR_SIM_H_

namespace stepcast::seed002 {

// transformer.py's FLOP / Tx / Rx accounting of a whole training run (README example 1), on
// lib.py's algebra: tensors are sets of data dimensions laid out over parallel axes; a pointwise
// product costs its element count forward and 4x backward; a broadcast of scattered axes costs
// I transmissions and I*J*(K-1) receives forward (I data elements, J broadcast degree, K scatter
// degree; pipeline rotation adds the stage-crossing fraction) and the same again in FLOP, Tx and
// Rx backward; a reduction costs I*(J-1) FLOP and I*(K-1) Tx and Rx forward, I Tx and I*(K-1) Rx
// backward. Counts are elements (x net_precision_bytes for bytes).
struct AccountingConfig {
  int64_t batch_size = 2048, seq_len = 2048, num_experts = 1;
  int64_t num_layers = 0, d_model = 0, d_ffn = 0, d_head = 64;
  double dataset_tokens = 0;
  int64_t p_data = 1, p_pipe = 1, p_exp = 1, p_seq = 1, p_tensor_int = 1, p_tensor_ext = 1;
  bool multi_query = true, use_glu = false, consecutive_attn_and_ffn = false;
  bool activation_checkpointing = false;
  double cluster_flop_rate = 0;  // FLOP/s of one cluster (chip)
  double net_precision_bytes = 2;
};
struct AccountingResult {
  double params = 0, dataset_tokens = 0;
  int64_t chips = 0;
  double flop_fwd = 0, flop_bwd = 0, tx_fwd = 0, tx_bwd = 0, rx_fwd = 0, rx_bwd = 0;
  double flop_total() const { return flop_fwd + flop_bwd; }
  double tx_total() const { return tx_fwd + tx_bwd; }
  double rx_total() const { return rx_fwd + rx_bwd; }
  // Per cluster and in total, bytes/s at cluster_flop_rate; runtime = FLOP / (chips x rate).
  double cluster_bytes_per_s = 0, cluster_tx_bytes_per_s = 0, cluster_rx_bytes_per_s = 0;
  double total_flop_per_s = 0, total_bytes_per_s = 0;
  double runtime_s = 0;
};
absl::StatusOr<AccountingResult> TransformerAccounting(const AccountingConfig& c);

}  // namespace stepcast::seed002
