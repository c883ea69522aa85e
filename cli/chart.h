// File: cli/chart.h
//
// The chart library behind every `--html` page (cli/html.h composes the pages): inline SVG
// elements with no scripts, fonts, images, style sheets or URLs, so a page opens the same from a
// laptop, a CI artefact or an air-gapped cluster. Hover text is the SVG <title> element (every
// browser shows it as a tooltip; no script needed).
//
// No Debian package draws SVG charts from C++ (apt-cache search svg / chart: librsvg and svgpp
// parse SVG, KChart/QtCharts need Qt, gdchart draws rasters, plotters is Rust; docs/PAGES.md), so
// the library is ours, small, and in this one place: axes (linear and log-log), scatter series
// with per-series colours and a <title> per point, identity bands (y = x +- 10% / 25%), curves,
// reference lines, stacked horizontal bars with a limit line, a heat-map grid, tables, and the
// step timeline of a pipeline (one row per stage). All text (row
// names, model names and sources come from user files) is escaped.
//
// Marks the browser test counts (tests/pages_test.py): every scatter point has class "pt", every
// bar segment class "bar", every heat-map cell with a value class "cell", every curve class
// "curve"; the chosen heat-map cell also has class "chosen".
#ifndef STEPCAST_CLI_CHART_H_
#define STEPCAST_CLI_CHART_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace stepcast::html {

// HTML/XML escape of & < > " ' (safe in text and in attribute values).
std::string Escape(std::string_view text);

// Colour i of a 10-colour categorical palette (Tableau 10, colour-blind aware), as "#rrggbb";
// wraps around.
const char* PaletteColour(size_t i);

// A number for people: 4 significant digits, no exponent between 1e-3 and 1e6 ("0.0123", "12.35",
// "1.235e+09").
std::string Number(double v);

// ---- charts (each returns an <svg> element; put it on a Page) ----

struct Axis {
  std::string label;  // with its unit: "measured step time (s)"
  bool log = false;   // base-10 logarithmic; non-positive values are not drawn
  // Range; min >= max: from the data (log: whole decades; linear: rounded ticks, from 0 when
  // every value is >= 0).
  double min = 0, max = 0;
};

struct Point {
  double x = 0, y = 0;
  std::string title;    // hover text
  bool hollow = false;  // drawn as an outline (e.g. a run predicted not to fit)
};

struct Series {
  std::string name;  // legend text; empty: not in the legend
  std::vector<Point> points;
  bool line = false;    // a curve through the points in order (class "curve"), no markers
  bool dashed = false;  // with line
  std::string colour;   // "#rrggbb"; empty: the palette colour of the series' index
  bool legend = true;   // false: not in the legend (a curve's hover text is still `name`)
};

// A horizontal reference line (a datasheet peak, a capacity) across an XY chart.
struct ReferenceLine {
  std::string label;
  double y = 0;
  std::string colour = "#555555";
};

struct XYChart {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  // The line y = x, and shaded bands y in [x(1-f), x(1+f)] for each fraction f (0.10, 0.25):
  // predicted-against-measured charts.
  bool identity_line = false;
  std::vector<double> identity_bands;
  std::vector<ReferenceLine> reference_lines;
  // Shaded horizontal bands y in [lo, hi] (an error chart's +-10% / +-25%), legend text each.
  struct YBand {
    double lo = 0, hi = 0;
    std::string label;
  };
  std::vector<YBand> y_bands;
  int width = 820, height = 540;
};
std::string RenderXY(const XYChart& chart);

struct Segment {
  std::string name;    // legend key; segments of one name share a colour across bars
  double value = 0;    // in the chart's unit; <= 0 is not drawn
  std::string title;   // hover text; empty: "name: value unit"
  std::string colour;  // "#rrggbb"; empty: palette colour by the name's first appearance
};
struct Bar {
  std::string label;
  std::vector<Segment> segments;  // stacked left to right
};
struct StackedBarChart {
  std::string title;
  std::string unit;  // of the values: "s", "GiB"
  std::vector<Bar> bars;
  // A vertical line at `limit` (e.g. the GPU's memory capacity); 0: none.
  double limit = 0;
  std::string limit_label;
  int width = 820;
};
std::string RenderStackedBars(const StackedBarChart& chart);

// ---- the step timeline of a pipeline ----

// One step of a pipeline-parallel job as the timeline lays it out: the schedule's shape and what
// one stage spends on one micro-batch of one model chunk, in seconds.
struct PipelineStep {
  int64_t pp = 1;             // pipeline stages (the timeline's rows)
  int64_t vpp = 1;            // model chunks per stage; > 1: interleaved 1F1B
  int64_t micro_batches = 1;  // per step and pipeline: global batch / (DP x micro-batch size)
  // Megatron-Core's microbatch_group_size_per_vp_stage (interleaved only); 0: PP, its default.
  int64_t group = 0;
  // Per micro-batch and model chunk, on every stage.
  double forward_s = 0, forward_comm_s = 0;  // compute, then its exposed communication
  double recompute_s = 0;                    // the forward rerun before the backward
  double backward_s = 0;                     // input gradient (dgrad)
  double weight_gradient_s = 0;              // wgrad
  double backward_comm_s = 0;                // exposed communication of the backward
  // Per step, on every stage after the pipeline drains: exposed DP gradient sync, optimizer.
  double dp_comm_s = 0, optimizer_s = 0;
};

// One forward or backward of one micro-batch and model chunk on one stage.
struct PipelineOp {
  int64_t stage = 0;
  bool forward = true;
  int64_t micro_batch = 0, chunk = 0;
  double start_s = 0, end_s = 0;
};

// Per stage, its forwards and backwards in the order Megatron-Core runs them, timed by their
// dependencies (a forward of virtual stage k waits for the same micro-batch's forward on virtual
// stage k - 1, a backward for the backward on k + 1; virtual stage of chunk c on stage s: c x PP
// + s). The order is Megatron-LM's megatron/core/pipeline_parallel/schedules.py:
//   1F1B (forward_backward_pipelining_without_interleaving): stage s runs min(PP - s - 1, m)
//     warm-up forwards, then (forward, backward) pairs, then the remaining backwards;
//   interleaved (forward_backward_pipelining_with_interleaving, get_pp_rank_microbatches):
//     min((PP - s - 1) x 2 + (VPP - 1) x group, m x VPP) warm-up forwards over the virtual
//     micro-batches of get_schedule_table (groups of `group` micro-batches, each through every
//     chunk in turn; a backward runs its chunks in reverse), then pairs, then the rest.
// PP = 1 gives forward_backward_no_pipelining's forward, backward per micro-batch.
// Errors (InvalidArgument, naming the field): pp, vpp or micro_batches < 1; a time that is
// negative or not finite; interleaved with group outside [PP, m] or a last group of fewer than
// PP micro-batches (Megatron raises the same); more than kMaxPipelineOps operations.
inline constexpr int64_t kMaxPipelineOps = 200000;
absl::StatusOr<std::vector<std::vector<PipelineOp>>> LayOutPipeline(const PipelineStep& step);

// A timeline: one row per stream of work (a pipeline stage), segments on a shared time axis.
// Segment kinds and their fixed colours: "forward", "backward", "recompute", "weight-gradient",
// "communication" (exposed), "bubble", "dp-sync", "optimizer"; a measured row's kinds are its
// categories (any name; palette colours).
struct TimelineSegment {
  std::string kind;
  double start_s = 0, end_s = 0;
  std::string op;     // the operation it belongs to ("F3.0": forward of micro-batch 3, chunk 0)
  std::string title;  // hover text; empty: kind and times
  std::string colour;  // "#rrggbb" of its kind; empty: the kind's fixed colour, else the palette's
  // The white outline that separates operations; false: none when under 2 px wide (a measured
  // kernel, whose fill the outline would hide).
  bool outline = true;
};
struct TimelineRow {
  std::string label;
  std::vector<TimelineSegment> segments;
};
struct TimelineChart {
  std::string title;
  std::vector<TimelineRow> rows;
  // A vertical line (the model's step time); <= 0: none.
  double marker_s = 0;
  std::string marker_label;
  int width = 980;
  // The axis and default hover text in milliseconds (data stays in seconds); false: seconds.
  bool milliseconds = false;
  // A second vertical line (the measured step's end), drawn from row `second_marker_row` down
  // (class "marker2", data-at in seconds); <= 0: none.
  double second_marker_s = 0;
  std::string second_marker_label;
  size_t second_marker_row = 0;
};
// Marks: every segment has class "tl" and its kind as a class token (non-alphanumerics "-"), and
// attributes data-kind (the kind as given), data-row (row index), data-op,
// data-start and data-end (seconds, 6 significant digits) for the browser test. An op narrower
// than 3 px is drawn whole in its first kind's colour, inside one path per row and kind (class
// "tl-narrow", data-ops: how many).
std::string RenderTimeline(const TimelineChart& chart);

// Where RenderTimeline puts time t (seconds): x = x0_px + t x px_per_s. x0_px is the row-label
// column, max(90, min(300, text width of the longest label + 16)) (text width: 8.5 px per capital,
// 6.8 per other character); the axis runs from 0 to `axis_end_s`, the largest segment end or
// marker rounded up to 1, 2 or 5 x 10^k steps of about a sixth of it (in ms with milliseconds),
// over [x0_px, width - 20].
struct TimelineScale {
  double x0_px = 0, px_per_s = 0, axis_end_s = 0;
};
TimelineScale TimelineScaleOf(const TimelineChart& chart);

// ---- the measured stream timeline of one step (stepcast compare --html with a trace) ----

// One GPU record of the step, times from the step's start.
struct StreamKernel {
  int32_t stream = -1;
  double start_s = 0, end_s = 0;
  std::string category;  // the trace classifier's category: "gemm", "attention", "convolution",
                         // "elementwise", "memory_copy", "communication"
  std::string name;      // kernel name (hover text; clipped to 120 characters)
};

// The colour of a trace classifier category (plugin/trace: gemm, attention, convolution,
// elementwise, communication, memory_copy; anything else grey), Tableau 10: the measured lanes'
// kernels and, for the compute categories, the compare page's measured busy terms
// (cli/html.cc TermColour).
std::string CategoryColour(const std::string& category);

// The page-size bound: at most this many rectangles across all lanes.
inline constexpr size_t kMaxStreamRects = 20000;

// One lane per stream, each labelled "stream N (role)": role "communication" when communication
// kernels hold most of the lane's busy time, "copy" when memory copies/sets do, else "compute";
// lanes ordered compute, communication, copy, each by stream id. Every kernel is one segment of
// kind = its category (colours: CategoryColour; gemm, communication the same as
// the predicted rows'), hover text its name and times; idle time is left empty. When there are
// more than `max_rects` kernels, merge rules apply in turn until the count fits:
//   1. on a lane, a kernel joins the previous segment when both have the same category and the
//      gap between them is under one pixel (1 / px_per_s seconds): what is lost is gaps nobody
//      can see at this scale;
//   2. on a lane, consecutive segments of any category are grouped while a group spans under one
//      pixel; a group is drawn in the category with the most busy time in it (its hover text
//      lists each category's busy time). Every two groups advance the lane by at least a pixel
//      (the kernels of a stream do not overlap), so a lane holds at most about 2 x its width in
//      pixels;
//   3. with allow_drop, the narrowest segments are dropped (`dropped` counts them).
// max_rects 0 with allow_drop false: rules 1 and 2 always (an overview at a scale where the
// kernels are under a pixel; the page draws them one by one on their own scale beside it).
// A merged segment's op is "" and its title says how many kernels it holds.
struct StreamLanes {
  std::vector<TimelineRow> rows;
  std::vector<int32_t> streams;  // by row
  size_t kernels = 0;            // kernels given
  size_t segments = 0;           // drawn
  int merge_rule = 0;            // the last rule applied (0: none)
  size_t dropped = 0;            // by rule 3
};
StreamLanes LayOutStreamLanes(const std::vector<StreamKernel>& kernels, double px_per_s,
                              size_t max_rects = kMaxStreamRects, bool allow_drop = true);

// The rows of a laid-out pipeline: per stage its ops split into their segments (forward:
// forward, communication; backward: recompute, backward, weight-gradient, communication), idle
// time as "bubble", then "dp-sync" and "optimizer" after the last stage drains.
TimelineChart PipelineTimeline(const PipelineStep& step, const std::vector<std::vector<PipelineOp>>& ops);


// A grid of cells coloured by value (sequential scale; the better end dark), one row per
// rows[i], one column per columns[j]. NaN values are empty cells (no layout, does not fit).
struct HeatMap {
  std::string title, x_label, y_label;
  std::string value_label;  // "step time (s)", "MFU (%)"
  std::vector<std::string> columns, rows;
  std::vector<std::vector<double>> values;         // [row][column]
  std::vector<std::vector<std::string>> titles;    // [row][column] hover text; may be empty
  bool higher_is_better = true;
  int chosen_row = -1, chosen_column = -1;         // the chosen layout, outlined
  int width = 820;
};
std::string RenderHeatMap(const HeatMap& map);

struct Table {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // text, escaped on output
  std::vector<bool> numeric;                   // right-aligned columns (by index)
  std::vector<bool> flagged;                   // rows drawn as a warning (by index)
};
std::string RenderTable(const Table& table);

}  // namespace stepcast::html

#endif  // STEPCAST_CLI_CHART_H_
