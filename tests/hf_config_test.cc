// Hugging Face config.json import for the Llama, Mixtral, Qwen-MoE, DeepSeek and GPT-2 families.
#include "core/model_shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/hf_config.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

std::string Example(const char* name) { return std::string(STEPCAST_SOURCE_DIR) + "/examples/hf/" + name; }

TEST(HfConfig, Llama3MatchesThePreset) {
  auto m = LoadHfConfig(Example("llama3-8b-config.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelShape preset = *testing::BuiltinCatalog().FindModel("llama3-8b");
  EXPECT_EQ(m->layers, 32);
  EXPECT_EQ(m->kv_heads, 8);
  EXPECT_EQ(m->ffn_type, FfnType::kSwiGlu);
  EXPECT_DOUBLE_EQ(CountParameters(*m).total, CountParameters(preset).total);
  EXPECT_EQ(m->name, "llama3-8b-config");
}

TEST(HfConfig, MixtralAndDeepSeekV3) {
  auto mix = LoadHfConfig(Example("mixtral-8x7b-config.json"));
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(mix->moe.routed_experts, 8);
  EXPECT_EQ(mix->moe.top_k, 2);
  EXPECT_NEAR(CountParameters(*mix).active, 12.9e9, 0.05e9);
  auto ds = LoadHfConfig(Example("deepseek-v3-config.json"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE(ds->mla.enabled());
  EXPECT_EQ(ds->moe.first_dense_layers, 3);
  EXPECT_EQ(ds->MoeLayerCount(), 58);
  EXPECT_DOUBLE_EQ(CountParameters(*ds).total,
                   CountParameters(*testing::BuiltinCatalog().FindModel("deepseek-v3")).total);
}

TEST(HfConfig, QwenMoeAndGpt2) {
  // Qwen1.5-MoE-A2.7B config fields.
  auto q = ModelShapeFromHfConfig(R"({"model_type": "qwen2_moe", "hidden_size": 2048,
      "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
      "intermediate_size": 5632, "moe_intermediate_size": 1408, "num_experts": 60,
      "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1,
      "vocab_size": 151936, "hidden_act": "silu", "tie_word_embeddings": false})", "qwen.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->moe.routed_experts, 60);
  EXPECT_EQ(q->moe.shared_expert_ffn_hidden_size, 5632);
  // Qwen1.5-MoE-A2.7B: 14.3B total, 2.7B active (model card).
  EXPECT_NEAR(CountParameters(*q).total, 14.3e9, 0.1e9);
  EXPECT_NEAR(CountParameters(*q).active, 2.7e9, 0.05e9);
  // GPT-2 small: 124M parameters (tied, learned positions, biases).
  auto g = ModelShapeFromHfConfig(R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768,
      "n_head": 12, "n_positions": 1024, "vocab_size": 50257})", "gpt2.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR(CountParameters(*g).total, 124.4e6, 0.1e6);
}

TEST(HfConfig, ErrorsNameTheFileAndField) {
  auto m = ModelShapeFromHfConfig(R"({"model_type": "llama", "hidden_size": 4096})", "cfg.json");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m.status().message()), ::testing::HasSubstr("cfg.json: num_hidden_layers: missing"));
  m = ModelShapeFromHfConfig(R"({"model_type": "llama", "num_hidden_layers": "many"})", "cfg.json");
  EXPECT_THAT(std::string(m.status().message()), ::testing::HasSubstr("num_hidden_layers: 'many' is not an integer"));
  m = ModelShapeFromHfConfig("{not json", "cfg.json");
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(LoadHfConfig("/nonexistent.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace stepcast
