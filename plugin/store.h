// File: plugin/store.h
//
// The service's store: predictions made by Preflight, reported runs, and versioned calibration
// profiles, in one SQLite file. WAL journal with synchronous=FULL: a write returns only once it
// is on disk, so an acknowledged ReportRun or PutProfile survives a kill -9 right after. The
// schema is versioned (PRAGMA user_version) and migrated forward on open; a file from a newer
// stepcast is refused, never altered. Thread-safe (one connection behind a mutex); the service
// calls the writes from one writer thread, never from gRPC's handler threads.
#ifndef STEPCAST_PLUGIN_STORE_H_
#define STEPCAST_PLUGIN_STORE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stepcast/v1/service.pb.h"

struct sqlite3;

namespace stepcast {

class RunStore {
 public:
  // Opens (creating if needed), checks every page (PRAGMA quick_check) and migrates. Errors:
  // Unavailable when the file cannot be opened, DataLoss when a page is corrupt ("the store is
  // corrupt (...); restore it from a backup or move it away"), FailedPrecondition when its
  // schema is newer than this binary's.
  static absl::StatusOr<std::unique_ptr<RunStore>> Open(const std::string& path);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  static int LatestSchemaVersion();
  int schema_version() const { return schema_version_; }

  struct StoredPrediction {
    v1::JobSpec job;
    v1::ProfileRef profile;
    v1::Prediction prediction;
  };
  absl::Status PutPrediction(const std::string& id, const StoredPrediction& p, int64_t create_time_us);
  absl::StatusOr<StoredPrediction> GetPrediction(const std::string& id);  // NotFound
  // Retention: deletes predictions created before min_create_time_us, then all but the newest
  // max_rows (max_rows <= 0: no row cap), then the oldest until the rest take at most max_bytes
  // (job, profile and prediction, wire encoding; max_bytes <= 0: no byte cap; reliability
  // review 2, N7).
  absl::Status PrunePredictions(int64_t min_create_time_us, int64_t max_rows, int64_t max_bytes = 0);
  absl::StatusOr<int64_t> CountPredictions();
  // The stored predictions' bytes as PrunePredictions counts them.
  absl::StatusOr<int64_t> PredictionBytes();

  // SQLite busy_timeout: below the shortest client deadline (the SPANK plugin's 3 s), so a lock
  // held by another process turns into a retryable Unavailable before the client gives up.
  static constexpr int kBusyTimeoutMs = 2000;

  // Keyed by run.run_id; labels indexed for ListRuns. With a non-empty request_id, a second call
  // with the same id stores nothing and returns the first call's run id (idempotent retries);
  // otherwise returns run.run_id. Unavailable when the database stays locked past busy_timeout.
  absl::StatusOr<std::string> PutRun(const v1::Run& run, const std::string& request_id = "");
  absl::StatusOr<v1::Run> GetRun(const std::string& id);  // NotFound
  // Newest first; page tokens are opaque ("<create_time_us>:<run_id>"). InvalidArgument on a
  // malformed token or label filter.
  absl::StatusOr<v1::ListRunsResponse> ListRuns(const v1::ListRunsRequest& req);

  // Stores the next version of `name` (1 for a new name) and returns it.
  absl::StatusOr<int32_t> PutProfile(const std::string& name, const v1::RateProfile& profile,
                                     int64_t create_time_us);
  // version 0: the latest. NotFound when the name or version is unknown.
  absl::StatusOr<v1::GetProfileResponse> GetProfile(const std::string& name, int32_t version);
  absl::StatusOr<std::vector<v1::ProfileInfo>> ListProfiles();

 private:
  explicit RunStore(sqlite3* db) : db_(db) {}
  absl::Status Migrate();
  absl::Status QuickCheck();
  absl::Status Exec(const char* sql);

  sqlite3* db_;               // writes (and reads when rdb_ is null), under mu_
  sqlite3* rdb_ = nullptr;    // a second, read-only connection: under WAL, reads never wait
                              // for a writer's lock (reliability review M1); under rmu_
  std::mutex rmu_;
  int schema_version_ = 0;
  std::mutex mu_;
};

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_STORE_H_
