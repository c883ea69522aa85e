// cli/chart.h LayOutPipeline against hand-worked pipelines (Megatron-LM's
// megatron/core/pipeline_parallel/schedules.py order; the step lengths of Narayanan et al. 2021,
// "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Sec. 2.2:
// (m + p - 1)(tf + tb) for 1F1B, m (tf + tb) + (p - 1)(tf + tb) / v interleaved), and its errors.
#include "cli/chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stepcast::html {
namespace {

// Forward tf and backward 2 tf per micro-batch and chunk, split as the pages split them.
PipelineStep Step(int64_t pp, int64_t vpp, int64_t m, double tf) {
  PipelineStep s;
  s.pp = pp;
  s.vpp = vpp;
  s.micro_batches = m;
  s.forward_s = 0.75 * tf;
  s.forward_comm_s = 0.25 * tf;
  s.backward_s = tf;
  s.weight_gradient_s = 0.75 * tf;
  s.backward_comm_s = 0.25 * tf;
  return s;
}

// Forwards before a stage's first backward.
int64_t ForwardsFirst(const std::vector<PipelineOp>& ops) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(ops.size()) && ops[n].forward) ++n;
  return n;
}

double Drained(const std::vector<std::vector<PipelineOp>>& ops) {
  double end = 0;
  for (const auto& row : ops) end = std::max(end, row.back().end_s);
  return end;
}

TEST(LayOutPipeline, HandWorked) {
  struct Case {
    const char* name;
    int64_t pp, vpp, m;
    double tf;                     // per micro-batch and chunk
    std::vector<int64_t> warmup;   // per stage: 1F1B min(PP-s-1, m); interleaved (PP-s-1)x2 + (VPP-1)xPP
    double drained_s;              // Narayanan et al. 2021 Sec. 2.2 with full-stage tf 1 s, tb 2 s
  };
  const Case cases[] = {
      {"1F1B PP4 m8", 4, 1, 8, 1.0, {3, 2, 1, 0}, (8 + 4 - 1) * 3.0},
      {"interleaved PP4 VPP2 m8", 4, 2, 8, 0.5, {10, 8, 6, 4}, 8 * 3.0 + 3 * 3.0 / 2},
      {"1F1B PP4 m2 (warm-up capped at m)", 4, 1, 2, 1.0, {2, 2, 1, 0}, (2 + 4 - 1) * 3.0},
      {"no pipeline m3", 1, 1, 3, 1.0, {0}, 9.0},
      {"interleaved PP2 VPP4 m4", 2, 4, 4, 0.25, {8, 6}, 4 * 3.0 + 1 * 3.0 / 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::vector<std::vector<PipelineOp>>> ops = LayOutPipeline(Step(c.pp, c.vpp, c.m, c.tf));
    ASSERT_TRUE(ops.ok()) << ops.status();
    ASSERT_EQ(ops->size(), static_cast<size_t>(c.pp));
    for (int64_t s = 0; s < c.pp; ++s) {
      EXPECT_EQ(static_cast<int64_t>((*ops)[s].size()), 2 * c.m * c.vpp);
      // The warm-up forwards, then the steady state's first forward (none when the warm-up
      // covers every virtual micro-batch).
      EXPECT_EQ(ForwardsFirst((*ops)[s]), std::min(c.warmup[s] + 1, c.m * c.vpp)) << "stage " << s;
    }
    EXPECT_NEAR(Drained(*ops), c.drained_s, 1e-9);
  }
}

TEST(LayOutPipeline, OneF1BStageZeroByHand) {
  absl::StatusOr<std::vector<std::vector<PipelineOp>>> ops = LayOutPipeline(Step(4, 1, 8, 1.0));
  ASSERT_TRUE(ops.ok());
  std::string order;
  for (const PipelineOp& op : (*ops)[0]) absl::StrAppend(&order, op.forward ? "F" : "B", op.micro_batch, " ");
  EXPECT_EQ(order, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7 ");
  // B0 waits for stages 3, 2, 1: F0 reaches stage 3 at 3 s, ends at 4 s, three backwards of 2 s.
  EXPECT_DOUBLE_EQ((*ops)[0][4].start_s, 10.0);
  EXPECT_DOUBLE_EQ((*ops)[3][0].start_s, 3.0);
}

TEST(LayOutPipeline, RejectsWhatMegatronRefuses) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    const char* name;
    PipelineStep step;
    const char* field;  // named in the message
  };
  std::vector<Case> cases = {
      {"pp 0", Step(0, 1, 8, 1), "pp"},
      {"vpp 0", Step(4, 0, 8, 1), "vpp"},
      {"no micro-batch", Step(4, 1, 0, 1), "micro_batches"},
      {"interleaved m < PP", Step(4, 2, 3, 1), "must be in [PP"},
      {"last group under PP", Step(4, 2, 6, 1), "last group"},
      {"too many", Step(64, 8, 1024, 1), "operations"},
  };
  Case neg{"negative time", Step(4, 1, 8, 1), "forward_s"};
  neg.step.forward_s = -1;
  cases.push_back(neg);
  Case not_finite{"NaN time", Step(4, 1, 8, 1), "optimizer_s"};
  not_finite.step.optimizer_s = nan;
  cases.push_back(not_finite);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::vector<std::vector<PipelineOp>>> ops = LayOutPipeline(c.step);
    ASSERT_FALSE(ops.ok());
    EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(ops.status().message()).find(c.field), std::string::npos) << ops.status();
  }
}

// ---- the measured stream lanes (LayOutStreamLanes), worked by hand ----
//
// Nine kernels of one step on four streams, in seconds (binary fractions, so every sum below is
// exact), laid out at 1 px per second (one pixel = 1 s):
//   stream 7: A gemm [0, 4)  B gemm [4.5, 6)  C elementwise [6, 6.25)  D gemm [6.25, 6.5)
//             E elementwise [6.5, 6.75)  F gemm [8, 10)
//   stream 13: G communication [1, 7)      stream 9: H memory_copy [0, 0.5)
//   stream 3: I elementwise [9, 9.5)
// Roles by busy time: 3 and 7 compute, 13 communication, 9 copy; order compute, communication,
// copy, each by stream id: 3, 7, 13, 9.
std::vector<StreamKernel> HandKernels() {
  return {{7, 0, 4, "gemm", "A"},          {7, 4.5, 6, "gemm", "B"},        {7, 6, 6.25, "elementwise", "C"},
          {7, 6.25, 6.5, "gemm", "D"},     {7, 6.5, 6.75, "elementwise", "E"}, {7, 8, 10, "gemm", "F"},
          {13, 1, 7, "communication", "G"}, {9, 0, 0.5, "memory_copy", "H"},  {3, 9, 9.5, "elementwise", "I"}};
}

// (kind, start, end) per row.
using Segs = std::vector<std::tuple<std::string, double, double>>;
std::vector<Segs> SegmentsOf(const StreamLanes& l) {
  std::vector<Segs> out;
  for (const auto& row : l.rows) {
    out.emplace_back();
    for (const auto& s : row.segments) out.back().emplace_back(s.kind, s.start_s, s.end_s);
  }
  return out;
}

TEST(LayOutStreamLanes, LanesByHand) {
  const StreamLanes l = LayOutStreamLanes(HandKernels(), 1.0, 100);
  EXPECT_EQ(l.streams, (std::vector<int32_t>{3, 7, 13, 9}));
  std::vector<std::string> labels;
  for (const auto& r : l.rows) labels.push_back(r.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"stream 3 (compute)", "stream 7 (compute)", "stream 13 (communication)",
                                              "stream 9 (copy)"}));
  EXPECT_EQ(l.merge_rule, 0);
  EXPECT_EQ(l.kernels, 9u);
  EXPECT_EQ(l.segments, 9u);
  const std::vector<Segs> want = {
      {{"elementwise", 9, 9.5}},
      {{"gemm", 0, 4}, {"gemm", 4.5, 6}, {"elementwise", 6, 6.25}, {"gemm", 6.25, 6.5}, {"elementwise", 6.5, 6.75},
       {"gemm", 8, 10}},
      {{"communication", 1, 7}},
      {{"memory_copy", 0, 0.5}}};
  EXPECT_EQ(SegmentsOf(l), want);
  // The kernel's name is its hover text; the colours are fixed by category.
  EXPECT_NE(l.rows[1].segments[0].title.find("A"), std::string::npos);
  EXPECT_EQ(l.rows[2].segments[0].colour, "#f28e2b");  // the predicted rows' communication orange
}

TEST(LayOutStreamLanes, MergeRulesByHand) {
  // 8 allowed: rule 1 joins B to A (same category, 0.5 s < 1 px apart) and nothing else (C, D, E
  // alternate categories): 8 segments.
  StreamLanes l = LayOutStreamLanes(HandKernels(), 1.0, 8);
  EXPECT_EQ(l.merge_rule, 1);
  EXPECT_EQ(l.segments, 8u);
  EXPECT_EQ(SegmentsOf(l)[1], (Segs{{"gemm", 0, 6}, {"elementwise", 6, 6.25}, {"gemm", 6.25, 6.5},
                                     {"elementwise", 6.5, 6.75}, {"gemm", 8, 10}}));
  EXPECT_NE(l.rows[1].segments[0].title.find("2 kernels merged"), std::string::npos);
  // 6 allowed: rule 2 groups C, D, E (together 0.75 s < 1 px): elementwise 0.5 s > gemm 0.25 s.
  l = LayOutStreamLanes(HandKernels(), 1.0, 6);
  EXPECT_EQ(l.merge_rule, 2);
  EXPECT_EQ(l.segments, 6u);
  EXPECT_EQ(l.dropped, 0u);
  EXPECT_EQ(SegmentsOf(l)[1], (Segs{{"gemm", 0, 6}, {"elementwise", 6, 6.75}, {"gemm", 8, 10}}));
  EXPECT_NE(l.rows[1].segments[1].title.find("3 kernels merged"), std::string::npos);
  EXPECT_NE(l.rows[1].segments[1].title.find("elementwise 500 ms, gemm 250 ms"), std::string::npos);
  // 5 allowed: rule 3 drops the narrowest: I and H are 0.5 s; the tie keeps the earlier lane's I.
  l = LayOutStreamLanes(HandKernels(), 1.0, 5);
  EXPECT_EQ(l.merge_rule, 3);
  EXPECT_EQ(l.segments, 5u);
  EXPECT_EQ(l.dropped, 1u);
  EXPECT_EQ(SegmentsOf(l)[0], (Segs{{"elementwise", 9, 9.5}}));
  EXPECT_TRUE(SegmentsOf(l)[3].empty());
  // The same step at 10 px per second: B is 5 px from A, so rule 1 joins nothing and rule 2
  // groups nothing (C-E span 7.5 px): with 8 allowed, rule 3 drops the narrowest (C, D, E, 2.5 px;
  // I and H, 5 px).
  l = LayOutStreamLanes(HandKernels(), 10.0, 8);
  EXPECT_EQ(l.merge_rule, 3);
  EXPECT_EQ(l.dropped, 1u);
  // No bound to keep: rules 1 and 2 always, never a drop.
  l = LayOutStreamLanes(HandKernels(), 1.0, 0, false);
  EXPECT_EQ(l.merge_rule, 2);
  EXPECT_EQ(l.segments, 6u);
}

TEST(LayOutStreamLanes, XPositionsByHand) {
  TimelineChart chart;
  chart.rows = LayOutStreamLanes(HandKernels(), 1.0, 100).rows;
  // Label column: "stream 13 (communication)", 25 characters, none a capital: 25 x 6.8 + 16 =
  // 186 px; the axis ends at 10 s (NiceStep(10) = 2, ceil(10 / 2) x 2) over [186, 980 - 20]:
  // 77.4 px per second.
  const TimelineScale scale = TimelineScaleOf(chart);
  EXPECT_NEAR(scale.x0_px, 186, 1e-9);
  EXPECT_NEAR(scale.axis_end_s, 10, 1e-12);
  EXPECT_NEAR(scale.px_per_s, 77.4, 1e-9);
  const std::string svg = RenderTimeline(chart);
  // Each rect in document order: row 0 I, row 1 A..F, row 2 G, row 3 H.
  const std::vector<std::pair<double, double>> want = {  // x, width (px, one decimal)
      {186 + 9 * 77.4, 0.5 * 77.4}, {186, 4 * 77.4},          {186 + 4.5 * 77.4, 1.5 * 77.4},
      {186 + 6 * 77.4, 0.25 * 77.4}, {186 + 6.25 * 77.4, 0.25 * 77.4}, {186 + 6.5 * 77.4, 0.25 * 77.4},
      {186 + 8 * 77.4, 2 * 77.4},   {186 + 1 * 77.4, 6 * 77.4},        {186, 0.5 * 77.4}};
  std::vector<std::pair<double, double>> got;
  for (size_t at = svg.find("<rect class=\"tl "); at != std::string::npos; at = svg.find("<rect class=\"tl ", at + 1)) {
    const size_t x = svg.find(" x=\"", at), w = svg.find(" width=\"", at);
    got.push_back({std::stod(svg.substr(x + 4)), std::stod(svg.substr(w + 8))});
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].first, want[i].first, 0.051) << i;
    EXPECT_NEAR(got[i].second, want[i].second, 0.051) << i;
  }
  // In milliseconds: the same positions, the axis labelled in ms.
  chart.milliseconds = true;
  EXPECT_NEAR(TimelineScaleOf(chart).px_per_s, 77.4, 1e-9);
  EXPECT_NE(RenderTimeline(chart).find("time in the step (ms)"), std::string::npos);
  // The second marker: at the step's end, from its row down, data-at in seconds.
  chart.second_marker_s = 10;
  chart.second_marker_label = "measured step 3";
  chart.second_marker_row = 1;
  const std::string marked = RenderTimeline(chart);
  EXPECT_NE(marked.find("class=\"marker2\" data-at=\"10\" x1=\"960.0\""), std::string::npos) << marked;
}

}  // namespace
}  // namespace stepcast::html
