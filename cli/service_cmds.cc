// The service commands of the stepcast CLI: serve, preflight, report, runs, profile.
#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "cli/search.h"
#include "google/protobuf/util/time_util.h"
#include "proto/codec.h"
#include "plugin/compare.h"
#include "plugin/policy.h"
#include "plugin/probe/trace_analysis.h"
#include "plugin/store.h"
#include "proto/launch_args.h"

namespace stepcast::cli {
namespace {

using google::protobuf::util::TimeUtil;

int Fail(const absl::Status& s) { return FailWithStatus(s); }

absl::StatusOr<v1::JobSpec> ReadJob(const std::string& path) {
  v1::JobSpec spec;
  if (absl::Status s = ParseMessageFile(path, &spec); !s.ok()) return s;
  if (absl::Status s = InlineHfConfig(spec, std::filesystem::path(path).parent_path().string()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  if (spec.name().empty()) spec.set_name(std::filesystem::path(path).stem().string());
  return spec;
}

// "PASS", "WARN", "FAIL"; "UNSPECIFIED" for 0 and "unknown(N)" for a value this build does not
// know (a newer server's), which was printed "UNSPECIFIED" (review 2, N15).
std::string VerdictName(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_PASS: return "PASS";
    case v1::VERDICT_WARN: return "WARN";
    case v1::VERDICT_FAIL: return "FAIL";
    case v1::VERDICT_UNSPECIFIED: return "UNSPECIFIED";
    default: return absl::StrCat("unknown(", static_cast<int>(v), ")");
  }
}

std::string Summary(const v1::Prediction& p) {
  const double gib = 1024.0 * 1024 * 1024;
  // The memory verdict of the memory interval where there is one (docs/VALIDATION.md "Intervals").
  const char* memory = p.memory_interval().verdict() == v1::MEMORY_VERDICT_TIGHT          ? "TIGHT"
                       : p.memory_interval().verdict() == v1::MEMORY_VERDICT_DOES_NOT_FIT ? "DOES NOT FIT"
                       : p.memory_interval().verdict() == v1::MEMORY_VERDICT_FITS         ? "fits"
                       : p.memory().fits()                                                 ? "fits"
                                                                                           : "DOES NOT FIT";
  std::string out = absl::StrFormat(
      "  step %.3f s, %.0f tokens/s, MFU %.1f%%, memory %.1f of %.1f GiB (%s), bottleneck %s\n"
      "  %s\n",
      p.step_time_s(), p.tokens_per_s(), 100 * p.mfu(), p.memory().total_bytes() / gib,
      p.memory().capacity_bytes() / gib, memory, BottleneckKindShortName(p.bottleneck().kind()),
      p.bottleneck().reason());
  if (p.has_step_time_interval()) {
    absl::StrAppend(&out, "  ", p.step_time_interval().summary(), "\n");
    for (const auto& n : p.step_time_interval().notes()) absl::StrAppend(&out, "  note: ", n, "\n");
  }
  if (p.memory_interval().available()) absl::StrAppend(&out, "  memory: ", p.memory_interval().summary(), "\n");
  return out;
}

absl::StatusOr<google::protobuf::Timestamp> ParseTime(const std::string& s, const char* flag) {
  google::protobuf::Timestamp t;
  if (!TimeUtil::FromString(s, &t)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", s, "' is not an RFC 3339 time (2026-11-21T12:00:00Z)"));
  }
  return t;
}

}  // namespace

int Serve(const ServeOptions& options, Catalog catalog, const std::string& port_file) {
  // Block SIGTERM/SIGINT in every thread; one watcher thread takes them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  absl::StatusOr<std::unique_ptr<StepcastServer>> server = StepcastServer::Start(options, std::move(catalog));
  if (!server.ok()) return Fail(server.status());
  std::cout << "stepcast serve: listening on " << (*server)->address() << " (store " << RunStore::DescribeSpec(options.db_path)
            << (options.token_file.empty() ? ", writes open" : ", writes need the token")
            << (options.tls_cert_file.empty() ? ", plaintext" : ", TLS") << ")" << std::endl;
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << (*server)->port() << "\n";
    std::filesystem::rename(tmp, port_file);
  }
  StepcastServer* s = server->get();
  std::thread watcher([s, set] {
    int sig = 0;
    sigwait(&set, &sig);
    std::cout << "stepcast serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
              << ", draining (NOT_SERVING, 5 s grace)" << std::endl;
    s->Shutdown(std::chrono::seconds(5));
  });
  s->Wait();
  watcher.join();
  std::cout << "stepcast serve: stopped" << std::endl;
  return 0;
}

int Preflight(const std::string& job_path, const PreflightArgs& args) {
  absl::StatusOr<v1::JobSpec> spec;
  if (!args.command.empty()) {
    if (!job_path.empty()) return Fail(absl::InvalidArgumentError("give a job file or -- TRAINING COMMAND, not both"));
    absl::StatusOr<ImportedJob> imported = JobFromCommand(args.command, ".");
    if (!imported.ok()) return Fail(imported.status());
    for (const auto& a : imported->ignored) {
      if (absl::StartsWith(a, "--")) std::cerr << "stepcast: ignored (not modelled): " << a << "\n";
    }
    spec = imported->Finalize(args.gpus, args.hardware, args.gpus_per_node);
    if (!spec.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(spec.status().message(), " (pass --gpus and --hardware)")));
    }
    spec->set_name(imported->source + " command");
  } else if (job_path.empty()) {
    return Fail(absl::InvalidArgumentError("preflight: give a job file or -- TRAINING COMMAND"));
  } else {
    spec = ReadJob(job_path);
  }
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<Client> client = Client::Connect(args.client);
  if (!client.ok()) return Fail(client.status());
  v1::PreflightRequest req;
  *req.mutable_job() = *spec;
  *req.mutable_policy() = args.policy;
  *req.mutable_profile() = args.profile;
  v1::PreflightResponse resp;
  auto ctx = client->Context();
  const grpc::Status st = client->stub().Preflight(ctx.get(), req, &resp);
  if (!st.ok()) {
    std::cerr << "stepcast: preflight against " << args.client.address << " failed: "
              << (st.error_code() == grpc::UNAVAILABLE ? "service unreachable: " : "") << DescribeGrpcError(st) << "\n";
    return st.error_code() == grpc::INVALID_ARGUMENT || st.error_code() == grpc::NOT_FOUND ? kExitInvalid : kExitError;
  }
  // A server (older, or not ours) that answers PASS for a NaN prediction is overruled: FAIL.
  if (absl::Status fin = CheckPredictionFinite(resp.prediction()); !fin.ok()) {
    resp.set_verdict(v1::VERDICT_FAIL);
    v1::PreflightReason* r = resp.add_reasons();
    r->set_rule("non_finite");
    r->set_verdict(v1::VERDICT_FAIL);
    r->set_message(std::string(fin.message()));
  }
  if (args.json) {
    std::cout << ToJson(resp);
  } else {
    std::cout << "stepcast preflight: " << VerdictName(resp.verdict()) << "  " << spec->name() << " ("
              << resp.prediction().model_name() << " on " << resp.prediction().gpu_count() << " x "
              << resp.prediction().hardware_name() << "; profile " << resp.prediction().profile_name() << ")\n";
    for (const auto& r : resp.reasons()) {
      std::cout << "  " << VerdictName(r.verdict()) << " " << r.rule() << ": " << r.message() << "\n";
    }
    std::cout << Summary(resp.prediction()) << "  prediction_id " << resp.prediction_id() << "\n";
    if (resp.has_suggestion()) std::cout << FormatSuggestion(resp.suggestion());
  }
  switch (resp.verdict()) {
    case v1::VERDICT_PASS: return kExitPass;
    case v1::VERDICT_WARN: return kExitWarn;
    case v1::VERDICT_FAIL: return kExitFail;
    default:
      std::cerr << "stepcast: the server answered a verdict this stepcast does not know ("
                << VerdictName(resp.verdict()) << "); treating it as an error\n";
      return kExitError;
  }
}

int Report(const ReportArgs& a) {
  v1::ReportRunRequest req;
  const bool from_log = !a.log_path.empty();
  const bool from_files = !a.probe_reports.empty() || !a.traces.empty() || from_log;
  if (from_log) {
    // The run's own training log (cli.h ReportRequestFromLog): its median step time after the
    // warm-up, and what it states of its own throughput.
    if (a.step_time_s > 0 || a.tokens_per_s > 0) {
      return Fail(absl::InvalidArgumentError(
          "--log gives the measurement; do not also pass --step-time-s or --tokens-per-s"));
    }
    if (!a.probe_reports.empty() || !a.traces.empty()) {
      return Fail(absl::InvalidArgumentError("give --log or --probe/--trace, not both"));
    }
    // With --job, the log's own TFLOP/s or MFU is converted too (cli.h ConvertFrameworkReported).
    std::optional<Job> job;
    if (!a.job_path.empty()) {
      absl::StatusOr<Catalog> catalog = Catalog::Builtin(CatalogLoad::kOnUse);
      if (!catalog.ok()) return Fail(catalog.status());
      absl::StatusOr<Job> j = LoadJob(a.job_path, *catalog, nullptr);
      if (!j.ok()) return Fail(j.status());
      job = *std::move(j);
    }
    if (absl::Status s = ReportRequestFromLog(a.log_path, a.gpus, &req, job ? &*job : nullptr); !s.ok()) return Fail(s);
  } else if (from_files) {
    if (!a.probe_reports.empty() && !a.traces.empty()) {
      return Fail(absl::InvalidArgumentError("give --probe or --trace, not both"));
    }
    absl::StatusOr<Measured> m = ReadMeasured(!a.traces.empty() ? a.traces : a.probe_reports);
    if (!m.ok()) return Fail(m.status());
    if (m->merged.steps().empty()) return Fail(absl::FailedPreconditionError("the measurement holds no step"));
    if (a.step_time_s > 0 || a.tokens_per_s > 0) {
      return Fail(absl::InvalidArgumentError(
          "--probe/--trace give the step time; do not also pass --step-time-s/--tokens-per-s"));
    }
    // The same summary as the probe's: the median step's categories and time.
    *req.mutable_measured_breakdown() = MeasuredBreakdown(m->merged.median());
    req.set_measured_step_time_s(m->merged.median().step_time_s());
    (*req.mutable_labels())["source"] = m->source == "trace" ? "kineto-trace" : "stepcast-probe";
  }
  if (!a.prediction_id.empty()) req.set_prediction_id(a.prediction_id);
  if (!a.job_path.empty()) {
    absl::StatusOr<v1::JobSpec> spec = ReadJob(a.job_path);
    if (!spec.ok()) return Fail(spec.status());
    *req.mutable_job() = *spec;
  }
  if (!from_files) {
    req.set_measured_step_time_s(a.step_time_s);
    req.set_measured_tokens_per_s(a.tokens_per_s);
  }
  req.set_gpu_count(a.gpus);
  req.set_cluster(a.cluster);
  *req.mutable_profile() = a.profile;
  for (const auto& kv : a.labels) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Fail(absl::InvalidArgumentError("--label: must be key=value"));
    (*req.mutable_labels())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!a.start_time.empty()) {
    auto t = ParseTime(a.start_time, "--start");
    if (!t.ok()) return Fail(t.status());
    *req.mutable_start_time() = *t;
  }
  if (!a.end_time.empty()) {
    auto t = ParseTime(a.end_time, "--end");
    if (!t.ok()) return Fail(t.status());
    *req.mutable_end_time() = *t;
  }
  if (!a.measured_breakdown_path.empty()) {
    if (absl::Status s = ParseMessageFile(a.measured_breakdown_path, req.mutable_measured_breakdown()); !s.ok()) {
      return Fail(s);
    }
  }
  if (a.request_id.size() > 128) return Fail(absl::InvalidArgumentError("--request-id: at most 128 bytes"));
  req.set_request_id(a.request_id);
  if (a.dry_run) {
    std::cout << ToJson(req);  // what would be sent (the Python client reads --log this way)
    return 0;
  }
  absl::StatusOr<Client> client = Client::Connect(a.client);
  if (!client.ok()) return Fail(client.status());
  v1::ReportRunResponse resp;
  const grpc::Status st = ReportRunWithRetry(*client, req, &resp);  // idempotent (request_id)
  if (!st.ok()) return Fail(FromGrpc(st));
  if (a.json) {
    std::cout << ToJson(resp);
  } else {
    const v1::Run& r = resp.run();
    std::cout << absl::StrFormat(
        "stepcast report: stored %s\n  step time predicted %.3f s, measured %.3f s (%+.1f%%)\n"
        "  MFU predicted %.1f%%, measured %.1f%%\n",
        r.run_id(), r.predicted_step_time_s(), r.measured_step_time_s(), r.step_time_error_pct(),
        100 * r.predicted_mfu(), 100 * r.measured_mfu());
    if (!r.largest_difference().empty()) std::cout << "  largest difference: " << r.largest_difference() << "\n";
    if (r.has_framework_reported()) std::cout << FormatFrameworkReported(r.framework_reported());
  }
  return 0;
}

int Runs(const RunsArgs& a) {
  absl::StatusOr<Client> client = Client::Connect(a.client);
  if (!client.ok()) return Fail(client.status());
  v1::ListRunsRequest req = a.request;
  v1::ListRunsResponse all;
  do {
    v1::ListRunsResponse page;
    auto ctx = client->Context();
    const grpc::Status st = client->stub().ListRuns(ctx.get(), req, &page);
    if (!st.ok()) return Fail(FromGrpc(st));
    for (auto& r : *page.mutable_runs()) *all.add_runs() = std::move(r);
    all.set_next_page_token(page.next_page_token());
    req.set_page_token(page.next_page_token());
  } while (a.all_pages && !req.page_token().empty());
  if (a.json) {
    std::cout << ToJson(all);
    return 0;
  }
  std::cout << absl::StrFormat("%-21s %-14s %-16s %5s %10s %10s %7s %7s %7s  %s\n", "run_id", "cluster", "model",
                               "gpus", "pred_s", "meas_s", "err", "predMFU", "measMFU", "start");
  for (const auto& r : all.runs()) {
    std::cout << absl::StrFormat("%-21s %-14s %-16s %5d %10.3f %10.3f %+6.1f%% %6.1f%% %6.1f%%  %s\n", r.run_id(),
                                 r.cluster().substr(0, 14), r.model().substr(0, 16), r.gpu_count(),
                                 r.predicted_step_time_s(), r.measured_step_time_s(), r.step_time_error_pct(),
                                 100 * r.predicted_mfu(), 100 * r.measured_mfu(),
                                 r.has_start_time() ? TimeUtil::ToString(r.start_time()) : "-");
    if (r.has_framework_reported()) std::cout << "    " << FrameworkReportedBrief(r.framework_reported()) << "\n";
  }
  if (!all.next_page_token().empty()) std::cout << "(more: --page-token " << all.next_page_token() << ")\n";
  return 0;
}

int Profile(const ClientOptions& copt, const std::string& action, const std::string& name, const std::string& file,
            int version) {
  absl::StatusOr<Client> client = Client::Connect(copt);
  if (!client.ok()) return Fail(client.status());
  auto ctx = client->Context();
  if (action == "list") {
    v1::ListProfilesResponse resp;
    const grpc::Status st = client->stub().ListProfiles(ctx.get(), {}, &resp);
    if (!st.ok()) return Fail(FromGrpc(st));
    for (const auto& p : resp.profiles()) {
      std::cout << absl::StrFormat("%-28s v%-3d %s\n", p.name(), p.latest_version(), p.origin());
    }
    return 0;
  }
  if (name.empty()) return Fail(absl::InvalidArgumentError("name: required"));
  if (action == "get") {
    v1::GetProfileRequest req;
    req.set_name(name);
    req.set_version(version);
    v1::GetProfileResponse resp;
    const grpc::Status st = client->stub().GetProfile(ctx.get(), req, &resp);
    if (!st.ok()) return Fail(FromGrpc(st));
    std::cout << ToJson(resp);
    return 0;
  }
  if (action == "put") {
    v1::PutProfileRequest req;
    req.set_name(name);
    if (absl::Status s = ParseMessageFile(file, req.mutable_profile()); !s.ok()) return Fail(s);
    v1::PutProfileResponse resp;
    const grpc::Status st = client->stub().PutProfile(ctx.get(), req, &resp);
    if (!st.ok()) return Fail(FromGrpc(st));
    std::cout << "stepcast profile: stored " << name << " version " << resp.version() << "\n";
    return 0;
  }
  return Fail(absl::InvalidArgumentError(absl::StrCat("profile: unknown action '", action, "' (list, get, put)")));
}

}  // namespace stepcast::cli
