// FLOP counts against the papers: Korthikanti et al. 2022 App. A (model FLOPs), Narayanan et al.
// 2021 Eq. 3 (with full recompute), and the MFU/HFU pairs of Korthikanti Table 5 recomputed
// from the paper's measured iteration times.
#include "core/flops.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

ModelShape Gpt(int64_t layers, int64_t hidden, int64_t heads) {
  ModelShape s;
  s.layers = layers; s.hidden_size = hidden; s.attention_heads = heads;
  s.ffn_type = FfnType::kGelu; s.vocab_size = 51200; s.linear_bias = true; s.tied_embeddings = true;
  s.learned_position_embeddings = 2048;
  return s;
}

TEST(Flops, GeneralCountEqualsKorthikantiAppendixA) {
  for (auto [l, h, a] : {std::tuple{48, 6144, 64}, {96, 12288, 96}, {105, 20480, 128}, {128, 25600, 160}}) {
    const ModelShape s = Gpt(l, h, a);
    EXPECT_NEAR(ModelFlopsPerStep(s, 2048, 64), KorthikantiModelFlops(64, 2048, l, h, 51200),
                1e-12 * KorthikantiModelFlops(64, 2048, l, h, 51200));
  }
}

// The papers' formulas evaluated by hand, so that a typo shared by the reference functions above
// and the model cannot pass: Korthikanti App. A, 72 B s l h^2 (1 + s/6h + V/12lh), for the 175B
// GPT of Table 5 (l 96, h 12288, B 64, s 2048, V 51200) is 1.4109153e17 FLOPs per iteration
// (and 1.4109e17 / (13.75 s x 64 x 312e12) = 0.514, Table 5's printed MFU); Narayanan Eq. 3,
// 96 B s l h^2 (1 + s/6h + V/16lh), for l 80, h 12288, B 512 is 1.2537071e18.
TEST(Flops, PaperFormulasEvaluatedByHand) {
  EXPECT_NEAR(KorthikantiModelFlops(64, 2048, 96, 12288, 51200), 1.4109153109947186e17, 1e8);
  EXPECT_NEAR(ModelFlopsPerStep(Gpt(96, 12288, 96), 2048, 64), 1.4109153109947186e17, 1e8);
  EXPECT_NEAR(NarayananEq3Flops(512, 2048, 80, 12288, 51200), 1.253707138455306e18, 1e9);
  EXPECT_NEAR(HardwareFlopsPerStep(Gpt(80, 12288, 96), 2048, 512, Recompute::kFull), 1.253707138455306e18, 1e9);
}

TEST(Flops, FullRecomputeEqualsNarayananEq3) {
  for (auto [l, h, a] : {std::tuple{24, 2304, 24}, {80, 12288, 96}, {128, 25600, 160}}) {
    const ModelShape s = Gpt(l, h, a);
    const double eq3 = NarayananEq3Flops(512, 2048, l, h, 51200);
    EXPECT_NEAR(HardwareFlopsPerStep(s, 2048, 512, Recompute::kFull), eq3, 1e-12 * eq3);
  }
}

struct Table5Row {
  int layers, hidden, heads, gpus, batch;
  double iter_time_s, mfu, hfu;
};

TEST(Flops, KorthikantiTable5MfuAndHfuFromMeasuredTimes) {
  // Korthikanti et al. 2022 Table 5 "present work" (SP + selective recompute) rows: iteration
  // time, MFU and HFU as printed; peak 312 TFLOP/s (A100).
  const Table5Row rows[] = {
      {48, 6144, 64, 8, 4, 1.10, 0.415, 0.437},
      {96, 12288, 96, 64, 64, 13.75, 0.514, 0.528},
      {105, 20480, 128, 280, 280, 37.83, 0.560, 0.570},
      {128, 25600, 160, 512, 512, 71.49, 0.563, 0.570},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.hidden);
    const ModelShape s = Gpt(r.layers, r.hidden, r.heads);
    const double peak = r.iter_time_s * r.gpus * 312e12;
    EXPECT_NEAR(ModelFlopsPerStep(s, 2048, r.batch) / peak, r.mfu, 0.003);
    EXPECT_NEAR(HardwareFlopsPerStep(s, 2048, r.batch, Recompute::kSelective) / peak, r.hfu, 0.003);
  }
}

TEST(Flops, SelectiveWithFlashAttentionAddsNothing) {
  const ModelShape s = Gpt(24, 2048, 16);
  EXPECT_DOUBLE_EQ(HardwareFlopsPerStep(s, 2048, 8, Recompute::kSelective, /*flash=*/true),
                   ModelFlopsPerStep(s, 2048, 8));
}

TEST(Flops, GqaAndSwiGluPerToken) {
  // Llama 3 8B forward GEMM FLOPs per token = 2 x (layer GEMM weights + logits).
  const ModelShape s = *testing::BuiltinCatalog().FindModel("llama3-8b");
  const double layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336;
  EXPECT_DOUBLE_EQ(ForwardGemmFlopsPerToken(s), 2 * (32 * layer + 128256.0 * 4096));
  // Attention core: 2 * s * heads * (d_qk + d_v) per layer.
  EXPECT_DOUBLE_EQ(ForwardAttentionFlopsPerToken(s, 8192), 2.0 * 8192 * 32 * 256 * 32);
}

}  // namespace
}  // namespace stepcast
