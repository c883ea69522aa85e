// File: core/predict.h
//
// The prediction for one job: step time and breakdown, bottleneck with its evidence,
// throughput, MFU/HFU, memory, cost, energy and time to train.
#ifndef STEPCAST_CORE_PREDICT_H_
#define STEPCAST_CORE_PREDICT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/interval.h"
#include "core/job.h"
#include "core/memory.h"
#include "core/model_shape.h"
#include "core/step_time.h"

namespace stepcast {

enum class BottleneckKind {
  kUnspecified,
  kCompute,
  kMemoryBandwidth,
  kNetworkIntraNode,
  kNetworkInterNode,
  kPipelineBubble
};
const char* BottleneckName(BottleneckKind k);

// The resource with the largest share of the step time (StepTimeEstimate's split), with the
// arithmetic intensity of the step (executed FLOPs per HBM byte) against the machine balance
// (GEMM rate / HBM bandwidth): seed 000's memory-bound test, I < balance.
struct Bottleneck {
  BottleneckKind kind = BottleneckKind::kUnspecified;
  double share = 0;
  double arithmetic_intensity_flops_per_byte = 0;
  double machine_balance_flops_per_byte = 0;
  std::string reason;
};

// Cost of running the job (seed 000 and seed 001's accounting).
//   per_hour = gpus x price; per_step = per_hour x step_time / 3600;
//   steps_per_run = dataset_tokens / tokens_per_step (or train_iters);
//   per_hbm_tb_per_s_hour = price / datasheet HBM TB/s (seed 000 `per_TBs_hr`);
//   energy_per_step = gpus x power_w x step_time (board power, seed 001's
//   power x time; no facility overhead).
struct CostEstimate {
  double per_hour_usd = 0;
  double per_step_usd = 0;
  double per_run_usd = 0;
  double per_hbm_tb_per_s_hour_usd = 0;
  double energy_per_step_j = 0;
  double energy_per_run_kwh = 0;
  double steps_per_run = 0;
  double time_to_train_s = 0;
};

struct Prediction {
  std::string job_name, model_name, hardware_name, profile_name;
  int64_t gpu_count = 0;
  double step_time_s = 0;
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_step = 0;
  double hardware_flops_per_step = 0;
  double peak_flops_per_s_per_gpu = 0;  // datasheet peak of the GEMM dtype
  double mfu = 0;  // model FLOPs / (step time x GPUs x peak)   (PaLM App. B)
  double hfu = 0;  // hardware FLOPs / (step time x GPUs x peak)
  StepBreakdown breakdown;
  Bottleneck bottleneck;
  MemoryEstimate memory;
  CostEstimate cost;
  ParameterCounts parameters;
  int64_t micro_batches_per_step = 0;
  std::vector<std::string> warnings;
  std::string framework_name;
  // From the job (inputs it did not state); shared with the job, may be null.
  std::shared_ptr<const std::vector<AssumedInput>> assumed_inputs;
  // The 80% interval of step_time_s from the validated runs' residuals (core/interval.h);
  // available only when the job carries an interval table. The point estimate is not moved.
  StepTimeInterval interval;
  // The per-GPU memory interval and the fit verdict (fits / TIGHT / does not fit); Predict sets
  // memory.tight to "the verdict is TIGHT" (the capacity lies inside the interval), which without
  // a table is EstimateMemory's own band (kMemoryUncertainty).
  MemoryInterval memory_interval;
};

// Validates and predicts. Errors are ValidateJob's (InvalidArgument naming the field).
absl::StatusOr<Prediction> Predict(const Job& job);

// The quick estimate of seeds 001 and 004 (Tsugriy, "Estimation as Discipline"): the step
// takes model FLOPs / (mfu x peak x GPUs); memory and cost as in Predict, no breakdown.
absl::StatusOr<Prediction> PredictAtMfu(const Job& job, double mfu);

}  // namespace stepcast

#endif  // STEPCAST_CORE_PREDICT_H_
