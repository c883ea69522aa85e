#include "plugin/sqlite_store.h"

#include <sqlite3.h>

#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"

namespace stepcast {
namespace {

using google::protobuf::util::TimeUtil;

// Schema migrations; entry i brings the schema from version i to i + 1. Append, never edit.
const char* const kMigrations[] = {
    // 1: predictions, runs with indexed labels, versioned profiles.
    R"sql(
    CREATE TABLE predictions (
      id TEXT PRIMARY KEY,
      create_time_us INTEGER NOT NULL,
      job BLOB NOT NULL,
      profile BLOB NOT NULL,
      prediction BLOB NOT NULL);
    CREATE TABLE runs (
      id TEXT PRIMARY KEY,
      prediction_id TEXT NOT NULL,
      cluster TEXT NOT NULL,
      model TEXT NOT NULL,
      start_time_us INTEGER,
      create_time_us INTEGER NOT NULL,
      run BLOB NOT NULL);
    CREATE INDEX runs_by_create_time ON runs(create_time_us DESC, id DESC);
    CREATE TABLE run_labels (
      run_id TEXT NOT NULL,
      key TEXT NOT NULL,
      value TEXT NOT NULL,
      PRIMARY KEY (run_id, key));
    CREATE INDEX run_labels_by_key ON run_labels(key, value);
    CREATE TABLE profiles (
      name TEXT NOT NULL,
      version INTEGER NOT NULL,
      create_time_us INTEGER NOT NULL,
      profile BLOB NOT NULL,
      PRIMARY KEY (name, version));
    )sql",
    // 2: idempotent ReportRun (client request ids) and prediction retention by age.
    R"sql(
    CREATE TABLE run_requests (
      request_id TEXT PRIMARY KEY,
      run_id TEXT NOT NULL);
    CREATE INDEX predictions_by_create_time ON predictions(create_time_us);
    )sql",
    // 3: each prediction's size, for the store's byte cap (reliability review 2, N7).
    R"sql(
    ALTER TABLE predictions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE predictions SET bytes = length(job) + length(profile) + length(prediction);
    )sql",
};

using store_internal::TrimOversizeRun;

// SQLITE_BUSY/LOCKED (another process holds the write lock past busy_timeout) is Unavailable,
// so that clients retry; everything else is Internal.
absl::Status SqliteError(sqlite3* db) {
  const int code = sqlite3_errcode(db) & 0xff;
  const std::string msg = absl::StrCat("sqlite: ", sqlite3_errmsg(db));
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return absl::UnavailableError(absl::StrCat(msg, "; retry"));
  return absl::InternalError(msg);
}

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  absl::Status error() const { return SqliteError(db_); }
  Stmt& Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindBlob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(stmt_); }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    return std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, col));
  }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : "";
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

absl::Status Done(Stmt& s, int rc) {
  return rc == SQLITE_DONE ? absl::OkStatus() : s.error();
}

int64_t Micros(const google::protobuf::Timestamp& t) { return TimeUtil::TimestampToMicroseconds(t); }

}  // namespace

static_assert(std::size(kMigrations) == SqliteRunStore::kLatestSchemaVersion, "append a migration and bump the version");

absl::StatusOr<std::unique_ptr<SqliteRunStore>> SqliteRunStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat(path, ": cannot open the store: ", msg));
  }
  std::unique_ptr<SqliteRunStore> store(new SqliteRunStore(db, path));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (absl::Status s = store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(path, ": ", s.message()));
  }
  // A corrupt page anywhere (not only in the header or schema, which the statements above read)
  // is found now, not by every later ListRuns (reliability review 2, N11). quick_check reads
  // every page once: O(n), checked on a 1 GB store (docs/SERVICE.md).
  if (absl::Status s = store->QuickCheck(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  if (absl::Status s = store->Migrate(); !s.ok()) return s;
  if (path != ":memory:" && !path.empty()) {
    sqlite3* rdb = nullptr;
    if (sqlite3_open_v2(path.c_str(), &rdb, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, nullptr) == SQLITE_OK) {
      sqlite3_busy_timeout(rdb, kBusyTimeoutMs);
      store->rdb_ = rdb;
    } else {
      sqlite3_close(rdb);  // reads share the write connection
    }
  }
  return store;
}

SqliteRunStore::~SqliteRunStore() {
  if (rdb_ != nullptr) sqlite3_close(rdb_);
  sqlite3_close(db_);
}

absl::Status SqliteRunStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return SqliteError(db_);
  }
  return absl::OkStatus();
}

absl::Status SqliteRunStore::QuickCheck() {
  Stmt q(db_, "PRAGMA quick_check(1)");
  if (!q.ok()) {
    return absl::DataLossError(absl::StrCat("the store is corrupt (", sqlite3_errmsg(db_),
                                            "); restore it from a backup or move it away"));
  }
  const int rc = q.Step();
  if (rc != SQLITE_ROW) {
    return absl::DataLossError(absl::StrCat("the store is corrupt (", sqlite3_errmsg(db_),
                                            "); restore it from a backup or move it away"));
  }
  const std::string result = q.Text(0);
  if (result != "ok") {
    return absl::DataLossError(absl::StrCat("the store is corrupt (quick_check: ", result.substr(0, 200),
                                            "); restore it from a backup or move it away"));
  }
  return absl::OkStatus();
}

absl::Status SqliteRunStore::Migrate() {
  Stmt v(db_, "PRAGMA user_version");
  if (!v.ok() || v.Step() != SQLITE_ROW) return v.error();
  int version = static_cast<int>(v.Int(0));
  if (version > kLatestSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(description_, ": store schema version ", version,
                                                      " is newer than this stepcast's ", kLatestSchemaVersion,
                                                      "; refusing to touch it (run a newer stepcast)"));
  }
  for (; version < kLatestSchemaVersion; ++version) {
    const std::string tx = absl::StrCat("BEGIN IMMEDIATE;", kMigrations[version],
                                        "PRAGMA user_version = ", version + 1, "; COMMIT;");
    if (absl::Status s = Exec(tx.c_str()); !s.ok()) {
      (void)Exec("ROLLBACK;");
      return absl::InternalError(absl::StrCat("migrating the store to version ", version + 1, ": ", s.message()));
    }
  }
  schema_version_ = version;
  return absl::OkStatus();
}

absl::Status SqliteRunStore::PutPrediction(const std::string& id, const StoredPrediction& p, int64_t t) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO predictions (id, create_time_us, job, profile, prediction, bytes) VALUES (?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (id) DO NOTHING");
  if (!s.ok()) return s.error();
  const std::string job = p.job.SerializeAsString(), profile = p.profile.SerializeAsString(),
                    prediction = p.prediction.SerializeAsString();
  s.Bind(1, id).Bind(2, t).BindBlob(3, job).BindBlob(4, profile).BindBlob(5, prediction);
  s.Bind(6, static_cast<int64_t>(job.size() + profile.size() + prediction.size()));
  return Done(s, s.Step());
}

absl::StatusOr<RunStore::StoredPrediction> SqliteRunStore::GetPrediction(const std::string& id) {
  sqlite3* const db = rdb_ != nullptr ? rdb_ : db_;
  std::lock_guard<std::mutex> lock(rdb_ != nullptr ? rmu_ : mu_);
  Stmt s(db, "SELECT job, profile, prediction FROM predictions WHERE id = ?");
  if (!s.ok()) return s.error();
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("prediction_id: unknown prediction '", id, "'"));
  if (rc != SQLITE_ROW) return s.error();
  StoredPrediction out;
  if (!out.job.ParseFromString(s.Blob(0)) || !out.profile.ParseFromString(s.Blob(1)) ||
      !out.prediction.ParseFromString(s.Blob(2))) {
    return absl::DataLossError(absl::StrCat("prediction ", id, ": stored record is corrupt"));
  }
  return out;
}

absl::StatusOr<std::string> SqliteRunStore::PutRun(const v1::Run& run, const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  bool inserted = false;
  return PutRunLocked(run, request_id, &inserted);
}

absl::StatusOr<std::string> SqliteRunStore::PutRunLocked(const v1::Run& run, const std::string& request_id,
                                                         bool* inserted) {
  *inserted = false;
  if (absl::Status st = Exec("BEGIN IMMEDIATE;"); !st.ok()) return st;
  auto fail = [&](absl::Status st) {
    (void)Exec("ROLLBACK;");
    return st;
  };
  if (!request_id.empty()) {
    Stmt q(db_, "SELECT run_id FROM run_requests WHERE request_id = ?");
    if (!q.ok()) return fail(q.error());
    q.Bind(1, request_id);
    const int rc = q.Step();
    if (rc == SQLITE_ROW) {
      std::string existing = q.Text(0);
      (void)Exec("ROLLBACK;");
      return existing;  // a retry of a stored report
    }
    if (rc != SQLITE_DONE) return fail(q.error());
    Stmt ins(db_, "INSERT INTO run_requests (request_id, run_id) VALUES (?, ?)");
    if (!ins.ok()) return fail(ins.error());
    ins.Bind(1, request_id).Bind(2, run.run_id());
    if (absl::Status st = Done(ins, ins.Step()); !st.ok()) return fail(st);
  }
  {
    // A run id already stored: the same run is an idempotent retry, another is refused.
    Stmt q(db_, "SELECT run FROM runs WHERE id = ?");
    if (!q.ok()) return fail(q.error());
    q.Bind(1, run.run_id());
    const int rc = q.Step();
    if (rc == SQLITE_ROW) {
      v1::Run stored;
      const bool same = stored.ParseFromString(q.Blob(0)) && store_internal::SameRun(stored, run);
      if (!same) {
        return fail(absl::AlreadyExistsError(
            absl::StrCat("run_id: run '", run.run_id(), "' is already stored with other contents")));
      }
      if (absl::Status st = Exec("COMMIT;"); !st.ok()) return fail(st);
      return run.run_id();
    }
    if (rc != SQLITE_DONE) return fail(q.error());
  }
  {
    Stmt s(db_, "INSERT INTO runs (id, prediction_id, cluster, model, start_time_us, create_time_us, run) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)");
    if (!s.ok()) return fail(s.error());
    s.Bind(1, run.run_id()).Bind(2, run.prediction_id()).Bind(3, run.cluster()).Bind(4, run.model());
    s.Bind(5, Micros(run.start_time())).Bind(6, Micros(run.create_time())).BindBlob(7, run.SerializeAsString());
    if (absl::Status st = Done(s, s.Step()); !st.ok()) return fail(st);
  }
  for (const auto& [k, v] : run.labels()) {
    Stmt s(db_, "INSERT INTO run_labels (run_id, key, value) VALUES (?, ?, ?)");
    if (!s.ok()) return fail(s.error());
    s.Bind(1, run.run_id()).Bind(2, k).Bind(3, v);
    if (absl::Status st = Done(s, s.Step()); !st.ok()) return fail(st);
  }
  // A failed COMMIT (disk full) must not leave the transaction open for every later write.
  if (absl::Status st = Exec("COMMIT;"); !st.ok()) return fail(st);
  *inserted = true;
  return run.run_id();
}

absl::Status SqliteRunStore::PrunePredictions(int64_t min_create_time_us, int64_t max_rows, int64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  {
    Stmt s(db_, "DELETE FROM predictions WHERE create_time_us < ?");
    if (!s.ok()) return s.error();
    s.Bind(1, min_create_time_us);
    if (absl::Status st = Done(s, s.Step()); !st.ok()) return st;
  }
  if (max_rows > 0) {
    Stmt s(db_, "DELETE FROM predictions WHERE id IN (SELECT id FROM predictions ORDER BY create_time_us DESC "
                "LIMIT -1 OFFSET ?)");
    if (!s.ok()) return s.error();
    s.Bind(1, max_rows);
    if (absl::Status st = Done(s, s.Step()); !st.ok()) return st;
  }
  if (max_bytes > 0) {
    int64_t total = 0;
    {
      Stmt q(db_, "SELECT COALESCE(SUM(bytes), 0) FROM predictions");
      if (!q.ok() || q.Step() != SQLITE_ROW) return q.error();
      total = q.Int(0);
    }
    if (total > max_bytes) {
      // Keep the newest rows whose sizes add up to at most max_bytes.
      Stmt s(db_, "DELETE FROM predictions WHERE id IN (SELECT id FROM (SELECT id, SUM(bytes) OVER "
                  "(ORDER BY create_time_us DESC, id DESC ROWS UNBOUNDED PRECEDING) AS newer FROM predictions) "
                  "WHERE newer > ?)");
      if (!s.ok()) return s.error();
      s.Bind(1, max_bytes);
      if (absl::Status st = Done(s, s.Step()); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteRunStore::PredictionBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT COALESCE(SUM(bytes), 0) FROM predictions");
  if (!s.ok() || s.Step() != SQLITE_ROW) return s.error();
  return s.Int(0);
}

absl::StatusOr<int64_t> SqliteRunStore::CountPredictions() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT COUNT(*) FROM predictions");
  if (!s.ok() || s.Step() != SQLITE_ROW) return s.error();
  return s.Int(0);
}

absl::StatusOr<v1::Run> SqliteRunStore::GetRun(const std::string& id) {
  sqlite3* const db = rdb_ != nullptr ? rdb_ : db_;
  std::lock_guard<std::mutex> lock(rdb_ != nullptr ? rmu_ : mu_);
  Stmt s(db, "SELECT run FROM runs WHERE id = ?");
  if (!s.ok()) return s.error();
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("run_id: unknown run '", id, "'"));
  if (rc != SQLITE_ROW) return s.error();
  v1::Run run;
  if (!run.ParseFromString(s.Blob(0))) return absl::DataLossError(absl::StrCat("run ", id, ": corrupt"));
  TrimOversizeRun(run);
  return run;
}

absl::StatusOr<v1::ListRunsResponse> SqliteRunStore::ListRuns(const v1::ListRunsRequest& req) {
  absl::StatusOr<store_internal::ListRunsQuery> q = store_internal::ParseListRuns(req);
  if (!q.ok()) return q.status();
  std::string sql = "SELECT create_time_us, id, run FROM runs WHERE 1";
  std::vector<std::pair<bool, std::string>> binds;  // (is_int, value)
  if (!q->cluster.empty()) {
    sql += " AND cluster = ?";
    binds.push_back({false, q->cluster});
  }
  if (!q->model.empty()) {
    sql += " AND model = ?";
    binds.push_back({false, q->model});
  }
  if (q->has_label) {
    sql += " AND EXISTS (SELECT 1 FROM run_labels l WHERE l.run_id = runs.id AND l.key = ? AND l.value = ?)";
    binds.push_back({false, q->label_key});
    binds.push_back({false, q->label_value});
  }
  if (q->has_min_start) {
    sql += " AND start_time_us >= ?";
    binds.push_back({true, absl::StrCat(q->min_start_us)});
  }
  if (q->has_max_start) {
    sql += " AND start_time_us < ?";
    binds.push_back({true, absl::StrCat(q->max_start_us)});
  }
  if (q->has_token) {
    sql += " AND (create_time_us < ? OR (create_time_us = ? AND id < ?))";
    binds.push_back({true, absl::StrCat(q->token_time_us)});
    binds.push_back({true, absl::StrCat(q->token_time_us)});
    binds.push_back({false, q->token_id});
  }
  sql += absl::StrCat(" ORDER BY create_time_us DESC, id DESC LIMIT ", q->page_size + 1);

  sqlite3* const db = rdb_ != nullptr ? rdb_ : db_;
  std::lock_guard<std::mutex> lock(rdb_ != nullptr ? rmu_ : mu_);
  Stmt s(db, sql);
  if (!s.ok()) return s.error();
  for (size_t i = 0; i < binds.size(); ++i) {
    if (binds[i].first) {
      int64_t v = 0;
      (void)absl::SimpleAtoi(binds[i].second, &v);
      s.Bind(static_cast<int>(i + 1), v);
    } else {
      s.Bind(static_cast<int>(i + 1), binds[i].second);
    }
  }
  v1::ListRunsResponse out;
  int rc;
  size_t bytes = 0;
  std::string last_token;
  while ((rc = s.Step()) == SQLITE_ROW) {
    const int64_t t = s.Int(0);
    const std::string id = s.Text(1);
    v1::Run run;
    if (!run.ParseFromString(s.Blob(2))) return absl::DataLossError(absl::StrCat("run ", id, ": corrupt"));
    if (!store_internal::AddToPage(out, std::move(run), t, id, q->page_size, bytes, last_token)) break;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return s.error();
  return out;
}

absl::StatusOr<int32_t> SqliteRunStore::PutProfile(const std::string& name, const v1::RateProfile& profile, int64_t t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = Exec("BEGIN IMMEDIATE;"); !st.ok()) return st;
  auto fail = [&](absl::Status st) {
    (void)Exec("ROLLBACK;");
    return st;
  };
  int32_t version = 1;
  {
    Stmt s(db_, "SELECT COALESCE(MAX(version), 0) FROM profiles WHERE name = ?");
    if (!s.ok()) return fail(s.error());
    s.Bind(1, name);
    if (s.Step() != SQLITE_ROW) return fail(s.error());
    version = static_cast<int32_t>(s.Int(0)) + 1;
  }
  Stmt s(db_, "INSERT INTO profiles (name, version, create_time_us, profile) VALUES (?, ?, ?, ?)");
  if (!s.ok()) return fail(s.error());
  s.Bind(1, name).Bind(2, static_cast<int64_t>(version)).Bind(3, t).BindBlob(4, profile.SerializeAsString());
  if (absl::Status st = Done(s, s.Step()); !st.ok()) return fail(st);
  if (absl::Status st = Exec("COMMIT;"); !st.ok()) return fail(st);
  return version;
}

absl::StatusOr<v1::GetProfileResponse> SqliteRunStore::GetProfile(const std::string& name, int32_t version) {
  sqlite3* const db = rdb_ != nullptr ? rdb_ : db_;
  std::lock_guard<std::mutex> lock(rdb_ != nullptr ? rmu_ : mu_);
  Stmt s(db, version > 0 ? "SELECT version, create_time_us, profile FROM profiles WHERE name = ? AND version = ?"
                          : "SELECT version, create_time_us, profile FROM profiles WHERE name = ? "
                            "ORDER BY version DESC LIMIT 1");
  if (!s.ok()) return s.error();
  s.Bind(1, name);
  if (version > 0) s.Bind(2, static_cast<int64_t>(version));
  const int rc = s.Step();
  if (rc == SQLITE_DONE) {
    return absl::NotFoundError(version > 0 ? absl::StrCat("profile '", name, "' has no version ", version)
                                           : absl::StrCat("unknown profile '", name, "'"));
  }
  if (rc != SQLITE_ROW) return s.error();
  v1::GetProfileResponse out;
  out.set_version(static_cast<int32_t>(s.Int(0)));
  *out.mutable_create_time() = TimeUtil::MicrosecondsToTimestamp(s.Int(1));
  if (!out.mutable_profile()->ParseFromString(s.Blob(2))) return absl::DataLossError("profile: corrupt");
  return out;
}

absl::StatusOr<std::vector<v1::ProfileInfo>> SqliteRunStore::ListProfiles() {
  sqlite3* const db = rdb_ != nullptr ? rdb_ : db_;
  std::lock_guard<std::mutex> lock(rdb_ != nullptr ? rmu_ : mu_);
  Stmt s(db, "SELECT name, MAX(version), MAX(create_time_us) FROM profiles GROUP BY name ORDER BY name");
  if (!s.ok()) return s.error();
  std::vector<v1::ProfileInfo> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    v1::ProfileInfo p;
    p.set_name(s.Text(0));
    p.set_latest_version(static_cast<int32_t>(s.Int(1)));
    *p.mutable_update_time() = TimeUtil::MicrosecondsToTimestamp(s.Int(2));
    p.set_origin("store");
    out.push_back(std::move(p));
  }
  if (rc != SQLITE_DONE) return s.error();
  return out;
}

absl::Status SqliteRunStore::ForEachPrediction(const std::function<absl::Status(const PredictionRow&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT id, create_time_us, job, profile, prediction FROM predictions ORDER BY id");
  if (!s.ok()) return s.error();
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    PredictionRow row;
    row.id = s.Text(0);
    row.create_time_us = s.Int(1);
    if (!row.p.job.ParseFromString(s.Blob(2)) || !row.p.profile.ParseFromString(s.Blob(3)) ||
        !row.p.prediction.ParseFromString(s.Blob(4))) {
      return absl::DataLossError(absl::StrCat("prediction ", row.id, ": stored record is corrupt"));
    }
    if (absl::Status st = fn(row); !st.ok()) return st;
  }
  return Done(s, rc);
}

absl::Status SqliteRunStore::ForEachRun(const std::function<absl::Status(const v1::Run&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT id, run FROM runs ORDER BY id");
  if (!s.ok()) return s.error();
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    v1::Run run;
    if (!run.ParseFromString(s.Blob(1))) return absl::DataLossError(absl::StrCat("run ", s.Text(0), ": corrupt"));
    if (absl::Status st = fn(run); !st.ok()) return st;
  }
  return Done(s, rc);
}

absl::Status SqliteRunStore::ForEachRunRequest(
    const std::function<absl::Status(const std::string&, const std::string&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT request_id, run_id FROM run_requests ORDER BY request_id");
  if (!s.ok()) return s.error();
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    if (absl::Status st = fn(s.Text(0), s.Text(1)); !st.ok()) return st;
  }
  return Done(s, rc);
}

absl::Status SqliteRunStore::ForEachProfile(const std::function<absl::Status(const ProfileRow&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT name, version, create_time_us, profile FROM profiles ORDER BY name, version");
  if (!s.ok()) return s.error();
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    ProfileRow row;
    row.name = s.Text(0);
    row.version = static_cast<int32_t>(s.Int(1));
    row.create_time_us = s.Int(2);
    if (!row.profile.ParseFromString(s.Blob(3))) {
      return absl::DataLossError(absl::StrCat("profile ", row.name, " version ", row.version, ": corrupt"));
    }
    if (absl::Status st = fn(row); !st.ok()) return st;
  }
  return Done(s, rc);
}

absl::StatusOr<bool> SqliteRunStore::CopyPrediction(const PredictionRow& row) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO predictions (id, create_time_us, job, profile, prediction, bytes) VALUES (?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (id) DO NOTHING");
  if (!s.ok()) return s.error();
  const std::string job = row.p.job.SerializeAsString(), profile = row.p.profile.SerializeAsString(),
                    prediction = row.p.prediction.SerializeAsString();
  s.Bind(1, row.id).Bind(2, row.create_time_us).BindBlob(3, job).BindBlob(4, profile).BindBlob(5, prediction);
  s.Bind(6, static_cast<int64_t>(job.size() + profile.size() + prediction.size()));
  if (absl::Status st = Done(s, s.Step()); !st.ok()) return st;
  return sqlite3_changes(db_) > 0;
}

absl::StatusOr<bool> SqliteRunStore::CopyRun(const v1::Run& run) {
  std::lock_guard<std::mutex> lock(mu_);
  bool inserted = false;
  absl::StatusOr<std::string> id = PutRunLocked(run, "", &inserted);
  if (!id.ok()) return id.status();
  return inserted;
}

absl::StatusOr<bool> SqliteRunStore::CopyRunRequest(const std::string& request_id, const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO run_requests (request_id, run_id) VALUES (?, ?) ON CONFLICT (request_id) DO NOTHING");
  if (!s.ok()) return s.error();
  s.Bind(1, request_id).Bind(2, run_id);
  if (absl::Status st = Done(s, s.Step()); !st.ok()) return st;
  if (sqlite3_changes(db_) > 0) return true;
  Stmt q(db_, "SELECT run_id FROM run_requests WHERE request_id = ?");
  if (!q.ok()) return q.error();
  q.Bind(1, request_id);
  if (q.Step() != SQLITE_ROW) return q.error();
  if (q.Text(0) != run_id) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id '", request_id, "' already names run '", q.Text(0), "', not '", run_id, "'"));
  }
  return false;
}

absl::StatusOr<bool> SqliteRunStore::CopyProfile(const ProfileRow& row) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT INTO profiles (name, version, create_time_us, profile) VALUES (?, ?, ?, ?) "
              "ON CONFLICT (name, version) DO NOTHING");
  if (!s.ok()) return s.error();
  s.Bind(1, row.name).Bind(2, static_cast<int64_t>(row.version)).Bind(3, row.create_time_us);
  s.BindBlob(4, row.profile.SerializeAsString());
  if (absl::Status st = Done(s, s.Step()); !st.ok()) return st;
  if (sqlite3_changes(db_) > 0) return true;
  Stmt q(db_, "SELECT profile FROM profiles WHERE name = ? AND version = ?");
  if (!q.ok()) return q.error();
  q.Bind(1, row.name).Bind(2, static_cast<int64_t>(row.version));
  if (q.Step() != SQLITE_ROW) return q.error();
  v1::RateProfile stored;
  if (!stored.ParseFromString(q.Blob(0)) ||
      !google::protobuf::util::MessageDifferencer::Equals(stored, row.profile)) {
    return absl::AlreadyExistsError(
        absl::StrCat("profile '", row.name, "' version ", row.version, " is already stored with other contents"));
  }
  return false;
}

}  // namespace stepcast
