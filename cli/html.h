// File: cli/html.h
//
// The page writer behind every `--html FILE`: one self-contained static HTML file per page, with
// inline CSS and inline SVG; no scripts, fonts, images, style sheets or URLs of any kind, so a
// page opens the same from a laptop, a CI artefact or an air-gapped cluster. Hover text is the
// SVG <title> element (every browser shows it as a tooltip; no script needed).
//
// No Debian package draws SVG charts from C++ (apt-cache search svg / chart: librsvg and svgpp
// parse SVG, KChart/QtCharts need Qt, gdchart draws rasters, plotters is Rust; docs/PAGES.md), so
// the writer is ours, small, and in this one place: axes (linear and log-log), scatter series
// with per-series colours and a <title> per point, identity bands (y = x +- 10% / 25%), curves,
// reference lines, stacked horizontal bars with a limit line, a heat-map grid, tables, legends.
// All text (row names, model names and sources come from user files) is escaped.
//
// Marks the browser test counts (tests/pages_test.py): every scatter point has class "pt", every
// bar segment class "bar", every heat-map cell with a value class "cell", every curve class
// "curve"; the chosen heat-map cell also has class "chosen".
//
// The page functions at the end are what the commands call: each is a short composition of the
// pieces above.
#ifndef STEPCAST_CLI_HTML_H_
#define STEPCAST_CLI_HTML_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/hardware.h"
#include "core/job.h"
#include "stepcast/v1/calibration.pb.h"
#include "stepcast/v1/comparison.pb.h"
#include "stepcast/v1/prediction.pb.h"
#include "stepcast/v1/probe.pb.h"
#include "stepcast/v1/validation.pb.h"

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

// `stepcast predict --html`: headline figures, the step-time breakdown as a stacked bar, memory per
// GPU against capacity, the bottleneck and its evidence (share, arithmetic intensity against the
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
// largest gap in words, warnings, and the table with each gap's likely cause.
std::string ComparisonPage(const v1::Comparison& c);

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
// `stepcast search --html`: step time (or MFU, `by_mfu`) over the layout grid; each cell is the
// best candidate with that row/column key (fastest step, or highest MFU, among those that fit);
// the chosen candidate's cell outlined; the top candidates as a table. Row and column order:
// first appearance in `candidates`.
std::string SearchPage(const std::string& title, const std::vector<SearchCandidate>& candidates,
                       const SearchCandidate& chosen, bool by_mfu);

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
