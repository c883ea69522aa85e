#include "core/cost_per_bandwidth.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stepcast::seed000 {

double PerTokenFlops(const Model& m, const TrainingCfg& t) {
  return t.recompute_mult * t.k_flops_per_token * m.n_params;
}
double PerTokenHbmBytes(const Model& m, const TrainingCfg& t) {
  return t.alpha_opt_bytes_per_param * m.n_params / t.global_tokens_per_step +
         t.c_act * m.layers * m.d_model * m.bytes_per_elem;
}
double PerTokenNetBytes(const Model& m, const TrainingCfg& t, int p) {
  if (p <= 1) return 0.0;
  const double rank_traffic = 2.0 * (p - 1) / p * m.n_params * t.bytes_per_grad_elem;
  const double local_tokens = t.global_tokens_per_step / p;
  return rank_traffic / local_tokens;
}
const char* BoundName(Bound b) {
  switch (b) {
    case Bound::kCompute: return "compute";
    case Bound::kMemory: return "memory";
    case Bound::kNetwork: return "network";
  }
  return "?";
}

TokenRate TokensPerSecPerGpu(const Hardware& hw, const Model& m, const TrainingCfg& t, int p) {
  const double ce = hw.compute_eff >= 0 ? hw.compute_eff : hw.utilization;
  const double me = hw.memory_eff >= 0 ? hw.memory_eff : hw.utilization;
  const double ne = hw.network_eff >= 0 ? hw.network_eff : hw.utilization;
  const double f = PerTokenFlops(m, t), b = PerTokenHbmBytes(m, t), n = PerTokenNetBytes(m, t, p);
  TokenRate r;
  r.r_comp = ce * hw.peak_flops_tflops * 1e12 / f;
  r.r_mem = me * hw.hbm_tbps * 1e12 / b;
  r.r_net = (n > 0 && hw.nic_gbps > 0) ? ne * (hw.nic_gbps * 1e9 / 8) / n
                                       : std::numeric_limits<double>::infinity();
  r.r_gpu = std::min({r.r_comp, r.r_mem, r.r_net});
  r.bound = r.r_gpu == r.r_comp ? Bound::kCompute : r.r_gpu == r.r_mem ? Bound::kMemory : Bound::kNetwork;
  r.intensity_flops_per_byte = f / b;
  r.machine_balance_flops_per_byte = hw.machine_balance_flops_per_byte();
  return r;
}

ClusterPlan PlanCluster(const Hardware& hw, const Model& m, const TrainingCfg& t, double target,
                        int p) {
  const TokenRate r = TokensPerSecPerGpu(hw, m, t, p);
  ClusterPlan c;
  c.hardware = hw.name;
  c.gpus = std::max(1.0, std::ceil(target / r.r_gpu));
  c.per_hr_usd = c.gpus * hw.price_per_gpu_hr;
  c.per_gpu_tokens_s = r.r_gpu;
  c.bound = r.bound;
  c.cluster_hbm_tbps = target * PerTokenHbmBytes(m, t) / 1e12;
  c.per_tbps_hr_usd = hw.price_per_gpu_hr / hw.hbm_tbps;
  return c;
}

std::vector<ClusterPlan> CompareOptions(const std::vector<Hardware>& hws, const Model& m,
                                        const TrainingCfg& t, double target, int p) {
  std::vector<ClusterPlan> out;
  for (const auto& hw : hws) out.push_back(PlanCluster(hw, m, t, target, p));
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.per_hr_usd < b.per_hr_usd; });
  return out;
}

}  // namespace stepcast::seed000
