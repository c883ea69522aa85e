// Seed 003 (CS336 Spring 2025 assignment 2, communication_accounting (a), (b)).
#include "core/fsdp_memory.h"
#include "gtest/gtest.h"

namespace stepcast::seed003 {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(Seed003, PartA) {
  const FfnModelMemory m = FfnMemory(126, 16384, 53248, 128 * 1024);
  EXPECT_DOUBLE_EQ(m.params, 219848638464.0);
  EXPECT_DOUBLE_EQ(m.params_bytes / kGiB, 819.0);
  EXPECT_DOUBLE_EQ(m.grads_bytes / kGiB, 819.0);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes / kGiB, 1638.0);
  EXPECT_DOUBLE_EQ(m.static_bytes / kGiB, 3276.0);
  EXPECT_DOUBLE_EQ(m.activation_bytes / kGiB, 2142.0);
  EXPECT_NEAR(m.activation_bytes / 131072 / kGiB, 0.0163421630859375, 1e-15);
  EXPECT_EQ(DevicesToFitUnsharded(m, 80 * kGiB), 68);
}

TEST(Seed003, PartBSeedAnswerAndTheRightOne) {
  const FfnModelMemory m = FfnMemory(126, 16384, 53248, 128 * 1024);
  // The seed's 46 v5p = ceil((3276 + 2142/2) / 95): everything divided by n, the unsharded
  // half of the activations dropped.
  EXPECT_EQ(static_cast<int64_t>(std::ceil((m.static_bytes + m.activation_bytes / 2) / (95 * kGiB))), 46);
  // Under the question's wording the other half stays on every device: 1071 GiB > 95 GiB, so
  // no FSDP degree fits.
  EXPECT_DOUBLE_EQ(PerDeviceBytes(m, 0.5, 1) / kGiB, 3276.0 + 2142.0);
  EXPECT_NEAR(PerDeviceBytes(m, 0.5, 46) / kGiB, (3276.0 + 1071.0) / 46 + 1071.0, 1e-9);
  absl::StatusOr<int64_t> n = FsdpDegreeToFit(m, 0.5, 95 * kGiB);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(n.status().message().find("1071.0 GiB"), std::string::npos) << n.status();
  // Sharding all activations: ceil((3276 + 2142) / 95) = 58.
  EXPECT_EQ(*FsdpDegreeToFit(m, 1.0, 95 * kGiB), 58);
}

}  // namespace
}  // namespace stepcast::seed003
