// The DeepSeek-V3 H800 training trace, module by module (issue 21 item 1): the model's per-layer
// time of each module against what the trace's kernels took
// (tests/data/real_data/deepseek_v3_modules.json, derived from deepseek-ai/profile-data @ 4496024
// by tests/data/real_data/deepseek_v3_modules.py, independently of the model). The run: EP 64 over
// 8 nodes, TP 1, 4,096 tokens per chunk, fp8 GEMMs (DeepGEMM), DeepEP with fp8 dispatch, DualPipe;
// every GEMM of the trace is launched on 112 of the H800's 132 SMs (grid 112: DeepEP keeps 20,
// DeepSeek-V3 report Sec. 3.2.2), so the model's GEMM times are taken at 132/112 of their alone
// time before they are compared.
//
// What is held within 15% (docs/VALIDATION.md "DeepSeek-V3 trace"): each module's forward GEMMs,
// the attention core forward and backward, and the forward MLP module as a whole. What is not,
// printed and documented rather than asserted: the backward GEMMs (the trace's wgrad runs
// 1.4-1.8x its forward GEMMs, DeepGEMM's fp8 wgrad path), the elementwise kernels (3-5x below
// the HBM roofline beside DeepEP), and dispatch / combine (the kernels' duration includes waiting
// for peers while they run beside the other chunk's compute; the model gives the transfer time).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/step_time.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

// One number of the derived JSON: modules[module].per_layer_us[category]. A tiny reader: the file
// is the project's own, written by deepseek_v3_modules.py with json.dump(indent=1).
double TraceUs(const std::string& json, const std::string& module, const std::string& category) {
  const size_t m = json.find("\"" + module + "\": {");
  if (m == std::string::npos) return -1;
  const size_t per = json.find("\"per_layer_us\"", m);
  const size_t key = json.find("\"" + category + "\":", per);
  if (per == std::string::npos || key == std::string::npos) return -1;
  return std::stod(json.substr(key + category.size() + 3));
}

class DeepSeekV3Trace : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(std::string(STEPCAST_SOURCE_DIR) + "/tests/data/real_data/deepseek_v3_modules.json");
    ASSERT_TRUE(in) << "tests/data/real_data/deepseek_v3_modules.json";
    std::stringstream ss;
    ss << in.rdbuf();
    json_ = ss.str();
    absl::StatusOr<Job> job = testing::JobFromYaml(R"(
model: deepseek-v3
hardware: h800
framework: megatron-core
cluster: {gpu_count: 64}
parallelism: {tp: 1, pp: 1, ep: 64, pp_schedule: dualpipe}
training: {seq_length: 4096, global_batch_size: 64, micro_batch_size: 1, precision: {gemm: fp8}, sharding: zero1,
           moe_dispatcher: deepep-fp8})");
    ASSERT_TRUE(job.ok()) << job.status();
    m_ = EstimateLayerModules(*job, true);
  }
  double Us(const std::string& module, const std::string& category) const { return TraceUs(json_, module, category); }
  std::string json_;
  LayerModuleTimes m_;
  static constexpr double kSmShare = 132.0 / 112.0;  // the trace's GEMMs on 112 of 132 SMs
};

TEST_F(DeepSeekV3Trace, ForwardGemmsAndAttentionPerModuleWithin15Percent) {
  // Forward GEMMs: attn(F) holds the MLA projections, the output projection and the router gate
  // (the trace launches the gate inside attn(F); the model counts it with the MLP: 4,096 x 256 x
  // 7,168, 15 GFLOP, about 20 us, under 1% of either module); mlp(F) the shared and routed
  // experts.
  const double attn_gemm = m_.attention_gemm_fwd_s * 1e6 * kSmShare, mlp_gemm = m_.mlp_gemm_fwd_s * 1e6 * kSmShare;
  EXPECT_NEAR(attn_gemm / Us("attn(F)", "gemm"), 1.0, 0.15) << attn_gemm << " us";
  EXPECT_NEAR(mlp_gemm / Us("mlp(F)", "gemm"), 1.0, 0.15) << mlp_gemm << " us";
  // Attention core (FlashAttention-3-style kernels; cuDNN rates of the megatron-core preset):
  // forward is attn(F)'s attention, backward attn(B)'s.
  const double core_f = (m_.attention_fwd_s - m_.attention_gemm_fwd_s) * 1e6;
  EXPECT_GT(core_f, 0);
  // The model's attention module minus its GEMMs is the core plus elementwise; the core alone is
  // the FLOPs at the rate: 2 x 128 heads x 4096^2 x (192 + 128) x 1/2 (causal).
  const double core_flops = 2.0 * 128 * 4096.0 * 4096 * (192 + 128) * 0.5;
  const double core_fwd_us = Us("attn(F)", "attention"), core_bwd_us = Us("attn(B)", "attention");
  ASSERT_GT(core_fwd_us, 0);
  ASSERT_GT(core_bwd_us, 0);
  // The preset's Hopper cuDNN rate at 4k, causal: the model's attention core time.
  absl::StatusOr<Job> job = testing::JobFromYaml(R"(
model: deepseek-v3
hardware: h800
framework: megatron-core
cluster: {gpu_count: 64}
parallelism: {tp: 1, pp: 1, ep: 64}
training: {seq_length: 4096, global_batch_size: 64, micro_batch_size: 1, precision: {gemm: fp8}})");
  ASSERT_TRUE(job.ok());
  const AttentionKernel::Lookup r = job->framework.attention.Rate("hopper", DType::kBF16, 4096, true);
  ASSERT_TRUE(r.found);
  EXPECT_NEAR(core_flops / r.forward_flops_per_s * 1e6 / core_fwd_us, 1.0, 0.15);
  EXPECT_NEAR(2.5 * core_flops / r.backward_flops_per_s * 1e6 / core_bwd_us, 1.0, 0.15);
  // The forward MLP module as a whole (GEMMs on 112 SMs, elementwise at the HBM rate).
  const double mlp_f = m_.mlp_fwd_s * 1e6 + (kSmShare - 1) * m_.mlp_gemm_fwd_s * 1e6;
  EXPECT_NEAR(mlp_f / Us("mlp(F)", "total"), 1.0, 0.15) << mlp_f << " us";
}

TEST_F(DeepSeekV3Trace, WhatTheModelDoesNotHoldIsPrintedWithItsReason) {
  // Not asserted (see the file comment); printed so that docs/VALIDATION.md's table is this
  // test's output.
  const double attn_f = m_.attention_fwd_s * 1e6 + (kSmShare - 1) * m_.attention_gemm_fwd_s * 1e6;
  const double attn_b = m_.attention_bwd_s * 1e6 + (kSmShare - 1) * m_.attention_gemm_bwd_s * 1e6;
  const double mlp_f = m_.mlp_fwd_s * 1e6 + (kSmShare - 1) * m_.mlp_gemm_fwd_s * 1e6;
  const double mlp_b = m_.mlp_bwd_s * 1e6 + (kSmShare - 1) * m_.mlp_gemm_bwd_s * 1e6;
  const double trace_attn_b = Us("attn(B)", "total") + Us("attn(W)", "total");
  const double trace_mlp_b = Us("mlp(B)", "total") + Us("mlp(W)", "total");
  const double trace_ep_f = Us("dispatch(F)", "total") + Us("combine(F)", "total");
  const double trace_ep_b = Us("dispatch(B)", "total") + Us("combine(B)", "total");
  std::printf("module          model_us   trace_us   model/trace\n");
  auto row = [](const char* name, double model, double trace) {
    std::printf("%-14s %9.0f %10.0f %10.2f\n", name, model, trace, model / trace);
  };
  row("attn F", attn_f, Us("attn(F)", "total"));
  row("attn B+W", attn_b, trace_attn_b);
  row("mlp F", mlp_f, Us("mlp(F)", "total"));
  row("mlp B+W", mlp_b, trace_mlp_b);
  row("bwd gemm attn", m_.attention_gemm_bwd_s * 1e6 * kSmShare, Us("attn(B)", "gemm") + Us("attn(W)", "gemm"));
  row("bwd gemm mlp", m_.mlp_gemm_bwd_s * 1e6 * kSmShare, Us("mlp(B)", "gemm") + Us("mlp(W)", "gemm"));
  row("dispatch+comb F", m_.ep_transfer_s * 1e6, trace_ep_f);
  row("dispatch+comb B", m_.ep_transfer_s * 1e6, trace_ep_b);
  // The transfer time is a lower bound of the kernels' duration: they wait for their peers.
  EXPECT_LT(m_.ep_transfer_s * 1e6, trace_ep_f);
  EXPECT_LT(m_.ep_transfer_s * 1e6, trace_ep_b);
  // Under DualPipe the transfers hide behind the other chunk's compute: nothing exposed, only the
  // contention of the 20 SMs DeepEP keeps.
  EXPECT_LT(m_.ep_fwd_s + m_.ep_bwd_s, 0.5 * m_.ep_transfer_s);
}

// The host cost of an eager layer (framework.proto LaunchModel): every eager PyTorch preset's
// kernel_launch_overhead_s is the trace's CPU time per GPU record of its compute modules (attn,
// mlp: 39.7 ms over 943 records), and Megatron's looped_launch_overhead_s (Transformer Engine's
// per-expert C++ loop) the mean launch call in them (deepseek_v3_modules.py, "host").
TEST_F(DeepSeekV3Trace, EagerHostCostsAreTheTracesFigures) {
  const size_t at = json_.find("\"compute_modules\": {");
  ASSERT_NE(at, std::string::npos);
  auto number = [&](const std::string& key) {
    const size_t k = json_.find("\"" + key + "\":", at);
    return k == std::string::npos ? -1.0 : std::stod(json_.substr(k + key.size() + 3));
  };
  const double per_record_us = number("cpu_us_per_record"), launch_call_us = number("launch_api_us_mean");
  EXPECT_NEAR(number("cpu_us") / number("gpu_records"), per_record_us, 1e-9);
  EXPECT_NEAR(per_record_us, 42.07, 0.01);  // 39,672 us / 943 records
  for (const char* name : {"megatron-core", "nemo", "megatron-bridge", "megatron-lm-2021", "megatron-lm-2022", "deepspeed",
                           "torchtitan", "pytorch-fsdp1", "pytorch-fsdp2", "llm-foundry", "nemo-automodel",
                           "colossalai-gemini", "generic"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<Job> job = testing::JobFromYaml(absl::StrCat(R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 8, micro_batch_size: 1}
framework: )", name));
    ASSERT_TRUE(job.ok()) << job.status();
    // The preset rounds to 2 significant figures.
    EXPECT_NEAR(job->framework.launch.kernel_launch_overhead_s * 1e6, per_record_us, 0.5);
    const std::string n = name;
    if (n == "megatron-core" || n == "nemo" || n == "megatron-bridge") {
      EXPECT_NEAR(job->framework.launch.looped_launch_overhead_s * 1e6, launch_call_us, 0.05);
    }
  }
}

}  // namespace
}  // namespace stepcast
