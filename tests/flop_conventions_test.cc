// FLOP conventions (core/flop_conventions.h) against numbers their sources print: each worked
// example is a published run that prints both its step time (or tokens/s) and its TFLOP/s per
// GPU or MFU, so the convention's count divided by the step time and GPUs must give the printed
// rate, within the rounding of the printed figures. The definition texts are the validation
// rows' own (tests/data/validation/published_runs.csv, flops_definition).
#include "core/flop_conventions.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

ModelShape Dense(int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t ffn, FfnType t, int64_t vocab) {
  ModelShape m;
  m.layers = layers;
  m.hidden_size = hidden;
  m.attention_heads = heads;
  m.kv_heads = kv;
  m.ffn_hidden_size = ffn;
  m.ffn_type = t;
  m.vocab_size = vocab;
  m.norm_type = t == FfnType::kSwiGlu ? NormType::kRmsNorm : NormType::kLayerNorm;
  return m;
}

struct Example {
  const char* what;
  const char* definition;  // the row's flops_definition text
  int framework_year;
  FlopConvention want;
  ModelShape model;
  const char* family;
  int64_t seq;
  double sequences, gpus, step_s;
  double printed_flops_per_s;  // per GPU
  double rel;                  // the printed figures' rounding
};

TEST(FlopConventions, ReproduceThePrintedRates) {
  const ModelShape llama70 = Dense(80, 8192, 64, 8, 28672, FfnType::kSwiGlu, 128256);
  const ModelShape llama8 = Dense(32, 4096, 32, 8, 14336, FfnType::kSwiGlu, 128256);
  const ModelShape llama405 = Dense(126, 16384, 128, 8, 53248, FfnType::kSwiGlu, 128256);
  const ModelShape gpt175 = [] {
    ModelShape m = Dense(96, 12288, 96, 0, 49152, FfnType::kGelu, 50257);
    m.linear_bias = true;
    m.tied_embeddings = true;
    m.learned_position_embeddings = 2048;
    return m;
  }();
  const ModelShape nemotron15 = Dense(32, 6144, 48, 8, 24576, FfnType::kSquaredRelu, 256000);
  // MPT-7B (llm-foundry mpt-7b.yaml: 32 x 4096, 32 heads, ffn 4h, vocab 50368, learned positions
  // of the 2048 sequence, tied, no biases).
  const ModelShape mpt7 = [] {
    ModelShape m = Dense(32, 4096, 32, 0, 16384, FfnType::kGelu, 50368);
    m.tied_embeddings = true;
    m.learned_position_embeddings = 2048;
    return m;
  }();
  // DeepSeek-V3 with its one MTP module (the printed figure counts it; see below).
  const ModelShape dsv3_mtp = [] {
    ModelShape m = *testing::BuiltinCatalog().FindModel("deepseek-v3");
    m.mtp_layers = 1;
    return m;
  }();
  const Example cases[] = {
      // Megatron-Bridge performance summary 26.02, LLAMA3_70B on 64 H100 fp8: 1621 tokens/s/GPU,
      // 728 "Model TFLOP/sec/GPU" (validation row 221).
      {"Megatron-Bridge 26.02 Llama 3 70B",
       "'Model TFLOP/sec/GPU' = framework analytic model FLOPs (no recompute) / step time; tokens/sec/GPU printed", 2026,
       FlopConvention::kMegatron2025, llama70, "llama", 8192, 256, 64, 256.0 * 8192 / (1621.0 * 64), 728e12, 0.001},
      // Megatron-Bridge 26.02 DeepSeek-V3 on 256 B200: 2689 tokens/s/GPU, 699 TFLOP/s (row 230).
      {"Megatron-Bridge 26.02 DeepSeek-V3 (one MTP layer)",
       "'Model TFLOP/sec/GPU' = framework analytic model FLOPs (no recompute) / step time; tokens/sec/GPU printed", 2026,
       FlopConvention::kMegatron2025, dsv3_mtp, "deepseek_v3", 4096, 4096, 256, 4096.0 * 4096 / (2689.0 * 256), 699e12,
       0.001},
      // Megatron-Bridge 26.02 GPT-OSS 120B on 64 H100: 5993 tokens/s/GPU, 163 TFLOP/s (row 224): the
      // gated unit counted as 2 matrices (the provider's quick_gelu, not --swiglu).
      {"Megatron-Bridge 26.02 GPT-OSS 120B",
       "'Model TFLOP/sec/GPU' = framework analytic model FLOPs (no recompute) / step time; tokens/sec/GPU printed", 2026,
       FlopConvention::kMegatron2025, *testing::BuiltinCatalog().FindModel("gpt-oss-120b"), "gpt_oss", 4096, 1280, 64,
       1280.0 * 4096 / (5993.0 * 64), 163e12, 0.004},
      // dgxc-benchmarking v24.11.1 Llama 3.1 8B on 8 H100 bf16: step 12.91 s, 587.5 TFLOP/s (row 141).
      {"NeMo llama3 formula, Llama 3.1 8B",
       "README 'Notes': model FLOPs/sample = s*[12*L*h^2*(1+g/a+s/h) + 18*L*ffn*h + 6*V*h] (non-causal attention, "
       "SwiGLU, no recompute term); MFU = GBS*F/step/GPUs/peak with peak 989 (BF16) or 1979 (FP8) TFLOP/s",
       2024, FlopConvention::kNemoLlama, llama8, "llama", 8192, 128, 8, 12.91, 587.5e12, 0.0015},
      // The same formula for MaxText Llama 2 70B on 64 H100: step 6.999 s, 520.1 TFLOP/s (row 169):
      // the llama2 vocabulary constant 32000.
      {"NeMo llama2 formula, MaxText Llama 2 70B",
       "README 'Notes': model FLOPs/sample = s*[12*L*h^2*(1+g/a+s/h) + 18*L*ffn*h + 6*V*h]", 2024,
       FlopConvention::kNemoLlama, Dense(80, 8192, 64, 8, 28672, FfnType::kSwiGlu, 32000), "llama2", 4096, 128, 64,
       6.999, 520.1e12, 0.001},
      // dgxc v24.11.1 GPT-3 175B on 128 H100 bf16: step 8.91 s, 493.8 TFLOP/s (row 153).
      {"NeMo gpt3 formula, GPT-3 175B",
       "README 'Notes': model FLOPs/sample = s*[24*L*h^2 + 12*L*h*s + 48*L*h^2 + 6*V*h] (non-causal attention, no "
       "recompute term)",
       2024, FlopConvention::kNemoGpt3, gpt175, "gpt", 2048, 256, 128, 8.91, 493.8e12, 0.003},
      // dgxc v24.11.1 Nemotron-4 15B on 16 H100 bf16: step 2.83 s, 614.1 TFLOP/s (row 157).
      {"NeMo gpt3 formula, Nemotron-4 15B",
       "README 'Notes': model FLOPs/sample = s*[24*L*h^2 + 12*L*h*s + 48*L*h^2 (squared-ReLU MLP, ffn=4h) + 6*V*h]",
       2024, FlopConvention::kNemoGpt3, nemotron15, "nemotron", 4096, 64, 16, 2.83, 614.1e12, 0.002},
      // llm-foundry benchmark table, MPT-7B on 128 H100: 10475 tokens/s/GPU, 452 TFLOP/s (row 106).
      {"llm-foundry, MPT-7B",
       "collect_results.py: model FLOPs per sequence = 6*N*s + 12*n_layers*d_model*s^2 (N = printed NumParams incl. "
       "embeddings and learned pos-emb; attention not halved for causality; no recompute)",
       2023, FlopConvention::kLlmFoundry, mpt7, "mpt", 2048, 768, 128, 768.0 * 2048 / (10475.0 * 128), 452e12,
       0.0015},
      // MLPerf Training v5.1 Llama 3.1 8B on 8 B200: step 0.544 s, 1549 TFLOP/s (row 213); 405B on
      // 256 B200: step 27.662 s, 1749 TFLOP/s (row 209).
      {"MLPerf MODEL_TFLOP_PER_SAMPLE, Llama 3.1 8B",
       "MLPerf NVIDIA-reference constant MODEL_TFLOP_PER_SAMPLE (config_common_405b.sh = 21508; config_common_8b.sh = "
       "421.59 TFLOP per 8192-token sample), divided by step time per GPU",
       2025, FlopConvention::kMlperfConstant, llama8, "llama", 8192, 16, 8, 0.544, 1549e12, 0.001},
      {"MLPerf MODEL_TFLOP_PER_SAMPLE, Llama 3.1 405B",
       "MLPerf NVIDIA-reference constant MODEL_TFLOP_PER_SAMPLE (config_common_405b.sh = 21508; config_common_8b.sh = "
       "421.59 TFLOP per 8192-token sample), divided by step time per GPU",
       2025, FlopConvention::kMlperfConstant, llama405, "llama", 8192, 576, 256, 27.662, 1749e12, 0.0005},
      // dgxc v25.05 Llama 4 Maverick on 512 H100: step 4.426 s, 403.1 TFLOP/s (row 182), F stated.
      {"stated per sample, Llama 4 Maverick",
       "README Notes: model FLOPs per sample 8.92e14 = 12*s*L*h^2*[(1+g/a+0.5*s/h) + (ffn/h)*1.5*topK + V/(2*L*h)] "
       "(causal attention); MFU vs 989/1979 (H100) or 2450/4900 (GB200)",
       2025, FlopConvention::kStatedPerSample, *testing::BuiltinCatalog().FindModel("llama4-maverick"), "llama4", 8192,
       1024, 512, 4.426, 403.1e12, 0.0005},
  };
  for (const Example& e : cases) {
    SCOPED_TRACE(e.what);
    auto choice = FlopConventionFromText(e.definition, e.framework_year);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->convention, e.want) << FlopConventionName(choice->convention);
    FlopCountInput in{e.model, e.family, e.seq, e.sequences, choice->stated_flops_per_sample};
    auto flops = ConventionFlopsPerStep(choice->convention, in);
    ASSERT_TRUE(flops.ok()) << flops.status();
    EXPECT_NEAR(*flops / (e.step_s * e.gpus) / e.printed_flops_per_s, 1.0, e.rel);
    // And back: the printed rate gives the step time.
    auto t = StepTimeFromFlopRate(*flops, e.printed_flops_per_s, e.gpus);
    ASSERT_TRUE(t.ok());
    EXPECT_NEAR(*t / e.step_s, 1.0, e.rel);
  }
}

TEST(FlopConventions, DeepSeekV3RatesCountItsMtpModule) {
  // Megatron-Bridge 26.02's DeepSeek-V3 figure (row 230: 699 TFLOP/s at 2689 tokens/s/GPU) is the
  // 2025 count with one MTP layer; without it the count is 3.9% lower. The 25.11 row "w/o MTP"
  // (row 52: 782 TFLOP/s at 3139 tokens/s/GPU on 256 GB200) matches the count without it.
  ModelShape ds = *testing::BuiltinCatalog().FindModel("deepseek-v3");
  FlopCountInput in{ds, "deepseek_v3", 4096, 4096, 0};
  const double no_mtp = *ConventionFlopsPerStep(FlopConvention::kMegatron2025, in);
  EXPECT_NEAR(no_mtp / (4096.0 * 4096 / (3139.0 * 256) * 256) / 782e12, 1.0, 0.004);
  in.model.mtp_layers = 1;
  const double mtp = *ConventionFlopsPerStep(FlopConvention::kMegatron2025, in);
  EXPECT_NEAR(mtp / no_mtp, 1.0 / 0.961, 0.003);
}

// Megatron-Bridge's "Model TFLOP / sec / GPU" of the hybrid Mamba-2 Nemotron 3 Nano
// (docs/performance-summary-archive.md @067f987, 26.02.01 DGX-H100 16 GPUs FP8 GBS 1024 x 8192:
// 14890 tokens/s/GPU, 331 TFLOP/s; 26.04 DGX-H100: 14507, 323; 26.06.01 DGX-GB300 8 GPUs
// 40960, 905; DGX-GB200 34816, 776) is hybrid_flops: tokens/s x the count per token.
TEST(FlopConventions, HybridMambaRatesAreMegatronsHybridCount) {
  const ModelShape nano = *testing::BuiltinCatalog().FindModel("nemotron-3-nano-30b-a3b");
  const FlopCountInput in{nano, "nemotron_h", 8192, 1, 0};
  const double per_token = *ConventionFlopsPerStep(FlopConvention::kMegatron2025, in) / 8192;
  EXPECT_EQ(*ConventionFlopsPerStep(FlopConvention::kMegatron2024, in), per_token * 8192);
  for (auto [tokens_per_gpu, printed] : {std::pair<double, double>{14890, 331e12}, {14507, 323e12},
                                         {40960, 905e12}, {34816, 776e12}}) {
    SCOPED_TRACE(tokens_per_gpu);
    // Within 1%: the GB300 and GB200 tokens/s are printed rounded (40960 = 40 x 1024).
    EXPECT_NEAR(tokens_per_gpu * per_token / printed, 1.0, 0.01);
  }
}

TEST(FlopConventions, PaperAndFrameworkFigures) {
  // Korthikanti et al. 2022 Table 5: GPT-3 175B on 64 A100, batch 64 x 2048, 13.75 s per
  // iteration (selective recompute + SP), MFU 51.4% of 312 TFLOP/s; 22B on 8 A100, batch 4,
  // 1.10 s, MFU 41.5% (the step's two decimals: 0.5%).
  ModelShape g175 = Dense(96, 12288, 96, 0, 49152, FfnType::kGelu, 51200);
  ModelShape g22 = Dense(48, 6144, 64, 0, 24576, FfnType::kGelu, 51200);
  auto mfu = [](FlopConvention c, const ModelShape& m, double seqs, double gpus, double step) {
    return *ConventionFlopsPerStep(c, FlopCountInput{m, "gpt", 2048, seqs, 0}) / (step * gpus * 312e12);
  };
  auto k = FlopConventionFromText(
      "MFU/HFU per PaLM definitions; model and hardware FLOPs from the paper's Appendix A lower-bound formulas", 2022);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->convention, FlopConvention::kKorthikantiModel);
  EXPECT_NEAR(mfu(FlopConvention::kKorthikantiModel, g175, 64, 64, 13.75) / 0.514, 1.0, 0.002);
  EXPECT_NEAR(mfu(FlopConvention::kKorthikantiModel, g22, 4, 8, 1.10) / 0.415, 1.0, 0.006);
  // Megatron's 2024 count is Korthikanti's for a GPT (GELU, MHA, f = 4h): the same MFUs.
  EXPECT_NEAR(mfu(FlopConvention::kMegatron2024, g175, 64, 64, 13.75) / 0.514, 1.0, 0.002);
  EXPECT_NEAR(mfu(FlopConvention::kMegatron2024, g22, 4, 8, 1.10) / 0.415, 1.0, 0.006);
  // Narayanan et al. 2021 Table 1 / Megatron-LM README: GPT 1.7B on 32 A100, batch 512 x 2048,
  // 137 TFLOP/s per GPU (44% of 312) by Eq. 3; the existing closed form agrees.
  ModelShape g17 = Dense(24, 2304, 24, 0, 9216, FfnType::kGelu, 51200);
  EXPECT_DOUBLE_EQ(*ConventionFlopsPerStep(FlopConvention::kNarayananEq3, FlopCountInput{g17, "gpt", 2048, 512, 0}),
                   96.0 * 512 * 2048 * 24 * 2304.0 * 2304 * (1 + 2048 / (6.0 * 2304) + 51200 / (16.0 * 24 * 2304)));
  // torchtitan docs/performance.md: Llama 3 8B on 64 A100, 2,973 tokens/s per GPU, MFU 58.2%
  // (seq 8192, 312 TFLOP/s): the first train.py's count with every parameter.
  ModelShape l8 = Dense(32, 4096, 32, 8, 14336, FfnType::kSwiGlu, 128256);
  auto tt = FlopConventionFromText("torchtitan get_num_flop_per_token with get_num_params(model) (all parameters)", 2024);
  ASSERT_TRUE(tt.ok());
  EXPECT_EQ(tt->convention, FlopConvention::kTorchtitan2024);
  const double per_token = *ConventionFlopsPerStep(FlopConvention::kTorchtitan2024, FlopCountInput{l8, "llama", 8192, 1, 0}) / 8192;
  EXPECT_NEAR(2973 * per_token / 312e12 / 0.582, 1.0, 0.001);
  // Without the input table (the later get_num_params(model, exclude_embedding=True)) the same
  // run reads 55.2%: the two eras differ by 6 x 128256 x 4096 per token.
  const double per_token_now = *ConventionFlopsPerStep(FlopConvention::kTorchtitan, FlopCountInput{l8, "llama", 8192, 1, 0}) / 8192;
  EXPECT_DOUBLE_EQ(per_token - per_token_now, 6.0 * 128256 * 4096);
  // PaLM (arXiv:2204.02311) Sec. 4.1 / App. B: PaLM 540B (118 layers, 18432, 48 heads of 256,
  // multi-query, SwiGLU 4h, 256k tied vocabulary) trains at 238.3K tokens/s on 6144 TPU v4 chips
  // (275 TFLOP/s bf16 each) at 2048 tokens: MFU 46.2%.
  ModelShape palm = Dense(118, 18432, 48, 1, 73728, FfnType::kSwiGlu, 256000);
  palm.head_dim = 256;
  palm.tied_embeddings = true;
  auto p = FlopConventionFromText("6N + 12LHQT (PaLM App. B)", 2022);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->convention, FlopConvention::kPalm);
  const double palm_token = *ConventionFlopsPerStep(FlopConvention::kPalm, FlopCountInput{palm, "palm", 2048, 1, 0}) / 2048;
  EXPECT_NEAR(238.3e3 * palm_token / (6144 * 275e12) / 0.462, 1.0, 0.002);
}

TEST(FlopConventions, TextsAndInputsAreCheckedByName) {
  // Megatron's era from the framework's year.
  auto m24 = FlopConventionFromText("Megatron-LM num_floating_point_operations", 2024);
  ASSERT_TRUE(m24.ok());
  EXPECT_EQ(m24->convention, FlopConvention::kMegatron2024);
  // A definition that names no convention is NotFound with the text; no convention is guessed.
  auto none = FlopConventionFromText("no FLOP/s printed; measured step time only", 2024);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()), ::testing::HasSubstr("flops_definition"));
  // A per-sample number huge or in the 100 KB of a hostile cell: linear scan, one number taken.
  const std::string big = "model FLOPs per sample " + std::string(100000, '9') + "e15";
  auto b = FlopConventionFromText(big, 2025);
  EXPECT_TRUE(b.ok() || b.status().code() == absl::StatusCode::kNotFound);
  // Inputs: NeMo's formulas need the family's vocabulary constant; MLPerf's constants exist for
  // their benchmarks only; zero batch or rate is an error, not a NaN.
  ModelShape m = Dense(2, 64, 4, 0, 256, FfnType::kSwiGlu, 100);
  EXPECT_THAT(std::string(ConventionFlopsPerStep(FlopConvention::kNemoLlama, FlopCountInput{m, "qwen3", 64, 1, 0})
                              .status()
                              .message()),
              ::testing::HasSubstr("no vocabulary constant for family 'qwen3'"));
  EXPECT_FALSE(ConventionFlopsPerStep(FlopConvention::kMlperfConstant, FlopCountInput{m, "llama", 8192, 1, 0}).ok());
  EXPECT_FALSE(ConventionFlopsPerStep(FlopConvention::kPalm, FlopCountInput{m, "x", 64, 0, 0}).ok());
  EXPECT_FALSE(StepTimeFromFlopRate(1e15, 0, 8).ok());
  EXPECT_FALSE(StepTimeFromFlopRate(1e15, 1e12, std::nan("")).ok());
}

}  // namespace
}  // namespace stepcast
