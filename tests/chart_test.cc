// cli/chart.h LayOutPipeline against hand-worked pipelines (Megatron-LM's
// megatron/core/pipeline_parallel/schedules.py order; the step lengths of Narayanan et al. 2021,
// "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Sec. 2.2:
// (m + p - 1)(tf + tb) for 1F1B, m (tf + tb) + (p - 1)(tf + tb) / v interleaved), and its errors.
#include "cli/chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
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

}  // namespace
}  // namespace stepcast::html
