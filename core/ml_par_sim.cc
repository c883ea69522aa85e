#include "core/ml_par_sim.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace stepcast::seed002 {

Chip A100_40GB() { return {624e12, 1555e9, 600e9}; }
Chip H100() { return {1979e12, 3.35e12, 900e9}; }

absl::StatusOr<SimpleResult> SimpleTransformer(const SimpleConfig& c) {
  const double L = c.n_layers, d = c.d_model, e = c.n_experts, k = c.n_routed_experts;
  const double b = c.batch_size, m = c.microbatch_size, l = c.seq_len;
  const double prec = c.precision_bits;
  const int64_t d_int = c.d_internal_ratio * c.d_model;
  const int64_t ep = c.n_experts;
  auto fail = [](const char* what) { return absl::InvalidArgumentError(what); };
  if (c.n_experts % c.n_routed_experts) return fail("n_experts must be a multiple of n_routed_experts");
  if (c.batch_size % c.microbatch_size) return fail("batch_size must be a multiple of microbatch_size");
  if ((c.microbatch_size * c.seq_len * c.n_routed_experts) % (c.dp * c.n_experts)) {
    return fail("microbatch_size*seq_len*n_routed_experts must be a multiple of dp*n_experts");
  }
  if (c.n_layers % (c.pp * c.pipeline_interleaving)) return fail("n_layers must be a multiple of pp*interleaving");
  if (c.pp == 1 && c.pipeline_interleaving != 1) return fail("interleaving needs pp > 1");
  if ((c.microbatch_size * c.seq_len) % c.dp) return fail("microbatch_size*seq_len must be a multiple of dp");
  if (d_int % c.tp) return fail("d_internal must be a multiple of tp");
  if (c.d_model % c.tp2) return fail("d_model must be a multiple of tp2");

  const Chip& chip = c.chip;
  auto matmul = [&](double a, double bb, double cc) {
    const double flop = 2 * a * bb * cc, io = a * bb + bb * cc + a * cc;
    return std::max(flop / chip.flop8_per_s * (prec / 8), io / chip.io_bytes_per_s);
  };
  auto tx_rx = [&](double size, double scatter) { return 2 * (size / scatter * prec / 8) / chip.net_bytes_per_s; };
  auto allreduce = [&](double size, double scatter, double deg) { return deg == 1 ? 0.0 : tx_rx(size, scatter); };

  SimpleResult r;
  const double p = static_cast<double>(c.pp * c.dp * c.tp * c.tp2 * ep);
  const double params_per_expert = L * 2 * d * d_int;
  r.params_active = k * params_per_expert;
  r.params_total = e * params_per_expert;
  r.dataset_tokens = c.dataset_tokens > 0 ? c.dataset_tokens : 20 * r.params_total;
  r.chips = static_cast<int64_t>(p);
  const double n_batches = std::floor(r.dataset_tokens / (b * l));
  const double cluster_flop = p * chip.flop8_per_s * (8 / prec);
  const int64_t steps = c.pp * c.pipeline_interleaving;
  r.boundary_interval = c.n_layers / steps;
  r.bubble_layers = (c.pp - 1) * r.boundary_interval;
  r.flop_per_batch = 6 * r.params_active * b * l;
  const double tokens_per_matmul = std::floor((m * l * k) / (c.dp * e));
  const double matmuls_per_chip = 2 * e / ep;
  r.matmul_time_s = matmul(static_cast<double>(d_int) / c.tp, d / c.tp2, tokens_per_matmul);

  for (int64_t i = 0; i < r.bubble_layers; ++i) {
    r.bubble_s += 2 * 3 * (e / ep) * r.matmul_time_s;
    r.bubble_s += 2 * allreduce(m * l * d_int * k, c.dp * c.tp * ep, c.tp2);
    r.bubble_s += 2 * allreduce(m * l * d, c.dp * c.tp2 * ep / k, k * c.tp);
    if ((i + 1) % r.boundary_interval == 0) {
      r.bubble_s += 2 * tx_rx(m * l * d, c.dp * c.tp * c.tp2 * ep);
    } else if (k * c.tp == 1 && ep > 1) {
      r.bubble_s += 2 * ((ep - 1.0) / ep) * tx_rx(m * l * d, c.dp * c.tp * c.tp2 * ep);
    }
  }
  r.full_s = 3 * static_cast<double>(c.n_layers / c.pp) * matmuls_per_chip * r.matmul_time_s *
             std::floor(b / m);
  r.grad_s = c.dp == 1 ? 0.0 : allreduce(r.params_total, std::floor(p / c.dp), c.dp);
  r.batch_s = r.bubble_s + r.full_s + r.grad_s;
  r.utilization = r.flop_per_batch / (cluster_flop * r.batch_s);
  r.days = r.batch_s * n_batches / 86400;
  return r;
}

EfficiencyResult CheckEfficiency(const EfficiencyConfig& c) {
  EfficiencyResult r;
  const double d = c.d_model, dh = c.d_head, heads = c.d_model / c.d_head;
  const double kv = c.multi_query ? 2 * d * dh : 2 * d * heads * dh;
  double per_layer = 2 * d * heads * dh + kv + 2 * d * c.d_ffn + (c.use_glu ? d * c.d_ffn : 0);
  r.params = c.num_layers * c.num_experts * per_layer;
  r.params_effective = r.params / c.num_experts;
  const double expert_l = static_cast<double>(c.seq_len) / c.num_experts;
  r.gradient_noise_ok = c.batch_size * expert_l <= 4096.0 * 2048.0;
  r.pipeline_ok = static_cast<double>(c.batch_size) / c.p_data >= 4.0 * c.p_pipe;
  r.tensor_ok = c.p_tensor_int <= c.d_ffn / 1024 && c.p_tensor_int <= heads * dh / 1024 &&
                c.p_tensor_ext <= c.d_model / 1024;
  const int64_t max_mb = c.batch_size / (4 * c.p_pipe);
  const int64_t min_mb = static_cast<int64_t>(
      std::ceil((1024.0 / (expert_l / (c.p_data * c.p_seq))) / c.p_data) * c.p_data);
  for (int64_t mb = min_mb; mb <= max_mb; mb += c.p_data) {
    if (mb > 0 && c.batch_size % mb == 0) r.allowed_micro_batches.push_back(mb);
  }
  return r;
}

}  // namespace stepcast::seed002
