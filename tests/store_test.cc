// The run store's contract (plugin/store.h), one suite run against both implementations:
// SQLite and PostgreSQL. The PostgreSQL cases run on a real server that this binary starts
// itself (tests/pg_server.sh: initdb + pg_ctl in a temporary directory, a Unix socket there,
// run as the `postgres` user when the tests run as root) and stops at the end; one database per
// test. Without PostgreSQL's server binaries they are skipped, naming scripts/setup_test_deps.sh.
#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "plugin/pg_store.h"
#include "plugin/sqlite_store.h"
#include "plugin/store.h"

namespace stepcast {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs `cmd`, returning its exit code and its stdout.
int Shell(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int rc = pclose(p);
  if (out != nullptr) *out = std::string(absl::StripAsciiWhitespace(text));
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Executes `sql` on `uri` (a fresh connection); the error message, or "" when it succeeded.
std::string PgExec(const std::string& uri, const std::string& sql) {
  PGconn* c = PQconnectdb(uri.c_str());
  std::string err;
  if (PQstatus(c) != CONNECTION_OK) {
    err = PQerrorMessage(c);
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) err = PQresultErrorMessage(r);
    PQclear(r);
  }
  PQfinish(c);
  return err;
}

// The test binary's PostgreSQL server: started on first use, stopped at exit (PgServerEnv).
class PgServer {
 public:
  static PgServer& Get() {
    static PgServer* server = [] {
      auto* s = new PgServer();
      s->Start();
      return s;
    }();
    started_ = true;
    return *server;
  }
  static bool started() { return started_; }
  bool ok() const { return ok_; }
  const std::string& reason() const { return reason_; }
  // A new, empty database; its URI.
  std::string NewDatabase() {
    const std::string name = absl::StrCat("t", ++databases_);
    const std::string err = PgExec(uri_, "CREATE DATABASE " + name);
    EXPECT_EQ(err, "");
    return absl::StrCat("postgresql://postgres@/", name, "?host=", dir_, "&port=5432");
  }
  const std::string& dir() const { return dir_; }
  bool Stop() { return Shell(Script("stop")) == 0; }
  bool Restart() {
    std::string out;
    return Shell(Script("start"), &out) == 0;
  }
  void Shutdown() {
    if (ok_) (void)Shell(Script("stop"));
    if (!dir_.empty()) fs::remove_all(dir_);
  }

 private:
  std::string Script(const std::string& action) const {
    // With this process's id: the server stops by itself should the tests crash.
    return absl::StrCat("bash ", STEPCAST_SOURCE_DIR, "/tests/pg_server.sh ", action, " ", dir_,
                        action == "start" ? absl::StrCat(" ", getpid()) : "", " 2>&1");
  }
  void Start() {
    char tmpl[] = "/tmp/stepcast-pg-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      reason_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    std::string out;
    const int rc = Shell(Script("start"), &out);
    if (rc == 77) {
      reason_ = absl::StrCat("PostgreSQL server binaries not installed: ", out);
      return;
    }
    if (rc != 0) {
      reason_ = absl::StrCat("tests/pg_server.sh start failed (", rc, "): ", out);
      ADD_FAILURE() << reason_;  // installed but broken: a failure, not a skip
      return;
    }
    uri_ = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
    ok_ = true;
  }
  bool ok_ = false;
  std::string reason_, dir_, uri_;
  int databases_ = 0;
  static inline bool started_ = false;
};

class PgServerEnv : public ::testing::Environment {
 public:
  void TearDown() override {
    if (PgServer::started()) PgServer::Get().Shutdown();
  }
};
::testing::Environment* const kPgServerEnv = ::testing::AddGlobalTestEnvironment(new PgServerEnv);

v1::Run MakeRun(const std::string& id, int64_t create_time_us, const std::string& cluster = "c1",
                const std::string& model = "Llama 3 70B") {
  v1::Run run;
  run.set_run_id(id);
  run.set_cluster(cluster);
  run.set_model(model);
  run.set_gpu_count(64);
  run.set_measured_step_time_s(3.5);
  *run.mutable_create_time() = TimeUtil::MicrosecondsToTimestamp(create_time_us);
  *run.mutable_start_time() = TimeUtil::MicrosecondsToTimestamp(create_time_us - 1000000);
  (*run.mutable_labels())["team"] = "infra";
  return run;
}

v1::RateProfile MakeProfile(double hbm) {
  v1::RateProfile p;
  p.set_hbm_bandwidth_bytes_per_s(hbm);
  p.add_gemm()->set_dtype(v1::D_TYPE_BF16);
  p.mutable_gemm(0)->set_flops_per_s(5e14);
  return p;
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (pg()) {
      PgServer& server = PgServer::Get();
      if (!server.ok()) GTEST_SKIP() << server.reason() << " (scripts/setup_test_deps.sh installs it)";
      spec_ = server.NewDatabase();
    } else {
      std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::replace(name.begin(), name.end(), '/', '_');  // "Case/sqlite"
      dir_ = (fs::path(::testing::TempDir()) / absl::StrCat("store-", getpid(), "-", name)).string();
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      spec_ = "sqlite:" + dir_ + "/s.db";
    }
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  bool pg() const { return GetParam() == "postgresql"; }
  std::unique_ptr<RunStore> Open(int connections = 4) {
    StoreOptions o;
    o.connections = connections;
    absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(spec_, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  // Sets the stored schema version behind the store's back (as a newer stepcast would).
  void SetSchemaVersion(int v) {
    if (pg()) {
      ASSERT_EQ(PgExec(spec_, absl::StrCat("UPDATE stepcast_schema SET version = ", v)), "");
    } else {
      sqlite3* h = nullptr;
      ASSERT_EQ(sqlite3_open((dir_ + "/s.db").c_str(), &h), SQLITE_OK);
      ASSERT_EQ(sqlite3_exec(h, absl::StrCat("PRAGMA user_version = ", v).c_str(), nullptr, nullptr, nullptr),
                SQLITE_OK);
      sqlite3_close(h);
    }
  }
  std::vector<std::string> Ids(const v1::ListRunsResponse& r) {
    std::vector<std::string> ids;
    for (const auto& run : r.runs()) ids.push_back(run.run_id());
    return ids;
  }

  std::string spec_, dir_;
  std::unique_ptr<RunStore> store_;
};

TEST_P(StoreTest, OpensAtTheLatestSchemaAndReopens) {
  EXPECT_EQ(store_->schema_version(), store_->latest_schema_version());
  EXPECT_GE(store_->schema_version(), 1);
  store_.reset();
  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->schema_version(), store_->latest_schema_version());
}

TEST_P(StoreTest, NewerSchemaIsRefusedNamingBothVersions) {
  const int latest = store_->latest_schema_version();
  store_.reset();
  SetSchemaVersion(latest + 1);
  absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(spec_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(),
              HasSubstr(absl::StrCat("store schema version ", latest + 1, " is newer than this stepcast's ", latest)));
}

TEST_P(StoreTest, PredictionsRoundTripAndAreIdempotent) {
  RunStore::StoredPrediction p;
  p.job.set_name("job-a");
  p.profile.set_name("prof");
  p.prediction.set_step_time_s(2.5);
  ASSERT_TRUE(store_->PutPrediction("pred-1", p, 1000).ok());
  RunStore::StoredPrediction other = p;
  other.job.set_name("job-b");
  // The same id again (a retry): the first is kept, nothing is added.
  ASSERT_TRUE(store_->PutPrediction("pred-1", other, 2000).ok());
  absl::StatusOr<RunStore::StoredPrediction> got = store_->GetPrediction("pred-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->job.name(), "job-a");
  EXPECT_EQ(got->profile.name(), "prof");
  EXPECT_DOUBLE_EQ(got->prediction.step_time_s(), 2.5);
  EXPECT_EQ(*store_->CountPredictions(), 1);
  EXPECT_EQ(*store_->PredictionBytes(),
            static_cast<int64_t>(p.job.ByteSizeLong() + p.profile.ByteSizeLong() + p.prediction.ByteSizeLong()));
  absl::StatusOr<RunStore::StoredPrediction> missing = store_->GetPrediction("pred-2");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("prediction_id: unknown prediction 'pred-2'"));
}

TEST_P(StoreTest, PruneByAgeRowsAndBytes) {
  RunStore::StoredPrediction p;
  p.job.set_name(std::string(10000, 'x'));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(store_->PutPrediction(absl::StrCat("pred-", 1000 + i), p, 1000 + i).ok());
  ASSERT_TRUE(store_->PrunePredictions(1010, 0).ok());  // created before 1010: gone
  EXPECT_EQ(*store_->CountPredictions(), 90);
  ASSERT_TRUE(store_->PrunePredictions(0, 50).ok());  // the newest 50 kept
  EXPECT_EQ(*store_->CountPredictions(), 50);
  EXPECT_EQ(store_->GetPrediction("pred-1049").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->GetPrediction("pred-1050").ok());
  // The byte cap: 20 rows of 10,002 bytes fit in 200,100.
  ASSERT_TRUE(store_->PrunePredictions(0, 0, 200100).ok());
  EXPECT_EQ(*store_->CountPredictions(), 20);
  EXPECT_TRUE(store_->GetPrediction("pred-1099").ok());
  EXPECT_EQ(store_->GetPrediction("pred-1079").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreTest, RunsRoundTrip) {
  const v1::Run run = MakeRun("run-1", 5000000);
  absl::StatusOr<std::string> id = store_->PutRun(run);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "run-1");
  absl::StatusOr<v1::Run> got = store_->GetRun("run-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(store_internal::SameRun(*got, run));
  EXPECT_EQ(store_->GetRun("run-2").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreTest, RequestIdStoresOneRun) {
  ASSERT_EQ(*store_->PutRun(MakeRun("run-1", 1000000), "req-1"), "run-1");
  // A retry builds a new run id; the store answers with the first.
  EXPECT_EQ(*store_->PutRun(MakeRun("run-2", 2000000), "req-1"), "run-1");
  EXPECT_EQ(store_->GetRun("run-2").status().code(), absl::StatusCode::kNotFound);
  v1::ListRunsResponse all = *store_->ListRuns(v1::ListRunsRequest());
  EXPECT_EQ(all.runs_size(), 1);
}

TEST_P(StoreTest, SameRunIdIsIdempotentOtherContentsRefused) {
  const v1::Run run = MakeRun("run-1", 1000000);
  ASSERT_TRUE(store_->PutRun(run).ok());
  EXPECT_EQ(*store_->PutRun(run), "run-1");
  v1::Run other = run;
  other.set_measured_step_time_s(9);
  absl::StatusOr<std::string> s = store_->PutRun(other);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_DOUBLE_EQ(store_->GetRun("run-1")->measured_step_time_s(), 3.5);
  EXPECT_EQ(store_->ListRuns(v1::ListRunsRequest())->runs_size(), 1);
}

TEST_P(StoreTest, ListRunsFiltersAndPages) {
  // Equal create times order by id, byte order ('B' 0x42 before 'a' 0x61), newest first.
  ASSERT_TRUE(store_->PutRun(MakeRun("run-a", 3000000, "c1")).ok());
  ASSERT_TRUE(store_->PutRun(MakeRun("run-B", 3000000, "c1")).ok());
  ASSERT_TRUE(store_->PutRun(MakeRun("run-c", 2000000, "c2", "Mixtral")).ok());
  v1::Run labelled = MakeRun("run-d", 1000000, "c2");
  (*labelled.mutable_labels())["exp"] = "x=1";
  ASSERT_TRUE(store_->PutRun(labelled).ok());

  v1::ListRunsRequest req;
  EXPECT_THAT(Ids(*store_->ListRuns(req)), ::testing::ElementsAre("run-a", "run-B", "run-c", "run-d"));
  req.set_cluster("c2");
  EXPECT_THAT(Ids(*store_->ListRuns(req)), ::testing::ElementsAre("run-c", "run-d"));
  req.set_model("Mixtral");
  EXPECT_THAT(Ids(*store_->ListRuns(req)), ::testing::ElementsAre("run-c"));
  req.Clear();
  req.set_label("exp=x=1");  // the value holds '='
  EXPECT_THAT(Ids(*store_->ListRuns(req)), ::testing::ElementsAre("run-d"));
  req.Clear();
  *req.mutable_min_start_time() = TimeUtil::MicrosecondsToTimestamp(1000000);  // start = create - 1 s
  *req.mutable_max_start_time() = TimeUtil::MicrosecondsToTimestamp(2000000);
  EXPECT_THAT(Ids(*store_->ListRuns(req)), ::testing::ElementsAre("run-c"));

  // Pages of 2, then the rest; the token crosses equal create times.
  req.Clear();
  req.set_page_size(1);
  v1::ListRunsResponse p1 = *store_->ListRuns(req);
  EXPECT_THAT(Ids(p1), ::testing::ElementsAre("run-a"));
  req.set_page_size(2);
  req.set_page_token(p1.next_page_token());
  v1::ListRunsResponse p2 = *store_->ListRuns(req);
  EXPECT_THAT(Ids(p2), ::testing::ElementsAre("run-B", "run-c"));
  req.set_page_token(p2.next_page_token());
  v1::ListRunsResponse p3 = *store_->ListRuns(req);
  EXPECT_THAT(Ids(p3), ::testing::ElementsAre("run-d"));
  EXPECT_EQ(p3.next_page_token(), "");

  // Malformed requests name the field.
  v1::ListRunsRequest bad;
  bad.set_page_size(1001);
  EXPECT_THAT(store_->ListRuns(bad).status().message(), HasSubstr("page_size"));
  bad.Clear();
  bad.set_page_token("nonsense");
  EXPECT_THAT(store_->ListRuns(bad).status().message(), HasSubstr("page_token"));
  bad.Clear();
  bad.set_label("novalue");
  EXPECT_EQ(store_->ListRuns(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.Clear();
  bad.mutable_min_start_time()->set_seconds(int64_t{1} << 62);
  EXPECT_THAT(store_->ListRuns(bad).status().message(), HasSubstr("min_start_time: out of range"));
}

TEST_P(StoreTest, OversizeRunIsTrimmedInReplies) {
  v1::Run big = MakeRun("run-big", 1000000);
  big.mutable_job()->set_name(std::string(2 << 20, 'j'));
  ASSERT_TRUE(store_->PutRun(big).ok());
  absl::StatusOr<v1::Run> got = store_->GetRun("run-big");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_job());
  EXPECT_EQ(got->labels().at("stepcast.truncated"), "job and prediction left out: the stored run is over 1 MiB");
  // Whole in a copy.
  int whole = 0;
  ASSERT_TRUE(store_->ForEachRun([&](const v1::Run& r) {
                      whole += r.job().name().size() == (2u << 20);
                      return absl::OkStatus();
                    })
                  .ok());
  EXPECT_EQ(whole, 1);
}

TEST_P(StoreTest, ProfilesAreVersioned) {
  EXPECT_EQ(*store_->PutProfile("cluster-a", MakeProfile(2e12), 1000000), 1);
  EXPECT_EQ(*store_->PutProfile("cluster-a", MakeProfile(3e12), 2000000), 2);
  EXPECT_EQ(*store_->PutProfile("b", MakeProfile(1e12), 1500000), 1);
  absl::StatusOr<v1::GetProfileResponse> latest = store_->GetProfile("cluster-a", 0);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version(), 2);
  EXPECT_DOUBLE_EQ(latest->profile().hbm_bandwidth_bytes_per_s(), 3e12);
  EXPECT_EQ(TimeUtil::TimestampToMicroseconds(latest->create_time()), 2000000);
  EXPECT_DOUBLE_EQ(store_->GetProfile("cluster-a", 1)->profile().hbm_bandwidth_bytes_per_s(), 2e12);
  EXPECT_THAT(store_->GetProfile("cluster-a", 3).status().message(), HasSubstr("has no version 3"));
  EXPECT_EQ(store_->GetProfile("nope", 0).status().code(), absl::StatusCode::kNotFound);
  std::vector<v1::ProfileInfo> list = *store_->ListProfiles();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name(), "b");
  EXPECT_EQ(list[1].name(), "cluster-a");
  EXPECT_EQ(list[1].latest_version(), 2);
  EXPECT_EQ(list[1].origin(), "store");
}

// Two handles on one store stand for two replicas (for SQLite: two processes' connections).
TEST_P(StoreTest, ConcurrentReportsWithOneRequestIdStoreOneRun) {
  std::unique_ptr<RunStore> other = Open();
  ASSERT_NE(other, nullptr);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<std::string>> ids(kThreads, absl::UnknownError("not run"));
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      RunStore& s = i % 2 ? *other : *store_;
      for (int attempt = 0; attempt < 20; ++attempt) {  // SQLite: a lock past busy_timeout is a retry
        ids[i] = s.PutRun(MakeRun(absl::StrCat("run-", i), 1000000 + i), "req-shared");
        if (ids[i].ok() || ids[i].status().code() != absl::StatusCode::kUnavailable) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> distinct;
  for (const auto& id : ids) {
    ASSERT_TRUE(id.ok()) << id.status();
    distinct.insert(*id);
  }
  EXPECT_EQ(distinct.size(), 1u);
  EXPECT_EQ(store_->ListRuns(v1::ListRunsRequest())->runs_size(), 1);
}

TEST_P(StoreTest, ConcurrentProfilePutsGetDistinctVersions) {
  std::unique_ptr<RunStore> other = Open();
  ASSERT_NE(other, nullptr);
  constexpr int kThreads = 4, kEach = 5;
  std::vector<std::thread> threads;
  std::vector<int32_t> versions;
  std::mutex mu;
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      RunStore& s = i % 2 ? *other : *store_;
      for (int j = 0; j < kEach; ++j) {
        absl::StatusOr<int32_t> v = absl::UnknownError("not run");
        for (int attempt = 0; attempt < 20; ++attempt) {
          v = s.PutProfile("shared", MakeProfile(1e12 + i * 100 + j), 1000);
          if (v.ok() || v.status().code() != absl::StatusCode::kUnavailable) break;
        }
        if (!v.ok()) {
          ++failures;
          continue;
        }
        std::lock_guard<std::mutex> l(mu);
        versions.push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<int32_t> distinct(versions.begin(), versions.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(*distinct.rbegin(), kThreads * kEach);
  EXPECT_EQ(store_->GetProfile("shared", 0)->version(), kThreads * kEach);
}

// Copying a store (stepcast store migrate's rows): everything lands once; a second copy adds
// nothing; a key held with other contents is refused.
TEST_P(StoreTest, CopyFromSqliteIsIdempotent) {
  const fs::path src_dir = fs::path(::testing::TempDir()) / absl::StrCat("store-src-", getpid());
  fs::remove_all(src_dir);
  fs::create_directories(src_dir);
  {
    absl::StatusOr<std::unique_ptr<RunStore>> src = RunStore::Open((src_dir / "src.db").string());
    ASSERT_TRUE(src.ok()) << src.status();
    RunStore::StoredPrediction p;
    p.job.set_name("j");
    ASSERT_TRUE((*src)->PutPrediction("pred-1", p, 1234).ok());
    ASSERT_TRUE((*src)->PutRun(MakeRun("run-1", 1000000), "req-1").ok());
    ASSERT_TRUE((*src)->PutRun(MakeRun("run-2", 2000000)).ok());
    ASSERT_EQ(*(*src)->PutProfile("a", MakeProfile(1e12), 10), 1);
    ASSERT_EQ(*(*src)->PutProfile("a", MakeProfile(2e12), 20), 2);
  }
  absl::StatusOr<std::unique_ptr<RunStore>> src = RunStore::Open("sqlite:" + (src_dir / "src.db").string());
  ASSERT_TRUE(src.ok());
  auto copy_all = [&](int* inserted) {
    *inserted = 0;
    auto count = [&](absl::StatusOr<bool> r) {
      if (!r.ok()) return r.status();
      *inserted += *r;
      return absl::OkStatus();
    };
    ASSERT_TRUE((*src)->ForEachProfile([&](const RunStore::ProfileRow& r) { return count(store_->CopyProfile(r)); }).ok());
    ASSERT_TRUE(
        (*src)->ForEachPrediction([&](const RunStore::PredictionRow& r) { return count(store_->CopyPrediction(r)); })
            .ok());
    ASSERT_TRUE((*src)->ForEachRun([&](const v1::Run& r) { return count(store_->CopyRun(r)); }).ok());
    ASSERT_TRUE((*src)
                    ->ForEachRunRequest([&](const std::string& q, const std::string& r) {
                      return count(store_->CopyRunRequest(q, r));
                    })
                    .ok());
  };
  int inserted = 0;
  copy_all(&inserted);
  EXPECT_EQ(inserted, 6);  // 2 profile versions, 1 prediction, 2 runs, 1 request id
  copy_all(&inserted);
  EXPECT_EQ(inserted, 0);
  EXPECT_EQ(store_->GetPrediction("pred-1")->job.name(), "j");
  EXPECT_EQ(store_->ListRuns(v1::ListRunsRequest())->runs_size(), 2);
  EXPECT_EQ(store_->GetProfile("a", 0)->version(), 2);
  EXPECT_EQ(TimeUtil::TimestampToMicroseconds(store_->GetProfile("a", 1)->create_time()), 10);
  // The copied request id still makes a retry answer with the first run.
  EXPECT_EQ(*store_->PutRun(MakeRun("run-9", 9000000), "req-1"), "run-1");
  // Conflicts.
  RunStore::ProfileRow clash{"a", 1, 10, MakeProfile(7e12)};
  EXPECT_EQ(store_->CopyProfile(clash).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->CopyRunRequest("req-1", "run-2").status().code(), absl::StatusCode::kAlreadyExists);
  src->reset();
  fs::remove_all(src_dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// PostgreSQL only: what several replicas and a database server that goes away add.
class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PgServer& server = PgServer::Get();
    if (!server.ok()) GTEST_SKIP() << server.reason() << " (scripts/setup_test_deps.sh installs it)";
    uri_ = server.NewDatabase();
  }
  std::string uri_;
};

// Replicas starting together on an empty database migrate it once, one after the other, under
// the advisory lock: none fails on a table another created.
TEST_F(PgStoreTest, ReplicasStartingTogetherMigrateOnce) {
  constexpr int kReplicas = 8;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kReplicas);
  std::atomic<bool> go{false};
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(uri_);
      results[i] = s.status();
      if (s.ok()) EXPECT_EQ((*s)->schema_version(), PgRunStore::kLatestSchemaVersion);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r;
}

TEST_F(PgStoreTest, UnreachableServerIsUnavailableNamingTheStoreWithoutPassword) {
  const std::string bad = "postgresql://postgres:s3cret@/postgres?host=/nonexistent-stepcast-dir&port=5432";
  absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.status().message(), HasSubstr("postgresql://postgres@/postgres?host=/nonexistent-stepcast-dir"));
  EXPECT_THAT(s.status().message(), Not(HasSubstr("s3cret")));
  EXPECT_EQ(RunStore::DescribeSpec(bad).find("s3cret"), std::string::npos);
  absl::StatusOr<std::unique_ptr<RunStore>> malformed = RunStore::Open("postgresql://a b:/?=&");
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  StoreOptions zero;
  zero.connections = 0;
  EXPECT_THAT(RunStore::Open(uri_, zero).status().message(), HasSubstr("--store-connections"));
}

// The server stops: calls fail UNAVAILABLE naming the store; it starts again: the same store
// object serves again (its pooled connections are re-established), nothing acknowledged is lost.
TEST_F(PgStoreTest, ServerRestartFailsUnavailableThenReconnects) {
  absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(uri_);
  ASSERT_TRUE(s.ok()) << s.status();
  RunStore& store = **s;
  ASSERT_TRUE(store.PutRun(MakeRun("run-1", 1000000), "req-1").ok());
  ASSERT_TRUE(store.GetRun("run-1").ok());  // a pooled connection, alive
  PgServer& server = PgServer::Get();
  ASSERT_TRUE(server.Stop());
  absl::StatusOr<v1::Run> down = store.GetRun("run-1");
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr("store postgresql://postgres@/t"));
  absl::StatusOr<std::string> write = store.PutRun(MakeRun("run-2", 2000000), "req-2");
  EXPECT_EQ(write.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store.PutProfile("p", MakeProfile(1e12), 1).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(server.Restart());
  // Every pooled connection is dead now; each call reconnects by itself.
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<v1::Run> up = store.GetRun("run-1");
    EXPECT_TRUE(up.ok()) << i << ": " << up.status();
  }
  EXPECT_EQ(*store.PutRun(MakeRun("run-2", 2000000), "req-2"), "run-2");
  EXPECT_EQ(*store.PutRun(MakeRun("run-3", 3000000), "req-1"), "run-1");  // the request id survived
  EXPECT_EQ(store.ListRuns(v1::ListRunsRequest())->runs_size(), 2);
}

// The server restarts between two calls: the pooled connection is dead, and the next call (a read
// and an idempotent write) still succeeds, on a fresh connection, rather than failing once per
// pooled connection after every database restart.
TEST_F(PgStoreTest, DeadPooledConnectionIsReplacedWithinTheCall) {
  StoreOptions o;
  o.connections = 1;
  absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(uri_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->PutRun(MakeRun("run-1", 1000000), "req-1").ok());
  PgServer& server = PgServer::Get();
  ASSERT_TRUE(server.Stop());
  ASSERT_TRUE(server.Restart());
  absl::StatusOr<v1::Run> got = (*s)->GetRun("run-1");
  EXPECT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(server.Stop());
  ASSERT_TRUE(server.Restart());
  absl::StatusOr<std::string> put = (*s)->PutRun(MakeRun("run-2", 2000000), "req-2");
  EXPECT_TRUE(put.ok()) << put.status();
  ASSERT_TRUE(server.Stop());
  ASSERT_TRUE(server.Restart());
  // PutProfile is not idempotent, but the break is found at BEGIN, before anything was sent.
  absl::StatusOr<int32_t> v = (*s)->PutProfile("p", MakeProfile(1e12), 1);
  EXPECT_TRUE(v.ok()) << v.status();
}

// A pool of one connection serves many threads (they wait their turn, within the acquire
// timeout) and a write from each thread is stored once.
TEST_F(PgStoreTest, SmallPoolServesManyThreads) {
  StoreOptions o;
  o.connections = 1;
  absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(uri_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->max_concurrent_writes(), 1);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 10; ++j) {
        if (!(*s)->PutRun(MakeRun(absl::StrCat("run-", i, "-", j), 1000 + j), absl::StrCat("req-", i, "-", j)).ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  v1::ListRunsRequest all;
  all.set_page_size(1000);
  EXPECT_EQ((*s)->ListRuns(all)->runs_size(), 80);
}

// A text value PostgreSQL cannot hold (a NUL byte) is refused with INVALID_ARGUMENT, never cut
// short silently.
TEST_F(PgStoreTest, NulByteInTextIsRefusedNotTruncated) {
  absl::StatusOr<std::unique_ptr<RunStore>> s = RunStore::Open(uri_);
  ASSERT_TRUE(s.ok());
  v1::Run run = MakeRun("run-1", 1000000, std::string("clu\0ster", 8));
  absl::StatusOr<std::string> r = (*s)->PutRun(run);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ((*s)->GetRun("run-1").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace stepcast
