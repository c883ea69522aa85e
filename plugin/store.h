// File: plugin/store.h
//
// The service's run store: predictions made by Preflight, reported runs, and versioned
// calibration profiles. One interface, two implementations:
//   * SQLite (plugin/sqlite_store.h), the embedded default: one file beside one `stepcast serve`.
//   * PostgreSQL (plugin/pg_store.h), for several `stepcast serve` replicas sharing one store.
// RunStore::Open picks one from the store's name: "postgresql://..." or "postgres://..." (a
// libpq connection URI) is PostgreSQL; "sqlite:PATH" or a plain PATH is SQLite.
//
// Semantics both implementations keep (tests/store_test.cc runs one suite against both):
//   * A write returns only once it is durable (SQLite: WAL, synchronous=FULL; PostgreSQL: a
//     committed transaction), so an acknowledged ReportRun or PutProfile survives a kill -9.
//   * Every write but PutProfile is idempotent: PutPrediction and PutRun with an id already
//     stored store nothing more (PutRun: AlreadyExists when the stored run differs); PutRun with
//     a request id already stored returns the first call's run id, from any replica.
//   * The schema is versioned and migrated forward on open; a store from a newer stepcast is
//     refused (FailedPrecondition naming both versions), never altered.
//   * Unavailable when the store cannot be reached or is locked (clients retry); the message
//     names the store (PostgreSQL: its URI without the password).
// Thread-safe: the service calls reads from gRPC's handler threads and writes from its writer
// threads (max_concurrent_writes() of them).
#ifndef STEPCAST_PLUGIN_STORE_H_
#define STEPCAST_PLUGIN_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stepcast/v1/service.pb.h"

namespace stepcast {

struct StoreOptions {
  // PostgreSQL: connections in the pool (reads and writes share them). SQLite ignores it.
  int connections = 4;
  // PostgreSQL: seconds to wait for a connection (libpq connect_timeout) unless the URI gives
  // connect_timeout itself.
  int connect_timeout_s = 3;
};

class RunStore {
 public:
  // Opens the store named by `spec` (see the file comment), creating and migrating its schema.
  // Errors: InvalidArgument for a malformed spec or options; otherwise those of
  // SqliteRunStore::Open / PgRunStore::Open.
  static absl::StatusOr<std::unique_ptr<RunStore>> Open(const std::string& spec, const StoreOptions& options = {});
  // True for "postgresql://..." and "postgres://...".
  static bool IsPostgresSpec(const std::string& spec);
  // The spec as logs and messages show it: a PostgreSQL URI without its password (and without
  // parameters other than a socket directory and port), a SQLite path as "sqlite:PATH".
  static std::string DescribeSpec(const std::string& spec);

  virtual ~RunStore() = default;

  // The SQLite schema version this binary writes (kept for callers from before the interface).
  static int LatestSchemaVersion();
  // This store's schema version after Open (its implementation's latest).
  virtual int schema_version() const = 0;
  virtual int latest_schema_version() const = 0;
  // "sqlite:PATH" or the PostgreSQL URI without its password: what messages name.
  virtual const std::string& description() const = 0;
  // How many writes may run at once (SQLite: 1; PostgreSQL: the pool's size less one, so a
  // read always finds a connection).
  virtual int max_concurrent_writes() const { return 1; }

  struct StoredPrediction {
    v1::JobSpec job;
    v1::ProfileRef profile;
    v1::Prediction prediction;
  };
  // Stores a prediction under `id`; an id already stored is kept as it is (idempotent retry).
  virtual absl::Status PutPrediction(const std::string& id, const StoredPrediction& p, int64_t create_time_us) = 0;
  virtual absl::StatusOr<StoredPrediction> GetPrediction(const std::string& id) = 0;  // NotFound
  // Retention: deletes predictions created before min_create_time_us, then all but the newest
  // max_rows (max_rows <= 0: no row cap), then the oldest until the rest take at most max_bytes
  // (job, profile and prediction, wire encoding; max_bytes <= 0: no byte cap; reliability
  // review 2, N7).
  virtual absl::Status PrunePredictions(int64_t min_create_time_us, int64_t max_rows, int64_t max_bytes = 0) = 0;
  virtual absl::StatusOr<int64_t> CountPredictions() = 0;
  // The stored predictions' bytes as PrunePredictions counts them.
  virtual absl::StatusOr<int64_t> PredictionBytes() = 0;

  // SQLite busy_timeout: below the shortest client deadline (the SPANK plugin's 3 s), so a lock
  // held by another process turns into a retryable Unavailable before the client gives up.
  static constexpr int kBusyTimeoutMs = 2000;

  // Keyed by run.run_id; labels indexed for ListRuns. With a non-empty request_id, a second call
  // with the same id (a retry, or the same report sent to another replica) stores nothing and
  // returns the first call's run id; otherwise returns run.run_id. A run id already stored with
  // the same run stores nothing (idempotent); with a different run: AlreadyExists.
  virtual absl::StatusOr<std::string> PutRun(const v1::Run& run, const std::string& request_id = "") = 0;
  virtual absl::StatusOr<v1::Run> GetRun(const std::string& id) = 0;  // NotFound
  // Newest first; page tokens are opaque ("<create_time_us>:<run_id>"). InvalidArgument on a
  // malformed token or label filter.
  virtual absl::StatusOr<v1::ListRunsResponse> ListRuns(const v1::ListRunsRequest& req) = 0;

  // Stores the next version of `name` (1 for a new name) and returns it. Not idempotent: each
  // call is a new version (two replicas storing at once get two distinct versions).
  virtual absl::StatusOr<int32_t> PutProfile(const std::string& name, const v1::RateProfile& profile,
                                             int64_t create_time_us) = 0;
  // version 0: the latest. NotFound when the name or version is unknown.
  virtual absl::StatusOr<v1::GetProfileResponse> GetProfile(const std::string& name, int32_t version) = 0;
  virtual absl::StatusOr<std::vector<v1::ProfileInfo>> ListProfiles() = 0;

  // Copying a store (`stepcast store migrate`): every row as stored, keys and times kept.
  struct PredictionRow {
    std::string id;
    int64_t create_time_us = 0;
    StoredPrediction p;
  };
  struct ProfileRow {
    std::string name;
    int32_t version = 0;
    int64_t create_time_us = 0;
    v1::RateProfile profile;
  };
  // Visit every row (in key order); stops at the first error `fn` returns. Runs are whole
  // (never trimmed for the reply size).
  virtual absl::Status ForEachPrediction(const std::function<absl::Status(const PredictionRow&)>& fn) = 0;
  virtual absl::Status ForEachRun(const std::function<absl::Status(const v1::Run&)>& fn) = 0;
  virtual absl::Status ForEachRunRequest(
      const std::function<absl::Status(const std::string& request_id, const std::string& run_id)>& fn) = 0;
  virtual absl::Status ForEachProfile(const std::function<absl::Status(const ProfileRow&)>& fn) = 0;
  // Inserts one copied row: true when stored, false when the key was already there with the same
  // content. AlreadyExists when the key holds something else (a profile version, a run id or a
  // request id stored differently).
  virtual absl::StatusOr<bool> CopyPrediction(const PredictionRow& row) = 0;
  virtual absl::StatusOr<bool> CopyRun(const v1::Run& run) = 0;
  virtual absl::StatusOr<bool> CopyRunRequest(const std::string& request_id, const std::string& run_id) = 0;
  virtual absl::StatusOr<bool> CopyProfile(const ProfileRow& row) = 0;

 protected:
  RunStore() = default;
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;
};

namespace store_internal {

// Runs above this size are listed and returned without their job and breakdowns, so that one
// oversized row (written before the service capped request sizes) cannot push a GetRun or a
// ListRuns page over the 4 MiB message limit (reliability review M2).
inline constexpr size_t kMaxRunReplyBytes = 1 << 20;
// A ListRuns page stops before this many bytes (the rest comes with next_page_token).
inline constexpr size_t kMaxListRunsBytes = 3 << 20;
void TrimOversizeRun(v1::Run& run);

// A ListRuns request checked and split into its filters (shared by both implementations).
struct ListRunsQuery {
  int64_t page_size = 50;
  std::string cluster, model, label_key, label_value;
  bool has_label = false, has_min_start = false, has_max_start = false, has_token = false;
  int64_t min_start_us = 0, max_start_us = 0;
  int64_t token_time_us = 0;
  std::string token_id;
};
// InvalidArgument naming the field: page_size outside [0, 1000], a label without '=', a
// timestamp outside protobuf's range, a malformed page token.
absl::StatusOr<ListRunsQuery> ParseListRuns(const v1::ListRunsRequest& req);

// Adds a run (already parsed and trimmed) to a ListRuns page; false when the page is full (the
// page token is set then).
bool AddToPage(v1::ListRunsResponse& out, v1::Run run, int64_t create_time_us, const std::string& id,
               int64_t page_size, size_t& bytes, std::string& last_token);

// True when two runs hold the same fields (labels compared as maps).
bool SameRun(const v1::Run& a, const v1::Run& b);

}  // namespace store_internal
}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_STORE_H_
