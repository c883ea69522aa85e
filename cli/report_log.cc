// `stepcast report --log FILE`: the measurement a training log states (cli/cli.h
// ReportRequestFromLog; the reader is plugin/trace/training_log.h).
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "plugin/trace/training_log.h"
#include "proto/measured_run.h"

namespace stepcast::cli {

absl::Status ReportRequestFromLog(const std::string& path, int gpus, v1::ReportRunRequest* req) {
  // The reader's errors (file, line, field) go out unchanged.
  absl::StatusOr<trace::TrainingLog> log = trace::ReadTrainingLog(path);
  if (!log.ok()) return log.status();
  const int kept = static_cast<int>(log->iterations.size()) - log->warmup_records;
  if (std::isfinite(log->median_step_time_s) && log->median_step_time_s > 0) {
    // Megatron's "elapsed time per iteration" (a mean over its log interval) and NeMo's
    // train_step_timing: the median over the records after the warm-up is the step time.
    req->set_measured_step_time_s(log->median_step_time_s);
  } else if (std::isfinite(log->median_tokens_per_s_per_gpu) && log->median_tokens_per_s_per_gpu > 0) {
    // torchtitan prints no step time, only tokens/s per GPU ("tps": the rank's tokens over the
    // interval / (seconds x non-data-parallel size), torchtitan/components/metrics.py): the job's
    // tokens/s is that times the GPU count, which the log does not state.
    if (gpus <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": a ", log->framework, " log states tokens/s per GPU (tps), not a step time: give --gpus, the run's "
          "GPU count, to turn it into the job's tokens/s"));
    }
    req->set_measured_tokens_per_s(log->median_tokens_per_s_per_gpu * gpus);
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": the ", log->framework, " log states neither a step time nor tokens/s per GPU after the warm-up"));
  }
  // The ranges `stepcast report --step-time-s` checks too (a step of at most a day, ...).
  if (absl::Status s = ValidateMeasuredRun(req->measured_step_time_s(), req->measured_tokens_per_s()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  v1::FrameworkReported* f = req->mutable_framework_reported();
  f->set_framework(log->framework);
  // NaN (not stated) is sent as 0, the proto's "not stated".
  auto stated = [](double v) { return std::isfinite(v) ? v : 0.0; };
  f->set_tflops_per_gpu(stated(log->median_tflops_per_gpu));
  f->set_mfu(stated(log->median_mfu));
  f->set_tokens_per_s_per_gpu(stated(log->median_tokens_per_s_per_gpu));
  f->set_iterations(kept);
  f->set_warmup_records(log->warmup_records);
  (*req->mutable_labels())["source"] = absl::StrCat("training-log:", log->framework);
  return absl::OkStatus();
}

std::string FormatFrameworkReported(const v1::FrameworkReported& f) {
  std::string o = absl::StrFormat("  %s log: %d iterations after %d warm-up record%s", f.framework(), f.iterations(),
                                  f.warmup_records(), f.warmup_records() == 1 ? "" : "s");
  if (f.tflops_per_gpu() > 0) absl::StrAppendFormat(&o, ", %.1f TFLOP/s per GPU", f.tflops_per_gpu());
  if (f.mfu() > 0) absl::StrAppendFormat(&o, ", MFU %.2f%%", 100 * f.mfu());
  if (f.tokens_per_s_per_gpu() > 0) absl::StrAppendFormat(&o, ", %.0f tokens/s per GPU", f.tokens_per_s_per_gpu());
  if (f.tflops_per_gpu() > 0 || f.mfu() > 0) {
    absl::StrAppendFormat(&o, " (%s's own FLOP convention, not converted)", f.framework());
  }
  return o + "\n";
}

}  // namespace stepcast::cli
