// `stepcast report --log FILE`: the measurement a training log states (cli/cli.h
// ReportRequestFromLog; the reader is plugin/trace/training_log.h).
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "core/flop_conventions.h"
#include "core/flops.h"
#include "plugin/trace/training_log.h"
#include "proto/architectures.h"
#include "proto/measured_run.h"

namespace stepcast::cli {

absl::Status ConvertFrameworkReported(const Job& job, int gpus, int log_year, v1::FrameworkReported* f) {
  const std::string& fw = f->framework();
  if (fw == "hf-trainer") {
    return absl::FailedPreconditionError("the HF Trainer prints no FLOP rate: its step time is the measurement");
  }
  double rate = 0;
  std::string rate_from;
  const double peak = job.hardware.PeakFlops(job.training.precision.gemm);
  if (f->tflops_per_gpu() > 0) {
    rate = f->tflops_per_gpu() * 1e12;
    rate_from = absl::StrFormat("%s's %.2f TFLOP/s per GPU", fw, f->tflops_per_gpu());
  } else if (f->mfu() > 0) {
    rate = f->mfu() * peak;
    rate_from = absl::StrFormat("%s's MFU %.2f%% x the %s %s dense peak %.0f TFLOP/s", fw, 100 * f->mfu(),
                                job.hardware.name, DTypeName(job.training.precision.gemm), peak / 1e12);
  } else {
    return absl::FailedPreconditionError(absl::StrCat("the ", fw, " log states no TFLOP/s or MFU to convert"));
  }
  std::string family;
  if (absl::StatusOr<const ArchitectureRegistry*> reg = ArchitectureRegistry::Builtin(); reg.ok()) {
    if (const v1::Architecture* a = (*reg)->ForModelName(job.model.name, job.model.moe.enabled()); a != nullptr) {
      family = a->name();
    }
  }
  FlopCountInput in;
  in.model = job.model;
  in.family = family;
  in.seq_length = job.training.seq_length;
  in.sequences = static_cast<double>(job.training.global_batch_size);
  in.mtp_depths = job.training.mtp_layers;
  std::vector<FlopConvention> tries;
  if (fw == "megatron") {
    // Megatron's count changed in 2025 (transformer_flops): the log's own year picks the form,
    // as `validate` picks it by a row's framework year.
    absl::StatusOr<FlopConventionChoice> c =
        FlopConventionFromText("Megatron-LM num_floating_point_operations", log_year > 0 ? log_year : 2025);
    if (!c.ok()) return c.status();
    tries = {c->convention};
  } else if (fw == "nemo") {
    tries = {FlopConvention::kNemoLlama, FlopConvention::kNemoGpt3};
  } else if (fw == "torchtitan") {
    tries = {FlopConvention::kTorchtitan};
  } else if (fw == "llm-foundry") {
    tries = {FlopConvention::kLlmFoundry};
  } else {
    return absl::FailedPreconditionError(absl::StrCat("no FLOP convention known for framework '", fw, "'"));
  }
  absl::Status last;
  for (FlopConvention c : tries) {
    absl::StatusOr<double> flops = ConventionFlopsPerStep(c, in);
    if (!flops.ok()) {
      last = flops.status();
      continue;
    }
    const double n = gpus > 0 ? gpus : job.parallelism.gpu_count();
    absl::StatusOr<double> t = StepTimeFromFlopRate(*flops, rate, n);
    if (!t.ok()) return t.status();
    const double mfu = ModelFlopsPerStep(job.model, job.training.seq_length, in.sequences) / (*t * n * peak);
    if (!std::isfinite(mfu)) return absl::InvalidArgumentError("the converted step gives a non-finite MFU");
    f->set_flop_convention(std::string(FlopConventionName(c)));
    f->set_converted_step_time_s(*t);
    f->set_converted_mfu(mfu);
    f->set_conversion(absl::StrFormat("%s FLOPs per step %.4g (%s) / (%s x %g GPUs)", FlopConventionName(c), *flops,
                                      FlopConventionSource(c), rate_from, n));
    return absl::OkStatus();
  }
  return last;
}

std::string FrameworkReportedBrief(const v1::FrameworkReported& f) {
  std::string o = f.framework() + ":";
  if (f.tflops_per_gpu() > 0) absl::StrAppendFormat(&o, " %.1f TFLOP/s/GPU", f.tflops_per_gpu());
  if (f.mfu() > 0) absl::StrAppendFormat(&o, " MFU %.2f%%", 100 * f.mfu());
  if (f.tokens_per_s_per_gpu() > 0) absl::StrAppendFormat(&o, " %.0f tok/s/GPU", f.tokens_per_s_per_gpu());
  if (f.converted_step_time_s() > 0) {
    absl::StrAppendFormat(&o, "; %s -> %.4g s, stepcast MFU %.1f%%", f.flop_convention(), f.converted_step_time_s(),
                          100 * f.converted_mfu());
  } else if (f.tflops_per_gpu() > 0 || f.mfu() > 0) {
    o += " (own FLOP convention, not converted)";
  }
  return o;
}

absl::Status ReportRequestFromLog(const std::string& path, int gpus, v1::ReportRunRequest* req, const Job* job) {
  // The reader's errors (file, line, field) go out unchanged.
  absl::StatusOr<trace::TrainingLog> log = trace::ReadTrainingLog(path);
  if (!log.ok()) return log.status();
  // A log that states its global batch (Megatron "global batch size", NeMo global_batch_size)
  // must be the job's: a step of another batch compared with this job's prediction would be
  // stored as a plain predicted-vs-measured pair, wrong by the ratio of the batches.
  if (job != nullptr) {
    for (auto it = log->iterations.rbegin(); it != log->iterations.rend(); ++it) {
      if (it->global_batch_size <= 0) continue;
      if (it->global_batch_size != job->training.global_batch_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": line ", it->line, ": the log's global batch size is ", it->global_batch_size, ", the job's ",
            job->training.global_batch_size, ": report the job that ran (its training.global_batch_size)"));
      }
      break;
    }
  }
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
  if (job != nullptr) {
    // A conversion that cannot be made does not stop the report: it is said, not guessed.
    if (absl::Status s = ConvertFrameworkReported(*job, gpus, log->year, f); !s.ok()) {
      f->set_conversion(absl::StrCat("not converted: ", s.message()));
    }
  }
  (*req->mutable_labels())["source"] = absl::StrCat("training-log:", log->framework);
  return absl::OkStatus();
}

std::string FormatFrameworkReported(const v1::FrameworkReported& f) {
  std::string o = absl::StrFormat("  %s log: %d iterations after %d warm-up record%s", f.framework(), f.iterations(),
                                  f.warmup_records(), f.warmup_records() == 1 ? "" : "s");
  if (f.tflops_per_gpu() > 0) absl::StrAppendFormat(&o, ", %.1f TFLOP/s per GPU", f.tflops_per_gpu());
  if (f.mfu() > 0) absl::StrAppendFormat(&o, ", MFU %.2f%%", 100 * f.mfu());
  if (f.tokens_per_s_per_gpu() > 0) absl::StrAppendFormat(&o, ", %.0f tokens/s per GPU", f.tokens_per_s_per_gpu());
  if (f.converted_step_time_s() > 0) {
    absl::StrAppendFormat(&o, "\n  under %s's FLOP convention (%s) that is a %.4f s step: stepcast MFU %.1f%%\n    %s",
                          f.framework(), f.flop_convention(), f.converted_step_time_s(), 100 * f.converted_mfu(),
                          f.conversion());
  } else if (f.tflops_per_gpu() > 0 || f.mfu() > 0) {
    absl::StrAppendFormat(&o, " (%s's own FLOP convention, not converted%s)", f.framework(),
                          f.conversion().empty() ? ": give --job to convert" : absl::StrCat("; ", f.conversion()));
  }
  return o + "\n";
}

}  // namespace stepcast::cli
