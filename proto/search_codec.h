// File: proto/search_codec.h
//
// Layout search (core/search.h) at the edges: the job a search starts from (a job spec whose own
// layout, if any, is set aside), the search options of a request, and the stepcast.v1
// SearchResult / LayoutSuggestion messages.
#ifndef STEPCAST_PROTO_SEARCH_CODEC_H_
#define STEPCAST_PROTO_SEARCH_CODEC_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/search.h"
#include "stepcast/v1/job.pb.h"
#include "stepcast/v1/search.pb.h"

namespace stepcast {

class Catalog;

// The job a search starts from.
struct SearchBase {
  Job job;                      // the spec with a one-GPU layout (valid; its layout is ignored)
  int64_t gpu_count = 0;        // cluster.gpu_count, else tp*pp*cp*dp of the spec; 0 if neither
  std::optional<Job> submitted; // the spec's own job when its layout is valid
};
// Builds the base from a spec: its model, hardware, profile, framework (recipes and defaults
// applied as for any job), precision, batch and sequence length, with parallelism set to one
// GPU; the spec's own layout is kept as `submitted` when JobFromSpec accepts it. Errors are
// JobFromSpec's (InvalidArgument / NotFound naming the field) for everything but the layout.
absl::StatusOr<SearchBase> SearchBaseFromSpec(const v1::JobSpec& spec, const Catalog& catalog,
                                              const std::string& base_dir, const RateProfile* profile);

// SearchOptions from a request: objective, top N, space, budget; the GPU counts from
// space.min_gpus..max_gpus (GpuCountsInRange) or base.gpu_count. Errors name "options.<field>".
absl::StatusOr<SearchOptions> SearchOptionsFromProto(const v1::SearchOptions& o, const SearchBase& base);

v1::SearchObjective SearchObjectiveToProto(SearchObjective o);
v1::SearchLayout SearchLayoutToProto(const Layout& l);
// `submitted`: the layout the changes are listed against (none when null).
v1::SearchCandidate SearchCandidateToProto(const RankedLayout& r, const Layout* submitted);
// Candidates leave out prediction.job_name and assumed_inputs (both once per result: the
// request's job, assumed_inputs). `max_bytes` > 0: the message is kept under it while it is
// built, never built whole first (review 2, N3: a 264 MB reply was built before a send failed):
// the pareto and best_per_gpu_count lists are thinned ahead as FitSearchResult thins them, from
// the size of their first candidate, and top is cut where it would pass the limit (both marked
// lists_thinned).
v1::SearchResult SearchResultToProto(const SearchResult& r, const Job* submitted, size_t max_bytes = 0);
// Thins `r`'s pareto and best_per_gpu_count lists (every other entry dropped, the first and last
// kept, repeated) until the message is at most `max_bytes`, and marks it lists_thinned; the top
// layouts are never dropped. For replies under a message-size limit.
void FitSearchResult(v1::SearchResult& r, size_t max_bytes);

// The suggestion a pre-flight gives for `submitted` (predicted as `prediction`): none when its
// layout fits and is predicted less than 10% slower than the fastest layout on the same GPU
// count (SearchLayouts, the default space, stopping at `deadline`). With the job's interval table
// (core/interval.h) the layouts are ranked by the pessimistic end of their 80% interval
// (kStepTimeP90): a validated layout is preferred, since outside the validated region the
// interval is the widest, unless an unvalidated one is better even at its pessimistic end; the
// message says which. Without a table: the step-time objective.
// `cancelled` (may be empty) is polled with the deadline: a cancelled call, or a server that is
// shutting down, stops the search. Errors are SearchLayouts'; a search that finds no fitting
// layout, is stopped before it finds one, or is refused by a cap gives no suggestion.
// `threads`: the search's worker threads (0: one per core).
absl::StatusOr<std::optional<v1::LayoutSuggestion>> SuggestLayout(
    const Job& submitted, const Prediction& prediction, std::chrono::steady_clock::time_point deadline,
    std::function<bool()> cancelled = nullptr, int threads = 0);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_SEARCH_CODEC_H_
