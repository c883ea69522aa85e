// stepcast: predict what an LLM training job will do before it runs.
//
//   stepcast predict JOB.yaml [--json] [--profile FILE] [--mfu X] [--html FILE]
//   stepcast search JOB.yaml [--objective time|cost|mfu|tokens|time_to_train|time-p90] [--top N] [--gpus A..B] [--json]
//   stepcast plan JOB.yaml --target-tokens-per-s 2e5 --hardware h100-sxm,h200,l4
//   stepcast plan --model llama3-70b --seq-length 8192 --global-batch-size 1024 --budget-usd 2e6 --days 30 --hardware h100-sxm
//   stepcast plan --seed-formulas --target-tokens-per-s 2e5 --hardware h100-sxm,h200,l4   (seed 000 / 004 formulas)
//   stepcast catalog
//   stepcast validate published_runs.csv [--json] [--html FILE] [--informed F] [--memory-runs F] [--write-intervals F]
//   stepcast serve [--listen ADDR] [--store FILE|postgresql://...] [--profiles-dir DIR] [--token-file F] [--tls-cert C --tls-key K]
//   stepcast store migrate --from sqlite:PATH --to postgresql://...
//   stepcast preflight JOB --server ADDR [policy flags]   exit 0 PASS, 3 WARN, 4 FAIL, 1 error, 2 invalid
//   stepcast report --server ADDR (--prediction-id ID | --job JOB) (--step-time-s S | --tokens-per-s T | --log FILE)
//   stepcast runs --server ADDR [--cluster C] [--model M] [--label k=v]
//   stepcast profile list|get|put [NAME] [FILE] --server ADDR
//   stepcast trace TRACE... [--json] [--no-markers] [--annotations] [--contention]
//                                                        Kineto / torch.profiler traces, per step
//   stepcast compare PREDICTION [PROBE_REPORTS... | TRACES...] [--json] [--html FILE [--job JOB]]
//
// Exit codes: 0 success; 1 an internal, I/O or connection error; 2 invalid input (the message
// names the field and the reason); preflight adds 3 (WARN) and 4 (FAIL).
#include <fstream>
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "cli/cli.h"
#include "cli/html.h"
#include "cli/search.h"
#include "cli/store_cmds.h"
#include "proto/catalog.h"
#include "proto/codec.h"
#include "proto/launch_args.h"
#include "proto/measured_run.h"

// Each subcommand has a struct of what its flags fill (`cmd`: the CLI11 subcommand, true once
// parsed), an Add*Command that registers its flags on the app, and a Run* that executes it after
// the parse. main splits off a training command, registers every subcommand, parses, and
// dispatches to the one given.
namespace stepcast {
namespace {

// A count flag (--gpus, --gpus-per-node): a whole number >= 1, refused naming the flag otherwise
// (0 or a negative count fell back to the launcher's in silence; CLI::PositiveNumber prints its
// range as 0 to 1.8e308).
CLI::Validator PositiveCount() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t v = 0;
        if (!absl::SimpleAtoi(text, &v) || v < 1) return "must be a whole number >= 1, got '" + text + "'";
        return "";
      },
      "N>=1");
}

int Fail(const absl::Status& s) { return cli::FailWithStatus(s); }

// Removes everything after "--" from argv (argc shortened) and returns it: a training command
// (Megatron-LM or torchtitan) to import.
std::vector<std::string> SplitTrainingCommand(int& argc, char** argv) {
  std::vector<std::string> training_cmd;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < argc; ++j) training_cmd.push_back(argv[j]);
      argc = i;
      break;
    }
  }
  return training_cmd;
}

// Flags of the commands that call the service (preflight, report, runs, compare, profile).
struct ClientFlags {
  ClientOptions client;
  std::string token_file;
};

void AddClientFlags(CLI::App* cmd, ClientFlags& f) {
  cmd->add_option("--server", f.client.address, "service address")->capture_default_str();
  cmd->add_option("--token-file", f.token_file, "bearer token for write RPCs");
  cmd->add_option("--tls-ca", f.client.tls_ca_file, "PEM roots: use TLS");
  cmd->add_option("--deadline-ms", f.client.deadline_ms, "per-call deadline")->capture_default_str();
}

// --- predict ---
struct PredictCommand {
  CLI::App* cmd = nullptr;
  std::string job_path, profile_path;
  bool json = false;
  std::optional<double> mfu;
  int64_t gpus = 0, gpus_per_node = 0;  // with -- TRAINING COMMAND
  std::string hardware, framework;      // with -- TRAINING COMMAND
  std::string html_path;
};

void AddPredictCommand(CLI::App& app, PredictCommand& c) {
  c.cmd = app.add_subcommand("predict", "predict step time, bottleneck, memory, MFU and cost of a job");
  CLI::App* predict = c.cmd;
  predict->add_option("job", c.job_path, "job file (.yaml, .json, .textproto); or -- TRAINING COMMAND");
  predict->add_option("--gpus", c.gpus, "GPU count, with -- TRAINING COMMAND")->check(PositiveCount());
  predict->add_option("--hardware", c.hardware, "hardware preset, with -- TRAINING COMMAND");
  predict->add_option("--gpus-per-node", c.gpus_per_node, "GPUs per node, with -- TRAINING COMMAND")->check(PositiveCount());
  predict->add_option("--framework", c.framework,
                      "framework preset, with -- TRAINING COMMAND (default: the launcher's: torchtitan, nemo, "
                      "megatron-bridge, else megatron-core)");
  predict->add_flag("--json", c.json, "print the prediction as JSON (stepcast.v1.Prediction)");
  predict->add_option("--profile", c.profile_path, "rate profile file (from stepcast-calibrate)");
  predict->add_option("--mfu", c.mfu, "quick estimate at an assumed MFU in (0, 1] (seeds 001, 004)");
  predict->add_option("--html", c.html_path, "also write the prediction as a static HTML page (breakdown, memory)");
}

// The job of `predict`: the job file, or the training command imported and finalized with
// --gpus/--hardware/--gpus-per-node (its unmodelled arguments printed and kept in `ignored_args`).
absl::StatusOr<Job> LoadPredictJob(const PredictCommand& c, const std::vector<std::string>& training_cmd,
                                   const Catalog& catalog, const RateProfile* profile,
                                   std::vector<std::string>& ignored_args) {
  if (training_cmd.empty()) {
    if (c.job_path.empty()) return absl::InvalidArgumentError("predict: give a job file or -- TRAINING COMMAND");
    return LoadJob(c.job_path, catalog, profile);
  }
  if (!c.job_path.empty()) return absl::InvalidArgumentError("give a job file or -- TRAINING COMMAND, not both");
  absl::StatusOr<ImportedJob> imported = JobFromCommand(training_cmd, ".");
  if (!imported.ok()) return imported.status();
  for (const auto& a : imported->ignored) std::cerr << "stepcast: ignored (not modelled): " << a << "\n";
  ignored_args = imported->ignored;
  absl::StatusOr<v1::JobSpec> spec = imported->Finalize(c.gpus, c.hardware, c.gpus_per_node);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.status().message(), " (pass --gpus and --hardware)"));
  }
  if (!c.framework.empty()) spec->mutable_framework()->set_preset(c.framework);
  absl::StatusOr<Job> job = JobFromSpec(*spec, catalog, ".", profile);
  if (!job.ok()) job = InLauncherTerms(imported->source, job.status());
  if (job.ok()) job->name = imported->source + " command";
  return job;
}

int RunPredict(const PredictCommand& c, const std::vector<std::string>& training_cmd, const Catalog& catalog) {
  std::optional<RateProfile> profile;
  if (!c.profile_path.empty()) {
    absl::StatusOr<RateProfile> p = LoadRateProfile(c.profile_path);
    if (!p.ok()) return Fail(p.status());
    profile = *std::move(p);
  }
  std::vector<std::string> ignored_args;  // a training command's unmodelled arguments
  absl::StatusOr<Job> job = LoadPredictJob(c, training_cmd, catalog, profile ? &*profile : nullptr, ignored_args);
  if (!job.ok()) return Fail(job.status());
  absl::StatusOr<Prediction> p = c.mfu ? PredictAtMfu(*job, *c.mfu) : Predict(*job);
  if (!p.ok()) return Fail(p.status());
  if (c.json) {
    // --json carries the unmodelled arguments too, as warnings (issue 10: never dropped).
    v1::Prediction out = PredictionToProto(*p);
    for (const auto& a : ignored_args) out.add_warnings(absl::StrCat("ignored (not modelled): ", a));
    std::cout << ToJson(out);
  } else {
    std::cout << cli::FormatReport(*job, *p);
  }
  if (!c.html_path.empty()) {
    if (absl::Status s = html::WritePage(c.html_path, html::PredictionPage(PredictionToProto(*p), &*job)); !s.ok()) {
      return Fail(s);
    }
  }
  return 0;
}

// --- search (cli/search.h) ---
struct SearchCommand {
  CLI::App* cmd = nullptr;
  cli::SearchArgs args;
};

void AddSearchCommand(CLI::App& app, SearchCommand& c) {
  c.cmd = app.add_subcommand("search", "the fastest (or cheapest) layouts of a job that fit in memory");
  CLI::App* search = c.cmd;
  cli::SearchArgs& sa = c.args;
  search->add_option("job", sa.job_path, "job file (its model, hardware, framework, batch; its layout is compared)")
      ->required();
  search->add_option("--objective", sa.objective, "time | tokens | cost | mfu | time_to_train | time-p90 (the 80% interval's pessimistic end)")->capture_default_str();
  search->add_option("--top", sa.top, "layouts listed")->capture_default_str();
  search->add_option("--gpus", sa.gpus, "GPU count N or range A..B (whole nodes); default: the job's");
  search->add_option("--budget-usd", sa.budget_usd, "time_to_train: only runs costing at most this");
  search->add_flag("--json", sa.json, "print a stepcast.v1.SearchResult as JSON");
  search->add_option("--html", sa.html_path, "also write a static HTML page (PP x TP heat map, top layouts)");
  search->add_option("--profile", sa.profile_path, "rate profile file (from stepcast-calibrate)");
  search->add_option("--threads", sa.threads, "worker threads (default: one per core)");
  search->add_option("--time-limit", sa.time_limit_s, "stop after this many seconds with the best found so far");
  search->add_option("--max-tp", sa.max_tp, "largest TP (default: GPUs per node)");
  search->add_option("--max-pp", sa.max_pp, "largest PP");
  search->add_option("--max-cp", sa.max_cp, "largest CP");
  search->add_option("--max-ep", sa.max_ep, "largest EP");
  search->add_option("--max-micro-batch", sa.max_micro_batch_size, "largest micro-batch size");
  search->add_option("--sharding", sa.shardings, "shardings searched: none,zero1,zero2,zero3 (default all)")->delimiter(',');
  search->add_flag("--no-hsdp", sa.no_hsdp, "no HSDP replicas");
  search->add_flag("--keep-sp", sa.keep_sequence_parallel, "keep the job's sequence parallelism");
  search->add_flag("--even-pp", sa.even_pipeline_only, "only PP that divides the layers");
  search->add_flag("--etp", sa.etp, "also search expert TP (MoE)");
  search->add_flag("--all-schedules", sa.all_schedules, "also GPipe, zero-bubble and DualPipe");
  search->add_flag("--overlap-off", sa.overlap_off, "also each overlap off");
  search->add_flag("--fp8", sa.fp8, "also fp8 GEMMs (hardware with an fp8 peak)");
  search->add_flag("--quiet", sa.quiet, "no progress line");
}

// --- plan ---
struct PlanCommand {
  CLI::App* cmd = nullptr;
  cli::PlanOptions options;
  std::string hardware_list;  // comma-separated, split into options.hardware by RunPlan
};

void AddPlanCommand(CLI::App& app, PlanCommand& c) {
  c.cmd = app.add_subcommand("plan", "size a cluster for a throughput target or a budget");
  CLI::App* plan = c.cmd;
  cli::PlanOptions& po = c.options;
  plan->add_option("job", po.job_path, "job file (model, framework, batch); or --model with --seq-length and --global-batch-size");
  plan->add_option("--hardware", c.hardware_list, "comma-separated hardware presets")->required();
  plan->add_option("--seq-length", po.seq_length, "sequence length, with --model");
  plan->add_option("--global-batch-size", po.global_batch_size, "global batch in sequences, with --model");
  plan->add_option("--framework", po.framework, "framework preset, with --model (default megatron-core)");
  plan->add_option("--max-gpus", po.max_gpus, "largest GPU count tried for a throughput target")->capture_default_str();
  plan->add_flag("--seed-formulas", po.seed_formulas,
                 "seed 000's per-token formulas (datasheet peak, no memory) and seed 004's budget arithmetic "
                 "instead of the model and the layout search");
  plan->add_option("--model", po.model, "model preset (with --seed-formulas and no --model: seed 000's 70B, 80 layers, d 8192)");
  plan->add_option("--params", po.n_params, "parameters when no --model (--seed-formulas)");
  plan->add_option("--layers", po.layers, "layers when no --model (--seed-formulas)");
  plan->add_option("--d-model", po.d_model, "hidden size when no --model (--seed-formulas)");
  plan->add_option("--target-tokens-per-s", po.target_tokens_per_s, "throughput target, tokens/s");
  plan->add_option("--dp", po.dp_world_size, "data-parallel degree for the DP all-reduce term (--seed-formulas)");
  plan->add_option("--utilization", po.utilization, "efficiency applied to every bound (--seed-formulas)");
  plan->add_option("--recompute-mult", po.recompute_mult, "FLOP multiplier of recomputation (--seed-formulas)");
  plan->add_option("--alpha-opt", po.alpha_opt_bytes_per_param, "optimizer HBM bytes per parameter per step (--seed-formulas)");
  plan->add_option("--c-act", po.c_act, "activation traffic coefficient (--seed-formulas)");
  plan->add_option("--global-tokens", po.global_tokens_per_step, "tokens per step (--seed-formulas)");
  plan->add_option("--budget-usd", po.budget_usd, "budget, USD");
  plan->add_option("--days", po.days, "deadline in days (with --budget-usd)");
  plan->add_option("--tokens", po.dataset_tokens, "training tokens (default 20 N)");
  plan->add_option("--price", po.price_override, "$/GPU-hour for every hardware");
  plan->add_option("--time-limit", po.time_limit_s, "stop the plan's searches after this many seconds (best so far)");
}

int RunPlan(PlanCommand& c, const Catalog& catalog) {
  const std::string& hw_list = c.hardware_list;
  for (size_t start = 0; start <= hw_list.size();) {
    size_t comma = hw_list.find(',', start);
    if (comma == std::string::npos) comma = hw_list.size();
    if (comma > start) c.options.hardware.push_back(hw_list.substr(start, comma - start));
    start = comma + 1;
  }
  absl::StatusOr<std::string> out = cli::Plan(c.options, catalog);
  if (!out.ok()) return Fail(out.status());
  std::cout << *out;
  return 0;
}

// --- catalog ---
struct CatalogCommand {
  CLI::App* cmd = nullptr;
  bool verbose = false;
};

void AddCatalogCommand(CLI::App& app, CatalogCommand& c) {
  c.cmd = app.add_subcommand("catalog", "list hardware and model presets with their sources");
  c.cmd->add_flag("-v,--verbose", c.verbose, "print every source line");
}

int RunCatalog(const CatalogCommand& c, const Catalog& catalog) {
  std::cout << absl::StrFormat("%-12s %-18s %10s %10s %9s %10s %9s %8s\n", "preset", "hardware", "bf16 TF/s",
                               "GEMM TF/s", "HBM GiB", "HBM TB/s", "usable", "$/GPU-h");
  for (const auto& [key, h] : catalog.hardware()) {
    double gemm = h.reference_profile.GemmRate(DType::kBF16, 8192, 8192, 8192).flops_per_s;
    std::cout << absl::StrFormat("%-12s %-18s %10.0f %10.0f %9.1f %10.2f %9.2f %8.2f\n", key, h.name,
                                 h.peak_bf16_flops_per_s / 1e12, gemm / 1e12, h.hbm_capacity_bytes / (1ull << 30),
                                 h.hbm_bandwidth_bytes_per_s / 1e12,
                                 h.reference_profile.hbm_bandwidth_bytes_per_s / 1e12, h.price_per_gpu_hour_usd);
    if (c.verbose) {
      for (const auto& s : h.sources) std::cout << "    source: " << s << "\n";
      for (const auto& g : h.reference_profile.gemm) {
        std::cout << "    gemm " << DTypeName(g.dtype) << ": " << g.source << "\n";
      }
      std::cout << "    hbm: " << h.reference_profile.hbm_source << "\n";
    }
  }
  // active: the input table included (most cards); -input: without it (the gpt-oss card).
  std::cout << absl::StrFormat("\n%-22s %-26s %10s %10s %10s  %s\n", "preset", "model", "params", "active",
                               "-input", "source");
  for (const auto& [key, m] : catalog.models()) {
    const ParameterCounts counts = CountParameters(m);
    std::cout << absl::StrFormat("%-22s %-26s %9.2fB %9.2fB %9.2fB  %s\n", key, m.name, counts.total / 1e9,
                                 counts.active / 1e9, counts.active_without_input_embedding / 1e9,
                                 c.verbose ? m.source : m.source.substr(0, 60));
  }
  return 0;
}

// --- validate ---
struct ValidateCommand {
  CLI::App* cmd = nullptr;
  std::string csv_path, html_path, informed_path, explain_row, memory_runs_path, write_intervals_path;
  bool json = false;
};

void AddValidateCommand(CLI::App& app, ValidateCommand& c) {
  c.cmd = app.add_subcommand("validate", "compare predictions with published measured runs");
  CLI::App* validate = c.cmd;
  validate->add_option("csv", c.csv_path, "CSV with the columns of published_runs.csv")->required();
  validate->add_flag("--json", c.json, "print rows and summary as JSON");
  validate->add_option("--html", c.html_path, "also write a static HTML page (predicted vs measured, per-source errors)");
  validate->add_option("--explain", c.explain_row, "print the full prediction of one row (its row_id); with --json, its job spec and prediction as JSON");
  validate->add_option("--informed", c.informed_path,
                       "YAML: source id -> model choices its rows informed (leave-one-source-out; "
                       "docs/validation_informed.yaml)");
  validate->add_option("--memory-runs", c.memory_runs_path,
                       "YAML of measured peak-memory runs for the memory interval "
                       "(tests/data/validation/memory_runs.yaml)");
  validate->add_option("--write-intervals", c.write_intervals_path,
                       "write the interval table (every row's leave-one-source-out residual, the memory runs' "
                       "residuals) to FILE: presets/intervals.yaml");
}

// --write-intervals: the interval table as presets/intervals.yaml, naming the command that wrote it.
absl::Status WriteIntervalTable(const ValidateCommand& c, const IntervalTable& table) {
  // The command that regenerates the file, as it should be typed from the repository root.
  std::string command = absl::StrCat("build/bin/stepcast validate ", c.csv_path);
  if (!c.informed_path.empty()) absl::StrAppend(&command, " --informed ", c.informed_path);
  if (!c.memory_runs_path.empty()) absl::StrAppend(&command, " --memory-runs ", c.memory_runs_path);
  absl::StrAppend(&command, " --write-intervals ", c.write_intervals_path);
  std::ofstream file(c.write_intervals_path, std::ios::binary | std::ios::trunc);
  file << cli::IntervalTableFile(table, command);
  file.close();
  if (!file) return absl::InternalError(absl::StrCat(c.write_intervals_path, ": cannot write"));
  std::cerr << "stepcast: wrote " << c.write_intervals_path << " (" << table.step_runs().size()
            << " step-time residuals, " << table.memory_runs().size() << " memory residuals)\n";
  return absl::OkStatus();
}

int RunValidate(const ValidateCommand& c, const Catalog& catalog) {
  if (!c.explain_row.empty()) {
    absl::StatusOr<std::string> r = cli::ExplainRow(c.csv_path, catalog, c.explain_row, c.json);
    if (!r.ok()) return Fail(r.status());
    std::cout << *r;
    return 0;
  }
  std::shared_ptr<const IntervalTable> table;
  absl::StatusOr<v1::ValidationReport> r =
      cli::Validate(c.csv_path, catalog, c.informed_path, c.memory_runs_path, &table);
  if (!r.ok()) return Fail(r.status());
  if (!c.write_intervals_path.empty()) {
    if (absl::Status s = WriteIntervalTable(c, *table); !s.ok()) return Fail(s);
  }
  std::cout << (c.json ? ToJson(*r) : cli::FormatValidation(*r));
  if (!c.html_path.empty()) {
    const std::string name = c.csv_path.substr(c.csv_path.find_last_of('/') + 1);
    if (absl::Status s = html::WritePage(c.html_path, html::ValidationPage(*r, name)); !s.ok()) return Fail(s);
  }
  return 0;
}

// --- serve ---
struct ServeCommand {
  CLI::App* cmd = nullptr;
  ServeOptions options;
  std::string port_file;
  bool quiet = false;
};

void AddServeCommand(CLI::App& app, ServeCommand& c) {
  c.cmd = app.add_subcommand("serve", "run the gRPC service for launchers");
  CLI::App* serve = c.cmd;
  ServeOptions& so = c.options;
  serve->add_option("--listen", so.listen_address, "address:port (port 0 picks a free one)")->capture_default_str();
  serve->add_option("--store,--db", so.db_path,
                    "store of predictions, runs and profiles: a SQLite file (PATH or sqlite:PATH), or "
                    "postgresql://... shared by several replicas")
      ->capture_default_str();
  serve->add_option("--store-connections", so.store_connections, "PostgreSQL store: connection pool size")
      ->capture_default_str();
  serve->add_option("--profiles-dir", so.profiles_dir, "directory of rate profiles served by file stem");
  serve->add_option("--token-file", so.token_file, "bearer token that ReportRun and PutProfile require");
  serve->add_option("--tls-cert", so.tls_cert_file, "PEM certificate (with --tls-key)");
  serve->add_option("--tls-key", so.tls_key_file, "PEM private key (with --tls-cert)");
  serve->add_option("--max-message-bytes", so.max_message_bytes, "largest request or response")->capture_default_str();
  serve->add_option("--port-file", c.port_file, "write the listening port here once serving");
  serve->add_flag("--quiet", c.quiet, "no per-RPC log lines");
  serve->add_option("--report-token-file", so.report_token_file,
                    "token that allows ReportRun only (the probe's, in job environments); --token-file is admin");
  serve->add_flag("--protect-reads", so.protect_reads, "GetRun/ListRuns/GetProfile/ListProfiles need a token");
  serve->add_option("--max-job-bytes", so.max_job_bytes, "largest job in a request")->capture_default_str();
  serve->add_option("--prediction-ttl-s", so.prediction_ttl_s, "how long Preflight predictions are kept")
      ->capture_default_str();
  serve->add_option("--max-stored-predictions", so.max_stored_predictions, "row cap on stored predictions")
      ->capture_default_str();
  serve->add_option("--max-stored-prediction-bytes", so.max_stored_prediction_bytes,
                    "byte cap on stored predictions (oldest pruned first)")
      ->capture_default_str();
  serve->add_option("--preflight-store-per-s", so.preflight_store_per_s,
                    "stored Preflight predictions per second per peer (verdicts beyond it are not stored)")
      ->capture_default_str();
  serve->add_option("--handshake-timeout-ms", so.handshake_timeout_ms, "close connections that do not handshake")
      ->capture_default_str();
  serve->add_option("--watchdog-ms", so.watchdog_period_ms,
                    "listener check period; rebuilds a listener that stopped accepting (0: off)")
      ->capture_default_str();
}

int RunServe(ServeCommand& c, Catalog catalog) {
  if (c.quiet) c.options.log = nullptr;
  return cli::Serve(c.options, std::move(catalog), c.port_file);
}

// --- preflight ---
struct PreflightCommand {
  CLI::App* cmd = nullptr;
  cli::PreflightArgs args;
  std::string job;
  double min_mfu = 0, max_memory_fraction = 0, max_cost_per_run_usd = 0, max_cost_per_hour_usd = 0,
         max_step_time_s = 0;
  std::vector<std::string> warn_on;
  bool warn_only = false;
  std::string profile;
  int profile_version = 0;
};

void AddPreflightCommand(CLI::App& app, PreflightCommand& c, ClientFlags& client) {
  c.cmd = app.add_subcommand("preflight", "ask the service for a verdict on a job before launching it");
  CLI::App* preflight = c.cmd;
  preflight->add_option("job", c.job, "job file; or -- TRAINING COMMAND");
  preflight->add_option("--gpus", c.args.gpus, "GPU count, with -- TRAINING COMMAND")->check(PositiveCount());
  preflight->add_option("--hardware", c.args.hardware, "hardware preset, with -- TRAINING COMMAND");
  preflight->add_option("--gpus-per-node", c.args.gpus_per_node, "GPUs per node, with -- TRAINING COMMAND")->check(PositiveCount());
  AddClientFlags(preflight, client);
  preflight->add_option("--min-mfu", c.min_mfu, "fail below this predicted MFU (0-1)");
  preflight->add_option("--max-memory-fraction", c.max_memory_fraction, "fail above this fraction of GPU memory (0-1)");
  preflight->add_option("--max-cost-per-run", c.max_cost_per_run_usd, "fail above this run cost, USD");
  preflight->add_option("--max-cost-per-hour", c.max_cost_per_hour_usd, "fail above this hourly cost, USD");
  preflight->add_option("--max-step-time", c.max_step_time_s, "fail above this step time, s");
  preflight->add_option("--warn-on", c.warn_on, "bottlenecks that warn: compute, memory_bandwidth, "
                                                "network_intra_node, network_inter_node, pipeline_bubble")
      ->delimiter(',');
  preflight->add_flag("--warn-only", c.warn_only, "breached limits warn instead of failing");
  preflight->add_option("--profile", c.profile, "calibration profile name on the server");
  preflight->add_option("--profile-version", c.profile_version, "profile version (default latest)");
  preflight->add_flag("--json", c.args.json, "print the PreflightResponse as JSON");
}

int RunPreflight(PreflightCommand& c, const ClientOptions& client, const std::vector<std::string>& training_cmd) {
  cli::PreflightArgs& pa = c.args;
  pa.client = client;
  pa.policy.set_min_mfu(c.min_mfu);
  pa.policy.set_max_memory_fraction(c.max_memory_fraction);
  pa.policy.set_max_cost_per_run_usd(c.max_cost_per_run_usd);
  pa.policy.set_max_cost_per_hour_usd(c.max_cost_per_hour_usd);
  pa.policy.set_max_step_time_s(c.max_step_time_s);
  pa.policy.set_limits_warn_only(c.warn_only);
  for (const auto& w : c.warn_on) {
    v1::BottleneckKind k;
    if (!v1::BottleneckKind_Parse("BOTTLENECK_KIND_" + absl::AsciiStrToUpper(w), &k)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--warn-on: unknown bottleneck '", w, "'")));
    }
    pa.policy.add_warn_on_bottlenecks(k);
  }
  pa.profile.set_name(c.profile);
  pa.profile.set_version(c.profile_version);
  pa.command = training_cmd;
  return cli::Preflight(c.job, pa);
}

// --- report ---
struct ReportCommand {
  CLI::App* cmd = nullptr;
  cli::ReportArgs args;
  std::string profile;
};

void AddReportCommand(CLI::App& app, ReportCommand& c, ClientFlags& client) {
  c.cmd = app.add_subcommand("report", "send what a run measured");
  CLI::App* report = c.cmd;
  cli::ReportArgs& ra = c.args;
  AddClientFlags(report, client);
  report->add_option("--prediction-id", ra.prediction_id, "id from preflight");
  report->add_option("--job", ra.job_path, "job file, when there is no prediction id");
  report->add_option("--profile", c.profile, "profile name for --job");
  report->add_option("--step-time-s", ra.step_time_s, "measured step time");
  report->add_option("--tokens-per-s", ra.tokens_per_s, "measured throughput (instead of step time)");
  report->add_option("--gpus", ra.gpus, "GPU count (default: the job's)")->check(PositiveCount());
  report->add_option("--label", ra.labels, "key=value (repeatable)");
  report->add_option("--start", ra.start_time, "run start, RFC 3339");
  report->add_option("--end", ra.end_time, "run end, RFC 3339");
  report->add_option("--cluster", ra.cluster, "cluster name (default: the job's)");
  report->add_option("--measured-breakdown", ra.measured_breakdown_path, "StepBreakdown file from the run probe");
  report->add_flag("--json", ra.json, "print the stored run as JSON");
  report->add_option("--probe", ra.probe_reports, "probe reports (one per rank): the measured step and categories");
  report->add_option("--trace", ra.traces, "Kineto / torch.profiler traces (one per rank), instead of --probe");
  report->add_option("--log", ra.log_path,
                     "training log (Megatron-LM/-Bridge, NeMo, torchtitan): its median step time after the warm-up "
                     "record, and its own TFLOP/s and MFU; instead of --step-time-s/--tokens-per-s");
  report->add_flag("--dry-run", ra.dry_run, "print the ReportRun request as JSON and send nothing");
  report->add_option("--request-id", ra.request_id,
                     "idempotency key: a retry with the same id returns the stored run (default: random)");
}

int RunReport(ReportCommand& c, const ClientOptions& client) {
  cli::ReportArgs& ra = c.args;
  // Impossible measurements are refused before anything is sent (proto/measured_run.h).
  if (absl::Status s = ValidateMeasuredRun(ra.step_time_s, ra.tokens_per_s); !s.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "report: ", absl::StrReplaceAll(s.message(), {{"step_time_s:", "--step-time-s:"},
                                                      {"tokens_per_s:", "--tokens-per-s:"}}))));
  }
  ra.client = client;
  ra.profile.set_name(c.profile);
  return cli::Report(ra);
}

// --- runs ---
struct RunsCommand {
  CLI::App* cmd = nullptr;
  cli::RunsArgs args;
  std::string cluster, model, label, page_token, started_after, started_before;
  int page_size = 0;
};

void AddRunsCommand(CLI::App& app, RunsCommand& c, ClientFlags& client) {
  c.cmd = app.add_subcommand("runs", "list reported runs, predicted vs measured");
  CLI::App* runs = c.cmd;
  AddClientFlags(runs, client);
  runs->add_option("--cluster", c.cluster, "only this cluster");
  runs->add_option("--model", c.model, "only this model");
  runs->add_option("--label", c.label, "only runs with key=value");
  runs->add_option("--started-after", c.started_after, "RFC 3339");
  runs->add_option("--started-before", c.started_before, "RFC 3339");
  runs->add_option("--page-size", c.page_size, "runs per page (max 1000)");
  runs->add_option("--page-token", c.page_token, "continue a listing");
  runs->add_flag("--all", c.args.all_pages, "follow every page");
  runs->add_flag("--json", c.args.json, "print as JSON");
}

int RunRuns(RunsCommand& c, const ClientOptions& client) {
  cli::RunsArgs& rsa = c.args;
  rsa.client = client;
  rsa.request.set_cluster(c.cluster);
  rsa.request.set_model(c.model);
  rsa.request.set_label(c.label);
  rsa.request.set_page_size(c.page_size);
  rsa.request.set_page_token(c.page_token);
  for (auto [flag, value, field] :
       {std::tuple{"--started-after", c.started_after, rsa.request.mutable_min_start_time()},
        std::tuple{"--started-before", c.started_before, rsa.request.mutable_max_start_time()}}) {
    if (value.empty()) continue;
    if (!google::protobuf::util::TimeUtil::FromString(value, field)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(flag, ": '", value, "' is not an RFC 3339 time")));
    }
  }
  if (c.started_after.empty()) rsa.request.clear_min_start_time();
  if (c.started_before.empty()) rsa.request.clear_max_start_time();
  return cli::Runs(rsa);
}

// --- compare ---
struct CompareCommand {
  CLI::App* cmd = nullptr;
  std::string prediction;
  std::vector<std::string> measured;
  bool json = false;
  std::string html_path;
  std::string job_path;  // the predicted job, for the page's step timeline
};

void AddCompareCommand(CLI::App& app, CompareCommand& c, ClientFlags& client) {
  c.cmd = app.add_subcommand("compare", "predicted vs measured per category (after a run)");
  CLI::App* compare = c.cmd;
  compare->add_option("prediction", c.prediction, "prediction JSON (stepcast predict --json) or run:<id>")->required();
  compare->add_option("measured", c.measured, "probe reports or Kineto traces, one per rank");
  compare->add_flag("--json", c.json, "print the comparison as JSON (stepcast.v1.Comparison)");
  compare->add_option("--html", c.html_path, "also write a static HTML page (each term predicted vs measured; with traces, one step's GPU streams)");
  compare->add_option("--job", c.job_path, "the predicted job file: the page draws its step per pipeline stage");
  AddClientFlags(compare, client);
}

// --- trace ---
struct TraceCommand {
  CLI::App* cmd = nullptr;
  cli::TraceArgs args;
};

void AddTraceCommand(CLI::App& app, TraceCommand& c) {
  c.cmd = app.add_subcommand("trace", "per-step breakdown of Kineto / torch.profiler traces (after a run)");
  CLI::App* trace_cmd = c.cmd;
  cli::TraceArgs& ta = c.args;
  trace_cmd->add_option("traces", ta.paths, "trace files (.json or .json.gz), one per rank")->required();
  trace_cmd->add_flag("--json", ta.json, "print as JSON (stepcast.v1.TraceReport)");
  trace_cmd->add_flag("--no-markers", ta.no_markers, "ignore ProfilerStep / step annotations: steps from the kernel period");
  trace_cmd->add_option("--warmup", ta.warmup_steps, "first steps left out")->capture_default_str();
  trace_cmd->add_flag("--annotations", ta.annotations, "GPU time per user annotation (module), per instance");
  trace_cmd->add_flag("--contention", ta.contention, "kernels alone vs beside communication kernels");
  trace_cmd->add_option("--contention-key", ta.contention_key, "same kernel = shape (name, grid, block) or position")
      ->capture_default_str();
  trace_cmd->add_option("--min-overlap", ta.min_overlap, "share of a kernel under communication to count as overlapped")
      ->capture_default_str();
  trace_cmd->add_option("--min-kernel-us", ta.min_kernel_us, "contention: kernels shorter alone are not measured")
      ->capture_default_str();
  trace_cmd->add_option("--max-decompression-ratio", ta.max_decompression_ratio,
                        "refuse a .gz that inflates more than this (past 64 MiB)")->capture_default_str();
}

// --- import (hidden): the JobSpec a client sends, as JSON; the Python client's importer ---
struct ImportCommand {
  CLI::App* cmd = nullptr;
  std::string job, hardware;
  int64_t gpus = 0, gpus_per_node = 0;
};

void AddImportCommand(CLI::App& app, ImportCommand& c) {
  c.cmd = app.add_subcommand("import", "print the JobSpec of a job file or training command as JSON");
  CLI::App* import_cmd = c.cmd;
  import_cmd->add_option("job", c.job, "job file (a local hf_config is inlined); or -- TRAINING COMMAND");
  import_cmd->add_option("--gpus", c.gpus, "GPU count, with -- TRAINING COMMAND")->check(PositiveCount());
  import_cmd->add_option("--hardware", c.hardware, "hardware preset, with -- TRAINING COMMAND");
  import_cmd->add_option("--gpus-per-node", c.gpus_per_node, "GPUs per node, with -- TRAINING COMMAND")->check(PositiveCount());
}

int RunImport(const ImportCommand& c, const std::vector<std::string>& training_cmd) {
  absl::StatusOr<cli::ImportedSpec> imported =
      cli::ImportJobSpec(c.job, training_cmd, c.gpus, c.hardware, c.gpus_per_node);
  if (!imported.ok()) return Fail(imported.status());
  for (const auto& a : imported->ignored) std::cerr << "stepcast: ignored (not modelled): " << a << "\n";
  // Only the fields that are set (no UNSPECIFIED enums), so the JSON reads back as a job file.
  absl::StatusOr<std::string> out = JobSpecToJson(imported->spec);
  if (!out.ok()) return Fail(out.status());
  std::cout << *out;
  return 0;
}

// --- profile ---
struct ProfileCommand {
  CLI::App* cmd = nullptr;
  std::string action, name, file;
  int version = 0;
};

void AddProfileCommand(CLI::App& app, ProfileCommand& c, ClientFlags& client) {
  c.cmd = app.add_subcommand("profile", "list, get or put calibration profiles on the service");
  CLI::App* profile_cmd = c.cmd;
  profile_cmd->add_option("action", c.action, "list | get | put")->required();
  profile_cmd->add_option("name", c.name, "cluster name");
  profile_cmd->add_option("file", c.file, "profile file (put)");
  profile_cmd->add_option("--version", c.version, "version (get; default latest)");
  AddClientFlags(profile_cmd, client);
}

}  // namespace
}  // namespace stepcast

int main(int argc, char** argv) {
  using namespace stepcast;
  // Everything after "--" is a training command (Megatron-LM or torchtitan) to import.
  const std::vector<std::string> training_cmd = SplitTrainingCommand(argc, argv);
  CLI::App app{"stepcast: a calibrated performance model for LLM training"};
  app.require_subcommand(1);
  std::string presets_dir;
  app.add_option("--presets", presets_dir, "extra preset directory (hardware/*.yaml, models/*.yaml)");

  // The subcommands, in the order --help lists them.
  PredictCommand predict;
  AddPredictCommand(app, predict);
  SearchCommand search;
  AddSearchCommand(app, search);
  PlanCommand plan;
  AddPlanCommand(app, plan);
  CatalogCommand catalog_cmd;
  AddCatalogCommand(app, catalog_cmd);
  ValidateCommand validate;
  AddValidateCommand(app, validate);
  ServeCommand serve;
  AddServeCommand(app, serve);
  cli::StoreMigrateArgs sma;  // store migrate (cli/store_cmds.h)
  CLI::App* store_cmd = cli::AddStoreCommand(app, sma);
  ClientFlags client;  // shared by the commands that call the service
  PreflightCommand preflight;
  AddPreflightCommand(app, preflight, client);
  ReportCommand report;
  AddReportCommand(app, report, client);
  RunsCommand runs;
  AddRunsCommand(app, runs, client);
  CompareCommand compare;
  AddCompareCommand(app, compare, client);
  TraceCommand trace_cmd;
  AddTraceCommand(app, trace_cmd);
  ImportCommand import_cmd;
  AddImportCommand(app, import_cmd);
  ProfileCommand profile_cmd;
  AddProfileCommand(app, profile_cmd, client);

  // Usage errors exit 2 like every other invalid input (CLI11_PARSE would return CLI11's own
  // codes, 101-115); --help and --version still exit 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (!client.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadTokenFile(client.token_file);
    if (!t.ok()) return Fail(t.status());
    client.client.token = *t;
  }

  // A server parses every preset once at start; a one-shot command only those its job names.
  absl::StatusOr<Catalog> catalog = Catalog::Builtin(*serve.cmd ? CatalogLoad::kAll : CatalogLoad::kOnUse);
  if (!catalog.ok()) return Fail(catalog.status());
  if (!presets_dir.empty()) {
    if (absl::Status s = catalog->AddDirectory(presets_dir); !s.ok()) return Fail(s);
  }

  // Exactly one subcommand was given (require_subcommand(1)).
  if (*store_cmd) return cli::StoreMigrate(sma);
  if (*serve.cmd) return RunServe(serve, *std::move(catalog));
  if (*preflight.cmd) return RunPreflight(preflight, client.client, training_cmd);
  if (*report.cmd) return RunReport(report, client.client);
  if (*runs.cmd) return RunRuns(runs, client.client);
  if (*import_cmd.cmd) return RunImport(import_cmd, training_cmd);
  if (*profile_cmd.cmd) {
    return cli::Profile(client.client, profile_cmd.action, profile_cmd.name, profile_cmd.file, profile_cmd.version);
  }
  if (*search.cmd) return cli::Search(search.args, *catalog);
  if (*compare.cmd) {
    std::optional<Job> job;
    if (!compare.job_path.empty()) {
      absl::StatusOr<Job> j = LoadJob(compare.job_path, *catalog, nullptr);
      if (!j.ok()) return Fail(absl::Status(j.status().code(), absl::StrCat("--job: ", j.status().message())));
      job = *std::move(j);
    }
    return cli::Compare(compare.prediction, compare.measured, client.client, compare.json, compare.html_path,
                        job ? &job->parallelism : nullptr);
  }
  if (*trace_cmd.cmd) return cli::Trace(trace_cmd.args);
  if (*predict.cmd) return RunPredict(predict, training_cmd, *catalog);
  if (*plan.cmd) return RunPlan(plan, *catalog);
  if (*catalog_cmd.cmd) return RunCatalog(catalog_cmd, *catalog);
  if (*validate.cmd) return RunValidate(validate, *catalog);
  return 0;
}
