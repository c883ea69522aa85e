// stepcast-calibrate's flow on CPU, against the fakes of tests/calibrate_fakes.h and a fake
// libnvidia-ml.so.1 (tests/calibrate_fake_nvml.cc): exit codes, stragglers named by index, PCI bus id and
// UUID, partial results written when a later part fails, the GEMM shapes of the three passes,
// the collective data checks (stale, shifted and unwritten buffers fail), the harness's rank
// average and error agreement, and NVML's units and bus-id lookup.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "calibrate/collective_check.h"
#include "calibrate/collective_harness.h"
#include "calibrate/flow.h"
#include "calibrate/gemm_shapes.h"
#include "calibrate/nvml.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "kernels/pattern.h"
#include "proto/codec.h"
#include "tests/calibrate_fakes.h"

namespace stepcast::calibrate {
namespace {

using testing::FakeConfig;
using testing::FakeGpuSystem;

struct Outcome {
  int code = -1;
  v1::RateProfile profile;
  v1::CalibrationRun run;
  bool wrote = false;
};

std::string Read(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Outcome Measure(FakeConfig c, MeasureOptions o) {
  static int n = 0;
  const std::string dir = ::testing::TempDir() + "/calibrate_flow_" + std::to_string(getpid()) + "_" + std::to_string(n++);
  std::filesystem::create_directories(dir);
  if (o.out == "stepcast-profile.json") o.out = dir + "/p.json";
  if (o.warmup_s < 0) o.warmup_s = 0;
  o.nvml_library = STEPCAST_FAKE_NVML;
  FakeGpuSystem gpus(c);
  auto comm = MakeSingleProcessCommunicator();
  auto catalog = Catalog::Builtin();
  Outcome r;
  r.code = RunMeasure(o, gpus, *comm, *catalog);
  if (std::filesystem::exists(o.out)) {
    r.wrote = true;
    EXPECT_TRUE(ParseMessage(Read(o.out), SpecFormat::kJson, o.out, &r.profile).ok());
    const auto st = google::protobuf::util::JsonStringToMessage(Read(o.out + ".run.json"), &r.run);
    EXPECT_TRUE(st.ok()) << st;
  }
  return r;
}

MeasureOptions Quick() {
  MeasureOptions o;
  o.quick = true;
  o.max_collective_bytes = 1 << 20;
  return o;
}

TEST(Flow, AllPartsMeasuredIntoTheProfile) {
  Outcome r = Measure({}, Quick());
  ASSERT_EQ(r.code, kExitOk);
  ASSERT_TRUE(r.wrote);
  EXPECT_EQ(r.run.exit_code(), 0);
  EXPECT_EQ(r.run.conditions().gpu_count(), 4);
  // Every GEMM sample names its GPU.
  ASSERT_GT(r.run.gemm_size(), 0);
  for (const auto& s : r.run.gemm()) {
    EXPECT_FALSE(s.gpu_id().pci_bus_id().empty());
    EXPECT_TRUE(absl::StartsWith(s.gpu_id().uuid(), "GPU-"));
  }
  // dgrad (NN) and wgrad (NT) shapes were run.
  bool nn = false, nt = false;
  for (const auto& s : r.run.gemm()) {
    nn |= s.layout() == "NN";
    nt |= s.layout() == "NT";
  }
  EXPECT_TRUE(nn && nt);
  // The profile: measured GEMM, HBM and the intra-node curves first.
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r.profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(absl::StartsWith(p->gemm[0].source, "stepcast-calibrate cuBLASLt"));
  EXPECT_DOUBLE_EQ(p->hbm_bandwidth_bytes_per_s, 3.0e12);
  const CollectiveRate* ar = p->FindCollective(Collective::kAllReduce, Scope::kIntraNode);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->group_size, 4);
  ASSERT_GE(ar->points.size(), 2u);
  // The profile's figure is the rank average: GPUs 0..3 take 1.00, 1.01, 1.02, 1.03 x the
  // alpha-beta time; the slowest GPU's (1.03 x) is kept in the run. (Above the largest measured
  // size the curve holds the reference's points: Flow.MeasuredCurveMergedWithTheReferenceAndProvenance.)
  const CollectivePoint* last = nullptr;
  for (const auto& q : ar->points) {
    if (q.origin == RateOrigin::kMeasured) last = &q;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->size_bytes, 1 << 20);
  const double t = 10e-6 + last->size_bytes * 1.5 / 300e9;
  EXPECT_NEAR(last->time_s, t * 1.015, 1e-12);
  bool slowest = false;
  for (const auto& s : r.run.collectives()) {
    if (s.collective() == v1::COLLECTIVE_ALL_REDUCE && s.size_bytes() == last->size_bytes) {
      EXPECT_NEAR(s.slowest_rank_time().median_s(), t * 1.03, 1e-12);
      EXPECT_EQ(s.iterations_per_batch(), 10);
      slowest = true;
    }
  }
  EXPECT_TRUE(slowest);
  // The inter-node entries stay the reference's, marked.
  const CollectiveRate* inter = p->FindCollective(Collective::kAllReduce, Scope::kInterNode);
  ASSERT_NE(inter, nullptr);
  EXPECT_TRUE(absl::StartsWith(inter->source, "not measured; reference profile"));
  // NVML (the fake library) under load: watts from milliwatts, idle left out of the reasons.
  bool seen = false;
  for (const auto& g : r.run.conditions().gpus()) {
    if (g.pci_bus_id() != "0000:18:00.0") continue;
    seen = true;
    EXPECT_DOUBLE_EQ(g.power_limit_w(), 700.0);
    EXPECT_EQ(g.pcie_link_gen(), 5);
    EXPECT_GE(g.gemm().samples(), 1);
    EXPECT_EQ(g.gemm().sm_clock_mhz_median(), 1755);
    EXPECT_DOUBLE_EQ(g.gemm().power_w_max(), 512.345);
    ASSERT_EQ(g.gemm().clocks_event_reason_names_size(), 1);
    EXPECT_EQ(g.gemm().clocks_event_reason_names(0), "sw_power_cap");
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(r.run.conditions().driver_version(), "580.65.06");
}

// gpu code review 2, N1 and N9 for measured profiles: a --quick sweep to 1 MiB over 4 GPUs leaves
// the curve's larger sizes to the reference (the x8 curve scaled to 4 ranks, sampled at factors of
// 2 up to 16 GiB) instead of extrapolating 1 MiB's busbw, every point and rate marked measured or
// reference, and the provenance of the run as fields.
TEST(Flow, MeasuredCurveMergedWithTheReferenceAndProvenance) {
  Outcome r = Measure({}, Quick());
  ASSERT_EQ(r.code, kExitOk);
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r.profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  const CollectiveRate* ar = p->FindCollective(Collective::kAllReduce, Scope::kIntraNode, 4, 0);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->group_size, 4);
  const Hardware hw = *Catalog::Builtin()->FindHardware("h100-sxm");
  const CollectiveRate* ref = hw.reference_profile.FindCollective(Collective::kAllReduce, Scope::kIntraNode, 4, 0);
  ASSERT_NE(ref, nullptr);
  int measured = 0, reference = 0;
  for (const auto& q : ar->points) {
    if (q.size_bytes <= (1 << 20)) {
      EXPECT_EQ(q.origin, RateOrigin::kMeasured) << q.size_bytes;
      ++measured;
    } else {
      EXPECT_EQ(q.origin, RateOrigin::kReference) << q.size_bytes;
      EXPECT_DOUBLE_EQ(q.time_s, EstimateCollective(*ref, 4, q.size_bytes).time_s) << q.size_bytes;
      ++reference;
    }
  }
  EXPECT_GT(measured, 2);
  EXPECT_EQ(reference, 14);  // 2 MiB ... 16 GiB
  EXPECT_EQ(ar->points.back().size_bytes, 16.0 * (1ull << 30));
  EXPECT_EQ(p->gemm[0].origin, RateOrigin::kMeasured);
  EXPECT_EQ(p->hbm_origin, RateOrigin::kMeasured);
  EXPECT_EQ(p->attention_origin, RateOrigin::kReference);
  EXPECT_EQ(p->format_version, kRateProfileFormatVersion);
  EXPECT_EQ(p->provenance.tool, "stepcast-calibrate");
  EXPECT_EQ(p->provenance.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p->provenance.gpu_count, 4);
  EXPECT_EQ(p->provenance.host_count, 1);
  EXPECT_EQ(p->provenance.driver_version, "580.65.06");
  EXPECT_EQ(p->provenance.cuda_version, "13.0");
  EXPECT_EQ(p->provenance.nccl_version, "2.27.3");
  EXPECT_EQ(p->provenance.base, "reference profile h100-sxm");
}

TEST(Flow, StragglersNamedByIndexBusIdAndUuid) {
  // --gpus 1,2,3 with GPU 3 11% slow in GEMM: the straggler is GPU 3 (not "GPU 2", its position).
  FakeConfig c;
  c.gemm_scale[3] = 0.89;
  MeasureOptions o = Quick();
  o.gpus = "1,2,3";
  o.skip_collectives = true;
  Outcome r = Measure(c, o);
  ASSERT_EQ(r.code, kExitOk);
  ASSERT_EQ(r.run.stragglers_size(), 1);
  const v1::Straggler& s = r.run.stragglers(0);
  EXPECT_EQ(s.metric(), "gemm");
  EXPECT_EQ(s.gpu(), 3);
  EXPECT_EQ(s.gpu_id().pci_bus_id(), "0000:48:00.0");
  EXPECT_EQ(s.gpu_id().uuid(), "GPU-00000003-1111-2222-3333-444444444444");
  EXPECT_NEAR(s.slowdown(), 0.11, 1e-9);
  // HBM: GPU 1 fails, GPU 3 is slow; the straggler is still GPU 3 (no shift after a failure).
  FakeConfig h;
  h.fail_hbm = {1};
  h.hbm_scale[3] = 0.8;
  MeasureOptions q = Quick();
  q.skip_collectives = true;
  Outcome rh = Measure(h, q);
  ASSERT_EQ(rh.code, kExitOk);
  ASSERT_EQ(rh.run.stragglers_size(), 1);
  EXPECT_EQ(rh.run.stragglers(0).metric(), "hbm");
  EXPECT_EQ(rh.run.stragglers(0).gpu(), 3);
  EXPECT_EQ(rh.run.stragglers(0).gpu_id().pci_bus_id(), "0000:48:00.0");
  bool warned = false;
  for (const auto& w : rh.run.warnings()) warned |= absl::StrContains(w, "HBM on GPU 1 (0000:28:00.0");
  EXPECT_TRUE(warned);
}

// The CUPTI cross-check compares the two timers over the same runs. On an H100 (2026-11-25) the
// CUPTI pass, run after the sweep, timed a bf16 8192^3 GEMM 10% faster than the sweep had (another
// power state): a pass 10% faster with timers that agree is no warning; timers 10% apart are.
// One GPU, no collectives; the CUPTI pass's events take 0.9x the sweep's time and its CUPTI kernel
// times (1 - gap) x its events.
Outcome MeasureWithCuptiGap(double gap) {
  FakeConfig c;
  c.cupti_pass_scale = 0.9;
  c.cupti_event_gap = gap;
  MeasureOptions o = Quick();
  o.gpus = "0";
  o.skip_collectives = true;
  return Measure(c, o);
}

TEST(Flow, CuptiCrossCheckComparesTheTimersOverTheSameRuns) {
  for (const double gap : {0.0, 0.1}) {
    Outcome r = MeasureWithCuptiGap(gap);
    ASSERT_EQ(r.code, kExitOk);
    int warned = 0, checked = 0;
    for (const auto& w : r.run.warnings()) warned += absl::StrContains(w, "over the same runs");
    for (const auto& g : r.run.gemm()) {
      if (g.cupti_median_s() == 0) continue;
      ++checked;
      EXPECT_NEAR(g.cupti_event_disagreement(), gap, 1e-9) << g.what();
      EXPECT_NEAR(g.cupti_median_s(), g.time().median_s() * 0.9 * (1 - gap), 1e-12) << g.what();
    }
    for (const auto& h : r.run.hbm()) {
      if (h.kernel() == "copy") {
        EXPECT_NEAR(h.cupti_event_disagreement(), gap, 1e-9);
      }
    }
    EXPECT_GT(checked, 0);
    EXPECT_EQ(warned > 0, gap > 0) << "gap " << gap;
  }
}

TEST(Flow, ProfileKeepsKernelTimesWithoutTheEventOverhead) {
  // Review 2 N10: CUDA events add a per-run overhead to every timed GEMM (10.3 us by events vs
  // 7.1 us by CUPTI at bf16 1024^3 on the H200 run). The profile takes the GPU's median
  // events - CUPTI difference (over the same runs of its CUPTI-checked squares) out of every
  // GEMM point's time; without a difference the rates are the sweep's.
  for (const double gap : {0.0, 0.1}) {
    Outcome r = MeasureWithCuptiGap(gap);
    ASSERT_EQ(r.code, kExitOk);
    // By hand from the run: the checked samples' events - CUPTI, their median.
    std::vector<double> d;
    for (const auto& g : r.run.gemm()) {
      if (g.cupti_median_s() > 0) {
        EXPECT_NEAR(g.cupti_events_median_s(), g.time().median_s() * 0.9, 1e-15) << g.what();
        d.push_back(g.cupti_events_median_s() - g.cupti_median_s());
      }
    }
    ASSERT_GE(d.size(), 2u);
    std::sort(d.begin(), d.end());
    const double overhead = d.size() % 2 ? d[d.size() / 2] : 0.5 * (d[d.size() / 2 - 1] + d[d.size() / 2]);
    EXPECT_EQ(overhead > 0, gap > 0);
    int checked = 0;
    for (const auto& p : r.profile.gemm()) {
      if (p.m() == 0 || absl::StrContains(p.source(), "+")) continue;  // flat, or averaged layouts
      for (const auto& g : r.run.gemm()) {
        if (g.dtype() != p.dtype() || g.m() != p.m() || g.n() != p.n() || g.k() != p.k()) continue;
        const double flops = 2.0 * g.m() * g.n() * g.k();
        const double t = flops / g.median_flops_per_s();
        const double expected = gap > 0 ? flops / std::max(t - overhead, 0.5 * t) : g.median_flops_per_s();
        EXPECT_NEAR(p.flops_per_s() / expected, 1.0, 1e-9) << g.what();
        EXPECT_EQ(absl::StrContains(p.source(), "event overhead"), gap > 0) << p.source();
        ++checked;
      }
    }
    EXPECT_GT(checked, 5);
  }
}

TEST(Flow, NothingMeasuredIsExitThreeWithWhatWasWritten) {
  // Every GEMM fails (the kernel image missing, as an sm_90-only build on an A100): exit 3, not 0;
  // the HBM measured is written and the GEMM rates are the reference's, marked.
  FakeConfig c;
  c.fail_gemm = {0, 1, 2, 3};
  MeasureOptions o = Quick();
  o.skip_collectives = true;
  Outcome r = Measure(c, o);
  EXPECT_EQ(r.code, kExitNothingMeasured);
  ASSERT_TRUE(r.wrote);
  EXPECT_EQ(r.run.exit_code(), kExitNothingMeasured);
  ASSERT_EQ(r.run.failures_size(), 1);
  EXPECT_TRUE(absl::StartsWith(r.run.failures(0), "gemm: no GEMM was measured"));
  EXPECT_TRUE(absl::StartsWith(r.profile.gemm(0).source(), "not measured; reference profile"));
  EXPECT_TRUE(absl::StartsWith(r.profile.hbm_source(), "stepcast-calibrate copy kernel"));
}

TEST(Flow, CollectiveFailureKeepsTheGemmAndHbmAlreadyMeasured) {
  int aborted = 0;
  FakeConfig c;
  c.coll_fail_at_bytes = 4096;
  c.aborted = &aborted;
  Outcome r = Measure(c, Quick());
  EXPECT_EQ(r.code, kExitFailed);
  ASSERT_TRUE(r.wrote);
  EXPECT_GT(r.run.gemm_size(), 0);
  EXPECT_GT(r.run.hbm_size(), 0);
  ASSERT_EQ(r.run.failures_size(), 1);
  EXPECT_NE(r.run.failures(0).find("all_reduce at 4096 bytes: GPU 1: all_reduce element 0 is nan"), std::string::npos)
      << r.run.failures(0);
  EXPECT_EQ(aborted, 1);  // the communicators were aborted, not left waiting
  // The sizes measured before the failure are kept in the run; the profile has GEMM and HBM.
  EXPECT_GT(r.run.collectives_size(), 0);
  EXPECT_TRUE(absl::StartsWith(r.profile.gemm(0).source(), "stepcast-calibrate cuBLASLt"));
  bool noted = false;
  for (const auto& n : r.profile.notes()) noted |= absl::StartsWith(n, "failed: collectives:");
  EXPECT_TRUE(noted);
}

TEST(Flow, ExitCodesOfTheOtherPaths) {
  FakeConfig none;
  none.no_gpu = true;
  EXPECT_EQ(Measure(none, Quick()).code, kExitNoGpu);
  MeasureOptions bad = Quick();
  bad.gpus = "0,x";
  EXPECT_EQ(Measure({}, bad).code, kExitUsage);
  bad.gpus = "7";
  EXPECT_EQ(Measure({}, bad).code, kExitUsage);
  MeasureOptions hw = Quick();
  hw.hardware = "h900";
  EXPECT_EQ(Measure({}, hw).code, kExitUsage);
  MeasureOptions unwritable = Quick();
  unwritable.skip_collectives = true;
  unwritable.out = "/nonexistent-dir/p.json";
  EXPECT_EQ(Measure({}, unwritable).code, kExitWriteFailed);
  MeasureOptions inject = Quick();
  inject.inject = "1:sideways";
  EXPECT_EQ(Measure({}, inject).code, kExitUsage);
  // An A100 (8.0): fp8 skipped with a warning, not a failure; the preset from the GPU name.
  FakeConfig a100;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8;
  MeasureOptions q = Quick();
  q.skip_collectives = true;
  Outcome r = Measure(a100, q);
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.profile.hardware(), "a100-80gb");
  bool warned = false;
  for (const auto& w : r.run.warnings()) warned |= absl::StrContains(w, "fp8 GEMMs skipped");
  EXPECT_TRUE(warned);
}

// The contention sweep (docs/CALIBRATION.md "Contention"): per communication, the profile holds
// the median over the swept shapes of the slowest GPU's slowdown at that communication's CTA
// count and cluster size, with cuBLASLt's default kernel. Worked by hand from the fake's model
// (slowdown = 0.01 x CTAs x 8192 / m x the GPU's scale / cluster size; GPU 2 runs 1.5x worse):
// NCCL's ring all-gather holds 24 SMs in clusters of 4, so per shape the slowest GPU gives
// 0.01 x 24 x {1, 2, 1} x 1.5 / 4 = {0.09, 0.18, 0.09}, median 0.09; DeepEP's 20 SMs without
// clusters give {0.30, 0.60, 0.30}, median 0.30. Attention was not swept: the reference's figure,
// marked.
TEST(Flow, ContentionSweepWritesTheSlowestGpusMedianIntoTheProfile) {
  FakeConfig c;
  c.contention_scale = {{2, 1.5}};
  MeasureOptions o = Quick();
  o.skip_collectives = true;
  Outcome r = Measure(c, o);
  ASSERT_EQ(r.code, kExitOk);
  // 4 GPUs x 3 shapes x 5 CTA counts x (no clusters, clusters of 4) x (default, SM target).
  EXPECT_EQ(r.run.contention_size(), 4 * 3 * 5 * 2 * 2);
  for (const auto& s : r.run.contention()) {
    EXPECT_FALSE(s.gpu_id().uuid().empty());
    EXPECT_EQ(s.threads_per_cta(), 544);
  }
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r.profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  RateProfile::ContentionLookup nccl = p->FindContention("gemm", "nccl");
  RateProfile::ContentionLookup deepep = p->FindContention("gemm", "deepep");
  ASSERT_TRUE(nccl.found && deepep.found);
  EXPECT_NEAR(nccl.slowdown, 0.09, 1e-12);
  EXPECT_NEAR(deepep.slowdown, 0.30, 1e-12);
  for (const auto& x : p->contention) {
    if (x.compute == "gemm") {
      EXPECT_TRUE(absl::StartsWith(x.source, "stepcast-calibrate contention sweep")) << x.source;
      EXPECT_EQ(x.samples, 12);
    } else {  // the reference's (the H100's own sweep of 2026-11-27), marked
      EXPECT_EQ(x.compute, "attention");
      EXPECT_TRUE(absl::StartsWith(x.source, "not measured; reference profile: H100 SXM")) << x.source;
      EXPECT_DOUBLE_EQ(x.slowdown, x.communication == "nccl" ? 0.389 : 0.399);
    }
  }
}

// Without the sweep a calibrated profile keeps the reference's contention, marked (it had none:
// the model then hid communication at no cost on every calibrated cluster).
TEST(Flow, ProfileKeepsTheReferenceContentionWithoutTheSweep) {
  MeasureOptions o = Quick();
  o.skip_collectives = true;
  o.skip_contention = true;
  Outcome r = Measure({}, o);
  ASSERT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.run.contention_size(), 0);
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r.profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->contention.size(), 4u);  // h100-sxm: gemm and attention beside nccl and deepep
  for (const auto& x : p->contention) {
    EXPECT_DOUBLE_EQ(x.slowdown, x.communication == "nccl" ? 0.389 : 0.399);
    EXPECT_TRUE(absl::StartsWith(x.source, "not measured; reference profile: H100 SXM")) << x.source;
  }
  // --skip-gemm skips the sweep too (its GEMMs are part of the GEMM sweep).
  o.skip_contention = false;
  o.skip_gemm = true;
  EXPECT_EQ(Measure({}, o).run.contention_size(), 0);
}

// The host-call pass (docs/CALIBRATION.md "Host calls"): every GPU's launch and cuBLASLt GEMM call
// in the run; the profile takes per call the slowest GPU's median (the fake's GPU i runs
// 1 + i/10 slower: GPU 3 of 4, 1.3x) and for the GEMM call the slower dtype (fp8, 1.2x bf16 in the
// fake): launch 4 us x 1.3 = 5.2 us, GEMM call 11 us x 1.2 x 1.3 = 17.16 us. A failing GPU is a
// warning and the others still give the figures; --skip-host and --skip-gemm leave the pass out
// and the profile without figures (the preset's then apply).
TEST(Flow, HostCallsGoIntoTheProfileAsTheSlowestGpusMedian) {
  MeasureOptions o = Quick();
  o.skip_collectives = true;
  o.skip_contention = true;
  Outcome r = Measure({}, o);
  ASSERT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.run.host_calls_size(), 4 * 3);  // per GPU: the launch, bf16 and fp8 GEMM calls
  for (const auto& s : r.run.host_calls()) {
    EXPECT_FALSE(s.gpu_id().uuid().empty());
    EXPECT_EQ(s.calls_per_batch(), kHostCallsPerBatch);
  }
  EXPECT_NEAR(r.profile.host_launch_call_s(), 4e-6 * 1.3, 1e-12);
  EXPECT_NEAR(r.profile.host_gemm_call_s(), 11e-6 * 1.2 * 1.3, 1e-12);
  EXPECT_TRUE(absl::StartsWith(r.profile.host_calls_source(), "stepcast-calibrate host-call pass"))
      << r.profile.host_calls_source();
  EXPECT_NE(r.profile.host_calls_source().find("slowest of 4 GPUs"), std::string::npos);
  // The profile reads back (RateProfileFromProto checks the fields).
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r.profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->host_gemm_call_s, 11e-6 * 1.2 * 1.3, 1e-12);

  // GPU 3 fails: a warning naming it; the slowest of the other three (GPU 2, 1.2x).
  FakeConfig c;
  c.fail_host = {3};
  Outcome f = Measure(c, o);
  ASSERT_EQ(f.code, kExitOk);
  EXPECT_EQ(f.run.host_calls_size(), 3 * 3);
  EXPECT_NEAR(f.profile.host_launch_call_s(), 4e-6 * 1.2, 1e-12);
  bool warned = false;
  for (const auto& w : f.run.warnings()) warned |= absl::StrContains(w, "host calls on") && absl::StrContains(w, "status 15");
  EXPECT_TRUE(warned);
  // Every GPU failing: exit 3, nothing in the profile.
  c.fail_host = {0, 1, 2, 3};
  Outcome none = Measure(c, o);
  EXPECT_EQ(none.code, kExitNothingMeasured);
  EXPECT_EQ(none.profile.host_gemm_call_s(), 0);

  for (bool skip_gemm : {false, true}) {
    MeasureOptions skip = o;
    skip.skip_host = !skip_gemm;
    skip.skip_gemm = skip_gemm;
    Outcome x = Measure({}, skip);
    ASSERT_EQ(x.code, kExitOk);
    EXPECT_EQ(x.run.host_calls_size(), 0);
    EXPECT_EQ(x.profile.host_launch_call_s(), 0);
    EXPECT_EQ(x.profile.host_gemm_call_s(), 0);
    EXPECT_TRUE(x.profile.host_calls_source().empty());
  }
}

// The reference's bound on its part's compute rates (the 500 W HBM2e H100: the SXM's rates, as low
// as 835/989 of them) stays in a calibrated profile for the rates it took from the reference (the
// attention rate, unswept dtypes); the swept GEMM points are measured, which ComputeRatesScaled
// leaves at their value.
TEST(Flow, AComputeRateBoundStaysForTheRatesTakenFromTheReference) {
  MeasureOptions o = Quick();
  o.hardware = "h100-sxm-96gb";
  o.skip_collectives = true;
  o.skip_contention = true;
  for (bool skip_gemm : {false, true}) {
    SCOPED_TRACE(skip_gemm);
    o.skip_gemm = skip_gemm;
    Outcome r = Measure({}, o);
    ASSERT_EQ(r.code, kExitOk);
    EXPECT_NEAR(r.profile.compute_rate_low_fraction(), 835.0 / 989.0, 0.0005);
    EXPECT_TRUE(absl::StartsWith(r.profile.compute_rate_low_source(), "not measured; reference profile: "))
        << r.profile.compute_rate_low_source();
    int measured = 0;
    for (const auto& g : r.profile.gemm()) measured += g.source().rfind("stepcast-calibrate", 0) == 0;
    EXPECT_EQ(measured > 0, !skip_gemm);
  }
}

// A negative median (noise: a GEMM is not faster beside work that takes its SMs) is written as 0;
// a GPU whose sweep fails is a warning, the others are measured; a refused cluster launch is a
// sample with its error; every GPU failing is exit 3.
TEST(Flow, ContentionNeverNegativeAndFailuresKeepTheRest) {
  FakeConfig c;
  c.contention_per_cta = -0.001;
  c.fail_contention = {1};
  MeasureOptions o = Quick();
  o.skip_collectives = true;
  Outcome r = Measure(c, o);
  ASSERT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.run.contention_size(), 3 * 3 * 5 * 2 * 2);
  bool warned = false;
  for (const auto& w : r.run.warnings()) warned |= absl::StrContains(w, "contention on") && absl::StrContains(w, "out of memory");
  EXPECT_TRUE(warned);
  absl::StatusOr<RateProfile> p = RateProfileFromProto(r.profile, "p");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->FindContention("gemm", "nccl").slowdown, 0.0);
  EXPECT_TRUE(p->FindContention("gemm", "nccl").found);
  // A GPU that refuses the competitor's clusters: those samples carry the error, the profile
  // falls back to the competitor without clusters (0.01 x 24 x {1, 2, 1}: median 0.24).
  FakeConfig refused;
  refused.refuse_clusters = true;
  Outcome fallback = Measure(refused, o);
  ASSERT_EQ(fallback.code, kExitOk);
  int errors = 0;
  for (const auto& s : fallback.run.contention()) errors += !s.error().empty();
  EXPECT_EQ(errors, 4 * 3 * 5 * 2);
  absl::StatusOr<RateProfile> fp = RateProfileFromProto(fallback.profile, "p");
  ASSERT_TRUE(fp.ok()) << fp.status();
  EXPECT_NEAR(fp->FindContention("gemm", "nccl").slowdown, 0.24, 1e-12);
  c.fail_contention = {0, 1, 2, 3};
  Outcome all = Measure(c, o);
  EXPECT_EQ(all.code, kExitNothingMeasured);
  ASSERT_EQ(all.run.failures_size(), 1);
  EXPECT_TRUE(absl::StartsWith(all.run.failures(0), "contention: no GPU measured")) << all.run.failures(0);
  EXPECT_TRUE(absl::StartsWith(all.profile.contention(0).source(), "not measured; reference profile"));
}

TEST(GemmShapes, ThreePassesOfEachLinearLayer) {
  const std::vector<GemmShape> q = TransformerShapes(true);
  // Quick: 1 hidden x 1 tokens x 2 TP x 4 linears x 3 passes + 2 squares.
  EXPECT_EQ(q.size(), 26u);
  // MLP down, h 8192, tokens 8192, TP 8: in = 28672 / 8 = 3584, out = 8192.
  auto find = [&](const std::string& what) {
    for (const auto& s : q)
      if (s.what == what) return s;
    return GemmShape{};
  };
  const GemmShape fwd = find("MLP down h=8192 tokens=8192 tp=8 forward");
  const GemmShape dgrad = find("MLP down h=8192 tokens=8192 tp=8 dgrad");
  const GemmShape wgrad = find("MLP down h=8192 tokens=8192 tp=8 wgrad");
  EXPECT_EQ(std::make_tuple(fwd.m, fwd.n, fwd.k), std::make_tuple(8192, 8192, 3584));
  EXPECT_EQ(std::make_tuple(dgrad.m, dgrad.n, dgrad.k), std::make_tuple(8192, 3584, 8192));
  EXPECT_EQ(std::make_tuple(wgrad.m, wgrad.n, wgrad.k), std::make_tuple(8192, 3584, 8192));  // k = tokens
  EXPECT_EQ(RunFor(DType::kBF16, dgrad).layout, GemmLayout::kNN);
  EXPECT_EQ(RunFor(DType::kBF16, wgrad).layout, GemmLayout::kNT);
  EXPECT_EQ(RunFor(DType::kFP8, wgrad).layout, GemmLayout::kTN);
  EXPECT_TRUE(RunFor(DType::kFP8, fwd).fast_accum);
  EXPECT_FALSE(RunFor(DType::kFP8, dgrad).fast_accum);
  EXPECT_FALSE(SweepRuns(DType::kFP16, wgrad));
  EXPECT_FALSE(SweepRuns(DType::kTF32, fwd));
  // Full: 3 x 3 x 4 x 4 forward + 3 x 2 x 4 x 4 x 2 backward + 5 squares.
  EXPECT_EQ(TransformerShapes(false).size(), 144u + 192u + 5u);
}

// The data check against a simulation of each collective on host buffers.
std::vector<std::vector<float>> Simulate(Collective c, int n, int salt, size_t count) {
  std::vector<std::vector<float>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r].resize(SendCount(c, n, count));
    for (size_t j = 0; j < send[r].size(); ++j) send[r][j] = kernels::PatternValue(r, salt, j);
  }
  const size_t chunk = count / n;
  for (int r = 0; r < n; ++r) {
    recv[r].assign(ReceiveCount(c, n, count), 0.0f);
    for (size_t j = 0; j < recv[r].size(); ++j) {
      switch (c) {
        case Collective::kAllReduce:
          for (int q = 0; q < n; ++q) recv[r][j] += send[q][j];
          break;
        case Collective::kAllGather: recv[r][j] = send[j / chunk][j % chunk]; break;
        case Collective::kReduceScatter:
          for (int q = 0; q < n; ++q) recv[r][j] += send[q][r * chunk + j];
          break;
        case Collective::kAllToAll: recv[r][j] = send[j / chunk][r * chunk + j % chunk]; break;
        case Collective::kSendRecv: recv[r][j] = send[(r + n - 1) % n][j]; break;
      }
    }
  }
  return recv;
}

TEST(CollectiveCheck, CorrectPassesStaleShiftedAndUnwrittenFail) {
  const int n = 4;
  const size_t count = 4 * 1024;
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kAllToAll, Collective::kSendRecv}) {
    SCOPED_TRACE(CollectiveName(c));
    const auto right = Simulate(c, n, 5, count);
    const auto stale = Simulate(c, n, 4, count);  // the previous size's results
    for (int r = 0; r < n; ++r) {
      const std::vector<size_t> idx = CheckIndices(right[r].size());
      auto pick = [&](const std::vector<float>& v) {
        std::vector<float> g;
        for (size_t j : idx) g.push_back(v[j]);
        return g;
      };
      EXPECT_TRUE(CheckReceived(c, n, r, 5, count, idx, pick(right[r]), "GPU x").ok());
      EXPECT_EQ(CheckReceived(c, n, r, 5, count, idx, pick(stale[r]), "GPU x").code(), absl::StatusCode::kDataLoss);
      std::vector<float> shifted(right[r].begin() + 1, right[r].end());
      shifted.push_back(right[r].front());
      EXPECT_FALSE(CheckReceived(c, n, r, 5, count, idx, pick(shifted), "GPU x").ok());
      std::vector<float> unwritten = right[r];
      unwritten.back() = std::nanf("");  // the poison left in the last element
      EXPECT_FALSE(CheckReceived(c, n, r, 5, count, idx, pick(unwritten), "GPU x").ok());
    }
  }
  // Large buffers: a strided sample plus the last element.
  const std::vector<size_t> idx = CheckIndices(1 << 24);
  EXPECT_EQ(idx[1], 256u);
  EXPECT_EQ(idx.back(), (1u << 24) - 1);
  EXPECT_LE(idx.size(), 65537u);
}

TEST(Harness, SizesRankAverageAgreementAndAbort) {
  // all-to-all sizes are whole 16-byte chunks per rank (nccl-tests alltoall.cu).
  const auto a2a = SweepSizes(Collective::kAllToAll, 8, 1 << 20, 8);
  EXPECT_EQ(a2a.front(), 128);
  for (double s : a2a) EXPECT_EQ(std::fmod(s, 128), 0);
  EXPECT_EQ(SweepSizes(Collective::kAllReduce, 8, 64, 8), (std::vector<double>{8, 16, 32, 64}));
  EXPECT_EQ(SweepSizes(Collective::kAllGather, 8, 64, 8), (std::vector<double>{32, 64}));
  int aborted = 0;
  FakeConfig c;
  c.coll_fail_at_bytes = 1024;
  c.aborted = &aborted;
  testing::FakeBackend b(c, 4, 4);
  auto comm = MakeSingleProcessCommunicator();
  SweepOptions o;
  o.max_bytes = 1 << 20;
  o.batches = 3;
  o.collectives = {Collective::kAllReduce};
  SweepResult r = Sweep(b, *comm, o);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status.message().find("all_reduce at 1024 bytes"), std::string::npos) << r.status;
  EXPECT_EQ(r.samples.size(), 7u);  // 8 .. 512 bytes
  EXPECT_EQ(aborted, 1);
  // The injected failure of the test hook, on this rank.
  testing::FakeBackend ok(FakeConfig{}, 4, 4);
  o.inject = {0, false, 64};
  r = Sweep(ok, *comm, o);
  EXPECT_NE(r.status.message().find("injected failure"), std::string::npos);
  EXPECT_EQ(r.samples.size(), 3u);
}

TEST(Nvml, FakeLibraryUnitsAndBusIds) {
  std::string why;
  std::unique_ptr<Nvml> n = Nvml::Load(STEPCAST_FAKE_NVML, &why);
  ASSERT_NE(n, nullptr) << why;
  EXPECT_EQ(n->DriverVersion(), "580.65.06");
  absl::StatusOr<NvmlDeviceInfo> info = n->Info("0000:28:00.0");  // as cudaDeviceGetPCIBusId prints it
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->uuid, "GPU-fa4e0000-0000-0000-0000-000000000001");
  EXPECT_DOUBLE_EQ(info->power_limit_w, 700.0);
  EXPECT_EQ(info->pcie_link_width, 16);
  absl::StatusOr<NvmlReading> r = n->Read("0000:28:00.0");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sm_clock_mhz, 1756);
  EXPECT_EQ(r->memory_clock_mhz, 2619);
  EXPECT_EQ(r->temperature_c, 61);
  EXPECT_DOUBLE_EQ(r->power_w, 512.345);
  EXPECT_EQ(r->clocks_event_reasons, 0x5u);
  EXPECT_EQ(n->Read("0000:99:00.0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(n->Read("28").status().code(), absl::StatusCode::kNotFound);  // not a bus id NVML accepts
  EXPECT_EQ(ClocksEventReasonNames(0x1 | 0x2 | 0x20 | 0x80),
            (std::vector<std::string>{"sw_thermal_slowdown", "hw_power_brake_slowdown"}));
  EXPECT_EQ(Nvml::Load("/nonexistent/libnvidia-ml.so.1", &why), nullptr);
  EXPECT_NE(why.find("cannot load"), std::string::npos);
  // The sampler: readings in a window, or the nearest one.
  NvmlSampler s(n.get(), {"0000:18:00.0"}, 0.05);
  const double t0 = NvmlSampler::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const v1::ClockWindow w = s.Window("0000:18:00.0", t0, NvmlSampler::Now());
  s.Stop();
  EXPECT_GE(w.samples(), 2);
  EXPECT_EQ(w.sm_clock_mhz_min(), 1755);
  EXPECT_DOUBLE_EQ(w.power_w_mean(), 512.345);
}

TEST(Stragglers, FivePercentBelowTheMedianNamedByGpu) {
  std::vector<GpuValue> v;
  const double rates[] = {720, 718, 722, 640, 719, 721, 675, 690};
  for (int i = 0; i < 8; ++i) {
    GpuValue g;
    g.id.set_index(i + 8);  // e.g. the second node's GPUs, CUDA indices 8..15 under one process
    g.id.set_pci_bus_id(absl::StrCat("0000:", 10 + i, ":00.0"));
    g.value = rates[i];
    v.push_back(g);
  }
  const auto s = FindStragglers(v, "gemm");
  // Median (718 + 719) / 2 = 718.5: 690 is 4.0% below (kept), 675 6.1% and 640 10.9% (named).
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].gpu(), 11);
  EXPECT_EQ(s[0].gpu_id().pci_bus_id(), "0000:13:00.0");
  EXPECT_NEAR(s[0].slowdown(), 1 - 640 / 718.5, 1e-12);
  EXPECT_EQ(s[1].gpu(), 14);
  EXPECT_NEAR(s[1].slowdown(), 1 - 675 / 718.5, 1e-12);
  EXPECT_TRUE(FindStragglers({v[0]}, "hbm").empty());
  // CUPTI vs events: 2% + 2.5 us / t.
  EXPECT_FALSE(CuptiDisagrees(10.3e-6, 10e-6));   // 3% of 10 us is within 2% + 25%
  EXPECT_TRUE(CuptiDisagrees(1.03e-3, 1e-3));     // 3% of 1 ms is not (2.25%)
}

}  // namespace
}  // namespace stepcast::calibrate
