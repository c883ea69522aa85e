#include "cli/html.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "proto/codec.h"

namespace stepcast::html {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace


Page::Page(std::string title) : title_(std::move(title)) {}

Page& Page::Heading(std::string_view text) {
  absl::StrAppend(&body_, "<h2>", Escape(text), "</h2>\n");
  return *this;
}
Page& Page::Text(std::string_view text) {
  absl::StrAppend(&body_, "<p>", Escape(text), "</p>\n");
  return *this;
}
Page& Page::Note(std::string_view text) {
  absl::StrAppend(&body_, R"(<p class="note">)", Escape(text), "</p>\n");
  return *this;
}
Page& Page::Warning(std::string_view text) {
  absl::StrAppend(&body_, R"(<p class="warn">)", Escape(text), "</p>\n");
  return *this;
}
Page& Page::Facts(const std::vector<std::pair<std::string, std::string>>& facts) {
  body_ += R"(<div class="facts">)";
  for (const auto& [label, value] : facts) {
    absl::StrAppend(&body_, R"(<div class="fact"><div class="label">)", Escape(label), R"(</div><div class="value">)",
                    Escape(value), "</div></div>");
  }
  body_ += "</div>\n";
  return *this;
}
Page& Page::Svg(std::string svg) {
  absl::StrAppend(&body_, R"(<figure>)", svg, "</figure>\n");
  return *this;
}
Page& Page::Add(const Table& table) {
  body_ += RenderTable(table);
  return *this;
}

std::string Page::Html() const {
  // Inline CSS only: nothing is fetched (no fonts, no style sheets, no scripts).
  static constexpr char kStyle[] = R"(
body{margin:0;background:#f6f6f4;color:#111;font:14px/1.45 sans-serif}
main{max-width:1040px;margin:0 auto;padding:18px 24px 40px;background:#fff}
h1{font-size:22px;margin:8px 0 12px}
h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
p{margin:6px 0}
p.note{color:#555;font-size:13px}
p.warn{background:#fff3e0;border-left:4px solid #e67e22;padding:6px 10px}
figure{margin:10px 0;overflow-x:auto}
.facts{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.fact{border:1px solid #ddd;border-radius:6px;padding:6px 12px;min-width:120px;background:#fafafa}
.fact .label{font-size:12px;color:#555}
.fact .value{font-size:18px;font-weight:600}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px}
caption{text-align:left;font-weight:600;padding:4px 0}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.flag td{background:#fdecea}
details{margin:8px 0}
summary{cursor:pointer;font-weight:600}
footer{margin-top:28px;color:#777;font-size:12px}
)";
  return absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>", Escape(title_),
                      "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n<main>\n<h1>", Escape(title_), "</h1>\n",
                      body_, "<footer>Written by stepcast. A static page: no scripts, nothing fetched.</footer>\n",
                      "</main>\n</body>\n</html>\n");
}

absl::Status WritePage(const std::string& path, const std::string& html) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::NotFoundError(absl::StrCat(path, ": cannot open for writing"));
  out << html;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

// ---- pages ----

namespace {

// 13710000 -> "13,710,000".
std::string Thousands(double v) {
  const std::string digits = absl::StrFormat("%.0f", std::abs(v));
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}
std::string Pct(double fraction) { return absl::StrFormat("%.1f%%", 100 * fraction); }
std::string Gib(double bytes) { return absl::StrFormat("%.2f", bytes / (1ull << 30)); }
std::string Seconds(double s) { return absl::StrCat(Number(s), " s"); }
std::string Duration(double s) {
  if (s >= 86400) return absl::StrFormat("%.1f days", s / 86400);
  if (s >= 3600) return absl::StrFormat("%.1f h", s / 3600);
  return absl::StrFormat("%.1f s", s);
}
std::string BottleneckText(v1::BottleneckKind k) {
  std::string n = v1::BottleneckKind_Name(k);
  if (n.empty()) return absl::StrCat("unknown (", static_cast<int>(k), ")");  // a newer server's kind
  if (n.rfind("BOTTLENECK_KIND_", 0) == 0) n = n.substr(16);
  return absl::StrReplaceAll(absl::AsciiStrToLower(n), {{"_", " "}});
}

// The terms of a StepBreakdown in the order of `stepcast predict`'s report, with fixed colours
// (compute blues and teal, memory-bound yellow and green, communication warm colours, idle grey)
// so that every page draws a term in the same colour.
struct Term {
  const char* name;
  double (v1::StepBreakdown::*get)() const;
  const char* colour;
};
constexpr Term kTerms[] = {
    {"GEMM (fwd+bwd)", &v1::StepBreakdown::gemm_s, "#4e79a7"},
    {"attention core", &v1::StepBreakdown::attention_s, "#76b7b2"},
    {"elementwise / memory-bound", &v1::StepBreakdown::elementwise_s, "#edc948"},
    {"recompute", &v1::StepBreakdown::recompute_s, "#a0cbe8"},
    {"TP communication", &v1::StepBreakdown::tp_comm_s, "#f28e2b"},
    {"CP communication", &v1::StepBreakdown::cp_comm_s, "#e15759"},
    {"MoE dispatch (EP a2a, ETP)", &v1::StepBreakdown::ep_comm_s, "#ff9da7"},
    {"PP send/recv", &v1::StepBreakdown::pp_comm_s, "#9c755f"},
    {"DP gradient sync (exposed)", &v1::StepBreakdown::dp_comm_s, "#b07aa1"},
    {"pipeline bubble", &v1::StepBreakdown::pipeline_bubble_s, "#bab0ac"},
    {"optimizer step", &v1::StepBreakdown::optimizer_s, "#59a14f"},
    {"host kernel launches", &v1::StepBreakdown::launch_overhead_s, "#79706e"},
    {"exposed communication (measured)", &v1::StepBreakdown::exposed_communication_s, "#ffbe7d"},
    {"idle (measured)", &v1::StepBreakdown::idle_s, "#d4d4d4"},
};

// Colours of plugin/compare.h's terms, matching the prediction page's colours of the terms they
// gather (kTerms).
std::string TermColour(const std::string& term) {
  if (absl::StartsWith(term, "exposed all_reduce")) return "#f28e2b";
  if (absl::StartsWith(term, "exposed all_to_all")) return "#ff9da7";
  if (absl::StartsWith(term, "exposed send_recv")) return "#9c755f";
  if (absl::StartsWith(term, "exposed")) return "#e15759";
  if (absl::StartsWith(term, "idle")) return "#bab0ac";
  return CategoryColour(term);  // gemm, attention, convolution, elementwise (compare.cc's terms)
}

std::vector<std::pair<std::string, std::string>> JobFacts(const Job& job) {
  const Parallelism& par = job.parallelism;
  const TrainingConfig& t = job.training;
  std::string layout = absl::StrFormat("TP=%d PP=%d DP=%d CP=%d EP=%d", par.tp, par.pp, par.dp, par.cp, par.ep);
  if (par.etp > 0 && par.etp != par.tp) absl::StrAppend(&layout, " ETP=", par.etp);
  absl::StrAppend(&layout, " VPP=", par.vpp, " SP=", par.SequenceParallelOn() ? "on" : "off");
  return {{"layout", layout},
          {"sharding / recompute / GEMM dtype",
           absl::StrCat(ShardingName(t.sharding), " / ", RecomputeName(t.recompute), " / ", DTypeName(t.precision.gemm))},
          {"batch", absl::StrFormat("%d x %d tokens, micro-batch %d", t.global_batch_size, t.seq_length,
                                    t.micro_batch_size)},
          {"GPUs per node", absl::StrCat(job.GpusPerNode())}};
}

}  // namespace

namespace {

// The prediction page's headline figures.
std::vector<std::pair<std::string, std::string>> PredictionFacts(const v1::Prediction& p) {
  const v1::MemoryBreakdown& m = p.memory();
  const v1::StepTimeInterval& iv = p.step_time_interval();
  const char* verdict = p.memory_interval().verdict() == v1::MEMORY_VERDICT_TIGHT          ? " (TIGHT: may not fit)"
                        : p.memory_interval().verdict() == v1::MEMORY_VERDICT_DOES_NOT_FIT ? " (does not fit)"
                        : p.memory_interval().verdict() == v1::MEMORY_VERDICT_FITS         ? ""
                        : m.fits()                                                          ? ""
                                                                                            : " (does not fit)";
  std::vector<std::pair<std::string, std::string>> facts = {
      {"step time", Seconds(p.step_time_s())},
      {"tokens/s", absl::StrFormat("%s (%s per GPU)", Thousands(p.tokens_per_s()), Thousands(p.tokens_per_s_per_gpu()))},
      {"MFU / HFU", absl::StrCat(Pct(p.mfu()), " / ", Pct(p.hfu()))},
      {"memory per GPU", absl::StrFormat("%s of %s GiB%s", Gib(m.total_bytes()), Gib(m.capacity_bytes()), verdict)},
      {"bottleneck", BottleneckText(p.bottleneck().kind())},
      {"cost", absl::StrFormat("$%s per hour", Number(p.cost().per_hour_usd()))}};
  if (p.has_step_time_interval()) {
    facts.insert(facts.begin() + 1, {absl::StrFormat("%.0f%% interval", 100 * iv.coverage()),
                                     absl::StrFormat("%s-%s s", Number(iv.low_s()), Number(iv.high_s()))});
    facts.insert(facts.begin() + 2, {"validated runs behind it", absl::StrFormat("%.3g%s", iv.validated_runs(),
                                                                                  iv.validated() ? "" : " (outside the validated region)")});
  }
  if (p.cost().steps_per_run() > 0) {
    facts.emplace_back("time to train", Duration(p.cost().time_to_train_s()));
    facts.emplace_back("run cost", absl::StrCat("$", Thousands(p.cost().per_run_usd())));
  }
  return facts;
}

// The step time by term as a stacked bar and a table.
void AddStepTerms(const v1::Prediction& p, Page& page) {
  page.Heading("Step time by term (slowest pipeline stage)");
  const v1::StepBreakdown& b = p.breakdown();
  Bar bar{"one step", {}};
  Table terms;
  terms.header = {"term", "seconds", "share of step"};
  terms.numeric = {false, true, true};
  for (const Term& t : kTerms) {
    const double v = (b.*t.get)();
    if (!(v > 0)) continue;
    bar.segments.push_back({t.name, v, "", t.colour});
    terms.rows.push_back({t.name, Number(v), Pct(v / p.step_time_s())});
  }
  if (bar.segments.empty()) {
    page.Note("No breakdown: a quick estimate at an assumed MFU (seeds 001 and 004) has only the step time.");
  } else {
    page.Svg(RenderStackedBars({absl::StrFormat("Step time %s s", Number(p.step_time_s())), "seconds", {bar}, 0, "", 820}));
    terms.rows.push_back({"total", Number(p.step_time_s()), "100.0%"});
    page.Add(terms);
  }
}

// Memory per GPU against the capacity.
void AddMemory(const v1::Prediction& p, Page& page) {
  const v1::MemoryBreakdown& m = p.memory();
  page.Heading("Memory per GPU (most loaded stage) against capacity");
  Bar mem{"per GPU", {}};
  Table items;
  items.header = {"item", "GiB"};
  items.numeric = {false, true};
  for (size_t i = 0; i < static_cast<size_t>(m.items_size()); ++i) {
    const auto& it = m.items(static_cast<int>(i));
    mem.segments.push_back({it.name(), it.bytes() / (1ull << 30), "", PaletteColour(i)});
    items.rows.push_back({it.name(), Gib(it.bytes())});
  }
  items.rows.push_back({"total", Gib(m.total_bytes())});
  items.rows.push_back({"capacity", Gib(m.capacity_bytes())});
  page.Svg(RenderStackedBars({absl::StrFormat("%s of %s GiB: %s", Gib(m.total_bytes()), Gib(m.capacity_bytes()),
                                              m.fits() ? absl::StrCat("fits, ", Gib(m.headroom_bytes()), " GiB headroom")
                                                       : absl::StrCat("DOES NOT FIT, ", Gib(-m.headroom_bytes()), " GiB over")),
                              "GiB (2^30 bytes)",
                              {mem},
                              m.capacity_bytes() / (1ull << 30),
                              "capacity",
                              820}));
  if (!m.fits()) page.Warning("The job does not fit in GPU memory: it would fail at start-up.");
  page.Add(items);
}

// The bottleneck and its evidence.
void AddBottleneck(const v1::Prediction& p, Page& page) {
  const v1::Bottleneck& bn = p.bottleneck();
  page.Heading(absl::StrCat("Bottleneck: ", BottleneckText(bn.kind())));
  page.Text(bn.reason());
  page.Facts({{"share of the step", Pct(bn.share())},
              {"arithmetic intensity", absl::StrCat(Number(bn.arithmetic_intensity_flops_per_byte()), " FLOP/byte")},
              {"machine balance", absl::StrCat(Number(bn.machine_balance_flops_per_byte()), " FLOP/byte")}});
  if (bn.arithmetic_intensity_flops_per_byte() > 0 && bn.machine_balance_flops_per_byte() > 0) {
    page.Svg(RenderStackedBars(
        {"Arithmetic intensity of the step against the machine balance",
         "FLOP per byte",
         {{"step arithmetic intensity", {{"intensity", bn.arithmetic_intensity_flops_per_byte(), "", "#4e79a7"}}},
          {"machine balance", {{"balance", bn.machine_balance_flops_per_byte(), "", "#bab0ac"}}}},
         0,
         "",
         820}));
    page.Note("Arithmetic intensity: executed FLOPs per HBM byte of the step; machine balance: the profile's GEMM "
              "rate / HBM bandwidth. Seed 000's test: a step below the balance is memory-bound.");
  }
}

}  // namespace

namespace {

// The step of a prediction as the timeline lays it out. The Prediction carries the slowest
// stage's seconds per term for the whole step (StepBreakdown), the micro-batches per step and
// no per-stage or forward/backward split, so the timeline derives them here:
//  * every stage runs at the slowest stage's time per micro-batch (term / (m x VPP) per chunk);
//  * compute splits by the model's own ratio, backward = 2 x forward (dgrad + wgrad;
//    core/step_time.h): forward 1/3 of GEMM, attention core, elementwise and launch time;
//    weight gradient 1/3 of GEMM (the attention core and elementwise work have no weights:
//    their 2/3 is backward); recompute runs before the backward;
//  * communication splits as the model costs it (core/step_time.h): TP, EP and PP half
//    forward, half backward (2 all-reduces / all-to-alls / one send-recv each way), CP 1/3
//    forward, 2/3 backward (cp-1 ring steps forward, twice that backward);
//  * the exposed DP gradient sync and the optimizer step follow the drained pipeline.
PipelineStep PipelineStepOf(const v1::Prediction& p, const Parallelism& par) {
  const v1::StepBreakdown& b = p.breakdown();
  PipelineStep step;
  step.pp = par.pp;
  step.vpp = par.Schedule() == PipelineSchedule::kInterleaved1F1B ? par.vpp : 1;
  step.micro_batches = std::max<int64_t>(1, p.micro_batches_per_step());
  const double per = 1.0 / (step.micro_batches * step.vpp);
  const double rest = b.attention_s() + b.elementwise_s() + b.launch_overhead_s();
  step.forward_s = per * (b.gemm_s() + rest) / 3;
  step.weight_gradient_s = per * b.gemm_s() / 3;
  step.backward_s = per * (b.gemm_s() / 3 + 2 * rest / 3);
  step.recompute_s = per * b.recompute_s();
  const double halves = b.tp_comm_s() + b.ep_comm_s() + b.pp_comm_s();
  step.forward_comm_s = per * (halves / 2 + b.cp_comm_s() / 3);
  step.backward_comm_s = per * (halves / 2 + 2 * b.cp_comm_s() / 3);
  step.dp_comm_s = b.dp_comm_s();
  step.optimizer_s = b.optimizer_s();
  return step;
}

// The measured step's terms laid end to end (the trace analysis keeps per-step totals per
// category, not a per-record timeline).
TimelineRow MeasuredRow(const v1::Comparison& c) {
  TimelineRow row{"measured (busy per term)", {}};
  double t = 0;
  for (const auto& term : c.terms()) {
    if (!(term.measured_s() > 0)) continue;
    row.segments.push_back({term.term(), t, t + term.measured_s(), "",
                            absl::StrFormat("%s s busy per step (measured)", Number(term.measured_s())),
                            TermColour(term.term())});
    t += term.measured_s();
  }
  return row;
}

// The measured stream lanes of one step appended to `chart` (on its axis; in ms when the axis
// ends before 2 s), the step's end marked; with `notes`, notes on the page say which step and any
// merge.
// `overview`: the lanes are a small part of the axis and drawn again on their own scale, so here
// they are always merged below a pixel (rules 1 and 2 of LayOutStreamLanes).
void AddStreamLanes(const MeasuredStep& m, TimelineChart& chart, Page& page, bool notes = true,
                    bool overview = false) {
  const size_t first = chart.rows.size();
  // First pass unmerged (the labels and the axis do not depend on the merge), then again at the
  // chart's scale when over the bound.
  StreamLanes lanes = LayOutStreamLanes(m.kernels, 1.0, SIZE_MAX);
  for (auto& r : lanes.rows) r.label = absl::StrCat("measured ", r.label);
  chart.rows.insert(chart.rows.end(), lanes.rows.begin(), lanes.rows.end());
  chart.second_marker_s = m.step_time_s;
  chart.second_marker_label = absl::StrCat("measured step ", m.step);
  chart.second_marker_row = first;
  chart.milliseconds = TimelineScaleOf(chart).axis_end_s < 2;
  if (overview) {
    lanes = LayOutStreamLanes(m.kernels, TimelineScaleOf(chart).px_per_s, 0, false);
    for (size_t i = 0; i < lanes.rows.size(); ++i) chart.rows[first + i].segments = std::move(lanes.rows[i].segments);
    if (notes) {
      page.Note(absl::StrFormat(
          "On the shared axis the measured step is under a quarter of the width: its lanes there are merged below a "
          "pixel (%d kernels drawn as %d marks); the chart after it draws them on their own scale.",
          lanes.kernels, lanes.segments));
    }
  } else if (lanes.segments > kMaxStreamRects) {
    const TimelineScale scale = TimelineScaleOf(chart);
    lanes = LayOutStreamLanes(m.kernels, scale.px_per_s, kMaxStreamRects);
    for (size_t i = 0; i < lanes.rows.size(); ++i) chart.rows[first + i].segments = std::move(lanes.rows[i].segments);
    if (notes) page.Note(absl::StrFormat(
        "Measured lanes merged: %d kernels are more than the page's %d rectangles, so %s (%d drawn%s).",
        lanes.kernels, kMaxStreamRects,
        lanes.merge_rule == 1 ? "kernels of one category less than a pixel apart on a lane are drawn as one"
                              : "kernels of one category less than a pixel apart, then any kernels spanning under a "
                                "pixel together, are drawn as one (in the category with the most busy time)",
        lanes.segments, lanes.dropped > 0 ? absl::StrCat(", the ", lanes.dropped, " narrowest left out") : ""));
  }
  if (!notes) return;
  page.Note(absl::StrFormat(
      "Measured lanes: %s%s, step %d (numbered from 0; %d steps measured, steps by %s), the median-length step (of the steps sorted by length, the "
      "one at (n-1)/2%s): %s ms from its first GPU record to the next step's. One lane per GPU stream (compute, "
      "communication, copy: the category with the most busy time on it); each kernel, memcpy and memset drawn from "
      "its start to its end in its category's colour (plugin/probe/trace_analysis.h ClassifyKernel), empty where the "
      "stream is idle; %d GPU records in the step (one running across the step's start clipped to it).",
      m.path, m.rank >= 0 ? absl::StrCat(" (rank ", m.rank, ")") : "", m.step, m.steps, m.step_source,
      m.steps % 2 == 0 ? "; an even count: the shorter of the two middle ones, whose mean is the median step time" : "",
      Number(m.step_time_s * 1e3), m.kernels.size()));
}

// The lanes alone on their own scale (when they are a small part of the shared axis, or there is
// no predicted timeline).
void AddStreamLanesAlone(const MeasuredStep& m, Page& page, bool notes) {
  TimelineChart alone;
  alone.title = absl::StrFormat("Measured step %d, one lane per GPU stream (its own scale)", m.step);
  AddStreamLanes(m, alone, page, notes);
  page.Svg(RenderTimeline(alone));
}

// "Step timeline" section: the predicted step per pipeline stage (1F1B or interleaved 1F1B), and
// `measured` (may be null) as one more row, and the measured stream lanes of `lanes` (may be
// null). `par` null: the layout is unknown (a note says so).
void AddStepTimeline(const v1::Prediction& p, const Parallelism* par, const TimelineRow* measured, Page& page,
                     const MeasuredStep* lanes = nullptr) {
  page.Heading("Step timeline: one step per pipeline stage");
  std::string no_timeline;
  const PipelineSchedule schedule =
      par == nullptr ? PipelineSchedule::k1F1B : par->pp > 1 ? par->Schedule() : PipelineSchedule::k1F1B;
  if (p.breakdown().gemm_s() <= 0) {
    no_timeline = "No timeline: a quick estimate at an assumed MFU has no breakdown to lay out.";
  } else if (par == nullptr) {
    no_timeline = "No timeline: the prediction does not say its pipeline layout (give the job with --job).";
  } else if (schedule != PipelineSchedule::k1F1B && schedule != PipelineSchedule::kInterleaved1F1B) {
    no_timeline = absl::StrCat("No timeline: it lays out 1F1B and interleaved 1F1B; this job runs ",
                               PipelineScheduleName(schedule), ".");
  }
  absl::StatusOr<std::vector<std::vector<PipelineOp>>> ops;
  PipelineStep step;
  if (no_timeline.empty()) {
    step = PipelineStepOf(p, *par);
    ops = LayOutPipeline(step);
    if (!ops.ok()) no_timeline = absl::StrCat("No timeline: ", ops.status().message(), ".");
  }
  if (!no_timeline.empty()) {
    page.Note(no_timeline);
    if (lanes != nullptr) AddStreamLanesAlone(*lanes, page, true);
    return;
  }
  TimelineChart chart = PipelineTimeline(step, *ops);
  double drained = 0;
  for (const auto& row : *ops) drained = std::max(drained, row.empty() ? 0.0 : row.back().end_s);
  const double laid_out = drained + step.dp_comm_s + step.optimizer_s;
  chart.title = absl::StrFormat("%s, PP %d%s, %d micro-batches: %s s laid out", PipelineScheduleName(schedule), step.pp,
                                step.vpp > 1 ? absl::StrCat(" x VPP ", step.vpp) : "", step.micro_batches,
                                Number(laid_out));
  chart.marker_s = p.step_time_s();
  chart.marker_label = "the model's step time";
  if (measured != nullptr) chart.rows.push_back(*measured);
  if (lanes != nullptr) {
    // Small on the shared axis: an overview there, every kernel on the lanes' own scale after it.
    TimelineChart with = chart;
    TimelineSegment whole;
    whole.end_s = lanes->step_time_s;
    with.rows.push_back({"measured", {whole}});
    const bool small = lanes->step_time_s < 0.25 * TimelineScaleOf(with).axis_end_s;
    AddStreamLanes(*lanes, chart, page, true, small);
    page.Svg(RenderTimeline(chart));
    if (small) AddStreamLanesAlone(*lanes, page, false);
  } else {
    page.Svg(RenderTimeline(chart));
  }
  page.Note(absl::StrFormat(
      "Order: Megatron-LM megatron/core/pipeline_parallel/schedules.py (%s): stage s runs %s warm-up forwards, then "
      "one forward and one backward in turn, then the remaining backwards. Times: the prediction's breakdown of the "
      "slowest stage per micro-batch%s, every stage drawn at that time (the Prediction carries no per-stage times); "
      "backward = 2 x forward (dgrad + wgrad, core/step_time.h), weight gradient = 1/3 of the GEMM time; exposed "
      "communication in each forward and backward; grey: the pipeline bubble as the schedule leaves it. Laid out %s s "
      "against the model's %s s%s.",
      step.vpp > 1 ? "forward_backward_pipelining_with_interleaving" : "forward_backward_pipelining_without_interleaving",
      step.vpp > 1 ? "min((PP-s-1) x 2 + (VPP-1) x PP, m x VPP)" : "min(PP-s-1, m)",
      step.vpp > 1 ? " and model chunk" : "", Number(laid_out), Number(p.step_time_s()),
      step.pp > 1 ? absl::StrCat(": its bubble, ", Number(p.breakdown().pipeline_bubble_s()),
                                 " s, is (PP-1)/VPP x the average stage, not the slowest")
                  : ""));
  if (measured != nullptr && lanes == nullptr) {
    page.Note("Measured row: the trace analysis keeps each step's busy time per category, not a per-record timeline, "
              "so the measured step is drawn as its terms' seconds laid end to end (not in the order they ran; busy "
              "time on two streams at once counts twice).");
  } else if (measured != nullptr) {
    page.Note("Measured row (busy per term): the median step's busy time per term laid end to end (not in the order "
              "they ran; busy time on two streams at once counts twice); the lanes under it are one step as it ran.");
  }
}

}  // namespace

std::string PredictionPage(const v1::Prediction& p, const Job* job) {
  Page page(absl::StrCat("stepcast prediction: ", p.job_name()));
  page.Facts(PredictionFacts(p));
  const v1::StepTimeInterval& iv = p.step_time_interval();
  if (p.has_step_time_interval()) {
    // How far predictions like this one have been off (docs/VALIDATION.md "Intervals").
    page.Text(absl::StrCat("Regime: ", iv.regime(), ". ", iv.summary(), "."));
    for (const auto& n : iv.notes()) (iv.validated() ? page.Note(n) : page.Warning(n));
    if (p.memory_interval().available()) page.Text(absl::StrCat("Memory: ", p.memory_interval().summary(), "."));
  }
  page.Text(absl::StrFormat("%s (%.2fB parameters, %.2fB active) on %d x %s; profile %s; framework %s.",
                            p.model_name(), p.parameters().total() / 1e9, p.parameters().active() / 1e9, p.gpu_count(),
                            p.hardware_name(), p.profile_name(), p.framework()));
  if (job != nullptr) {
    Table t;
    t.header = {"job", ""};
    for (const auto& [k, v] : JobFacts(*job)) t.rows.push_back({k, v});
    page.Add(t);
  }

  AddStepTerms(p, page);
  AddStepTimeline(p, job != nullptr ? &job->parallelism : nullptr, nullptr, page);
  AddMemory(p, page);
  AddBottleneck(p, page);
  for (const auto& w : p.warnings()) page.Warning(w);
  if (p.assumed_inputs_size() > 0) {
    page.Heading("Assumed inputs (not stated by the job)");
    Table t;
    t.header = {"field", "value used", "source"};
    for (const auto& a : p.assumed_inputs()) t.rows.push_back({a.field(), a.value(), a.source()});
    page.Add(t);
  }
  return page.Html();
}

namespace {

// The signed error of each point of the predicted-against-measured chart.
XYChart ErrorChart(const XYChart& chart) {
  XYChart errors;
  errors.title = "Signed error of the prediction against measured step time";
  errors.x = {"measured step time (s)", true, chart.x.min, chart.x.max};
  errors.y = {"(predicted - measured) / measured (%)", false};
  errors.y_bands = {{-10, 10, "within 10%"}, {-25, 25, "within 25%"}};
  errors.reference_lines = {{"no error", 0, "#333333"}};
  for (const auto& series : chart.series) {
    Series e = series;
    for (auto& pt : e.points) pt.y = 100 * (pt.y - pt.x) / pt.x;
    errors.series.push_back(std::move(e));
  }
  errors.width = 860;
  errors.height = 420;
  return errors;
}

// Memory per GPU against measured peaks (the memory interval's runs).
void AddMemoryRuns(const v1::IntervalCoverage& cov, Page& page) {
  if (cov.memory_runs_size() == 0) return;
  page.Heading("Memory per GPU against measured peaks");
  Table mt;
  mt.header = {"run", "family", "metric", "measured GiB", "predicted GiB", "error", "source"};
  mt.numeric = {false, false, false, true, true, true, false};
  for (const auto& m : cov.memory_runs()) {
    mt.rows.push_back({m.id(), m.family(), m.metric(), Number(m.measured_gib()), Number(m.predicted_gib()),
                       m.skipped_reason().empty() ? absl::StrFormat("%+.1f%%", m.error_pct()) : m.skipped_reason(),
                       m.source()});
  }
  page.Add(mt);
  for (const auto& g : cov.memory_by_family()) {
    page.Note(g.available() ? absl::StrFormat("%s: %.3g measured runs; 80%% interval of measured / predicted "
                                              "%.3f-%.3f (the memory verdict: fits below the capacity at the upper "
                                              "end, TIGHT when the capacity lies inside)",
                                              g.family(), g.runs(), g.low_ratio(), g.high_ratio())
                            : absl::StrFormat("%s: %.3g measured runs, below the minimum: no memory interval",
                                              g.family(), g.runs()));
  }
}

// The interval coverage plot: each row's leave-one-source-out interval against its measured
// time, the coverage per regime and source, and the memory runs.
void AddCoverage(const v1::ValidationReport& r, const XYChart& chart, Page& page) {
  const v1::IntervalCoverage& cov = r.interval_coverage();
  if (cov.rows() == 0) return;
  // The coverage plot: each row's leave-one-source-out interval against its measured time.
  page.Heading(absl::StrFormat("%.0f%% intervals, leave-one-source-out: coverage %.1f%% (%d of %d rows)",
                               100 * cov.target(), 100 * cov.coverage(), cov.covered(), cov.rows()));
  // Relative to the measured time, so that every row's interval reads on one scale: covered
  // when its segment crosses 1.
  XYChart ci;
  ci.title = "Each row's 80% interval (from the other sources' residuals), relative to its measured step time";
  ci.x = {"measured step time (s)", true, chart.x.min, chart.x.max};
  ci.y = {"predicted / measured: interval and point", false};
  ci.reference_lines = {{"measured", 1.0, "#333333"}};
  Series inside{"covered: measured inside", {}, false, false, "#59a14f"};
  Series outside{"not covered", {}, false, false, "#e15759"};
  for (const auto& row : r.rows()) {
    if (!row.has_loso_interval() || !(row.measured_iter_time_s() > 0)) continue;
    const v1::StepTimeInterval& i = row.loso_interval();
    const std::string title = absl::StrFormat(
        "row %s, source %s: %s on %d x %s\nmeasured %s s; predicted %s s, interval %s-%s s (%s)\nfrom %s%s",
        row.row_id(), row.source_id(), row.model(), row.gpu_count(), row.gpu(), Number(row.measured_iter_time_s()),
        Number(row.loso_predicted_iter_time_s()), Number(i.low_s()), Number(i.high_s()),
        row.loso_covered() ? "inside" : "OUTSIDE", i.derived_from(), i.validated() ? "" : " (outside the validated region)");
    const double m = row.measured_iter_time_s();
    Series seg{title, {{m, i.low_s() / m, ""}, {m, i.high_s() / m, ""}}, true, false,
               row.loso_covered() ? "#59a14f" : "#e15759", false};
    ci.series.push_back(std::move(seg));
    (row.loso_covered() ? inside : outside).points.push_back({m, row.loso_predicted_iter_time_s() / m, title, !i.validated()});
  }
  ci.series.push_back(std::move(inside));
  ci.series.push_back(std::move(outside));
  ci.width = 860;
  ci.height = 640;
  page.Facts({{"coverage", absl::StrFormat("%.1f%% (target %.0f%%)", 100 * cov.coverage(), 100 * cov.target())},
              {"median half-width", absl::StrFormat("%.1f%%", cov.median_half_width_pct())},
              {"minimum runs per regime", absl::StrFormat("%.0f", cov.minimum_runs())}});
  page.Svg(RenderXY(ci));
  page.Note("A row is covered when its vertical segment crosses 1 (the measured time). Hollow markers: rows outside the validated "
            "region (the interval of the runs outside it). Intervals: weighted split-conformal 80% bounds of the leave-one-source-out "
            "residuals ln(measured / predicted) of the other sources' rows in the row's regime, or the nearest "
            "broader regime with the minimum of validated runs (docs/VALIDATION.md \"Intervals\").");
  Table ct;
  ct.header = {"group", "rows", "covered", "coverage", "median half-width", "unvalidated rows"};
  ct.numeric = {false, true, true, true, true, true};
  auto add = [&](const std::string& name, const v1::IntervalCoverageGroup& g) {
    ct.rows.push_back({name, absl::StrCat(g.rows()), absl::StrCat(g.covered()),
                       absl::StrFormat("%.1f%%", 100 * g.coverage()), absl::StrFormat("%.1f%%", g.median_half_width_pct()),
                       absl::StrCat(g.rows_unvalidated())});
    ct.flagged.push_back(g.rows() >= cov.minimum_runs() && g.coverage() < 0.6);
  };
  for (const auto& g : cov.by_regime()) add(g.group(), g);
  for (const auto& g : cov.by_source()) add(absl::StrCat("source ", g.group()), g);
  page.Add(ct);
  AddMemoryRuns(cov, page);
}

// |error| per source with the leave-one-source-out figures.
void AddSourceErrors(const v1::ValidationReport& r, Page& page) {
  const v1::ValidationSummary& s = r.summary();
  page.Heading("|error| of the predicted step time, per source");
  Table t;
  t.header = {"source", "rows", "median", "p90", "mean", "max", "experiments (median)", "not fit", "not predicted",
              "leave-one-source-out median", "LOSO p90", "choices switched off"};
  t.numeric = {false, true, true, true, true, true, true, true, true, true, true, false};
  auto pct = [](double v) { return absl::StrFormat("%.1f%%", v); };
  auto row_of = [&](const std::string& name, const v1::ValidationSummary& a, const v1::ValidationSummary* loso,
                    const std::string& choices) {
    t.rows.push_back({name, absl::StrCat(a.n_rows()), pct(a.median_abs_error_pct()), pct(a.p90_abs_error_pct()),
                      pct(a.mean_abs_error_pct()), pct(a.max_abs_error_pct()),
                      absl::StrFormat("%d (%.1f%%)", a.n_experiments(), a.median_experiment_abs_error_pct()),
                      absl::StrCat(a.n_not_fit()), absl::StrCat(a.n_skipped()),
                      loso ? pct(loso->median_abs_error_pct()) : "", loso ? pct(loso->p90_abs_error_pct()) : "", choices});
    t.flagged.push_back(a.n_not_fit() > 0);
  };
  for (const auto& bs : r.by_source()) {
    row_of(bs.source_id(), bs.summary(), &bs.leave_one_source_out(), absl::StrJoin(bs.choices_informed(), ", "));
  }
  row_of("all rows", s, nullptr, "");
  page.Add(t);
  page.Note("Rows predicted not to fit count as failures; a weak-scaling series counts once among the experiments. "
            "Leave-one-source-out: the source's rows predicted with every model choice its rows informed switched off.");
  // The lean of each model kind and GPU (ValidationReport.by_model_kind / by_hardware).
  if (r.by_model_kind_size() + r.by_hardware_size() > 0) {
    Table lean;
    lean.header = {"model kind / GPU", "rows", "median |error|", "p90", "median signed error"};
    lean.numeric = {false, true, true, true, true};
    auto add = [&](const v1::GroupSummary& g) {
      const v1::ValidationSummary& a = g.summary();
      lean.rows.push_back({g.group(), absl::StrCat(a.n_rows()), pct(a.median_abs_error_pct()),
                           pct(a.p90_abs_error_pct()), absl::StrFormat("%+.1f%%", a.median_signed_error_pct())});
      lean.flagged.push_back(std::fabs(a.median_signed_error_pct()) > 10);
    };
    for (const auto& g : r.by_model_kind()) add(g);
    for (const auto& g : r.by_hardware()) add(g);
    page.Add(lean);
    page.Note("Signed error: predicted / measured - 1, negative when the model predicts a group too fast; flagged "
              "beyond 10%. The intervals do not condition on the GPU where its runs are too few (docs/VALIDATION.md).");
  }
}

}  // namespace

std::string ValidationPage(const v1::ValidationReport& r, const std::string& csv_name) {
  Page page(absl::StrCat("stepcast validate: ", csv_name));
  // One series per source, in the order of the per-source summaries (then any other source).
  std::vector<std::string> sources;
  for (const auto& s : r.by_source()) sources.push_back(s.source_id());
  for (const auto& row : r.rows()) {
    if (std::find(sources.begin(), sources.end(), row.source_id()) == sources.end()) sources.push_back(row.source_id());
  }
  XYChart chart;
  chart.title = "Predicted against measured step time (log-log)";
  chart.x = {"measured step time (s)", true};
  chart.y = {"predicted step time (s)", true};
  chart.identity_line = true;
  chart.identity_bands = {0.10, 0.25};
  for (const auto& s : sources) {
    Series series;
    series.name = absl::StrCat("source ", s);
    chart.series.push_back(series);
  }
  int within10 = 0, within25 = 0, plotted = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  Table skipped;
  skipped.header = {"row", "source", "model", "GPUs", "why the model cannot express it"};
  Table all;
  all.header = {"row", "source", "model", "framework", "GPU", "GPUs", "measured s", "predicted s", "error",
                "memory", "bottleneck"};
  all.numeric = {false, false, false, false, false, true, true, true, true, false, false};
  for (const auto& row : r.rows()) {
    if (!row.skipped_reason().empty()) {
      skipped.rows.push_back({row.row_id(), row.source_id(), row.model(), absl::StrCat(row.gpu_count()), row.skipped_reason()});
      continue;
    }
    all.rows.push_back({row.row_id(), row.source_id(), row.model(), row.framework(), row.gpu(),
                        absl::StrCat(row.gpu_count()), Number(row.measured_iter_time_s()),
                        Number(row.predicted_iter_time_s()), absl::StrFormat("%+.1f%%", row.error_pct()),
                        row.memory_verdict() == v1::MEMORY_VERDICT_TIGHT         ? "TIGHT"
                        : row.memory_verdict() == v1::MEMORY_VERDICT_DOES_NOT_FIT ? "NO FIT"
                        : row.fits() || row.memory_verdict() == v1::MEMORY_VERDICT_FITS ? "fits"
                                                                                      : "NO FIT",
                        row.bottleneck()});
    all.flagged.push_back(!row.fits());
    if (!(row.measured_iter_time_s() > 0) || !(row.predicted_iter_time_s() > 0)) continue;
    const size_t i = std::find(sources.begin(), sources.end(), row.source_id()) - sources.begin();
    std::string title = absl::StrFormat(
        "row %s, source %s: %s on %d x %s (%s)\nmeasured %s s, predicted %s s (%+.1f%%)\nbottleneck %s; memory %s of %s GiB",
        row.row_id(), row.source_id(), row.model(), row.gpu_count(), row.gpu(), row.framework(),
        Number(row.measured_iter_time_s()), Number(row.predicted_iter_time_s()), row.error_pct(), row.bottleneck(),
        Gib(row.memory_total_bytes()), Gib(row.memory_capacity_bytes()));
    if (!row.fits()) absl::StrAppend(&title, " (predicted NOT TO FIT)");
    chart.series[i].points.push_back({row.measured_iter_time_s(), row.predicted_iter_time_s(), title, !row.fits()});
    lo = std::min({lo, row.measured_iter_time_s(), row.predicted_iter_time_s()});
    hi = std::max({hi, row.measured_iter_time_s(), row.predicted_iter_time_s()});
    ++plotted;
    within10 += std::abs(row.error_pct()) <= 10;
    within25 += std::abs(row.error_pct()) <= 25;
  }
  if (plotted > 0) {
    // One range for both axes, so y = x is the diagonal.
    chart.x.min = chart.y.min = std::pow(10, std::floor(std::log10(lo)));
    chart.x.max = chart.y.max = std::pow(10, std::ceil(std::log10(hi)));
    if (chart.x.max <= chart.x.min) chart.x.max = chart.y.max = chart.x.min * 10;
  }
  chart.width = 860;
  chart.height = 640;
  const v1::ValidationSummary& s = r.summary();
  page.Facts({{"rows predicted", absl::StrCat(plotted)},
              {"median |error|", absl::StrFormat("%.1f%%", s.median_abs_error_pct())},
              {"p90 |error|", absl::StrFormat("%.1f%%", s.p90_abs_error_pct())},
              {"within 10%", absl::StrFormat("%d of %d", within10, plotted)},
              {"within 25%", absl::StrFormat("%d of %d", within25, plotted)},
              {"predicted not to fit", absl::StrCat(s.n_not_fit())},
              {"not predicted", absl::StrCat(s.n_skipped())}});
  page.Svg(RenderXY(chart));
  page.Svg(RenderXY(ErrorChart(chart)));
  page.Note("Each point is one published run: measured iteration time as the source defines it (docs/VALIDATION.md), "
            "predicted with no fitting on one reference profile per GPU type. Shaded: within 10% and 25%. Hollow "
            "markers: rows predicted not to fit in memory (each a failure: every published run ran). Hover a "
            "point for its row.");
  AddCoverage(r, chart, page);
  AddSourceErrors(r, page);
  if (!skipped.rows.empty()) {
    page.Heading("Rows the model cannot express");
    page.Add(skipped);
  }
  page.Heading("Every predicted row");
  page.Add(all);
  return page.Html();
}

std::string ComparisonPage(const v1::Comparison& c, const v1::Prediction* prediction, const Parallelism* layout,
                           const MeasuredStep* measured_step) {
  Page page(absl::StrCat("stepcast compare: ", c.title()));
  const double pred_s = c.predicted_step_time_s(), meas_s = c.measured_step_time_s();
  page.Facts({{"predicted step", Seconds(pred_s)},
              {"measured step", Seconds(meas_s)},
              {"prediction error", meas_s > 0 ? absl::StrFormat("%+.1f%%", 100 * (pred_s - meas_s) / meas_s) : "n/a"},
              {"MFU predicted / measured", absl::StrCat(Pct(c.predicted_mfu()), " / ", Pct(c.measured_mfu()))},
              {"measured from", absl::StrFormat("%s, %d steps, %d rank(s)", c.measured_source().empty() ? "?" : c.measured_source(),
                                                c.measured_steps(), c.ranks())}});
  if (!c.largest_gap().empty()) page.Text(absl::StrCat("Largest gap: ", c.largest_gap(), "."));
  for (const auto& w : c.warnings()) page.Warning(w);

  Bar pred{"predicted", {}}, meas{"measured", {}};
  StackedBarChart pairs{"Each term, predicted and measured (largest gap first)", "seconds per step", {}, 0, "", 820};
  Table t;
  t.header = {"term", "predicted s", "measured s", "measured - predicted s", "likely cause of the gap"};
  t.numeric = {false, true, true, true, false};
  double pred_sum = 0, meas_sum = 0;
  for (const auto& term : c.terms()) {
    const std::string colour = TermColour(term.term());
    pred.segments.push_back({term.term(), term.predicted_s(), "", colour});
    meas.segments.push_back({term.term(), term.measured_s(), "", colour});
    pred_sum += std::max(0.0, term.predicted_s());
    meas_sum += std::max(0.0, term.measured_s());
    const std::string why = term.explanation().empty() ? "" : absl::StrCat("\n", term.explanation());
    pairs.bars.push_back({absl::StrCat(term.term(), ", predicted"),
                          {{"predicted", term.predicted_s(),
                            absl::StrFormat("%s predicted: %s s", term.term(), Number(term.predicted_s())), "#4e79a7"}}});
    pairs.bars.push_back({absl::StrCat(term.term(), ", measured"),
                          {{"measured", term.measured_s(),
                            absl::StrFormat("%s measured: %s s (%+.4g s)%s", term.term(), Number(term.measured_s()),
                                            term.difference_s(), why),
                            "#f28e2b"}}});
    t.rows.push_back({term.term(), Number(term.predicted_s()), Number(term.measured_s()),
                      absl::StrFormat("%+.4g", term.difference_s()), term.explanation()});
  }
  // What the terms leave of each step (host launch gaps in a prediction; in a measurement, busy
  // kernels overlap across streams, so the terms may add up to more than the step).
  if (pred_s - pred_sum > 1e-9 * pred_s) pred.segments.push_back({"rest of the step", pred_s - pred_sum, "", "#e8e8e8"});
  if (meas_s - meas_sum > 1e-9 * meas_s) meas.segments.push_back({"rest of the step", meas_s - meas_sum, "", "#e8e8e8"});
  page.Svg(RenderStackedBars({"Predicted and measured step, by term", "seconds per step", {pred, meas}, 0, "", 820}));
  page.Svg(RenderStackedBars(pairs));
  page.Add(t);
  page.Note("Terms (plugin/compare.h): gemm = GEMM + recompute predicted, GEMM kernels measured; elementwise includes "
            "the optimizer and memory copies; exposed communication is HTA's definition (not under a computation "
            "kernel); idle / bubble = the pipeline bubble predicted, no kernel running measured. Measured busy time "
            "can overlap across streams, so the measured bar may exceed the measured step.");
  if (prediction != nullptr) {
    // Without the job's layout, a prediction with no pipeline bubble and no PP communication is
    // one stage.
    Parallelism one_stage;
    const v1::StepBreakdown& b = prediction->breakdown();
    if (layout == nullptr && b.pipeline_bubble_s() == 0 && b.pp_comm_s() == 0) layout = &one_stage;
    const TimelineRow measured = MeasuredRow(c);
    AddStepTimeline(*prediction, layout, &measured, page, measured_step);
  } else if (measured_step != nullptr) {
    page.Heading("Measured step timeline");
    AddStreamLanesAlone(*measured_step, page, true);
  }
  return page.Html();
}

std::string SearchPage(const std::string& title, const std::vector<SearchCandidate>& candidates,
                       const SearchCandidate& chosen, bool by_mfu, const SearchCounts* search) {
  Page page(absl::StrCat("stepcast search: ", title));
  std::vector<std::string> rows, columns;
  for (const auto& c : candidates) {
    if (std::find(rows.begin(), rows.end(), c.row) == rows.end()) rows.push_back(c.row);
    if (std::find(columns.begin(), columns.end(), c.column) == columns.end()) columns.push_back(c.column);
  }
  HeatMap h;
  h.title = by_mfu ? "Best MFU per layout cell" : "Fastest step per layout cell";
  h.rows = rows;
  h.columns = columns;
  h.value_label = by_mfu ? "MFU (%)" : "step time (s)";
  h.higher_is_better = by_mfu;
  h.values.assign(rows.size(), std::vector<double>(columns.size(), kNaN));
  h.titles.assign(rows.size(), std::vector<std::string>(columns.size()));
  std::vector<std::vector<int>> counts(rows.size(), std::vector<int>(columns.size(), 0));
  std::vector<std::vector<const SearchCandidate*>> best(rows.size(), std::vector<const SearchCandidate*>(columns.size()));
  for (const auto& c : candidates) {
    const size_t i = std::find(rows.begin(), rows.end(), c.row) - rows.begin();
    const size_t j = std::find(columns.begin(), columns.end(), c.column) - columns.begin();
    ++counts[i][j];
    if (!c.fits) continue;
    const SearchCandidate* b = best[i][j];
    if (b == nullptr || (by_mfu ? c.mfu > b->mfu : c.step_time_s < b->step_time_s)) best[i][j] = &c;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < columns.size(); ++j) {
      const SearchCandidate* b = best[i][j];
      if (b == nullptr) {
        h.titles[i][j] = counts[i][j] ? absl::StrFormat("%s %s: %d layouts, none fits", rows[i], columns[j], counts[i][j])
                                      : absl::StrFormat("%s %s: no valid layout", rows[i], columns[j]);
        continue;
      }
      h.values[i][j] = by_mfu ? 100 * b->mfu : b->step_time_s;
      h.titles[i][j] = absl::StrFormat("%s\nstep %s s, MFU %s\nbest of %d layouts in this cell", b->layout,
                                       Number(b->step_time_s), Pct(b->mfu), counts[i][j]);
    }
  }
  h.chosen_row = static_cast<int>(std::find(rows.begin(), rows.end(), chosen.row) - rows.begin());
  h.chosen_column = static_cast<int>(std::find(columns.begin(), columns.end(), chosen.column) - columns.begin());
  if (h.chosen_row >= static_cast<int>(rows.size()) || h.chosen_column >= static_cast<int>(columns.size())) {
    h.chosen_row = h.chosen_column = -1;
  }
  if (!rows.empty()) {
    h.y_label = rows.front().substr(0, rows.front().find('='));
    h.x_label = columns.front().substr(0, columns.front().find('='));
  }
  std::vector<std::pair<std::string, std::string>> facts = {
      {"chosen layout", chosen.layout}, {"step time", Seconds(chosen.step_time_s)}, {"MFU", Pct(chosen.mfu)}};
  if (search != nullptr) {
    facts.emplace_back("layouts evaluated", absl::StrFormat("%s of %s", Thousands(search->evaluated),
                                                            Thousands(search->enumerated)));
    facts.emplace_back("fit in memory, ranked", Thousands(search->fitting));
  }
  facts.emplace_back("ranked layouts shown", Thousands(candidates.size()));
  page.Facts(facts);
  if (search != nullptr) {
    page.Note(absl::StrFormat(
        "The search enumerated %s layouts: %s pruned by the memory lower bound, %s evaluated (memory fit decided), %s "
        "of them fit and were ranked by the objective. This page shows %s of them: the top layouts, the Pareto front "
        "and the best per GPU count (%s rows, each layout once).",
        Thousands(search->enumerated), Thousands(search->pruned), Thousands(search->evaluated),
        Thousands(search->fitting), Thousands(candidates.size()), Thousands(search->listed)));
  }
  page.Svg(RenderHeatMap(h));
  page.Note("Each cell shows the best layout with that row and column among those that fit in memory; grey cells have "
            "no valid layout or none that fits. Hover a cell for its layout.");
  std::vector<const SearchCandidate*> order;
  for (const auto& c : candidates) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [&](const SearchCandidate* a, const SearchCandidate* b) {
    if (a->fits != b->fits) return a->fits;
    return by_mfu ? a->mfu > b->mfu : a->step_time_s < b->step_time_s;
  });
  Table t;
  t.caption = "The best layouts";
  t.header = {"#", "layout", "step s", "MFU", "fits", "note"};
  t.numeric = {true, false, true, true, false, false};
  for (size_t k = 0; k < order.size() && k < 20; ++k) {
    const SearchCandidate& c = *order[k];
    t.rows.push_back({absl::StrCat(k + 1), c.layout, Number(c.step_time_s), Pct(c.mfu), c.fits ? "yes" : "NO", c.note});
    t.flagged.push_back(!c.fits);
  }
  page.Add(t);
  return page.Html();
}

namespace {

// Sizes from lo to hi, `per_decade` points per decade (log-spaced), for model curves.
std::vector<double> LogSpace(double lo, double hi, int per_decade) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi > lo)) return out;
  const double step = 1.0 / per_decade;
  for (double e = std::log10(lo); e < std::log10(hi) + 1e-9; e += step) out.push_back(std::pow(10, e));
  return out;
}

std::string CollectiveText(v1::Collective c) {
  std::string n = v1::Collective_Name(c);
  return absl::AsciiStrToLower(n.rfind("COLLECTIVE_", 0) == 0 ? n.substr(11) : n);
}
std::string ScopeText(v1::Scope s) { return s == v1::SCOPE_INTER_NODE ? "inter-node" : "intra-node"; }
std::string DTypeText(v1::DType d) {
  std::string n = v1::DType_Name(d);
  return absl::AsciiStrToLower(n.rfind("D_TYPE_", 0) == 0 ? n.substr(7) : n);
}
std::string Bytes(double b) {
  if (b >= 1ull << 30) return absl::StrFormat("%.3g GiB", b / (1ull << 30));
  if (b >= 1 << 20) return absl::StrFormat("%.3g MiB", b / (1 << 20));
  if (b >= 1 << 10) return absl::StrFormat("%.3g KiB", b / (1 << 10));
  return absl::StrFormat("%.0f B", b);
}

// A GEMM's shape class, for colouring rate-against-size points: "square" (largest / smallest
// dimension <= 4), "long K" (k the largest: reduction-heavy, e.g. a row-parallel projection),
// otherwise "skinny M or N" (few tokens, or a narrow output).
std::string ShapeClass(int64_t m, int64_t n, int64_t k) {
  const double lo = std::min({m, n, k}), hi = std::max({m, n, k});
  if (hi <= 4 * lo) return "square";
  if (k >= m && k >= n) return "long K";
  return "skinny M or N";
}

}  // namespace

namespace {

// One measured collective curve of a calibration run: a collective on a group size.
struct CollectiveGroup {
  v1::Collective collective;
  int64_t ranks = 0, ranks_per_node = 0;
  std::vector<std::pair<double, double>> size_time;  // measured (bytes, median s)
};

// The run's conditions as headline figures, its command line and warnings.
void AddConditions(const v1::CalibrationRun& run, Page& page) {
  const v1::CalibrationConditions& cond = run.conditions();
  const v1::RateProfile& prof = run.profile();
  std::vector<std::pair<std::string, std::string>> facts;
  if (!cond.gpu_name().empty()) facts.emplace_back("GPU", absl::StrCat(cond.gpu_count(), " x ", cond.gpu_name()));
  if (cond.ranks() > 0) facts.emplace_back("ranks", absl::StrCat(cond.ranks()));
  if (!cond.host().empty()) facts.emplace_back("host", cond.host());
  for (const auto& [label, v] : {std::pair{"driver", cond.driver_version()}, std::pair{"CUDA", cond.cuda_runtime_version()},
                                 std::pair{"cuBLAS", cond.cublas_version()}, std::pair{"NCCL", cond.nccl_version()}}) {
    if (!v.empty()) facts.emplace_back(label, v);
  }
  if (!prof.hardware().empty()) facts.emplace_back("hardware preset", prof.hardware());
  if (!facts.empty()) page.Facts(facts);
  if (!cond.command_line().empty()) page.Note(absl::StrCat("command: ", cond.command_line()));
  for (const auto& w : run.warnings()) page.Warning(w);
}

// The model's collective curves: the profile's rates as core evaluates them (a partial
// profile, e.g. an import of collectives only, still draws).
RateProfile ModelOfProfile(const v1::RateProfile& prof) {
  RateProfile model;
  for (const auto& r : prof.collectives()) {
    CollectiveRate c;
    c.collective = CollectiveFromProto(r.collective());
    c.scope = r.scope() == v1::SCOPE_INTER_NODE ? Scope::kInterNode : Scope::kIntraNode;
    c.group_size = r.group_size();
    c.ranks_per_node = r.ranks_per_node();
    c.alpha_s = r.alpha_s();
    c.busbw_bytes_per_s = r.busbw_bytes_per_s();
    for (const auto& pt : r.points()) c.points.push_back({pt.size_bytes(), pt.time_s()});
    c.source = r.source();
    model.collectives.push_back(std::move(c));
  }

  return model;
}

// The measured curves of one scope: the run's samples, or for an import (no samples) the
// profile's measured points.
std::vector<CollectiveGroup> CollectiveGroups(const v1::CalibrationRun& run, v1::Scope scope) {
  const v1::RateProfile& prof = run.profile();
  std::vector<CollectiveGroup> groups;
  auto group_of = [&](v1::Collective c, int64_t ranks, int64_t per_node) -> CollectiveGroup& {
    for (auto& g : groups) {
      if (g.collective == c && g.ranks == ranks && g.ranks_per_node == per_node) return g;
    }
    groups.push_back({c, ranks, per_node, {}});
    return groups.back();
  };
  for (const auto& sample : run.collectives()) {
    if (sample.scope() != scope || !(sample.time().median_s() > 0) || !(sample.size_bytes() > 0)) continue;
    group_of(sample.collective(), sample.ranks(), 0).size_time.emplace_back(sample.size_bytes(), sample.time().median_s());
  }
  if (run.collectives().empty()) {  // an import: the profile's measured curves
    for (const auto& rate : prof.collectives()) {
      if (rate.scope() != scope) continue;
      for (const auto& pt : rate.points()) {
        if (pt.time_s() > 0 && pt.size_bytes() > 0) {
          group_of(rate.collective(), rate.group_size(), rate.ranks_per_node())
              .size_time.emplace_back(pt.size_bytes(), pt.time_s());
        }
      }
    }
  }
  return groups;
}

// Busbw and time against size for one scope: measured points, the model's curve, the reference
// profile's, and the datasheet link bandwidth.
void AddCollectiveScope(const v1::CalibrationRun& run, const RateProfile& model, const Hardware* hardware,
                        v1::Scope scope, Page& page) {
  std::vector<CollectiveGroup> groups = CollectiveGroups(run, scope);
  if (groups.empty()) return;
  page.Heading(absl::StrCat("Collectives, ", ScopeText(scope)));
  XYChart busbw, time;
  busbw.title = absl::StrCat("Bus bandwidth against message size (", ScopeText(scope), ")");
  busbw.x = {"message size (bytes, as nccl-tests counts it)", true};
  busbw.y = {"busbw (GB/s, 1e9 bytes/s)", false};
  time.title = absl::StrCat("Time against message size (", ScopeText(scope), ")");
  time.x = busbw.x;
  time.y = {"time (s)", true};
  const Scope core_scope = scope == v1::SCOPE_INTER_NODE ? Scope::kInterNode : Scope::kIntraNode;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    CollectiveGroup& g = groups[gi];
    std::sort(g.size_time.begin(), g.size_time.end());
    const Collective core_c = CollectiveFromProto(g.collective);
    const int64_t n = g.ranks > 0 ? g.ranks : 2;
    const double factor = BusBwFactor(core_c, n);
    std::string name = absl::StrCat(CollectiveText(g.collective), " x", n);
    if (g.ranks_per_node > 0) absl::StrAppend(&name, " (", g.ranks_per_node, "/node)");
    const std::string colour = PaletteColour(gi);
    Series pts_bw{absl::StrCat(name, " measured"), {}, false, false, colour};
    Series pts_t = pts_bw;
    for (const auto& [size, t] : g.size_time) {
      const double bw = size * factor / t;
      const std::string title = absl::StrFormat("%s, %s: %s, busbw %.1f GB/s", name, Bytes(size), Seconds(t), bw / 1e9);
      pts_bw.points.push_back({size, bw / 1e9, title});
      pts_t.points.push_back({size, t, title});
    }
    busbw.series.push_back(pts_bw);
    time.series.push_back(pts_t);
    const double lo = g.size_time.front().first, hi = g.size_time.back().first;
    auto curve = [&](const CollectiveRate* rate, const std::string& label, bool dashed) {
      if (rate == nullptr) return;
      Series cb{absl::StrCat(name, " ", label), {}, true, dashed, colour};
      Series ct = cb;
      for (double size : LogSpace(lo, hi, 8)) {
        const double t = EstimateCollective(*rate, n, size, g.ranks_per_node).time_s;
        if (!(t > 0)) continue;
        cb.points.push_back({size, size * factor / t / 1e9, ""});
        ct.points.push_back({size, t, ""});
      }
      busbw.series.push_back(cb);
      time.series.push_back(ct);
    };
    curve(model.FindCollective(core_c, core_scope, n, g.ranks_per_node), "model", false);
    if (hardware != nullptr) {
      curve(hardware->reference_profile.FindCollective(core_c, core_scope, n, g.ranks_per_node), "reference profile", true);
    }
  }
  if (hardware != nullptr) {
    const double link = scope == v1::SCOPE_INTER_NODE ? hardware->inter_node_bandwidth_bytes_per_s
                                                      : hardware->intra_node_bandwidth_bytes_per_s;
    if (link > 0) {
      busbw.reference_lines.push_back(
          {scope == v1::SCOPE_INTER_NODE ? "datasheet NIC bandwidth per GPU" : "datasheet NVLink bandwidth per GPU",
           link / 1e9, "#c00000"});
    }
  }
  page.Svg(RenderXY(busbw));
  page.Svg(RenderXY(time));
  page.Note(absl::StrCat(
      "model: this profile's curve as the step model evaluates it (core/hardware.h EstimateCollective: "
      "interpolated between measured sizes, alpha-beta beyond); reference profile: the ",
      hardware != nullptr ? hardware->name : "hardware", " preset's; busbw as nccl-tests defines it (algbw x ",
      "2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all)."));
}

// The alpha-beta fits of the run's collectives.
void AddCollectiveFits(const v1::CalibrationRun& run, Page& page) {
  if (!run.fits().empty()) {
    Table t;
    t.caption = "Alpha-beta fits: time = alpha + size x factor / busbw, per size range";
    t.header = {"collective", "scope", "ranks", "from", "to", "alpha (us)", "busbw (GB/s)", "median |error| of the fit"};
    t.numeric = {false, false, true, true, true, true, true, true};
    for (const auto& f : run.fits()) {
      for (const auto& seg : f.segments()) {
        t.rows.push_back({CollectiveText(f.collective()), ScopeText(f.scope()), absl::StrCat(f.ranks()),
                          Bytes(seg.min_size_bytes()),
                          seg.max_size_bytes() > seg.min_size_bytes() ? Bytes(seg.max_size_bytes()) : "(no limit)",
                          Number(seg.alpha_s() * 1e6),
                          Number(seg.busbw_bytes_per_s() / 1e9), Pct(f.median_relative_error())});
      }
    }
    page.Add(t);
  }

}

// GEMM rate against size 2mnk, coloured by shape, with the size fit and the reference lines.
void AddGemm(const v1::CalibrationRun& run, const Hardware* hardware, Page& page) {
  const v1::RateProfile& prof = run.profile();
  // ---- GEMM rate against size, by shape ----
  struct GemmPoint {
    v1::DType dtype;
    int64_t m, n, k;
    double flops_per_s;
  };
  std::vector<GemmPoint> gemms;
  for (const auto& g : run.gemm()) {
    if (g.median_flops_per_s() > 0) gemms.push_back({g.dtype(), g.m(), g.n(), g.k(), g.median_flops_per_s()});
  }
  if (run.gemm().empty()) {
    for (const auto& g : prof.gemm()) {
      if (g.m() > 0 && g.n() > 0 && g.k() > 0 && g.flops_per_s() > 0) gemms.push_back({g.dtype(), g.m(), g.n(), g.k(), g.flops_per_s()});
    }
  }
  if (!gemms.empty()) {
    page.Heading("GEMM rate against size and shape");
    XYChart chart;
    chart.title = "GEMM throughput against size (2mnk FLOPs)";
    chart.x = {"GEMM size 2mnk (FLOPs)", true};
    chart.y = {"TFLOP/s (1e12 FLOP/s)", false};
    std::vector<std::string> keys;
    std::set<v1::DType> dtypes;
    double fmin = std::numeric_limits<double>::infinity(), fmax = 0;
    for (const auto& g : gemms) {
      const std::string key = absl::StrCat(DTypeText(g.dtype), " ", ShapeClass(g.m, g.n, g.k));
      size_t i = std::find(keys.begin(), keys.end(), key) - keys.begin();
      if (i == keys.size()) {
        keys.push_back(key);
        Series s;
        s.name = key;
        chart.series.push_back(s);
      }
      const double f = 2.0 * g.m * g.n * g.k;
      fmin = std::min(fmin, f);
      fmax = std::max(fmax, f);
      dtypes.insert(g.dtype);
      chart.series[i].points.push_back(
          {f, g.flops_per_s / 1e12,
           absl::StrFormat("%s GEMM m=%d n=%d k=%d: %.1f TFLOP/s", DTypeText(g.dtype), g.m, g.n, g.k, g.flops_per_s / 1e12)});
    }
    for (const auto& fit : run.gemm_fits()) {
      if (!(fit.r_max_flops_per_s() > 0)) continue;
      Series s;
      s.name = absl::StrCat(DTypeText(fit.dtype()), " size fit r_max F/(F+f_half)");
      s.line = true;
      s.colour = "#333333";
      for (double f : LogSpace(fmin, fmax, 10)) {
        s.points.push_back({f, fit.r_max_flops_per_s() * f / (f + fit.f_half_flops()) / 1e12, ""});
      }
      chart.series.push_back(s);
    }
    if (hardware != nullptr) {
      for (v1::DType d : dtypes) {
        const DType cd = DTypeFromProto(d);
        if (hardware->PeakFlops(cd) > 0) {
          chart.reference_lines.push_back({absl::StrCat(DTypeText(d), " datasheet peak"), hardware->PeakFlops(cd) / 1e12, "#c00000"});
        }
        const double ref = hardware->reference_profile.GemmRate(cd, 8192, 8192, 8192).flops_per_s;
        if (ref > 0) chart.reference_lines.push_back({absl::StrCat(DTypeText(d), " reference profile"), ref / 1e12, "#7f7f7f"});
      }
    }
    chart.height = 560;
    page.Svg(RenderXY(chart));
    page.Note("Shapes: square (largest dimension at most 4x the smallest), long K (k largest), skinny M or N. The size "
              "fit is calibrate/fits.h FitGemmRate; the reference profile's rate is its 8192^3 GEMM.");
  }

}

// HBM bandwidth of the stream kernels and the stragglers.
void AddHbmAndStragglers(const v1::CalibrationRun& run, const Hardware* hardware, Page& page) {
  // ---- HBM ----
  if (!run.hbm().empty()) {
    page.Heading("HBM bandwidth");
    StackedBarChart bars{"Memory bandwidth: measured kernels against the datasheet", "GB/s (1e9 bytes/s)", {}, 0, "", 820};
    for (const auto& h : run.hbm()) {
      bars.bars.push_back({absl::StrFormat("%s, GPU %d, %s", h.kernel(), h.gpu(), Bytes(h.bytes())),
                           {{"measured", h.median_bytes_per_s() / 1e9, "", "#4e79a7"}}});
    }
    if (hardware != nullptr) {
      bars.bars.push_back({"reference profile", {{"reference", hardware->reference_profile.hbm_bandwidth_bytes_per_s / 1e9, "", "#bab0ac"}}});
      bars.limit = hardware->hbm_bandwidth_bytes_per_s / 1e9;
      bars.limit_label = "datasheet";
    }
    page.Svg(RenderStackedBars(bars));
  }
  if (!run.stragglers().empty()) {
    Table t;
    t.caption = "Stragglers (more than 5% below the node's median)";
    t.header = {"GPU", "metric", "value", "node median", "slowdown"};
    t.numeric = {true, false, true, true, true};
    for (const auto& s : run.stragglers()) {
      t.rows.push_back({absl::StrCat(s.gpu()), s.metric(), Number(s.value()), Number(s.node_median()), Pct(s.slowdown())});
    }
    page.Add(t);
  }
}

}  // namespace

std::string CalibrationPage(const v1::CalibrationRun& run, const Hardware* hardware) {
  const v1::RateProfile& prof = run.profile();
  Page page(absl::StrCat("stepcast-calibrate: ", prof.name().empty() ? "rate profile" : prof.name()));
  AddConditions(run, page);
  const RateProfile model = ModelOfProfile(prof);
  for (v1::Scope scope : {v1::SCOPE_INTRA_NODE, v1::SCOPE_INTER_NODE}) AddCollectiveScope(run, model, hardware, scope, page);
  AddCollectiveFits(run, page);
  AddGemm(run, hardware, page);
  AddHbmAndStragglers(run, hardware, page);
  return page.Html();
}

}  // namespace stepcast::html
