// Hybrid Mamba-2 models (ModelShape.hybrid_layer_pattern): the checks that do not need a
// published run. A hybrid whose layers alternate attention '*' and MLP '-' is a transformer cut
// in half-layers, so it must predict what the transformer with half the layers predicts (the
// step model, memory and FLOPs each cost a hybrid's layer kinds separately: this holds only if
// every per-sub-layer term adds back up to the transformer layer's). Then the Mamba-2 mixer's
// own terms against its definition, the TP / CP rules of Megatron-Core's mixer, and the errors.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/flops.h"
#include "core/interval.h"
#include "core/memory.h"
#include "core/predict.h"
#include "core/step_time.h"
#include "proto/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

// A Llama-like transformer of `layers` layers, or the same as a hybrid of 2 x layers
// alternating '*' and '-' (`moe`: '*' and 'E', with 8 experts top-2).
std::string Shape(int layers, bool hybrid, bool moe) {
  std::string pattern;
  for (int i = 0; i < layers; ++i) pattern += moe ? "*E" : "*-";
  std::string s = absl::StrCat("{layers: ", hybrid ? 2 * layers : layers,
                               ", hidden_size: 4096, attention_heads: 32, kv_heads: 8, ffn_hidden_size: 14336, "
                               "ffn_type: swiglu, vocab_size: 128256, norm_type: rmsnorm");
  if (hybrid) absl::StrAppend(&s, ", hybrid_layer_pattern: '", pattern, "'");
  if (moe) absl::StrAppend(&s, ", moe: {routed_experts: 8, top_k: 2, expert_ffn_hidden_size: 14336}");
  return s + "}";
}

absl::StatusOr<Job> JobOf(const std::string& shape, const std::string& parallelism, int gpus,
                          const std::string& training = "") {
  return testing::JobFromYaml(absl::StrCat("model: {shape: ", shape, "}\nhardware: h100-sxm\nframework: megatron-core\n",
                                           "cluster: {gpu_count: ", gpus, "}\nparallelism: ", parallelism,
                                           "\ntraining: {seq_length: 4096, global_batch_size: 64, sharding: zero1",
                                           training, "}"));
}

TEST(Hybrid, AlternatingAttentionAndMlpIsTheTransformer) {
  for (const std::string par : {"{tp: 2, pp: 2, sequence_parallel: true}", "{tp: 1, pp: 1}",
                                "{tp: 4, pp: 2, vpp: 2, sequence_parallel: true}"}) {
    SCOPED_TRACE(par);
    absl::StatusOr<Job> tf = JobOf(Shape(16, false, false), par, 16);
    absl::StatusOr<Job> hy = JobOf(Shape(16, true, false), par, 16);
    ASSERT_TRUE(tf.ok()) << tf.status();
    ASSERT_TRUE(hy.ok()) << hy.status();
    ASSERT_TRUE(hy->model.Hybrid());
    absl::StatusOr<Prediction> a = Predict(*tf), b = Predict(*hy);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NEAR(b->step_time_s / a->step_time_s, 1.0, 1e-9);
    EXPECT_NEAR(b->memory.total_bytes / a->memory.total_bytes, 1.0, 1e-9);
    EXPECT_NEAR(b->model_flops_per_step / a->model_flops_per_step, 1.0, 1e-12);
    EXPECT_NEAR(b->parameters.total / a->parameters.total, 1.0, 1e-12);
    EXPECT_NEAR(b->breakdown.tp_comm_s / std::max(1e-30, a->breakdown.tp_comm_s), a->breakdown.tp_comm_s > 0 ? 1.0 : 0.0,
                1e-9);
  }
}

TEST(Hybrid, AlternatingAttentionAndMoeIsTheMoeTransformer) {
  // The same with MoE blocks, EP 4 (the host launch floor of an MoE layer, which waits for its
  // token counts, is that of the pair with the layer before it).
  absl::StatusOr<Job> tf = JobOf(Shape(8, false, true), "{tp: 1, ep: 4}", 8);
  absl::StatusOr<Job> hy = JobOf(Shape(8, true, true), "{tp: 1, ep: 4}", 8);
  ASSERT_TRUE(tf.ok()) << tf.status();
  ASSERT_TRUE(hy.ok()) << hy.status();
  absl::StatusOr<Prediction> a = Predict(*tf), b = Predict(*hy);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->step_time_s / a->step_time_s, 1.0, 1e-9);
  EXPECT_GT(a->breakdown.launch_overhead_s, 0);
  EXPECT_NEAR(b->breakdown.launch_overhead_s / a->breakdown.launch_overhead_s, 1.0, 1e-9);
  EXPECT_NEAR(b->memory.total_bytes / a->memory.total_bytes, 1.0, 1e-9);
  EXPECT_NEAR(b->parameters.active / a->parameters.active, 1.0, 1e-12);
  // A small model whose attention half alone is launch-bound too: the pair's floor, not the sum
  // of the two halves' floors.
  const std::string small = "{layers: 8, hidden_size: 512, attention_heads: 8, kv_heads: 8, ffn_hidden_size: 1024, "
                            "ffn_type: swiglu, vocab_size: 32000, norm_type: rmsnorm, moe: {routed_experts: 8, top_k: 2, "
                            "expert_ffn_hidden_size: 1024}";
  std::string pattern;
  for (int i = 0; i < 8; ++i) pattern += "*E";
  absl::StatusOr<Job> tf_small = JobOf(small + "}", "{tp: 1, ep: 4}", 8, ", seq_length: 512");
  absl::StatusOr<Job> hy_small =
      JobOf(absl::StrCat("{layers: 16", small.substr(small.find(',')), ", hybrid_layer_pattern: '", pattern, "'}"),
            "{tp: 1, ep: 4}", 8, ", seq_length: 512");
  ASSERT_TRUE(tf_small.ok()) << tf_small.status();
  ASSERT_TRUE(hy_small.ok()) << hy_small.status();
  absl::StatusOr<Prediction> c = Predict(*tf_small), d = Predict(*hy_small);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_GT(c->breakdown.launch_overhead_s, 0.3 * c->step_time_s);
  EXPECT_NEAR(d->step_time_s / c->step_time_s, 1.0, 1e-9);
}

// Megatron-Core's EP overlap (combined_1f1b.py) builds its schedule from
// GPTModel.build_schedule_plan; MambaModel has none, so a hybrid with EP cannot run it: refused,
// naming the field. The transformer of the same blocks can.
TEST(Hybrid, EpOverlapIsRefusedForAHybrid) {
  absl::StatusOr<Job> hy = JobOf(Shape(8, true, true), "{tp: 1, ep: 4}", 8, ", overlap_ep_comm: true");
  ASSERT_FALSE(hy.ok());
  EXPECT_NE(hy.status().message().find("training.overlap_ep_comm"), std::string::npos) << hy.status();
  EXPECT_NE(hy.status().message().find("build_schedule_plan"), std::string::npos) << hy.status();
  absl::StatusOr<Job> tf = JobOf(Shape(8, false, true), "{tp: 1, ep: 4}", 8, ", overlap_ep_comm: true");
  EXPECT_TRUE(tf.ok()) << tf.status();
}

TEST(Hybrid, MambaLayerFlopsAndTermsFromItsDefinition) {
  // Nemotron-H 8B: 24 Mamba-2 layers of d_inner 8192, state 128: Megatron's scan count
  // 7 d_inner N per token and layer on top of the GEMMs (2 per weight) and 4 attention layers'
  // cores (2 s a (d_qk + d_v) each).
  const ModelShape m = *testing::BuiltinCatalog().FindModel("nemotron-h-8b");
  const double ssd = ForwardSsdFlopsPerToken(m);
  EXPECT_DOUBLE_EQ(ssd, 7.0 * 8192 * 128 * 24);
  EXPECT_DOUBLE_EQ(ForwardAttentionFlopsPerToken(m, 8192), 2.0 * 8192 * 32 * 256 * 4);
  const ParameterCounts p = CountParameters(m);
  // in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128) + out_proj 8192 x 4096.
  EXPECT_DOUBLE_EQ(p.mamba_layer_gemm, 4096.0 * 18560 + 8192.0 * 4096);
  EXPECT_DOUBLE_EQ(ForwardGemmFlopsPerToken(m),
                   2.0 * (24 * p.mamba_layer_gemm + 4 * p.attention_gemm + 24 * 2.0 * 4096 * 21504 + 131072.0 * 4096));
}

TEST(Hybrid, MambaCostGrowsWithItsStateAndNotWithTheSequencesAttention) {
  // The Mamba mixer is linear in the sequence: doubling the sequence at half the batch keeps a
  // pure-Mamba model's step (within its attention-free terms), where attention grows.
  auto step = [](const std::string& pattern, int seq, int batch) {
    const std::string shape = absl::StrCat(
        "{layers: ", pattern.size(), ", hidden_size: 2048, attention_heads: 16, kv_heads: 8, ffn_hidden_size: 8192, "
        "ffn_type: squared_relu, vocab_size: 32000, norm_type: rmsnorm, hybrid_layer_pattern: '", pattern, "'}");
    auto job = testing::JobFromYaml(absl::StrCat("model: {shape: ", shape,
                                                 "}\nhardware: h100-sxm\nframework: megatron-core\ncluster: {gpu_count: 1}\n"
                                                 "training: {seq_length: ",
                                                 seq, ", global_batch_size: ", batch, ", micro_batch_size: 1}"));
    EXPECT_TRUE(job.ok()) << job.status();
    return EstimateStepTime(*job).step_time_s;
  };
  const double mamba_4k = step("M-M-M-M-", 4096, 8), mamba_16k = step("M-M-M-M-", 16384, 2);
  const double attn_4k = step("*-*-*-*-", 4096, 8), attn_16k = step("*-*-*-*-", 16384, 2);
  EXPECT_NEAR(mamba_16k / mamba_4k, 1.0, 0.05);  // the GEMMs' shapes change a little
  EXPECT_GT(attn_16k / attn_4k, 1.3);
  // A larger state costs more (the scan's matmuls and chunk states grow with it).
  auto with_state = [&](int state) {
    const std::string shape = absl::StrCat(
        "{layers: 8, hidden_size: 2048, attention_heads: 16, ffn_hidden_size: 8192, ffn_type: squared_relu, "
        "vocab_size: 32000, hybrid_layer_pattern: 'M-M-M-M-', mamba: {state_dim: ",
        state, "}}");
    auto job = testing::JobFromYaml(absl::StrCat("model: {shape: ", shape,
                                                 "}\nhardware: h100-sxm\ncluster: {gpu_count: 1}\n"
                                                 "training: {seq_length: 4096, global_batch_size: 8}"));
    EXPECT_TRUE(job.ok()) << job.status();
    return EstimateStepTime(*job).step_time_s;
  };
  EXPECT_GT(with_state(256), with_state(64));
}

TEST(Hybrid, TheScanRateIsTheProfilesAndTheIntervalHoldsTheTritonRate) {
  // The scan at the profile's rate: on a pure-Mamba model the attention term is the scan alone, so
  // a quarter of the rate (both compute-bound) is four times its seconds; the interval's upper end
  // holds the step at kSsdTritonFlopsPerS and says so.
  auto job = testing::JobFromYaml(R"(
model: {shape: {layers: 8, hidden_size: 4096, attention_heads: 32, kv_heads: 8, ffn_hidden_size: 16384,
  ffn_type: squared_relu, vocab_size: 131072, norm_type: rmsnorm, hybrid_layer_pattern: 'MMMMMMMM'}}
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 8})");
  ASSERT_TRUE(job.ok()) << job.status();
  Job slow = *job, slower = *job;
  slow.profile.ssd_flops_per_s = 40e12;
  slower.profile.ssd_flops_per_s = 10e12;
  const double a = EstimateStepTime(slow).breakdown.attention_s, b = EstimateStepTime(slower).breakdown.attention_s;
  EXPECT_GT(a, 0);
  EXPECT_NEAR(b / a, 4.0, 1e-9);
  absl::StatusOr<Prediction> p = Predict(*job);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->interval.available);
  EXPECT_TRUE(p->interval.hybrid);
  EXPECT_GT(p->interval.ssd_slow_step_ratio, 1.0);
  Job triton = *job;
  triton.profile.ssd_flops_per_s = kSsdTritonShare * kSsdPeakFraction * job->hardware.PeakFlops(DType::kBF16);
  EXPECT_NEAR(p->interval.ssd_slow_step_ratio, EstimateStepTime(triton).step_time_s / p->step_time_s, 1e-12);
  bool said = false;
  for (const std::string& n : IntervalNotes(p->interval)) said |= absl::StrContains(n, "15.1 TFLOP/s");
  // On another GPU the share, not the absolute rate, carries over (GB200: 2.5x the H100's peak).
  Job gb200 = *testing::JobFromYaml(R"(
model: {shape: {layers: 8, hidden_size: 4096, attention_heads: 32, kv_heads: 8, ffn_hidden_size: 16384,
  ffn_type: squared_relu, vocab_size: 131072, norm_type: rmsnorm, hybrid_layer_pattern: 'MMMMMMMM'}}
hardware: gb200
framework: megatron-core
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 8})");
  absl::StatusOr<Prediction> g = Predict(gb200);
  ASSERT_TRUE(g.ok()) << g.status();
  Job gb200_slow = gb200;
  gb200_slow.profile.ssd_flops_per_s = kSsdTritonShare * kSsdPeakFraction * gb200.hardware.PeakFlops(DType::kBF16);
  EXPECT_NEAR(g->interval.ssd_slow_step_ratio, EstimateStepTime(gb200_slow).step_time_s / g->step_time_s, 1e-12);
  // A profile's own scan rate (hardware.proto RateProfile.ssd_flops_per_s) is used and not widened.
  Job measured = *job;
  measured.profile.ssd_flops_per_s = 50e12;
  measured.profile.ssd_source = "a test";
  absl::StatusOr<Prediction> q = Predict(measured);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->interval.ssd_slow_step_ratio, 1.0);
  EXPECT_GT(q->step_time_s, p->step_time_s);
  EXPECT_TRUE(said);
}

TEST(Hybrid, MegatronsMixerRulesAreTheJobsErrors) {
  // Nemotron-H 8B: 128 heads, 8 groups: TP 16 splits a group (mamba_mixer.py asserts
  // ngroups % tp == 0); CP of Mamba layers (mamba_context_parallel.py) is not modelled.
  auto job = [](const std::string& par, int gpus) {
    return testing::JobFromYaml(absl::StrCat("model: nemotron-h-8b\nhardware: h100-sxm\ncluster: {gpu_count: ", gpus,
                                             "}\nparallelism: ", par,
                                             "\ntraining: {seq_length: 8192, global_batch_size: 64}"));
  };
  EXPECT_THAT(job("{tp: 16}", 16).status().message(), HasSubstr("num_groups 8"));
  EXPECT_THAT(job("{tp: 1, cp: 2}", 2).status().message(), HasSubstr("parallelism.cp"));
  absl::StatusOr<Job> tp8 = job("{tp: 8, sequence_parallel: true}", 8);
  ASSERT_TRUE(tp8.ok()) << tp8.status();
  EXPECT_TRUE(Predict(*tp8).ok()) << Predict(*tp8).status();
}

TEST(Hybrid, PatternErrorsNameTheFieldAndTheSymbol) {
  auto err = [](const std::string& extra) {
    auto job = JobOf(absl::StrCat("{layers: 4, hidden_size: 1024, attention_heads: 8, vocab_size: 32000, ffn_type: gelu, ",
                                  extra, "}"),
                     "{tp: 1}", 1);
    return job.ok() ? std::string("ok") : std::string(job.status().message());
  };
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*G-'"), HasSubstr("'G' at position 2 is a Gated DeltaNet layer"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*|-'"), HasSubstr("pipeline-stage mark"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*-'"), HasSubstr("model.shape.layers: 4 is not the hybrid_layer_pattern's length 3"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*-E'"), HasSubstr("model.shape.moe.routed_experts"));
  EXPECT_THAT(err("mamba: {state_dim: 64}"), HasSubstr("model.shape.mamba: needs hybrid_layer_pattern"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*-M', mamba: {num_heads: 12}"), HasSubstr("model.shape.mamba.num_groups"));
  EXPECT_THAT(err("hybrid_layer_pattern: 'M*-M', mamba: {state_dim: 4194304}"), HasSubstr("mamba.state_dim: 4194304 is above 2^20"));
  EXPECT_THAT(err("hybrid_layer_pattern: '**--', mamba: {state_dim: 64}"), HasSubstr("no Mamba ('M') layer"));
  EXPECT_EQ(err("hybrid_layer_pattern: 'M*-M'"), "ok");
}

TEST(Hybrid, AJsonJobCarriesThePatternAndTheMixer) {
  // The service and `--json` read the same message (JobSpec JSON): the pattern and the mixer's
  // fields arrive, and the prediction's model echoes them.
  v1::JobSpec spec;
  ASSERT_TRUE(ParseMessage(R"({"model": {"shape": {"layers": 4, "hidden_size": 1024, "attention_heads": 8,
      "ffn_type": "FFN_TYPE_SQUARED_RELU", "vocab_size": 32000, "hybrid_layer_pattern": "M*-M",
      "mamba": {"state_dim": 64, "num_heads": 32}}}, "hardware": {"preset": "h100-sxm"},
      "cluster": {"gpu_count": 1}, "training": {"seq_length": 2048, "global_batch_size": 4}})",
                           SpecFormat::kJson, "job.json", &spec)
                  .ok());
  absl::StatusOr<Job> job = JobFromSpec(spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->model.hybrid_layer_pattern, "M*-M");
  EXPECT_EQ(job->model.mamba.state_dim, 64);
  EXPECT_EQ(job->model.mamba.num_heads, 32);
  EXPECT_EQ(job->model.mamba.num_groups, 8);  // Megatron-Core's default
  const v1::ModelShape back = ModelShapeToProto(job->model);
  EXPECT_EQ(back.hybrid_layer_pattern(), "M*-M");
  EXPECT_EQ(back.mamba().num_heads(), 32);
  EXPECT_TRUE(Predict(*job).ok());
}

TEST(Hybrid, PublishedHybridRunsFitInMemory) {
  // Megatron-Bridge's Nemotron 3 Nano on 16 DGX-H100 (26.02.01: FP8, GBS 1024, MBS 1, seq 8192,
  // TP 1 EP 8) and Nemotron5-H 56B's H100 recipe (nemotronh_56b_pretrain_64gpu_h100_fp8cs_config:
  // TP 8, SP, MBS 1, seq 8192) ran: each fits.
  auto nano = testing::JobFromYaml(R"(
model: nemotron-3-nano-30b-a3b
hardware: h100-sxm
framework: megatron-bridge
cluster: {gpu_count: 16}
parallelism: {tp: 1, ep: 8}
training: {seq_length: 8192, global_batch_size: 1024, micro_batch_size: 1, precision: {gemm: fp8}})");
  ASSERT_TRUE(nano.ok()) << nano.status();
  absl::StatusOr<Prediction> p = Predict(*nano);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->memory.fits) << p->memory.total_bytes / (1 << 30) << " GiB";
  const ModelShape h8 = *testing::BuiltinCatalog().FindModel("nemotron-h-8b");
  std::string shape56 = R"({layers: 118, hidden_size: 8192, attention_heads: 64, kv_heads: 8, head_dim: 128,
    ffn_hidden_size: 32768, ffn_type: squared_relu, vocab_size: 131072, norm_type: rmsnorm,
    hybrid_layer_pattern: 'M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-',
    mamba: {state_dim: 256, head_dim: 64, num_groups: 8, num_heads: 256}})";
  auto h56 = testing::JobFromYaml(absl::StrCat("model: {shape: ", shape56, R"(}
hardware: h100-sxm
framework: megatron-bridge
cluster: {gpu_count: 64}
parallelism: {tp: 8, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 192, micro_batch_size: 1, precision: {gemm: fp8}})"));
  ASSERT_TRUE(h56.ok()) << h56.status();
  absl::StatusOr<Prediction> q = Predict(*h56);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_NEAR(q->parameters.total, 56.3e9, 0.1e9);
  EXPECT_TRUE(q->memory.fits) << q->memory.total_bytes / (1 << 30) << " GiB";
  EXPECT_EQ(h8.HybridCounts().mamba, 24);
}

}  // namespace
}  // namespace stepcast
