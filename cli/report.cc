#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"

namespace stepcast::cli {
namespace {

std::string Gib(double bytes) { return absl::StrFormat("%8.2f", bytes / (1ull << 30)); }

std::string Thousands(double v) {
  const std::string digits = absl::StrFormat("%.0f", v < 0 ? -v : v);
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Duration(double s) {
  if (s >= 86400) return absl::StrFormat("%.1f days", s / 86400);
  if (s >= 3600) return absl::StrFormat("%.1f h", s / 3600);
  return absl::StrFormat("%.1f s", s);
}

}  // namespace

int FailWithStatus(const absl::Status& s) {
  std::cerr << "stepcast: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kNotFound ||
                 s.code() == absl::StatusCode::kFailedPrecondition
             ? kExitInvalid
             : kExitError;
}

namespace {

// The interval, regime and notes lines of FormatReport: how far predictions like this one have
// been off (core/interval.h; docs/VALIDATION.md "Intervals").
void AppendIntervalLines(const Prediction& p, std::string& o) {
  const StepTimeInterval& i = p.interval;
  const std::string runs = absl::StrFormat("(%.3g runs, %d source%s)", i.experiments, i.sources, i.sources == 1 ? "" : "s");
  absl::StrAppendFormat(&o, "  interval   %.4f - %.4f s (%.0f%%): MFU %.1f%% - %.1f%%\n", i.low_s, i.high_s,
                        100 * i.coverage, 100 * p.mfu * p.step_time_s / i.high_s, 100 * p.mfu * p.step_time_s / i.low_s);
  const std::string from =
      i.validated ? absl::StrCat("; interval from ", i.level >= 0 ? RegimeText(i.regime, i.level) : std::string("every run"),
                                 " ", runs)
      : i.from_outside_runs ? absl::StrCat("; OUTSIDE the validated region: the interval of the runs outside it ", runs)
                            : std::string("; OUTSIDE the validated region: the widest interval");
  absl::StrAppendFormat(&o, "  regime     %s: %.3g validated runs%s\n", RegimeText(i.regime, kValidatedRegionLevel),
                        i.region_experiments, from);
  for (const std::string& n : IntervalNotes(i)) absl::StrAppendFormat(&o, "  note:      %s\n", n);
}

}  // namespace

std::string FormatReport(const Job& job, const Prediction& p) {
  const Parallelism& par = job.parallelism;
  const TrainingConfig& t = job.training;
  std::string o;
  absl::StrAppendFormat(&o, "stepcast prediction: %s\n", p.job_name);
  // Active as most model cards count it (the input table included), and without the input
  // table as the gpt-oss card counts it (core/model_shape.h ParameterCounts).
  absl::StrAppendFormat(&o, "  model      %s (%.2fB params, %.2fB active; %.2fB without the input embedding)\n",
                        p.model_name, p.parameters.total / 1e9, p.parameters.active / 1e9,
                        p.parameters.active_without_input_embedding / 1e9);
  absl::StrAppendFormat(&o, "  cluster    %d x %s, %d per node; profile %s\n", p.gpu_count,
                        p.hardware_name, job.GpusPerNode(), p.profile_name);
  absl::StrAppendFormat(&o, "  framework  %s\n", job.framework.display_name.empty() ? job.framework.name
                                                                                  : job.framework.display_name);
  absl::StrAppendFormat(&o, "  layout     TP=%d PP=%d DP=%d CP=%d EP=%d%s VPP=%d SP=%s ZeRO=%s recompute=%s %s\n",
                        par.tp, par.pp, par.dp, par.cp, par.ep,
                        par.etp > 0 && par.etp != par.tp ? absl::StrCat(" ETP=", par.etp) : "", par.vpp,
                        par.SequenceParallelOn() ? "on" : "off", ShardingName(t.sharding),
                        RecomputeName(t.recompute), DTypeName(t.precision.gemm));
  absl::StrAppendFormat(&o, "  batch      %d x %d tokens, micro-batch %d, %d micro-batches per step\n\n",
                        t.global_batch_size, t.seq_length, t.micro_batch_size, p.micro_batches_per_step);
  absl::StrAppendFormat(&o, "  step time  %.4f s\n", p.step_time_s);
  if (p.interval.available) AppendIntervalLines(p, o);
  absl::StrAppendFormat(&o, "  tokens/s   %s (%s per GPU)\n", Thousands(p.tokens_per_s),
                        Thousands(p.tokens_per_s_per_gpu));
  absl::StrAppendFormat(&o, "  MFU / HFU  %.1f%% / %.1f%% of %.0f TFLOP/s %s peak (model FLOPs %.3g per step)\n",
                        100 * p.mfu, 100 * p.hfu, p.peak_flops_per_s_per_gpu / 1e12,
                        DTypeName(t.precision.gemm), p.model_flops_per_step);
  absl::StrAppendFormat(&o, "  bottleneck %s: %s\n\n", BottleneckName(p.bottleneck.kind), p.bottleneck.reason);

  const StepBreakdown& b = p.breakdown;
  if (b.Total() > 0) {
    o += "  step breakdown (slowest stage)      seconds    share\n";
    const struct { const char* name; double v; } rows[] = {
        {"GEMM (fwd+bwd)", b.gemm_s},
        // A hybrid's Mamba-2 scan is booked with the attention core (StepModel::MambaMixer).
        {job.model.Hybrid() ? "attention core + SSD scan" : "attention core", b.attention_s},
        {"elementwise / memory-bound", b.elementwise_s}, {"recompute", b.recompute_s},
        {"TP communication", b.tp_comm_s},      {"CP communication", b.cp_comm_s},
        {"MoE dispatch (EP a2a, ETP)", b.ep_comm_s},        {"PP send/recv", b.pp_comm_s},
        {"DP gradient sync (exposed)", b.dp_comm_s}, {"pipeline bubble", b.pipeline_bubble_s},
        {"optimizer step", b.optimizer_s},     {"host kernel launches", b.launch_overhead_s}};
    for (const auto& r : rows) {
      if (r.v <= 0) continue;
      absl::StrAppendFormat(&o, "    %-30s %10.4f  %6.1f%%\n", r.name, r.v, 100 * r.v / p.step_time_s);
    }
    absl::StrAppendFormat(&o, "    %-30s %10.4f\n\n", "total", b.Total());
  }

  const MemoryEstimate& m = p.memory;
  o += "  memory per GPU (most loaded stage)      GiB\n";
  for (const auto& it : m.items) absl::StrAppendFormat(&o, "    %-30s %s\n", it.name, Gib(it.bytes));
  absl::StrAppendFormat(&o, "    %-30s %s of %s GiB: ", "total", Gib(m.total_bytes), Gib(m.capacity_bytes));
  if (p.memory_interval.available) {
    // The verdict from the memory interval (core/interval.h).
    const MemoryInterval& mi = p.memory_interval;
    absl::StrAppendFormat(&o, "%s; %.0f%% interval %s - %s GiB (%.3g measured %s runs)\n\n",
                          mi.verdict == MemoryVerdict::kFits    ? "fits"
                          : mi.verdict == MemoryVerdict::kTight ? "TIGHT, the capacity lies inside the interval: it may not fit"
                                                                : "DOES NOT FIT, even at the interval's lower end",
                          100 * mi.coverage, Gib(mi.low_bytes), Gib(mi.high_bytes), mi.experiments,
                          FrameworkFamilyName(mi.family));
  } else if (m.fits) {
    absl::StrAppendFormat(&o, "fits, %.2f GiB headroom\n\n", m.headroom_bytes / (1ull << 30));
  } else if (m.tight) {
    absl::StrAppendFormat(&o, "TIGHT, %.2f GiB (%.1f%%) over: within the memory model's %.0f%% uncertainty, "
                              "it may not fit\n\n",
                          -m.headroom_bytes / (1ull << 30), -100 * m.headroom_bytes / m.capacity_bytes,
                          100 * kMemoryUncertainty);
  } else {
    absl::StrAppendFormat(&o, "DOES NOT FIT, %.2f GiB over\n\n", -m.headroom_bytes / (1ull << 30));
  }

  const CostEstimate& c = p.cost;
  absl::StrAppendFormat(&o, "  cost       $%.2f per hour, $%.4f per step; $%.2f per GPU-hour per HBM TB/s\n",
                        c.per_hour_usd, c.per_step_usd, c.per_hbm_tb_per_s_hour_usd);
  if (c.steps_per_run > 0) {
    absl::StrAppendFormat(&o, "  run        %s steps: $%s, %s, %.1f MWh (GPU board power)\n",
                          Thousands(c.steps_per_run), Thousands(c.per_run_usd), Duration(c.time_to_train_s),
                          c.energy_per_run_kwh / 1000);
  }
  for (const auto& w : p.warnings) absl::StrAppendFormat(&o, "  warning: %s\n", w);
  if (p.assumed_inputs && !p.assumed_inputs->empty()) {
    absl::StrAppendFormat(&o, "\n  assumed (not stated by the job; --json lists each with its source):\n   ");
    size_t width = 3;
    for (const auto& a : *p.assumed_inputs) {
      const std::string item = absl::StrCat(" ", a.field, "=", a.value);
      if (width + item.size() > 100) {
        o += "\n   ";
        width = 3;
      }
      o += item;
      width += item.size();
    }
    o += "\n";
  }
  return o;
}

}  // namespace stepcast::cli
