// Job specs from Megatron-LM arguments and torchtitan TOML configs.
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/launch_args.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Llama 3 70B as Megatron-Bridge launches it, behind torchrun.
constexpr char kLlama70B[] =
    "torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py --num-layers 80 --hidden-size 8192 "
    "--num-attention-heads 64 --group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 "
    "--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
    "--untie-embeddings-and-output-weights --seq-length 8192 --max-position-embeddings 8192 "
    "--micro-batch-size 1 --global-batch-size 128 --tensor-model-parallel-size 4 "
    "--pipeline-model-parallel-size 8 --num-layers-per-virtual-pipeline-stage 2 --sequence-parallel "
    "--use-distributed-optimizer --overlap-grad-reduce --tp-comm-overlap --bf16 --fp8-format hybrid "
    "--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-70B "
    "--attention-dropout 0 --hidden-dropout 0 --train-iters 1000 --lr 1.5e-4 --data-path /data/x --log-interval=10";

TEST(Megatron, MapsEveryModelledFlag) {
  auto r = JobFromMegatronArgs(Split(kLlama70B));
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::JobSpec& s = r->spec;
  const v1::ModelShape& m = s.model().shape();
  EXPECT_EQ(m.layers(), 80);
  EXPECT_EQ(m.hidden_size(), 8192);
  EXPECT_EQ(m.attention_heads(), 64);
  EXPECT_EQ(m.kv_heads(), 8);
  EXPECT_EQ(m.ffn_hidden_size(), 28672);
  EXPECT_EQ(m.ffn_type(), v1::FFN_TYPE_SWIGLU);
  EXPECT_EQ(m.norm_type(), v1::NORM_TYPE_RMSNORM);
  EXPECT_FALSE(m.linear_bias());
  EXPECT_FALSE(m.tied_embeddings());
  EXPECT_EQ(m.learned_position_embeddings(), 0);
  // Megatron pads the vocabulary to a multiple of 128 x TP: 128256 -> 128512.
  EXPECT_EQ(m.vocab_size(), 128512);
  EXPECT_EQ(s.training().seq_length(), 8192);
  EXPECT_EQ(s.training().global_batch_size(), 128);
  EXPECT_EQ(s.training().micro_batch_size(), 1);
  EXPECT_EQ(s.training().precision().gemm(), v1::D_TYPE_FP8);
  EXPECT_EQ(s.training().precision().params(), v1::D_TYPE_BF16);
  EXPECT_EQ(s.training().sharding(), v1::SHARDING_ZERO1);
  EXPECT_TRUE(s.training().overlap_dp_comm());
  EXPECT_TRUE(s.training().overlap_tp_comm());
  EXPECT_FALSE(s.training().dropout());
  EXPECT_EQ(s.training().train_iters(), 1000);
  EXPECT_EQ(s.parallelism().tp(), 4);
  EXPECT_EQ(s.parallelism().pp(), 8);
  EXPECT_EQ(s.parallelism().vpp(), 5);  // (80 / 8) / 2
  EXPECT_TRUE(s.parallelism().sequence_parallel());
  // Not modelled: listed, with values; the launcher's own flags before the script are skipped.
  EXPECT_THAT(r->ignored, ElementsAre("--lr 1.5e-4", "--data-path /data/x", "--log-interval=10"));
  // With the allocation it predicts like the preset.
  auto spec = r->Finalize(64, "h100-sxm");
  ASSERT_TRUE(spec.ok());
  auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 2);
  EXPECT_NEAR(CountParameters(job->model).total, 70.6e9, 0.1e9);
}

TEST(Megatron, DefaultsFollowArgumentsPy) {
  // GPT defaults: GELU 4h FFN, biases, learned positions, tied, LayerNorm, dropout 0.1, fp32.
  auto r = JobFromMegatronArgs(Split(
      "python pretrain_gpt.py --num-layers 24 --hidden-size 2304 --num-attention-heads 24 --seq-length 2048 "
      "--max-position-embeddings 2048 --global-batch-size 512 --micro-batch-size 16 --tokenizer-type GPT2BPETokenizer"));
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ModelShape& m = r->spec.model().shape();
  EXPECT_EQ(m.ffn_hidden_size(), 4 * 2304);
  EXPECT_EQ(m.ffn_type(), v1::FFN_TYPE_GELU);
  EXPECT_TRUE(m.linear_bias());
  EXPECT_TRUE(m.tied_embeddings());
  EXPECT_EQ(m.learned_position_embeddings(), 2048);
  EXPECT_EQ(m.vocab_size(), 50304);  // 50257 padded to a multiple of 128
  EXPECT_TRUE(r->spec.training().dropout());
  EXPECT_EQ(r->spec.training().precision().gemm(), v1::D_TYPE_FP32);
  // fp32 QKV: Transformer Engine's flash and fused attention refuse it; under "auto" the choice is
  // left to the job reader's default (unfused for fp32 GEMMs: Examples.Fp32AndTf32...).
  EXPECT_FALSE(r->spec.training().has_flash_attention());
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_NONE);
  EXPECT_TRUE(r->ignored.empty());
  // SwiGLU without --ffn-hidden-size: int(8h/3 / 64) * 64.
  auto s = JobFromMegatronArgs(Split(
      "x.py --num-layers 2 --hidden-size 4096 --num-attention-heads 32 --seq-length 64 --max-position-embeddings 64 "
      "--global-batch-size 8 "
      "--swiglu --vocab-size 1000 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
      "--num-experts 8 --moe-router-topk 2 "
      "--expert-model-parallel-size 8 --use-megatron-fsdp --ckpt-format fsdp_dtensor"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->spec.model().shape().ffn_hidden_size(), 10880);
  EXPECT_EQ(s->spec.model().shape().moe().routed_experts(), 8);
  EXPECT_EQ(s->spec.model().shape().moe().expert_ffn_hidden_size(), 10880);
  EXPECT_EQ(s->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_EQ(s->spec.training().sharding(), v1::SHARDING_ZERO3);
  EXPECT_EQ(s->spec.parallelism().ep(), 8);
}

TEST(Megatron, ErrorsNameTheFlag) {
  const struct { const char* cmd; const char* error; } cases[] = {
      {"x.py --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 --vocab-size 8",
       "--num-layers: required"},
      {"x.py --num-layers two --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1",
       "--num-layers: 'two' is not an integer"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1",
       "--vocab-size: required"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --recompute-granularity sometimes",
       "--recompute-granularity: 'sometimes' is not full or selective"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3",
       "--num-layers-per-virtual-pipeline-stage: 3 must divide"},
      {"x.py --num-layers 2 --hidden-size", "--hidden-size: needs a value"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --bf16 --fp16",
       "--fp16: and --bf16 are both given"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --attention-backend flash",
       "--attention-backend: 'flash' needs --bf16 or --fp16"},
      // TransformerConfig.__post_init__ (transformer_config.py @000c4ac): full recompute needs a
      // method and a layer count; selective takes no count.
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --recompute-granularity full",
       "--recompute-method: required with --recompute-granularity full"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --recompute-granularity full --recompute-method uniform",
       "--recompute-num-layers: required with --recompute-granularity full"},
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --recompute-granularity selective --recompute-num-layers 2",
       "--recompute-num-layers: must not be given with selective recompute"},
      // moe_layer.py raises in training for MoE at TP > 1 without sequence parallelism.
      {"x.py --num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 --global-batch-size 1 "
       "--vocab-size 8 --bf16 --num-experts 4 --moe-router-topk 2 --tensor-model-parallel-size 2",
       "--sequence-parallel: required with --num-experts at --tensor-model-parallel-size > 1"},
  };
  for (const auto& c : cases) {
    auto r = JobFromMegatronArgs(Split(c.cmd));
    ASSERT_FALSE(r.ok()) << c.cmd;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
  EXPECT_THAT(std::string(JobFromCommand(Split("python train.py --lr 1"), "").status().message()),
              HasSubstr("neither Megatron-LM"));
}

// Block recompute of N layers recomputes the first N of each stage (transformer_block.py:
// layer_idx < recompute_num_layers): 0 recomputes none, which Megatron accepts. A method or count
// without a granularity has no effect and is listed. --fp16 keeps the gradient buffer and its
// reduction in fp16 unless --accumulate-allreduce-grads-in-fp32 (arguments.py validate_args sets
// that only under --bf16).
TEST(Megatron, RecomputeAndFp16GradientsAsMegatronRunsThem) {
  const std::string base =
      "x.py --num-layers 4 --hidden-size 8 --num-attention-heads 2 --seq-length 8 --max-position-embeddings 8 "
      "--global-batch-size 1 --vocab-size 8 ";
  auto r = JobFromMegatronArgs(Split(base + "--recompute-granularity full --recompute-method block --recompute-num-layers 0"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_NONE);
  r = JobFromMegatronArgs(Split(base + "--recompute-granularity full --recompute-method block --recompute-num-layers 2"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_EQ(r->spec.training().recompute_num_layers(), 2);
  r = JobFromMegatronArgs(Split(base + "--recompute-method block --recompute-num-layers 4"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_NONE);
  EXPECT_THAT(r->ignored, ::testing::Contains(HasSubstr("--recompute-method block --recompute-num-layers 4 (without")));
  r = JobFromMegatronArgs(Split(base + "--fp16"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().precision().grads(), v1::D_TYPE_FP16);
  EXPECT_EQ(r->spec.training().precision().grad_reduce(), v1::D_TYPE_FP16);
  r = JobFromMegatronArgs(Split(base + "--fp16 --accumulate-allreduce-grads-in-fp32"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().precision().grads(), v1::D_TYPE_FP32);
  EXPECT_EQ(r->spec.training().precision().grad_reduce(), v1::D_TYPE_FP32);
  EXPECT_THAT(r->ignored, ::testing::Not(::testing::Contains(HasSubstr("accumulate-allreduce"))));
}

// Megatron-LM's uneven pipeline flags are the job's first / last stage layers (they were listed
// as ignored while the slowest stage was costed at the even share): 14 + 18 of 32 layers on PP 2
// as given, and --account-for-embedding/loss-in-pipeline-split as one layer of the first / last
// stage (61 layers + 2 on PP 9: 7 per stage, so 6 decoder layers on each end; transformer_block.py).
TEST(Megatron, UnevenPipelineFlagsAreTheJobsStageLayers) {
  const std::string base =
      "x.py --num-layers 32 --hidden-size 64 --num-attention-heads 8 --seq-length 64 --max-position-embeddings 64 "
      "--global-batch-size 8 --vocab-size 1024 --bf16 --pipeline-model-parallel-size 2 ";
  auto r = JobFromMegatronArgs(Split(base + "--decoder-first-pipeline-num-layers 14 --decoder-last-pipeline-num-layers 18"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.parallelism().first_stage_layers(), 14);
  EXPECT_EQ(r->spec.parallelism().last_stage_layers(), 18);
  EXPECT_THAT(r->ignored, ::testing::Not(::testing::Contains(HasSubstr("decoder-"))));
  auto spec = r->Finalize(2, "h100-sxm");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr).ok());
  auto ds = JobFromMegatronArgs(Split(
      "x.py --num-layers 61 --hidden-size 64 --num-attention-heads 8 --seq-length 64 --max-position-embeddings 64 "
      "--global-batch-size 9 --vocab-size 1024 --bf16 --pipeline-model-parallel-size 9 "
      "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->spec.parallelism().first_stage_layers(), 6);
  EXPECT_EQ(ds->spec.parallelism().last_stage_layers(), 6);
  EXPECT_TRUE(ds->ignored.empty()) << ::testing::PrintToString(ds->ignored);
}

TEST(Torchtitan, Llama3_8BConfig) {
  // torchtitan's llama3_8b.toml (its train_configs), trimmed.
  constexpr char kToml[] = R"(
[job]
dump_folder = "./outputs"
description = "Llama 3 8B training"
[model]
name = "llama3"
flavor = "8B"
tokenizer_path = "./assets/tokenizer/original/tokenizer.model"
[optimizer]
name = "AdamW"
lr = 3e-4
[training]
local_batch_size = 1
seq_len = 8192
steps = 1000
mixed_precision_param = "bfloat16"
[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
pipeline_parallel_degree = 1
context_parallel_degree = 1
[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"
)";
  auto r = JobFromTorchtitanToml(kToml, "llama3_8b.toml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.model().preset(), "llama3-8b");
  EXPECT_EQ(r->spec.training().seq_length(), 8192);
  EXPECT_EQ(r->spec.training().sharding(), v1::SHARDING_ZERO3);
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_SELECTIVE);
  // Listed with the value the file gives (docs/LAUNCHERS.md), as TOML writes it.
  EXPECT_THAT(r->ignored, ::testing::Contains("optimizer.lr = 0.0003"));
  EXPECT_THAT(r->ignored, ::testing::Contains("job.dump_folder = './outputs'"));
  // The global batch is the local batch x the data-parallel degree of the allocation.
  auto spec = r->Finalize(64, "h100-sxm");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->training().global_batch_size(), 64);
  auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 64);
  EXPECT_FALSE(JobFromTorchtitanToml("[model]\nname = \"llama3\"\nflavor = \"9B\"\n", "x.toml").ok());
  EXPECT_THAT(std::string(JobFromTorchtitanToml("[model\n", "bad.toml").status().message()), HasSubstr("bad.toml: line"));
}

// torchtitan's TOML-era layer SAC (job_config.py @6404b93: selective_ac_option "2" by default,
// "'int' (e.g., 2) for every nth layer"; activation_checkpoint.py: a counter over the rank's
// blocks, the multiples of n fully checkpointed, 0: all): full recompute of floor(L_rank / n)
// blocks, counted here from the Llama 3 8B's 32 layers by hand.
TEST(Torchtitan, LayerSacIsFullRecomputeOfEveryNthBlock) {
  auto job = [](const std::string& ac, int pp = 1) {
    return JobFromTorchtitanToml(absl::StrCat("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
                                              "pipeline_parallel_degree = ", pp, "\n[activation_checkpoint]\n", ac),
                                 "ac.toml");
  };
  // No option: the JobConfig default "2": 16 of 32 blocks.
  auto r = job("mode = \"selective\"\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_EQ(r->spec.training().recompute_num_layers(), 16);
  // Every 4th block of the 16 on each of 2 pipeline ranks: 4.
  r = job("mode = \"selective\"\nselective_ac_option = \"4\"\n", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_EQ(r->spec.training().recompute_num_layers(), 4);
  // Every block ("1", and "0": `not ac_freq`): full recompute of all (recompute_num_layers 0).
  for (const char* every : {"1", "0"}) {
    r = job(absl::StrCat("mode = \"selective\"\nselective_ac_option = \"", every, "\"\n"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
    EXPECT_EQ(r->spec.training().recompute_num_layers(), 0);
  }
  // Every 64th of 32 blocks: none is checkpointed.
  r = job("mode = \"selective\"\nselective_ac_option = '64'\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_NONE);
  // "op": the per-op policy (selective).
  r = job("mode = \"selective\"\nselective_ac_option = \"op\"\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_SELECTIVE);
  // Full mode ignores the option (torchtitan reads it only for selective).
  r = job("mode = \"full\"\nselective_ac_option = \"4\"\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().recompute(), v1::RECOMPUTE_FULL);
  EXPECT_EQ(r->spec.training().recompute_num_layers(), 0);
  // Anything else is refused naming the key.
  r = job("mode = \"selective\"\nselective_ac_option = \"every\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("activation_checkpoint.selective_ac_option"));
}

// FSDP's float8 all-gather as the file says it, in the TOML-era spelling ([float8]) and the later
// one ([quantize.linear.float8]), default False (job_config.py Float8 / Float8Linear): set on the
// job explicitly either way, so that the torchtitan recipes' value (true for the 405B) does not
// replace a file's false.
TEST(Torchtitan, Float8AllGatherAsTheFileSaysIt) {
  auto job = [](const std::string& tail) {
    return JobFromTorchtitanToml(absl::StrCat("[model]\nname = \"llama3\"\nflavor = \"405B\"\n", tail), "fp8.toml");
  };
  const std::string fp8 = "converters = [\"float8\"]\n";
  struct Case {
    std::string tail;
    bool gather;
  };
  const Case cases[] = {
      {fp8 + "[quantize.linear.float8]\nenable_fsdp_float8_all_gather = true\n", true},
      {fp8 + "[quantize.linear.float8]\nenable_fsdp_float8_all_gather = false\n", false},
      {fp8 + "[float8]\nenable_fsdp_float8_all_gather = true\n", true},
      {fp8 + "[float8]\nenable_fsdp_float8_all_gather = false\n", false},
      {fp8, false},                                                            // the default
      {"[float8]\nenable_fsdp_float8_all_gather = true\n", false},             // no float8 converter
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tail);
    auto r = job(c.tail);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->spec.training().has_fp8_param_gather());
    EXPECT_EQ(r->spec.training().fp8_param_gather(), c.gather);
    auto spec = r->Finalize(512, "h100-sxm");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto j = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_EQ(j->training.fp8_param_gather, c.gather);  // not the 405B recipe's
    if (j->assumed) {
      for (const AssumedInput& a : *j->assumed) EXPECT_NE(a.field, "training.fp8_param_gather");
    }
  }
  auto bad = job("[quantize.linear.float8]\nenable_fsdp_float8_all_gather = 1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("quantize.linear.float8.enable_fsdp_float8_all_gather"));
}

}  // namespace
}  // namespace stepcast
