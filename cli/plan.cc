#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "core/cost_per_bandwidth.h"
#include "core/scaling_estimates.h"

namespace stepcast::cli {

absl::StatusOr<std::string> Plan(const PlanOptions& o, const Catalog& catalog) {
  if (o.hardware.empty()) return absl::InvalidArgumentError("--hardware: give at least one preset");
  if (o.target_tokens_per_s <= 0 && o.budget_usd <= 0) {
    return absl::InvalidArgumentError("give --target-tokens-per-s (seed 000) or --budget-usd with --days (seed 004)");
  }
  seed000::Model model{o.n_params, o.layers, o.d_model, 2};
  std::string model_name = absl::StrFormat("%.3gB params, %g layers, d_model %g", o.n_params / 1e9, o.layers, o.d_model);
  if (!o.model.empty()) {
    absl::StatusOr<ModelShape> m = catalog.FindModel(o.model);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("--model: ", m.status().message()));
    const ParameterCounts pc = CountParameters(*m);
    // MoE: seed 000's note, N -> active parameters.
    model = {pc.active, static_cast<double>(m->layers), static_cast<double>(m->hidden_size), 2};
    model_name = absl::StrFormat("%s (%.3gB active params)", m->name, pc.active / 1e9);
  }
  std::vector<Hardware> hws;
  for (const auto& name : o.hardware) {
    absl::StatusOr<Hardware> h = catalog.FindHardware(name);
    if (!h.ok()) return absl::InvalidArgumentError(absl::StrCat("--hardware: ", h.status().message()));
    hws.push_back(*h);
  }
  auto price = [&](const Hardware& h) { return o.price_override >= 0 ? o.price_override : h.price_per_gpu_hour_usd; };
  std::string out;
  if (o.target_tokens_per_s > 0) {
    seed000::TrainingCfg t;
    t.recompute_mult = o.recompute_mult;
    t.alpha_opt_bytes_per_param = o.alpha_opt_bytes_per_param;
    t.c_act = o.c_act;
    t.global_tokens_per_step = o.global_tokens_per_step;
    t.bytes_per_grad_elem = o.bytes_per_grad_elem;
    std::vector<seed000::Hardware> cands;
    for (const auto& h : hws) {
      seed000::Hardware s;
      s.name = h.name;
      s.peak_flops_tflops = h.peak_bf16_flops_per_s / 1e12;
      s.hbm_tbps = h.hbm_bandwidth_bytes_per_s / 1e12;
      s.nic_gbps = h.inter_node_bandwidth_bytes_per_s * 8 / 1e9;
      s.price_per_gpu_hr = price(h);
      s.utilization = o.utilization;
      cands.push_back(s);
    }
    absl::StrAppendFormat(&out,
                          "Cluster for %s tokens/s: %s, %g tokens/step, DP %d, utilization %.2f\n"
                          "(seed 000 per-token model: datasheet peak and HBM, NIC for the DP all-reduce)\n\n",
                          absl::StrFormat("%.0f", o.target_tokens_per_s), model_name, o.global_tokens_per_step,
                          o.dp_world_size, o.utilization);
    absl::StrAppendFormat(&out, "%-18s %7s %11s %14s %9s %14s %12s\n", "hardware", "GPUs", "$/hour",
                          "tokens/s/GPU", "bound", "cluster TB/s", "$/TB/s-hr");
    for (const auto& p : seed000::CompareOptions(cands, model, t, o.target_tokens_per_s, o.dp_world_size)) {
      absl::StrAppendFormat(&out, "%-18s %7.0f %11.2f %14.2f %9s %14.3f %12.2f\n", p.hardware, p.gpus,
                            p.per_hr_usd, p.per_gpu_tokens_s, seed000::BoundName(p.bound), p.cluster_hbm_tbps,
                            p.per_tbps_hr_usd);
    }
  }
  if (o.budget_usd > 0) {
    if (o.days <= 0) return absl::InvalidArgumentError("--days: required (> 0) with --budget-usd");
    const double tokens = o.dataset_tokens > 0 ? o.dataset_tokens : estimates::ChinchillaDatasetTokens(model.n_params);
    if (!out.empty()) out += "\n";
    absl::StrAppendFormat(&out, "Budget $%.0f over %g days for %s on %.3g tokens%s (seed 004)\n\n", o.budget_usd,
                          o.days, model_name, tokens, o.dataset_tokens > 0 ? "" : " (Chinchilla 20 N)");
    absl::StrAppendFormat(&out, "%-18s %9s %12s %14s\n", "hardware", "$/GPU-hr", "GPUs", "required MFU");
    for (const auto& h : hws) {
      const double gpus = std::floor(estimates::GpusForBudget(o.budget_usd, price(h), o.days));
      const double mfu = estimates::RequiredMfu(model.n_params, tokens, o.days, gpus, h.peak_bf16_flops_per_s);
      absl::StrAppendFormat(&out, "%-18s %9.2f %12.0f %13.1f%%%s\n", h.name, price(h), gpus, 100 * mfu,
                            mfu > 0.6 ? "  (above what well-tuned runs reach)" : "");
    }
  }
  return out;
}

}  // namespace stepcast::cli
