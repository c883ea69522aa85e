// Every preset file as written on disk (not through the catalog, which resolves bases): each
// overlap mechanism a framework preset supports, each contention figure of a hardware preset, and
// each FSDP memory setting names its source (issue 28: "a test reads every preset and fails on a
// value whose source text is empty"; issue 21: every value cites a framework source).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "proto/codec.h"
#include "stepcast/v1/framework.pb.h"
#include "stepcast/v1/hardware.pb.h"

namespace stepcast {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> YamlFiles(const std::string& kind) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(STEPCAST_SOURCE_DIR) / "presets" / kind;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Blank(const std::string& s) { return absl::StripAsciiWhitespace(s).empty(); }

// The problems of one overlap mechanism: a supported one, or one given any chunking or
// efficiency, must say where that comes from.
void CheckMechanism(const v1::OverlapMechanism& m, const std::string& where, std::vector<std::string>* bad) {
  const bool valued = m.supported() || m.efficiency() > 0 || m.per_layer() || m.chunks() > 0 ||
                      m.bucket_min_params() > 0 || m.bucket_params_per_dp_rank() > 0 || m.bucket_bytes() > 0 ||
                      m.compute_sm_fraction() > 0;
  if (valued && Blank(m.source())) bad->push_back(where + ": a value without a source");
}

void CheckSharding(const v1::ShardingModel& s, const std::string& where, std::vector<std::string>* bad) {
  const bool memory = s.gathered_units() > 0 || s.gather_prefetch_params() > 0 || s.max_live_params() > 0 ||
                      s.reduce_scatter_units() > 0 || s.grad_bucket_params() > 0 ||
                      s.accumulated_grad_dtype() != v1::D_TYPE_UNSPECIFIED;
  if (memory && Blank(s.memory_source()) && Blank(s.source())) bad->push_back(where + ": memory fields without a source");
}

TEST(Presets, EveryFrameworkOverlapAndMemoryValueNamesItsSource) {
  const std::vector<fs::path> files = YamlFiles("frameworks");
  ASSERT_GE(files.size(), 16u);
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.filename().string());
    v1::FrameworkSpec spec;
    ASSERT_TRUE(ParseMessage(Read(p), SpecFormat::kYaml, p.string(), &spec).ok());
    std::vector<std::string> bad;
    const v1::OverlapModel& o = spec.overlap();
    for (auto [m, name] : {std::pair{&o.tp_comm(), "tp_comm"}, {&o.dp_grad_reduce(), "dp_grad_reduce"},
                           {&o.dp_param_gather(), "dp_param_gather"}, {&o.fsdp_param_gather(), "fsdp_param_gather"},
                           {&o.pp_p2p(), "pp_p2p"}, {&o.cp_ring(), "cp_ring"}, {&o.ep_all_to_all(), "ep_all_to_all"},
                           {&o.tp_comm_backward(), "tp_comm_backward"}}) {
      CheckMechanism(*m, std::string("overlap.") + name, &bad);
    }
    if (spec.has_sharding()) CheckSharding(spec.sharding(), "sharding", &bad);
    for (const v1::Recipe& r : spec.recipes()) {
      if (r.has_sharding()) CheckSharding(r.sharding(), "recipe sharding", &bad);
      if (r.has_sharding() && Blank(r.sharding().source()) && Blank(r.source())) bad.push_back("recipe sharding: no source");
    }
    for (const v1::FrameworkDefault& d : spec.defaults()) {
      if (Blank(d.source())) bad.push_back("defaults " + d.field() + ": no source");
    }
    for (const v1::FrameworkDefault& a : spec.assumptions()) {
      if (Blank(a.source())) bad.push_back("assumptions " + a.field() + ": no source");
    }
    if (spec.elementwise().traffic_factor() > 0 || spec.elementwise().loss_peak_bytes_per_logit() > 0) {
      if (Blank(spec.elementwise().source())) bad.push_back("elementwise: values without a source");
    }
    EXPECT_TRUE(bad.empty()) << ::testing::PrintToString(bad);
  }
}

TEST(Presets, EveryHardwareContentionFigureNamesItsSource) {
  int figures = 0;
  for (const fs::path& p : YamlFiles("hardware")) {
    SCOPED_TRACE(p.filename().string());
    v1::HardwareSpec spec;
    ASSERT_TRUE(ParseMessage(Read(p), SpecFormat::kYaml, p.string(), &spec).ok());
    for (const v1::ComputeContention& c : spec.reference_profile().contention()) {
      ++figures;
      EXPECT_FALSE(Blank(c.source())) << c.compute() << " beside " << c.communication() << ": " << c.slowdown();
    }
    for (const v1::MeasuredOverlap& m : spec.reference_profile().overlaps()) {
      EXPECT_FALSE(Blank(m.source())) << m.mechanism();
    }
  }
  EXPECT_GT(figures, 0) << "no contention figure found: the test reads nothing";
}

// The check itself: a preset text with a supported mechanism and no source is caught (the test
// above would pass vacuously if the parse dropped the fields it reads).
TEST(Presets, AMechanismWithoutASourceIsCaught) {
  v1::FrameworkSpec spec;
  ASSERT_TRUE(ParseMessage("name: x\noverlap:\n  fsdp_param_gather: {supported: true, per_layer: true}\n"
                           "sharding: {gathered_units: 2}\n",
                           SpecFormat::kYaml, "x.yaml", &spec)
                  .ok());
  std::vector<std::string> bad;
  CheckMechanism(spec.overlap().fsdp_param_gather(), "fsdp_param_gather", &bad);
  CheckSharding(spec.sharding(), "sharding", &bad);
  EXPECT_EQ(bad.size(), 2u);
}

}  // namespace
}  // namespace stepcast
