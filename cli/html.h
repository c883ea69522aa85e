// File: cli/html.h
//
// The page writer behind every `--html FILE`: one self-contained static HTML file per page, with
// inline CSS and the inline SVG charts of cli/chart.h; no scripts, fonts, images, style sheets or
// URLs of any kind. All text (row names, model names and sources come from user files) is escaped.
//
// The page functions at the end are what the commands call: each is a short composition of the
// chart library's pieces.
#ifndef STEPCAST_CLI_HTML_H_
#define STEPCAST_CLI_HTML_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cli/chart.h"
#include "core/hardware.h"
#include "core/job.h"
#include "stepcast/v1/calibration.pb.h"
#include "stepcast/v1/comparison.pb.h"
#include "stepcast/v1/prediction.pb.h"
#include "stepcast/v1/probe.pb.h"
#include "stepcast/v1/validation.pb.h"

namespace stepcast::html {

// A page: a title, then blocks in order.
class Page {
 public:
  explicit Page(std::string title);
  Page& Heading(std::string_view text);
  Page& Text(std::string_view text);  // a paragraph
  Page& Note(std::string_view text);  // a muted paragraph (sources, conventions)
  Page& Warning(std::string_view text);
  // Headline figures as a row of "label / value" boxes.
  Page& Facts(const std::vector<std::pair<std::string, std::string>>& facts);
  Page& Svg(std::string svg);  // from Render*
  Page& Add(const Table& table);
  std::string Html() const;

 private:
  std::string title_;
  std::string body_;
};

// Writes `html` to `path` (replacing it). Errors name the path.
absl::Status WritePage(const std::string& path, const std::string& html);

// ---- pages ----

// `stepcast predict --html`: headline figures, the step-time breakdown as a stacked bar, the step
// timeline per pipeline stage (1F1B and interleaved 1F1B, with `job`; chart.h LayOutPipeline,
// the prediction's breakdown split as html.cc PipelineStepOf says), memory per GPU against
// capacity, the bottleneck and its evidence (share, arithmetic intensity against the
// machine balance), warnings, and the assumed-inputs table. `job` (may be null) adds the layout.
std::string PredictionPage(const v1::Prediction& p, const Job* job);

// `stepcast validate --html`: predicted against measured step time on log-log axes, one colour
// per source, y = x with the 10% and 25% bands, a hover title naming each row (rows predicted not
// to fit drawn hollow); |error| per source (median, p90, mean, max, experiments, not fit, not
// predicted) with the leave-one-source-out figures; the rows the model cannot express. With
// interval coverage (ValidationReport.interval_coverage): the coverage plot, each row's
// leave-one-source-out 80% interval relative to its measured step time as a vertical segment at
// that time (green when the measured time lies inside, red when not: a covering segment crosses
// 1) with the point prediction marked (hollow outside the validated region), and the coverage per
// regime and per source.
std::string ValidationPage(const v1::ValidationReport& r, const std::string& csv_name);

// `stepcast compare --html`: a prediction against a measurement (probe reports, Kineto traces, a
// stored run), term by term (plugin/compare.h CompareTerms): both steps as stacked bars on one
// scale, each term's predicted and measured seconds side by side (largest gap first), the
// largest gap in words, warnings, and the table with each gap's likely cause. With the
// prediction (may be null): the step timeline of PredictionPage, laid out with `layout` (may be
// null: then only a prediction with no pipeline bubble and no PP communication, one stage, is
// drawn), and the measured step as one more row: the trace analysis keeps per-step busy time per
// category, not a per-record timeline, so that row is the measured terms laid end to end.
//
// With `measured_step` (a Kineto trace was given; may be null): the measured stream timeline of
// that one step under the predicted stages, on the same time axis (in ms when it ends before
// 2 s): one lane per GPU stream (LayOutStreamLanes: each kernel, memcpy and memset from its start
// to its end in its classifier category's colour, idle time empty, merged only past
// kMaxStreamRects rectangles, as the page then says), the step's end marked (class "marker2",
// data-at = its step time in seconds). When that step is under a quarter of the shared axis, the
// lanes are drawn again alone on their own scale. Without a drawable predicted timeline, the
// lanes alone.
struct MeasuredStep {
  std::string path;          // the trace file
  int32_t rank = -1;         // its distributedInfo rank; -1 none
  int32_t step = -1;         // the chosen step's number in the analysis (stepcast trace)
  int32_t steps = 0;         // steps measured in the file
  double step_time_s = 0;    // the chosen step's length
  std::string step_source;   // what gave the steps
  std::vector<StreamKernel> kernels;  // times from the step's start
};
std::string ComparisonPage(const v1::Comparison& c, const v1::Prediction* prediction = nullptr,
                           const Parallelism* layout = nullptr, const MeasuredStep* measured_step = nullptr);

// One evaluated layout of a layout search, for SearchPage.
struct SearchCandidate {
  std::string row;     // heat-map row key, e.g. "PP=4"
  std::string column;  // heat-map column key, e.g. "TP=8"
  std::string layout;  // full description: "TP=8 PP=4 DP=2 VPP=5 mbs=1 ZeRO-1 recompute=none"
  double step_time_s = 0;
  double mfu = 0;      // 0..1
  bool fits = true;
  std::string note;    // why it was rejected, etc.
};
// What the search did, for SearchPage's cards (core/search.h SearchStats).
struct SearchCounts {
  int64_t enumerated = 0;  // layouts of the space
  int64_t pruned = 0;      // by the memory lower bound (never evaluated)
  int64_t evaluated = 0;   // memory fit decided
  int64_t fitting = 0;     // of those, fitting: step time estimated and ranked
  int64_t listed = 0;      // rows of the lists the page draws from, before each layout is kept once
};
// `stepcast search --html`: step time (or MFU, `by_mfu`) over the layout grid; each cell is the
// best candidate with that row/column key (fastest step, or highest MFU, among those that fit);
// the chosen candidate's cell outlined; the top candidates as a table. Row and column order:
// first appearance in `candidates`. Cards: with `counts` (may be null), the layouts evaluated,
// those that fit, and the candidates shown, each labelled; without, the candidates shown.
std::string SearchPage(const std::string& title, const std::vector<SearchCandidate>& candidates,
                       const SearchCandidate& chosen, bool by_mfu, const SearchCounts* counts = nullptr);

// `stepcast-calibrate --html` and `stepcast-calibrate import --html`: per collective and scope,
// busbw and time against message size (the measured points from run.collectives(), or the
// profile's CollectiveRate points when the run has no samples, an import; the model's curve
// evaluated from run.profile(); the reference profile's curve; the datasheet link bandwidth);
// the GEMM rate against size 2mnk (measured points coloured by shape: square, skinny, wide; the
// size fit run.gemm_fits(); the datasheet peak and the reference profile's rate); HBM samples;
// stragglers and warnings. `hardware` (may be null): the preset of the calibrated GPU.
std::string CalibrationPage(const v1::CalibrationRun& run, const Hardware* hardware);

}  // namespace stepcast::html

#endif  // STEPCAST_CLI_HTML_H_
