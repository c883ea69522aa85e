// FP8 scaling recipes (job.proto PrecisionSpec.fp8_recipe; docs/MODEL.md "FP8 recipes"): the job
// field and its defaults, what each recipe costs in the step model, and how the launch importers
// and the validation harness read it. The recipes' costs themselves are checked against
// Transformer Engine's own benchmark in tests/gemm_model_test.cc (TeGemmProfilingPerLayerTimes).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/gemm_model.h"
#include "core/step_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/codec.h"
#include "proto/launch_args.h"
#include "proto/published_runs.h"
#include "proto/torchtitan_args.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

std::string Fp8Job(const std::string& hardware, const std::string& framework, const std::string& recipe) {
  std::string y = "model: llama3-8b\nhardware: " + hardware + "\ncluster: {gpu_count: 8}\n";
  if (!framework.empty()) y += "framework: " + framework + "\n";
  y += "training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1, precision: {gemm: fp8";
  if (!recipe.empty()) y += ", fp8_recipe: " + recipe;
  return y + "}}\n";
}

const AssumedInput* Assumed(const Job& job, const std::string& field) {
  for (const AssumedInput& a : *job.assumed) {
    if (a.field == field) return &a;
  }
  return nullptr;
}

// Unstated, the recipe is the framework's documented default (Megatron-Core's TransformerConfig
// fp8_recipe "delayed"; Megatron-Bridge's performance scripts fp8_cs = tensorwise), else
// per-tensor current scaling, each listed as assumed with its source.
TEST(Fp8Recipe, UnstatedIsTheFrameworksDefaultAndAssumed) {
  struct Case {
    const char* framework;
    Fp8Recipe recipe;
    const char* source;
  } cases[] = {
      {"", Fp8Recipe::kDelayed, "transformer_config.py"},
      {"nemo", Fp8Recipe::kDelayed, "mixed_precision.py"},
      {"megatron-bridge", Fp8Recipe::kTensorwise, "fp8_cs"},
      {"llm-foundry", Fp8Recipe::kDelayed, "DelayedScaling"},
      {"torchtitan", Fp8Recipe::kTensorwise, "torchao"},
      {"paxml", Fp8Recipe::kDelayed, "PR-46"},  // JAX-Toolbox's Paxml te_helper: DelayedScaling
      {"maxtext", Fp8Recipe::kTensorwise, "stepcast fallback"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.framework);
    auto job = testing::JobFromYaml(Fp8Job("h100-sxm", c.framework, ""));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->training.precision.fp8_recipe, c.recipe);
    const AssumedInput* a = Assumed(*job, "training.precision.fp8_recipe");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->value, Fp8RecipeName(c.recipe));
    EXPECT_THAT(a->source, HasSubstr(c.source));
  }
  // Stated: read, not assumed; a bf16 job has no recipe to assume.
  auto stated = testing::JobFromYaml(Fp8Job("b200", "", "mxfp8"));
  ASSERT_TRUE(stated.ok()) << stated.status();
  EXPECT_EQ(stated->training.precision.fp8_recipe, Fp8Recipe::kMxfp8);
  EXPECT_EQ(Assumed(*stated, "training.precision.fp8_recipe"), nullptr);
  auto bf16 = testing::JobFromYaml(
      "model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 8192, global_batch_size: 64}\n");
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(Assumed(*bf16, "training.precision.fp8_recipe"), nullptr);
}

TEST(Fp8Recipe, BadRecipesNameTheFieldAndReason) {
  struct Case {
    std::string yaml, expect;
  } cases[] = {
      {Fp8Job("h100-sxm", "", "mxfp8"), "training.precision.fp8_recipe: mxfp8 needs a Blackwell GPU"},
      {Fp8Job("b200", "", "blockwise"), "training.precision.fp8_recipe: 'blockwise' (128x128 / 1x128 block scaling) is not modelled"},
      {Fp8Job("b200", "", "e4m3"), "training.precision.fp8_recipe: 'e4m3' is not one of: tensorwise, delayed, mxfp8"},
      {"model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 8192, "
       "global_batch_size: 64, precision: {gemm: bf16, fp8_recipe: delayed}}\n",
       "training.precision.fp8_recipe: 'delayed' is set but training.precision.gemm is bf16, not fp8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    auto job = testing::JobFromYaml(c.yaml);
    ASSERT_FALSE(job.ok());
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(c.expect));
  }
}

// The step model: MXFP8's GEMMs at kMxfp8GemmRateFraction of per-tensor fp8's (the reference
// profiles have no measured fp8 shapes, so every GEMM is analytic and the ratio is exact on the
// compute-bound ones), and each recipe's quantization traffic in the elementwise time: delayed
// below tensorwise by the amax pass, MXFP8 between them.
TEST(Fp8Recipe, StepCostsFollowTheRecipe) {
  auto step = [](const std::string& recipe) {
    auto job = testing::JobFromYaml(Fp8Job("b200", "megatron-core", recipe));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? EstimateStepTime(*job) : StepTimeEstimate{};
  };
  const StepTimeEstimate tw = step("tensorwise"), de = step("delayed"), mx = step("mxfp8");
  ASSERT_GT(tw.breakdown.gemm_s, 0);
  EXPECT_DOUBLE_EQ(de.breakdown.gemm_s, tw.breakdown.gemm_s);
  const double ratio = mx.breakdown.gemm_s / tw.breakdown.gemm_s;
  EXPECT_GT(ratio, 1.0 + 0.8 * (1 / kMxfp8GemmRateFraction - 1));
  EXPECT_LE(ratio, 1 / kMxfp8GemmRateFraction + 1e-9);
  EXPECT_LT(de.breakdown.elementwise_s, mx.breakdown.elementwise_s);
  EXPECT_LT(mx.breakdown.elementwise_s, tw.breakdown.elementwise_s);
  // Per element of a bf16 tensor with both copies: on Hopper (a transposed copy) 6, 4 and
  // 4 1/16 bytes; on Blackwell (per-tensor data reused for the non-TN backward GEMMs) 5, 3 and
  // 4 1/16; one copy (a weight TE quantizes row-wise only) 5, 3, 3 1/32.
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kTensorwise, 2, true, true), 6);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kDelayed, 2, true, true), 4);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kMxfp8, 2, true, true), 4.0625);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kTensorwise, 2, true, false), 5);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kDelayed, 2, true, false), 3);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kMxfp8, 2, true, false), 4.0625);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kTensorwise, 2, false, true), 5);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kDelayed, 2, false, true), 3);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kMxfp8, 2, false, true), 3.03125);
  // torchao's row-wise, with its own casts on any GPU: 8 bytes (its roofline_utils.py: 5 + 3).
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kRowwise, 2, true, true), 8);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytesPerElement(Fp8Recipe::kRowwise, 2, true, false), 8);
}

// The quantization traffic in the step by GPU generation: the elementwise time an fp8 job adds
// to its bf16 twin is its quantization alone, so tensorwise's over delayed's is (2e + 2) / (e + 2)
// = 1.5 on Hopper (a transposed copy each) and (2e + 1) / (e + 1) / 0.742 = 2.246 on Blackwell
// (none; TE's current-scaling quantize kernels at 0.742 of the HBM rate there).
TEST(Fp8Recipe, QuantizationTrafficFollowsTheGpuGeneration) {
  auto elementwise_s = [](const char* hardware, const char* precision) {
    auto job = testing::JobFromYaml(absl::StrCat(
        "model: llama3-8b\nhardware: ", hardware, "\ncluster: {gpu_count: 8}\nframework: megatron-core\n"
        "training: {seq_length: 4096, global_batch_size: 64, precision: {", precision, "}}\n"));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? EstimateStepTime(*job).breakdown.elementwise_s : 0.0;
  };
  for (const auto& [hardware, ratio] : {std::pair<const char*, double>{"h100-sxm", 1.5},
                                        {"b200", 5.0 / 3 / Fp8QuantizeBandwidthFraction(Fp8Recipe::kTensorwise, true)}}) {
    SCOPED_TRACE(hardware);
    const double bf16 = elementwise_s(hardware, "gemm: bf16");
    const double tensorwise = elementwise_s(hardware, "gemm: fp8, fp8_recipe: tensorwise") - bf16;
    const double delayed = elementwise_s(hardware, "gemm: fp8, fp8_recipe: delayed") - bf16;
    ASSERT_GT(delayed, 0);
    EXPECT_NEAR(tensorwise / delayed, ratio, 1e-6 * ratio);
  }
  EXPECT_NEAR(Fp8QuantizeBandwidthFraction(Fp8Recipe::kTensorwise, true), 0.742, 0.001);
}

// torchao's row-wise recipe: the forward GEMMs at kRowwiseGemmRateFraction of per-tensor fp8's, the
// backward GEMMs per-tensor (unit scales) with their outputs rescaled afterwards, and its casts'
// traffic (torchao/float8/config.py, float8_ops.py, float8_linear.py).
TEST(Fp8Recipe, RowwiseScalesTheForwardGemmsAndRescalesTheBackward) {
  auto step = [](const char* recipe) {
    auto job = testing::JobFromYaml(absl::StrCat(
        "model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nframework: torchtitan\n"
        "training: {seq_length: 8192, global_batch_size: 8, micro_batch_size: 1, precision: {gemm: fp8, fp8_recipe: ", recipe, "}}\n"));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? EstimateStepTime(*job) : StepTimeEstimate{};
  };
  const StepTimeEstimate tw = step("tensorwise"), rw = step("rowwise");
  ASSERT_GT(tw.breakdown.gemm_s, 0);
  const double ratio = rw.breakdown.gemm_s / tw.breakdown.gemm_s;
  EXPECT_GT(ratio, 1.0);                                    // the forward GEMMs slower
  EXPECT_LT(ratio, 1.0 + (1 / kRowwiseGemmRateFraction - 1) / 2);  // the backward (2/3) not
  EXPECT_GT(rw.breakdown.elementwise_s, tw.breakdown.elementwise_s);  // 8 vs 6 bytes, the rescale
}

// torchao's Float8Linear (torchtitan) casts each 16-bit weight to fp8 at every use: forward, and
// again for the input gradient (float8_linear.py), each an amax pass and a cast under tensorwise,
// a cast forward and a transposed copy with its cast backward under rowwise. Bytes per weight
// element from torchao's own roofline (roofline_utils.py, tensor_role "weight"): tensorwise
// e + 2 (e + 1) = 8, rowwise (e + 1) + 2 e + (e + 1) = 10 with e = 2. Llama 3 8B's layer holds
// 4096 x (4096 + 2 x 1024) + 4096 x 4096 + 3 x 4096 x 14336 = 218.1M weights in its fp8 Linears
// (the output head stays bf16): 32 layers x 218.1M x 8 bytes = 55.8 GB a micro-batch at the HBM
// rate. None when the weights arrive in fp8 (FSDP float8 all-gather), nor under Transformer
// Engine (megatron-core), which quantizes a weight once a step.
TEST(Fp8Recipe, TorchaoCastsTheWeightAtEveryUse) {
  auto elementwise_s = [](const char* framework, const char* recipe, bool cast, bool fp8_gather) {
    auto job = testing::JobFromYaml(absl::StrCat(
        "model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nframework: ", framework,
        "\ntraining: {seq_length: 8192, global_batch_size: 8, micro_batch_size: 1, recompute: none, fp8_param_gather: ",
        fp8_gather ? "true" : "false", ", precision: {gemm: fp8, fp8_recipe: ", recipe, "}}\n"));
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return 0.0;
    EXPECT_TRUE(std::string(framework) != "torchtitan" || job->framework.fp8_weight_cast_every_use);
    job->framework.fp8_weight_cast_every_use = cast;
    return EstimateStepTime(*job).breakdown.elementwise_s;
  };
  auto bw = testing::JobFromYaml(
      "model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\ntraining: {seq_length: 8192, global_batch_size: 8}\n");
  ASSERT_TRUE(bw.ok()) << bw.status();
  const double hbm = bw->profile.hbm_bandwidth_bytes_per_s;
  const double weights = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 3 * 4096.0 * 14336;
  EXPECT_NEAR(weights, 218.1e6, 0.1e6);
  for (const auto& [recipe, bytes] : {std::pair<const char*, double>{"tensorwise", 8}, {"rowwise", 10}}) {
    SCOPED_TRACE(recipe);
    const double expected_s = 32 * weights * bytes / hbm;
    const double on = elementwise_s("torchtitan", recipe, true, false), off = elementwise_s("torchtitan", recipe, false, false);
    EXPECT_NEAR(on - off, expected_s, 1e-6 * expected_s);
    EXPECT_DOUBLE_EQ(elementwise_s("torchtitan", recipe, true, true), elementwise_s("torchtitan", recipe, false, true));
  }
  // Transformer Engine's presets do not set it; both torchtitan presets do.
  for (const auto& [framework, set] : {std::pair<const char*, bool>{"megatron-core", false}, {"megatron-bridge", false},
                                       {"nemo", false}, {"torchtitan", true}, {"torchtitan-compile", true}}) {
    auto job = testing::JobFromYaml(absl::StrCat("model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nframework: ",
                                                 framework, "\ntraining: {seq_length: 8192, global_batch_size: 8, micro_batch_size: 1}\n"));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->framework.fp8_weight_cast_every_use, set) << framework;
  }
}

// The unfused attention core's batched products stay in bf16 under an fp8 job (TE's fp8 covers
// its Linear modules; UnfusedDotProductAttention's baddbmm / bmm run on the bf16 q, k, v): the
// attention time of an fp8 job is its bf16 twin's.
TEST(Fp8Recipe, UnfusedAttentionProductsStaySixteenBit) {
  auto attention_s = [](const char* gemm) {
    auto job = testing::JobFromYaml(absl::StrCat(
        "model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 8}\nframework: megatron-core\n"
        "training: {seq_length: 4096, global_batch_size: 64, flash_attention: false, precision: {gemm: ",
        gemm, "}}\n"));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? EstimateStepTime(*job).breakdown.attention_s : 0.0;
  };
  const double bf16 = attention_s("bf16");
  ASSERT_GT(bf16, 0);
  EXPECT_DOUBLE_EQ(attention_s("fp8"), bf16);
}

// The output head stays 16-bit under fp8 (Megatron-Core gpt_model.py: output_layer is a
// tensor_parallel.ColumnParallelLinear, outside Transformer Engine's fp8_autocast; torchtitan's
// float8 converter filters "output"): what a larger vocabulary adds to an fp8 job's GEMM and
// elementwise time is what it adds to its bf16 twin's (no fp8 rate, no quantization).
TEST(Fp8Recipe, TheOutputHeadStaysSixteenBit) {
  auto breakdown = [](int vocab, const char* gemm) {
    auto job = testing::JobFromYaml(absl::StrCat(
        "model: {shape: {name: t, layers: 4, hidden_size: 4096, attention_heads: 32, kv_heads: 8, "
        "ffn_hidden_size: 14336, ffn_type: swiglu, vocab_size: ", vocab, ", norm_type: rmsnorm}}\n"
        "hardware: h100-sxm\ncluster: {gpu_count: 8}\nframework: megatron-core\n"
        "training: {seq_length: 4096, global_batch_size: 64, precision: {gemm: ", gemm, "}}\n"));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? EstimateStepTime(*job).breakdown : StepBreakdown{};
  };
  const StepBreakdown b1 = breakdown(32768, "bf16"), b2 = breakdown(131072, "bf16");
  const StepBreakdown f1 = breakdown(32768, "fp8"), f2 = breakdown(131072, "fp8");
  ASSERT_GT(b2.gemm_s - b1.gemm_s, 0);
  EXPECT_NEAR(f2.gemm_s - f1.gemm_s, b2.gemm_s - b1.gemm_s, 1e-9 * b2.gemm_s);
  EXPECT_NEAR(f2.elementwise_s - f1.elementwise_s, b2.elementwise_s - b1.elementwise_s, 1e-9 * b2.elementwise_s);
  EXPECT_LT(f1.gemm_s, b1.gemm_s);  // the layers' own GEMMs are fp8
}

std::vector<std::string> Words(const std::string& s) { return absl::StrSplit(s, ' ', absl::SkipEmpty()); }

// The importers: Megatron-LM's --fp8-recipe (with --fp8-format only; blockwise keeps the preset's
// default), NeMo's and Megatron-Bridge's mixed-precision configs by name.
TEST(Fp8Recipe, ImportersReadTheRecipe) {
  const std::string base =
      "torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
      "--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm --position-embedding-type rope "
      "--disable-bias-linear --untie-embeddings-and-output-weights --vocab-size 128256 --seq-length 8192 "
      "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 64 --bf16";
  struct Case {
    std::string extra, recipe;
  } cases[] = {
      {" --fp8-format hybrid --fp8-recipe mxfp8", "mxfp8"},
      {" --fp8-format hybrid --fp8-recipe tensorwise", "tensorwise"},
      {" --fp8-format hybrid", ""},                       // the preset's default (delayed)
      {" --fp8-format hybrid --fp8-recipe blockwise", ""},  // not modelled: the default, listed
      {" --fp8-recipe mxfp8", ""},                        // no fp8 without --fp8-format
  };
  auto torchao_name = JobFromCommand(Words(base + " --fp8-format hybrid --fp8-recipe rowwise"), "");
  ASSERT_FALSE(torchao_name.ok());
  EXPECT_THAT(std::string(torchao_name.status().message()), HasSubstr("'rowwise' is not a Megatron-LM recipe"));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra);
    auto r = JobFromCommand(Words(base + c.extra), "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec.training().precision().fp8_recipe(), c.recipe);
    if (absl::StrContains(c.extra, "blockwise")) {
      EXPECT_THAT(r->ignored, ::testing::Contains(HasSubstr("--fp8-recipe blockwise (not modelled")));
    }
  }
  struct NemoCase {
    std::string line, recipe;
  } nemo[] = {
      {"nemo llm pretrain --factory llama3_8b trainer.plugins=bf16_with_mxfp8_mixed", "mxfp8"},
      {"nemo llm pretrain --factory llama3_8b trainer.plugins=bf16_with_fp8_current_scaling_mixed", "tensorwise"},
      {"nemo llm pretrain --factory llama3_8b trainer.plugins=bf16_with_fp8_mixed", "delayed"},
      {"nemo llm pretrain --factory llama3_8b trainer.plugins=bf16_mixed", ""},
      // Megatron-Bridge's configs by what they set (training/mixed_precision.py @067f987): the
      // Nano v2 "current scaling" config sets blockwise (not modelled, listed); hyphenated names
      // are registered too; an explicit fp8_recipe override wins.
      {"torchrun scripts/training/run_recipe.py --recipe llama31_405b_pretrain_config "
       "mixed_precision=nanov2_bf16_with_fp8_current_scaling_mixed", ""},
      {"torchrun scripts/training/run_recipe.py --recipe llama31_405b_pretrain_config "
       "mixed_precision=bf16-with-fp8-current-scaling-mixed", "tensorwise"},
      {"torchrun scripts/training/run_recipe.py --recipe llama31_405b_pretrain_config "
       "mixed_precision=bf16_with_fp8_delayed_scaling_mixed", "delayed"},
      {"torchrun scripts/training/run_recipe.py --recipe llama31_405b_pretrain_config "
       "mixed_precision=bf16_with_fp8_current_scaling_mixed mixed_precision.fp8_recipe=mxfp8", "mxfp8"},
  };
  for (const NemoCase& c : nemo) {
    SCOPED_TRACE(c.line);
    auto r = JobFromCommand(Words(c.line), "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec.training().precision().fp8_recipe(), c.recipe);
    if (absl::StrContains(c.line, "nanov2")) {
      EXPECT_EQ(r->spec.training().precision().gemm(), v1::D_TYPE_FP8);
      EXPECT_THAT(r->ignored, ::testing::Contains(HasSubstr("fp8 recipe blockwise (not modelled")));
    }
  }
}

// torchtitan: the mx converter (torchao MXLinear) trains MXFP8, costed with the mxfp8 recipe; a
// float8 converter keeps the preset's tensorwise (torchao Float8 dynamic scaling).
TEST(Fp8Recipe, TorchtitanConvertersNameTheRecipe) {
  auto recipe = [](const char* converter) {
    auto r = JobFromTorchtitanToml(
        absl::StrCat("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"", converter, "\"]\n"), "t.toml");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->spec.training().precision().fp8_recipe() : std::string("?");
  };
  EXPECT_EQ(recipe("mx"), "mxfp8");
  EXPECT_EQ(recipe("quantize.linear.mx"), "mxfp8");
  EXPECT_EQ(recipe("float8"), "");  // the TOML era: the preset's tensorwise
  // A TOML file's [float8] recipe_name.
  auto named = [](const char* name) {
    return JobFromTorchtitanToml(absl::StrCat("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n"
                                              "[float8]\nrecipe_name = \"", name, "\"\n"),
                                 "t.toml");
  };
  auto rw = named("rowwise");
  ASSERT_TRUE(rw.ok()) << rw.status();
  EXPECT_EQ(rw->spec.training().precision().fp8_recipe(), "rowwise");
  EXPECT_THAT(rw->ignored, ::testing::Not(::testing::Contains(HasSubstr("recipe_name"))));
  auto hp = named("rowwise_with_gw_hp");
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->spec.training().precision().fp8_recipe(), "rowwise");
  EXPECT_THAT(hp->ignored, ::testing::Contains(HasSubstr("rowwise_with_gw_hp")));
  auto bad = named("columnwise");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("float8.recipe_name: 'columnwise'"));
  // The current config registry's float8 scales row-wise (b5bcd76 float8.py: recipe_name
  // "rowwise" by default, tensorwise not offered); its mxfp8 configs are mxfp8.
  auto registry = [](const char* module, const char* config) {
    return JobFromCommand(Words(absl::StrCat("python -m torchtitan.train --module ", module, " --config ", config)), "");
  };
  auto f8 = registry("llama3", "llama3_405b");
  ASSERT_TRUE(f8.ok()) << f8.status();
  EXPECT_EQ(f8->spec.training().precision().gemm(), v1::D_TYPE_FP8);
  EXPECT_EQ(f8->spec.training().precision().fp8_recipe(), "rowwise");
  auto mx = registry("llama3", "llama3_8b_mxfp8");
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_EQ(mx->spec.training().precision().fp8_recipe(), "mxfp8");
}

// The validation harness reads the recipe a row's precision text names (never its source id).
TEST(Fp8Recipe, PublishedRowsNameTheirRecipe) {
  PublishedRow row = {{"row_id", "1"}, {"source_id", "SX"}, {"source", "a table"}, {"model", "Llama 3.1 8B"},
                      {"n_layers", "32"}, {"d_model", "4096"}, {"n_heads", "32"}, {"n_kv_heads", "8"},
                      {"ffn_hidden", "14336"}, {"vocab", "128256"}, {"seq_len", "8192"}, {"gpu", "B200"},
                      {"num_gpus", "8"}, {"tp", "1"}, {"pp", "1"}, {"cp", "1"}, {"micro_batch", "1"},
                      {"global_batch_seqs", "128"}, {"framework", "Megatron-Core"}, {"iter_time_s", "5"}};
  const struct {
    const char* text;
    const char* recipe;
  } cases[] = {{"mxfp8", "mxfp8"},
               {"fp8 (MXFP8 printed)", "mxfp8"},
               {"fp8 (current scaling)", "tensorwise"},
               {"fp8 (FP8-CS printed)", "tensorwise"},
               {"fp8 (FP8=True, FP8_HYBRID, tensorwise recipe)", "tensorwise"},
               {"fp8 (delayed scaling)", "delayed"},
               {"fp8 (NeMo fp8 hybrid, fp8_params)", ""}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    row["precision"] = c.text;
    auto run = PublishedRunFromRow(row, testing::BuiltinCatalog());
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->spec.training().precision().fp8_recipe(), c.recipe);
  }
}

}  // namespace
}  // namespace stepcast
