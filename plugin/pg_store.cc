#include "plugin/pg_store.h"

#include <endian.h>
#include <libpq-fe.h>

#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"

namespace stepcast {
namespace {

using google::protobuf::util::TimeUtil;

// Schema migrations; entry i brings the schema from version i to i + 1. Append, never edit.
// Text keys are COLLATE "C" so that ids and names sort (and page tokens compare) byte by byte,
// as in the SQLite store, whatever the database's locale.
const char* const kMigrations[] = {
    // 1: the SQLite store's schema at its version 3: predictions (with their size, for the byte
    // cap), runs with indexed labels, idempotent ReportRun request ids, versioned profiles.
    R"sql(
    CREATE TABLE predictions (
      id TEXT COLLATE "C" PRIMARY KEY,
      create_time_us BIGINT NOT NULL,
      job BYTEA NOT NULL,
      profile BYTEA NOT NULL,
      prediction BYTEA NOT NULL,
      bytes BIGINT NOT NULL DEFAULT 0);
    CREATE INDEX predictions_by_create_time ON predictions(create_time_us);
    CREATE TABLE runs (
      id TEXT COLLATE "C" PRIMARY KEY,
      prediction_id TEXT NOT NULL,
      cluster TEXT NOT NULL,
      model TEXT NOT NULL,
      start_time_us BIGINT,
      create_time_us BIGINT NOT NULL,
      run BYTEA NOT NULL);
    CREATE INDEX runs_by_create_time ON runs(create_time_us DESC, id DESC);
    CREATE TABLE run_labels (
      run_id TEXT COLLATE "C" NOT NULL,
      key TEXT COLLATE "C" NOT NULL,
      value TEXT COLLATE "C" NOT NULL,
      PRIMARY KEY (run_id, key));
    CREATE INDEX run_labels_by_key ON run_labels(key, value);
    CREATE TABLE run_requests (
      request_id TEXT COLLATE "C" PRIMARY KEY,
      run_id TEXT NOT NULL);
    CREATE TABLE profiles (
      name TEXT COLLATE "C" NOT NULL,
      version INTEGER NOT NULL,
      create_time_us BIGINT NOT NULL,
      profile BYTEA NOT NULL,
      PRIMARY KEY (name, version));
    )sql",
};
static_assert(std::size(kMigrations) == PgRunStore::kLatestSchemaVersion, "append a migration and bump the version");

// Parameter and result types (pg_type.h's OIDs; libpq-dev ships no server headers).
constexpr Oid kInt8Oid = 20, kTextOid = 25, kByteaOid = 17;

// Query parameters, all sent in binary format: text and bytea as their bytes (a length, so a NUL
// byte is refused by the server rather than cutting the string), int8 big-endian.
class Params {
 public:
  Params& Text(std::string v) { return Add(std::move(v), kTextOid); }
  Params& Bytes(std::string v) { return Add(std::move(v), kByteaOid); }
  Params& Int(int64_t v) {
    const uint64_t be = htobe64(static_cast<uint64_t>(v));
    return Add(std::string(reinterpret_cast<const char*>(&be), 8), kInt8Oid);
  }
  int size() const { return static_cast<int>(values_.size()); }
  const std::vector<std::string>& values() const { return values_; }
  const std::vector<Oid>& types() const { return types_; }

 private:
  Params& Add(std::string v, Oid t) {
    values_.push_back(std::move(v));
    types_.push_back(t);
    return *this;
  }
  std::vector<std::string> values_;
  std::vector<Oid> types_;
};

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// Binary-format result values.
std::string Bytes(const Result& r, int row, int col) {
  return std::string(PQgetvalue(r.get(), row, col), PQgetlength(r.get(), row, col));
}
int64_t Int(const Result& r, int row, int col) {
  const char* p = PQgetvalue(r.get(), row, col);
  switch (PQgetlength(r.get(), row, col)) {
    case 8: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<int64_t>(be64toh(v));
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<int32_t>(be32toh(v));
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<int16_t>(be16toh(v));
    }
    default: return 0;  // NULL
  }
}

std::string Trimmed(const char* msg) {
  return std::string(absl::StripAsciiWhitespace(msg != nullptr ? msg : ""));
}

}  // namespace

absl::StatusOr<std::string> PgRunStore::Describe(const std::string& uri) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err != nullptr ? Trimmed(err) : "out of memory";
    PQfreemem(err);
    return absl::InvalidArgumentError(absl::StrCat("store: malformed PostgreSQL URI: ", msg));
  }
  std::string user, host, port, dbname;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string k = o->keyword;
    if (k == "user") user = o->val;
    if (k == "host" || (k == "hostaddr" && host.empty())) host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") dbname = o->val;
  }
  PQconninfoFree(opts);
  std::string out = "postgresql://";
  if (!user.empty()) absl::StrAppend(&out, user, "@");
  if (absl::StartsWith(host, "/")) {  // a Unix socket directory
    absl::StrAppend(&out, "/", dbname, "?host=", host, port.empty() ? "" : "&port=", port);
  } else {
    absl::StrAppend(&out, host, port.empty() ? "" : ":", port, "/", dbname);
  }
  return out;
}

// One unit of work on one connection: statements, their errors mapped to absl codes, and what
// a retry after a broken connection needs to know.
class PgRunStore::Session {
 public:
  Session(PGconn* conn, const std::string& description, bool idempotent)
      : conn_(conn), description_(description), idempotent_(idempotent) {}

  absl::StatusOr<Result> Exec(const std::string& sql, const Params& p = Params()) {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (const std::string& v : p.values()) {
      values.push_back(v.data());
      lengths.push_back(static_cast<int>(v.size()));
      formats.push_back(1);
    }
    Result r(PQexecParams(conn_, sql.c_str(), p.size(), p.types().data(), values.data(), lengths.data(),
                          formats.data(), /*resultFormat=*/1));
    const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    return Error(r.get());
  }
  absl::Status Cmd(const std::string& sql, const Params& p = Params()) { return Exec(sql, p).status(); }
  // Several statements, no parameters (the simple query protocol): a migration.
  absl::Status Script(const std::string& sql) {
    Result r(PQexec(conn_, sql.c_str()));
    const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return absl::OkStatus();
    return Error(r.get());
  }

  absl::Status Begin() {
    absl::Status s = Cmd("BEGIN");
    in_transaction_ = s.ok();
    return s;
  }
  absl::Status Commit() {
    commit_sent_ = true;
    absl::Status s = Cmd("COMMIT");
    in_transaction_ = false;
    return s;
  }
  // After a failed unit of work: ends an open transaction so the connection can be reused.
  void Cleanup() {
    if (in_transaction_ && !broken_) (void)Cmd("ROLLBACK");
    in_transaction_ = false;
  }
  bool broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }
  // A retry on a fresh connection stores nothing twice.
  bool retry_safe() const { return idempotent_ || !commit_sent_; }
  const std::string& description() const { return description_; }

 private:
  absl::Status Error(PGresult* r) {
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const std::string code = state != nullptr ? state : "";
    std::string msg = Trimmed(r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
    if (msg.empty()) msg = Trimmed(PQerrorMessage(conn_));
    if (PQstatus(conn_) != CONNECTION_OK || absl::StartsWith(code, "08") || code == "57P01" || code == "57P02" ||
        code == "57P03") {
      broken_ = true;
      return absl::UnavailableError(
          absl::StrCat("store ", description_, ": the database is unreachable (", msg, "); retry"));
    }
    // Too many connections, deadlock, serialization failure, lock or statement timeout: retry.
    if (code == "53300" || code == "40001" || code == "40P01" || code == "55P03" || code == "57014") {
      return absl::UnavailableError(absl::StrCat("store ", description_, ": ", msg, "; retry"));
    }
    if (absl::StartsWith(code, "22")) {  // data exception: a value the server refuses
      return absl::InvalidArgumentError(absl::StrCat("store ", description_, " refused a value: ", msg));
    }
    if (code == "23505") return absl::AlreadyExistsError(absl::StrCat("store ", description_, ": ", msg));
    return absl::InternalError(absl::StrCat("store ", description_, ": ", msg));
  }

  PGconn* const conn_;
  const std::string& description_;
  const bool idempotent_;
  bool in_transaction_ = false, commit_sent_ = false, broken_ = false;
};

PgRunStore::PgRunStore(std::string uri, std::string description, const StoreOptions& options)
    : uri_(std::move(uri)),
      description_(std::move(description)),
      connections_(options.connections),
      connect_timeout_s_(options.connect_timeout_s) {}

PgRunStore::~PgRunStore() {
  std::lock_guard<std::mutex> l(mu_);
  for (PGconn* c : idle_) {
    if (c != nullptr) PQfinish(c);
  }
}

absl::StatusOr<PGconn*> PgRunStore::Connect() {
  // Keywords are processed in order, the last value kept: the URI (dbname, expanded) comes last
  // so that its own connect_timeout or options win over these defaults.
  const std::string timeout = absl::StrCat(connect_timeout_s_);
  const char* keys[] = {"connect_timeout", "application_name", "options", "dbname", nullptr};
  // statement_timeout: a statement stuck behind a lock fails (UNAVAILABLE) instead of holding a
  // pooled connection and its caller forever.
  const char* values[] = {timeout.c_str(), "stepcast", "-c statement_timeout=30000", uri_.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (c == nullptr) return absl::UnavailableError(absl::StrCat("store ", description_, ": cannot connect (out of memory)"));
  if (PQstatus(c) != CONNECTION_OK) {
    std::string msg = Trimmed(PQerrorMessage(c));
    PQfinish(c);
    return absl::UnavailableError(absl::StrCat("store ", description_, ": cannot connect (", msg, "); retry"));
  }
  // Server notices ("relation ... already exists, skipping") are not the service's log.
  PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
  return c;
}

absl::StatusOr<std::unique_ptr<PgRunStore>> PgRunStore::Open(const std::string& uri, const StoreOptions& options) {
  if (options.connections < 1 || options.connections > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("--store-connections: ", options.connections,
                                                   " must be in [1, 1000]"));
  }
  if (options.connect_timeout_s < 1) return absl::InvalidArgumentError("store: connect_timeout_s must be >= 1");
  absl::StatusOr<std::string> description = Describe(uri);
  if (!description.ok()) return description.status();
  std::unique_ptr<PgRunStore> store(new PgRunStore(uri, *description, options));
  absl::StatusOr<PGconn*> conn = store->Connect();
  if (!conn.ok()) return conn.status();
  if (absl::Status s = store->Migrate(*conn); !s.ok()) {
    PQfinish(*conn);
    return s;
  }
  store->idle_.assign(options.connections, nullptr);
  store->idle_[0] = *conn;
  return store;
}

absl::Status PgRunStore::Migrate(PGconn* conn) {
  Session s(conn, description_, true);
  auto wrap = [&](absl::Status st) {
    return absl::Status(st.code(), absl::StrCat("migrating the store: ", st.message()));
  };
  // A session lock, held across the migrations' transactions; released on unlock or when the
  // connection closes (a replica killed while migrating leaves no lock behind).
  if (absl::Status st = s.Cmd("SELECT pg_advisory_lock($1)", Params().Int(kMigrationLockKey)); !st.ok()) {
    return wrap(st);
  }
  auto unlock = [&](absl::Status st) {
    if (!s.broken()) (void)s.Cmd("SELECT pg_advisory_unlock($1)", Params().Int(kMigrationLockKey));
    return st;
  };
  if (absl::Status st = s.Cmd("CREATE TABLE IF NOT EXISTS stepcast_schema (one BOOLEAN PRIMARY KEY DEFAULT TRUE "
                              "CHECK (one), version INTEGER NOT NULL)");
      !st.ok()) {
    return unlock(wrap(st));
  }
  if (absl::Status st = s.Cmd("INSERT INTO stepcast_schema (version) VALUES (0) ON CONFLICT DO NOTHING"); !st.ok()) {
    return unlock(wrap(st));
  }
  absl::StatusOr<Result> v = s.Exec("SELECT version FROM stepcast_schema");
  if (!v.ok()) return unlock(wrap(v.status()));
  int version = static_cast<int>(Int(*v, 0, 0));
  if (version > kLatestSchemaVersion) {
    return unlock(absl::FailedPreconditionError(absl::StrCat(
        description_, ": store schema version ", version, " is newer than this stepcast's ", kLatestSchemaVersion,
        "; refusing to touch it (run a newer stepcast)")));
  }
  for (; version < kLatestSchemaVersion; ++version) {
    absl::Status st = s.Begin();
    if (st.ok()) st = s.Script(kMigrations[version]);
    if (st.ok()) st = s.Cmd("UPDATE stepcast_schema SET version = $1", Params().Int(version + 1));
    if (st.ok()) st = s.Commit();
    if (!st.ok()) {
      s.Cleanup();
      return unlock(absl::Status(st.code(), absl::StrCat("migrating the store to version ", version + 1, ": ",
                                                         st.message())));
    }
  }
  schema_version_ = version;
  return unlock(absl::OkStatus());
}

PGconn* PgRunStore::Acquire(bool* timed_out) {
  std::unique_lock<std::mutex> l(mu_);
  *timed_out = !cv_.wait_for(l, std::chrono::milliseconds(kAcquireTimeoutMs), [&] { return !idle_.empty(); });
  if (*timed_out) return nullptr;
  PGconn* c = idle_.back();
  idle_.pop_back();
  return c;
}

void PgRunStore::Release(PGconn* conn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    idle_.push_back(conn);
  }
  cv_.notify_one();
}

absl::Status PgRunStore::RunOnce(const std::function<absl::Status(Session&)>& fn, bool idempotent, bool* retry) {
  *retry = false;
  bool timed_out = false;
  PGconn* c = Acquire(&timed_out);
  if (timed_out) {
    return absl::UnavailableError(absl::StrCat("store ", description_, ": all ", connections_,
                                               " connections busy for ", kAcquireTimeoutMs,
                                               " ms (--store-connections); retry"));
  }
  bool reused = c != nullptr;
  if (c != nullptr && PQstatus(c) != CONNECTION_OK) {
    PQfinish(c);
    c = nullptr;
    reused = false;
  }
  if (c == nullptr) {
    absl::StatusOr<PGconn*> fresh = Connect();
    if (!fresh.ok()) {
      Release(nullptr);
      return fresh.status();
    }
    c = *fresh;
  }
  Session s(c, description_, idempotent);
  absl::Status st = fn(s);
  if (!st.ok()) s.Cleanup();
  if (s.broken()) {
    PQfinish(c);
    Release(nullptr);
    // A pooled connection found dead (the server restarted since it was last used): once more on
    // a fresh one, when that cannot store anything twice.
    *retry = !st.ok() && reused && s.retry_safe();
  } else {
    Release(c);
  }
  return st;
}

absl::Status PgRunStore::Run(const std::function<absl::Status(Session&)>& fn, bool idempotent) {
  bool retry = false;
  absl::Status st = RunOnce(fn, idempotent, &retry);
  if (retry) st = RunOnce(fn, idempotent, &retry);
  return st;
}

absl::Status PgRunStore::PutPrediction(const std::string& id, const StoredPrediction& p, int64_t t) {
  return CopyPrediction(PredictionRow{id, t, p}).status();
}

absl::StatusOr<RunStore::StoredPrediction> PgRunStore::GetPrediction(const std::string& id) {
  StoredPrediction out;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r =
            s.Exec("SELECT job, profile, prediction FROM predictions WHERE id = $1", Params().Text(id));
        if (!r.ok()) return r.status();
        if (PQntuples(r->get()) == 0) {
          return absl::NotFoundError(absl::StrCat("prediction_id: unknown prediction '", id, "'"));
        }
        if (!out.job.ParseFromString(Bytes(*r, 0, 0)) || !out.profile.ParseFromString(Bytes(*r, 0, 1)) ||
            !out.prediction.ParseFromString(Bytes(*r, 0, 2))) {
          return absl::DataLossError(absl::StrCat("prediction ", id, ": stored record is corrupt"));
        }
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return out;
}

absl::Status PgRunStore::PrunePredictions(int64_t min_create_time_us, int64_t max_rows, int64_t max_bytes) {
  return Run(
      [&](Session& s) -> absl::Status {
        if (absl::Status st = s.Cmd("DELETE FROM predictions WHERE create_time_us < $1",
                                    Params().Int(min_create_time_us));
            !st.ok()) {
          return st;
        }
        if (max_rows > 0) {
          if (absl::Status st = s.Cmd("DELETE FROM predictions WHERE id IN (SELECT id FROM predictions "
                                      "ORDER BY create_time_us DESC OFFSET $1)",
                                      Params().Int(max_rows));
              !st.ok()) {
            return st;
          }
        }
        if (max_bytes > 0) {
          // Keep the newest rows whose sizes add up to at most max_bytes.
          return s.Cmd("DELETE FROM predictions WHERE id IN (SELECT id FROM (SELECT id, SUM(bytes) OVER "
                        "(ORDER BY create_time_us DESC, id DESC ROWS UNBOUNDED PRECEDING) AS newer "
                        "FROM predictions) t WHERE newer > $1)",
                        Params().Int(max_bytes));
        }
        return absl::OkStatus();
      },
      true);
}

absl::StatusOr<int64_t> PgRunStore::CountPredictions() {
  int64_t n = 0;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec("SELECT COUNT(*) FROM predictions");
        if (!r.ok()) return r.status();
        n = Int(*r, 0, 0);
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return n;
}

absl::StatusOr<int64_t> PgRunStore::PredictionBytes() {
  int64_t n = 0;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec("SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM predictions");
        if (!r.ok()) return r.status();
        n = Int(*r, 0, 0);
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return n;
}

// PutRun's body inside a transaction: stores the request id (when given) and the run with its
// labels. Returns whether the run row is new; *id is the run id the caller answers with.
absl::StatusOr<bool> PgRunStore::PutRunIn(Session& s, const v1::Run& run, const std::string& request_id,
                                          std::string* id) {
  *id = run.run_id();
  if (!request_id.empty()) {
    // A concurrent insert of the same request id (another replica) waits here for the first to
    // commit, then inserts nothing; the SELECT (a new snapshot under READ COMMITTED) sees its row.
    absl::StatusOr<Result> r = s.Exec(
        "INSERT INTO run_requests (request_id, run_id) VALUES ($1, $2) ON CONFLICT (request_id) DO NOTHING "
        "RETURNING run_id",
        Params().Text(request_id).Text(run.run_id()));
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) {
      absl::StatusOr<Result> q =
          s.Exec("SELECT run_id FROM run_requests WHERE request_id = $1", Params().Text(request_id));
      if (!q.ok()) return q.status();
      if (PQntuples(q->get()) == 0) {
        return absl::UnavailableError(absl::StrCat("store ", description_, ": request_id '", request_id,
                                                   "' was being stored concurrently; retry"));
      }
      *id = Bytes(*q, 0, 0);
      return false;  // a retry of a stored report
    }
  }
  auto micros = [](const google::protobuf::Timestamp& t) { return TimeUtil::TimestampToMicroseconds(t); };
  absl::StatusOr<Result> r = s.Exec(
      "INSERT INTO runs (id, prediction_id, cluster, model, start_time_us, create_time_us, run) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING id",
      Params()
          .Text(run.run_id())
          .Text(run.prediction_id())
          .Text(run.cluster())
          .Text(run.model())
          .Int(micros(run.start_time()))
          .Int(micros(run.create_time()))
          .Bytes(run.SerializeAsString()));
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 0) {  // the run id is stored: the same run is a retry, another is refused
    absl::StatusOr<Result> q = s.Exec("SELECT run FROM runs WHERE id = $1", Params().Text(run.run_id()));
    if (!q.ok()) return q.status();
    v1::Run stored;
    if (PQntuples(q->get()) == 0 || !stored.ParseFromString(Bytes(*q, 0, 0)) ||
        !store_internal::SameRun(stored, run)) {
      return absl::AlreadyExistsError(
          absl::StrCat("run_id: run '", run.run_id(), "' is already stored with other contents"));
    }
    return false;
  }
  if (run.labels_size() > 0) {
    std::string sql = "INSERT INTO run_labels (run_id, key, value) VALUES ";
    Params p;
    p.Text(run.run_id());
    int i = 2;
    for (const auto& [k, v] : run.labels()) {
      absl::StrAppend(&sql, i > 2 ? ", " : "", "($1, $", i, ", $", i + 1, ")");
      p.Text(k).Text(v);
      i += 2;
    }
    if (absl::Status st = s.Cmd(sql, p); !st.ok()) return st;
  }
  return true;
}

absl::StatusOr<std::string> PgRunStore::PutRun(const v1::Run& run, const std::string& request_id) {
  std::string id;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        if (absl::Status b = s.Begin(); !b.ok()) return b;
        absl::StatusOr<bool> inserted = PutRunIn(s, run, request_id, &id);
        if (!inserted.ok()) return inserted.status();
        return s.Commit();
      },
      true);
  if (!st.ok()) return st;
  return id;
}

absl::StatusOr<v1::Run> PgRunStore::GetRun(const std::string& id) {
  v1::Run run;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec("SELECT run FROM runs WHERE id = $1", Params().Text(id));
        if (!r.ok()) return r.status();
        if (PQntuples(r->get()) == 0) return absl::NotFoundError(absl::StrCat("run_id: unknown run '", id, "'"));
        if (!run.ParseFromString(Bytes(*r, 0, 0))) return absl::DataLossError(absl::StrCat("run ", id, ": corrupt"));
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  store_internal::TrimOversizeRun(run);
  return run;
}

absl::StatusOr<v1::ListRunsResponse> PgRunStore::ListRuns(const v1::ListRunsRequest& req) {
  absl::StatusOr<store_internal::ListRunsQuery> q = store_internal::ParseListRuns(req);
  if (!q.ok()) return q.status();
  std::string sql = "SELECT create_time_us, id, run FROM runs WHERE TRUE";
  Params p;
  auto next = [&] { return absl::StrCat("$", p.size()); };
  if (!q->cluster.empty()) {
    p.Text(q->cluster);
    absl::StrAppend(&sql, " AND cluster = ", next());
  }
  if (!q->model.empty()) {
    p.Text(q->model);
    absl::StrAppend(&sql, " AND model = ", next());
  }
  if (q->has_label) {
    p.Text(q->label_key);
    const std::string k = next();
    p.Text(q->label_value);
    absl::StrAppend(&sql, " AND EXISTS (SELECT 1 FROM run_labels l WHERE l.run_id = runs.id AND l.key = ", k,
                    " AND l.value = ", next(), ")");
  }
  if (q->has_min_start) {
    p.Int(q->min_start_us);
    absl::StrAppend(&sql, " AND start_time_us >= ", next());
  }
  if (q->has_max_start) {
    p.Int(q->max_start_us);
    absl::StrAppend(&sql, " AND start_time_us < ", next());
  }
  if (q->has_token) {
    p.Int(q->token_time_us);
    const std::string t = next();
    p.Text(q->token_id);
    absl::StrAppend(&sql, " AND (create_time_us < ", t, " OR (create_time_us = ", t, " AND id < ", next(), "))");
  }
  absl::StrAppend(&sql, " ORDER BY create_time_us DESC, id DESC LIMIT ", q->page_size + 1);
  v1::ListRunsResponse out;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        out.Clear();
        absl::StatusOr<Result> r = s.Exec(sql, p);
        if (!r.ok()) return r.status();
        size_t bytes = 0;
        std::string last_token;
        for (int i = 0; i < PQntuples(r->get()); ++i) {
          const std::string id = Bytes(*r, i, 1);
          v1::Run run;
          if (!run.ParseFromString(Bytes(*r, i, 2))) return absl::DataLossError(absl::StrCat("run ", id, ": corrupt"));
          if (!store_internal::AddToPage(out, std::move(run), Int(*r, i, 0), id, q->page_size, bytes, last_token)) {
            break;
          }
        }
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<int32_t> PgRunStore::PutProfile(const std::string& name, const v1::RateProfile& profile, int64_t t) {
  int32_t version = 0;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        if (absl::Status b = s.Begin(); !b.ok()) return b;
        // Two replicas storing the same name at once: the second waits here, then sees the first's
        // version (a new statement, a new snapshot under READ COMMITTED).
        if (absl::Status l = s.Cmd("SELECT pg_advisory_xact_lock($1::INTEGER, hashtext($2))",
                                   Params().Int(kMigrationLockKey & 0x7fffffff).Text(name));
            !l.ok()) {
          return l;
        }
        absl::StatusOr<Result> r = s.Exec(
            "INSERT INTO profiles (name, version, create_time_us, profile) "
            "SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3 FROM profiles WHERE name = $1 RETURNING version",
            Params().Text(name).Int(t).Bytes(profile.SerializeAsString()));
        if (!r.ok()) return r.status();
        version = static_cast<int32_t>(Int(*r, 0, 0));
        return s.Commit();
      },
      /*idempotent=*/false);
  if (!st.ok()) return st;
  return version;
}

absl::StatusOr<v1::GetProfileResponse> PgRunStore::GetProfile(const std::string& name, int32_t version) {
  v1::GetProfileResponse out;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r =
            version > 0 ? s.Exec("SELECT version, create_time_us, profile FROM profiles WHERE name = $1 AND "
                                 "version = $2",
                                 Params().Text(name).Int(version))
                        : s.Exec("SELECT version, create_time_us, profile FROM profiles WHERE name = $1 "
                                 "ORDER BY version DESC LIMIT 1",
                                 Params().Text(name));
        if (!r.ok()) return r.status();
        if (PQntuples(r->get()) == 0) {
          return absl::NotFoundError(version > 0 ? absl::StrCat("profile '", name, "' has no version ", version)
                                                 : absl::StrCat("unknown profile '", name, "'"));
        }
        out.set_version(static_cast<int32_t>(Int(*r, 0, 0)));
        *out.mutable_create_time() = TimeUtil::MicrosecondsToTimestamp(Int(*r, 0, 1));
        if (!out.mutable_profile()->ParseFromString(Bytes(*r, 0, 2))) return absl::DataLossError("profile: corrupt");
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return out;
}

absl::StatusOr<std::vector<v1::ProfileInfo>> PgRunStore::ListProfiles() {
  std::vector<v1::ProfileInfo> out;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        out.clear();
        absl::StatusOr<Result> r = s.Exec(
            "SELECT name, MAX(version), MAX(create_time_us) FROM profiles GROUP BY name ORDER BY name");
        if (!r.ok()) return r.status();
        for (int i = 0; i < PQntuples(r->get()); ++i) {
          v1::ProfileInfo p;
          p.set_name(Bytes(*r, i, 0));
          p.set_latest_version(static_cast<int32_t>(Int(*r, i, 1)));
          *p.mutable_update_time() = TimeUtil::MicrosecondsToTimestamp(Int(*r, i, 2));
          p.set_origin("store");
          out.push_back(std::move(p));
        }
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return out;
}

// The scans read whole tables into one result (what `stepcast store migrate` reads is the
// SQLite side; these serve the copy the other way and the tests).
absl::Status PgRunStore::ForEachPrediction(const std::function<absl::Status(const PredictionRow&)>& fn) {
  return Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r =
            s.Exec("SELECT id, create_time_us, job, profile, prediction FROM predictions ORDER BY id");
        if (!r.ok()) return r.status();
        for (int i = 0; i < PQntuples(r->get()); ++i) {
          PredictionRow row;
          row.id = Bytes(*r, i, 0);
          row.create_time_us = Int(*r, i, 1);
          if (!row.p.job.ParseFromString(Bytes(*r, i, 2)) || !row.p.profile.ParseFromString(Bytes(*r, i, 3)) ||
              !row.p.prediction.ParseFromString(Bytes(*r, i, 4))) {
            return absl::DataLossError(absl::StrCat("prediction ", row.id, ": stored record is corrupt"));
          }
          if (absl::Status st = fn(row); !st.ok()) return st;
        }
        return absl::OkStatus();
      },
      true);
}

absl::Status PgRunStore::ForEachRun(const std::function<absl::Status(const v1::Run&)>& fn) {
  return Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec("SELECT id, run FROM runs ORDER BY id");
        if (!r.ok()) return r.status();
        for (int i = 0; i < PQntuples(r->get()); ++i) {
          v1::Run run;
          if (!run.ParseFromString(Bytes(*r, i, 1))) {
            return absl::DataLossError(absl::StrCat("run ", Bytes(*r, i, 0), ": corrupt"));
          }
          if (absl::Status st = fn(run); !st.ok()) return st;
        }
        return absl::OkStatus();
      },
      true);
}

absl::Status PgRunStore::ForEachRunRequest(
    const std::function<absl::Status(const std::string&, const std::string&)>& fn) {
  return Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec("SELECT request_id, run_id FROM run_requests ORDER BY request_id");
        if (!r.ok()) return r.status();
        for (int i = 0; i < PQntuples(r->get()); ++i) {
          if (absl::Status st = fn(Bytes(*r, i, 0), Bytes(*r, i, 1)); !st.ok()) return st;
        }
        return absl::OkStatus();
      },
      true);
}

absl::Status PgRunStore::ForEachProfile(const std::function<absl::Status(const ProfileRow&)>& fn) {
  return Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r =
            s.Exec("SELECT name, version, create_time_us, profile FROM profiles ORDER BY name, version");
        if (!r.ok()) return r.status();
        for (int i = 0; i < PQntuples(r->get()); ++i) {
          ProfileRow row;
          row.name = Bytes(*r, i, 0);
          row.version = static_cast<int32_t>(Int(*r, i, 1));
          row.create_time_us = Int(*r, i, 2);
          if (!row.profile.ParseFromString(Bytes(*r, i, 3))) {
            return absl::DataLossError(absl::StrCat("profile ", row.name, " version ", row.version, ": corrupt"));
          }
          if (absl::Status st = fn(row); !st.ok()) return st;
        }
        return absl::OkStatus();
      },
      true);
}

absl::StatusOr<bool> PgRunStore::CopyPrediction(const PredictionRow& row) {
  bool inserted = false;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        const std::string job = row.p.job.SerializeAsString(), profile = row.p.profile.SerializeAsString(),
                          prediction = row.p.prediction.SerializeAsString();
        const int64_t bytes = static_cast<int64_t>(job.size() + profile.size() + prediction.size());
        absl::StatusOr<Result> r = s.Exec(
            "INSERT INTO predictions (id, create_time_us, job, profile, prediction, bytes) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING id",
            Params().Text(row.id).Int(row.create_time_us).Bytes(job).Bytes(profile).Bytes(prediction).Int(bytes));
        if (!r.ok()) return r.status();
        inserted = PQntuples(r->get()) > 0;
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return inserted;
}

absl::StatusOr<bool> PgRunStore::CopyRun(const v1::Run& run) {
  bool inserted = false;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        if (absl::Status b = s.Begin(); !b.ok()) return b;
        std::string id;
        absl::StatusOr<bool> r = PutRunIn(s, run, "", &id);
        if (!r.ok()) return r.status();
        inserted = *r;
        return s.Commit();
      },
      true);
  if (!st.ok()) return st;
  return inserted;
}

absl::StatusOr<bool> PgRunStore::CopyRunRequest(const std::string& request_id, const std::string& run_id) {
  bool inserted = false;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec(
            "INSERT INTO run_requests (request_id, run_id) VALUES ($1, $2) ON CONFLICT (request_id) DO NOTHING "
            "RETURNING run_id",
            Params().Text(request_id).Text(run_id));
        if (!r.ok()) return r.status();
        inserted = PQntuples(r->get()) > 0;
        if (inserted) return absl::OkStatus();
        absl::StatusOr<Result> q =
            s.Exec("SELECT run_id FROM run_requests WHERE request_id = $1", Params().Text(request_id));
        if (!q.ok()) return q.status();
        if (PQntuples(q->get()) == 1 && Bytes(*q, 0, 0) != run_id) {
          return absl::AlreadyExistsError(absl::StrCat("request_id '", request_id, "' already names run '",
                                                       Bytes(*q, 0, 0), "', not '", run_id, "'"));
        }
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return inserted;
}

absl::StatusOr<bool> PgRunStore::CopyProfile(const ProfileRow& row) {
  bool inserted = false;
  absl::Status st = Run(
      [&](Session& s) -> absl::Status {
        absl::StatusOr<Result> r = s.Exec(
            "INSERT INTO profiles (name, version, create_time_us, profile) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (name, version) DO NOTHING RETURNING version",
            Params().Text(row.name).Int(row.version).Int(row.create_time_us).Bytes(row.profile.SerializeAsString()));
        if (!r.ok()) return r.status();
        inserted = PQntuples(r->get()) > 0;
        if (inserted) return absl::OkStatus();
        absl::StatusOr<Result> q = s.Exec("SELECT profile FROM profiles WHERE name = $1 AND version = $2",
                                          Params().Text(row.name).Int(row.version));
        if (!q.ok()) return q.status();
        v1::RateProfile stored;
        if (PQntuples(q->get()) != 1 || !stored.ParseFromString(Bytes(*q, 0, 0)) ||
            !google::protobuf::util::MessageDifferencer::Equals(stored, row.profile)) {
          return absl::AlreadyExistsError(absl::StrCat("profile '", row.name, "' version ", row.version,
                                                       " is already stored with other contents"));
        }
        return absl::OkStatus();
      },
      true);
  if (!st.ok()) return st;
  return inserted;
}

}  // namespace stepcast
