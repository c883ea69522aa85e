// File: core/cost_per_bandwidth.h
//
// Seed 000: "Sizing AI Training by Cost per Memory Bandwidth" (J. Hodge, 2025;
// github.com/jman4162/Sizing-AI-Training-by-Cost-per-Memory-Bandwidth). A first-order per-token
// model: tokens/s per GPU bounded by compute, HBM and network, the bound, and cluster sizing.
// Implemented in the corrected form of commit 91f7f8e: the DP all-reduce traffic per token is
// 2(p-1) N b_g / B_g (per-rank ring traffic over local tokens), not the README's 2 N b_g / B_g,
// and each bound is scaled by its own efficiency (all default to `utilization`).
#ifndef STEPCAST_CORE_COST_PER_BANDWIDTH_H_
#define STEPCAST_CORE_COST_PER_BANDWIDTH_H_

#include <string>
#include <vector>

namespace stepcast::seed000 {

struct Hardware {
  std::string name;
  double peak_flops_tflops = 0;
  double hbm_tbps = 0;
  double nic_gbps = 0;  // Gbit/s
  double price_per_gpu_hr = 0;
  double utilization = 0.75;
  double compute_eff = -1, memory_eff = -1, network_eff = -1;  // < 0: utilization
  double machine_balance_flops_per_byte() const { return peak_flops_tflops / hbm_tbps; }
};
struct Model {
  double n_params = 0;
  double layers = 0;
  double d_model = 0;
  double bytes_per_elem = 2;
};
struct TrainingCfg {
  double k_flops_per_token = 6.0;
  double recompute_mult = 1.0;
  double alpha_opt_bytes_per_param = 16.0;
  double c_act = 6.0;
  double global_tokens_per_step = 512000;
  double bytes_per_grad_elem = 2;
};

// F_tok = recompute_mult * k * N.
double PerTokenFlops(const Model& m, const TrainingCfg& t);
// M_tok = alpha_opt * N / B_g + c_act * L * d_model * bytes_per_elem.
double PerTokenHbmBytes(const Model& m, const TrainingCfg& t);
// 2 (p-1) N b_g / B_g; 0 for p <= 1.
double PerTokenNetBytes(const Model& m, const TrainingCfg& t, int dp_world_size);

enum class Bound { kCompute, kMemory, kNetwork };
const char* BoundName(Bound b);
struct TokenRate {
  double r_gpu = 0, r_comp = 0, r_mem = 0, r_net = 0;  // tokens/s per GPU, each eff-scaled
  Bound bound = Bound::kCompute;                       // smallest rate; ties -> first
  double intensity_flops_per_byte = 0;                 // F_tok / M_tok
  double machine_balance_flops_per_byte = 0;
};
TokenRate TokensPerSecPerGpu(const Hardware& hw, const Model& m, const TrainingCfg& t,
                             int dp_world_size = 1);

// plan_cluster: GPUs = max(1, ceil(target / r_gpu)); $/hr = GPUs x price; cluster HBM TB/s =
// target x M_tok / 1e12; $ per TB/s-hour = price / hbm_tbps. Unrounded (the seed rounds for print).
struct ClusterPlan {
  std::string hardware;
  double gpus = 0, per_hr_usd = 0, per_gpu_tokens_s = 0;
  Bound bound = Bound::kCompute;
  double cluster_hbm_tbps = 0, per_tbps_hr_usd = 0;
};
ClusterPlan PlanCluster(const Hardware& hw, const Model& m, const TrainingCfg& t,
                        double tokens_per_sec_target, int dp_world_size = 1);
// compare_options: PlanCluster for each hardware, cheapest per hour first.
std::vector<ClusterPlan> CompareOptions(const std::vector<Hardware>& hws, const Model& m,
                                        const TrainingCfg& t, double target, int dp_world_size);

}  // namespace stepcast::seed000

#endif  // STEPCAST_CORE_COST_PER_BANDWIDTH_H_
