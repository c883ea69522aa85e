// Kineto / torch.profiler traces: the streaming reader, step detection (by launch correlation and
// without markers), the kernel classifier against a table of 540 real names, and the per-step and
// whole-trace figures against independent references (tests/data/real_data/traces/expected.json:
// HolisticTraceAnalysis's own analysis and a separate per-step accounting of the same traces).
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "plugin/compare.h"
#include "plugin/probe/trace_analysis.h"
#include "plugin/trace/kineto_trace.h"

namespace stepcast::trace {
namespace {

const std::string kTraces = std::string(STEPCAST_SOURCE_DIR) + "/tests/data/real_data/traces/";

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// expected.json as a protobuf Struct.
const google::protobuf::Struct& Expected() {
  static const google::protobuf::Struct* s = [] {
    auto* out = new google::protobuf::Struct;
    const auto st = google::protobuf::util::JsonStringToMessage(Slurp(kTraces + "expected.json"), out);
    if (!st.ok()) ADD_FAILURE() << st.ToString();
    return out;
  }();
  return *s;
}

double Field(const google::protobuf::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << key;
  return it == s.fields().end() ? NAN : it->second.number_value();
}
const google::protobuf::Struct& Sub(const google::protobuf::Struct& s, const std::string& key) {
  return s.fields().at(key).struct_value();
}

// Within 1% of the reference, or 0.02 (ms or points) for values near zero.
void ExpectWithin1Pct(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, std::max(0.01 * std::fabs(want), 0.02)) << what;
}

const char* const kHtaTraces[] = {
    "hta/ddp_v100x2_rank1__df_index_resolver.json.gz",
    "hta/a100x16_rank0__negative_queue_length_values_check.json.gz",
    "hta/a100x8_rank3__trace_diff_control.json.gz",
    "hta/a100x2_rank0_resnet__nccl_parser_config.json.gz",
};

v1::TraceSummary Analyze(const std::string& rel, bool markers = true) {
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(kTraces + rel);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  AnalyzeOptions o;
  o.use_markers = markers;
  absl::StatusOr<v1::TraceSummary> s = AnalyzeKinetoTrace(*t, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : v1::TraceSummary();
}

// per_step_reaccounted.json: the same independent per-step accounting with the kernel categories
// of the reference table and its corrections (per_step_reaccount.py; without the corrections it
// reproduces expected.json, checked below). Issue 24: fbgemm_gpu embedding kernels are not GEMMs,
// which moves 1.5 ms (a100x16) and 0.8 ms (a100x8) per step from gemm to other.
const google::protobuf::Struct& Reaccounted() {
  static const google::protobuf::Struct* s = [] {
    auto* out = new google::protobuf::Struct;
    const auto st = google::protobuf::util::JsonStringToMessage(Slurp(kTraces + "per_step_reaccounted.json"), out);
    if (!st.ok()) ADD_FAILURE() << st.ToString();
    return out;
  }();
  return *s;
}

TEST(RealTraces, PerStepMediansAgreeWithTheIndependentAccounting) {
  for (const char* rel : kHtaTraces) {
    SCOPED_TRACE(rel);
    const v1::TraceSummary s = Analyze(rel);
    const auto& want = Sub(Sub(Sub(Expected(), "traces"), rel), "per_step_median_ms");
    const auto& corrected = Sub(Sub(Reaccounted(), "per_step_median_ms"), rel);
    // The re-accounting agrees with expected.json wherever the corrections do not reach.
    ExpectWithin1Pct(Field(corrected, "communication"), Field(want, "nccl_busy"), "reaccount: nccl_busy");
    ExpectWithin1Pct(Field(corrected, "memory"), Field(want, "memory"), "reaccount: memory");
    ExpectWithin1Pct(Field(corrected, "conv"), Field(want, "convolution"), "reaccount: conv");
    const v1::StepMeasurement& m = s.median();
    EXPECT_THAT(s.step_source(), ::testing::HasSubstr("ProfilerStep"));
    ExpectWithin1Pct(m.step_time_s() * 1e3, Field(want, "step"), "step");
    ExpectWithin1Pct(m.busy().gemm_s() * 1e3, Field(corrected, "gemm"), "gemm");
    ExpectWithin1Pct(m.busy().convolution_s() * 1e3, Field(want, "convolution"), "convolution");
    ExpectWithin1Pct(m.busy().attention_s() * 1e3, Field(want, "attention"), "attention");
    ExpectWithin1Pct(m.busy().communication_s() * 1e3, Field(want, "nccl_busy"), "nccl_busy");
    // The reference's exposed NCCL is "not overlapped by any other GPU work": our
    // memcpy-inclusive figure. HTA's (computation only) is >= it.
    ExpectWithin1Pct(m.exposed_communication_incl_memory_s() * 1e3, Field(want, "nccl_exposed"), "nccl_exposed");
    EXPECT_GE(m.exposed_communication_s(), m.exposed_communication_incl_memory_s());
    ExpectWithin1Pct(m.idle_s() * 1e3, Field(want, "idle"), "idle");
    ExpectWithin1Pct(m.busy().memory_copy_s() * 1e3, Field(want, "memory"), "memory");
    ExpectWithin1Pct(m.busy().elementwise_s() * 1e3, Field(corrected, "other"), "other (elementwise)");
  }
}

// Our own trace (2026-11-25, H100 80GB HBM3, torch 2.11.0+cu130, examples/train_gpt.py --steps 12
// --trace: GPT 1.3B, batch 8 x 2048, bf16 autocast, cuDNN SDPA). Newer Kineto writes each
// ProfilerStep#N twice, on the CPU (user_annotation) and on the GPU timeline
// (gpu_user_annotation): counting both gave 11 steps alternating 0.4 ms and 310 ms. The references:
// the loop's own CUDA-event median over the same run (0.3114 s) and an independent per-step
// accounting in Python by launch correlation (tests/data/real_data/README.md): nvjet GEMM kernels
// 171.714 ms, cuDNN SDPA kernels with their backward helpers 30.303 ms, median over 5 steps.
TEST(RealTraces, OwnH100TraceCountsEachProfilerStepOnce) {
  const v1::TraceSummary s = Analyze("stepcast/h100_train_gpt_torch2.11.json.gz");
  EXPECT_THAT(s.step_source(), ::testing::HasSubstr("ProfilerStep"));
  ASSERT_EQ(s.steps_size(), 5);
  for (const v1::StepMeasurement& m : s.steps()) EXPECT_GT(m.step_time_s(), 0.30) << m.step();
  ExpectWithin1Pct(s.median().step_time_s() * 1e3, 311.4, "step vs the loop's CUDA events");
  EXPECT_NEAR(s.median().busy().gemm_s() * 1e3, 171.714, 0.05);
  EXPECT_NEAR(s.median().busy().attention_s() * 1e3, 30.303, 0.05);
  EXPECT_EQ(s.median().busy().communication_s(), 0);
}

TEST(RealTraces, WholeTraceFiguresAgreeWithHtaAndTheIndependentAccounting) {
  for (const char* rel : kHtaTraces) {
    SCOPED_TRACE(rel);
    const v1::TraceSummary s = Analyze(rel);
    const v1::TraceTemporalBreakdown& w = s.whole();
    const auto& ind = Sub(Sub(Sub(Expected(), "traces"), rel), "independent");
    ExpectWithin1Pct(w.kernel_time_s() * 1e3, Field(ind, "kernel_time_ms"), "kernel_time");
    ExpectWithin1Pct(w.idle_s() * 1e3, Field(ind, "idle_ms"), "idle");
    ExpectWithin1Pct(w.compute_s() * 1e3, Field(ind, "compute_ms"), "compute");
    ExpectWithin1Pct(w.communication_s() * 1e3, Field(ind, "comm_ms"), "comm");
    ExpectWithin1Pct(w.comm_comp_overlap_pct(), Field(ind, "overlap_pct"), "overlap");
    ExpectWithin1Pct(w.comm_overlap_incl_memory_pct(), Field(ind, "overlap_incl_memory_pct"), "overlap incl memory");

    const auto& hta = Sub(Sub(Sub(Expected(), "traces"), rel), "hta");
    const auto& temporal = Sub(hta, "temporal");
    // HTA on the one trace with sub-microsecond timestamps (the ResNet one) differs by up to
    // 2.7% in compute and non-compute time: HTA's parser handles fractional microseconds
    // differently (truncating ts and dur to integer microseconds moves our figures half-way
    // there); docs/TRACES.md. Everywhere else: 1%.
    const bool fractional = std::string(rel).find("resnet") != std::string::npos;
    const double tol = fractional ? 0.03 : 0.01;
    EXPECT_NEAR(w.kernel_time_s() * 1e6, Field(temporal, "kernel_time(us)"), tol * Field(temporal, "kernel_time(us)"));
    EXPECT_NEAR(w.idle_s() * 1e6, Field(temporal, "idle_time(us)"), tol * Field(temporal, "idle_time(us)"));
    EXPECT_NEAR(w.compute_s() * 1e6, Field(temporal, "compute_time(us)"), tol * Field(temporal, "compute_time(us)"));
    EXPECT_NEAR(w.non_compute_s() * 1e6, Field(temporal, "non_compute_time(us)"),
                tol * Field(temporal, "non_compute_time(us)"));
    // Overlap in points: within 1 point of HTA's comm/comp overlap.
    EXPECT_NEAR(w.comm_comp_overlap_pct(), Field(hta, "comp_comm_overlap_pct"), 1.0);
  }
}

TEST(RealTraces, WithoutMarkersTheSameStepsAreFound) {
  for (const char* rel : kHtaTraces) {
    SCOPED_TRACE(rel);
    const v1::TraceSummary marked = Analyze(rel, true);
    const v1::TraceSummary period = Analyze(rel, false);
    EXPECT_THAT(period.step_source(), ::testing::StartsWith("period:"));
    ASSERT_EQ(period.steps_size(), marked.steps_size());
    double sum_marked = 0, sum_period = 0;
    for (int i = 0; i < marked.steps_size(); ++i) {
      sum_marked += marked.steps(i).step_time_s();
      sum_period += period.steps(i).step_time_s();
      // The phase may differ (the longest consistent GPU idle gap, not the ProfilerStep's first
      // launch), so single steps shift by a few percent where step times vary.
      EXPECT_NEAR(period.steps(i).step_time_s(), marked.steps(i).step_time_s(), 0.04 * marked.steps(i).step_time_s())
          << "step " << i;
    }
    EXPECT_NEAR(sum_period / period.steps_size(), sum_marked / marked.steps_size(), 0.01 * sum_marked / marked.steps_size());
    EXPECT_NEAR(period.median().step_time_s(), marked.median().step_time_s(), 0.02 * marked.median().step_time_s());
  }
}

TEST(RealTraces, OneFilePerRankMergedTheSlowestRankSetsEachStep) {
  absl::StatusOr<v1::TraceReport> r = AnalyzeKinetoTraces(
      {kTraces + kHtaTraces[0], kTraces + kHtaTraces[1]});  // rank 1 (V100, 346 ms) and rank 0 (A100, 216 ms)
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ranks_size(), 2);
  EXPECT_EQ(r->merged().rank_count(), 2);
  ASSERT_EQ(r->merged().steps_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(r->merged().steps(i).step_time_s(),
                     std::max(r->ranks(0).steps(i).step_time_s(), r->ranks(1).steps(i).step_time_s()));
  }
  EXPECT_NEAR(r->merged().median().step_time_s(), 0.34584, 0.0001);
}

TEST(RealTraces, AllToAllFromSendRecvWhenTheTraceSaysSo) {
  // The A100x8 trace launches its NCCL SendRecv kernels inside "nccl:all_to_all" annotations.
  const v1::TraceSummary s = Analyze("hta/a100x8_rank3__trace_diff_control.json.gz");
  const auto& c = s.median().communication_by_collective_s();
  ASSERT_TRUE(c.contains("all_to_all"));
  EXPECT_GT(c.at("all_to_all"), 0.01);
  EXPECT_FALSE(c.contains("send_recv") && c.at("send_recv") > 0);
  EXPECT_TRUE(s.median().exposed_communication_by_collective_s().contains("all_to_all"));
}

TEST(RealTraces, InferenceTracesWithoutStepsAreReadWithRecordsKeepingStreamAndDevice) {
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(kTraces + "tracelens/b200x8_rank0_eager_inference.json.gz");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rank, 0);
  EXPECT_EQ(t->world_size, 8);
  ASSERT_FALSE(t->device_names.empty());
  EXPECT_EQ(t->device_names[0], "NVIDIA B200");
  int with_stream = 0, with_device = 0, with_correlation = 0;
  for (const auto& r : t->records) {
    with_stream += r.stream >= 0;
    with_device += r.device >= 0;
    with_correlation += r.correlation >= 0;
  }
  EXPECT_EQ(with_stream, static_cast<int>(t->records.size()));
  EXPECT_EQ(with_device, static_cast<int>(t->records.size()));
  EXPECT_EQ(with_correlation, static_cast<int>(t->records.size()));
}

// The classifier against every distinct kernel name of the HTA and TraceLens traces, with the
// category a careful reading gives ("reference_category"), corrected where the table is wrong
// (kernel_names_corrections.tsv, each row with its reason): every name agrees (issue 24: 100%).
std::map<std::string, std::string> Corrections() {
  std::map<std::string, std::string> out;
  std::ifstream f(kTraces + "kernel_names_corrections.tsv");
  EXPECT_TRUE(f.good());
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#' || absl::StartsWith(line, "corrected_category")) continue;
    std::vector<std::string> c = absl::StrSplit(line, '\t');
    EXPECT_EQ(c.size(), 4u) << line;
    if (c.size() == 4) out[c[2]] = c[0];
  }
  return out;
}

const std::map<std::string, std::string>& RefToOurs() {
  static const auto* m = new std::map<std::string, std::string>{{"gemm", "gemm"},
                                                                 {"conv", "convolution"},
                                                                 {"attention", "attention"},
                                                                 {"communication", "communication"},
                                                                 {"elementwise", "elementwise"}};
  return *m;
}

TEST(Classifier, AgreesWithTheCorrectedReferenceTableOnEveryName) {
  std::ifstream f(kTraces + "kernel_names_classified.tsv");
  ASSERT_TRUE(f.good());
  const std::map<std::string, std::string> corrections = Corrections();
  EXPECT_EQ(corrections.size(), 33u);
  std::string line;
  std::getline(f, line);  // header
  double total = 0, agree = 0;
  int rows = 0, corrected = 0;
  std::vector<std::string> disagree;
  while (std::getline(f, line)) {
    std::vector<std::string> c = absl::StrSplit(line, '\t');
    ASSERT_EQ(c.size(), 7u) << line;
    const double ms = std::stod(c[3]);
    std::string ref = c[2];
    if (auto it = corrections.find(c[6]); it != corrections.end()) {
      ref = it->second;
      ++corrected;
    }
    auto want = RefToOurs().find(ref);
    ASSERT_NE(want, RefToOurs().end()) << ref;
    const std::string got = probe::CategoryName(probe::ClassifyKernel(c[6]));
    total += ms;
    ++rows;
    if (got == want->second) {
      agree += ms;
    } else {
      disagree.push_back(c[6].substr(0, 100) + " -> " + got + " (table: " + ref + ", " + c[3] + " ms)");
    }
  }
  EXPECT_EQ(rows, 540);
  EXPECT_EQ(corrected, 33);  // every correction names a row of the table
  EXPECT_TRUE(disagree.empty()) << ::testing::PrintToString(disagree);
  EXPECT_DOUBLE_EQ(agree, total);
}

// The newer traces' names (DeepSeek-V3 H800, the param DLRM ranks, the MI300X ResNet and H100
// TimeSformer traces of ../shared/real_data/traces), each read by hand with its library
// (kernel_names_new_traces.tsv): every name agrees, DeepEP counted as communication.
TEST(Classifier, AgreesWithTheNewTracesTableOnEveryName) {
  std::ifstream f(kTraces + "kernel_names_new_traces.tsv");
  ASSERT_TRUE(f.good());
  std::string line;
  int rows = 0;
  std::map<std::string, int> per_category;
  std::vector<std::string> disagree;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#' || absl::StartsWith(line, "reference_category")) continue;
    std::vector<std::string> c = absl::StrSplit(line, '\t');
    ASSERT_EQ(c.size(), 6u) << line;
    auto want = RefToOurs().find(c[0]);
    ASSERT_NE(want, RefToOurs().end()) << c[0];
    const std::string got = probe::CategoryName(probe::ClassifyKernel(c[4]));
    ++rows;
    ++per_category[c[0]];
    if (got != want->second) disagree.push_back(c[4].substr(0, 100) + " -> " + got + " (table: " + c[0] + ")");
  }
  EXPECT_EQ(rows, 149);
  EXPECT_EQ(per_category["communication"], 6);  // RCCL Generic + 5 DeepEP kernels
  EXPECT_TRUE(disagree.empty()) << ::testing::PrintToString(disagree);
}

// Every row of the rule table (docs/TRACES.md prints it) classifies its own example as its
// category: the table and the rules do not drift apart.
TEST(Classifier, EachRuleTableExampleHasItsCategory) {
  ASSERT_GT(probe::kKernelFamilyCount, 8u);
  for (size_t i = 0; i < probe::kKernelFamilyCount; ++i) {
    const probe::KernelFamily& f = probe::kKernelFamilies[i];
    EXPECT_EQ(probe::CategoryName(probe::ClassifyKernel(f.example)), std::string(probe::CategoryName(f.category)))
        << f.example;
  }
}

TEST(Classifier, NamesTheIssueListed) {
  using probe::KernelCategory;
  const struct { const char* name; KernelCategory want; const char* collective; } cases[] = {
      {"sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
       KernelCategory::kConvolution, ""},
      {"void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)",
       KernelCategory::kConvolution, ""},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
       KernelCategory::kAttention, ""},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int)",
       KernelCategory::kElementwise, ""},
      {"triton_tem_fused_addmm_0", KernelCategory::kGemm, ""},
      {"triton_tem_fused_mm_1", KernelCategory::kGemm, ""},
      {"fused_moe_kernel", KernelCategory::kGemm, ""},
      {"void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>)",
       KernelCategory::kGemm, ""},
      {"void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)", KernelCategory::kCommunication, "all_to_all"},
      {"void deep_ep::internode_ll::combine<false, 7168>(void*)", KernelCategory::kCommunication, "all_to_all"},
      {"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
       KernelCategory::kCommunication, "all_reduce"},
      {"void c10d::symmetric_memory::two_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16*)",
       KernelCategory::kCommunication, "all_reduce"},
      {"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
       KernelCategory::kCommunication, "all_reduce"},
      {"Memcpy HtoD (Pinned -> Device)", KernelCategory::kMemory, ""},
      {"void vllm::_typeConvert_fused_add_rms_norm_kernel<c10::BFloat16, 8>()", KernelCategory::kElementwise, ""},
      // Issue 24: fbgemm_gpu is not GEMM; MIOpen igemm and CK grouped_conv are convolutions; ROCm
      // attn_fwd and SageAttention sage_fwd are attention; DeepEP (dpsk::ep:: in DeepSeek's
      // profile-data) is communication, its local layout kernel is not.
      {"void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int)",
       KernelCategory::kElementwise, ""},
      {"void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>"
       "(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>, fbgemm_gpu::FixedDivisor)",
       KernelCategory::kElementwise, ""},
      {"void cutlass::device_kernel<fbgemm_gpu::f8f8bf16_rowwise_kernel<128, 128>>(Params)", KernelCategory::kGemm, ""},
      {"igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs",
       KernelCategory::kConvolution, ""},
      {"igemm_wrw_gtcx3_nhwc_bf16_bx0_ex1_bt64x64x64_wt32x32x8_ws1x1_wr1x1_ta1x4x1x4_1x16x1x16_tb1x4x1x4_1x16x1x16_gkgs",
       KernelCategory::kConvolution, ""},
      {"_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_"
       "cshuffle_v3E", KernelCategory::kConvolution, ""},
      {"attn_fwd", KernelCategory::kAttention, ""},
      {"sage_fwd_kernel", KernelCategory::kAttention, ""},
      {"void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*, float*, long*)", KernelCategory::kCommunication,
       "all_to_all"},
      {"void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int)", KernelCategory::kCommunication,
       "all_to_all"},
      {"void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)",
       KernelCategory::kCommunication, "all_to_all"},
      {"void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
       KernelCategory::kElementwise, ""},
      {"void dpsk::grouped_gemm::cuda::utils::transpose<512, 128, 4, 4>(unsigned char const*, unsigned char*)",
       KernelCategory::kElementwise, ""},
      {"void cutlass::device_kernel<dpsk::grouped_gemm::cuda::m_grouped_fp8_ptp128c::GemmKernel>(Params)",
       KernelCategory::kGemm, ""},
      {"void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, "
       "__nv_bfloat16, 32, true>(int, flashinfer::QuantizationSFLayout)", KernelCategory::kElementwise, ""},
      {"void flashinfer::BatchPrefillWithPagedKVCacheKernel<128>(Params)", KernelCategory::kAttention, ""},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(probe::CategoryName(probe::ClassifyKernel(c.name)), std::string(probe::CategoryName(c.want))) << c.name;
    EXPECT_EQ(probe::CollectiveOf(c.name), c.collective) << c.name;
  }
  EXPECT_EQ(probe::CollectiveFromLabel("nccl:all_to_all"), "all_to_all");
  EXPECT_EQ(probe::CollectiveFromLabel("nccl:_all_gather_base"), "all_gather");
  EXPECT_EQ(probe::CollectiveFromLabel("_allgather_base"), "all_gather");
  EXPECT_EQ(probe::CollectiveFromLabel("nccl:_reduce_scatter_base"), "reduce_scatter");
  EXPECT_EQ(probe::CollectiveFromLabel("aten::add"), "");
  EXPECT_EQ(probe::CommunicationKind("void dpsk::ep::internode::notify_dispatch<false, 8>()", 4), "deepep_dispatch");
  EXPECT_EQ(probe::CommunicationKind("void dpsk::ep::internode::cached_notify<false>()", 4), "deepep_notify");
  EXPECT_EQ(probe::CommunicationKind("void deep_ep::internode_ll::combine<false, 7168>()", 4), "deepep_combine");
  EXPECT_EQ(probe::CommunicationKind("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)", 2), "all_gather");
}

TEST(Reader, MicrosecondsToNanosecondsExactly) {
  auto ns = [](const char* s) { return MicrosTextToNs(s, std::strlen(s)); };
  EXPECT_EQ(*ns("1669783687464181"), 1669783687464181000);
  EXPECT_EQ(*ns("4458676522690.655"), 4458676522690655);
  EXPECT_EQ(*ns("1365627949863.9535"), 1365627949863954);  // rounds the 4th decimal
  EXPECT_EQ(*ns("12.5"), 12500);
  EXPECT_EQ(*ns("-3"), -3000);
  EXPECT_EQ(*ns("1.5e3"), 1500000);
  EXPECT_FALSE(ns("abc").ok());
  EXPECT_FALSE(ns("").ok());
}

std::string WriteTemp(const std::string& name, const std::string& text, bool gzip) {
  const std::string path = ::testing::TempDir() + name;
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  } else {
    std::ofstream(path) << text;
  }
  return path;
}

// A small trace written the way Kineto writes them: a train_step annotation per step with nested
// forward_step/backward_step annotations (M4: those are not steps), launches on a thread, the
// kernels on two streams, an NCCL SendRecv kernel launched inside nccl:all_to_all, and the CPU
// running a step ahead of the GPU (so timestamps alone would put kernels in the wrong step).
std::string SmallTrace(int steps) {
  std::string ev;
  auto add = [&](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  int64_t corr = 100;
  for (int s = 0; s < steps; ++s) {
    const int64_t cpu = 1000 + s * 1000;  // us; each step's launches
    const int64_t gpu = 1500 + s * 1000;  // its kernels run 500 us later, into the next range
    add("{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"train_step\",\"pid\":1,\"tid\":\"main\",\"ts\":" +
        std::to_string(cpu) + ",\"dur\":900}");
    add("{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"forward_step\",\"pid\":1,\"tid\":\"main\",\"ts\":" +
        std::to_string(cpu + 10) + ",\"dur\":300}");
    add("{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"backward_step\",\"pid\":1,\"tid\":\"main\",\"ts\":" +
        std::to_string(cpu + 400) + ",\"dur\":300}");
    add("{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"nccl:all_to_all\",\"pid\":1,\"tid\":\"main\",\"ts\":" +
        std::to_string(cpu + 700) + ",\"dur\":50}");
    const struct { int64_t launch, start; const char* dur; const char* name; int stream; } k[] = {
        {cpu + 20, gpu, "300", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 7},
        {cpu + 30, gpu + 300, "100.5", "void at::native::vectorized_elementwise_kernel<4>()", 7},
        {cpu + 710, gpu + 350, "200", "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 20},
    };
    for (const auto& x : k) {
      add("{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":\"main\",\"ts\":" +
          std::to_string(x.launch) + ",\"dur\":5,\"args\":{\"correlation\":" + std::to_string(corr) + "}}");
      add("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" + std::string(x.name) + "\",\"pid\":0,\"tid\":" +
          std::to_string(x.stream) + ",\"ts\":" + std::to_string(x.start) + ",\"dur\":" + std::string(x.dur) +
          ",\"args\":{\"device\":0,\"stream\":" + std::to_string(x.stream) + ",\"correlation\":" +
          std::to_string(corr) + ",\"grid\":[1,2,3]}}");
      ++corr;
    }
  }
  return "{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":2,\"world_size\":4},\"traceEvents\":[\n" + ev + "\n]}";
}

TEST(Reader, SmallTraceStepsByCorrelationNestedRangesAndAllToAll) {
  for (bool gz : {false, true}) {
    const std::string path = WriteTemp(gz ? "small.json.gz" : "small.json", SmallTrace(6), gz);
    absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(path);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->rank, 2);
    EXPECT_EQ(t->step_ranges.size(), 6u);  // train_step only: forward_step/backward_step are not steps
    absl::StatusOr<v1::TraceSummary> s = AnalyzeKinetoTrace(*t);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->steps_size(), 5);
    // Kernels belong to the step that launched them: each window starts at that step's GEMM.
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s->steps(i).start_ns(), (1500 + i * 1000) * 1000) << i;
    EXPECT_NEAR(s->median().step_time_s(), 1e-3, 1e-12);
    EXPECT_NEAR(s->median().busy().gemm_s(), 300e-6, 1e-12);
    EXPECT_NEAR(s->median().busy().elementwise_s(), 100.5e-6, 1e-12);
    // SendRecv [350, 550): under the GEMM until 300? no: GEMM [0,300), elementwise [300,400.5):
    // overlapped 50.5 us, exposed 149.5 us.
    EXPECT_NEAR(s->median().exposed_communication_s(), 149.5e-6, 1e-12);
    EXPECT_NEAR(s->median().exposed_communication_by_collective_s().at("all_to_all"), 149.5e-6, 1e-12);
    EXPECT_NEAR(s->median().idle_s(), 1e-3 - 550e-6, 1e-12);
  }
}

// fuzz_kineto's finding (2026-11-25, FUZZ_SEED=1): "stream": 2.2e57 was cast to int64 (undefined
// behaviour). A stream, device or correlation that is not an int64 integer is left unknown.
TEST(Reader, OutOfRangeIdsAreUnknownNotCast) {
  const std::string json =
      R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "pid": 0,)"
      R"( "tid": 7, "ts": 1100.0, "dur": 2000.0, "args": {"stream": 2222222222222222222222222222222222222222222222222222222222,)"
      R"( "device": 1.5, "correlation": -1e300}}]})";
  absl::StatusOr<KinetoTrace> t = ReadKinetoTrace(WriteTemp("huge_ids.json", json, false));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->records.size(), 1u);
  EXPECT_EQ(t->records[0].stream, -1);
  EXPECT_EQ(t->records[0].device, -1);
  EXPECT_EQ(t->records[0].correlation, -1);
}

TEST(Reader, ClearErrorsForBadFiles) {
  EXPECT_EQ(ReadKinetoTrace("/nonexistent/trace.json").status().code(), absl::StatusCode::kNotFound);
  const std::string full = SmallTrace(3);
  // Truncated in the middle (plain and gzip): the error names the file and the byte.
  for (bool gz : {false, true}) {
    const std::string path = WriteTemp(gz ? "cut.json.gz" : "cut.json", full.substr(0, full.size() / 2), gz);
    absl::Status st = ReadKinetoTrace(path).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), ::testing::HasSubstr(path));
    EXPECT_THAT(st.message(), ::testing::HasSubstr("byte"));
  }
  // A gzip file cut short inside the compressed stream.
  {
    const std::string gz_path = WriteTemp("whole.json.gz", full, true);
    std::string bytes = Slurp(gz_path);
    const std::string path = WriteTemp("cutgz.json.gz", bytes.substr(0, bytes.size() / 2), false);
    absl::Status st = ReadKinetoTrace(path).status();
    EXPECT_FALSE(st.ok());
    EXPECT_THAT(st.message(), ::testing::HasSubstr(path));
  }
  const std::string bad_ts = WriteTemp(
      "badts.json",
      R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":"soon","dur":1,"args":{"stream":7}}]})", false);
  EXPECT_THAT(ReadKinetoTrace(bad_ts).status().message(), ::testing::HasSubstr("ts"));
  const std::string cpu_only = WriteTemp(
      "cpu.json", R"([{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":2}])", false);
  EXPECT_EQ(ReadKinetoTrace(cpu_only).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CompareTerms, LargestGapFirstWithTheCollectiveNamed) {
  v1::Prediction p;
  p.set_step_time_s(10);
  p.set_mfu(0.5);
  auto* b = p.mutable_breakdown();
  b->set_gemm_s(6);
  b->set_attention_s(1);
  b->set_elementwise_s(1);
  b->set_dp_comm_s(0.3);
  b->set_pipeline_bubble_s(0.5);
  v1::StepMeasurement m;
  m.set_step_time_s(12.5);
  m.mutable_busy()->set_gemm_s(6.4);
  m.mutable_busy()->set_attention_s(1.0);
  m.mutable_busy()->set_elementwise_s(1.1);
  m.set_idle_s(0.6);
  (*m.mutable_exposed_communication_by_collective_s())["all_gather"] = 2.1;
  (*m.mutable_exposed_communication_by_collective_s())["reduce_scatter"] = 0.2;
  const v1::Comparison c = CompareTerms(p, m, "t", "trace");
  ASSERT_GE(c.terms_size(), 4);
  EXPECT_EQ(c.terms(0).term(), "exposed all_reduce/all_gather/reduce_scatter (TP, DP)");
  EXPECT_NEAR(c.terms(0).measured_s(), 2.3, 1e-12);
  EXPECT_NEAR(c.terms(0).predicted_s(), 0.3, 1e-12);
  EXPECT_EQ(c.terms(1).term(), "gemm");
  EXPECT_NEAR(c.measured_mfu(), 0.4, 1e-12);
  EXPECT_THAT(c.largest_gap(), ::testing::HasSubstr("is 2.300 s measured vs 0.300 s predicted: parameter all-gather not overlapped"));
  for (int i = 1; i < c.terms_size(); ++i) {
    EXPECT_GE(std::fabs(c.terms(i - 1).difference_s()), std::fabs(c.terms(i).difference_s()));
  }
}

}  // namespace
}  // namespace stepcast::trace
