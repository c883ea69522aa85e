#include "core/predict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/flops.h"

namespace stepcast {

const char* BottleneckName(BottleneckKind k) {
  switch (k) {
    case BottleneckKind::kUnspecified: return "unspecified";
    case BottleneckKind::kCompute: return "compute";
    case BottleneckKind::kMemoryBandwidth: return "memory_bandwidth";
    case BottleneckKind::kNetworkIntraNode: return "network_intra_node";
    case BottleneckKind::kNetworkInterNode: return "network_inter_node";
    case BottleneckKind::kPipelineBubble: return "pipeline_bubble";
  }
  return "?";
}

namespace {

void FillCommon(const Job& job, Prediction& p) {
  p.job_name = job.name;
  p.model_name = job.model.name;
  p.hardware_name = job.hardware.name;
  p.profile_name = job.profile.name;
  p.framework_name = job.framework.name;
  p.assumed_inputs = job.assumed;
  p.gpu_count = job.parallelism.gpu_count();
  p.tokens_per_step = job.TokensPerStep();
  p.micro_batches_per_step = job.MicroBatchesPerStep();
  p.parameters = CountParameters(job.model);
  // The MTP modules the job trains (training.mtp_layers, e.g. a recipe's), else the shape's.
  if (job.training.mtp_layers >= 0) {
    p.parameters.mtp = job.model.MtpModulesWithWeights(job.training.mtp_layers) * p.parameters.mtp_module;
  }
  const double seqs = static_cast<double>(job.training.global_batch_size);
  p.model_flops_per_step = ModelFlopsPerStep(job.model, job.training.seq_length, seqs);
  p.hardware_flops_per_step =
      HardwareFlopsPerStep(job.model, job.training.seq_length, seqs, job.training.recompute,
                           job.training.flash_attention, p.model_flops_per_step);
  p.peak_flops_per_s_per_gpu = job.hardware.PeakFlops(job.training.precision.gemm);
  p.memory = EstimateMemory(job);
}

void FillRates(const Job& job, Prediction& p) {
  const double gpus = static_cast<double>(p.gpu_count);
  p.tokens_per_s = p.tokens_per_step / p.step_time_s;
  p.tokens_per_s_per_gpu = p.tokens_per_s / gpus;
  const double peak = p.step_time_s * gpus * p.peak_flops_per_s_per_gpu;
  p.mfu = p.model_flops_per_step / peak;
  p.hfu = p.hardware_flops_per_step / peak;

  CostEstimate& c = p.cost;
  const double price = job.PricePerGpuHourUsd();
  c.per_hour_usd = gpus * price;
  c.per_step_usd = c.per_hour_usd * p.step_time_s / 3600.0;
  if (job.training.dataset_tokens > 0) {
    c.steps_per_run = job.training.dataset_tokens / p.tokens_per_step;
  } else {
    c.steps_per_run = static_cast<double>(job.training.train_iters);
  }
  c.per_run_usd = c.per_step_usd * c.steps_per_run;
  c.per_hbm_tb_per_s_hour_usd = price / (job.hardware.hbm_bandwidth_bytes_per_s / 1e12);
  c.energy_per_step_j = gpus * job.hardware.power_w * p.step_time_s;
  c.energy_per_run_kwh = c.energy_per_step_j * c.steps_per_run / 3.6e6;
  c.time_to_train_s = c.steps_per_run * p.step_time_s;
}

Bottleneck Classify(const StepTimeEstimate& st) {
  Bottleneck b;
  const std::array<std::pair<BottleneckKind, double>, 5> shares = {{
      {BottleneckKind::kCompute, st.compute_bound_s},
      {BottleneckKind::kMemoryBandwidth, st.memory_bound_s},
      {BottleneckKind::kNetworkIntraNode, st.network_intra_node_s},
      {BottleneckKind::kNetworkInterNode, st.network_inter_node_s},
      {BottleneckKind::kPipelineBubble, st.bubble_s},
  }};
  auto best = std::max_element(shares.begin(), shares.end(),
                               [](const auto& x, const auto& y) { return x.second < y.second; });
  b.kind = best->first;
  b.share = best->second / st.step_time_s;
  b.arithmetic_intensity_flops_per_byte = st.hbm_bytes > 0 ? st.executed_flops / st.hbm_bytes : 0;
  b.machine_balance_flops_per_byte = st.machine_balance_flops_per_byte;
  // One StrCat per reason with rounded integers: this runs once per prediction and StrFormat
  // is slow.
  const bool above = b.arithmetic_intensity_flops_per_byte >= b.machine_balance_flops_per_byte;
  const int64_t ai = std::llround(b.arithmetic_intensity_flops_per_byte);
  const int64_t balance = std::llround(b.machine_balance_flops_per_byte);
  const absl::string_view cmp = above ? " FLOP/B >= machine balance " : " FLOP/B < machine balance ";
  const int64_t pct = std::llround(100 * b.share);
  switch (b.kind) {
    case BottleneckKind::kCompute:
      b.reason = absl::StrCat(pct, "% of the step is compute-bound GEMM/attention work; arithmetic intensity ", ai,
                              cmp, balance, " FLOP/B");
      break;
    case BottleneckKind::kMemoryBandwidth:
      b.reason = absl::StrCat(pct, "% of the step waits on HBM (elementwise ops, optimizer, GEMMs below the ridge); ",
                              "arithmetic intensity ", ai, cmp, balance, " FLOP/B");
      break;
    case BottleneckKind::kNetworkIntraNode:
      b.reason = absl::StrCat(pct, "% of the step is exposed communication inside the node (NVLink)");
      break;
    case BottleneckKind::kNetworkInterNode:
      b.reason = absl::StrCat(pct, "% of the step is exposed communication across nodes (NIC)");
      break;
    case BottleneckKind::kPipelineBubble:
      b.reason = absl::StrCat(pct, "% of the step is pipeline fill/drain; more micro-batches or ",
                              "virtual stages shrink it");
      break;
    case BottleneckKind::kUnspecified: break;
  }
  return b;
}

// A prediction is an answer only when its numbers are finite: a finite but extreme input (an
// intra-node latency of 1e308 s, a price of 1e308 USD) overflows to inf and then to NaN, and NaN
// compares false with every policy limit. InvalidArgument naming the first non-finite result.
absl::Status CheckFinite(const Prediction& p) {
  const std::pair<const char*, double> fields[] = {
      {"step_time_s", p.step_time_s},
      {"tokens_per_s", p.tokens_per_s},
      {"model_flops_per_step", p.model_flops_per_step},
      {"mfu", p.mfu},
      {"hfu", p.hfu},
      {"memory.total_bytes", p.memory.total_bytes},
      {"memory.headroom_bytes", p.memory.headroom_bytes},
      {"cost.per_hour_usd", p.cost.per_hour_usd},
      {"cost.per_step_usd", p.cost.per_step_usd},
      {"cost.per_run_usd", p.cost.per_run_usd},
      {"cost.energy_per_step_j", p.cost.energy_per_step_j},
      {"cost.energy_per_run_kwh", p.cost.energy_per_run_kwh},
      {"cost.time_to_train_s", p.cost.time_to_train_s},
  };
  for (const auto& [field, x] : fields) {
    if (!std::isfinite(x)) {
      return absl::InvalidArgumentError(
          absl::StrCat("prediction.", field, " is ", std::isnan(x) ? "NaN" : "infinite",
                       ": an input of the job is out of range (check latencies, rates, prices and counts)"));
    }
  }
  if (!(p.step_time_s > 0)) {
    return absl::InvalidArgumentError("prediction.step_time_s must be > 0: an input of the job is out of range");
  }
  return absl::OkStatus();
}

// The memory interval and verdict (core/interval.h); memory.tight follows the verdict.
void AttachMemoryInterval(const Job& job, FrameworkFamily family, Prediction& p) {
  p.memory_interval = EstimateMemoryInterval(p.memory.total_bytes, p.memory.capacity_bytes, family,
                                             job.intervals.get(), kMemoryUncertainty);
  p.memory.tight = p.memory_interval.verdict == MemoryVerdict::kTight;
}

}  // namespace

absl::StatusOr<Prediction> Predict(const Job& job) {
  if (absl::Status s = ValidateJob(job); !s.ok()) return s;
  Prediction p;
  FillCommon(job, p);
  StepTimeEstimate st = EstimateStepTime(job);
  p.step_time_s = st.step_time_s;
  p.breakdown = st.breakdown;
  p.bottleneck = Classify(st);
  p.warnings = std::move(st.warnings);
  FillRates(job, p);
  if (absl::Status s = CheckFinite(p); !s.ok()) return s;
  const Regime regime = RegimeOf(job);
  if (job.intervals) p.interval = EstimateStepTimeInterval(job, p.step_time_s, *job.intervals, regime);
  AttachMemoryInterval(job, regime.family, p);
  return p;
}

absl::StatusOr<Prediction> PredictAtMfu(const Job& job, double mfu) {
  if (!(mfu > 0 && mfu <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("mfu: ", mfu, " must be in (0, 1]"));
  }
  if (absl::Status s = ValidateJob(job); !s.ok()) return s;
  Prediction p;
  FillCommon(job, p);
  p.step_time_s = p.model_flops_per_step /
                  (mfu * p.peak_flops_per_s_per_gpu * static_cast<double>(p.gpu_count));
  p.bottleneck.reason = absl::StrFormat("assumed MFU %.2f (quick estimate, no breakdown)", mfu);
  p.warnings.push_back("step time from an assumed MFU, not from the rate profile");
  FillRates(job, p);
  if (absl::Status s = CheckFinite(p); !s.ok()) return s;
  // No step-time interval: the MFU is assumed, not modelled.
  AttachMemoryInterval(job, FrameworkRegimeOf(job.framework.name).family, p);
  return p;
}

}  // namespace stepcast
