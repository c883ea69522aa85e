// Parameter counts against the model cards and papers (independent published totals).
#include "core/model_shape.h"
#include "gmock/gmock.h"
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
      // Two-digit card figures: 17B active reads 16.5-17.5B (3%, tol x 1.5 below).
      {"llama4-maverick", 400e9, 17e9, 0.02, "Llama 4 model card: Maverick 400B total, 17B active (text decoder)"},
      {"kimi-k2", 1.04e12, 32.6e9, 0.014, "Kimi K2 report (arXiv:2507.20534): 1.04T total, 32.6B activated"},
      {"gpt-oss-120b", 116.83e9, 5.13e9 + 201088.0 * 2880, 0.002,
       "arXiv:2508.10925 Table 1: 116.83B total, 5.13B active without the input table (+201088 x 2880 with it)"},
      // Hybrid Mamba-2 models (hybrid_layer_pattern).
      // Card figures to 0.1B: 3.6B active reads 3.55-3.65B (1.4%; tol x 1.5).
      {"nemotron-3-nano-30b-a3b", 31.6e9, 3.6e9, 0.01,
       "NVIDIA-Nemotron-3-Nano-30B-A3B card: 31.6B total, 3.2B active (3.6B including embeddings)"},
      {"nemotron-nano-9b-v2", 8.89e9, 8.89e9, 0.001, "NVIDIA-Nemotron-Nano-9B-v2 (HF safetensors): 8.89B"},
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

// A hybrid Mamba-2 model counted tensor by tensor by Megatron-Bridge's verification card:
// examples/model_verification_cards/nemotron-3-nano-4b/card.yaml @067f987 ("all 263 tensors and
// 3,973,556,832 parameters match" the HF checkpoint). Exact: every Mamba layer's in_proj, fused
// pre-norm, conv weights and biases, A_log, D, dt_bias, gated norm and out_proj; the attention and
// MLP layers' single norms; untied embedding and head; the final norm.
TEST(ParameterCounts, HybridMambaModelExactlyAsItsVerificationCard) {
  absl::StatusOr<ModelShape> m = testing::BuiltinCatalog().FindModel("nemotron-3-nano-4b");
  ASSERT_TRUE(m.ok()) << m.status();
  const ParameterCounts p = CountParameters(*m);
  EXPECT_EQ(static_cast<int64_t>(p.total), 3973556832);
  EXPECT_EQ(m->HybridCounts().mamba, 21);
  EXPECT_EQ(m->HybridCounts().attention, 4);
  EXPECT_EQ(m->HybridCounts().mlp, 17);
  EXPECT_EQ(m->AttentionLayerCount(), 4);
  // The 30B-A3B card's "3.2B active" leaves the input table out (arXiv-style count of the head).
  absl::StatusOr<ModelShape> nano = testing::BuiltinCatalog().FindModel("nemotron-3-nano-30b-a3b");
  ASSERT_TRUE(nano.ok()) << nano.status();
  EXPECT_NEAR(CountParameters(*nano).active_without_input_embedding, 3.2e9, 0.05e9);
  EXPECT_EQ(nano->MoeLayerCount(), 23);
  EXPECT_TRUE(nano->IsMoeLayer(1));
  EXPECT_FALSE(nano->IsMoeLayer(0));
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

TEST(ParameterCounts, ArchitectureFields) {
  // gpt-oss-20b by hand (arXiv:2508.10925 Table 1: 20.91B total, 3.61B active without the input
  // embedding): per layer q and o 2880 x 4096, k and v 2880 x 512 with their biases (4096 + 512
  // + 512 + 2880), 64 sink logits, 32 experts of 3 x 2880 x 2880 with biases 2 x 2880 + 2880,
  // router 2880 x 32 + 32, two RMSNorms; embedding and head 201088 x 2880; final norm.
  ModelShape s;
  s.layers = 24; s.hidden_size = 2880; s.attention_heads = 64; s.kv_heads = 8; s.head_dim = 64;
  s.ffn_hidden_size = 2880; s.ffn_type = FfnType::kSwiGlu; s.vocab_size = 201088; s.linear_bias = true;
  s.norm_type = NormType::kRmsNorm; s.moe.routed_experts = 32; s.moe.top_k = 4; s.moe.expert_ffn_hidden_size = 2880;
  s.attention_sinks = true; s.local_attention_window = 128; s.global_attention_every = 2;
  const double attn = 2 * 2880.0 * 4096 + 2 * 2880.0 * 512 + (4096 + 512 + 512 + 2880) + 64;
  const double expert = 3 * 2880.0 * 2880 + 2 * 2880 + 2880;
  const double router = 2880.0 * 32 + 32;
  const double layer_total = attn + 32 * expert + router + 2 * 2880;
  const double layer_active = attn + 4 * expert + router + 2 * 2880;
  const ParameterCounts c = CountParameters(s);
  EXPECT_DOUBLE_EQ(c.total, 24 * layer_total + 2 * 201088.0 * 2880 + 2880);
  EXPECT_DOUBLE_EQ(c.active_without_input_embedding, 24 * layer_active + 201088.0 * 2880 + 2880);
  EXPECT_DOUBLE_EQ(c.active, c.active_without_input_embedding + 201088.0 * 2880);
  EXPECT_NEAR(c.total / 20.91e9, 1.0, 0.001);
  EXPECT_NEAR(c.active_without_input_embedding / 3.61e9, 1.0, 0.002);
  // The window and the sinks: sinks add 64 per layer; the window adds nothing.
  ModelShape no_sinks = s;
  no_sinks.attention_sinks = false;
  no_sinks.local_attention_window = 0;
  no_sinks.global_attention_every = 0;
  EXPECT_DOUBLE_EQ(c.total - CountParameters(no_sinks).total, 24 * 64.0);
  EXPECT_EQ(s.LocalAttentionLayerCount(), 12);

  // BLOOM's embedding LayerNorm (2h) and ALiBi (no table).
  ModelShape b;
  b.layers = 2; b.hidden_size = 64; b.attention_heads = 4; b.vocab_size = 1000; b.tied_embeddings = true;
  const double base = CountParameters(b).total;
  b.embedding_norm = true;
  b.position_encoding = PositionEncoding::kAlibi;
  EXPECT_DOUBLE_EQ(CountParameters(b).total - base, 2 * 64.0);

  // One MTP module of a dense Llama-style model: a layer, the 2h x h projection, three norms
  // (Megatron-Core MultiTokenPredictionLayer enorm, hnorm, final_layernorm; DeepSeek-V3's HF
  // checkpoint: enorm, hnorm, shared_head.norm).
  ModelShape l;
  l.layers = 32; l.hidden_size = 4096; l.attention_heads = 32; l.kv_heads = 8; l.ffn_hidden_size = 14336;
  l.ffn_type = FfnType::kSwiGlu; l.vocab_size = 128256; l.norm_type = NormType::kRmsNorm;
  const double total = CountParameters(l).total;
  l.mtp_layers = 1;
  EXPECT_DOUBLE_EQ(CountParameters(l).total, total);  // the main model's count is unchanged
  EXPECT_DOUBLE_EQ(CountParameters(l).mtp, 218112000.0 + 2 * 4096.0 * 4096 + 3 * 4096);
  // Depths sharing one layer's weights (mtp_use_repeated_layer): one module's parameters.
  l.mtp_layers = 2;
  l.mtp_repeated_layer = true;
  EXPECT_DOUBLE_EQ(CountParameters(l).mtp, CountParameters(l).mtp_module);
  l.mtp_repeated_layer = false;
  EXPECT_DOUBLE_EQ(CountParameters(l).mtp, 2 * CountParameters(l).mtp_module);
}

TEST(ModelShape, MoeLayersAndLocalLayers) {
  ModelShape m;
  m.layers = 48; m.hidden_size = 64; m.attention_heads = 4; m.vocab_size = 10;
  m.moe.routed_experts = 8; m.moe.top_k = 1; m.moe.expert_ffn_hidden_size = 64;
  m.moe.first_dense_layers = 1; m.moe.layer_freq = 2;  // Llama 4 Maverick: layers 1, 3, ..., 47
  EXPECT_EQ(m.MoeLayerCount(), 24);
  int moe = 0;
  for (int i = 0; i < 48; ++i) moe += m.IsMoeLayer(i);
  EXPECT_EQ(moe, 24);
  EXPECT_TRUE(m.IsMoeLayer(47));
  EXPECT_FALSE(m.IsMoeLayer(46));
  m.local_attention_window = 1024;
  m.global_attention_every = 6;  // Gemma 3: 5 local per global
  EXPECT_EQ(m.LocalAttentionLayerCount(), 40);
  m.global_attention_every = 0;
  EXPECT_EQ(m.LocalAttentionLayerCount(), 48);
}

TEST(ModelShapeValidation, ArchitectureFieldsAreChecked) {
  ModelShape s;
  s.layers = 2; s.hidden_size = 64; s.attention_heads = 4; s.vocab_size = 10;
  ModelShape bad = s;
  bad.global_attention_every = 2;
  EXPECT_THAT(ValidateModelShape(bad).message(), ::testing::HasSubstr("model.shape.global_attention_every: needs"));
  bad = s;
  bad.final_logit_softcap = -1;
  EXPECT_THAT(ValidateModelShape(bad).message(), ::testing::HasSubstr("model.shape.final_logit_softcap"));
  bad = s;
  bad.position_encoding = PositionEncoding::kAlibi;
  bad.learned_position_embeddings = 128;
  EXPECT_THAT(ValidateModelShape(bad).message(), ::testing::HasSubstr("model.shape.learned_position_embeddings"));
  bad = s;
  bad.mtp_layers = 3;
  EXPECT_THAT(ValidateModelShape(bad).message(), ::testing::HasSubstr("model.shape.mtp_layers"));
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
