// The after-the-run commands of the stepcast CLI: trace (Kineto / torch.profiler traces) and
// compare (a prediction against probe reports, traces or a stored run).
#include <algorithm>
#include <iostream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "cli/html.h"
#include "plugin/compare.h"
#include "plugin/probe/trace_analysis.h"
#include "plugin/trace/kineto_trace.h"
#include "proto/codec.h"

namespace stepcast::cli {
namespace {

int Fail(const absl::Status& s) { return FailWithStatus(s); }

double Ms(double s) { return s * 1e3; }

std::string Collectives(const google::protobuf::Map<std::string, double>& m) {
  std::string o;
  std::map<std::string, double> sorted(m.begin(), m.end());
  for (const auto& [k, v] : sorted) absl::StrAppendFormat(&o, "%s%s %.2f", o.empty() ? "" : ", ", k, Ms(v));
  return o;
}

// The per-annotation table of `stepcast trace --annotations`: per instance (one range of the
// name, e.g. one layer's attn(F)), milliseconds.
std::string FormatAnnotations(const v1::TraceSummary& s) {
  std::string o = "\n  per annotation (GPU records launched inside it; ms per instance = summed over its ranges / n):\n";
  absl::StrAppendFormat(&o, "  %-28s %4s %8s %8s %8s %8s %8s %8s %9s %8s %9s %9s %8s %7s %8s  %s\n", "annotation", "n",
                        "gemm", "attn", "conv", "other", "memory", "comm", "sum", "busy", "comp|comm", "comm|comp", "cpu",
                        "records", "cpu/rec", "streams (ms per instance)");
  for (const v1::AnnotationTime& a : s.annotations()) {
    const double n = std::max(1, a.instances());
    const double sum = a.gemm_s() + a.attention_s() + a.convolution_s() + a.elementwise_s() + a.memory_copy_s() +
                       a.communication_s();
    std::string streams;
    for (const v1::StreamTime& st : a.streams()) {
      absl::StrAppendFormat(&streams, "%s%d: %.3f", streams.empty() ? "" : ", ", st.stream(), Ms(st.time_s()) / n);
    }
    std::string name = a.name().size() > 28 ? a.name().substr(0, 25) + "..." : a.name();
    // The CPU's time per GPU record it issued (us): with no host wait inside the range, the host
    // cost of a launch (Python, dispatch, the launch call); framework.proto LaunchModel.
    const std::string per_record =
        a.records() > 0 && a.cpu_range_s() > 0 ? absl::StrFormat("%8.1f", a.cpu_range_s() * 1e6 / a.records()) : "       -";
    absl::StrAppendFormat(&o, "  %-28s %4d %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f %8.3f %9.3f %9.3f %8.3f %7.1f %s  %s\n",
                          name, a.instances(), Ms(a.gemm_s()) / n, Ms(a.attention_s()) / n, Ms(a.convolution_s()) / n,
                          Ms(a.elementwise_s()) / n, Ms(a.memory_copy_s()) / n, Ms(a.communication_s()) / n, Ms(sum) / n,
                          Ms(a.busy_s()) / n, Ms(a.compute_overlapped_by_communication_s()) / n,
                          Ms(a.communication_overlapped_by_compute_s()) / n, Ms(a.cpu_range_s()) / n, a.records() / n,
                          per_record, streams);
  }
  o += "  (sum = every record's duration; busy = their union; comp|comm = its non-communication time under a\n"
       "   communication kernel; comm|comp = its communication time under a computation kernel; n = ranges;\n"
       "   cpu = the ranges' CPU time; records = GPU records launched inside them; cpu/rec = cpu per record, us:\n"
       "   the host cost of a launch where nothing in the range waits for the GPU -> a framework preset's\n"
       "   launch.kernel_launch_overhead_s)\n";
  return o;
}

// The table of `stepcast trace --contention`.
std::string FormatContention(const v1::ContentionReport& c) {
  std::string o = absl::StrFormat(
      "\n  contention (key %s): duration beside communication / median duration alone of the same kernel\n", c.key());
  absl::StrAppendFormat(&o, "  %-11s %-16s %-22s %5s %7s %6s %7s %15s %15s %6s %6s %6s\n", "category", "beside",
                        "GPU", "n", "kernels", "alone", "median", "p10-p90", "min-max", "tw", "cover", "noise");
  for (const v1::ContentionGroup& g : c.groups()) {
    std::string gpu = g.gpu().size() > 22 ? g.gpu().substr(0, 22) : g.gpu();
    absl::StrAppendFormat(&o, "  %-11s %-16s %-22s %5d %7d %6d %7.3f %7.3f-%-7.3f %7.3f-%-7.3f %6.3f %6.2f %6.3f\n",
                          g.category(), g.communication_kind(), gpu, g.instances(), g.kernels(),
                          g.alone_instances(), g.median_ratio(), g.p10_ratio(), g.p90_ratio(), g.min_ratio(),
                          g.max_ratio(), g.time_weighted_ratio(), g.mean_overlap_fraction(), g.alone_spread());
  }
  absl::StrAppendFormat(&o,
                        "  instances: %d alone, %d beside communication only (%d without an alone twin), %d partly "
                        "(< %.0f%% covered), %d beside other work; %d overlapped instances of kernels shorter than "
                        "%.0f us alone not measured\n",
                        c.alone_instances(), c.overlapped_instances(), c.overlapped_without_reference(),
                        c.partly_overlapped(), 100 * c.min_overlap_fraction(), c.beside_other_work(),
                        c.shorter_than_minimum(), c.min_duration_s() * 1e6);
  o += "  (n = overlapped instances measured; tw = time-weighted ratio; cover = mean share under communication;\n"
       "   noise = median |alone/median(alone) - 1| of the same kernels: a ratio within it is no measured slowdown)\n";
  for (const auto& n : c.notes()) absl::StrAppendFormat(&o, "  note: %s\n", n);
  return o;
}

// The per-rank wait for other ranks' lateness (stepcast::trace::AttributeCollectiveWaits).
std::string FormatStragglers(const v1::StragglerReport& w) {
  std::string o = absl::StrFormat(
      "\ncommunication wait for other ranks (%d collective instances matched across ranks):\n", w.collectives());
  absl::StrAppendFormat(&o, "  %5s %6s %9s %9s %6s  %-22s %10s %14s\n", "rank", "colls", "comm ms", "wait ms",
                        "wait%", "mostly waited for", "last in", "others wait ms");
  for (const v1::RankCollectiveWait& r : w.ranks()) {
    const std::string most = r.mostly_waited_for_rank() < 0
                                 ? std::string("-")
                                 : absl::StrFormat("rank %d (%.2f ms)", r.mostly_waited_for_rank(),
                                                   Ms(r.waited_for_that_rank_s()));
    absl::StrAppendFormat(&o, "  %5d %6d %9.2f %9.2f %5.1f%%  %-22s %10d %14.2f\n", r.rank(), r.collectives(),
                          Ms(r.communication_s()), Ms(r.wait_for_other_ranks_s()),
                          100 * r.wait_for_other_ranks_s() / std::max(1e-12, r.communication_s()), most,
                          r.arrived_last(), Ms(r.others_waited_for_it_s()));
  }
  if (w.slowest_rank() >= 0) {
    absl::StrAppendFormat(&o, "  slowest rank: %d (the others waited %.2f ms for it in all)\n", w.slowest_rank(),
                          Ms(w.slowest_rank_caused_wait_s()));
  }
  for (const v1::StepLateness& s : w.steps()) {
    absl::StrAppendFormat(&o, "  step %d: critical lateness %.2f ms over %d collectives (mostly rank %d)\n", s.step(),
                          Ms(s.critical_lateness_s()), s.collectives(), s.latest_rank());
  }
  for (const auto& n : w.notes()) absl::StrAppendFormat(&o, "  note: %s\n", n);
  o += "  (wait = time a rank's collective kernel ran before the last rank of that collective started it;\n"
       "   last in = collectives it started last; critical lateness = per collective, the longest wait, summed)\n";
  return o;
}

// The page's measured step (times from the step's start, categories by name) from the trace's;
// none when no trace gave one.
std::optional<html::MeasuredStep> MeasuredStepOf(const trace::StepTimeline& t) {
  if (t.steps == 0) return std::nullopt;
  html::MeasuredStep m{t.path, t.rank, t.step, t.steps, t.step_time_s, t.step_source, {}};
  m.kernels.reserve(t.intervals.size());
  for (const trace::StepInterval& i : t.intervals) {
    m.kernels.push_back({i.stream, (i.start_ns - t.start_ns) * 1e-9, (i.end_ns - t.start_ns) * 1e-9,
                         probe::CategoryName(i.category), i.name_id < t.names.size() ? t.names[i.name_id] : ""});
  }
  return m;
}

}  // namespace

absl::StatusOr<v1::ProbeReport> ReadProbeReports(const std::vector<std::string>& paths) {
  std::vector<v1::ProbeReport> all;
  for (const auto& p : paths) {
    v1::ProbeReport r;
    if (absl::Status s = ParseMessageFile(p, &r); !s.ok()) return s;
    all.push_back(std::move(r));
  }
  // Several processes of one rank (helper processes that loaded the probe): the one with steps.
  std::vector<v1::ProbeReport> ranks = probe::OneReportPerRank(all);
  if (ranks.empty()) {
    return absl::FailedPreconditionError("the probe reports come from processes that launched no kernel");
  }
  if (ranks.size() == 1) return ranks[0];
  return probe::MergeRanks(ranks);
}

absl::StatusOr<Measured> ReadMeasured(const std::vector<std::string>& paths, trace::StepTimeline* timeline) {
  if (paths.empty()) return absl::InvalidArgumentError("no measurement file given");
  size_t traces = 0;
  for (const auto& p : paths) traces += trace::LooksLikeKinetoTrace(p);
  if (traces != 0 && traces != paths.size()) {
    return absl::InvalidArgumentError("give probe reports or Kineto traces, not a mix");
  }
  Measured m;
  if (traces > 0) {
    absl::StatusOr<v1::TraceReport> r = trace::AnalyzeKinetoTraces(paths, {}, {}, timeline);
    if (!r.ok()) return r.status();
    m.merged = r->merged();
    m.source = "trace";
  } else {
    absl::StatusOr<v1::ProbeReport> r = ReadProbeReports(paths);
    if (!r.ok()) return r.status();
    m.merged = *std::move(r);
    m.source = "probe";
  }
  return m;
}

std::string FormatTraceReport(const v1::TraceReport& r) {
  std::string o;
  for (const v1::TraceSummary& s : r.ranks()) {
    absl::StrAppendFormat(&o, "stepcast trace: %s\n", s.path());
    // A single-process trace has no distributedInfo: rank -1, world size 0.
    const std::string rank = s.world_size() > 0 ? absl::StrFormat("rank %d of %d", s.rank(), s.world_size())
                                                : std::string("one process (no distributedInfo)");
    absl::StrAppendFormat(&o, "  %s, %s; %d GPU records on %d streams, %d launches (%d records without one)\n",
                          rank, s.device_names().empty() ? "unknown GPU" : s.device_names(0),
                          s.gpu_records(), s.streams_size(), s.launches(), s.records_without_launch());
    absl::StrAppendFormat(&o, "  steps from %s: %d\n\n", s.step_source(), s.steps_size());
    absl::StrAppendFormat(&o, "  %5s %9s %8s %8s %8s %8s %8s %8s %9s %9s %8s  %s\n", "step", "time ms", "gemm", "conv",
                          "attn", "elemwise", "memory", "comm", "exposed", "exp+mem", "idle", "communication by collective ms");
    auto row = [&](const std::string& label, const v1::StepMeasurement& m) {
      const auto& b = m.busy();
      absl::StrAppendFormat(&o, "  %5s %9.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %9.2f %9.2f %8.2f  %s\n", label,
                            Ms(m.step_time_s()), Ms(b.gemm_s()), Ms(b.convolution_s()), Ms(b.attention_s()),
                            Ms(b.elementwise_s()), Ms(b.memory_copy_s()), Ms(b.communication_s()),
                            Ms(m.exposed_communication_s()), Ms(m.exposed_communication_incl_memory_s()),
                            Ms(m.idle_s()), Collectives(m.communication_by_collective_s()));
    };
    for (const auto& m : s.steps()) row(absl::StrCat(m.step()), m);
    row("median", s.median());
    const v1::TraceTemporalBreakdown& w = s.whole();
    absl::StrAppendFormat(&o,
                          "\n  whole trace (HTA's temporal breakdown): kernel time %.2f ms, idle %.2f ms (%.1f%%), "
                          "compute %.2f ms (%.1f%%), non-compute %.2f ms (%.1f%%)\n",
                          Ms(w.kernel_time_s()), Ms(w.idle_s()), 100 * w.idle_s() / std::max(1e-12, w.kernel_time_s()),
                          Ms(w.compute_s()), 100 * w.compute_s() / std::max(1e-12, w.kernel_time_s()),
                          Ms(w.non_compute_s()), 100 * w.non_compute_s() / std::max(1e-12, w.kernel_time_s()));
    absl::StrAppendFormat(&o,
                          "  communication %.2f ms, overlapped by computation %.2f%% (HTA), by computation or "
                          "memcpy/memset %.2f%%\n",
                          Ms(w.communication_s()), w.comm_comp_overlap_pct(), w.comm_overlap_incl_memory_pct());
    for (const auto& n : s.notes()) absl::StrAppendFormat(&o, "  note: %s\n", n);
    if (!s.annotations().empty()) o += FormatAnnotations(s);
    if (s.has_contention()) o += FormatContention(s.contention());
    o += "\n";
  }
  if (r.ranks_size() > 1) {
    const v1::StepMeasurement& m = r.merged().median();
    absl::StrAppendFormat(&o, "ranks merged (%d, the slowest rank sets each step): %d steps, median step %.2f ms, "
                              "exposed communication %.2f ms, idle %.2f ms\n",
                          r.merged().rank_count(), r.merged().steps_size(), Ms(m.step_time_s()),
                          Ms(m.exposed_communication_s()), Ms(m.idle_s()));
    if (r.has_stragglers()) o += FormatStragglers(r.stragglers());
  }
  o += "  (ms; busy = union per category; exposed = communication not under computation kernels (HTA);\n"
       "   exp+mem = not under computation or memcpy/memset; idle = no GPU record running)\n";
  return o;
}

int Trace(const TraceArgs& a) {
  trace::AnalyzeOptions o;
  o.use_markers = !a.no_markers;
  o.warmup_steps = a.warmup_steps;
  o.annotations = a.annotations;
  o.contention = a.contention;
  o.contention_key = a.contention_key;
  o.min_overlap_fraction = a.min_overlap;
  if (!(a.min_kernel_us >= 0 && a.min_kernel_us <= 1e9)) {
    return Fail(absl::InvalidArgumentError("--min-kernel-us: must be in [0, 1e9]"));
  }
  o.min_kernel_ns = static_cast<int64_t>(a.min_kernel_us * 1e3);
  if (a.warmup_steps < 0) return Fail(absl::InvalidArgumentError("--warmup: must be >= 0"));
  if (a.contention_key != "shape" && a.contention_key != "position") {
    return Fail(absl::InvalidArgumentError("--contention-key: must be shape or position"));
  }
  if (!(a.min_overlap > 0 && a.min_overlap <= 1)) {
    return Fail(absl::InvalidArgumentError("--min-overlap: must be in (0, 1]"));
  }
  if (!(a.max_decompression_ratio >= 1 && a.max_decompression_ratio <= 1e6)) {
    return Fail(absl::InvalidArgumentError("--max-decompression-ratio: must be in [1, 1e6]"));
  }
  trace::KinetoOptions read;
  read.max_decompression_ratio = a.max_decompression_ratio;
  absl::StatusOr<v1::TraceReport> r = trace::AnalyzeKinetoTraces(a.paths, read, o);
  if (!r.ok()) return Fail(r.status());
  std::cout << (a.json ? ToJson(*r) : FormatTraceReport(*r));
  return 0;
}

int Compare(const std::string& prediction_arg, const std::vector<std::string>& measured, const ClientOptions& client,
            bool json, const std::string& html_path, const Parallelism* layout) {
  v1::Prediction pred;
  v1::StepMeasurement meas;
  std::string title, source;
  if (absl::StartsWith(prediction_arg, "run:")) {
    absl::StatusOr<Client> c = Client::Connect(client);
    if (!c.ok()) return Fail(c.status());
    v1::GetRunRequest req;
    req.set_run_id(prediction_arg.substr(4));
    v1::GetRunResponse resp;
    auto ctx = c->Context();
    const grpc::Status st = c->stub().GetRun(ctx.get(), req, &resp);
    if (!st.ok()) return Fail(FromGrpc(st));
    pred = resp.run().prediction();
    title = absl::StrCat(resp.run().run_id(), " (", pred.model_name(), " on ", pred.gpu_count(), " x ",
                         pred.hardware_name(), ")");
    if (measured.empty()) {
      if (!resp.run().has_measured_breakdown()) {
        return Fail(absl::FailedPreconditionError(
            "the run has no measured breakdown (report it from the probe or a trace, or give the files)"));
      }
      // The stored summary: per-category seconds (no per-collective split).
      const v1::StepBreakdown& b = resp.run().measured_breakdown();
      meas.set_step_time_s(resp.run().measured_step_time_s());
      meas.mutable_busy()->set_gemm_s(b.gemm_s());
      meas.mutable_busy()->set_attention_s(b.attention_s());
      meas.mutable_busy()->set_elementwise_s(b.elementwise_s());
      meas.set_exposed_communication_s(b.exposed_communication_s());
      meas.set_idle_s(b.idle_s());
      source = "run";
    }
  } else {
    if (absl::Status s = ParseMessageFile(prediction_arg, &pred); !s.ok()) return Fail(s);
    title = absl::StrCat(pred.job_name(), " (", pred.model_name(), " on ", pred.gpu_count(), " x ",
                         pred.hardware_name(), ")");
  }
  int steps = 0, ranks = 0;
  trace::StepTimeline timeline;
  if (!measured.empty()) {
    absl::StatusOr<Measured> m = ReadMeasured(measured, html_path.empty() ? nullptr : &timeline);
    if (!m.ok()) return Fail(m.status());
    if (m->merged.steps().empty()) return Fail(absl::FailedPreconditionError("the measurement holds no step"));
    meas = m->merged.median();
    source = m->source;
    steps = m->merged.steps_size();
    ranks = m->merged.rank_count();
    title += absl::StrCat("; measured (", source, ") ", steps, " steps on ", ranks, " rank(s), steps by ",
                          m->merged.step_source());
  }
  if (meas.step_time_s() <= 0) return Fail(absl::InvalidArgumentError("no measured step time"));
  v1::Comparison c = CompareTerms(pred, meas, title, source);
  c.set_measured_steps(steps);
  c.set_ranks(ranks);
  std::cout << (json ? ToJson(c) : FormatTermComparison(c));
  if (!html_path.empty()) {
    const std::optional<html::MeasuredStep> lanes = MeasuredStepOf(timeline);
    if (absl::Status s = html::WritePage(html_path, html::ComparisonPage(c, &pred, layout, lanes ? &*lanes : nullptr));
        !s.ok()) {
      return Fail(s);
    }
  }
  return 0;
}

}  // namespace stepcast::cli
