// File: plugin/pg_store.h
//
// The PostgreSQL run store (plugin/store.h), so that several `stepcast serve` replicas share
// runs, predictions and profiles. libpq's C API (Debian's libpq-dev), no wrapper library.
//   * Schema: the tables of the SQLite store (BYTEA for the wire-encoded messages) and a
//     one-row stepcast_schema(version). Open takes a session advisory lock
//     (pg_advisory_lock(kMigrationLockKey)), reads the version, applies the missing migrations
//     (one transaction each) and unlocks, so replicas starting together migrate once, one after
//     the other. A version above this binary's is refused at start naming both versions.
//   * Connections: a pool of StoreOptions::connections libpq connections shared by reads and
//     writes. A request waits at most kAcquireTimeoutMs for a free one (then UNAVAILABLE). A
//     connection found broken (server restarted, network cut) is reconnected on the next request
//     that takes it; a request that fails because its connection broke is retried once on a
//     fresh connection when that cannot store anything twice (every write but PutProfile is
//     idempotent; PutProfile only when the break came before its COMMIT was sent).
//   * Writes are transactions committed before the call returns (synchronous_commit as the
//     server sets it; on by default: on the server's disk before the reply). ReportRun is
//     idempotent across replicas by its request id (a PRIMARY KEY, INSERT ... ON CONFLICT DO
//     NOTHING); PutProfile's next version is chosen under pg_advisory_xact_lock on the profile's
//     name, so two replicas storing the same name at once get versions n and n + 1.
//   * Errors: UNAVAILABLE, naming the store (its URI without the password) and libpq's message,
//     when the server cannot be reached, is shutting down or starting, refuses more connections,
//     or a transaction hit a deadlock or serialization failure; INVALID_ARGUMENT for a value the
//     server refuses (a NUL byte in a text field); INTERNAL otherwise.
#ifndef STEPCAST_PLUGIN_PG_STORE_H_
#define STEPCAST_PLUGIN_PG_STORE_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/store.h"

typedef struct pg_conn PGconn;

namespace stepcast {

class PgRunStore final : public RunStore {
 public:
  static constexpr int kLatestSchemaVersion = 1;
  // The session advisory lock migrations run under (any 64-bit key no other application of the
  // database uses; ASCII "stepcast").
  static constexpr int64_t kMigrationLockKey = 0x7374657063617374;
  // How long a request waits for a free pooled connection.
  static constexpr int kAcquireTimeoutMs = 5000;

  // `uri`: a libpq connection URI (postgresql://[user[:password]@][host][:port][/dbname][?...]).
  // Connects one connection, migrates, and fills the pool lazily. Errors: InvalidArgument for a
  // malformed URI or connections < 1; Unavailable when the server cannot be reached;
  // FailedPrecondition when the schema is newer than this binary's.
  static absl::StatusOr<std::unique_ptr<PgRunStore>> Open(const std::string& uri, const StoreOptions& options);
  ~PgRunStore() override;
  // The URI as messages show it: user, host, port and database; never the password.
  // InvalidArgument for a malformed URI (libpq's message).
  static absl::StatusOr<std::string> Describe(const std::string& uri);

  int schema_version() const override { return schema_version_; }
  int latest_schema_version() const override { return kLatestSchemaVersion; }
  const std::string& description() const override { return description_; }
  int max_concurrent_writes() const override { return connections_ > 1 ? connections_ - 1 : 1; }

  absl::Status PutPrediction(const std::string& id, const StoredPrediction& p, int64_t create_time_us) override;
  absl::StatusOr<StoredPrediction> GetPrediction(const std::string& id) override;
  absl::Status PrunePredictions(int64_t min_create_time_us, int64_t max_rows, int64_t max_bytes = 0) override;
  absl::StatusOr<int64_t> CountPredictions() override;
  absl::StatusOr<int64_t> PredictionBytes() override;
  absl::StatusOr<std::string> PutRun(const v1::Run& run, const std::string& request_id = "") override;
  absl::StatusOr<v1::Run> GetRun(const std::string& id) override;
  absl::StatusOr<v1::ListRunsResponse> ListRuns(const v1::ListRunsRequest& req) override;
  absl::StatusOr<int32_t> PutProfile(const std::string& name, const v1::RateProfile& profile,
                                     int64_t create_time_us) override;
  absl::StatusOr<v1::GetProfileResponse> GetProfile(const std::string& name, int32_t version) override;
  absl::StatusOr<std::vector<v1::ProfileInfo>> ListProfiles() override;

  absl::Status ForEachPrediction(const std::function<absl::Status(const PredictionRow&)>& fn) override;
  absl::Status ForEachRun(const std::function<absl::Status(const v1::Run&)>& fn) override;
  absl::Status ForEachRunRequest(
      const std::function<absl::Status(const std::string&, const std::string&)>& fn) override;
  absl::Status ForEachProfile(const std::function<absl::Status(const ProfileRow&)>& fn) override;
  absl::StatusOr<bool> CopyPrediction(const PredictionRow& row) override;
  absl::StatusOr<bool> CopyRun(const v1::Run& run) override;
  absl::StatusOr<bool> CopyRunRequest(const std::string& request_id, const std::string& run_id) override;
  absl::StatusOr<bool> CopyProfile(const ProfileRow& row) override;

  // One unit of work on one pooled connection (defined in pg_store.cc).
  class Session;

 private:
  PgRunStore(std::string uri, std::string description, const StoreOptions& options);
  absl::StatusOr<PGconn*> Connect();
  absl::Status Migrate(PGconn* conn);
  // Runs `fn` on a pooled connection (connecting it if needed); retried once on a fresh
  // connection when a pooled connection turned out broken and a retry stores nothing twice
  // (`idempotent`, or the break came before COMMIT was sent).
  absl::Status Run(const std::function<absl::Status(Session&)>& fn, bool idempotent);
  absl::Status RunOnce(const std::function<absl::Status(Session&)>& fn, bool idempotent, bool* retry);
  PGconn* Acquire(bool* timed_out);
  void Release(PGconn* conn);
  absl::StatusOr<bool> PutRunIn(Session& s, const v1::Run& run, const std::string& request_id, std::string* id);

  const std::string uri_, description_;
  const int connections_;
  const int connect_timeout_s_;
  int schema_version_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PGconn*> idle_;  // nullptr: a slot not (or no longer) connected
};

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_PG_STORE_H_
