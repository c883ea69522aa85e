// File: cli/search.h
//
// `stepcast search JOB [--objective time|cost|mfu|tokens|time_to_train] [--top N] [--gpus A..B]
// [--json]`: the best layouts of a job (core/search.h), as a table or a stepcast.v1.SearchResult.
#ifndef STEPCAST_CLI_SEARCH_H_
#define STEPCAST_CLI_SEARCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/search.h"
#include "proto/catalog.h"
#include "stepcast/v1/search.pb.h"

namespace stepcast::cli {

struct SearchArgs {
  std::string job_path;
  std::string profile_path;
  std::string objective = "time";
  int top = 10;
  std::string gpus;  // "A..B", "N" or empty (the job's GPU count)
  double budget_usd = 0;
  bool json = false;
  int threads = 0;
  double time_limit_s = 0;  // 0: none
  // Space (docs/SEARCH.md).
  int64_t max_tp = 0, max_pp = 0, max_cp = 0, max_ep = 0, max_micro_batch_size = 0;
  std::vector<std::string> shardings;  // none, zero1, zero2, zero3
  bool no_hsdp = false, keep_sequence_parallel = false, even_pipeline_only = false;
  bool etp = false, all_schedules = false, overlap_off = false, fp8 = false;
  bool quiet = false;  // no progress line
  std::string html_path;  // also write a page (cli/html.h SearchPage): PP x TP heat map, top table
};

// "64..1024" (whole nodes in the range), "64" or "" (none). Errors name --gpus.
absl::StatusOr<std::vector<int64_t>> ParseGpuRange(const std::string& text, int64_t gpus_per_node);

// The readable answer: the ranked table (step time, tokens/s per GPU, MFU, memory and headroom,
// bottleneck), why the runner-up loses, the submitted layout's place, the Pareto front and the
// counts. `submitted`: the job file's own layout when it had a valid one.
std::string FormatSearchResult(const SearchResult& r, const Job& base, const Job* submitted);

// A pre-flight's layout suggestion: why, the layout and its step time, and each field (and
// Megatron-LM flag) to change. Empty when `s` is empty.
std::string FormatSuggestion(const v1::LayoutSuggestion& s);

// Runs the command: prints the table (or JSON) to stdout, a progress line to stderr while a
// search runs past one second; returns the exit code (0, 1 internal, 2 invalid input).
int Search(const SearchArgs& args, const Catalog& catalog);

}  // namespace stepcast::cli

#endif  // STEPCAST_CLI_SEARCH_H_
