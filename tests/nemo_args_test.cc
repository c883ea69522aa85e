// NeMo 2 and Megatron-Bridge launch lines (issue 10): recipes map to presets with the NeMo 2
// recipes' own defaults (read from the recipe files, cited in proto/nemo_args.cc); overrides
// are applied or listed.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/launch_args.h"
#include "proto/codec.h"
#include "proto/nemo_args.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(Nemo, RecipeDefaultsAndOverrides) {
  // nemo/collections/llm/recipes/llama3_70b.py: TP4 PP4 VPP5 CP2 SP, seq 8192, GBS 512.
  auto r = JobFromCommand(Split("nemo llm pretrain --factory llama3_70b trainer.num_nodes=16 "
                                "trainer.strategy.context_parallel_size=1 data.global_batch_size=1024 "
                                "log.log_dir=/x"),
                          "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, "nemo");
  EXPECT_EQ(r->spec.model().preset(), "llama3-70b");
  EXPECT_EQ(r->spec.parallelism().tp(), 4);
  EXPECT_EQ(r->spec.parallelism().pp(), 4);
  EXPECT_EQ(r->spec.parallelism().vpp(), 5);
  EXPECT_EQ(r->spec.parallelism().cp(), 1);
  EXPECT_TRUE(r->spec.parallelism().sequence_parallel());
  EXPECT_EQ(r->spec.training().seq_length(), 8192);
  EXPECT_EQ(r->spec.training().global_batch_size(), 1024);
  EXPECT_THAT(r->ignored, Contains("log.log_dir=/x"));
  EXPECT_THAT(r->ignored, Contains(HasSubstr("trainer.num_nodes=16")));
  auto spec = r->Finalize(128, "h100-sxm");
  ASSERT_TRUE(spec.ok());
  auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 8);  // 128 / (TP4 x PP4)
}

TEST(Nemo, MixtralRecipeAndFactoryArguments) {
  // nemo/collections/llm/recipes/mixtral_8x7b.py: TP1 PP4 VPP8 EP8, seq 4096, GBS 512.
  auto r = JobFromCommand({"nemo", "llm", "pretrain", "--factory", "mixtral_8x7b(num_nodes=8, name='m')",
                           "trainer.plugins=bf16_with_fp8_mixed"},
                          "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.model().preset(), "mixtral-8x7b");
  EXPECT_EQ(r->spec.parallelism().ep(), 8);
  EXPECT_EQ(r->spec.parallelism().vpp(), 8);
  EXPECT_EQ(r->spec.training().seq_length(), 4096);
  EXPECT_EQ(r->spec.training().precision().gemm(), v1::D_TYPE_FP8);
  EXPECT_THAT(r->ignored, Contains(HasSubstr("mixtral_8x7b(num_nodes=8")));
}

TEST(Nemo, MegatronBridgeRecipe) {
  // A legacy name still exported (src/megatron/bridge/recipes/llama/llama3.py alias of
  // llama31_405b_pretrain_1024gpu_h100_bf16_config? the data says which); overrides on top.
  auto r = JobFromCommand(Split("torchrun --nproc_per_node=8 scripts/training/run_recipe.py --recipe "
                                "llama31_405b_pretrain_config recipe.model.tensor_model_parallel_size=8 "
                                "model.pipeline_model_parallel_size=8 model.virtual_pipeline_model_parallel_size=8 "
                                "model.sequence_parallel=true dataset.sequence_length=8192 train.global_batch_size=2048 "
                                "model.recompute_granularity=full checkpoint.save=/ckpt"),
                          "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, "megatron-bridge");
  EXPECT_EQ(r->spec.framework().preset(), "megatron-bridge");
  EXPECT_EQ(r->spec.model().preset(), "llama3-405b");
  EXPECT_EQ(r->spec.parallelism().tp(), 8);
  EXPECT_EQ(r->spec.parallelism().pp(), 8);
  EXPECT_EQ(r->spec.parallelism().vpp(), 8);
  EXPECT_EQ(r->spec.training().seq_length(), 8192);
  EXPECT_EQ(r->spec.training().global_batch_size(), 2048);
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_THAT(r->ignored, Contains("checkpoint.save=/ckpt"));
  // torchrun's own flag is the launcher's, not the recipe's: not listed.
  EXPECT_THAT(r->ignored, ::testing::Not(Contains("--nproc_per_node=8")));
  EXPECT_EQ(r->launcher_gpus, 8);
}

// Issue 23 item 3: the current Megatron-Bridge recipes as data
// (presets/launchers/megatron-bridge.toml, NVIDIA-NeMo/Megatron-Bridge 067f987d), their layout
// and batch defaults read from the recipe file; the names are the current ones.
TEST(Nemo, CurrentMegatronBridgeRecipesGiveTheirLayoutAndBatch) {
  const struct {
    const char* recipe;
    const char* model;
    int64_t tp, pp, vpp, cp, ep, seq, gbs, mbs;
  } cases[] = {
      // src/megatron/bridge/recipes/llama/h100/llama3.py: TP1 PP1 CP2, 8192 x 512, mbs 1.
      {"llama3_8b_pretrain_2gpu_h100_bf16_config", "llama3-8b", 1, 1, 0, 2, 1, 8192, 512, 1},
      // same file: TP4 PP4 VPP5 CP2 SP, 8192 x 512.
      {"llama3_70b_pretrain_32gpu_h100_bf16_config", "llama3-70b", 4, 4, 5, 2, 1, 8192, 512, 1},
      // perf_recipes/deepseek/h100/deepseek_v3.py: TP2 PP8 VPP4 EP64, 4096 x 16384.
      {"deepseek_v3_pretrain_1024gpu_h100_bf16_config", "deepseek-v3", 2, 8, 4, 1, 64, 4096, 16384, 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.recipe);
    auto r = JobFromCommand(Split(absl::StrCat("python scripts/training/run_recipe.py --recipe ", c.recipe)), "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec.model().preset(), c.model);
    const v1::ParallelismSpec& p = r->spec.parallelism();
    EXPECT_EQ(p.tp(), c.tp);
    EXPECT_EQ(p.pp(), c.pp);
    EXPECT_EQ(p.vpp(), c.vpp);
    EXPECT_EQ(p.cp(), c.cp);
    EXPECT_EQ(p.ep(), c.ep);
    EXPECT_EQ(r->spec.training().seq_length(), c.seq);
    EXPECT_EQ(r->spec.training().global_batch_size(), c.gbs);
    EXPECT_EQ(r->spec.training().micro_batch_size(), c.mbs);
  }
  // DeepSeek-V3: the recipe sets expert tensor parallelism 1 (model.expert_tensor_parallel_size = 1)
  // and places 61 layers with the layout "Et|(tt|)*30mL".
  auto ds = JobFromCommand(Split("run_recipe.py --recipe deepseek_v3_pretrain_1024gpu_h100_bf16_config"), "");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->spec.parallelism().etp(), 1);
  EXPECT_THAT(ds->ignored, Contains(HasSubstr("model.pipeline_model_parallel_layout=Et|(tt|)*30mL")));
  EXPECT_THAT(ds->spec.training().recompute_modules(), ::testing::ElementsAre("mla_up_proj", "mlp"));
  // The runner's --model STEM --mode pretrain and its short options (run_recipe.py).
  auto m = JobFromCommand(Split("python run_recipe.py --model llama3_8b --mode pretrain -tp 2 -gb 256 -sl 4096"), "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec.model().preset(), "llama3-8b");
  EXPECT_EQ(m->spec.parallelism().tp(), 2);
  EXPECT_EQ(m->spec.training().global_batch_size(), 256);
  EXPECT_EQ(m->spec.training().seq_length(), 4096);
  // Every recipe of the data is read, or refused with its reason (a model stepcast has no shape
  // for, a hybrid, a vision-language model, NVFP4).
  int read = 0, refused = 0;
  std::ifstream in(std::string(STEPCAST_SOURCE_DIR) + "/presets/launchers/megatron-bridge.toml");
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 3 || line[0] != '[') continue;
    const std::string name = line.substr(1, line.size() - 2);
    auto j = JobFromCommand(Split("run_recipe.py --recipe " + name), "");
    if (j.ok()) {
      ++read;
    } else {
      ++refused;
      const std::string msg(j.status().message());
      EXPECT_TRUE(absl::StrContains(msg, "no shape") || absl::StrContains(msg, "hybrid") ||
                  absl::StrContains(msg, "vision") || absl::StrContains(msg, "NVFP4") ||
                  absl::StrContains(msg, "Gated DeltaNet") || absl::StrContains(msg, "sliding"))
          << name << ": " << msg;
    }
  }
  EXPECT_GT(read, 240);  // 249 at 067f987d; the refusals are NVFP4, hybrids, VL models, gpt-oss without its presets
  std::cerr << "Megatron-Bridge recipes: " << read << " read, " << refused << " refused\n";
}

// The framework preset's recipe (presets/frameworks/megatron-bridge.yaml) gives a job file
// naming Megatron-Bridge and DeepSeek-V3 the recipes' ETP 1 as an assumed input.
TEST(Nemo, BridgeDeepSeekV3EtpIsAnAssumedInput) {
  v1::JobSpec spec;
  spec.mutable_model()->set_preset("deepseek-v3");
  spec.mutable_framework()->set_preset("megatron-bridge");
  spec.mutable_hardware()->set_preset("h100-sxm");
  spec.mutable_cluster()->set_gpu_count(1024);
  v1::ParallelismSpec& p = *spec.mutable_parallelism();
  p.set_tp(2), p.set_pp(8), p.set_ep(64);
  spec.mutable_training()->set_seq_length(4096);
  spec.mutable_training()->set_global_batch_size(4096);
  spec.mutable_training()->set_micro_batch_size(1);
  auto job = JobFromSpec(spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.etp, 1);
  ASSERT_NE(job->assumed, nullptr);
  bool assumed = false;
  for (const auto& a : *job->assumed) assumed = assumed || absl::StrContains(a.field, "parallelism.etp");
  EXPECT_TRUE(assumed);
}

// Nemotron 3 Nano on H100 in FP8 under Megatron-Bridge: v0.3.1's (26.02) performance config
// NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1 recomputes moe, layernorm, core_attn and moe_act
// and dispatches with HybridEP; a job naming neither gets them, listed as assumed; BF16 recomputes
// moe and layernorm only; a job's own values win.
TEST(Nemo, BridgeNemotron3NanoRecipeIsAssumed) {
  auto job = [](const std::string& gemm, const std::string& extra) {
    return testing::JobFromYaml(absl::StrCat(R"(
model: nemotron-3-nano-30b-a3b
hardware: h100-sxm
framework: megatron-bridge
cluster: {gpu_count: 16}
parallelism: {tp: 1, ep: 8}
training: {seq_length: 8192, global_batch_size: 1024, micro_batch_size: 1, precision: {gemm: )",
                                             gemm, "}", extra, "}"));
  };
  auto fp8 = job("fp8", "");
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->training.recompute, Recompute::kSelective);
  EXPECT_THAT(fp8->training.recompute_modules, ::testing::ElementsAre("moe", "layernorm", "core_attn", "moe_act"));
  EXPECT_EQ(fp8->training.moe_dispatcher, MoeDispatcher::kHybridEP);
  bool assumed = false;
  for (const auto& a : *fp8->assumed) assumed = assumed || a.field == "training.recompute_modules";
  EXPECT_TRUE(assumed);
  auto bf16 = job("bf16", "");
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_THAT(bf16->training.recompute_modules, ::testing::ElementsAre("moe", "layernorm"));
  auto own = job("fp8", ", recompute: none, moe_dispatcher: alltoall");
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->training.recompute, Recompute::kNone);
  EXPECT_EQ(own->training.moe_dispatcher, MoeDispatcher::kAllToAll);
}

TEST(Nemo, CurrentNemo2Recipes) {
  // nemo/collections/llm/recipes/qwen3_30b_a3b.py and deepseek_v3.py (NVIDIA/NeMo 8cfedd72).
  auto q = JobFromCommand(Split("nemo llm pretrain --factory qwen3_30b_a3b"), "");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->spec.model().shape().moe().routed_experts(), 128);
  EXPECT_EQ(q->spec.framework().preset(), "nemo");
  auto d = JobFromCommand(Split("nemo llm pretrain --factory deepseek_v3"), "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.model().preset(), "deepseek-v3");
  EXPECT_EQ(d->spec.parallelism().pp(), 16);
  EXPECT_EQ(d->spec.parallelism().ep(), 64);
  EXPECT_EQ(d->spec.training().seq_length(), 4096);
  // NeMo 2's Nemotron-H recipes are the hybrid presets (nemo/collections/llm/recipes/nemotronh_56b.py).
  auto h = JobFromCommand(Split("nemo llm pretrain --factory nemotronh_56b"), "");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->spec.model().preset(), "nemotron-h-56b");
  // NeMo 2's attention-only Nemotron-3 (2023) recipes are not the Nemotron-H hybrids of the same
  // size (nemo/collections/llm/recipes/nemotron3_8b.py: Nemotron3Config8B(NemotronConfig)).
  // Nor is Llama-3.1-Nemotron-Nano-8B (llama31_nemotron_nano_8b.py: Llama31NemotronNano8BConfig, a
  // Llama 3.1 transformer; review of 2026-11-29).
  for (const char* factory : {"nemotron3_8b", "nemotron3_4b", "nemotron3_22b", "llama31_nemotron_nano_8b"}) {
    SCOPED_TRACE(factory);
    auto n3 = JobFromCommand(Split(std::string("nemo llm pretrain --factory ") + factory), "");
    if (n3.ok()) {
      EXPECT_FALSE(n3->spec.model().shape().hybrid_layer_pattern().size() > 0 ||
                   absl::StartsWith(n3->spec.model().preset(), "nemotron-h"));
    } else {
      EXPECT_THAT(std::string(n3.status().message()), ::testing::Not(HasSubstr("hybrid")));
    }
  }
  auto nano = JobFromCommand(Split("nemo llm pretrain --factory nemotron_nano_9b_v2"), "");
  ASSERT_TRUE(nano.ok()) << nano.status();
  EXPECT_EQ(nano->spec.model().preset(), "nemotron-nano-9b-v2");
  // Nemotron 3 Super's canonical H100 recipe (perf_recipes/nemotronh/h100/nemotronh.py @067f987d):
  // the latent-MoE preset, its layout and its MTP depths (model.mtp_num_layers 2).
  auto super = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_super_pretrain_64gpu_h100_bf16_config"), "");
  ASSERT_TRUE(super.ok()) << super.status();
  EXPECT_EQ(super->spec.model().preset(), "nemotron-3-super-120b-a12b");
  EXPECT_EQ(super->spec.training().mtp_layers(), 2);
  EXPECT_EQ(super->spec.parallelism().pp(), 2);
  EXPECT_EQ(super->spec.parallelism().ep(), 32);
  auto ultra = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_ultra_pretrain_config"), "");
  ASSERT_TRUE(ultra.ok()) << ultra.status();
  EXPECT_EQ(ultra->spec.model().preset(), "nemotron-3-ultra-550b-a55b");
  // The Blackwell performance recipes build on the 16-GPU H100 library recipe
  // (perf_recipes/nemotronh/common.py imports it *as* nemotron_3_super_pretrain_config, a name
  // the library also gives the 64-GPU H100 recipe): sequence 8192, no recompute on GB300, the flex
  // dispatcher with HybridEP; the 16-GPU H100 recipe itself the all-to-all dispatcher.
  auto gb300 = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_super_pretrain_64gpu_gb300_fp8mx_config"), "");
  ASSERT_TRUE(gb300.ok()) << gb300.status();
  EXPECT_EQ(gb300->spec.training().seq_length(), 8192);
  EXPECT_NE(gb300->spec.training().recompute(), v1::RECOMPUTE_SELECTIVE);
  EXPECT_EQ(gb300->spec.training().moe_dispatcher(), "hybridep");
  auto h100_16 = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_super_pretrain_16gpu_h100_bf16_config"), "");
  ASSERT_TRUE(h100_16.ok()) << h100_16.status();
  EXPECT_EQ(h100_16->spec.training().moe_dispatcher(), "alltoall");
  EXPECT_EQ(h100_16->spec.training().moe_expert_capacity_factor(), 0);
  // The 64-GPU H100 recipe pads to capacity 1.10 (the preset's recipe, for its layout); a line
  // that turns it off keeps it off (the fields are optional: stated false is not unset).
  auto padded_off = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_super_pretrain_64gpu_h100_bf16_config "
                                         "model.moe_expert_capacity_factor=None"), "");
  ASSERT_TRUE(padded_off.ok()) << padded_off.status();
  ASSERT_TRUE(padded_off->spec.training().has_moe_expert_capacity_factor());
  EXPECT_EQ(padded_off->spec.training().moe_expert_capacity_factor(), 0);
  auto typo = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_super_pretrain_64gpu_h100_bf16_config "
                                   "model.moe_token_dispatcher_type=alltoal"), "");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("'alltoal' is not allgather, alltoall or flex"));
  // DeepSeek-V3's library recipes call apply_flex_dispatcher_backend(cfg.model, backend), which
  // switches the dispatcher to flex (megatron/bridge/training/flex_dispatcher_backend.py): the
  // GB200 perf recipe runs HybridEP, not the all-to-all its earlier assignment says.
  auto dsv3 = JobFromCommand(Split("run_recipe.py --recipe deepseek_v3_pretrain_256gpu_gb200_bf16_config"), "");
  ASSERT_TRUE(dsv3.ok()) << dsv3.status();
  EXPECT_EQ(dsv3->spec.training().moe_dispatcher(), "hybridep");
  // Its CUDA graphs: transformer_engine over attention, router and preprocess (partial capture).
  EXPECT_TRUE(dsv3->spec.training().cuda_graphs());
  EXPECT_THAT(dsv3->spec.training().cuda_graph_scope(), ::testing::ElementsAre("attn", "moe_router", "moe_preprocess"));
  // A scope written as the enum, and a partial scope with the local impl (refused, as arguments.py says).
  auto enum_scope = JobFromCommand(Split("run_recipe.py --recipe deepseek_v3_pretrain_256gpu_gb200_bf16_config "
                                         "model.cuda_graph_scope=[CudaGraphScope.moe_router,CudaGraphScope.moe_preprocess]"), "");
  ASSERT_TRUE(enum_scope.ok()) << enum_scope.status();
  EXPECT_THAT(enum_scope->spec.training().cuda_graph_scope(), ::testing::ElementsAre("moe_router", "moe_preprocess"));
  auto local_attn = JobFromCommand(Split("run_recipe.py --recipe deepseek_v3_pretrain_256gpu_gb200_bf16_config "
                                         "model.cuda_graph_impl=local model.cuda_graph_scope=[attn]"), "");
  ASSERT_FALSE(local_attn.ok());
  EXPECT_THAT(std::string(local_attn.status().message()), HasSubstr("needs cuda_graph_impl transformer_engine"));
  // model.moe_router_fusion (Transformer Engine's fused router) as a line states it.
  auto fused = JobFromCommand(Split("run_recipe.py --recipe deepseek_v3_pretrain_256gpu_gb200_bf16_config "
                                    "model.moe_router_fusion=False"), "");
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(fused->spec.training().has_moe_router_fusion());
  EXPECT_FALSE(fused->spec.training().moe_router_fusion());
  auto fused_on = JobFromCommand(Split("run_recipe.py --recipe deepseek_v3_pretrain_256gpu_gb200_bf16_config "
                                       "model.moe_router_fusion=True"), "");
  ASSERT_TRUE(fused_on.ok()) << fused_on.status();
  EXPECT_TRUE(fused_on->spec.training().moe_router_fusion());
  // Nemotron 3 Ultra's 256-GPU GB300 recipe: Megatron-FSDP, moe_act recomputed, the fused grouped
  // MLP's large inputs offloaded (read as the experts' fc1 output, as the recipe says).
  auto ultra_gb300 = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_ultra_pretrain_256gpu_gb300_fp8mx_config"), "");
  ASSERT_TRUE(ultra_gb300.ok()) << ultra_gb300.status();
  EXPECT_EQ(ultra_gb300->spec.training().sharding(), v1::SHARDING_ZERO3);
  EXPECT_THAT(ultra_gb300->spec.training().offload_modules(), ::testing::ElementsAre("moe_act"));
  // Nemotron 3.5 Lightning's perf recipes build on Nano's model with a 2-depth MTP module.
  auto lightning = JobFromCommand(Split("run_recipe.py --recipe nemotron_3_5_lightning_pretrain_8gpu_gb200_bf16_config"), "");
  ASSERT_TRUE(lightning.ok()) << lightning.status();
  EXPECT_EQ(lightning->spec.model().preset(), "nemotron-3.5-lightning-30b-a3b");
}

TEST(Nemo, ErrorsNameTheRecipeOrKey) {
  const struct { const char* cmd; const char* error; } cases[] = {
      {"nemo llm pretrain --factory llama9_1t", "--factory: 'llama9_1t' is not a NeMo 2 pre-training recipe"},
      {"run_recipe.py --recipe llama3_8b_pretrain_1gpu_h100_bf16_config",
       "recipes of this model: llama3_8b_pretrain_"},
      {"nemo llm pretrain --factory llama3_8b trainer.strategy.tensor_model_parallel_size=two",
       "trainer.strategy.tensor_model_parallel_size: 'two' is not an integer"},
      {"nemo llm pretrain --factory mamba2_hybrid_8b", "a hybrid it describes but has no preset for"},
  };
  for (const auto& c : cases) {
    auto r = JobFromCommand(Split(c.cmd), "");
    ASSERT_FALSE(r.ok()) << c.cmd;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace stepcast
