// torchtitan as torchtitan reads it (issue 10): every TOML of the real-input corpus
// (tests/data/real_inputs/torchtitan, verbatim copies of torchtitan's train_configs) is
// accepted; the flavors' parameter counts match the models' published counts; the previous
// (--job.config_file + overrides) and current (--module/--config) command lines are read, and
// every override is applied or listed as ignored.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model_shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/codec.h"
#include "proto/launch_args.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::string CorpusDir() { return std::string(STEPCAST_SOURCE_DIR) + "/tests/data/real_inputs/torchtitan"; }

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ModelShape ShapeOf(const ImportedJob& j) {
  if (!j.spec.model().preset().empty()) {
    auto m = testing::BuiltinCatalog().FindModel(j.spec.model().preset());
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : ModelShape{};
  }
  auto m = ModelShapeFromProto(j.spec.model().shape(), "model.shape");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelShape{};
}

TEST(TorchtitanRealInputs, EveryTomlIsAccepted) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(CorpusDir())) {
    if (e.path().extension() != ".toml") continue;
    SCOPED_TRACE(e.path().filename().string());
    auto r = JobFromTorchtitanToml(Read(e.path().string()), e.path().string());
    ASSERT_TRUE(r.ok()) << r.status();
    // Keys not read are listed (every file has [job] / [checkpoint] settings).
    EXPECT_FALSE(r->ignored.empty());
    // The job is complete once the allocation is known (128 GPUs of 8 per node).
    auto spec = r->Finalize(128, "h100-sxm", 8);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
    EXPECT_TRUE(job.ok()) << job.status();
    ++n;
  }
  EXPECT_EQ(n, 19);
}

struct Published {
  const char* file;
  double total;          // 0: not checked
  double non_embedding;  // 0: not checked
  double active;         // 0: not checked
  double tolerance;
  const char* source;
};

// The flavors named by the corpus files, against the released models' counts.
const Published kCounts[] = {
    {"torchtitan_models_llama3_train_configs_llama3_8b.toml", 8.03e9, 0, 0, 0.01,
     "https://huggingface.co/meta-llama/Llama-3.1-8B (8.03B)"},
    {"torchtitan_models_llama3_train_configs_llama3_70b.toml", 70.6e9, 0, 0, 0.01,
     "https://huggingface.co/meta-llama/Llama-3.1-70B (70.6B)"},
    {"torchtitan_models_llama3_train_configs_llama3_405b.toml", 406e9, 0, 0, 0.01,
     "https://huggingface.co/meta-llama/Llama-3.1-405B (406B)"},
    {"torchtitan_models_deepseek_v3_train_configs_deepseek_v3_671b.toml", 671e9, 0, 37e9, 0.02,
     "https://huggingface.co/deepseek-ai/DeepSeek-V3 (671B, 37B activated)"},
    {"torchtitan_models_qwen3_train_configs_qwen3_0.6b.toml", 0, 0.44e9, 0, 0.01,
     "https://huggingface.co/Qwen/Qwen3-0.6B (non-embedding 0.44B)"},
    {"torchtitan_models_qwen3_train_configs_qwen3_1.7b.toml", 0, 1.4e9, 0, 0.01,
     "https://huggingface.co/Qwen/Qwen3-1.7B (non-embedding 1.4B)"},
    {"torchtitan_models_qwen3_train_configs_qwen3_32b.toml", 32.8e9, 0, 0, 0.01,
     "https://huggingface.co/Qwen/Qwen3-32B (32.8B)"},
    {"torchtitan_models_llama4_train_configs_llama4_17bx128e.toml", 400e9, 0, 17e9, 0.02,
     "https://huggingface.co/meta-llama/Llama-4-Maverick-17B-128E (400B total, 17B active; rounded)"},
    // Scout's 109B includes the vision encoder, which torchtitan's text model does not have.
    {"torchtitan_models_llama4_train_configs_llama4_17bx16e.toml", 109e9, 0, 17e9, 0.02,
     "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E (109B total with vision, 17B active)"},
};

TEST(TorchtitanRealInputs, FlavorsHaveThePublishedCounts) {
  for (const Published& p : kCounts) {
    SCOPED_TRACE(p.file);
    auto r = JobFromTorchtitanToml(Read(CorpusDir() + "/" + p.file), p.file);
    ASSERT_TRUE(r.ok()) << r.status();
    const ParameterCounts c = CountParameters(ShapeOf(*r));
    if (p.total > 0) {
      EXPECT_NEAR(c.total / p.total, 1.0, p.tolerance) << c.total << " " << p.source;
    }
    if (p.non_embedding > 0) {
      EXPECT_NEAR(c.non_embedding / p.non_embedding, 1.0, p.tolerance) << c.non_embedding;
    }
    if (p.active > 0) {
      EXPECT_NEAR(c.active / p.active, 1.0, p.tolerance) << c.active << " " << p.source;
    }
  }
}

TEST(TorchtitanRealInputs, ParallelismAndFloat8AreRead) {
  auto r = JobFromTorchtitanToml(
      Read(CorpusDir() + "/torchtitan_models_llama4_train_configs_llama4_17bx128e.toml"), "17bx128e.toml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.parallelism().tp(), 8);
  EXPECT_EQ(r->spec.parallelism().pp(), 4);
  EXPECT_EQ(r->spec.parallelism().pp_schedule(), "1f1b");
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  // An empty [quantize.linear.float8] section does not turn float8 on; the 405B file's
  // converters = ["float8"] does.
  EXPECT_NE(r->spec.training().precision().gemm(), v1::D_TYPE_FP8);
  EXPECT_THAT(r->ignored, Contains("quantize.linear.float8.filter_fqns"));
  auto big = JobFromTorchtitanToml(Read(CorpusDir() + "/torchtitan_models_llama3_train_configs_llama3_405b.toml"), "405b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->spec.training().precision().gemm(), v1::D_TYPE_FP8);
  auto ds = JobFromTorchtitanToml(Read(CorpusDir() + "/torchtitan_models_deepseek_v3_train_configs_deepseek_v3_16b.toml"), "16b");
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->spec.parallelism().ep(), 8);
  EXPECT_EQ(ds->spec.parallelism().etp(), 1);
  EXPECT_THAT(ds->ignored, Contains("quantize.grouped_mm.float8.fqns"));
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(TorchtitanCommandLine, PreviousCliOverridesAreAppliedOrListed) {
  auto r = JobFromCommand(
      Split("torchrun --nproc_per_node=8 -m torchtitan.train --job.config_file "
            "torchtitan_models_llama3_train_configs_llama3_8b.toml --training.local_batch_size 4 "
            "--parallelism.tensor_parallel_degree=2 --parallelism.enable_async_tensor_parallel "
            "--training.mixed_precision_reduce bfloat16 --model.converters float8 --metrics.log_freq 5 "
            "--compile.enable --unknown-flag x"),
      CorpusDir());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->local_batch_size, 4);
  EXPECT_EQ(r->spec.parallelism().tp(), 2);
  EXPECT_TRUE(r->spec.training().overlap_tp_comm());
  EXPECT_EQ(r->spec.training().precision().grad_reduce(), v1::D_TYPE_BF16);
  EXPECT_EQ(r->spec.training().precision().gemm(), v1::D_TYPE_FP8);
  EXPECT_THAT(r->ignored, Contains("metrics.log_freq"));
  EXPECT_THAT(r->ignored, Contains("compile.enable"));
  EXPECT_THAT(r->ignored, Contains("--unknown-flag x"));
  auto spec = r->Finalize(16, "h100-sxm");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->training().global_batch_size(), 4 * 8);  // DP = 16 / TP 2
}

TEST(TorchtitanCommandLine, CurrentCliModuleAndConfig) {
  auto r = JobFromCommand(Split("torchrun --nproc_per_node 8 -m torchtitan.train --module qwen3 --config qwen3_30b_a3b "
                                "--parallelism.expert_parallel_degree 8 --training.seq_len 4096"),
                          "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.model().shape().moe().routed_experts(), 128);
  EXPECT_EQ(r->spec.parallelism().ep(), 8);
  EXPECT_EQ(r->spec.training().seq_length(), 4096);
  EXPECT_THAT(r->ignored, Contains(HasSubstr("--config qwen3_30b_a3b")));
  // Qwen3-30B-A3B: 30.5B total, 3.3B activated (https://huggingface.co/Qwen/Qwen3-30B-A3B).
  const ParameterCounts c = CountParameters(ShapeOf(*r));
  EXPECT_NEAR(c.total / 30.5e9, 1.0, 0.01);
  EXPECT_NEAR(c.active / 3.3e9, 1.0, 0.02);
  auto bad = JobFromCommand(Split("python -m torchtitan.train --module llama3 --config llama3_13b"), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("add --model.flavor"));
}

TEST(TorchtitanCommandLine, EveryFlavorIsKnown) {
  for (const char* nf : {"llama3/debugmodel", "llama3/8B_flex_attn", "llama3/70B", "llama3/405B", "llama4/debugmodel",
                         "llama4/17bx16e", "llama4/17bx128e", "llama4/17bx16e_irope", "deepseek_v3/debugmodel",
                         "deepseek_v3/16B", "deepseek_v3/236B", "deepseek_v3/671B", "qwen3/debugmodel", "qwen3/0.6B",
                         "qwen3/1.7B", "qwen3/4B", "qwen3/8B", "qwen3/14B", "qwen3/32B", "qwen3/debugmodel_moe",
                         "qwen3/30B-A3B", "qwen3/235B-A22B"}) {
    SCOPED_TRACE(nf);
    const std::string s(nf);
    const std::string name = s.substr(0, s.find('/')), flavor = s.substr(s.find('/') + 1);
    auto r = JobFromTorchtitanToml(absl::StrCat("[model]\nname = \"", name, "\"\nflavor = \"", flavor, "\"\n"), "x.toml");
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // DeepSeek-V2 (236B total, 21B activated; https://huggingface.co/deepseek-ai/DeepSeek-V2) is
  // torchtitan's deepseek_v3 "236B" flavor.
  auto v2 = JobFromTorchtitanToml("[model]\nname = \"deepseek_v3\"\nflavor = \"236B\"\n", "x.toml");
  ASSERT_TRUE(v2.ok());
  const ParameterCounts c = CountParameters(ShapeOf(*v2));
  EXPECT_NEAR(c.total / 236e9, 1.0, 0.01);
  EXPECT_NEAR(c.active / 21e9, 1.0, 0.03);
}

}  // namespace
}  // namespace stepcast
