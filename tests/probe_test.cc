// The run probe's analysis on CPU: kernel classification of real names, step detection, overlap
// accounting on synthetic streams with known answers, bounded-memory compaction, rank merging,
// and predicted-vs-measured comparison.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugin/compare.h"
#include "plugin/probe/collector.h"
#include "plugin/probe/trace_analysis.h"

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

}  // namespace
}  // namespace stepcast::probe
