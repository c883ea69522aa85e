// The run probe's analysis on CPU: kernel classification of real names, step detection, overlap
// accounting on synthetic streams with known answers, bounded-memory compaction, rank merging,
// and predicted-vs-measured comparison.
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <chrono>
#include <random>
#include "plugin/compare.h"
#include "proto/codec.h"
#include "plugin/probe/collector.h"
#include "plugin/probe/trace_analysis.h"
#include "absl/strings/str_cat.h"

namespace stepcast::probe {
namespace {

TEST(Classify, RealKernelNames) {
  const struct { const char* name; KernelCategory want; } cases[] = {
      {"nvjet_tst_192x192_64x4_2x1_v_bz_coopB_NNT", KernelCategory::kGemm},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
       KernelCategory::kGemm},
      {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", KernelCategory::kGemm},
      {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>("
       "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)", KernelCategory::kGemm},
      {"void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(float)",
       KernelCategory::kGemm},
      {"void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
       "false, true, false, false, true, true, false, false>(Flash_fwd_params)", KernelCategory::kAttention},
      {"void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>(Flash_bwd_params)",
       KernelCategory::kAttention},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
       KernelCategory::kAttention},
      {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>::Params)",
       KernelCategory::kAttention},
      {"_attn_fwd", KernelCategory::kAttention},
      {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", KernelCategory::kCommunication},
      {"ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", KernelCategory::kCommunication},
      {"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", KernelCategory::kCommunication},
      {"Memcpy DtoD (Device -> Device)", KernelCategory::kMemory},
      {"Memset (Device)", KernelCategory::kMemory},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
       KernelCategory::kElementwise},
      {"triton_poi_fused__to_copy_add_mul_0", KernelCategory::kElementwise},
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float)",
       KernelCategory::kElementwise},
      {"void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>(long, int volatile*)",
       KernelCategory::kElementwise},
  };
  for (const auto& c : cases) EXPECT_EQ(ClassifyKernel(c.name), c.want) << c.name;
  EXPECT_EQ(CollectiveOf("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)"), "all_reduce");
  EXPECT_EQ(CollectiveOf("ncclDevKernel_ReduceScatter_Sum_f32_RING_SIMPLE"), "reduce_scatter");
  EXPECT_EQ(CollectiveOf("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"), "send_recv");
  EXPECT_EQ(CollectiveOf("nvjet_tst_192x192"), "");
}

TEST(Analyze, OverlapAccountingByHand) {
  // [0, 1000): GEMM [0, 400), all-reduce [300, 600) (100 under the GEMM), elementwise
  // [600, 700), nothing after.
  std::vector<KernelRecord> k = {{0, 400, 0, KernelCategory::kGemm, 0},
                                 {300, 600, 1, KernelCategory::kCommunication, 1},
                                 {600, 700, 2, KernelCategory::kElementwise, 0}};
  const v1::StepMeasurement m = AnalyzeWindow(k, 0, 1000);
  EXPECT_DOUBLE_EQ(m.step_time_s(), 1000e-9);
  EXPECT_DOUBLE_EQ(m.busy().gemm_s(), 400e-9);
  EXPECT_DOUBLE_EQ(m.busy().communication_s(), 300e-9);
  EXPECT_DOUBLE_EQ(m.busy().elementwise_s(), 100e-9);
  EXPECT_DOUBLE_EQ(m.exposed_communication_s(), 200e-9);
  EXPECT_DOUBLE_EQ(m.idle_s(), 300e-9);
  EXPECT_DOUBLE_EQ(m.communication_by_collective_s().at("all_reduce"), 300e-9);
  EXPECT_EQ(m.kernel_count(), 3);
}

// A synthetic training loop: each step (1 ms) is GEMM 300 us, elementwise 100 us, GEMM 200 us,
// an all-reduce of 250 us of which the first 150 us overlap a 150 us elementwise kernel on
// another stream, then idle until the next step. NVTX step ranges open 5 us before each step.
struct Stream {
  std::vector<KernelRecord> kernels;
  std::vector<TimeRange> ranges;
  std::vector<std::string> names;
};
Stream Loop(int steps, int64_t t0 = 1'000'000) {
  Stream s;
  s.names = {"nvjet_gemm_a", "elementwise_a", "nvjet_gemm_b", "ncclDevKernel_AllReduce_Sum_bf16", "elementwise_b"};
  for (int i = 0; i < steps; ++i) {
    const int64_t t = t0 + i * int64_t{1'000'000};
    s.ranges.push_back({t - 5'000, t + 990'000});
    s.kernels.push_back({t, t + 300'000, 0, KernelCategory::kGemm, 0});
    s.kernels.push_back({t + 300'000, t + 400'000, 1, KernelCategory::kElementwise, 0});
    s.kernels.push_back({t + 400'000, t + 600'000, 2, KernelCategory::kGemm, 0});
    s.kernels.push_back({t + 600'000, t + 850'000, 3, KernelCategory::kCommunication, 1});
    s.kernels.push_back({t + 600'000, t + 750'000, 4, KernelCategory::kElementwise, 0});
  }
  return s;
}

TEST(Steps, FromNvtxRangesAndFromThePeriod) {
  const Stream s = Loop(10);
  const std::vector<int64_t> nvtx = StepStartsFromRanges(s.kernels, s.ranges);
  ASSERT_EQ(nvtx.size(), 10u);
  EXPECT_EQ(nvtx[3], 4'000'000);
  auto period = StepStartsFromPeriod(s.kernels);
  ASSERT_TRUE(period.ok()) << period.status();
  EXPECT_EQ(period->period, 5);
  EXPECT_EQ(period->starts, nvtx);
  // Random names never repeat: no period.
  std::vector<KernelRecord> noise = s.kernels;
  for (size_t i = 0; i < noise.size(); ++i) noise[i].name_id = static_cast<uint32_t>(i);
  EXPECT_EQ(StepStartsFromPeriod(noise).status().code(), absl::StatusCode::kNotFound);
}

TEST(Steps, ReportLeavesOutWarmupAndTakesMedians) {
  const Stream s = Loop(10);
  ReportOptions o;
  o.warmup_steps = 2;
  const v1::ProbeReport r = BuildReport(s.kernels, StepStartsFromRanges(s.kernels, s.ranges), "nvtx:step", o);
  ASSERT_EQ(r.steps_size(), 7);  // 10 starts -> 9 closed steps, 2 warm-up
  EXPECT_EQ(r.steps(0).step(), 2);
  EXPECT_NEAR(r.median().step_time_s(), 1e-3, 1e-12);
  EXPECT_NEAR(r.median().busy().gemm_s(), 500e-6, 1e-12);
  EXPECT_NEAR(r.median().busy().elementwise_s(), 250e-6, 1e-12);
  EXPECT_NEAR(r.median().busy().communication_s(), 250e-6, 1e-12);
  EXPECT_NEAR(r.median().exposed_communication_s(), 100e-6, 1e-12);
  EXPECT_NEAR(r.median().idle_s(), 150e-6, 1e-12);
}

TEST(Collector, BoundedMemoryGivesTheSameSteps) {
  const Stream s = Loop(40);
  auto run = [&](size_t max_records) {
    Collector::Options o;
    o.max_records = max_records;
    Collector c(o);
    for (size_t i = 0; i < s.kernels.size(); ++i) {
      if (i % 5 == 0) c.AddRangeStart(i, "train step", s.ranges[i / 5].start_ns);
      c.AddKernel(s.names[s.kernels[i].name_id], s.kernels[i].start_ns, s.kernels[i].end_ns);
      EXPECT_LE(c.buffered(), max_records);
    }
    return c.Finish();
  };
  const v1::ProbeReport big = run(1 << 20), small = run(23);
  ASSERT_EQ(big.steps_size(), 37);
  ASSERT_EQ(small.steps_size(), big.steps_size());
  for (int i = 0; i < big.steps_size(); ++i) {
    EXPECT_EQ(small.steps(i).step(), big.steps(i).step());
    EXPECT_NEAR(small.steps(i).step_time_s(), big.steps(i).step_time_s(), 1e-12);
    EXPECT_NEAR(small.steps(i).exposed_communication_s(), big.steps(i).exposed_communication_s(), 1e-12);
  }
  EXPECT_EQ(big.step_source(), "nvtx:step");
  EXPECT_EQ(big.kernels_seen(), 200);
}

TEST(Merge, TheSlowestRankSetsEachStep) {
  v1::ProbeReport r0, r1;
  for (int i = 2; i < 6; ++i) {
    auto* a = r0.add_steps();
    a->set_step(i);
    a->set_step_time_s(1.0);
    a->set_idle_s(0.1);
    auto* b = r1.add_steps();
    b->set_step(i);
    b->set_step_time_s(i == 4 ? 1.5 : 0.9);
    b->set_idle_s(0.2);
  }
  r0.set_rank(0);
  r1.set_rank(1);
  auto m = MergeRanks({r0, r1});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rank(), -1);
  EXPECT_EQ(m->rank_count(), 2);
  ASSERT_EQ(m->steps_size(), 4);
  EXPECT_DOUBLE_EQ(m->steps(2).step_time_s(), 1.5);
  EXPECT_DOUBLE_EQ(m->steps(2).idle_s(), 0.2);
  EXPECT_DOUBLE_EQ(m->steps(0).step_time_s(), 1.0);
  EXPECT_FALSE(MergeRanks({}).ok());
}

TEST(Compare, CategoriesAndTheLargestDifference) {
  v1::Prediction p;
  p.set_step_time_s(10);
  p.set_mfu(0.5);
  auto* b = p.mutable_breakdown();
  b->set_gemm_s(6);
  b->set_attention_s(1);
  b->set_elementwise_s(1);
  b->set_optimizer_s(0.5);
  b->set_tp_comm_s(0.5);
  b->set_dp_comm_s(0.5);
  b->set_pipeline_bubble_s(0.5);
  v1::StepBreakdown m;
  m.set_gemm_s(6.2);
  m.set_attention_s(1.0);
  m.set_elementwise_s(1.6);
  m.set_exposed_communication_s(3.0);
  m.set_idle_s(0.4);
  const Comparison c = Compare(p, m, 12.5);
  ASSERT_EQ(c.rows.size(), 5u);
  EXPECT_EQ(c.rows[0].category(), "compute");
  EXPECT_DOUBLE_EQ(c.rows[0].predicted_s(), 7);
  EXPECT_NEAR(c.rows[0].measured_s(), 7.2, 1e-12);
  EXPECT_DOUBLE_EQ(c.rows[2].predicted_s(), 1);
  EXPECT_DOUBLE_EQ(c.rows[2].measured_s(), 3);
  EXPECT_NEAR(c.rows[4].measured_s(), 12.5 - 12.2, 1e-12);
  EXPECT_NEAR(c.measured_mfu, 0.4, 1e-12);
  EXPECT_THAT(c.largest_difference, ::testing::StartsWith("communication: +2.000 s of the +2.500 s"));
}


// Reliability review M4: "12 steps of 1.0 s produce 189 steps, median 0.045 s" when nested
// per-micro-batch ranges (forward_step / backward_step inside train_step) matched "step". The
// review's input: 12 train_step ranges of 1.0 s, each with 8 micro-batches of forward_step and
// backward_step ranges, kernels throughout.
TEST(Collector, NestedStepNamedRangesAreNotSteps) {
  Collector::Options o;
  o.warmup_steps = 0;
  Collector c(o);
  uint64_t id = 0;
  const int64_t s = 1'000'000'000;
  for (int step = 0; step < 12; ++step) {
    const int64_t t = step * s;
    const uint64_t outer = id++;
    c.AddRangeStart(outer, "train_step", t);
    for (int mb = 0; mb < 8; ++mb) {
      const int64_t m = t + 10'000'000 + mb * 110'000'000;
      const uint64_t f = id++, b = id++;
      c.AddRangeStart(f, "forward_step", m);
      c.AddKernel("nvjet_fwd", m + 1'000, m + 40'000'000);
      c.AddRangeEnd(f, m + 40'000'000);
      c.AddRangeStart(b, "backward_step", m + 45'000'000);
      c.AddKernel("nvjet_bwd", m + 45'001'000, m + 100'000'000);
      c.AddRangeEnd(b, m + 100'000'000);
    }
    c.AddKernel("multi_tensor_apply_kernel", t + 900'000'000, t + 950'000'000);
    c.AddRangeEnd(outer, t + 990'000'000);
  }
  const v1::ProbeReport r = c.Finish();
  EXPECT_EQ(r.steps_size(), 11);  // 12 starts close 11 steps
  EXPECT_NEAR(r.median().step_time_s(), 1.0, 1e-6);
  EXPECT_TRUE(IsStepRangeName("ProfilerStep#12", "step"));
  EXPECT_TRUE(IsStepRangeName("train step", "step"));
  EXPECT_TRUE(IsStepRangeName("step 12", "step"));
  EXPECT_FALSE(IsStepRangeName("forward_step", "step"));
  EXPECT_FALSE(IsStepRangeName("backward_step", "step"));
  EXPECT_FALSE(IsStepRangeName("stepper", "step"));
  EXPECT_TRUE(IsStepRangeName("Iteration", "iteration"));
  EXPECT_FALSE(IsStepRangeName("iteration 3", "iteration"));
}

// gpu_code_review item 8: the CPU runs ahead of the GPU (no synchronisation each step), so a
// step range opens while the GPU still runs the previous step's kernels. With launch records
// (correlation ids) each kernel goes to the step that launched it; by timestamp alone the
// windows would start at the previous step's tail.
TEST(Collector, StepBoundariesByLaunchCorrelation) {
  Collector::Options o;
  o.warmup_steps = 0;
  Collector c(o);
  int64_t corr = 1;
  for (int step = 0; step < 6; ++step) {
    const int64_t cpu = step * int64_t{1'000'000}, gpu = cpu + 1'600'000;  // GPU 1.6 steps behind
    c.AddRangeStart(step, "train_step", cpu);
    for (int k = 0; k < 4; ++k) {
      c.AddLaunch(corr, cpu + 10'000 + k * 1'000);
      c.AddKernel(k % 2 ? "elementwise" : "nvjet_gemm", gpu + k * 200'000, gpu + k * 200'000 + 150'000, 7, corr);
      ++corr;
    }
    c.AddRangeEnd(step, cpu + 900'000);
  }
  const v1::ProbeReport r = c.Finish();
  EXPECT_THAT(r.step_source(), ::testing::HasSubstr("launch correlation"));
  ASSERT_EQ(r.steps_size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.steps(i).start_ns(), i * 1'000'000 + 1'600'000) << i;
  EXPECT_NEAR(r.median().busy().gemm_s(), 300e-6, 1e-12);
}

// gpu code review 2, N8: the probe records the driver API's launches too (NCCL's
// cuLaunchKernelEx, Triton's cuLaunchKernel). A runtime launch and the driver call it makes share
// one correlation id, and the driver call starts later: here the last launch of each step calls
// the driver after the next step's range opened, and its record comes second. The launch is the
// runtime call's (the earlier); before, the later record overwrote it and the kernel moved to the
// next step (each step then started at the previous step's last kernel).
TEST(Collector, NestedDriverRecordKeepsTheRuntimeLaunchTime) {
  Collector::Options o;
  o.warmup_steps = 0;
  Collector c(o);
  int64_t corr = 1;
  for (int step = 0; step < 6; ++step) {
    const int64_t cpu = step * int64_t{1'000'000}, gpu = cpu + 1'600'000;
    c.AddRangeStart(step, "train_step", cpu);
    for (int k = 0; k < 4; ++k) {
      const int64_t launch = k < 3 ? cpu + 10'000 + k * 1'000 : cpu + 999'000;
      c.AddLaunch(corr, launch);                                  // the runtime record
      if (k == 3) c.AddLaunch(corr, cpu + 1'000'500);             // its driver call, in the next step
      c.AddKernel(k % 2 ? "elementwise" : "nvjet_gemm", gpu + k * 200'000, gpu + k * 200'000 + 150'000, 7, corr);
      ++corr;
    }
    c.AddRangeEnd(step, cpu + 999'500);
  }
  const v1::ProbeReport r = c.Finish();
  EXPECT_THAT(r.step_source(), ::testing::HasSubstr("launch correlation"));
  ASSERT_EQ(r.steps_size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.steps(i).start_ns(), i * 1'000'000 + 1'600'000) << i;
}

// Reliability review M5: with no step range and an aperiodic kernel sequence, a full buffer
// (2^21 records) made the period search run 30.7 s under the collector's lock (every period up to
// 20,000 over 1.4 M records), and Finish() another 15.2 s. The review's input: 2^21 kernels whose
// names vary like an MoE step's. The search now compares at most 2e7 names per compaction.
// (Wall-clock bounds here are 10x above what this machine takes, to catch the O(P*N) search
// coming back, not to benchmark.)
TEST(Collector, AperiodicKernelsDoNotStallTheCollector) {
  Collector::Options o;
  Collector c(o);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> name(0, 63);
  double slowest_s = 0;
  int64_t t = 0;
  const size_t n = size_t{1} << 21;
  for (size_t i = 0; i < n; ++i) {
    const auto a = std::chrono::steady_clock::now();
    c.AddKernel(absl::StrCat("moe_expert_kernel_", name(rng)), t, t + 1000, 7);
    slowest_s = std::max(slowest_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    t += 1500;
  }
  const auto a = std::chrono::steady_clock::now();
  const v1::ProbeReport r = c.Finish();
  const double finish_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  EXPECT_LT(slowest_s, 5.0);
  EXPECT_LT(finish_s, 5.0);
  EXPECT_EQ(r.steps_size(), 0);
  EXPECT_EQ(r.kernels_seen(), static_cast<int64_t>(n));
}

// Reliability review M5: AddRangeEnd scanned every buffered range (1.9 s per 1e5 ranges).
TEST(Collector, ManyRangesEndInConstantTime) {
  Collector::Options o;
  o.warmup_steps = 0;
  Collector c(o);
  const auto a = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 100000; ++i) {
    const int64_t t = static_cast<int64_t>(i) * 10'000;
    c.AddRangeStart(i, "step", t);
    c.AddKernel("nvjet", t + 100, t + 5'000);
    c.AddRangeEnd(i, t + 9'000);
  }
  const v1::ProbeReport r = c.Finish();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count(), 5.0);
  EXPECT_EQ(r.steps_size(), 99999);
}

// gpu_code_review item 7: helper processes of the same rank write reports too; the one with
// steps is taken, and processes that launched no kernel are dropped.
TEST(Merge, OneReportPerRankPicksTheProcessWithSteps) {
  v1::ProbeReport helper, trainer, empty, other_rank;
  helper.set_rank(0);
  helper.set_kernels_seen(3);
  trainer.set_rank(0);
  trainer.set_kernels_seen(5000);
  trainer.add_steps()->set_step_time_s(1.0);
  empty.set_rank(0);
  other_rank.set_rank(1);
  other_rank.set_kernels_seen(4000);
  other_rank.add_steps()->set_step_time_s(1.1);
  const std::vector<v1::ProbeReport> got = OneReportPerRank({helper, trainer, empty, other_rank});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].kernels_seen(), 5000);
  EXPECT_EQ(got[1].rank(), 1);
}

TEST(Analyze, ConvolutionAndBothExposedFigures) {
  // comm [0, 100); conv [0, 30); memcpy [30, 60): HTA's exposed = 70 (memcpy does not hide
  // communication), memcpy-inclusive = 40.
  std::vector<KernelRecord> k = {{0, 100, 0, KernelCategory::kCommunication, CollectiveIndex("all_gather")},
                                 {0, 30, 1, KernelCategory::kConvolution, 0},
                                 {30, 60, 2, KernelCategory::kMemory, 0}};
  const v1::StepMeasurement m = AnalyzeWindow(k, 0, 200);
  EXPECT_DOUBLE_EQ(m.busy().convolution_s(), 30e-9);
  EXPECT_DOUBLE_EQ(m.exposed_communication_s(), 70e-9);
  EXPECT_DOUBLE_EQ(m.exposed_communication_incl_memory_s(), 40e-9);
  EXPECT_DOUBLE_EQ(m.exposed_communication_by_collective_s().at("all_gather"), 70e-9);
  EXPECT_DOUBLE_EQ(m.idle_s(), 100e-9);
}

TEST(Steps, PeriodOnTheComputeStreamWhenStreamsInterleave) {
  // Stream 7 repeats the same 6 kernels each step; stream 20 (communication) runs a varying
  // number of kernels at varying offsets, so the merged sequence does not repeat.
  std::vector<KernelRecord> k;
  std::mt19937 rng(3);
  for (int step = 0; step < 12; ++step) {
    const int64_t t = step * int64_t{1'000'000};
    for (int j = 0; j < 6; ++j) {
      k.push_back({t + 200'000 + j * 100'000, t + 280'000 + j * 100'000, static_cast<uint32_t>(j),
                   KernelCategory::kGemm, 0, 7});
    }
    const int extra = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < extra; ++j) {
      const int64_t s = t + 250'000 + static_cast<int64_t>(rng() % 500'000);
      k.push_back({s, s + 30'000, static_cast<uint32_t>(10 + rng() % 3), KernelCategory::kCommunication, 1, 20});
    }
  }
  std::sort(k.begin(), k.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  auto p = StepStartsFromPeriod(k);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->stream, 7);
  EXPECT_EQ(p->period, 6);
  ASSERT_EQ(p->starts.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(p->starts[i], i * 1'000'000 + 200'000);
}

// The report as the injected probe writes it (ToJson) reads back with the strict reader the
// service and `stepcast compare` use, for the GPU test program's sequence (two GEMM kernels and
// an elementwise kernel per "step" range, no communication: empty per-collective maps), with
// CUPTI's clock (ns since the epoch, ~1.8e18, past a double's 2^53). Both broke the read-back on
// an H100 (2026-11-25): "expected a list" and "'1795629272700890696' is not an integer".
TEST(Collector, ReportOfAStepWithoutCommunicationReadsBack) {
  Collector::Options o;
  o.warmup_steps = 2;
  Collector c(o);
  int64_t corr = 1;
  for (int step = 0; step < 10; ++step) {
    const int64_t cpu = int64_t{1'795'629'272'700'890'696} + step * int64_t{200'000}, gpu = cpu + 5'000;
    c.AddRangeStart(step, "step", cpu);
    const char* names[] = {"fake_gemm_kernel", "elementwise_add_kernel", "fake_gemm_kernel"};
    for (int k = 0; k < 3; ++k) {
      c.AddLaunch(corr, cpu + 1'000 + k * 1'000);
      c.AddKernel(names[k], gpu + k * 50'000, gpu + k * 50'000 + 40'000, 7, corr);
      ++corr;
    }
    c.AddRangeEnd(step, cpu + 190'000);
  }
  const v1::ProbeReport r = c.Finish();
  ASSERT_EQ(r.steps_size(), 7);
  v1::ProbeReport back;
  const absl::Status s = ParseMessage(ToJson(r), SpecFormat::kJson, "report", &back);
  ASSERT_TRUE(s.ok()) << s << "\n" << ToJson(r);
  EXPECT_EQ(back.steps_size(), 7);
  EXPECT_EQ(back.steps(0).kernel_count(), 3);
  EXPECT_EQ(back.steps(6).end_ns(), r.steps(6).end_ns());
  EXPECT_GT(back.steps(6).end_ns(), int64_t{1} << 60);
}

}  // namespace
}  // namespace stepcast::probe
