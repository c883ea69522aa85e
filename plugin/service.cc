#include "plugin/service.h"

#include <atomic>
#include <cmath>
#include <optional>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "plugin/compare.h"
#include "plugin/policy.h"
#include "plugin/store.h"
#include "proto/codec.h"
#include "proto/search_codec.h"
#include "stepcast/v1/service.grpc.pb.h"

namespace stepcast {

using google::protobuf::util::TimeUtil;

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status Prefixed(const absl::Status& s, absl::string_view prefix) {
  if (s.ok() || s.code() != absl::StatusCode::kInvalidArgument) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

std::string RandomId(absl::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<uint64_t>(absl::GetCurrentTimeNanos())};
  return absl::StrFormat("%s%016x", prefix, rng());
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One log line per RPC.
class RpcLog {
 public:
  RpcLog(std::FILE* out, const char* method, grpc::CallbackServerContext* ctx)
      : out_(out), method_(method), ctx_(ctx), start_(absl::Now()) {}
  grpc::Status Done(grpc::Status st) {
    if (out_ != nullptr) {
      const absl::Time now = absl::Now();
      std::fprintf(out_, "%s rpc=%s status=%s latency_us=%lld peer=%s%s%s\n",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now, absl::UTCTimeZone()).c_str(), method_,
                   StatusName(st.error_code()), static_cast<long long>(absl::ToInt64Microseconds(now - start_)),
                   ctx_->peer().c_str(), st.ok() ? "" : " error=", st.ok() ? "" : st.error_message().c_str());
    }
    return st;
  }

 private:
  static const char* StatusName(grpc::StatusCode c) {
    switch (c) {
      case grpc::OK: return "OK";
      case grpc::CANCELLED: return "CANCELLED";
      case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
      case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
      case grpc::NOT_FOUND: return "NOT_FOUND";
      case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
      case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
      case grpc::UNAVAILABLE: return "UNAVAILABLE";
      case grpc::DATA_LOSS: return "DATA_LOSS";
      default: return "ERROR";
    }
  }
  std::FILE* out_;
  const char* method_;
  grpc::CallbackServerContext* ctx_;
  absl::Time start_;
};

// A steady-clock deadline for work inside an RPC: at most `cap` from now, and ending early enough
// (10% of the time left, at least 50 ms) that the answer reaches the client before its deadline.
std::chrono::steady_clock::time_point WorkDeadline(grpc::CallbackServerContext* ctx, std::chrono::milliseconds cap) {
  const auto now_sys = std::chrono::system_clock::now();
  const auto now = std::chrono::steady_clock::now();
  const auto d = ctx->deadline();
  if (d >= now_sys + cap) return now + cap;
  const auto remaining = std::chrono::duration_cast<std::chrono::steady_clock::duration>(d - now_sys);
  const auto margin = std::max<std::chrono::steady_clock::duration>(std::chrono::milliseconds(50), remaining / 10);
  return now + (remaining - margin);
}

}  // namespace

class ServiceImpl final : public v1::StepcastService::CallbackService {
 public:
  ServiceImpl(Catalog catalog, std::unique_ptr<RunStore> store, std::map<std::string, RateProfile> dir_profiles,
              std::string token, std::FILE* log)
      : catalog_(std::move(catalog)),
        store_(std::move(store)),
        dir_profiles_(std::move(dir_profiles)),
        token_(std::move(token)),
        log_(log) {}

#define STEPCAST_UNARY(Method, Body)                                                                 \
  grpc::ServerUnaryReactor* Method(grpc::CallbackServerContext* ctx, const v1::Method##Request* req, \
                                   v1::Method##Response* resp) override {                            \
    RpcLog log(log_, #Method, ctx);                                                                  \
    auto* reactor = ctx->DefaultReactor();                                                           \
    reactor->Finish(log.Done(ToGrpc(Guard(ctx, [&] { return Body(ctx, *req, resp); }))));           \
    return reactor;                                                                                  \
  }
  STEPCAST_UNARY(Predict, DoPredict)
  STEPCAST_UNARY(Preflight, DoPreflight)
  STEPCAST_UNARY(ReportRun, DoReportRun)
  STEPCAST_UNARY(GetRun, DoGetRun)
  STEPCAST_UNARY(ListRuns, DoListRuns)
  STEPCAST_UNARY(ListProfiles, DoListProfiles)
  STEPCAST_UNARY(GetProfile, DoGetProfile)
  STEPCAST_UNARY(PutProfile, DoPutProfile)
  STEPCAST_UNARY(Search, DoSearch)
#undef STEPCAST_UNARY

 private:
  // Answers expired or cancelled calls without doing the work.
  template <typename F>
  absl::Status Guard(grpc::CallbackServerContext* ctx, F&& f) {
    if (ctx->IsCancelled()) return absl::CancelledError("cancelled by the client");
    if (ctx->deadline() < std::chrono::system_clock::now()) {
      return absl::DeadlineExceededError("deadline expired before the work started");
    }
    return f();
  }

  absl::Status CheckToken(grpc::CallbackServerContext* ctx) const {
    if (token_.empty()) return absl::OkStatus();
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) return absl::UnauthenticatedError("missing bearer token (authorization metadata)");
    const std::string got(it->second.data(), it->second.size());
    const std::string want = "Bearer " + token_;
    // Constant-time comparison.
    unsigned diff = got.size() ^ want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= (i < got.size() ? got[i] : 0) ^ want[i];
    if (diff != 0) return absl::UnauthenticatedError("wrong bearer token");
    return absl::OkStatus();
  }

  // The profile a request names; nullopt for the hardware's reference profile.
  absl::StatusOr<std::optional<RateProfile>> ResolveProfile(const v1::ProfileRef& ref) {
    if (ref.name().empty()) {
      if (ref.version() != 0) return absl::InvalidArgumentError("profile.version: needs profile.name");
      return std::nullopt;
    }
    if (ref.version() < 0) return absl::InvalidArgumentError("profile.version: must be >= 0");
    absl::StatusOr<v1::GetProfileResponse> stored = store_->GetProfile(ref.name(), ref.version());
    if (stored.ok()) {
      absl::StatusOr<RateProfile> p = RateProfileFromProto(stored->profile(), "profile");
      if (!p.ok()) return absl::DataLossError(absl::StrCat("stored profile '", ref.name(), "': ", p.status().message()));
      return std::optional<RateProfile>(*std::move(p));
    }
    if (stored.status().code() != absl::StatusCode::kNotFound) return stored.status();
    if (ref.version() <= 1) {
      if (auto it = dir_profiles_.find(ref.name()); it != dir_profiles_.end()) {
        return std::optional<RateProfile>(it->second);
      }
      for (const auto& [key, hw] : catalog_.hardware()) {
        if (hw.reference_profile.name == ref.name()) return std::optional<RateProfile>(hw.reference_profile);
      }
    }
    return absl::NotFoundError(absl::StrCat("profile.name: unknown profile '", ref.name(), "'",
                                            ref.version() ? absl::StrCat(" version ", ref.version()) : ""));
  }

  absl::StatusOr<Prediction> Run(const v1::JobSpec& spec, const v1::ProfileRef& ref, Job* job_out = nullptr) {
    if (spec.model().source_case() == v1::ModelSpec::kHfConfig) {
      return absl::InvalidArgumentError(
          "job.model.hf_config: the service reads no files; send the shape inline (the stepcast and "
          "Python clients inline a local config.json)");
    }
    absl::StatusOr<std::optional<RateProfile>> profile = ResolveProfile(ref);
    if (!profile.ok()) return profile.status();
    absl::StatusOr<Job> job = JobFromSpec(spec, catalog_, "", *profile ? &**profile : nullptr);
    if (!job.ok()) return Prefixed(job.status(), "job.");
    absl::StatusOr<Prediction> p = stepcast::Predict(*job);
    if (!p.ok()) return Prefixed(p.status(), "job.");
    if (job_out != nullptr) *job_out = *std::move(job);
    return p;
  }

  absl::Status DoPredict(grpc::CallbackServerContext*, const v1::PredictRequest& req, v1::PredictResponse* resp) {
    absl::StatusOr<Prediction> p = Run(req.job(), req.profile());
    if (!p.ok()) return p.status();
    *resp->mutable_prediction() = PredictionToProto(*p);
    return absl::OkStatus();
  }

  absl::Status DoPreflight(grpc::CallbackServerContext* ctx, const v1::PreflightRequest& req,
                           v1::PreflightResponse* resp) {
    if (absl::Status s = ValidatePolicy(req.policy()); !s.ok()) return s;
    Job job;
    absl::StatusOr<Prediction> p = Run(req.job(), req.profile(), &job);
    if (!p.ok()) return p.status();
    // A better layout on the same GPUs when this one does not fit or is >= 10% slower
    // (docs/SEARCH.md); the search stops in time for the verdict (at most 2 s). Not finding one
    // is no error.
    absl::StatusOr<std::optional<v1::LayoutSuggestion>> suggestion =
        SuggestLayout(job, *p, WorkDeadline(ctx, std::chrono::milliseconds(2000)));
    if (suggestion.ok() && suggestion->has_value()) *resp->mutable_suggestion() = **suggestion;
    *resp->mutable_prediction() = PredictionToProto(*p);
    const PolicyResult verdict = EvaluatePolicy(resp->prediction(), req.policy());
    resp->set_verdict(verdict.verdict);
    for (const auto& r : verdict.reasons) *resp->add_reasons() = r;
    const std::string id = RandomId("pred-");
    RunStore::StoredPrediction stored{req.job(), req.profile(), resp->prediction()};
    if (absl::Status s = store_->PutPrediction(id, stored, absl::ToUnixMicros(absl::Now())); !s.ok()) return s;
    resp->set_prediction_id(id);
    return absl::OkStatus();
  }

  // Search: the job's model, batch, hardware and framework; its own layout only for the changes.
  absl::Status DoSearch(grpc::CallbackServerContext* ctx, const v1::SearchRequest& req, v1::SearchResponse* resp) {
    if (req.job().model().source_case() == v1::ModelSpec::kHfConfig) {
      return absl::InvalidArgumentError(
          "job.model.hf_config: the service reads no files; send the shape inline (the stepcast and "
          "Python clients inline a local config.json)");
    }
    absl::StatusOr<std::optional<RateProfile>> profile = ResolveProfile(req.profile());
    if (!profile.ok()) return profile.status();
    absl::StatusOr<SearchBase> base = SearchBaseFromSpec(req.job(), catalog_, "", *profile ? &**profile : nullptr);
    if (!base.ok()) return Prefixed(base.status(), "job.");
    absl::StatusOr<SearchOptions> options = SearchOptionsFromProto(req.options(), *base);
    if (!options.ok()) return options.status();
    // The call's deadline (answered in time), the request's time limit, and at most 60 s.
    const auto deadline = WorkDeadline(ctx, std::chrono::seconds(60));
    if (deadline < options->deadline) options->deadline = deadline;
    options->cancelled = [ctx] { return ctx->IsCancelled(); };
    absl::StatusOr<SearchResult> r = SearchLayouts(base->job, *options);
    if (!r.ok()) {
      return Prefixed(r.status(), absl::StartsWith(r.status().message(), "budget_usd") ? "options." : "job.");
    }
    *resp->mutable_result() = SearchResultToProto(*r, base->submitted ? &*base->submitted : nullptr);
    // Within the default 4 MiB message limit, with room for the envelope.
    FitSearchResult(*resp->mutable_result(), 3 << 20);
    return absl::OkStatus();
  }

  absl::Status DoReportRun(grpc::CallbackServerContext* ctx, const v1::ReportRunRequest& req,
                           v1::ReportRunResponse* resp) {
    if (absl::Status s = CheckToken(ctx); !s.ok()) return s;
    auto bad = [](absl::string_view f, absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": ", why));
    };
    const double step = req.measured_step_time_s(), tps = req.measured_tokens_per_s();
    if (!(std::isfinite(step) && step >= 0)) return bad("measured_step_time_s", "must be a finite number >= 0");
    if (!(std::isfinite(tps) && tps >= 0)) return bad("measured_tokens_per_s", "must be a finite number >= 0");
    if (step == 0 && tps == 0) {
      return bad("measured_step_time_s", "one of measured_step_time_s or measured_tokens_per_s is required");
    }
    if (step > 0 && tps > 0) return bad("measured_tokens_per_s", "give measured_step_time_s or this, not both");
    if (req.gpu_count() < 0) return bad("gpu_count", "must be >= 0");
    if (req.has_start_time() && req.has_end_time() &&
        TimeUtil::TimestampToMicroseconds(req.end_time()) < TimeUtil::TimestampToMicroseconds(req.start_time())) {
      return bad("end_time", "is before start_time");
    }
    for (const auto& [k, v] : req.labels()) {
      if (k.empty()) return bad("labels", "keys must not be empty");
    }
    v1::Run run;
    if (!req.prediction_id().empty()) {
      if (req.has_job()) return bad("job", "give prediction_id or job, not both");
      absl::StatusOr<RunStore::StoredPrediction> sp = store_->GetPrediction(req.prediction_id());
      if (!sp.ok()) return sp.status();
      run.set_prediction_id(req.prediction_id());
      *run.mutable_job() = sp->job;
      *run.mutable_prediction() = sp->prediction;
    } else if (req.has_job()) {
      absl::StatusOr<Prediction> p = Run(req.job(), req.profile());
      if (!p.ok()) return p.status();
      *run.mutable_job() = req.job();
      *run.mutable_prediction() = PredictionToProto(*p);
    } else {
      return bad("prediction_id", "one of prediction_id or job is required");
    }
    const v1::Prediction& pred = run.prediction();
    const int32_t gpus = req.gpu_count() > 0 ? req.gpu_count() : pred.gpu_count();
    const double measured = step > 0 ? step : pred.tokens_per_step() / tps;
    run.set_run_id(RandomId("run-"));
    run.set_cluster(!req.cluster().empty() ? req.cluster() : run.job().cluster().name());
    run.set_model(pred.model_name());
    run.set_hardware(pred.hardware_name());
    run.set_gpu_count(gpus);
    run.set_predicted_step_time_s(pred.step_time_s());
    run.set_measured_step_time_s(measured);
    run.set_predicted_mfu(pred.mfu());
    run.set_measured_mfu(pred.model_flops_per_step() / (measured * gpus * pred.peak_flops_per_s_per_gpu()));
    run.set_step_time_error_pct((pred.step_time_s() - measured) / measured * 100);
    *run.mutable_predicted_breakdown() = pred.breakdown();
    if (req.has_measured_breakdown()) {
      *run.mutable_measured_breakdown() = req.measured_breakdown();
      const Comparison cmp = Compare(pred, req.measured_breakdown(), measured);
      for (const auto& row : cmp.rows) *run.add_comparison() = row;
      run.set_largest_difference(cmp.largest_difference);
    }
    if (req.has_start_time()) *run.mutable_start_time() = req.start_time();
    if (req.has_end_time()) *run.mutable_end_time() = req.end_time();
    *run.mutable_create_time() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(absl::Now()));
    for (const auto& [k, v] : req.labels()) (*run.mutable_labels())[k] = v;
    if (absl::Status s = store_->PutRun(run); !s.ok()) return s;
    *resp->mutable_run() = std::move(run);
    return absl::OkStatus();
  }

  absl::Status DoGetRun(grpc::CallbackServerContext*, const v1::GetRunRequest& req, v1::GetRunResponse* resp) {
    if (req.run_id().empty()) return absl::InvalidArgumentError("run_id: required");
    absl::StatusOr<v1::Run> run = store_->GetRun(req.run_id());
    if (!run.ok()) return run.status();
    *resp->mutable_run() = *std::move(run);
    return absl::OkStatus();
  }

  absl::Status DoListRuns(grpc::CallbackServerContext*, const v1::ListRunsRequest& req, v1::ListRunsResponse* resp) {
    absl::StatusOr<v1::ListRunsResponse> r = store_->ListRuns(req);
    if (!r.ok()) return r.status();
    *resp = *std::move(r);
    return absl::OkStatus();
  }

  absl::Status DoListProfiles(grpc::CallbackServerContext*, const v1::ListProfilesRequest&,
                              v1::ListProfilesResponse* resp) {
    absl::StatusOr<std::vector<v1::ProfileInfo>> stored = store_->ListProfiles();
    if (!stored.ok()) return stored.status();
    for (auto& p : *stored) *resp->add_profiles() = std::move(p);
    for (const auto& [name, p] : dir_profiles_) {
      v1::ProfileInfo* info = resp->add_profiles();
      info->set_name(name);
      info->set_latest_version(1);
      info->set_origin("directory");
    }
    for (const auto& [key, hw] : catalog_.hardware()) {
      v1::ProfileInfo* info = resp->add_profiles();
      info->set_name(hw.reference_profile.name);
      info->set_latest_version(1);
      info->set_origin("builtin");
    }
    return absl::OkStatus();
  }

  absl::Status DoGetProfile(grpc::CallbackServerContext*, const v1::GetProfileRequest& req,
                            v1::GetProfileResponse* resp) {
    if (req.name().empty()) return absl::InvalidArgumentError("name: required");
    v1::ProfileRef ref;
    ref.set_name(req.name());
    ref.set_version(req.version());
    absl::StatusOr<v1::GetProfileResponse> stored = store_->GetProfile(req.name(), req.version());
    if (stored.ok()) {
      *resp = *std::move(stored);
      return absl::OkStatus();
    }
    absl::StatusOr<std::optional<RateProfile>> p = ResolveProfile(ref);
    if (!p.ok()) return p.status();
    *resp->mutable_profile() = RateProfileToProto(**p);
    resp->set_version(1);
    return absl::OkStatus();
  }

  absl::Status DoPutProfile(grpc::CallbackServerContext* ctx, const v1::PutProfileRequest& req,
                            v1::PutProfileResponse* resp) {
    if (absl::Status s = CheckToken(ctx); !s.ok()) return s;
    if (req.name().empty()) return absl::InvalidArgumentError("name: required (the cluster's name)");
    for (char c : req.name()) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return absl::InvalidArgumentError("name: only letters, digits, '-', '_' and '.'");
      }
    }
    if (!req.has_profile()) return absl::InvalidArgumentError("profile: required");
    absl::StatusOr<RateProfile> p = RateProfileFromProto(req.profile(), "profile");
    if (!p.ok()) return p.status();
    absl::StatusOr<int32_t> v = store_->PutProfile(req.name(), req.profile(), absl::ToUnixMicros(absl::Now()));
    if (!v.ok()) return v.status();
    resp->set_version(*v);
    return absl::OkStatus();
  }

  const Catalog catalog_;
  std::unique_ptr<RunStore> store_;
  const std::map<std::string, RateProfile> dir_profiles_;
  const std::string token_;
  std::FILE* const log_;
};

absl::StatusOr<std::unique_ptr<StepcastServer>> StepcastServer::Start(const ServeOptions& o, Catalog catalog) {
  std::string token;
  if (!o.token_file.empty()) {
    absl::StatusOr<std::string> t = ReadFile(o.token_file, "--token-file");
    if (!t.ok()) return t.status();
    token = std::string(absl::StripAsciiWhitespace(*t));
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("--token-file: ", o.token_file, " is empty"));
  }
  std::map<std::string, RateProfile> dir_profiles;
  if (!o.profiles_dir.empty()) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(o.profiles_dir)) {
      return absl::InvalidArgumentError(absl::StrCat("--profiles-dir: ", o.profiles_dir, " is not a directory"));
    }
    for (const auto& e : fs::directory_iterator(o.profiles_dir)) {
      if (!FormatFromPath(e.path().string()).ok()) continue;
      absl::StatusOr<RateProfile> p = LoadRateProfile(e.path().string());
      if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("--profiles-dir: ", p.status().message()));
      dir_profiles[e.path().stem().string()] = *std::move(p);
    }
  }
  absl::StatusOr<std::unique_ptr<RunStore>> store = RunStore::Open(o.db_path);
  if (!store.ok()) return absl::Status(store.status().code(), absl::StrCat("--db: ", store.status().message()));

  std::shared_ptr<grpc::ServerCredentials> creds;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  if (!o.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(o.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(o.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }

  std::unique_ptr<StepcastServer> server(new StepcastServer());
  server->service_ = std::make_unique<ServiceImpl>(std::move(catalog), *std::move(store), std::move(dir_profiles),
                                                   std::move(token), o.log);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen_address, creds, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
  builder.SetMaxSendMessageSize(o.max_message_bytes);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", o.listen_address));
  }
  const std::string host = o.listen_address.substr(0, o.listen_address.rfind(':'));
  server->address_ = absl::StrCat(host, ":", server->port_);
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

StepcastServer::~StepcastServer() {
  if (server_) {
    Shutdown(std::chrono::milliseconds(0));
    server_->Wait();
  }
}

void StepcastServer::Shutdown(std::chrono::milliseconds grace) {
  std::call_once(shutdown_once_, [&] {
    if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
    server_->Shutdown(std::chrono::system_clock::now() + grace);
  });
}

void StepcastServer::Wait() { server_->Wait(); }

}  // namespace stepcast
