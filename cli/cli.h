// File: cli/cli.h
//
// The pieces of the `stepcast` command line that are worth testing on their own: the readable
// report, the validation against published runs, and the planning answers.
#ifndef STEPCAST_CLI_CLI_H_
#define STEPCAST_CLI_CLI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/interval.h"
#include "core/job.h"
#include "core/predict.h"
#include "proto/catalog.h"
#include "stepcast/v1/probe.pb.h"
#include "stepcast/v1/trace.pb.h"
#include "stepcast/v1/validation.pb.h"

namespace stepcast::trace {
struct StepTimeline;  // plugin/trace/kineto_trace.h
}  // namespace stepcast::trace

namespace stepcast::cli {

// Human-readable prediction: headline, breakdown table, memory table, bottleneck and why.
std::string FormatReport(const Job& job, const Prediction& p);

// Reads a CSV with the columns of shared/validation/published_runs.csv, builds each row's job
// (conventions in docs/VALIDATION.md), predicts, and compares with the measured iteration time:
//   S3-style rows: iter_time_s as printed;
//   rows with tokens_per_s_per_gpu: global_batch_tokens / (tokens/s/GPU x GPUs);
//   S1-style rows (TFLOP/s per GPU, Megatron Eq. 3): F / (TFLOP/s x GPUs), F = NarayananEq3Flops.
// No fitting: one reference profile per GPU type.
// Predicts every row of a published-runs CSV (proto/published_runs.h) and scores it: |error| of
// the step time per row, per source and overall (median, p90, mean, max, per experiment), rows
// predicted not to fit, and leave-one-source-out figures with the model choices each source
// informed switched off (`informed_path`: YAML map source id -> ModelChoices names; empty: none).
//
// Intervals (docs/VALIDATION.md "Intervals"): every row's leave-one-source-out residual goes into
// an interval table (core/interval.h) with the measured peak-memory runs of `memory_runs_path`
// (tests/data/validation/memory_runs.yaml; empty: none, the memory verdict then uses the point
// estimate); each row gets the 80% interval of its leave-one-source-out prediction from the
// table built without its source, and the report the coverage overall, per regime and per
// source (interval_coverage). `table_out` (may be null) receives the table of every row.
absl::StatusOr<v1::ValidationReport> Validate(const std::string& csv_path, const Catalog& catalog,
                                              const std::string& informed_path = "",
                                              const std::string& memory_runs_path = "",
                                              std::shared_ptr<const IntervalTable>* table_out = nullptr);
// The text of presets/intervals.yaml for `table`, naming `command` as the one that wrote it.
std::string IntervalTableFile(const IntervalTable& table, const std::string& command);
// The full prediction report of one row (by row_id) of a published-runs CSV, with its measured
// step time: what `stepcast validate --explain ROW` prints. `json`: one JSON object instead, with
// the row's job spec as read (`spec`, a v1.JobSpec), the `prediction` (v1.Prediction), the measured
// step time and the signed error in percent; what `--explain ROW --json` prints.
absl::StatusOr<std::string> ExplainRow(const std::string& csv_path, const Catalog& catalog, const std::string& row_id,
                                       bool json = false);
std::string FormatValidation(const v1::ValidationReport& r);

}  // namespace stepcast::cli

#endif  // STEPCAST_CLI_CLI_H_

namespace stepcast::cli {

// `stepcast plan` options: the GPUs each hardware preset needs for a tokens/s target, and what a
// budget buys by a deadline, answered by the model and the layout search (core/search.h) for a
// job (job_path, or model + seq_length + global_batch_size). With seed_formulas: seed 000's
// per-token answer (GPUs, $/hr and cluster HBM TB/s from datasheet figures, no memory) and seed
// 004's budget arithmetic (GPUs a budget buys, the MFU the run then needs).
struct PlanOptions {
  std::vector<std::string> hardware;
  std::string job_path;
  int64_t seq_length = 0, global_batch_size = 0;
  std::string framework;
  int64_t max_gpus = 16384;
  bool seed_formulas = false;
  std::string model;                 // preset; empty: seed 000's 70B example
  double n_params = 70e9, layers = 80, d_model = 8192;
  double target_tokens_per_s = 0;
  int dp_world_size = 8;
  double utilization = 0.75;
  double recompute_mult = 1.2, alpha_opt_bytes_per_param = 16, c_act = 5, global_tokens_per_step = 512000;
  double bytes_per_grad_elem = 2;
  double budget_usd = 0, days = 0, dataset_tokens = 0, price_override = -1;
  double time_limit_s = 0;  // every search of the plan stops by then (0: none)
};
absl::StatusOr<std::string> Plan(const PlanOptions& o, const Catalog& catalog);

}  // namespace stepcast::cli

#include "plugin/client.h"
#include "plugin/service.h"

namespace stepcast::cli {

// Exit codes of `stepcast preflight`, for launchers.
enum PreflightExit { kExitPass = 0, kExitError = 1, kExitInvalid = 2, kExitWarn = 3, kExitFail = 4 };

// Prints "stepcast: <message>" to stderr and returns the command's exit code for `s`: 2
// (kExitInvalid) for invalid input (InvalidArgument, NotFound, FailedPrecondition), else 1.
int FailWithStatus(const absl::Status& s);

// `stepcast serve`: runs until SIGTERM/SIGINT, then shuts down gracefully (grace period for
// in-flight RPCs). Prints "listening on ADDR" (and writes the port to port_file if set).
int Serve(const ServeOptions& options, Catalog catalog, const std::string& port_file);

struct PreflightArgs {
  ClientOptions client;
  v1::PreflightPolicy policy;
  v1::ProfileRef profile;
  bool json = false;
  // With a training command instead of a job file (Megatron-LM or torchtitan).
  std::vector<std::string> command;
  int64_t gpus = 0, gpus_per_node = 0;
  std::string hardware;
};
// Reads the job file (inlining a local hf_config) or imports the training command, calls
// Preflight, prints the verdict, the reasons, the prediction and its id; returns a PreflightExit.
int Preflight(const std::string& job_path, const PreflightArgs& args);

struct ReportArgs {
  ClientOptions client;
  std::string prediction_id, job_path, cluster, measured_breakdown_path;
  double step_time_s = 0, tokens_per_s = 0;
  int gpus = 0;
  std::vector<std::string> labels;  // key=value
  std::string start_time, end_time;  // RFC 3339
  v1::ProfileRef profile;
  bool json = false;
  std::vector<std::string> probe_reports;  // merged; the median step is the measurement
  std::vector<std::string> traces;         // Kineto traces (one per rank), instead of probe reports
  std::string log_path;                    // a training log (ReportRequestFromLog), instead of the above
  bool dry_run = false;                    // print the request as JSON, send nothing
  std::string request_id;                  // idempotency key (default: a random one per call)
};
int Report(const ReportArgs& args);

// `stepcast report --log FILE`: fills `req` from a training log (plugin/trace/training_log.h:
// Megatron-LM / Megatron-Bridge, NeMo 2 progress bar, NeMo 1 tqdm, torchtitan). The median step
// time over the records after the reader's warm-up record (TrainingLogOptions::warmup_records,
// docs/TRACES.md "Training logs") is measured_step_time_s; a log with no step time (torchtitan)
// gives measured_tokens_per_s = median tokens/s per GPU x `gpus` (the job's tokens/s; `gpus` > 0
// required then). framework_reported: the log's own medians of TFLOP/s per GPU, MFU (a fraction)
// and tokens/s per GPU, under the framework's FLOP convention, not converted (0: not stated);
// label source=training-log:<framework>. Errors: the reader's, unchanged (InvalidArgument /
// NotFound / FailedPrecondition naming the file, line and field); InvalidArgument when the log
// states only tokens/s per GPU and `gpus` is 0.
// With `job` (the run's job, resolved: `stepcast report --log FILE --job JOB`), the framework's
// figure is also converted (ConvertFrameworkReported; a conversion that cannot be made is said in
// framework_reported.conversion, the report still goes out). Megatron-LM / -Bridge, NeMo 1 / 2,
// torchtitan, llm-foundry (Composer console records) and the HF Trainer summary are read.
absl::Status ReportRequestFromLog(const std::string& path, int gpus, v1::ReportRunRequest* req,
                                  const Job* job = nullptr);
// Converts `f`'s TFLOP/s per GPU (else its MFU x the job's dense GEMM-dtype datasheet peak, as
// `validate` converts a published MFU) into the step time it means under the framework's FLOP
// convention, with the functions `validate` uses (core/flop_conventions.h ConventionFlopsPerStep
// and StepTimeFromFlopRate over the job's model, sequence length and global batch):
//   megatron     Megatron-LM num_floating_point_operations, kMegatron2024 or kMegatron2025 by the
//                log's year (FlopConventionFromText with that year; 2025 when the log has no date)
//   nemo         NeMo flops_formulas.py llama (kNemoLlama), else gpt3 (kNemoGpt3), by the family
//   torchtitan   get_num_flop_per_token (kTorchtitan)
//   llm-foundry  the MPT flops_per_batch of collect_results.py (kLlmFoundry)
//   hf-trainer   none (the Trainer prints no FLOP rate; its step time is the measurement)
// and sets flop_convention, converted_step_time_s (s), converted_mfu (stepcast's model FLOPs per
// step / (that step x GPUs x peak), a fraction) and conversion (the formula used). `gpus` 0: the
// job's GPU count; `log_year` 0: unknown. Errors (the fields then stay unset): FailedPrecondition
// when the log states no TFLOP/s or MFU or the framework has no convention; InvalidArgument from
// the convention (e.g. a NeMo family without a vocabulary constant).
absl::Status ConvertFrameworkReported(const Job& job, int gpus, int log_year, v1::FrameworkReported* f);
// One line of what the log stated, for `stepcast report`'s output.
std::string FormatFrameworkReported(const v1::FrameworkReported& f);
// The framework's figure and its conversion in a few words, for `stepcast runs`
// ("megatron: 234.0 TFLOP/s/GPU; megatron-2024 -> 5.581 s, MFU 41.2%").
std::string FrameworkReportedBrief(const v1::FrameworkReported& f);

struct RunsArgs {
  ClientOptions client;
  v1::ListRunsRequest request;
  bool all_pages = false, json = false;
};
int Runs(const RunsArgs& args);

// `stepcast compare PREDICTION MEASURED... [--json]`: PREDICTION is a prediction JSON file
// (stepcast predict --json) or run:<id> on --server; MEASURED are probe reports or Kineto traces
// (one per rank, merged: the slowest rank sets each step), or nothing with run:<id> when the run
// carries a measured breakdown. Prints predicted vs measured step time, MFU and each term
// (plugin/compare.h CompareTerms), the largest gap first; --json: stepcast.v1.Comparison.
// html_path: also write the comparison as a page (cli/html.h ComparisonPage); `layout` (may be
// null): the predicted job's parallelism, for the page's step timeline per pipeline stage. With
// traces and html_path, the page also draws the first file's median-length step, one lane per
// GPU stream (trace::StepTimelineOf, html::LayOutStreamLanes).
int Compare(const std::string& prediction, const std::vector<std::string>& measured, const ClientOptions& client,
            bool json = false, const std::string& html_path = "", const Parallelism* layout = nullptr);

// What a client sends for a job file or a training command, as `stepcast preflight` builds it:
// the job file read (YAML/JSON/text proto) with a local Hugging Face config.json inlined as
// model.shape (relative to the file's directory), or a Megatron-LM / torchtitan command
// imported and finalized with gpus/hardware/gpus_per_node. `ignored`: the command's arguments
// that are not modelled. `stepcast import` prints `spec` as JSON (the Python client calls it).
// Errors: InvalidArgument / NotFound naming the file, field or flag.
struct ImportedSpec {
  v1::JobSpec spec;
  std::vector<std::string> ignored;
};
absl::StatusOr<ImportedSpec> ImportJobSpec(const std::string& job_path, const std::vector<std::string>& command,
                                           int64_t gpus, const std::string& hardware, int64_t gpus_per_node);

// Reads probe reports (one per rank; several processes of one rank: the one with steps) and
// merges them.
absl::StatusOr<v1::ProbeReport> ReadProbeReports(const std::vector<std::string>& paths);

// A measurement from files: probe reports, or Kineto traces (plugin/trace/kineto_trace.h), told
// apart by content. The merged report's median step is the measurement.
struct Measured {
  v1::ProbeReport merged;
  std::string source;  // "probe" or "trace"
};
// `timeline` (may be null): with traces, filled with the first file's median-length step
// (trace::AnalyzeKinetoTraces); untouched with probe reports (they keep no per-record times).
absl::StatusOr<Measured> ReadMeasured(const std::vector<std::string>& paths, trace::StepTimeline* timeline = nullptr);

// `stepcast trace TRACE... [--json] [--no-markers] [--warmup N]`: per-step breakdown of Kineto /
// torch.profiler traces (one per rank); --json prints stepcast.v1.TraceReport.
struct TraceArgs {
  std::vector<std::string> paths;
  bool json = false, no_markers = false;
  int warmup_steps = 0;
  bool annotations = false, contention = false;  // --annotations, --contention
  std::string contention_key = "shape";         // --contention-key shape|position
  double min_overlap = 0.9;                     // --min-overlap
  double min_kernel_us = 20;                    // --min-kernel-us
  double max_decompression_ratio = 100;         // --max-decompression-ratio
};
int Trace(const TraceArgs& args);
std::string FormatTraceReport(const v1::TraceReport& r);

// `stepcast profile list|get|put`.
int Profile(const ClientOptions& client, const std::string& action, const std::string& name,
            const std::string& file, int version);

}  // namespace stepcast::cli
