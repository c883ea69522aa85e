// File: proto/published_runs.h
//
// The importer of published training runs (`validation/published_runs.csv`, one row per
// measured run; its README says how each source defines its numbers). A row becomes a job spec
// from its own content only: the model name picks the architecture family's conventions, the
// framework text picks the framework preset (by name or alias, and by era from a version or
// year in the text, else the publication year of the row's `source`), the precision,
// recompute, sharding and note columns set what they state (common terms, and the framework's
// named settings), and everything a row leaves unstated takes the framework's documented
// default through the job codec (recorded as assumed). No rule looks at a source id.
#ifndef STEPCAST_PROTO_PUBLISHED_RUNS_H_
#define STEPCAST_PROTO_PUBLISHED_RUNS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/flop_conventions.h"
#include "core/framework.h"
#include "core/model_shape.h"
#include "stepcast/v1/job.pb.h"

namespace stepcast {

class Catalog;

// One CSV row: column name -> trimmed cell ("" when blank).
using PublishedRow = std::map<std::string, std::string>;

struct PublishedRun {
  v1::JobSpec spec;
  // Values the importer derived rather than read (a vocabulary from the tokenizer, a family's
  // convention), recorded like the codec's assumed inputs.
  std::vector<AssumedInput> assumed;
  // The measured iteration time per the source's definition and how it was derived.
  double measured_iter_time_s = 0;
  std::string measured_from;
  // Rows of one weak-scaling series share this id: source, model, GPU type, precision and the
  // layout without its data-parallel size.
  std::string experiment;
  // The row's framework text names no preset: the job runs the generic preset (issue 21).
  bool framework_fallback = false;
};

// Builds the job of one row. InvalidArgument / NotFound with the missing input named
// ("vocab: not given and the model family's tokenizer is not known") when the row cannot be
// expressed.
absl::StatusOr<PublishedRun> PublishedRunFromRow(const PublishedRow& row, const Catalog& catalog);

// The measured iteration time of a row: iter_time_s, else global batch tokens / (tokens/s per
// GPU x GPUs), else Narayanan et al. 2021 Eq. 3 FLOPs / (TFLOP/s per GPU x GPUs) for rows that
// give that definition.
absl::StatusOr<std::pair<double, std::string>> MeasuredIterTime(const PublishedRow& row);

// A step time from a row's TFLOP/s per GPU (else its MFU x `peak_flops_per_s`, listed as
// assumed) under the FLOP convention its flops_definition text names (core/flop_conventions.h),
// counted from `model` (the row's model; `family` its architecture-registry name) and batch.
struct ConvertedRate {
  double step_time_s = 0;
  FlopConvention convention = FlopConvention::kNarayananEq3;
  std::string measured_from;
  std::vector<AssumedInput> assumed;
};
absl::StatusOr<ConvertedRate> StepTimeFromStatedRate(const PublishedRow& row, const ModelShape& model,
                                                     const std::string& family, int framework_year,
                                                     double peak_flops_per_s, absl::string_view peak_dtype);

// The first four-digit year 19xx/20xx in `text`, or a two-digit release "YY.MM" (NeMo 24.09 ->
// 2024); 0 when none.
int YearInText(const std::string& text);

// The first NVIDIA container release "YY.MM" in `text` (two digits 2x or 3x not preceded by a digit
// or '.', a '.', a month 01-12 not followed by a digit; "NeMo 26.04.01 container" -> 2604), as
// YY * 100 + MM; 0 when none. The same rule as YearInText's release.
int ReleaseInText(const std::string& text);

// A field that holds exactly one release "YY.MM" (a preset's first_release / last_release /
// moe.folded_from_release, a job's framework.release): YY * 100 + MM by ReleaseInText's rule;
// 0 when the text is anything else ("2504", "25.4", "v25.04", "25.04.01").
int ParseRelease(const std::string& field);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_PUBLISHED_RUNS_H_
