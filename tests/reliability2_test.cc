// Regression tests of the second reliability review (../shared/reference/reliability_review_2.md,
// issue 26): each test reproduces a finding's input (inlined here; the review's reproducers are
// in ../shared/reference/reliability_inputs_2/) and checks the bound, the clear error or the
// answer. Each failed before its fix (noted per test; docs/RELIABILITY.md "Round 2").
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/search.h"
#include "core/search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugin/client.h"
#include "plugin/service.h"
#include "plugin/store.h"
#include "proto/codec.h"
#include "proto/launch_args.h"
#include "proto/search_codec.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

fs::path TempDir(const std::string& tag) {
  fs::path d = fs::path(::testing::TempDir()) /
               ("rel2-" + tag + "-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The review's job_layers_*.yaml: a dense 8B-like shape with `layers` layers on 8 H100s.
std::string LayersJobYaml(const std::string& layers, int64_t gpus = 8, int64_t global_batch = 64) {
  return absl::StrCat(
      "name: j\n"
      "model: {shape: {name: m, layers: ", layers,
      ", hidden_size: 4096, attention_heads: 32, kv_heads: 8, ffn_hidden_size: 14336, vocab_size: 128256, "
      "ffn_type: swiglu}}\n"
      "hardware: h100-sxm\n"
      "cluster: {gpu_count: ", gpus, "}\n"
      "parallelism: {tp: 1, pp: 1}\n"
      "training: {seq_length: 4096, global_batch_size: ", global_batch, ", micro_batch_size: 1}\n");
}

absl::StatusOr<SearchBase> BaseFromYaml(const std::string& yaml) {
  v1::JobSpec spec;
  if (absl::Status s = ParseMessage(yaml, SpecFormat::kYaml, "test.yaml", &spec); !s.ok()) return s;
  return SearchBaseFromSpec(spec, testing::BuiltinCatalog(), "", nullptr);
}

// ---------------------------------------------------------------------------------------------
// N1: `layers: 1e10` made the layout search loop for ever (VppOptions was O(layers) per work
// unit and checked no deadline); every Preflight runs that search.

// Before: 2e8 layers took 18.3 s (the VPP loop, 2e8/pp steps per unit) for a 0.5 s deadline,
// and 1e10 never returned. Now refused at once, naming the field and the cap.
TEST(Reliability2N1, HugeLayerCountIsRefusedNamingTheCap) {
  for (const char* layers : {"200000000", "10000000000", "9e15"}) {
    absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml(layers));
    ASSERT_TRUE(base.ok()) << layers << ": " << base.status();
    SearchOptions o;
    o.space.gpu_counts = {8};
    o.deadline = Clock::now() + std::chrono::milliseconds(500);
    int progress_calls = 0;
    o.progress = [&](const SearchProgress&) { ++progress_calls; };
    const auto t0 = Clock::now();
    absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
    EXPECT_LT(SecondsSince(t0), 1.0) << layers;
    ASSERT_FALSE(r.ok()) << layers;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("model.shape.layers"));
    EXPECT_THAT(r.status().message(), HasSubstr("cap of 65536"));
    EXPECT_LT(progress_calls, 20) << "the progress line spun past the deadline";
  }
}

// The caps on every input that drives the enumeration, each naming its field.
TEST(Reliability2N1, InputsThatDriveTheWorkAreCapped) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("32", 8, int64_t{1} << 40));
  ASSERT_TRUE(base.ok()) << base.status();
  SearchOptions o;
  o.space.gpu_counts = {8};
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("training.global_batch_size: 1099511627776 is above the layout search's cap"));

  base = BaseFromYaml(LayersJobYaml("32"));
  ASSERT_TRUE(base.ok());
  o.top_n = kSearchMaxTopN + 1;
  r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("top_n: 1001 is above the layout search's cap of 1000"));
  o.top_n = 1;
  o.threads = -5;  // was silently "one per core" (N13)
  r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("threads: -5 must be in [0, 256]"));
  o.threads = 0;
  o.space.gpu_counts.assign(kSearchMaxGpuCounts + 1, 8);
  for (size_t i = 0; i < o.space.gpu_counts.size(); ++i) o.space.gpu_counts[i] = 8 * static_cast<int64_t>(i + 1);
  r = SearchLayouts(base->job, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("4097 GPU counts; at most 4096"));
  // A range of one-GPU nodes up to 2^24 is counted, not built (16M entries), before it is refused.
  const auto t0 = Clock::now();
  absl::StatusOr<std::vector<int64_t>> counts = GpuCountsInRange(1, int64_t{1} << 24, 1, "--gpus");
  EXPECT_LT(SecondsSince(t0), 0.5);
  ASSERT_FALSE(counts.ok());
  EXPECT_THAT(counts.status().message(), HasSubstr("holds 16777216 GPU counts; at most 4096"));
}

// A wide space at the layer cap whose layouts are all pruned by the memory bound (65,536
// layers: nothing fits): the loops of a work unit checked the deadline only between
// evaluations, so a pruned unit ran to its end. Here each unit is short, so this passed before
// the fix too (0.9 s for a 0.7 s limit); it guards the checks at every loop level. The failing-
// before case is HugeLayerCountIsRefusedNamingTheCap (2e8 layers: 18.3 s for a 0.5 s limit).
TEST(Reliability2N1, DeadlineIsHonouredWhenEveryLayoutIsPruned) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("65536", 8, 4096));
  ASSERT_TRUE(base.ok()) << base.status();
  absl::StatusOr<std::vector<int64_t>> counts = GpuCountsInRange(8, 32768, 8, "gpus");
  ASSERT_TRUE(counts.ok());
  SearchOptions o;
  o.space.gpu_counts = *counts;
  o.space.all_schedules = true;
  o.space.overlap_off = true;
  o.deadline = Clock::now() + std::chrono::milliseconds(700);
  const auto t0 = Clock::now();
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  const double secs = SecondsSince(t0);
  EXPECT_LT(secs, 1.5);
  if (r.ok()) {
    EXPECT_TRUE(r->partial);
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  }
}

// Cancellation (a cancelled RPC, a server shutting down) reaches the search while it enumerates
// and while it evaluates.
TEST(Reliability2N1, CancellationStopsTheSearch) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("65536", 8, 4096));
  ASSERT_TRUE(base.ok()) << base.status();
  SearchOptions o;
  o.space.gpu_counts = *GpuCountsInRange(8, 32768, 8, "gpus");
  o.space.all_schedules = true;
  const auto t0 = Clock::now();
  o.cancelled = [&] { return SecondsSince(t0) > 0.5; };
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  EXPECT_LT(SecondsSince(t0), 1.5);
  if (r.ok()) {
    EXPECT_TRUE(r->partial);
    EXPECT_THAT(r->partial_reason, HasSubstr("cancelled"));
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  }
}

// Preflight's suggestion: the 2 s budget is kept whatever the layer count.
TEST(Reliability2N1, SuggestionSearchKeepsItsDeadline) {
  for (const char* layers : {"200000000", "65536"}) {
    absl::StatusOr<Job> job = testing::JobFromYaml(LayersJobYaml(layers));
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<Prediction> p = Predict(*job);
    ASSERT_TRUE(p.ok()) << p.status();
    const auto t0 = Clock::now();
    absl::StatusOr<std::optional<v1::LayoutSuggestion>> s =
        SuggestLayout(*job, *p, Clock::now() + std::chrono::milliseconds(500));
    EXPECT_LT(SecondsSince(t0), 1.0) << layers;
    EXPECT_TRUE(s.ok()) << s.status();
  }
}

// `stepcast search --time-limit inf` stopped at once (the double -> duration cast overflowed),
// `nan` meant no limit; `plan` had no --time-limit at all.
TEST(Reliability2N1, TimeLimitFlagsAreCheckedAndHonoured) {
  const fs::path dir = TempDir("timelimit");
  const std::string job = (dir / "job.yaml").string();
  {
    std::ofstream(job) << LayersJobYaml("80", 64, 1024);
  }
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), 1e308, -1.0}) {
    cli::SearchArgs a;
    a.job_path = job;
    a.quiet = true;
    a.time_limit_s = bad;
    ::testing::internal::CaptureStderr();
    const int rc = cli::Search(a, testing::BuiltinCatalog());
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << bad;
    EXPECT_THAT(err, HasSubstr("--time-limit")) << bad;
  }
  // plan over 1..16384 GPUs of a wide job: stops at the limit, says so.
  cli::PlanOptions po;
  po.job_path = (dir / "wide.yaml").string();
  {
    std::ofstream(po.job_path) << LayersJobYaml("65536", 8, 16384);
  }
  po.hardware = {"h100-sxm"};
  po.target_tokens_per_s = 1e12;  // never reached: every count is searched
  po.time_limit_s = 1.0;
  const auto t0 = Clock::now();
  absl::StatusOr<std::string> out = cli::Plan(po, testing::BuiltinCatalog());
  EXPECT_LT(SecondsSince(t0), 2.5);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("PARTIAL: the time limit (--time-limit 1 s)"));
  po.time_limit_s = std::numeric_limits<double>::infinity();
  out = cli::Plan(po, testing::BuiltinCatalog());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("--time-limit"));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// The service.

constexpr char kAdmin[] = "admin-token-for-tests";
constexpr char kReporter[] = "report-token-for-tests";

class Reliability2Service : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("svc");
    std::ofstream(dir_ / "admin") << kAdmin << "\n";
    std::ofstream(dir_ / "report") << kReporter << "\n";
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(ServeOptions o = {}) {
    o.listen_address = "127.0.0.1:0";
    o.db_path = (dir_ / "store.db").string();
    o.token_file = (dir_ / "admin").string();
    o.report_token_file = (dir_ / "report").string();
    o.log = nullptr;
    auto s = StepcastServer::Start(o, testing::BuiltinCatalog());
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  Client Connect(const std::string& token = "", int deadline_ms = 10000) {
    ClientOptions c;
    c.address = server_->address();
    c.token = token;
    c.deadline_ms = deadline_ms;
    return *Client::Connect(c);
  }
  static v1::JobSpec Example(const std::string& name = "llama3-70b-h100.yaml") {
    v1::JobSpec spec;
    EXPECT_TRUE(ParseMessageFile(std::string(STEPCAST_SOURCE_DIR) + "/examples/" + name, &spec).ok());
    return spec;
  }
  static v1::JobSpec FromYaml(const std::string& yaml) {
    v1::JobSpec spec;
    EXPECT_TRUE(ParseMessage(yaml, SpecFormat::kYaml, "test.yaml", &spec).ok());
    return spec;
  }
  // A maximal Search: 8..32768 GPUs, every schedule, overlap off, for `seconds`.
  static v1::SearchRequest WideSearch(double seconds) {
    v1::SearchRequest req;
    *req.mutable_job() = Example();
    req.mutable_options()->set_time_limit_s(seconds);
    v1::SearchSpaceSpec* sp = req.mutable_options()->mutable_space();
    sp->set_min_gpus(8);
    sp->set_max_gpus(32768);
    sp->set_all_schedules(true);
    sp->set_overlap_off(true);
    return req;
  }
  // Predict every 100 ms for `seconds`: (calls, failures, first failure's message).
  struct Probes {
    int calls = 0, failures = 0;
    std::string first_error;
  };
  Probes ProbePredict(double seconds) {
    Probes out;
    v1::PredictRequest req;
    *req.mutable_job() = Example();
    const auto t0 = Clock::now();
    while (SecondsSince(t0) < seconds) {
      Client c = Connect("", 2000);  // a new channel each time, as the review's probes
      v1::PredictResponse resp;
      const grpc::Status st = c.stub().Predict(c.Context().get(), req, &resp);
      ++out.calls;
      if (!st.ok()) {
        if (out.failures++ == 0) out.first_error = absl::StrCat(st.error_code(), " ", st.error_message());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return out;
  }

  fs::path dir_;
  std::unique_ptr<StepcastServer> server_;
};

// N1 through the service: a Preflight of a 2e8-layer job (no token needed) kept a handler thread
// searching 18 s past the client's deadline, 1e10 for ever, and SIGTERM could not stop the
// server. Now the verdict comes at once and the server stops at once.
TEST_F(Reliability2Service, HugeLayerPreflightAnswersAndTheServerStops) {
  Start();
  Client c = Connect("", 3000);  // the SPANK plugin's deadline
  v1::PreflightRequest req;
  *req.mutable_job() = FromYaml(LayersJobYaml("200000000"));
  v1::PreflightResponse resp;
  const auto t0 = Clock::now();
  const grpc::Status st = c.stub().Preflight(c.Context().get(), req, &resp);
  EXPECT_LT(SecondsSince(t0), 1.5);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(resp.has_suggestion());
  const auto t1 = Clock::now();
  server_->Shutdown(std::chrono::seconds(2));
  server_->Wait();
  EXPECT_LT(SecondsSince(t1), 3.0);
}

// N2: 2 unauthenticated Search calls failed 226 of 266 Predict probes (the watchdog took the busy
// handler threads for a dead listener and rebuilt the server, cancelling every call; the
// searches ran on), 4 failed all of them. Now the searches run on their own low-priority
// threads, one at a time here, the rest refused with a retry-after; Predict answers throughout
// and the listener is never rebuilt.
TEST_F(Reliability2Service, FourMaximalSearchesLeavePredictAnswering) {
  ServeOptions o;
  o.watchdog_period_ms = 200;
  Start(o);
  std::vector<std::thread> searches;
  std::atomic<int> ok{0}, exhausted{0}, other{0};
  std::string retry_after, other_error;
  std::mutex mu;
  for (int i = 0; i < 4; ++i) {
    searches.emplace_back([&] {
      Client c = Connect("", 30000);
      auto ctx = c.Context();
      v1::SearchResponse resp;
      const grpc::Status st = c.stub().Search(ctx.get(), WideSearch(4.0), &resp);
      std::lock_guard<std::mutex> l(mu);
      if (st.ok()) {
        ++ok;
      } else if (st.error_code() == grpc::RESOURCE_EXHAUSTED) {
        ++exhausted;
        auto it = ctx->GetServerTrailingMetadata().find("retry-after");
        if (it != ctx->GetServerTrailingMetadata().end()) retry_after.assign(it->second.data(), it->second.size());
        EXPECT_THAT(st.error_message(), HasSubstr("retry after"));
      } else {
        ++other;
        other_error = st.error_message();
      }
    });
  }
  const Probes p = ProbePredict(6.0);
  for (auto& t : searches) t.join();
  EXPECT_EQ(p.failures, 0) << p.failures << " of " << p.calls << ": " << p.first_error;
  EXPECT_EQ(server_->listener_restarts(), 0);
  EXPECT_GE(ok.load(), 1);
  EXPECT_EQ(other.load(), 0) << other_error;
  EXPECT_EQ(ok.load() + exhausted.load(), 4);
  if (exhausted.load() > 0) EXPECT_FALSE(retry_after.empty());
}

// Preflight always has a thread: its verdict comes in time beside running searches (its
// suggestion is best effort).
TEST_F(Reliability2Service, PreflightAnswersBesideSearches) {
  Start();
  std::vector<std::thread> searches;
  for (int i = 0; i < 2; ++i) {
    searches.emplace_back([&] {
      Client c = Connect("", 30000);
      v1::SearchResponse resp;
      (void)c.stub().Search(c.Context().get(), WideSearch(4.0), &resp);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 5; ++i) {
    Client c = Connect("", 3000);
    v1::PreflightRequest req;
    *req.mutable_job() = Example();
    v1::PreflightResponse resp;
    const auto t0 = Clock::now();
    const grpc::Status st = c.stub().Preflight(c.Context().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_LT(SecondsSince(t0), 2.9);
    EXPECT_NE(resp.verdict(), v1::VERDICT_UNSPECIFIED);
  }
  for (auto& t : searches) t.join();
}

// N13: Timestamp seconds far outside years 1..9999 overflowed TimestampToMicroseconds (undefined
// behaviour) in ReportRun and ListRuns.
TEST_F(Reliability2Service, TimestampsOutOfRangeAreRefused) {
  Start();
  Client c = Connect(kReporter);
  v1::ReportRunRequest rr;
  *rr.mutable_job() = Example();
  rr.set_measured_step_time_s(10);
  rr.mutable_start_time()->set_seconds(int64_t{9223372036854775});
  v1::ReportRunResponse resp;
  grpc::Status st = c.stub().ReportRun(c.Context().get(), rr, &resp);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("start_time: out of range"));
  rr.clear_start_time();
  rr.mutable_end_time()->set_nanos(-5);
  st = c.stub().ReportRun(c.Context().get(), rr, &resp);
  EXPECT_THAT(st.error_message(), HasSubstr("end_time: out of range"));
  v1::ListRunsRequest lr;
  lr.mutable_max_start_time()->set_seconds(std::numeric_limits<int64_t>::min());
  v1::ListRunsResponse lresp;
  st = c.stub().ListRuns(c.Context().get(), lr, &lresp);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("max_start_time: out of range"));
}

// N3: a 261 KB job name with top_n 1000 built a 264 MB reply (580 MB of server memory per call)
// before the send failed RESOURCE_EXHAUSTED (logged OK). Now the name is capped and a reply is
// fitted under the message limit while it is built: here a 1 MiB limit, 1000 top layouts.
TEST_F(Reliability2Service, SearchReplyIsBoundedBeforeItIsBuilt) {
  ServeOptions o;
  o.max_message_bytes = 1 << 20;
  Start(o);
  Client c = Connect("", 30000);
  v1::SearchRequest req;
  *req.mutable_job() = Example();
  req.mutable_job()->set_name(std::string(261000, 'n'));
  req.mutable_options()->set_top_n(1000);
  req.mutable_options()->mutable_space()->set_min_gpus(8);
  req.mutable_options()->mutable_space()->set_max_gpus(2048);
  req.mutable_options()->set_time_limit_s(5);
  v1::SearchResponse resp;
  grpc::Status st = c.stub().Search(c.Context().get(), req, &resp);
  EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("job.name: 261000 bytes, above the service's limit of 1024"));
  req.mutable_job()->set_name(std::string(1000, 'n'));
  st = c.stub().Search(c.Context().get(), req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_LE(resp.ByteSizeLong(), size_t{3} << 18);  // 3/4 of the 1 MiB limit
  EXPECT_TRUE(resp.result().lists_thinned());
  ASSERT_GT(resp.result().top_size(), 10);
  EXPECT_EQ(resp.result().top(0).prediction().job_name(), "");  // not repeated per candidate
}

// The same bound in the codec, on a result with many layouts per list.
TEST(Reliability2N3, SearchResultToProtoKeepsUnderTheLimit) {
  absl::StatusOr<SearchBase> base = BaseFromYaml(LayersJobYaml("80", 64, 1024));
  ASSERT_TRUE(base.ok()) << base.status();
  SearchOptions o;
  o.space.gpu_counts = *GpuCountsInRange(8, 1024, 8, "gpus");
  o.top_n = 300;
  o.deadline = Clock::now() + std::chrono::seconds(2);
  absl::StatusOr<SearchResult> r = SearchLayouts(base->job, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::SearchResult whole = SearchResultToProto(*r, nullptr);
  for (size_t limit : {size_t{200} << 10, size_t{50} << 10, whole.ByteSizeLong() + 1}) {
    const v1::SearchResult fitted = SearchResultToProto(*r, nullptr, limit);
    EXPECT_LE(fitted.ByteSizeLong(), limit);
    EXPECT_EQ(fitted.lists_thinned(), limit < whole.ByteSizeLong()) << limit;
    if (fitted.top_size() > 0) EXPECT_EQ(fitted.top(0).layout().summary(), whole.top(0).layout().summary());
  }
}

// N7: an unauthenticated Preflight stored every job up to the 262,144-byte request cap, twice
// (the job and prediction.job_name): 536 KB per call, up to 1,000,000 rows (~536 GB). Now a
// caller without a token stores at most 16 KiB (here: nothing for a 200 KB job; its verdict has
// no prediction_id), a token holder the whole job, and job_name is not stored twice.
TEST_F(Reliability2Service, UnauthenticatedPreflightStoresABoundedRecord) {
  Start();
  auto preflight = [&](const std::string& token, size_t cluster_name_bytes) {
    Client c = Connect(token);
    v1::PreflightRequest req;
    *req.mutable_job() = Example();
    req.mutable_job()->set_name("bounded");
    req.mutable_job()->mutable_cluster()->set_name(std::string(cluster_name_bytes, 'c'));
    v1::PreflightResponse resp;
    const grpc::Status st = c.stub().Preflight(c.Context().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_NE(resp.verdict(), v1::VERDICT_UNSPECIFIED);
    return resp.prediction_id();
  };
  EXPECT_EQ(preflight("", 200000), "");           // no token, 200 KB: verdict only
  const std::string small = preflight("", 100);   // no token, small: stored
  const std::string big = preflight(kReporter, 200000);  // a token holder: stored whole
  EXPECT_FALSE(small.empty());
  EXPECT_FALSE(big.empty());
  server_->Shutdown(std::chrono::seconds(2));  // the writer has written
  server_->Wait();
  absl::StatusOr<std::unique_ptr<RunStore>> store = RunStore::Open((dir_ / "store.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->CountPredictions(), 2);
  absl::StatusOr<RunStore::StoredPrediction> p = (*store)->GetPrediction(small);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prediction.job_name(), "");  // stored once, with the job
  EXPECT_EQ(p->job.name(), "bounded");
  EXPECT_LT(*(*store)->PredictionBytes(), 200000 + 2 * (16 << 10));
}

// N7: the store's byte cap beside its row cap: the oldest go first.
TEST(Reliability2N7, StoreByteCapPrunesTheOldest) {
  const fs::path dir = TempDir("bytes");
  absl::StatusOr<std::unique_ptr<RunStore>> store = RunStore::Open((dir / "s.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  RunStore::StoredPrediction p;
  p.job.set_name(std::string(10000, 'x'));
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*store)->PutPrediction(absl::StrCat("pred-", 1000 + i), p, 1000 + i).ok());
  }
  EXPECT_GE(*(*store)->PredictionBytes(), 100 * 10000);
  ASSERT_TRUE((*store)->PrunePredictions(0, 1000000, 200000).ok());
  EXPECT_LE(*(*store)->PredictionBytes(), 200000);
  EXPECT_GE(*(*store)->PredictionBytes(), 180000);
  EXPECT_TRUE((*store)->GetPrediction("pred-1099").ok());                                      // newest kept
  EXPECT_EQ((*store)->GetPrediction("pred-1000").status().code(), absl::StatusCode::kNotFound);  // oldest gone
  fs::remove_all(dir);
}

// N11: a store with a corrupt page mid-file started, accepted writes, and failed every ListRuns
// ("database disk image is malformed"). Now it is refused at start, naming the cause.
TEST(Reliability2N11, CorruptPageIsRefusedAtStart) {
  const fs::path dir = TempDir("corrupt");
  const std::string db = (dir / "s.db").string();
  {
    absl::StatusOr<std::unique_ptr<RunStore>> store = RunStore::Open(db);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 400; ++i) {
      v1::Run run;
      run.set_run_id(absl::StrCat("run-", i));
      run.set_cluster(std::string(1000, 'c'));
      (*run.mutable_labels())["i"] = absl::StrCat(i);
      ASSERT_TRUE((*store)->PutRun(run).ok());
    }
  }
  {
    sqlite3* h = nullptr;  // fold the WAL into the file, as after a clean stop
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE);", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  ASSERT_GT(fs::file_size(db), 50 * 4096u);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20 * 4096);
    std::string garbage(30 * 4096, '\0');
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 2654435761u) >> 13);
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  absl::StatusOr<std::unique_ptr<RunStore>> store = RunStore::Open(db);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr("the store is corrupt"));
  EXPECT_THAT(store.status().message(), HasSubstr(db));
  fs::remove_all(dir);
}

// N15: an unknown verdict from a (newer) server printed "UNSPECIFIED".
class FakePreflight final : public v1::StepcastService::Service {
 public:
  explicit FakePreflight(v1::PreflightResponse r) : response_(std::move(r)) {}
  grpc::Status Preflight(grpc::ServerContext*, const v1::PreflightRequest*, v1::PreflightResponse* out) override {
    *out = response_;
    return grpc::Status::OK;
  }

 private:
  v1::PreflightResponse response_;
};

TEST(Reliability2N15, CliNamesAnUnknownVerdict) {
  v1::PreflightResponse r;
  r.set_verdict(static_cast<v1::Verdict>(7));
  v1::Prediction& p = *r.mutable_prediction();
  p.set_step_time_s(1);
  p.set_tokens_per_step(1e6);
  p.set_tokens_per_s(1e6);
  p.set_mfu(0.4);
  p.mutable_memory()->set_fits(true);
  FakePreflight fake(r);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&fake);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(port, 0);
  cli::PreflightArgs args;
  args.client.address = absl::StrCat("127.0.0.1:", port);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = cli::Preflight(std::string(STEPCAST_SOURCE_DIR) + "/examples/llama3-70b-h100.yaml", args);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  server->Shutdown();
  EXPECT_EQ(rc, cli::kExitError);
  EXPECT_THAT(out, HasSubstr("stepcast preflight: unknown(7)"));
  EXPECT_THAT(err, HasSubstr("a verdict this stepcast does not know (unknown(7))"));
}

// ---------------------------------------------------------------------------------------------
// N8: Megatron-LM sizes given as 0 were replaced in silence (TP 0 -> 1, micro-batch 0 -> 1
// "assumed", a virtual stage of 0 layers ignored).
TEST(Reliability2N8, MegatronZeroSizesAreErrorsNamingTheFlag) {
  const std::vector<std::string> base = {"python", "pretrain_gpt.py", "--num-layers", "32", "--hidden-size", "4096",
                                         "--num-attention-heads", "32", "--seq-length", "4096",
                                         "--global-batch-size", "64", "--vocab-size", "32000",
                                         "--max-position-embeddings", "4096",
                                         "--pipeline-model-parallel-size", "2"};
  ASSERT_TRUE(JobFromMegatronArgs(base).ok()) << JobFromMegatronArgs(base).status();
  for (const char* flag : {"--tensor-model-parallel-size", "--micro-batch-size",
                           "--num-layers-per-virtual-pipeline-stage", "--context-parallel-size",
                           "--expert-model-parallel-size", "--num-virtual-stages-per-pipeline-rank"}) {
    std::vector<std::string> argv = base;
    argv.push_back(flag);
    argv.push_back("0");
    absl::StatusOr<ImportedJob> job = JobFromMegatronArgs(argv);
    ASSERT_FALSE(job.ok()) << flag;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(job.status().message(), HasSubstr(absl::StrCat(flag, ": 0 is not")));
  }
}

// ---------------------------------------------------------------------------------------------
// N12: `--html` equal to the input overwrote the job file with exit 0.
TEST(Reliability2N12, SearchPageMustNotOverwriteTheJob) {
  const fs::path dir = TempDir("html");
  const std::string job = (dir / "job.yaml").string();
  const std::string yaml = LayersJobYaml("32", 8, 64);
  {
    std::ofstream(job) << yaml;
  }
  cli::SearchArgs a;
  a.job_path = job;
  a.quiet = true;
  a.html_path = (dir / "." / "job.yaml").string();  // the same file by another name
  ::testing::internal::CaptureStderr();
  const int rc = cli::Search(a, testing::BuiltinCatalog());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(err, HasSubstr("--html"));
  std::ifstream in(job);
  const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, yaml);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stepcast
