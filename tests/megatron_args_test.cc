// Megatron-LM command lines as Megatron-LM reads them (issue 10): every option of
// megatron/training/arguments.py is modelled or listed as ignored, and the launch lines of
// Llama 3, Mixtral, DeepSeek-V3, gpt-oss and Qwen3 MoE give the published model sizes and
// layouts. The published counts are the model cards' (sources beside each), not this code's.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/model_shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/codec.h"
#include "proto/launch_args.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

ParameterCounts Count(const ImportedJob& job) {
  auto shape = ModelShapeFromProto(job.spec.model().shape(), "model.shape");
  EXPECT_TRUE(shape.ok()) << shape.status();
  return shape.ok() ? CountParameters(*shape) : ParameterCounts{};
}

constexpr char kBase[] =
    "pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 "
    "--global-batch-size 8 --vocab-size 1000 ";

struct ArgSpec {
  std::string name, kind;
};

std::vector<ArgSpec> ParserArguments() {
  std::ifstream in(std::string(STEPCAST_SOURCE_DIR) + "/tests/data/megatron_args.txt");
  std::vector<ArgSpec> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    ArgSpec a;
    ls >> a.name >> a.kind;
    out.push_back(a);
  }
  return out;
}

// No argument is dropped: each option the parser defines is read into the job or listed in
// `ignored` with its value(s).
TEST(MegatronArguments, EveryParserArgumentIsModelledOrListed) {
  const std::vector<ArgSpec> args = ParserArguments();
  ASSERT_GT(args.size(), 550u);  // arguments.py at the cited commit defines ~600 options
  int modelled = 0, listed = 0;
  for (const ArgSpec& a : args) {
    SCOPED_TRACE(a.name);
    if (IsModelledMegatronFlag(a.name)) {
      ++modelled;
      continue;
    }
    std::string extra = a.name;
    std::string expect = a.name;
    if (a.kind == "value") extra += " 7", expect += " 7";
    if (a.kind == "list") extra += " 7 8", expect += " 7 8";
    auto r = JobFromMegatronArgs(Split(std::string(kBase) + extra + " --bf16"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->ignored, ::testing::Contains(expect));
    ++listed;
  }
  EXPECT_GT(modelled, 50);
  EXPECT_GT(listed, 450);
  // Every modelled flag is one of the parser's (no typo in the importer's tables).
  for (const char* f : {"multi-latent-attention", "quick-geglu", "num-virtual-stages-per-pipeline-rank",
                        "grad-reduce-in-bf16", "fp8-param-gather", "expert-tensor-parallel-size",
                        "recompute-modules", "moe-layer-freq", "q-lora-rank", "kv-lora-rank", "qk-head-dim",
                        "qk-pos-emb-head-dim", "v-head-dim"}) {
    EXPECT_TRUE(IsModelledMegatronFlag(f)) << f;
    bool in_parser = false;
    for (const ArgSpec& a : args) in_parser = in_parser || a.name == std::string("--") + f;
    EXPECT_TRUE(in_parser) << f;
  }
}

// examples/llama/train_llama3_8b_h100_fp8.sh (NVIDIA/Megatron-LM commit 157006d6d9bf4f55c0d4d7dacbd2b65e7bd84dc9),
// its bash variables substituted and the real-data branch taken (HuggingFaceTokenizer,
// --vocab-size 128256), as the script's torchrun line expands it.
constexpr char kLlama3_8BFp8[] =
    "torchrun --nproc_per_node 8 --nnodes 1 --node_rank 0 --master_addr localhost --master_port 6000 "
    "examples/classes/pretrain_gpt.py --use-mcore-models --num-layers 32 --hidden-size 4096 "
    "--ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
    "--kv-channels 128 --seq-length 8192 --max-position-embeddings 8192 --position-embedding-type rope "
    "--rotary-base 1000000 --rotary-percent 1.0 --attention-dropout 0.0 --hidden-dropout 0.0 --swiglu "
    "--init-method-std 0.0134 --attention-backend fused --apply-layernorm-1p "
    "--untie-embeddings-and-output-weights --disable-bias-linear --micro-batch-size 1 --global-batch-size 128 "
    "--train-samples 1953125000 --lr-decay-samples 1949218748 --lr-warmup-samples 3906252 --lr 0.00015 "
    "--min-lr 0.00001 --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 --lr-decay-style cosine --clip-grad 1.0 "
    "--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16 "
    "--cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1 "
    "--exit-duration-in-mins 235 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
    "--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather "
    "--tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel --data-path /data/text "
    "--tokenizer-type HuggingFaceTokenizer --tokenizer-model /models/llama3 --data-cache-path /cache "
    "--split '99,1,0' --no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1 "
    "--vocab-size 128256 --log-interval 1 --eval-iters 32 --eval-interval 100 --save-interval 1000 "
    "--log-throughput --profile --profile-step-start 4 --profile-step-end 6 --ckpt-format torch_dist "
    "--distributed-timeout-minutes 60 --save /ckpt --load /ckpt --tensorboard-dir /tb";

TEST(MegatronLaunchLines, Llama3_8BFp8Example) {
  auto r = JobFromMegatronArgs(Split(kLlama3_8BFp8));
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::TrainingSpec& t = r->spec.training();
  EXPECT_EQ(t.precision().gemm(), v1::D_TYPE_FP8);
  EXPECT_EQ(t.precision().grad_reduce(), v1::D_TYPE_BF16);
  EXPECT_TRUE(t.fp8_param_gather());
  EXPECT_EQ(t.sharding(), v1::SHARDING_ZERO1);
  // Llama 3 8B: 8.03B (https://huggingface.co/meta-llama/Meta-Llama-3-8B, HF page).
  EXPECT_NEAR(Count(*r).total / 8.03e9, 1.0, 0.01);
  EXPECT_THAT(r->ignored, ::testing::Contains("--overlap-param-gather"));
  EXPECT_THAT(r->ignored, ::testing::Contains("--fp8-amax-history-len 1024"));
  // On the script's 8 GPUs (one H100 node) the job is valid: TP1, DP8.
  auto spec = r->Finalize(8, "h100-sxm");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 8);
  // bf16 gradient buffer (--grad-reduce-in-bf16) and fp8 weights (--fp8-param-gather): the
  // example's own layout fits on its 8 H100s (with fp32 gradients it was over the 80 GB).
  EXPECT_EQ(t.precision().grads(), v1::D_TYPE_BF16);
  const MemoryEstimate mem = EstimateMemory(*job);
  EXPECT_TRUE(mem.fits) << mem.total_bytes / (1 << 30) << " GiB of " << mem.capacity_bytes / (1 << 30);
  EXPECT_NEAR(mem.gradients_bytes, 8.03e9 * 2, 0.05e9);  // 2 bytes per parameter
}

// DeepSeek-V3 (671B total, 37B activated, without its MTP module;
// https://huggingface.co/deepseek-ai/DeepSeek-V3). Model flags: DeepSeek-V3's published shapes
// (its config.json) in Megatron-LM's MLA / MoE argument names (arguments.py _add_mla_args,
// _add_moe_args), the first three layers dense as "([0]*3+[1]*58)". Layout written here
// (not a published recipe): TP 2, PP 8 with 4 virtual stages per rank, EP 64, ETP 1.
constexpr char kDeepSeekV3[] =
    "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 "
    "--num-attention-heads 128 --kv-channels 128 --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 "
    "--qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 256 --moe-ffn-hidden-size 2048 "
    "--moe-shared-expert-intermediate-size 2048 --moe-router-topk 8 --moe-layer-freq ([0]*3+[1]*58) "
    "--moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-grouped-gemm "
    "--moe-token-dispatcher-type alltoall --mtp-num-layers 1 --swiglu --normalization RMSNorm "
    "--position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights "
    "--tokenizer-type HuggingFaceTokenizer --tokenizer-model deepseek-ai/DeepSeek-V3 --seq-length 4096 "
    "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8192 --bf16 "
    "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 4 "
    "--expert-model-parallel-size 64 --expert-tensor-parallel-size 1 --sequence-parallel "
    "--use-distributed-optimizer --recompute-granularity selective --recompute-modules mla_up_proj moe_act "
    "--attention-dropout 0 --hidden-dropout 0";

TEST(MegatronLaunchLines, DeepSeekV3) {
  auto r = JobFromMegatronArgs(Split(kDeepSeekV3));
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ModelShape& m = r->spec.model().shape();
  EXPECT_EQ(m.mla().kv_lora_rank(), 512);
  EXPECT_EQ(m.mla().q_lora_rank(), 1536);
  EXPECT_EQ(m.moe().first_dense_layers(), 3);
  EXPECT_EQ(m.moe().layer_freq(), 1);
  EXPECT_EQ(m.vocab_size(), 129280);  // deepseek-ai/DeepSeek-V3 config.json, a multiple of 128 x 2
  const ParameterCounts c = Count(*r);
  EXPECT_NEAR(c.total / 671e9, 1.0, 0.01) << c.total;  // 721B when MLA was ignored
  EXPECT_NEAR(c.active / 37e9, 1.0, 0.02) << c.active;
  const v1::ParallelismSpec& p = r->spec.parallelism();
  EXPECT_EQ(p.tp(), 2);
  EXPECT_EQ(p.pp(), 8);
  EXPECT_EQ(p.vpp(), 4);
  EXPECT_EQ(p.ep(), 64);
  EXPECT_EQ(p.etp(), 1);
  EXPECT_THAT(r->spec.training().recompute_modules(), ::testing::ElementsAre("mla_up_proj", "moe_act"));
  EXPECT_THAT(r->ignored, ::testing::Contains("--mtp-num-layers 1"));
}

// gpt-oss-120b (116.83B total; arXiv:2508.10925 Table 1) in Megatron-LM's names: gated
// quick-GELU experts (--quick-geglu), 128 experts top-4, biases kept. Layout written here:
// TP 1, EP 8 on 8 GPUs.
constexpr char kGptOss120B[] =
    "pretrain_gpt.py --num-layers 36 --hidden-size 2880 --num-attention-heads 64 --group-query-attention "
    "--num-query-groups 8 --kv-channels 64 --ffn-hidden-size 2880 --num-experts 128 --moe-ffn-hidden-size 2880 "
    "--moe-router-topk 4 --quick-geglu --activation-func-clamp-value 7.0 --glu-linear-offset 1.0 "
    "--softmax-type learnable --window-size 128,0 --window-attn-skip-freq 2 --normalization RMSNorm "
    "--position-embedding-type rope --rope-type yarn --untie-embeddings-and-output-weights "
    "--tokenizer-type HuggingFaceTokenizer --tokenizer-model openai/gpt-oss-120b --seq-length 4096 "
    "--max-position-embeddings 131072 --micro-batch-size 1 --global-batch-size 256 --bf16 "
    "--expert-model-parallel-size 8 --moe-grouped-gemm --use-distributed-optimizer";

TEST(MegatronLaunchLines, GptOss120B) {
  auto r = JobFromMegatronArgs(Split(kGptOss120B));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.model().shape().ffn_type(), v1::FFN_TYPE_GEGLU);
  EXPECT_EQ(r->spec.model().shape().vocab_size(), 201088);
  EXPECT_NEAR(Count(*r).total / 116.83e9, 1.0, 0.01);  // 78.7B when --quick-geglu was ignored
  EXPECT_EQ(r->spec.parallelism().ep(), 8);
}

// Qwen3-30B-A3B (30.5B total, 3.3B activated; https://huggingface.co/Qwen/Qwen3-30B-A3B), its
// config.json in Megatron-LM's names. Layout written here: TP 4, EP 8 with ETP 1 on 16 GPUs
// (DP 4: EP does not divide DP, the expert layout folds EP over TP x DP).
constexpr char kQwen3_30B_A3B[] =
    "pretrain_gpt.py --num-layers 48 --hidden-size 2048 --num-attention-heads 32 --group-query-attention "
    "--num-query-groups 4 --kv-channels 128 --ffn-hidden-size 6144 --num-experts 128 --moe-ffn-hidden-size 768 "
    "--moe-router-topk 8 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-3 --qk-layernorm "
    "--swiglu --normalization RMSNorm --position-embedding-type rope --rotary-base 1000000 --disable-bias-linear "
    "--untie-embeddings-and-output-weights --tokenizer-type HuggingFaceTokenizer --tokenizer-model Qwen/Qwen3-30B-A3B "
    "--seq-length 4096 --max-position-embeddings 40960 --micro-batch-size 1 --global-batch-size 512 --bf16 "
    "--tensor-model-parallel-size 4 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 "
    "--sequence-parallel --use-distributed-optimizer --recompute-granularity full --recompute-method uniform "
    "--recompute-num-layers 1";

TEST(MegatronLaunchLines, Qwen3MoeWithEtp) {
  auto r = JobFromMegatronArgs(Split(kQwen3_30B_A3B));
  ASSERT_TRUE(r.ok()) << r.status();
  const ParameterCounts c = Count(*r);
  EXPECT_NEAR(c.total / 30.5e9, 1.0, 0.01) << c.total;
  EXPECT_NEAR(c.active / 3.3e9, 1.0, 0.02) << c.active;
  EXPECT_THAT(r->ignored, ::testing::Contains("--moe-aux-loss-coeff 1e-3"));
  auto spec = r->Finalize(16, "h100-sxm");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 4);
  EXPECT_EQ(job->parallelism.ep, 8);
}

// Mixtral 8x7B (46.7B total, 12.9B active; https://mistral.ai/news/mixtral-of-experts) with
// the model flags of Megatron-LM's Mixtral example (examples/mixtral/train_mixtral_8x7b_distributed.sh,
// commit 0a40979ee868697bd66157ab800d213ffff030d8: RMSNorm, rope, SwiGLU, GQA, untied,
// Llama2Tokenizer, alltoall dispatcher) at the released model's sizes, and the MoE README's
// layout TP 1, PP 4, EP 8, 8 layers per virtual stage on 64 GPUs.
constexpr char kMixtral[] =
    "torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py --use-mcore-models --disable-bias-linear "
    "--seq-length 4096 --max-position-embeddings 32768 --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
    "--num-attention-heads 32 --init-method-std 0.01 --attention-dropout 0.0 --hidden-dropout 0.0 "
    "--normalization RMSNorm --position-embedding-type rope --swiglu --untie-embeddings-and-output-weights "
    "--group-query-attention --num-query-groups 8 --no-masked-softmax-fusion --no-position-embedding "
    "--rotary-base 1000000 --num-experts 8 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss "
    "--moe-aux-loss-coeff 1e-2 --moe-grouped-gemm --moe-token-dispatcher-type alltoall --overlap-param-gather "
    "--overlap-grad-reduce --tokenizer-type Llama2Tokenizer --tokenizer-model /workspace/tokenizer.model "
    "--data-path /data/mix --split 99990,8,2 --micro-batch-size 1 --global-batch-size 256 --lr 1e-4 "
    "--train-iters 500000 --bf16 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 "
    "--num-layers-per-virtual-pipeline-stage 8 --expert-model-parallel-size 8 --use-distributed-optimizer "
    "--sequence-parallel";

TEST(MegatronLaunchLines, Mixtral8x7B) {
  auto r = JobFromMegatronArgs(Split(kMixtral));
  ASSERT_TRUE(r.ok()) << r.status();
  const ParameterCounts c = Count(*r);
  EXPECT_NEAR(c.total / 46.7e9, 1.0, 0.01);
  EXPECT_NEAR(c.active / 12.9e9, 1.0, 0.01);
  EXPECT_EQ(r->spec.parallelism().vpp(), 1);  // (32 / 4) / 8
  EXPECT_EQ(r->spec.parallelism().ep(), 8);
  auto spec = r->Finalize(64, "h100-sxm");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->parallelism.dp, 16);
}

TEST(MegatronArguments, MoeLayerFreqPatterns) {
  const struct {
    const char* freq;
    int64_t first_dense, layer_freq;
  } ok[] = {{"([0]*3+[1]*5)", 3, 1}, {"[0,1,0,1,0,1,0,1]", 1, 2}, {"([1]+[0])*4", 0, 2}, {"2", 0, 2},
            {"[1]*8", 0, 1}};
  for (const auto& c : ok) {
    SCOPED_TRACE(c.freq);
    auto r = JobFromMegatronArgs(Split(std::string("x.py --num-layers 8 --hidden-size 64 --num-attention-heads 4 "
                                                   "--seq-length 16 --global-batch-size 1 --vocab-size 100 "
                                                   "--num-experts 4 --moe-layer-freq ") + c.freq));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec.model().shape().moe().first_dense_layers(), c.first_dense);
    EXPECT_EQ(r->spec.model().shape().moe().layer_freq(), c.layer_freq);
  }
  const struct {
    const char* freq;
    const char* error;
  } bad[] = {{"([0]*3+[1]*4)", "has 7 entries, not num-layers (8)"},
             {"([1]*3+[0]*1)*2", "is not modelled"},
             {"[0]*8", "has no MoE layer"},
             {"__import__('os')", "is not an integer"},
             {"[__import__('os')]", "expected a number"},
             {"[1]*99999999999", "number too large"},
             {"[1]*2000000000", "pattern longer than the layers"}};
  for (const auto& c : bad) {
    SCOPED_TRACE(c.freq);
    auto r = JobFromMegatronArgs(Split(std::string("x.py --num-layers 8 --hidden-size 64 --num-attention-heads 4 "
                                                   "--seq-length 16 --global-batch-size 1 --vocab-size 100 "
                                                   "--num-experts 4 --moe-layer-freq ") + c.freq));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--moe-layer-freq"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
}

TEST(MegatronArguments, HuggingFaceTokenizerVocabulary) {
  const std::string base =
      "x.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --global-batch-size 1 "
      "--tokenizer-type HuggingFaceTokenizer ";
  // A known model name.
  auto r = JobFromMegatronArgs(Split(base + "--tokenizer-model meta-llama/Llama-3.1-8B"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.model().shape().vocab_size(), 128256);
  // A local directory: its config.json's vocab_size (here a corpus file's copy).
  const std::string dir = ::testing::TempDir() + "/tok_qwen";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(STEPCAST_SOURCE_DIR) + "/tests/data/real_inputs/hf/Qwen2.5-7B.config.json",
                             dir + "/config.json", std::filesystem::copy_options::overwrite_existing);
  r = JobFromMegatronArgs(Split(base + "--tokenizer-model " + dir));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.model().shape().vocab_size(), 152064);  // 152064 already a multiple of 128
  // Unknown: an error naming the flag to add, without stray quotes.
  r = JobFromMegatronArgs(Split(base + "--tokenizer-model /nowhere/custom-tok"));
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status().message());
  EXPECT_THAT(msg, HasSubstr("--vocab-size: required"));
  EXPECT_THAT(msg, HasSubstr("add --vocab-size N"));
  EXPECT_THAT(msg, HasSubstr("--tokenizer-model /nowhere/custom-tok"));
  EXPECT_EQ(msg.find('\''), std::string::npos) << msg;
}

// The overflow sites of the reliability review (M7): each is now an error naming the flag.
TEST(MegatronArguments, HugeValuesAreErrorsNotOverflows) {
  const std::string base = "x.py --num-attention-heads 4 --seq-length 16 --global-batch-size 1 --vocab-size 100 ";
  const struct {
    const char* extra;
    const char* error;
  } cases[] = {
      {"--num-layers 1e30 --hidden-size 64", "--num-layers: '1e30' is not an integer"},
      {"--num-layers 2 --hidden-size 4090000000000000000", "--hidden-size: 4090000000000000000 is out of range"},
      {"--num-layers 2 --hidden-size 9e18 --swiglu", "--hidden-size: '9e18' is not an integer"},
      {"--num-layers 2 --hidden-size 64 --tensor-model-parallel-size 9000000000000000000",
       "--tensor-model-parallel-size: 9000000000000000000 is out of range"},
      {"--num-layers 2 --hidden-size 64 --num-layers-per-virtual-pipeline-stage -1",
       "--num-layers-per-virtual-pipeline-stage"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    auto r = JobFromMegatronArgs(Split(base + c.extra));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
  // torchtitan: degrees 4e9 x 4e9 and a local batch of 2^62.
  auto t = JobFromTorchtitanToml(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\ndata_parallel_replicate_degree = 4000000000\n"
      "data_parallel_shard_degree = 4000000000\n",
      "big.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("data_parallel_replicate_degree"));
  auto b = JobFromTorchtitanToml("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 4611686018427387904\n",
                                 "big.toml");
  if (b.ok()) {
    auto spec = b->Finalize(64, "h100-sxm");
    ASSERT_FALSE(spec.ok());
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("local_batch_size"));
  }
}

}  // namespace
}  // namespace stepcast
