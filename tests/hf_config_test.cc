// Hugging Face config.json import for the Llama, Mixtral, Qwen-MoE, DeepSeek and GPT-2 families.
#include "core/model_shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/architectures.h"
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

// Nemotron 3 Nano's config.json (the keys of Megatron-Bridge's fixture
// tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py @067f987 with the MoE keys of
// Megatron-LM's NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh: 128 experts top-6 of 1856, shared 3712)
// reads as the preset built from Megatron-Bridge's recipe; a dense Nemotron-H config drops the
// config class's expert defaults; bad patterns name the key.
TEST(HfConfig, NemotronHHybridIsItsPattern) {
  absl::StatusOr<HfImport> nano = LoadHfConfigWithNotes(Example("nemotron-3-nano-30b-a3b-config.json"));
  ASSERT_TRUE(nano.ok()) << nano.status();
  EXPECT_EQ(nano->family, "nemotron_h");
  const ModelShape preset = *testing::BuiltinCatalog().FindModel("nemotron-3-nano-30b-a3b");
  const ModelShape a = nano->shape.Resolved(), b = preset.Resolved();
  EXPECT_EQ(a.hybrid_layer_pattern, b.hybrid_layer_pattern);
  EXPECT_EQ(a.layers, 52);
  EXPECT_TRUE(a.mamba == b.mamba);
  EXPECT_TRUE(a.moe == b.moe);
  EXPECT_EQ(a.ffn_type, FfnType::kSquaredRelu);
  EXPECT_EQ(CountParameters(a).total, CountParameters(b).total);
  const std::string dense = R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*-M-", "hidden_size": 1024,
    "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 4096,
    "mamba_num_heads": 32, "mamba_head_dim": 64})";
  absl::StatusOr<HfImport> d = ReadHfConfig(dense, "dense.json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->shape.moe.enabled());
  EXPECT_EQ(d->shape.HybridCounts().mamba, 3);
  EXPECT_EQ(d->shape.layers, 7);
  auto err = [](const std::string& text) {
    absl::StatusOr<HfImport> r = ReadHfConfig(text, "c.json");
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_THAT(err(R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M-G*"})"),
              ::testing::HasSubstr("hybrid_override_pattern: 'G' at position 2"));
  EXPECT_THAT(err(R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*", "num_nextn_predict_layers": 1})"),
              ::testing::HasSubstr("hybrid_mtp_pattern: must name the MTP module's layers"));
  EXPECT_THAT(err(R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*", "num_nextn_predict_layers": 1,
                      "mtp_hybrid_override_pattern": "*/E"})"),
              ::testing::HasSubstr("mtp_hybrid_override_pattern: '/' at position 1"));
  EXPECT_THAT(err(R"({"model_type": "nemotron_h", "layers_block_type": ["mamba", "mlp", "conv"]})"),
              ::testing::HasSubstr("entry 2 'conv'"));
  absl::StatusOr<HfImport> listed = ReadHfConfig(
      R"({"model_type": "nemotron_h", "layers_block_type": ["linear_attention", "mlp", "full_attention", "mlp"]})", "l.json");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->shape.hybrid_layer_pattern, "M-*-");
  // transformers' precedence (configuration_nemotron_h.py): layers_block_type over
  // hybrid_override_pattern, the legacy mamba_n_groups / mamba_chunk_size over n_groups /
  // chunk_size; the shared expert is one block of moe_shared_expert_intermediate_size
  // (Megatron-Bridge's bridge maps no n_shared_experts).
  absl::StatusOr<HfImport> both = ReadHfConfig(
      R"({"model_type": "nemotron_h", "layers_block_type": ["mamba", "moe", "attention", "moe"],
          "hybrid_override_pattern": "M-M-", "n_groups": 8, "mamba_n_groups": 4, "chunk_size": 128,
          "mamba_chunk_size": 256, "n_routed_experts": 16, "moe_shared_expert_intermediate_size": 1024,
          "n_shared_experts": 2})",
      "b.json");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->shape.hybrid_layer_pattern, "ME*E");
  EXPECT_EQ(both->shape.mamba.num_groups, 4);
  EXPECT_EQ(both->shape.mamba.chunk_size, 256);
  EXPECT_EQ(both->shape.moe.shared_experts, 1);
  EXPECT_EQ(both->shape.moe.shared_expert_ffn_hidden_size, 1024);
  // A pattern without Mamba layers drops the mixer keys the config class always writes; a zero
  // mixer dimension is an error naming the key (transformers would build a broken mixer).
  absl::StatusOr<HfImport> attn_only = ReadHfConfig(
      R"({"model_type": "nemotron_h", "hybrid_override_pattern": "*-*-", "mamba_num_heads": 64, "ssm_state_size": 128})",
      "a.json");
  ASSERT_TRUE(attn_only.ok()) << attn_only.status();
  EXPECT_EQ(err(R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M-*-", "mamba_num_heads": 0})"),
            "c.json: mamba_num_heads: must be at least 1 (got 0)");
}

TEST(ArchitectureRegistry, LoadsAndLooksUpFamilies) {
  auto reg = ArchitectureRegistry::Builtin();
  ASSERT_TRUE(reg.ok()) << reg.status();
  const ArchitectureRegistry& r = **reg;
  // Every entry names its source.
  for (const std::string& name : r.Names()) {
    SCOPED_TRACE(name);
    EXPECT_GT(r.Find(name)->sources_size(), 0);
  }
  // Model names as published runs and recipes write them.
  struct Case {
    const char* model;
    bool moe;
    const char* family;
  } cases[] = {
      {"GPT-OSS 120B", true, "gpt_oss"},       {"GPT-3 175B", false, "gpt"},
      {"MT-NLG 530B", false, "gpt"},           {"LLAMA3.1_405B", false, "llama"},
      {"Llama 3.1 8B", false, "llama"},        {"Llama 2 70B (MaxText)", false, "llama2"},
      {"Llama 4 Maverick 400B", true, "llama4"}, {"Qwen3-30B-A3B", true, "qwen3_moe"},
      {"Qwen3-8B", false, "qwen3"},            {"DeepSeekV3 (w/o MTP)", true, "deepseek_v3"},
      {"DeepSeek-V2", true, "deepseek_v2"},    {"Kimi K2", true, "kimi_k2"},
      {"Nemotron-4 340B", false, "nemotron"},  {"Nemotron-H 56B", false, "nemotron_h"},
      {"MPT-7b", false, "mpt"},                {"Grok-1 314B", true, "grok"},
      {"Mixtral 8x7B", true, "mixtral"},       {"Skywork-MoE 146B", true, "skywork_moe"},
      {"BLOOM 176B", false, "bloom"},          {"OPT-175B", false, "opt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const v1::Architecture* a = r.ForModelName(c.model, c.moe);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->name(), c.family);
  }
  EXPECT_EQ(r.ForModelName("Falcon 40B", false), nullptr);
  const v1::FamilyModel* maverick = ArchitectureRegistry::ModelOf(*r.Find("llama4"), "Llama 4 Maverick 400B");
  ASSERT_NE(maverick, nullptr);
  EXPECT_EQ(maverick->preset(), "llama4-maverick");
  // Every named model's preset is in the catalog.
  for (const std::string& name : r.Names()) {
    for (const v1::FamilyModel& fm : r.Find(name)->models()) {
      EXPECT_TRUE(testing::BuiltinCatalog().FindModel(fm.preset()).ok()) << name << ": " << fm.preset();
    }
  }
  // The importers' other names for families.
  ASSERT_NE(r.ForTorchtitanModule("llama4"), nullptr);
  EXPECT_EQ(r.ForTorchtitanModule("llama4")->name(), "llama4");
  ASSERT_NE(r.ForMegatronProvider("GPTOSSProvider120B"), nullptr);
  EXPECT_EQ(r.ForMegatronProvider("GPTOSSProvider120B")->name(), "gpt_oss");
  ASSERT_NE(r.ForHfModelType("Qwen3_MoE"), nullptr);
  EXPECT_EQ(r.ForHfModelType("qwen3_moe")->name(), "qwen3_moe");
  // keys_from: the Llama keys with the family's own replacing those of the same name.
  std::vector<v1::HfKey> keys = r.HfKeys(*r.Find("gpt_oss"));
  int head_dim_keys = 0;
  for (const auto& k : keys) head_dim_keys += k.key() == "head_dim";
  EXPECT_EQ(head_dim_keys, 1);
}

// Hybrid Mamba/attention models under the names their publishers and tables use: Nemotron-H
// hybrids (Nemotron-H, Nemotron Nano v2, Nemotron 3 Nano / Super / Ultra) resolve to nemotron_h,
// whatever "Mamba" the name also states, and Nemotron 3.5 Lightning; the hybrids the model does
// not describe (Mamba-1 and parallel-head hybrids, a bare "Mamba") to the
// refused hybrid_ssm, whatever transformer family's name they also contain; Nemotron-4 (and the
// 2023 attention-only Nemotron-3 8B) keep the nemotron family. Names: Megatron-Bridge
// docs/performance-summary-archive.md tables "Nemotron_3_Nano", "Nemotron_3_Super"; HF id
// NVIDIA-Nemotron-3-Nano-30B-A3B (Megatron-Bridge docs/models/llm/nemotron3.md); "Nemotron 3
// Ultra is a 550B total / A55B active hybrid Mamba-Transformer MoE" (Megatron-Bridge
// docs/models/nemotron/nemotron3-ultra.md); HF model_type nemotron_h; MambaInLlama's distilled
// "Llama3.2-Mamba2-3B" (arXiv:2408.15237).
TEST(ArchitectureRegistry, HybridNamesResolveToTheHybridFamily) {
  auto reg = ArchitectureRegistry::Builtin();
  ASSERT_TRUE(reg.ok()) << reg.status();
  const ArchitectureRegistry& r = **reg;
  struct Case {
    const char* model;
    bool moe;
    const char* family;
  } cases[] = {
      {"Nemotron_3_Nano", true, "nemotron_h"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B", true, "nemotron_h"},
      {"Nemotron 3 Nano (30B-A3.5B, hybrid Mamba-2/MoE)", true, "nemotron_h"},
      {"Nemotron 3 Super", true, "nemotron_h"},
      {"Nemotron_3_Super", true, "nemotron_h"},
      {"NVIDIA-Nemotron-3-Super-120B-A12B-BF16", true, "nemotron_h"},
      {"Nemotron-3-Ultra 550B", true, "nemotron_h"},
      {"Nemotron_3_5_Lightning", true, "nemotron_h"},
      {"NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", true, "nemotron_h"},
      {"NemotronH Nano", false, "nemotron_h"},
      {"nemotron_h 8B", false, "nemotron_h"},
      {"Nemotron-H 56B", false, "nemotron_h"},
      {"Nemotron5-H_56B", false, "nemotron_h"},
      {"NVIDIA-Nemotron-Nano-9B-v2", false, "nemotron_h"},
      {"Nemotron 30B (hybrid Mamba-2/MoE)", true, "hybrid_ssm"},
      {"Llama3.2-Mamba2-3B", false, "hybrid_ssm"},
      {"Jamba 1.5 Mini", true, "hybrid_ssm"},
      {"Nemotron-4 15B", false, "nemotron"},
      {"Nemotron-4 340B", false, "nemotron"},
      {"Nemotron-340B", false, "nemotron"},
      {"Nemotron-22B", false, "nemotron"},
      {"Nemotron-3 8B", false, "nemotron"},
      // NeMo 2.0's attention-only nemotron3_8b / _22b recipes (review of 2026-11-28, H1).
      {"nemotron3_8b", false, "nemotron"},
      {"Nemotron3 22B", false, "nemotron"},
      {"Nemotron3-8B-Base-4k", false, "nemotron"},
      {"Nemotron3 Nano 30B", true, "nemotron_h"},
      // NVIDIA's Llama-Nemotron models are Llama transformers (review of 2026-11-29: the held-out
      // style name below resolved to nemotron_h's "nemotron_nano").
      {"Llama_3.1_Nemotron_Nano_4B_v1.1", false, "llama"},
      {"Llama-3.1-Nemotron-Nano-8B-v1", false, "llama"},
      {"Llama 3.2 3B", false, "llama"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const v1::Architecture* a = r.ForModelName(c.model, c.moe);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->name(), c.family);
  }
}

// The rule itself, on a registry of two entries: a refused family's pattern anywhere in the name
// wins over a supported family's earlier or longer one; among supported families the earliest,
// then the longest, pattern wins.
TEST(ArchitectureRegistry, RefusedFamilyNamesWinWhereverTheyStand) {
  ArchitectureRegistry r;
  ASSERT_TRUE(r.Add("a.yaml", "name: \"alpha\"\nsources: [\"s\"]\nmodel_names: [\"alpha\", \"alpha-long\"]\n").ok());
  ASSERT_TRUE(r.Add("g.yaml", "name: \"gamma\"\nsources: [\"s\"]\nmodel_names: [\"gam\"]\n").ok());
  ASSERT_TRUE(
      r.Add("b.yaml", "name: \"beta\"\nsources: [\"s\"]\nmodel_names: [\"bx\"]\nrefused: \"has layers we do not model\"\n")
          .ok());
  struct Case {
    const char* model;
    const char* family;
  } cases[] = {
      {"Alpha 7B", "alpha"},         {"Alpha-Long 7B gam", "alpha"}, {"gam alpha", "gamma"},
      {"Alpha-Long 7B bx", "beta"},  {"Alpha 7B (bx)", "beta"},      {"bx", "beta"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const v1::Architecture* a = r.ForModelName(c.model, false);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->name(), c.family);
  }
  EXPECT_EQ(r.ForModelName("delta", false), nullptr);
  // A hybrid family (hybrid: true) competes with the refused one by place, and with a transformer
  // family by place where no refused pattern occurs.
  ASSERT_TRUE(r.Add("h.yaml", "name: \"eta\"\nsources: [\"s\"]\nmodel_names: [\"hx\"]\nhybrid: true\n").ok());
  for (auto [model, family] : {std::pair<const char*, const char*>{"hx (bx)", "eta"}, {"bx hx", "beta"},
                               {"Alpha 7B hx", "alpha"}, {"hx alpha", "eta"}, {"Alpha hx bx", "eta"}}) {
    SCOPED_TRACE(model);
    const v1::Architecture* a = r.ForModelName(model, false);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->name(), family);
  }
}


TEST(ArchitectureRegistry, MalformedEntriesAreErrors) {
  ArchitectureRegistry r;
  EXPECT_THAT(std::string(r.Add("x.yaml", "name: \"x\"\n").message()), ::testing::HasSubstr("sources"));
  absl::Status s = r.Add("y.yaml", R"(name: "y"
sources: ["s"]
hf: {model_types: ["y"], keys: [{key: "n", field: "layerz"}]})");
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("'layerz' is not a field the reader sets"));
  s = r.Add("z.yaml", R"(name: "z"
sources: ["s"]
hf: {model_types: ["z"], keys: [{key: "n", field: "layers", rule: "magic"}]})");
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("'magic' is not a known rule"));
  ASSERT_TRUE(r.Add("a.yaml", "name: \"a\"\nsources: [\"s\"]\nhf: {model_types: [\"t\"], keys_from: \"nope\"}\n").ok());
  EXPECT_THAT(std::string(r.Check().message()), ::testing::HasSubstr("keys_from: 'nope' is not in the registry"));
  EXPECT_THAT(std::string(r.Add("b.yaml", "name: \"b\"\nsources: [\"s\"]\nhf: {model_types: [\"T\"]}\n").message()),
              ::testing::HasSubstr("'T' is already read by a"));
}

}  // namespace
}  // namespace stepcast
