// NeMo 2 and Megatron-Bridge launch lines (issue 10): recipes map to presets with the NeMo 2
// recipes' own defaults (read from the recipe files, cited in proto/nemo_args.cc); overrides
// are applied or listed.
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/launch_args.h"
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
  auto r = JobFromCommand(Split("torchrun --nproc_per_node=8 scripts/training/run_recipe.py --recipe "
                                "llama31_405b_pretrain_config recipe.model.tensor_model_parallel_size=8 "
                                "model.pipeline_model_parallel_size=8 model.virtual_pipeline_model_parallel_size=8 "
                                "model.sequence_parallel=true dataset.sequence_length=8192 train.global_batch_size=2048 "
                                "model.recompute_granularity=full checkpoint.save=/ckpt"),
                          "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, "megatron-bridge");
  EXPECT_EQ(r->spec.model().preset(), "llama3-405b");
  EXPECT_EQ(r->spec.parallelism().tp(), 8);
  EXPECT_EQ(r->spec.parallelism().pp(), 8);
  EXPECT_EQ(r->spec.parallelism().vpp(), 8);
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_THAT(r->ignored, Contains("checkpoint.save=/ckpt"));
  EXPECT_THAT(r->ignored, Contains("--nproc_per_node=8"));
}

TEST(Nemo, ErrorsNameTheRecipeOrKey) {
  const struct { const char* cmd; const char* error; } cases[] = {
      {"nemo llm pretrain --factory llama9_1t", "--factory: 'llama9_1t' is not a NeMo 2 recipe known here"},
      {"run_recipe.py --recipe llama3_8b_pretrain_config train.global_batch_size=8",
       "dataset.sequence_length: required"},
      {"nemo llm pretrain --factory llama3_8b trainer.strategy.tensor_model_parallel_size=two",
       "trainer.strategy.tensor_model_parallel_size: 'two' is not an integer"},
  };
  for (const auto& c : cases) {
    auto r = JobFromCommand(Split(c.cmd), "");
    ASSERT_FALSE(r.ok()) << c.cmd;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace stepcast
