#include "plugin/store.h"

#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "plugin/pg_store.h"
#include "plugin/sqlite_store.h"

namespace stepcast {

using google::protobuf::util::TimeUtil;

bool RunStore::IsPostgresSpec(const std::string& spec) {
  return absl::StartsWith(spec, "postgresql://") || absl::StartsWith(spec, "postgres://");
}

std::string RunStore::DescribeSpec(const std::string& spec) {
  if (IsPostgresSpec(spec)) {
    absl::StatusOr<std::string> d = PgRunStore::Describe(spec);
    return d.ok() ? *d : "postgresql://(malformed URI)";
  }
  return absl::StartsWith(spec, "sqlite:") ? spec : absl::StrCat("sqlite:", spec);
}

int RunStore::LatestSchemaVersion() { return SqliteRunStore::kLatestSchemaVersion; }

absl::StatusOr<std::unique_ptr<RunStore>> RunStore::Open(const std::string& spec, const StoreOptions& options) {
  if (spec.empty()) {
    return absl::InvalidArgumentError("store: empty; give a SQLite file (PATH or sqlite:PATH) or postgresql://...");
  }
  if (IsPostgresSpec(spec)) {
    absl::StatusOr<std::unique_ptr<PgRunStore>> s = PgRunStore::Open(spec, options);
    if (!s.ok()) return s.status();
    return std::unique_ptr<RunStore>(*std::move(s));
  }
  std::string path = spec;
  if (absl::StartsWith(spec, "sqlite:")) path = spec.substr(7);
  if (path.empty()) return absl::InvalidArgumentError("store: sqlite: needs a path (sqlite:PATH)");
  absl::StatusOr<std::unique_ptr<SqliteRunStore>> s = SqliteRunStore::Open(path);
  if (!s.ok()) return s.status();
  return std::unique_ptr<RunStore>(*std::move(s));
}

namespace store_internal {

void TrimOversizeRun(v1::Run& run) {
  if (run.ByteSizeLong() <= kMaxRunReplyBytes) return;
  run.clear_job();
  run.clear_prediction();
  run.clear_comparison();
  (*run.mutable_labels())["stepcast.truncated"] = "job and prediction left out: the stored run is over 1 MiB";
}

namespace {
int64_t Micros(const google::protobuf::Timestamp& t) { return TimeUtil::TimestampToMicroseconds(t); }
}  // namespace

absl::StatusOr<ListRunsQuery> ParseListRuns(const v1::ListRunsRequest& req) {
  ListRunsQuery q;
  if (req.page_size() < 0 || req.page_size() > 1000) {
    return absl::InvalidArgumentError("page_size: must be in [0, 1000]");
  }
  q.page_size = req.page_size() == 0 ? 50 : req.page_size();
  q.cluster = req.cluster();
  q.model = req.model();
  if (!req.label().empty()) {
    std::pair<std::string, std::string> kv = absl::StrSplit(req.label(), absl::MaxSplits('=', 1));
    if (req.label().find('=') == std::string::npos || kv.first.empty()) {
      return absl::InvalidArgumentError("label: must be key=value");
    }
    q.has_label = true;
    q.label_key = kv.first;
    q.label_value = kv.second;
  }
  for (const auto& [field, t, given] : {std::tuple{"min_start_time", &req.min_start_time(), req.has_min_start_time()},
                                        std::tuple{"max_start_time", &req.max_start_time(), req.has_max_start_time()}}) {
    // TimestampToMicroseconds overflows int64 far outside Timestamp's range (review 2, N13).
    if (given && (t->seconds() < TimeUtil::kTimestampMinSeconds || t->seconds() > TimeUtil::kTimestampMaxSeconds ||
                  t->nanos() < 0 || t->nanos() > 999999999)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": out of range: seconds must be within years 1 to 9999 and nanos in [0, 999999999]"));
    }
  }
  if (req.has_min_start_time()) {
    q.has_min_start = true;
    q.min_start_us = Micros(req.min_start_time());
  }
  if (req.has_max_start_time()) {
    q.has_max_start = true;
    q.max_start_us = Micros(req.max_start_time());
  }
  if (!req.page_token().empty()) {
    std::pair<std::string, std::string> tok = absl::StrSplit(req.page_token(), absl::MaxSplits(':', 1));
    if (!absl::SimpleAtoi(tok.first, &q.token_time_us) || tok.second.empty()) {
      return absl::InvalidArgumentError("page_token: malformed; pass next_page_token back unchanged");
    }
    q.has_token = true;
    q.token_id = tok.second;
  }
  return q;
}

bool AddToPage(v1::ListRunsResponse& out, v1::Run run, int64_t create_time_us, const std::string& id,
               int64_t page_size, size_t& bytes, std::string& last_token) {
  const int64_t n = out.runs_size();
  if (n == page_size) {
    out.set_next_page_token(last_token);
    return false;
  }
  TrimOversizeRun(run);
  const size_t size = run.ByteSizeLong();
  if (n > 0 && bytes + size > kMaxListRunsBytes) {  // the rest on the next page
    out.set_next_page_token(last_token);
    return false;
  }
  bytes += size;
  *out.add_runs() = std::move(run);
  last_token = absl::StrCat(create_time_us, ":", id);
  return true;
}

bool SameRun(const v1::Run& a, const v1::Run& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace store_internal
}  // namespace stepcast
