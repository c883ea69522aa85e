// Parameter counts against the model cards and papers (independent published totals).
#include "core/model_shape.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

struct Case {
  const char* preset;
  double total;   // published total
  double active;  // published active (MoE)
  double tol;     // relative tolerance for the published rounding
  const char* source;
};

TEST(ParameterCounts, MatchPublishedTotals) {
  const Case cases[] = {
      {"llama3-8b", 8.03e9, 8.03e9, 0.002, "Meta-Llama-3-8B model card: 8.03B"},
      {"llama3-70b", 70.6e9, 70.6e9, 0.002, "Meta-Llama-3-70B model card: 70.6B"},
      {"llama3-405b", 405.9e9, 405.9e9, 0.002, "Llama 3.1 405B: 405.9B (HF safetensors count)"},
      {"mixtral-8x7b", 46.7e9, 12.9e9, 0.003, "Mixtral paper (arXiv:2401.04088): 47B total, 13B active; HF 46.7B"},
      {"deepseek-v3", 671e9, 37e9, 0.02, "DeepSeek-V3 report: 671B total, 37B activated (no MTP)"},
      {"gpt3-175b", 175e9, 175e9, 0.003, "GPT-3 paper Table 2.1: 175.0B"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    absl::StatusOr<ModelShape> m = testing::BuiltinCatalog().FindModel(c.preset);
    ASSERT_TRUE(m.ok()) << m.status();
    const ParameterCounts p = CountParameters(*m);
    EXPECT_NEAR(p.total, c.total, c.tol * c.total) << c.source;
    EXPECT_NEAR(p.active, c.active, c.tol * c.active * 1.5) << c.source;
    EXPECT_DOUBLE_EQ(p.non_embedding, p.total - p.embedding);
  }
}

TEST(ParameterCounts, Llama3_8B_ByHand) {
  // Llama 3 8B: per layer q,o 4096^2 each, k,v 4096x1024 each, MLP 3 x 4096 x 14336,
  // two RMSNorms 4096; embedding and untied head 128256 x 4096; final norm 4096.
  ModelShape s;
  s.layers = 32; s.hidden_size = 4096; s.attention_heads = 32; s.kv_heads = 8;
  s.ffn_hidden_size = 14336; s.ffn_type = FfnType::kSwiGlu; s.vocab_size = 128256;
  s.norm_type = NormType::kRmsNorm;
  const double per_layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096;
  const double expected = 32 * per_layer + 2.0 * 128256 * 4096 + 4096;
  EXPECT_DOUBLE_EQ(CountParameters(s).total, expected);
  EXPECT_DOUBLE_EQ(CountParameters(s).embedding, 2.0 * 128256 * 4096);
}

TEST(ParameterCounts, TiedEmbeddingsCountOnce) {
  ModelShape s;
  s.layers = 2; s.hidden_size = 64; s.attention_heads = 4; s.vocab_size = 1000;
  const double untied = CountParameters(s).total;
  s.tied_embeddings = true;
  EXPECT_DOUBLE_EQ(untied - CountParameters(s).total, 1000.0 * 64);
}

TEST(ParameterCounts, MemoFollowsEveryDimension) {
  // CountParameters keeps the last shape's counts per thread: a shape edited in place must be
  // counted again. Llama 3 8B by hand (ParameterCounts.Llama3_8B_ByHand): 8,030,261,248; one
  // layer fewer removes 218,112,000 (attention 4096 x (4096 + 2 x 1024 + 4096) + FFN
  // 3 x 4096 x 14336, + two 4096-wide norms = 218,112,000).
  ModelShape s;
  s.layers = 32; s.hidden_size = 4096; s.attention_heads = 32; s.kv_heads = 8;
  s.ffn_hidden_size = 14336; s.ffn_type = FfnType::kSwiGlu; s.vocab_size = 128256;
  s.norm_type = NormType::kRmsNorm;
  EXPECT_DOUBLE_EQ(CountParameters(s).total, 8030261248.0);
  s.layers = 31;
  EXPECT_DOUBLE_EQ(CountParameters(s).total, 8030261248.0 - 218112000.0);
  s.layers = 32;
  s.moe.routed_experts = 8; s.moe.top_k = 2; s.moe.expert_ffn_hidden_size = 14336;
  EXPECT_GT(CountParameters(s).total, 8030261248.0);
  s.moe = MoeShape{};
  EXPECT_DOUBLE_EQ(CountParameters(s).total, 8030261248.0);
}

TEST(ModelShapeValidation, NamesFieldAndReason) {
  ModelShape s;
  s.layers = 2; s.hidden_size = 64; s.attention_heads = 6; s.kv_heads = 4; s.vocab_size = 10;
  absl::Status st = ValidateModelShape(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("model.shape.kv_heads"), std::string::npos) << st;
}

}  // namespace
}  // namespace stepcast
