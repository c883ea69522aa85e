// The preset catalog: every required preset is present, loads, and names its sources.
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

TEST(Catalog, RequiredHardwareWithSourcedReferenceProfiles) {
  for (const char* name : {"a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "l4",
                           "mi300x", "tpu-v5p"}) {
    SCOPED_TRACE(name);
    auto hw = testing::BuiltinCatalog().FindHardware(name);
    ASSERT_TRUE(hw.ok()) << hw.status();
    EXPECT_FALSE(hw->sources.empty());
    if (std::string(name) != "tpu-v5p") {
      EXPECT_GT(hw->sm_count, 0);
    }
    const RateProfile& p = hw->reference_profile;
    ASSERT_FALSE(p.gemm.empty());
    for (const auto& g : p.gemm) {
      EXPECT_FALSE(g.source.empty());
      // Usable rates sit below the datasheet peak.
      EXPECT_LT(g.flops_per_s, hw->PeakFlops(g.dtype));
    }
    EXPECT_FALSE(p.hbm_source.empty());
    EXPECT_LT(p.hbm_bandwidth_bytes_per_s, hw->hbm_bandwidth_bytes_per_s);
    for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                         Collective::kAllToAll, Collective::kSendRecv}) {
      for (Scope s : {Scope::kIntraNode, Scope::kInterNode}) {
        const CollectiveRate* r = p.FindCollective(c, s);
        ASSERT_NE(r, nullptr) << CollectiveName(c) << " " << ScopeName(s);
        EXPECT_FALSE(r->source.empty());
      }
    }
  }
}

TEST(Catalog, RequiredModels) {
  for (const char* name : {"llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3",
                           "gpt3-175b", "gpt-22b", "mt-nlg-530b", "gpt-1t", "gpt-1.7b", "seed004-13b"}) {
    auto m = testing::BuiltinCatalog().FindModel(name);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_FALSE(m->source.empty()) << name;
  }
  auto missing = testing::BuiltinCatalog().FindModel("gpt-5");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("known:"), std::string::npos);
}

TEST(Catalog, DirectoryOverridesAndErrors) {
  Catalog c = testing::BuiltinCatalog();
  EXPECT_EQ(c.AddDirectory("/nonexistent-dir").code(), absl::StatusCode::kNotFound);
}

}  // namespace
// Names as nvidia-smi / rocm-smi print them and as the validation CSV writes them.
TEST(HardwarePresetForGpuName, DriverAndPaperNames) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"NVIDIA H100 80GB HBM3", "h100-sxm"},   {"H100 (DGX-H100)", "h100-sxm"},
      {"NVIDIA H100 PCIe", "h100-pcie"},       {"NVIDIA H200", "h200"},
      {"NVIDIA A100-SXM4-40GB", "a100-40gb"},  {"A100 80GB (Selene DGX A100)", "a100-80gb"},
      {"NVIDIA B200", "b200"},                 {"GB200 (DGX-GB200 NVL72)", "gb200"},
      {"NVIDIA L4", "l4"},                     {"AMD Instinct MI300X", "mi300x"},
  };
  for (const auto& [name, preset] : cases) {
    absl::StatusOr<std::string> p = HardwarePresetForGpuName(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ(*p, preset) << name;
  }
  EXPECT_EQ(HardwarePresetForGpuName("NVIDIA L40S").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(HardwarePresetForGpuName("Tesla V100-SXM2-16GB").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace stepcast
