// Range checks of reported measurements (issue 10).
#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/measured_run.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

TEST(MeasuredRun, AcceptsRealMeasurements) {
  // Llama 3 70B on 64 H100s: ~7 s steps at ~40% MFU (docs/VALIDATION.md order of magnitude).
  EXPECT_TRUE(ValidateMeasuredRun(7.2, 0, 0.41).ok());
  EXPECT_TRUE(ValidateMeasuredRun(0, 1.2e6).ok());
  EXPECT_TRUE(ValidateMeasuredRun(86400.0, 0).ok());  // the bound itself
  EXPECT_TRUE(ValidateMeasuredRun(1.0, 0, 1.0).ok());
}

TEST(MeasuredRun, RejectsImpossibleOnes) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const struct {
    double step, tps;
    std::optional<double> mfu;
    const char* error;
  } cases[] = {
      {1e300, 0, std::nullopt, "step_time_s: 1e+300 s is more than a day"},
      {86401, 0, std::nullopt, "more than a day"},
      {-1, 0, std::nullopt, "step_time_s: -1 must be"},
      {nan, 0, std::nullopt, "step_time_s"},
      {inf, 0, std::nullopt, "step_time_s"},
      {0, -5, std::nullopt, "tokens_per_s: -5"},
      {0, inf, std::nullopt, "tokens_per_s"},
      {1, 0, 79755.58, "mfu: the measurement implies 7975558.0% of the GPUs' peak"},
      {1, 0, 1.0001, "above 100%"},
      {1, 0, -0.1, "mfu: -0.1"},
      {1, 0, nan, "mfu"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.error);
    absl::Status s = ValidateMeasuredRun(c.step, c.tps, c.mfu);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace stepcast
