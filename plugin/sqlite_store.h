// File: plugin/sqlite_store.h
//
// The SQLite run store (plugin/store.h): one file, WAL journal with synchronous=FULL (a write
// returns only once it is on disk, so an acknowledged ReportRun or PutProfile survives a kill -9
// right after). The schema is versioned (PRAGMA user_version) and migrated forward on open; a
// file from a newer stepcast is refused, never altered. One write connection behind a mutex and
// a second, read-only one: under WAL, reads never wait for a writer's lock (reliability review
// M1). One process: several `stepcast serve` replicas need the PostgreSQL store.
#ifndef STEPCAST_PLUGIN_SQLITE_STORE_H_
#define STEPCAST_PLUGIN_SQLITE_STORE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/store.h"

struct sqlite3;

namespace stepcast {

class SqliteRunStore final : public RunStore {
 public:
  static constexpr int kLatestSchemaVersion = 3;

  // Opens (creating if needed), checks every page (PRAGMA quick_check) and migrates. Errors:
  // Unavailable when the file cannot be opened, DataLoss when a page is corrupt ("the store is
  // corrupt (...); restore it from a backup or move it away"), FailedPrecondition when its
  // schema is newer than this binary's (naming both versions).
  static absl::StatusOr<std::unique_ptr<SqliteRunStore>> Open(const std::string& path);
  ~SqliteRunStore() override;

  int schema_version() const override { return schema_version_; }
  int latest_schema_version() const override { return kLatestSchemaVersion; }
  const std::string& description() const override { return description_; }

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

 private:
  SqliteRunStore(sqlite3* db, std::string path) : db_(db), description_("sqlite:" + path) {}
  absl::Status Migrate();
  absl::Status QuickCheck();
  absl::Status Exec(const char* sql);
  // PutRun's body, under mu_ in a transaction; `inserted` tells whether the run row was new.
  absl::StatusOr<std::string> PutRunLocked(const v1::Run& run, const std::string& request_id, bool* inserted);

  sqlite3* db_;               // writes (and reads when rdb_ is null), under mu_
  sqlite3* rdb_ = nullptr;    // a second, read-only connection: under WAL, reads never wait
                              // for a writer's lock (reliability review M1); under rmu_
  std::mutex rmu_;
  int schema_version_ = 0;
  std::mutex mu_;
  const std::string description_;
};

}  // namespace stepcast

#endif  // STEPCAST_PLUGIN_SQLITE_STORE_H_
