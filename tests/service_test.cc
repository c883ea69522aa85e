// The gRPC service in-process on 127.0.0.1:0: every RPC, bad input on every field, profiles,
// tokens, restart durability, concurrency, health, deadlines and message-size limits.
#include <sqlite3.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "plugin/client.h"
#include "plugin/service.h"
#include "plugin/policy.h"
#include "plugin/store.h"
#include "proto/codec.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;
using google::protobuf::util::TimeUtil;

constexpr char kToken[] = "t0ken-for-tests";

v1::JobSpec Spec(const std::string& yaml) {
  v1::JobSpec spec;
  absl::Status s = ParseMessage(yaml, SpecFormat::kYaml, "spec.yaml", &spec);
  EXPECT_TRUE(s.ok()) << s;
  return spec;
}

// A Llama 3 8B step on 8 H100 takes at least ~1.6 s at 100% MFU: reported steps are 3 s or more
// (ReportRun refuses a measured MFU above 100%).
constexpr char kJob[] = R"(
name: llama8b
model: llama3-8b
hardware: h100-sxm
cluster: {name: cluster-a, gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, sharding: zero1, dataset_tokens: 1e11})";

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("svc-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "profiles");
    std::ofstream(dir_ / "token") << kToken << "\n";
    std::ofstream(dir_ / "profiles" / "slow-lab.yaml")
        << "gemm: [{dtype: bf16, flops_per_s: 100e12}]\nhbm_bandwidth_bytes_per_s: 1e12\n";
    StartServer();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void StartServer() {
    ServeOptions o;
    o.listen_address = "127.0.0.1:0";
    o.db_path = (dir_ / "store.db").string();
    o.token_file = (dir_ / "token").string();
    o.profiles_dir = (dir_ / "profiles").string();
    o.log = nullptr;
    if (configure_) configure_(o);
    auto s = StepcastServer::Start(o, testing::BuiltinCatalog());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ClientOptions c;
    c.address = server_->address();
    c.token = kToken;
    client_ = std::make_unique<Client>(*Client::Connect(c));
    c.token = "";
    anon_ = std::make_unique<Client>(*Client::Connect(c));
  }
  void Restart() {
    server_.reset();
    StartServer();
  }

  v1::PreflightResponse Preflight(const v1::JobSpec& spec, const v1::PreflightPolicy& policy = {}) {
    v1::PreflightRequest req;
    *req.mutable_job() = spec;
    *req.mutable_policy() = policy;
    v1::PreflightResponse resp;
    auto ctx = client_->Context();
    grpc::Status st = client_->stub().Preflight(ctx.get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }
  grpc::Status Report(const v1::ReportRunRequest& req, v1::ReportRunResponse* resp, const Client* c = nullptr) {
    auto ctx = (c ? c : client_.get())->Context();
    return (c ? c : client_.get())->stub().ReportRun(ctx.get(), req, resp);
  }
  grpc::Status PredictStatus(const v1::JobSpec& spec, v1::PredictResponse* resp = nullptr,
                             const v1::ProfileRef& profile = {}) {
    v1::PredictRequest req;
    *req.mutable_job() = spec;
    *req.mutable_profile() = profile;
    v1::PredictResponse r;
    auto ctx = client_->Context();
    return client_->stub().Predict(ctx.get(), req, resp ? resp : &r);
  }
  int HealthStatus() {
    grpc::GenericStub stub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::CompletionQueue cq;
    grpc::Slice empty("");  // HealthCheckRequest{service: ""} serializes to no bytes
    grpc::ByteBuffer request(&empty, 1), response;
    auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
    call->StartCall();
    grpc::Status st;
    call->Finish(&response, &st, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    cq.Next(&tag, &ok);
    if (!st.ok()) return -st.error_code();
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    // HealthCheckResponse{status = 1 (SERVING) | 2 (NOT_SERVING)}: field 1 varint.
    return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
  }

  std::filesystem::path dir_;
  std::function<void(ServeOptions&)> configure_;  // applied by StartServer (then Restart())
  std::unique_ptr<StepcastServer> server_;
  std::unique_ptr<Client> client_, anon_;
};

TEST_F(ServiceTest, PredictMatchesTheLibrary) {
  v1::PredictResponse resp;
  ASSERT_TRUE(PredictStatus(Spec(kJob), &resp).ok());
  auto job = testing::JobFromYaml(kJob);
  ASSERT_TRUE(job.ok());
  auto local = Predict(*job);
  ASSERT_TRUE(local.ok());
  EXPECT_DOUBLE_EQ(resp.prediction().step_time_s(), local->step_time_s);
  EXPECT_DOUBLE_EQ(resp.prediction().mfu(), local->mfu);
  EXPECT_EQ(resp.prediction().model_name(), "Llama 3 8B");
  EXPECT_GT(resp.prediction().memory().total_bytes(), 0);
  // The whole message, as the library's PredictionToProto writes it: the server builds it in
  // place on the call's arena (ArenaMessageAllocator, issue 30), which must not drop or change a
  // field. The assumed inputs, each with its source, are the largest part of it.
  const v1::Prediction expected = PredictionToProto(*local);
  ASSERT_GT(expected.assumed_inputs_size(), 0);
  ASSERT_EQ(resp.prediction().assumed_inputs_size(), expected.assumed_inputs_size());
  for (int i = 0; i < expected.assumed_inputs_size(); ++i) {
    EXPECT_EQ(resp.prediction().assumed_inputs(i).field(), expected.assumed_inputs(i).field());
    EXPECT_EQ(resp.prediction().assumed_inputs(i).source(), expected.assumed_inputs(i).source());
  }
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(resp.prediction(), expected))
      << resp.prediction().ShortDebugString().substr(0, 400);
  // Preflight's prediction too (its response is on an arena as well).
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Preflight(Spec(kJob)).prediction(), expected));
}

TEST_F(ServiceTest, PreflightVerdicts) {
  // PASS with no policy.
  v1::PreflightResponse pass = Preflight(Spec(kJob));
  EXPECT_EQ(pass.verdict(), v1::VERDICT_PASS);
  EXPECT_THAT(pass.prediction_id(), HasSubstr("pred-"));
  EXPECT_GT(pass.prediction().step_time_s(), 0);
  // FAIL on an impossible MFU floor and cost cap; WARN on the bottleneck.
  v1::PreflightPolicy policy;
  policy.set_min_mfu(0.99);
  policy.set_max_cost_per_hour_usd(1.0);
  policy.add_warn_on_bottlenecks(v1::BOTTLENECK_KIND_COMPUTE);
  v1::PreflightResponse fail = Preflight(Spec(kJob), policy);
  EXPECT_EQ(fail.verdict(), v1::VERDICT_FAIL);
  ASSERT_EQ(fail.reasons_size(), 3);
  EXPECT_EQ(fail.reasons(0).rule(), "min_mfu");
  EXPECT_EQ(fail.reasons(1).rule(), "max_cost_per_hour_usd");
  EXPECT_EQ(fail.reasons(2).rule(), "bottleneck");
  EXPECT_EQ(fail.reasons(2).verdict(), v1::VERDICT_WARN);
  policy.set_limits_warn_only(true);
  EXPECT_EQ(Preflight(Spec(kJob), policy).verdict(), v1::VERDICT_WARN);
  // Not fitting in memory is a FAIL verdict, not an RPC error.
  v1::PreflightResponse oom = Preflight(Spec(R"(
model: llama3-405b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 8})"));
  EXPECT_EQ(oom.verdict(), v1::VERDICT_FAIL);
  ASSERT_GE(oom.reasons_size(), 1);
  EXPECT_EQ(oom.reasons(0).rule(), "memory_fit");
}

// The memory verdict's boundary (core/memory.h kMemoryUncertainty, docs/MODEL.md "Memory: how
// sure"): a job up to 5% over the GPU's capacity is WARN (memory_tight: it may fit), beyond that
// FAIL (memory_fit), through the whole pre-flight path (hardware override, EstimateMemory,
// EvaluatePolicy). The capacity is set from the job's own total so that it is 3% and 8% over.
TEST_F(ServiceTest, PreflightMemoryUpToFivePercentOverIsWarnBeyondIsFail) {
  const double total = Preflight(Spec(kJob)).prediction().memory().total_bytes();
  ASSERT_GT(total, 0);
  auto with_capacity = [&](double capacity) {
    return Spec(absl::StrCat(R"(
name: llama8b
model: llama3-8b
hardware: {preset: h100-sxm, overrides: {hbm_capacity_bytes: )", absl::StrFormat("%.0f", capacity), R"(}}
cluster: {name: cluster-a, gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, sharding: zero1, dataset_tokens: 1e11})"));
  };
  const v1::PreflightResponse fits = Preflight(with_capacity(total * 1.01));
  EXPECT_EQ(fits.verdict(), v1::VERDICT_PASS);
  EXPECT_DOUBLE_EQ(fits.prediction().memory().total_bytes(), total);  // the capacity changes no term
  const v1::PreflightResponse tight = Preflight(with_capacity(total / 1.03));
  EXPECT_FALSE(tight.prediction().memory().fits());
  EXPECT_TRUE(tight.prediction().memory().tight());
  EXPECT_EQ(tight.verdict(), v1::VERDICT_WARN);
  ASSERT_GE(tight.reasons_size(), 1);
  EXPECT_EQ(tight.reasons(0).rule(), "memory_tight");
  const v1::PreflightResponse over = Preflight(with_capacity(total / 1.08));
  EXPECT_FALSE(over.prediction().memory().fits());
  EXPECT_FALSE(over.prediction().memory().tight());
  EXPECT_EQ(over.verdict(), v1::VERDICT_FAIL);
  ASSERT_GE(over.reasons_size(), 1);
  EXPECT_EQ(over.reasons(0).rule(), "memory_fit");
}

// Search answers within the call's deadline with the best layout found so far (docs/SEARCH.md:
// the work deadline is the call's, less a margin for the answer): a 3 s call over 8..16384 GPUs
// (minutes of work) is an OK, partial answer, not DEADLINE_EXCEEDED.
TEST_F(ServiceTest, SearchAnswersWithinTheCallDeadlineWithTheBestSoFar) {
  // A space the search cannot finish inside the 6 s deadline: the 8B job with a global batch of
  // 16,384 sequences over 8..16,384 GPUs, every schedule and fp8 (`stepcast search --all-schedules
  // --fp8`: 67.8M layouts in 20.3 s on 2 idle cores). The service's Search runs on
  // cores / (workers - 1) = 2 threads on any core count (plugin/service.cc), so a faster machine
  // does not finish it either; with the 64-sequence batch the whole search took 1.5 s and finished
  // before the deadline on an idle machine.
  v1::SearchRequest req;
  *req.mutable_job() = Spec(kJob);
  req.mutable_job()->mutable_training()->set_global_batch_size(16384);
  req.mutable_options()->set_top_n(2);
  req.mutable_options()->mutable_space()->set_min_gpus(8);
  req.mutable_options()->mutable_space()->set_max_gpus(16384);
  req.mutable_options()->mutable_space()->set_all_schedules(true);
  req.mutable_options()->mutable_space()->set_fp8(true);
  v1::SearchResponse resp;
  auto ctx = client_->Context();
  // 6 s: the service keeps 10% of the time left as its margin (WorkDeadline); beside the suite's
  // other tests on 2 cores (Chromium's page tests) the search workers were seen descheduled for
  // more than the 300 ms a 3 s call leaves (DEADLINE_EXCEEDED at 3.00 s, 2026-11-28), which no
  // margin of the service can absorb; 600 ms does in the suite.
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(6000));
  const auto t0 = std::chrono::steady_clock::now();
  grpc::Status st = client_->stub().Search(ctx.get(), req, &resp);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(st.ok()) << st.error_code() << " " << st.error_message() << " after " << elapsed_s << " s";
  EXPECT_TRUE(resp.result().partial());
  EXPECT_THAT(resp.result().partial_reason(), HasSubstr("deadline"));
  ASSERT_GE(resp.result().top_size(), 1);
  EXPECT_TRUE(resp.result().top(0).prediction().memory().fits());
}

TEST_F(ServiceTest, ReportGetAndListRuns) {
  const v1::PreflightResponse pf = Preflight(Spec(kJob));
  v1::ReportRunRequest req;
  req.set_prediction_id(pf.prediction_id());
  req.set_measured_step_time_s(pf.prediction().step_time_s() * 1.25);
  (*req.mutable_labels())["team"] = "infra";
  *req.mutable_start_time() = TimeUtil::SecondsToTimestamp(1'790'000'000);
  *req.mutable_end_time() = TimeUtil::SecondsToTimestamp(1'790'003'600);
  req.mutable_measured_breakdown()->set_gemm_s(1.0);
  v1::ReportRunResponse resp;
  ASSERT_TRUE(Report(req, &resp).ok());
  const v1::Run& run = resp.run();
  EXPECT_EQ(run.cluster(), "cluster-a");
  EXPECT_EQ(run.gpu_count(), 8);
  EXPECT_NEAR(run.step_time_error_pct(), (1 / 1.25 - 1) * 100, 1e-9);
  EXPECT_NEAR(run.measured_mfu(), pf.prediction().mfu() / 1.25, 1e-12);
  EXPECT_TRUE(run.has_measured_breakdown());
  // The per-category comparison is stored with the run (and returned by GetRun below).
  ASSERT_EQ(run.comparison_size(), 5);
  EXPECT_EQ(run.comparison(0).category(), "compute");
  EXPECT_DOUBLE_EQ(run.comparison(0).measured_s(), 1.0);
  EXPECT_FALSE(run.largest_difference().empty());

  // By job and by tokens/s.
  v1::ReportRunRequest by_job;
  *by_job.mutable_job() = Spec(kJob);
  by_job.set_measured_tokens_per_s(pf.prediction().tokens_per_s() / 2);
  by_job.set_cluster("cluster-b");
  v1::ReportRunResponse resp2;
  ASSERT_TRUE(Report(by_job, &resp2).ok());
  EXPECT_NEAR(resp2.run().measured_step_time_s(), 2 * pf.prediction().step_time_s(), 1e-9);

  v1::GetRunRequest get;
  get.set_run_id(run.run_id());
  v1::GetRunResponse got;
  auto ctx = anon_->Context();  // reads are open
  ASSERT_TRUE(anon_->stub().GetRun(ctx.get(), get, &got).ok());
  EXPECT_EQ(got.run().SerializeAsString(), run.SerializeAsString());

  auto list = [&](v1::ListRunsRequest r) {
    v1::ListRunsResponse out;
    auto c = anon_->Context();
    EXPECT_TRUE(anon_->stub().ListRuns(c.get(), r, &out).ok());
    return out;
  };
  EXPECT_EQ(list({}).runs_size(), 2);
  v1::ListRunsRequest f;
  f.set_cluster("cluster-b");
  EXPECT_EQ(list(f).runs_size(), 1);
  f.Clear();
  f.set_label("team=infra");
  ASSERT_EQ(list(f).runs_size(), 1);
  EXPECT_EQ(list(f).runs(0).run_id(), run.run_id());
  f.Clear();
  f.set_model("Llama 3 8B");
  EXPECT_EQ(list(f).runs_size(), 2);
  f.Clear();
  *f.mutable_min_start_time() = TimeUtil::SecondsToTimestamp(1'789'999'000);
  *f.mutable_max_start_time() = TimeUtil::SecondsToTimestamp(1'790'000'500);
  EXPECT_EQ(list(f).runs_size(), 1);
  // Paging: newest first, one per page.
  f.Clear();
  f.set_page_size(1);
  v1::ListRunsResponse p1 = list(f);
  ASSERT_EQ(p1.runs_size(), 1);
  EXPECT_EQ(p1.runs(0).run_id(), resp2.run().run_id());
  ASSERT_FALSE(p1.next_page_token().empty());
  f.set_page_token(p1.next_page_token());
  v1::ListRunsResponse p2 = list(f);
  ASSERT_EQ(p2.runs_size(), 1);
  EXPECT_EQ(p2.runs(0).run_id(), run.run_id());
  EXPECT_TRUE(p2.next_page_token().empty());
}

TEST_F(ServiceTest, ProfilesVersionedAndUsedByPredict) {
  auto put = [&](double gemm) {
    v1::PutProfileRequest req;
    req.set_name("cluster-a");
    auto* g = req.mutable_profile()->add_gemm();
    g->set_dtype(v1::D_TYPE_BF16);
    g->set_flops_per_s(gemm);
    req.mutable_profile()->set_hbm_bandwidth_bytes_per_s(3e12);
    v1::PutProfileResponse resp;
    auto ctx = client_->Context();
    EXPECT_TRUE(client_->stub().PutProfile(ctx.get(), req, &resp).ok());
    return resp.version();
  };
  EXPECT_EQ(put(700e12), 1);
  EXPECT_EQ(put(350e12), 2);
  v1::ProfileRef latest, v1ref;
  latest.set_name("cluster-a");
  v1ref.set_name("cluster-a");
  v1ref.set_version(1);
  v1::PredictResponse fast, slow;
  ASSERT_TRUE(PredictStatus(Spec(kJob), &fast, v1ref).ok());
  ASSERT_TRUE(PredictStatus(Spec(kJob), &slow, latest).ok());
  // The latest (half as fast GEMMs) doubles the GEMM term.
  // (Compute-bound GEMMs double; the GEMM model's per-kernel floor does not.)
  EXPECT_GT(slow.prediction().breakdown().gemm_s(), 1.9 * fast.prediction().breakdown().gemm_s());
  EXPECT_LE(slow.prediction().breakdown().gemm_s(), 2.0 * fast.prediction().breakdown().gemm_s());
  // The profiles directory and the built-in reference profiles are served too.
  v1::ProfileRef dir;
  dir.set_name("slow-lab");
  ASSERT_TRUE(PredictStatus(Spec(kJob), nullptr, dir).ok());
  v1::ProfileRef builtin;
  builtin.set_name("h100-sxm-reference");
  ASSERT_TRUE(PredictStatus(Spec(kJob), nullptr, builtin).ok());
  // Unknown profile / version: NOT_FOUND.
  v1::ProfileRef unknown;
  unknown.set_name("nowhere");
  grpc::Status st = PredictStatus(Spec(kJob), nullptr, unknown);
  EXPECT_EQ(st.error_code(), grpc::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("profile.name: unknown profile 'nowhere'"));
  latest.set_version(7);
  EXPECT_EQ(PredictStatus(Spec(kJob), nullptr, latest).error_code(), grpc::NOT_FOUND);

  v1::ListProfilesResponse profiles;
  auto ctx = anon_->Context();
  ASSERT_TRUE(anon_->stub().ListProfiles(ctx.get(), {}, &profiles).ok());
  std::map<std::string, std::string> origin;
  for (const auto& p : profiles.profiles()) origin[p.name()] = p.origin() + std::to_string(p.latest_version());
  EXPECT_EQ(origin["cluster-a"], "store2");
  EXPECT_EQ(origin["slow-lab"], "directory1");
  EXPECT_EQ(origin["h100-sxm-reference"], "builtin1");
  v1::GetProfileRequest gr;
  gr.set_name("cluster-a");
  gr.set_version(1);
  v1::GetProfileResponse gp;
  auto ctx2 = anon_->Context();
  ASSERT_TRUE(anon_->stub().GetProfile(ctx2.get(), gr, &gp).ok());
  EXPECT_EQ(gp.version(), 1);
  EXPECT_DOUBLE_EQ(gp.profile().gemm(0).flops_per_s(), 700e12);
}

TEST_F(ServiceTest, WritesNeedTheToken) {
  v1::ReportRunRequest req;
  *req.mutable_job() = Spec(kJob);
  req.set_measured_step_time_s(3);
  v1::ReportRunResponse resp;
  grpc::Status st = Report(req, &resp, anon_.get());
  EXPECT_EQ(st.error_code(), grpc::UNAUTHENTICATED);
  ClientOptions wrong;
  wrong.address = server_->address();
  wrong.token = "not-the-token";
  Client w = *Client::Connect(wrong);
  EXPECT_EQ(Report(req, &resp, &w).error_code(), grpc::UNAUTHENTICATED);
  v1::PutProfileRequest put;
  put.set_name("x");
  v1::PutProfileResponse pr;
  auto ctx = w.Context();
  EXPECT_EQ(w.stub().PutProfile(ctx.get(), put, &pr).error_code(), grpc::UNAUTHENTICATED);
  EXPECT_TRUE(Report(req, &resp).ok());
}

TEST_F(ServiceTest, RestartKeepsRunsAndProfiles) {
  v1::ReportRunRequest req;
  *req.mutable_job() = Spec(kJob);
  req.set_measured_step_time_s(3.5);
  v1::ReportRunResponse run;
  ASSERT_TRUE(Report(req, &run).ok());
  v1::PutProfileRequest put;
  put.set_name("kept");
  put.mutable_profile()->add_gemm()->set_dtype(v1::D_TYPE_BF16);
  put.mutable_profile()->mutable_gemm(0)->set_flops_per_s(5e14);
  put.mutable_profile()->set_hbm_bandwidth_bytes_per_s(2e12);
  v1::PutProfileResponse pr;
  auto ctx = client_->Context();
  ASSERT_TRUE(client_->stub().PutProfile(ctx.get(), put, &pr).ok());
  const v1::PreflightResponse pf = Preflight(Spec(kJob));

  Restart();
  v1::GetRunRequest g;
  g.set_run_id(run.run().run_id());
  v1::GetRunResponse got;
  auto c1 = client_->Context();
  ASSERT_TRUE(client_->stub().GetRun(c1.get(), g, &got).ok());
  EXPECT_DOUBLE_EQ(got.run().measured_step_time_s(), 3.5);
  v1::GetProfileRequest gp;
  gp.set_name("kept");
  v1::GetProfileResponse prof;
  auto c2 = client_->Context();
  ASSERT_TRUE(client_->stub().GetProfile(c2.get(), gp, &prof).ok());
  EXPECT_EQ(prof.version(), 1);
  // A prediction id from before the restart can still be reported against.
  v1::ReportRunRequest later;
  later.set_prediction_id(pf.prediction_id());
  later.set_measured_step_time_s(2);
  EXPECT_TRUE(Report(later, &run).ok());
  auto store = RunStore::Open((dir_ / "store2.db").string());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->schema_version(), RunStore::LatestSchemaVersion());
}

TEST_F(ServiceTest, SixteenThreadsReportingLoseNoRun) {
  constexpr int kThreads = 16, kEach = 12;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ClientOptions c;
      c.address = server_->address();
      c.token = kToken;
      Client client = *Client::Connect(c);
      for (int i = 0; i < kEach; ++i) {
        v1::ReportRunRequest req;
        *req.mutable_job() = Spec(kJob);
        req.set_measured_step_time_s(3 + i);
        (*req.mutable_labels())["thread"] = std::to_string(t);
        v1::ReportRunResponse resp;
        auto ctx = client.Context();
        if (!client.stub().ReportRun(ctx.get(), req, &resp).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  v1::ListRunsRequest all;
  all.set_page_size(1000);
  v1::ListRunsResponse out;
  auto ctx = anon_->Context();
  ASSERT_TRUE(anon_->stub().ListRuns(ctx.get(), all, &out).ok());
  EXPECT_EQ(out.runs_size(), kThreads * kEach);
  std::set<std::string> ids;
  for (const auto& r : out.runs()) ids.insert(r.run_id());
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(ServiceTest, HealthDeadlinesAndShutdown) {
  EXPECT_EQ(HealthStatus(), 1);  // SERVING
  // An already-expired deadline is answered without the work.
  v1::PredictRequest req;
  *req.mutable_job() = Spec(kJob);
  v1::PredictResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(client_->stub().Predict(&ctx, req, &resp).error_code(), grpc::DEADLINE_EXCEEDED);
  // Oversized messages are refused.
  v1::PutProfileRequest big;
  big.set_name("big");
  big.mutable_profile()->add_notes(std::string(5 << 20, 'x'));
  v1::PutProfileResponse br;
  auto c = client_->Context();
  EXPECT_EQ(client_->stub().PutProfile(c.get(), big, &br).error_code(), grpc::RESOURCE_EXHAUSTED);
  // Shutdown: health goes NOT_SERVING and new calls are refused.
  server_->Shutdown(std::chrono::milliseconds(200));
  EXPECT_NE(HealthStatus(), 1);
  auto c2 = client_->Context();
  EXPECT_FALSE(client_->stub().Predict(c2.get(), req, &resp).ok());
}

struct BadJob {
  const char* yaml;
  const char* field;  // the field path the error names
};

TEST_F(ServiceTest, MalformedSpecsAreInvalidArgumentNamingTheField) {
  const std::string base = "hardware: h100-sxm\n";
  const BadJob cases[] = {
      {"hardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.model: required"},
      {"model: llama3-8b\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.hardware: required"},
      {"model: nope\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.model.preset"},
      {"model: llama3-8b\nhardware: nope\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.hardware.preset"},
      {"model: {hf_config: /etc/passwd}\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.model.hf_config"},
      {"model: llama3-8b\nhardware: h100-sxm\ntraining: {seq_length: 64, global_batch_size: 8}", "job.cluster.gpu_count"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: -8}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.cluster.gpu_count"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8, gpus_per_node: -1}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.cluster.gpus_per_node"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8, price_per_gpu_hour_usd: -2}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.cluster.price_per_gpu_hour_usd"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {global_batch_size: 8}", "job.training.seq_length"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64}", "job.training.global_batch_size"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, micro_batch_size: -1}", "job.training.micro_batch_size"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 12}", "job.training.global_batch_size"},
      {"model: llama3-8b\nhardware: a100-80gb\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, precision: {gemm: fp8}}", "job.training.precision.gemm"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, precision: {gemm: int8}}", "job.training.precision.gemm"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, precision: {params: fp8}}", "job.training.precision.params"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, precision: {grads: fp8}}", "job.training.precision.grads"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, dataset_tokens: -1}", "job.training.dataset_tokens"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 64, global_batch_size: 8, train_iters: -1}", "job.training.train_iters"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 24}\nparallelism: {tp: 3}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.parallelism.tp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {tp: -1, dp: 1}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.parallelism.tp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 64}\nparallelism: {pp: 64}\ntraining: {seq_length: 64, global_batch_size: 64}", "job.parallelism.pp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {vpp: 2}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.parallelism.vpp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {cp: 8}\ntraining: {seq_length: 100, global_batch_size: 8}", "job.parallelism.cp"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {ep: 2}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.parallelism.ep"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 16}\nparallelism: {tp: 2, dp: 4}\ntraining: {seq_length: 64, global_batch_size: 8}", "job.cluster.gpu_count"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nparallelism: {pp: 2, vpp: 2}\ntraining: {seq_length: 64, global_batch_size: 4}", "job.training.global_batch_size"},
      {"model: {shape: {layers: 0, hidden_size: 64, attention_heads: 4, vocab_size: 10, ffn_type: gelu}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.model.shape.layers"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, vocab_size: 10}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.model.shape.ffn_type"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, kv_heads: 3, vocab_size: 10, ffn_type: gelu}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.model.shape.kv_heads"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, vocab_size: 0, ffn_type: gelu}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.model.shape.vocab_size"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, vocab_size: 10, ffn_type: swiglu, moe: {routed_experts: 4, top_k: 0, expert_ffn_hidden_size: 8}}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.model.shape.moe.top_k"},
      {"model: {shape: {layers: 2, hidden_size: 64, attention_heads: 4, vocab_size: 10, ffn_type: swiglu, mla: {kv_lora_rank: 8}}}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.model.shape.mla"},
      {"model: llama3-8b\nhardware: {spec: {name: x, peak: [{dtype: bf16, flops_per_s: 1e15}]}}\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.hardware.spec.hbm_capacity_bytes"},
      {"model: llama3-8b\nhardware: {spec: {name: x, peak: [{dtype: bf16, flops_per_s: -1}]}}\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.hardware.spec.peak[0].flops_per_s"},
      {"model: llama3-8b\nhardware: {spec: {name: x, peak: [{dtype: bf16, flops_per_s: 1e15}], hbm_capacity_bytes: 8e10, hbm_bandwidth_bytes_per_s: 3e12, intra_node_bandwidth_bytes_per_s: 4e11, inter_node_bandwidth_bytes_per_s: 5e10, gpus_per_node: 8}}\ncluster: {gpu_count: 1}\ntraining: {seq_length: 64, global_batch_size: 1}", "job.hardware: x has no reference profile"},
  };
  for (const BadJob& c : cases) {
    SCOPED_TRACE(c.yaml);
    grpc::Status st = PredictStatus(Spec(c.yaml));
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(c.field));
  }
  (void)base;
}

TEST_F(ServiceTest, MalformedRequestFieldsAreInvalidArgument) {
  auto pf = [&](void (*mutate)(v1::PreflightPolicy*), const char* field) {
    v1::PreflightRequest req;
    *req.mutable_job() = Spec(kJob);
    mutate(req.mutable_policy());
    v1::PreflightResponse resp;
    auto ctx = client_->Context();
    grpc::Status st = client_->stub().Preflight(ctx.get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT) << field;
    EXPECT_THAT(st.error_message(), HasSubstr(field));
  };
  pf([](v1::PreflightPolicy* p) { p->set_min_mfu(1.5); }, "policy.min_mfu");
  pf([](v1::PreflightPolicy* p) { p->set_max_memory_fraction(-0.1); }, "policy.max_memory_fraction");
  pf([](v1::PreflightPolicy* p) { p->set_max_cost_per_run_usd(-1); }, "policy.max_cost_per_run_usd");
  pf([](v1::PreflightPolicy* p) { p->set_max_step_time_s(-1); }, "policy.max_step_time_s");
  pf([](v1::PreflightPolicy* p) { p->add_warn_on_bottlenecks(static_cast<v1::BottleneckKind>(42)); },
     "policy.warn_on_bottlenecks");

  auto rr = [&](void (*mutate)(v1::ReportRunRequest*), const char* field, grpc::StatusCode code) {
    v1::ReportRunRequest req;
    *req.mutable_job() = Spec(kJob);
    req.set_measured_step_time_s(3);
    mutate(&req);
    v1::ReportRunResponse resp;
    grpc::Status st = Report(req, &resp);
    EXPECT_EQ(st.error_code(), code) << field << ": " << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(field));
  };
  rr([](v1::ReportRunRequest* r) { r->set_measured_step_time_s(0); }, "measured_step_time_s", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { r->set_measured_step_time_s(-3); }, "measured_step_time_s", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { r->set_measured_tokens_per_s(5); }, "measured_tokens_per_s", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { r->set_gpu_count(-1); }, "gpu_count", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { r->clear_job(); }, "prediction_id", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { r->set_prediction_id("pred-x"); }, "job", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { r->clear_job(); r->set_prediction_id("pred-unknown"); }, "prediction_id",
     grpc::NOT_FOUND);
  rr([](v1::ReportRunRequest* r) {
       *r->mutable_start_time() = TimeUtil::SecondsToTimestamp(2000);
       *r->mutable_end_time() = TimeUtil::SecondsToTimestamp(1000);
     }, "end_time", grpc::INVALID_ARGUMENT);
  rr([](v1::ReportRunRequest* r) { (*r->mutable_labels())[""] = "x"; }, "labels", grpc::INVALID_ARGUMENT);

  v1::ListRunsRequest bad_page;
  bad_page.set_page_token("garbage");
  v1::ListRunsResponse lr;
  auto c1 = client_->Context();
  grpc::Status st = client_->stub().ListRuns(c1.get(), bad_page, &lr);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("page_token"));
  v1::ListRunsRequest bad_label;
  bad_label.set_label("nolabel");
  auto c2 = client_->Context();
  EXPECT_THAT(client_->stub().ListRuns(c2.get(), bad_label, &lr).error_message(), HasSubstr("label"));
  v1::ListRunsRequest bad_size;
  bad_size.set_page_size(5000);
  auto c3 = client_->Context();
  EXPECT_THAT(client_->stub().ListRuns(c3.get(), bad_size, &lr).error_message(), HasSubstr("page_size"));

  v1::PutProfileRequest put;
  put.set_name("bad name!");
  v1::PutProfileResponse pr;
  auto c4 = client_->Context();
  EXPECT_THAT(client_->stub().PutProfile(c4.get(), put, &pr).error_message(), HasSubstr("name"));
  put.set_name("ok");
  put.mutable_profile()->add_gemm()->set_dtype(v1::D_TYPE_BF16);
  put.mutable_profile()->set_hbm_bandwidth_bytes_per_s(1e12);
  auto c5 = client_->Context();
  st = client_->stub().PutProfile(c5.get(), put, &pr);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("profile.gemm[0].flops_per_s"));
  v1::GetRunRequest gr;
  v1::GetRunResponse gresp;
  auto c6 = client_->Context();
  EXPECT_THAT(client_->stub().GetRun(c6.get(), gr, &gresp).error_message(), HasSubstr("run_id"));
  gr.set_run_id("run-missing");
  auto c7 = client_->Context();
  EXPECT_EQ(client_->stub().GetRun(c7.get(), gr, &gresp).error_code(), grpc::NOT_FOUND);
}

// Review L1: ReportRun builds and stores the run on the writer thread; a request that is malformed
// by itself (both or neither of prediction_id and job, a config.json path, a profile version
// without a name) is refused on the handler thread, INVALID_ARGUMENT naming the field, also when
// the writer's queue is full (it was UNAVAILABLE "write queue is full" then).
TEST_F(ServiceTest, MalformedReportIsInvalidArgumentWhenTheWriteQueueIsFull) {
  configure_ = [](ServeOptions& o) { o.max_queued_writes = 1; };
  Restart();
  // The writer blocks on the store's write lock (held here; SQLite's busy timeout is 2 s), with
  // one more write queued behind it: the queue of 1 is full.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "store.db").string().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  v1::ReportRunRequest good;
  *good.mutable_job() = Spec(kJob);
  good.set_measured_step_time_s(3);
  std::vector<std::thread> blocked;
  for (int i = 0; i < 2; ++i) {
    blocked.emplace_back([&] {
      v1::ReportRunResponse r;
      (void)Report(good, &r);  // OK or UNAVAILABLE (busy), once the lock is released or times out
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  v1::ReportRunResponse resp;
  grpc::Status full = Report(good, &resp);
  EXPECT_EQ(full.error_code(), grpc::UNAVAILABLE) << full.error_message();  // the queue is full
  EXPECT_THAT(full.error_message(), HasSubstr("write queue is full"));

  struct Case {
    const char* what;
    std::function<void(v1::ReportRunRequest*)> mutate;
    const char* field;
  };
  const Case cases[] = {
      {"both", [](v1::ReportRunRequest* r) { r->set_prediction_id("pred-x"); }, "job: give prediction_id or job"},
      {"neither", [](v1::ReportRunRequest* r) { r->clear_job(); }, "prediction_id: one of prediction_id or job"},
      {"hf_config", [](v1::ReportRunRequest* r) { r->mutable_job()->mutable_model()->set_hf_config("config.json"); },
       "job.model.hf_config"},
      {"profile version", [](v1::ReportRunRequest* r) { r->mutable_profile()->set_version(2); },
       "profile.version: needs profile.name"},
      {"negative profile version",
       [](v1::ReportRunRequest* r) {
         r->mutable_profile()->set_name("slow-lab");
         r->mutable_profile()->set_version(-1);
       },
       "profile.version: must be >= 0"},
  };
  for (const Case& c : cases) {
    v1::ReportRunRequest req = good;
    c.mutate(&req);
    grpc::Status st = Report(req, &resp);
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT) << c.what << ": " << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(c.field)) << c.what;
  }
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  for (std::thread& t : blocked) t.join();
  // With the queue free again, a good report is stored.
  grpc::Status st = Report(good, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST(Policy, VerdictIsTheWorstReason) {
  v1::Prediction p;
  p.set_mfu(0.4);
  p.set_step_time_s(10);
  p.mutable_memory()->set_fits(true);
  p.mutable_memory()->set_total_bytes(70e9);
  p.mutable_memory()->set_capacity_bytes(80e9);
  p.mutable_bottleneck()->set_kind(v1::BOTTLENECK_KIND_PIPELINE_BUBBLE);
  v1::PreflightPolicy policy;
  EXPECT_EQ(EvaluatePolicy(p, policy).verdict, v1::VERDICT_PASS);
  policy.add_warn_on_bottlenecks(v1::BOTTLENECK_KIND_PIPELINE_BUBBLE);
  EXPECT_EQ(EvaluatePolicy(p, policy).verdict, v1::VERDICT_WARN);
  policy.set_max_memory_fraction(0.85);  // 70/80 = 0.875
  PolicyResult r = EvaluatePolicy(p, policy);
  EXPECT_EQ(r.verdict, v1::VERDICT_FAIL);
  ASSERT_EQ(r.reasons.size(), 2u);
  EXPECT_EQ(r.reasons[0].rule(), "max_memory_fraction");
  EXPECT_NEAR(r.reasons[0].value(), 0.875, 1e-12);
  policy.set_max_cost_per_run_usd(100);  // no dataset tokens: cannot check -> WARN
  r = EvaluatePolicy(p, policy);
  ASSERT_EQ(r.reasons.size(), 3u);
  EXPECT_EQ(r.reasons[1].rule(), "max_cost_per_run_usd");
  EXPECT_EQ(r.reasons[1].verdict(), v1::VERDICT_WARN);
  EXPECT_EQ(r.reasons[2].rule(), "bottleneck");
}

// The step-time and run-cost rules by hand (plugin/policy.h; SPANK max_step_time= and
// max_cost_per_run=): a 10 s step breaches a 9.5 s limit and not a 10.5 s one; a run of 1000
// steps at $5 a step ($5000) breaches a $4000 cap and not a $6000 one; limits_warn_only makes
// each breach a WARN.
TEST(Policy, MaxStepTimeAndRunCostBreachAboveTheirLimitsOnly) {
  v1::Prediction p;
  p.set_mfu(0.4);
  p.set_step_time_s(10);
  p.mutable_memory()->set_fits(true);
  p.mutable_memory()->set_total_bytes(40e9);
  p.mutable_memory()->set_capacity_bytes(80e9);
  p.mutable_cost()->set_steps_per_run(1000);
  p.mutable_cost()->set_per_run_usd(5000);
  v1::PreflightPolicy policy;
  policy.set_max_step_time_s(9.5);
  PolicyResult r = EvaluatePolicy(p, policy);
  EXPECT_EQ(r.verdict, v1::VERDICT_FAIL);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0].rule(), "max_step_time_s");
  EXPECT_DOUBLE_EQ(r.reasons[0].value(), 10);
  EXPECT_DOUBLE_EQ(r.reasons[0].limit(), 9.5);
  policy.set_max_step_time_s(10.5);
  EXPECT_EQ(EvaluatePolicy(p, policy).verdict, v1::VERDICT_PASS);

  policy.set_max_cost_per_run_usd(4000);
  r = EvaluatePolicy(p, policy);
  EXPECT_EQ(r.verdict, v1::VERDICT_FAIL);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_EQ(r.reasons[0].rule(), "max_cost_per_run_usd");
  EXPECT_DOUBLE_EQ(r.reasons[0].value(), 5000);
  policy.set_max_cost_per_run_usd(6000);
  EXPECT_EQ(EvaluatePolicy(p, policy).verdict, v1::VERDICT_PASS);

  policy.set_max_cost_per_run_usd(4000);
  policy.set_max_step_time_s(9.5);
  policy.set_limits_warn_only(true);
  r = EvaluatePolicy(p, policy);
  EXPECT_EQ(r.verdict, v1::VERDICT_WARN);
  EXPECT_EQ(r.reasons.size(), 2u);
}

}  // namespace
}  // namespace stepcast
