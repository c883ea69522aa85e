// File: plugin/trace/training_log.h
//
// What every training run already prints: its log. Reads the per-iteration lines of
//   Megatron-LM and Megatron-Bridge  " [date] iteration 71/ 100 | consumed samples: ... | elapsed time
//       per iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | ... | global batch
//       size: 128 | ..." (megatron/training/training.py training_log; Megatron-Bridge
//       src/megatron/bridge/training/utils/train_utils.py training_log prints the same fields;
//       newer Megatron-LM also "throughput (token/sec/GPU)" and "flop throughput (TFLOP/sec/GPU)");
//   NeMo 2 / Lightning  "Training epoch 0, iteration 1/249 | lr: ... | global_batch_size: 8 |
//       global_step: 1 | reduced_train_loss: ... | train_step_timing in s: 2.505 | ..."
//       (NeMo's MegatronProgressBar), and NeMo 1's tqdm bar "Epoch 0: : 100%|...| 100/100
//       [10:48<00:00, reduced_train_loss=0.0172, global_step=99.00, ..., train_step_timing in s=3.130]";
//   torchtitan  "step: 10  loss:  8.1234  grad_norm: ...  memory: 30.12GiB(31.70%)  tps: 5,432
//       tflops: 245.67  mfu: 24.84%" with ANSI colours (torchtitan/components/metrics.py
//       MetricsProcessor.log);
//   llm-foundry (Composer's ConsoleLogger, composer/loggers/console_logger.py): a record header
//       "[batch=20/100]:" or "[epoch=1][batch=5/5]:" and one "\t Train <name>: <value>" line per
//       metric, values as format_log_data_value prints them (floats "{:.4f}"). A record is an
//       iteration when it holds SpeedMonitor's throughput (composer/callbacks/speed_monitor.py
//       batch_end: "throughput/batches_per_sec" = batches over the last window_size batches /
//       their wall-clock seconds, logged only once the window is full), with
//       "throughput/device/tokens_per_sec", "throughput/device/flops_per_sec" and
//       "throughput/device/mfu" (device FLOP/s / gpu_flops_available) when the model states
//       flops_per_batch (llm-foundry's ComposerMPTCausalLM and HF wrappers do); the window's
//       first time is batch 1's end, so no record holds batch 1 (no record is a warm-up record);
//   the Hugging Face Trainer  the summary dict it prints at the end of train()
//       "{'train_runtime': 1891.9246, 'train_samples_per_second': 5.816, 'train_steps_per_second':
//       0.365, ...}" (transformers trainer_utils.py speed_metrics: runtime rounded to 4 decimals,
//       rates to 3; newer versions print the values quoted), its step count from the
//       "Total optimization steps = N" header, "TrainOutput(global_step=N" or a tqdm bar total
//       "N/N [", the first one consistent with train_runtime x train_steps_per_second within that
//       rounding (the per-step {'loss': ...} dicts carry no time);
// a step printed again (the same step number: other ranks' copies under srun --label or
// torchrun's [rankN]: prefixes) counts once, the first line kept (TrainingLog::duplicate_records);
// each number as the framework printed it, under the framework's own FLOP convention (the
// conversion to stepcast's is the report path's, not this reader's). A plain line parser: no
// regular expression on untrusted text (issue 26).
#ifndef STEPCAST_PLUGIN_TRACE_TRAINING_LOG_H_
#define STEPCAST_PLUGIN_TRACE_TRAINING_LOG_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stepcast::trace {

// One logged iteration. NaN / -1 where the line does not give the field.
struct LogIteration {
  int64_t line = 0;                   // 1-based line of the log
  int64_t iteration = -1;             // Megatron "iteration", NeMo global_step (else iteration), torchtitan step
  double step_time_s = NAN;           // Megatron elapsed time per iteration (mean over the log interval), NeMo train_step_timing
  double tflops_per_gpu = NAN;        // the framework's own TFLOP/s per GPU, its FLOP convention
  double mfu = NAN;                   // torchtitan mfu, as a fraction (24.84% -> 0.2484)
  double tokens_per_s_per_gpu = NAN;  // torchtitan tps, Megatron throughput (token/sec/GPU)
  int64_t global_batch_size = -1;     // Megatron global batch size, NeMo global_batch_size
};

struct TrainingLog {
  std::string path;
  // "megatron" (Megatron-LM and Megatron-Bridge), "nemo", "torchtitan", "llm-foundry" or
  // "hf-trainer".
  std::string framework;
  // The year of the first date ("2024-04-06") on an iteration line, 0 when none: the log's
  // year, which picks the Megatron FLOP convention of that time (core/flop_conventions.h).
  int year = 0;
  std::vector<LogIteration> iterations;
  // The warm-up rule: the first `warmup_records` logged iterations are left out of the medians
  // (the first includes start-up: compilation, NCCL initialisation, the first data load; a
  // Megatron record averages a whole log interval, so one record is enough there too). The HF
  // Trainer's summary is one record over the whole run, warm-up included: 0 there. Composer's
  // SpeedMonitor rates never hold batch 1 (its window starts at batch 1's end,
  // composer/callbacks/speed_monitor.py batch_end): one record fewer there (0 by default).
  int warmup_records = 0;
  // Lines repeating an iteration already read (the same step number): other ranks' copies of a
  // logged step (srun --label / torchrun prefixes interleave every rank's output). Counted once:
  // the first line read is kept; these are the others.
  int duplicate_records = 0;
  // Medians over the kept iterations (NaN when none gives the field).
  double median_step_time_s = NAN;
  double median_tflops_per_gpu = NAN;
  double median_mfu = NAN;
  double median_tokens_per_s_per_gpu = NAN;
  int64_t lines = 0;
};

struct TrainingLogOptions {
  int warmup_records = 1;
  int64_t max_bytes = int64_t{4} << 30;   // a log larger is refused
  int64_t max_line_bytes = 1 << 20;       // longer lines are skipped (no format writes them)
};

// Reads a training log (one framework's, any of the formats above). Errors (InvalidArgument naming the file, line and field): not a regular
// file, larger than max_bytes, a recognised line with a field that is not a finite number >= 0,
// lines of two frameworks; NotFound: no file; FailedPrecondition: no iteration line of a known
// framework (the message lists the formats read), or no iteration left after the warm-up.
absl::StatusOr<TrainingLog> ReadTrainingLog(const std::string& path, const TrainingLogOptions& options = {});

// One line, for tests and streaming callers: true and `out` filled when the line is an iteration
// line of a known single-line format (Megatron, NeMo, torchtitan; `framework` set); false when
// it is not one; an error when it is one with a malformed field. Composer records span lines and
// the HF summary needs the step count from other lines: ReadTrainingLog reads those.
absl::StatusOr<bool> ParseTrainingLogLine(const std::string& line, std::string* framework, LogIteration* out);

}  // namespace stepcast::trace

#endif  // STEPCAST_PLUGIN_TRACE_TRAINING_LOG_H_
