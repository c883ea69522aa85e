// Megatron-LM command lines as Megatron-LM reads them (issue 10): every option of
// megatron/training/arguments.py is modelled or listed as ignored, and the launch lines of
// Llama 3, Mixtral, DeepSeek-V3, gpt-oss and Qwen3 MoE give the published model sizes and
// layouts. The published counts are the model cards' (sources beside each), not this code's.
#include <filesystem>
#include <tuple>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/model_shape.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
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
    "--max-position-embeddings 128 --global-batch-size 8 --vocab-size 1000 ";

struct ArgSpec {
  std::string name, kind;
};

std::vector<ArgSpec> ParserArguments() {
  std::ifstream in(std::string(STEPCAST_SOURCE_DIR) + "/presets/launchers/megatron_args.txt");
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
  int modelled = 0, listed = 0, refused = 0;
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
    if (!r.ok()) {
      // Megatron-LM refuses the base line with this option alone (--overlap-param-gather needs
      // the distributed optimizer, --mtp-num-layers needs rope, ...): an error naming it.
      EXPECT_THAT(std::string(r.status().message()), HasSubstr(a.name));
      ++refused;
      continue;
    }
    EXPECT_THAT(r->ignored, ::testing::Contains(expect));
    ++listed;
  }
  EXPECT_GT(modelled, 50);
  EXPECT_GT(listed, 450);
  EXPECT_LT(refused, 10);
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
// _add_moe_args), the first three layers dense as "([0]*3+[1]*58)". Layout: TP 2, PP 8 with 4
// virtual stages per rank, EP 64, ETP 1; 61 layers do not split into 32 even chunks, so the
// layers are placed by Megatron-Bridge's DeepSeek-V3 H100 layout "Et|(tt|)*30mL"
// (src/megatron/bridge/perf_recipes/deepseek/h100/deepseek_v3.py @ 067f987d: embedding + 1 layer,
// 30 chunks of 2, MTP + loss).
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
    "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 --pipeline-model-parallel-layout Et|(tt|)*30mL "
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
  // --mtp-num-layers 1: one MTP module, a block of the last layer's type (read since the
  // twelfth session; it was listed as not modelled before).
  EXPECT_EQ(r->spec.model().shape().mtp_layers(), 1);
  EXPECT_FALSE(r->spec.model().shape().mtp_repeated_layer());
  EXPECT_THAT(r->ignored, ::testing::Contains("--pipeline-model-parallel-layout Et|(tt|)*30mL"));
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
                                                   "--seq-length 16 --max-position-embeddings 16 --global-batch-size 1 --vocab-size 100 "
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
                                                   "--seq-length 16 --max-position-embeddings 16 --global-batch-size 1 --vocab-size 100 "
                                                   "--num-experts 4 --moe-layer-freq ") + c.freq));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--moe-layer-freq"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
}

TEST(MegatronArguments, HuggingFaceTokenizerVocabulary) {
  const std::string base =
      "x.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 "
      "--global-batch-size 1 --tokenizer-type HuggingFaceTokenizer ";
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
  const std::string base =
      "x.py --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 --global-batch-size 1 --vocab-size 100 ";
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

// ---- Issue 23 item 4: what Megatron-LM refuses at launch (arguments.py validate_args and
// TransformerConfig.__post_init__, NVIDIA/Megatron-LM commit 000c4ac2) is an error naming the
// flag, with the flags that make it accepted where there are some.

// Qwen3-235B-A22B (94 layers; huggingface.co/Qwen/Qwen3-235B-A22B config.json: hidden 4096, 64
// heads, 4 KV groups, 128 experts top-8 of 1536, vocab 151936) on PP 8: 94 % 8 != 0.
constexpr char kQwen3_235B_Pp8[] =
    "torchrun --nproc_per_node 8 --nnodes 32 pretrain_gpt.py --num-layers 94 --hidden-size 4096 "
    "--num-attention-heads 64 --group-query-attention --num-query-groups 4 --kv-channels 128 --ffn-hidden-size 12288 "
    "--num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 1536 --swiglu --normalization RMSNorm "
    "--position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights --seq-length 4096 "
    "--max-position-embeddings 40960 --vocab-size 151936 --micro-batch-size 1 --global-batch-size 1024 --bf16 "
    "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8 --expert-model-parallel-size 8 "
    "--expert-tensor-parallel-size 1 --sequence-parallel --use-distributed-optimizer ";

// Kimi K2 (61 layers; arXiv:2507.20534 Table 2: DeepSeek-V3's architecture, 64 heads, 384
// experts top-8, one dense layer) on PP 16.
constexpr char kKimiK2_Pp16[] =
    "pretrain_gpt.py --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 64 "
    "--kv-channels 128 --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
    "--qk-pos-emb-head-dim 64 --v-head-dim 128 --num-experts 384 --moe-ffn-hidden-size 2048 "
    "--moe-shared-expert-intermediate-size 2048 --moe-router-topk 8 --moe-layer-freq ([0]*1+[1]*60) --swiglu "
    "--normalization RMSNorm --position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights "
    "--vocab-size 163840 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 4096 "
    "--bf16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 16 --expert-model-parallel-size 32 "
    "--expert-tensor-parallel-size 1 --sequence-parallel --use-distributed-optimizer ";

TEST(MegatronValidateArgs, UnevenPipelineIsRefusedUnlessTheFirstLastFlagsSaySo) {
  // 94 on PP 8: refused, and the message names the flags that make Megatron accept it.
  auto r = JobFromMegatronArgs(Split(kQwen3_235B_Pp8));
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status().message());
  EXPECT_THAT(msg, HasSubstr("--num-layers: 94 is not divisible by --pipeline-model-parallel-size 8"));
  EXPECT_THAT(msg, HasSubstr("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split (96 = 8 x 12)"));
  EXPECT_THAT(msg, HasSubstr("--decoder-first-pipeline-num-layers 11 --decoder-last-pipeline-num-layers 11 "
                             "(12 on each of the 6 other stages)"));
  // With either suggestion it is accepted (the uneven split itself stays listed as not modelled).
  for (const char* fix : {"--decoder-first-pipeline-num-layers 11 --decoder-last-pipeline-num-layers 11",
                          "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"}) {
    SCOPED_TRACE(fix);
    auto ok = JobFromMegatronArgs(Split(std::string(kQwen3_235B_Pp8) + fix));
    ASSERT_TRUE(ok.ok()) << ok.status();
    auto spec = ok->Finalize(0, "h100-sxm");  // 256 GPUs from torchrun --nproc_per_node 8 --nnodes 32
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->cluster().gpu_count(), 256);
    auto job = JobFromSpec(*spec, testing::BuiltinCatalog(), "", nullptr);
    ASSERT_TRUE(job.ok()) << job.status();
  }
  // A first/last pair that leaves the middle stages uneven: refused naming the flag.
  auto bad = JobFromMegatronArgs(Split(std::string(kQwen3_235B_Pp8) +
                                       "--decoder-first-pipeline-num-layers 10 --decoder-last-pipeline-num-layers 11"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--decoder-first-pipeline-num-layers: the 73 layers left"));
  // 61 on PP 16 (Kimi K2): no account-for split fits; the most even first/last pair is 2 / 3
  // with 4 layers on each middle stage.
  auto k2 = JobFromMegatronArgs(Split(kKimiK2_Pp16));
  ASSERT_FALSE(k2.ok());
  EXPECT_THAT(std::string(k2.status().message()),
              HasSubstr("--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 3 "
                        "(4 on each of the 14 other stages)"));
  EXPECT_TRUE(JobFromMegatronArgs(Split(std::string(kKimiK2_Pp16) +
                                        "--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 3"))
                  .ok());
  // The advice alone, as the search uses it: 61 layers on PP 9 (examples/deepseek-v3-gb200).
  EXPECT_THAT(MegatronUnevenPipelineAdvice(61, 9, 1),
              HasSubstr("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split (63 = 9 x 7)"));
  EXPECT_EQ(MegatronUnevenPipelineAdvice(64, 8, 1).find("account"), std::string::npos);
  EXPECT_TRUE(CheckMegatronPipelineSplit(64, 8, 2, {}).ok());
  EXPECT_FALSE(CheckMegatronPipelineSplit(61, 8, 4, {}).ok());
}

TEST(MegatronValidateArgs, AssertionsAreErrorsNamingTheFlag) {
  const std::string base =
      "pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --global-batch-size 64 --vocab-size 32000 --bf16 ";
  const struct {
    const char* extra;
    const char* error;
  } cases[] = {
      // Issue 26 N8: 0 was replaced by the default in silence.
      {"--tensor-model-parallel-size 0", "--tensor-model-parallel-size: 0 is not accepted"},
      {"--micro-batch-size 0", "--micro-batch-size: 0 is not accepted"},
      {"--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 0",
       "--num-layers-per-virtual-pipeline-stage: 0 is not accepted"},
      // Overlap prerequisites: TP overlap needs sequence parallelism, which is off at TP 1.
      {"--tp-comm-overlap", "--tp-comm-overlap: needs --tensor-model-parallel-size > 1"},
      {"--tensor-model-parallel-size 2 --tp-comm-overlap", "--tp-comm-overlap: needs --sequence-parallel"},
      {"--overlap-param-gather --overlap-grad-reduce", "--overlap-param-gather: needs --use-distributed-optimizer"},
      {"--use-distributed-optimizer --overlap-param-gather", "--overlap-param-gather: needs --overlap-grad-reduce"},
      {"--fp8-format hybrid --fp8-param-gather", "--fp8-param-gather: needs --use-distributed-optimizer"},
      // Precision pairs and sharding requirements.
      {"--fp16", "--fp16: and --bf16 are both given"},
      {"--use-torch-fsdp2", "--use-torch-fsdp2: needs --untie-embeddings-and-output-weights"},
      {"--untie-embeddings-and-output-weights --use-torch-fsdp2 --pipeline-model-parallel-size 2",
       "--use-torch-fsdp2: is not supported with pipeline parallelism"},
      {"--use-megatron-fsdp", "--use-megatron-fsdp: needs --ckpt-format fsdp_dtensor"},
      // Divisibility of the model by the layout.
      {"--tensor-model-parallel-size 3", "--tensor-model-parallel-size: 3 does not divide --num-attention-heads 16"},
      {"--group-query-attention --num-query-groups 2 --tensor-model-parallel-size 4",
       "--tensor-model-parallel-size: 4 does not divide --num-query-groups 2"},
      {"--pipeline-model-parallel-size 3", "--num-layers: 8 is not divisible by --pipeline-model-parallel-size 3"},
      {"--context-parallel-size 3", "--seq-length: 1024 must be a multiple of 2 x --context-parallel-size = 6"},
      {"--expert-model-parallel-size 2", "--expert-model-parallel-size: needs --num-experts"},
      {"--num-experts 6 --expert-model-parallel-size 4", "--expert-model-parallel-size: 4 does not divide --num-experts 6"},
      {"--pipeline-model-parallel-size 1 --num-virtual-stages-per-pipeline-rank 2",
       "--num-virtual-stages-per-pipeline-rank: virtual pipeline stages need --pipeline-model-parallel-size > 1"},
      {"--train-iters 10 --train-samples 640", "--train-samples: and --train-iters are both given"},
      {"--recompute-granularity selective --recompute-method uniform",
       "--recompute-method: is not supported with selective recompute"},
      {"--mtp-num-layers 1", "--mtp-num-layers: needs --position-embedding-type rope or none"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    auto r = JobFromMegatronArgs(Split(base + c.extra));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
  // Required by arguments.py (required_args).
  auto no_max_pos = JobFromMegatronArgs(Split(
      "pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --vocab-size 32000"));
  ASSERT_FALSE(no_max_pos.ok());
  EXPECT_THAT(std::string(no_max_pos.status().message()), HasSubstr("--max-position-embeddings: required"));
  // The checks that need the GPU count, in the launcher's flags.
  auto r = JobFromMegatronArgs(Split(base + "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 4"));
  ASSERT_TRUE(r.ok()) << r.status();
  auto world = r->Finalize(8, "h100-sxm");
  ASSERT_FALSE(world.ok());
  EXPECT_THAT(std::string(world.status().message()),
              HasSubstr("--tensor-model-parallel-size x --pipeline-model-parallel-size x --context-parallel-size = "
                        "4 x 4 x 1 = 16 does not divide the 8 GPUs"));
  auto gbs = r->Finalize(16 * 48, "h100-sxm");
  ASSERT_FALSE(gbs.ok());
  EXPECT_THAT(std::string(gbs.status().message()),
              HasSubstr("--global-batch-size: 64 is not a multiple of --micro-batch-size x data-parallel size = 1 x 48"));
  // No --global-batch-size: micro-batch x DP, as arguments.py sets it.
  auto no_gbs = JobFromMegatronArgs(Split(
      "pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --vocab-size 32000 --bf16 --micro-batch-size 2"));
  ASSERT_TRUE(no_gbs.ok()) << no_gbs.status();
  auto spec = no_gbs->Finalize(16, "h100-sxm");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->training().global_batch_size(), 32);
}

// NVIDIA's GPT-3 175B example (tests/data/real_inputs/megatron/examples_gpt3_train_gpt3_175b_distributed.sh,
// NVIDIA/Megatron-LM commit 779c5b748dbcf00ad9e36d539c576b404ab4abe9) as its torchrun line
// expands with the script's own values and placeholder paths for $1..$5: no --tokenizer-type,
// so pretrain_gpt.py's default GPT2BPETokenizer reads --vocab-file/--merge-file (GPT-2 BPE,
// 50,257 entries).
constexpr char kGpt3_175B[] =
    "torchrun --nproc_per_node 8 --nnodes 1 --master_addr localhost --master_port 29500 pretrain_gpt.py "
    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048 "
    "--attention-backend auto --micro-batch-size 1 --global-batch-size 1536 --step-batch-size-schedule "
    "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536 --train-iters 500000 --weight-decay 0.1 --adam-beta1 0.9 "
    "--adam-beta2 0.95 --init-method-std 0.006 --clip-grad 1.0 --fp16 --lr 6.0e-5 --lr-decay-style cosine "
    "--min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 430000 --tensor-model-parallel-size 8 "
    "--pipeline-model-parallel-size 16 --data-path /data/gpt3_text_document --vocab-file /data/gpt2-vocab.json "
    "--merge-file /data/gpt2-merges.txt --split 949,50,1 --log-interval 100 --save-interval 10000 "
    "--eval-interval 1000 --save /ckpt --load /ckpt --eval-iters 10 --tensorboard-dir /tb";

TEST(MegatronLaunchLines, Gpt3_175BExampleWithGpt2Bpe) {
  auto r = JobFromMegatronArgs(Split(kGpt3_175B));
  ASSERT_TRUE(r.ok()) << r.status();
  // 50,257 padded to a multiple of 128 x TP 8 = 1024: 51,200 (_vocab_size_with_padding).
  EXPECT_EQ(r->spec.model().shape().vocab_size(), 51200);
  // GPT-3 paper (Brown et al. 2020, Table 2.1): 175.0B parameters (96 layers, d 12288).
  EXPECT_NEAR(Count(*r).total / 175.0e9, 1.0, 0.01) << Count(*r).total;
  EXPECT_EQ(r->spec.training().precision().params(), v1::D_TYPE_FP16);
  // The launcher's flags are not Megatron's: none of torchrun's is listed.
  for (const std::string& a : r->ignored) EXPECT_EQ(a.find("--master_addr"), std::string::npos) << a;
  // As the script comes (NUM_NODES=1: torchrun's 8 GPUs) Megatron refuses TP 8 x PP 16.
  EXPECT_EQ(r->launcher_gpus, 8);
  auto on_8 = r->Finalize(0, "h100-sxm");
  ASSERT_FALSE(on_8.ok());
  EXPECT_THAT(std::string(on_8.status().message()), HasSubstr("= 128 does not divide the 8 GPUs"));
  auto on_1024 = r->Finalize(1024, "a100-80gb");
  ASSERT_TRUE(on_1024.ok()) << on_1024.status();
  auto job = JobFromSpec(*on_1024, testing::BuiltinCatalog(), "", nullptr);
  ASSERT_TRUE(job.ok()) << job.status();
}

// Megatron-LM's Megatron-FSDP DeepSeek-V3 example
// (tests/data/real_inputs/megatron/examples_megatron_fsdp_sbatch_mfsdp_deepseek_v3.sh,
// NVIDIA/Megatron-LM commit adfe9e11d93f803eaac097c5cc09ea88e45e5a0d): PRETRAIN_ARGS with the
// script's defaults (TP 1, EP 8, MBS 4, GBS 2048) and its USE_MEGATRON_FSDP=1 branch, the
// logging/profiling/wandb arguments left out, as `python pretrain_gpt.py ...` inside TRAINING_CMD.
constexpr char kDeepSeekV3Mfsdp[] =
    "python /opt/megatron/pretrain_gpt.py --distributed-timeout-minutes 60 --tensor-model-parallel-size 1 "
    "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --context-parallel-size 1 "
    "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --use-mcore-models --sequence-parallel "
    "--use-flash-attn --disable-bias-linear --micro-batch-size 4 --global-batch-size 2048 --train-samples 585937500 "
    "--exit-duration-in-mins 220 --no-check-for-nan-in-loss-and-grad --manual-gc --manual-gc-interval 10 "
    "--recompute-granularity selective --recompute-modules mlp moe mla_up_proj layernorm --transformer-impl "
    "transformer_engine --seq-length 4096 --data-cache-path /out/cache --tokenizer-type HuggingFaceTokenizer "
    "--tokenizer-model deepseek-ai/DeepSeek-V3 --data-path /data --split 99,1,0 --no-mmap-bin-files "
    "--no-create-attention-mask-in-dataloader --num-workers 6 --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 "
    "--num-attention-heads 128 --kv-channels 128 --max-position-embeddings 4096 --position-embedding-type rope "
    "--rotary-base 10000 --make-vocab-size-divisible-by 3232 --normalization RMSNorm --norm-epsilon 1e-6 --swiglu "
    "--untie-embeddings-and-output-weights --multi-latent-attention --attention-dropout 0.0 --hidden-dropout 0.0 "
    "--clip-grad 1.0 --weight-decay 0.1 --qk-layernorm --num-experts 256 --moe-layer-freq [0]*3+[1]*58 "
    "--moe-ffn-hidden-size 2048 --moe-shared-expert-intermediate-size 2048 --moe-router-load-balancing-type "
    "seq_aux_loss --moe-router-topk 8 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
    "--moe-router-pre-softmax --moe-grouped-gemm --moe-aux-loss-coeff 1e-4 --moe-router-group-topk 4 "
    "--moe-router-num-groups 8 --moe-router-topk-scaling-factor 2.5 --moe-router-score-function sigmoid "
    "--moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-3 --moe-router-dtype fp32 --moe-permute-fusion "
    "--moe-router-force-load-balancing --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
    "--qk-pos-emb-head-dim 64 --v-head-dim 128 --rotary-scaling-factor 40 --mscale 1.0 --mscale-all-dim 1.0 "
    "--mtp-num-layers 1 --mtp-loss-scaling-factor 0.1 --bf16 --use-megatron-fsdp --data-parallel-sharding-strategy "
    "optim_grads_params --no-gradient-accumulation-fusion --use-distributed-optimizer --calculate-per-token-loss "
    "--init-model-with-meta-device --ckpt-format fsdp_dtensor --fsdp-double-buffer --use-nccl-ub "
    "--megatron-fsdp-grad-comm-dtype bf16 --megatron-fsdp-main-grads-dtype bf16";

TEST(MegatronLaunchLines, DeepSeekV3MegatronFsdpExample) {
  auto r = JobFromMegatronArgs(Split(kDeepSeekV3Mfsdp));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.training().sharding(), v1::SHARDING_ZERO3);
  EXPECT_EQ(r->spec.model().shape().vocab_size(), 129280);  // 3232 x 40
  EXPECT_EQ(r->spec.model().shape().moe().first_dense_layers(), 3);
  // --moe-router-num-groups 8 --moe-router-group-topk 4: node-limited routing (read since
  // 2026-11-30; the model had neither, so no node limit and a softmax router's launches).
  EXPECT_EQ(r->spec.model().shape().moe().routed_groups(), 8);
  EXPECT_EQ(r->spec.model().shape().moe().max_routed_groups(), 4);
  EXPECT_THAT(r->ignored, ::testing::Not(::testing::Contains(::testing::HasSubstr("moe-router-num-groups"))));
  // Refused as Megatron-Core's transformer_config.py refuses them, naming the flag.
  for (const auto& [from, to, message] :
       {std::tuple<const char*, const char*, const char*>{"--moe-router-num-groups 8 ", "", "--moe-router-group-topk: needs --moe-router-num-groups"},
        {"--moe-router-num-groups 8 ", "--moe-router-num-groups 7 ", "--moe-router-num-groups: 7 must divide --num-experts 256"},
        {"--moe-router-group-topk 4 ", "--moe-router-group-topk 16 ", "--moe-router-group-topk: 16 exceeds --moe-router-num-groups 8"}}) {
    auto bad = JobFromMegatronArgs(Split(absl::StrReplaceAll(kDeepSeekV3Mfsdp, {{from, to}})));
    ASSERT_FALSE(bad.ok()) << from;
    EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr(message));
  }
  EXPECT_NEAR(Count(*r).total / 671e9, 1.0, 0.01);
  EXPECT_THAT(r->ignored, ::testing::Contains("--megatron-fsdp-main-grads-dtype bf16"));
  // --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep (read since the twelfth
  // session; a flex line was costed as the all-to-all dispatcher before: review of 2026-11-29, L7).
  EXPECT_EQ(r->spec.training().moe_dispatcher(), "hybridep");
  auto deepep = JobFromMegatronArgs(Split(absl::StrReplaceAll(kDeepSeekV3Mfsdp, {{" --moe-flex-dispatcher-backend hybridep", ""}})));
  ASSERT_TRUE(deepep.ok()) << deepep.status();
  EXPECT_EQ(deepep->spec.training().moe_dispatcher(), "deepep");  // flex's default backend
  // --moe-router-fusion (store_true): Transformer Engine's fused router; absent, left to the framework.
  EXPECT_FALSE(r->spec.training().has_moe_router_fusion());
  auto fused = JobFromMegatronArgs(Split(absl::StrCat(kDeepSeekV3Mfsdp, " --moe-router-fusion")));
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_TRUE(fused->spec.training().moe_router_fusion());
  // --cuda-graph-impl transformer_engine --cuda-graph-scope: the parts captured ("full", deprecated,
  // is the whole layer: no scope); a scope without graphs is listed as having no effect; a partial
  // scope with the local impl is refused, as arguments.py says.
  auto graphed = JobFromMegatronArgs(Split(absl::StrCat(
      kDeepSeekV3Mfsdp, " --cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess")));
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  EXPECT_TRUE(graphed->spec.training().cuda_graphs());
  EXPECT_THAT(graphed->spec.training().cuda_graph_scope(), ::testing::ElementsAre("attn", "moe_router", "moe_preprocess"));
  auto whole = JobFromMegatronArgs(Split(absl::StrCat(kDeepSeekV3Mfsdp, " --cuda-graph-impl transformer_engine --cuda-graph-scope full")));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(whole->spec.training().cuda_graphs());
  EXPECT_EQ(whole->spec.training().cuda_graph_scope_size(), 0);
  auto no_impl = JobFromMegatronArgs(Split(absl::StrCat(kDeepSeekV3Mfsdp, " --cuda-graph-scope attn")));
  ASSERT_TRUE(no_impl.ok()) << no_impl.status();
  EXPECT_FALSE(no_impl->spec.training().cuda_graphs());
  EXPECT_THAT(no_impl->ignored, ::testing::Contains("--cuda-graph-scope attn (no CUDA graphs without --cuda-graph-impl)"));
  auto local = JobFromMegatronArgs(Split(absl::StrCat(kDeepSeekV3Mfsdp, " --cuda-graph-impl local --cuda-graph-scope attn")));
  ASSERT_FALSE(local.ok());
  EXPECT_THAT(std::string(local.status().message()), ::testing::HasSubstr("needs --cuda-graph-impl transformer_engine"));
}

TEST(MegatronLaunchLines, HybridModelsAreTheirLayerPattern) {
  // examples/mamba/train.sh (NVIDIA/Megatron-LM 60408d5f12fb2757df6ba015db5787c3ed648652,
  // tests/data/real_inputs/megatron/examples_mamba_train.sh, MODEL_SCALE 8B): pretrain_hybrid.py with
  // a layer pattern of 24 Mamba-2, 4 attention and 28 MLP layers (the 8B Mamba-2-Hybrid of Waleffe
  // et al. 2024, arXiv:2406.07887; NeMo NVIDIAMambaHybridConfig8B: ffn 16384 = 4h). Its tokenizer
  // is a SentencePiece file, so the vocabulary is given here.
  auto hybrid = JobFromCommand(
      Split("torchrun --nproc_per_node 8 ../../pretrain_hybrid.py --tensor-model-parallel-size 4 --sequence-parallel "
            "--pipeline-model-parallel-size 1 --use-distributed-optimizer --untie-embeddings-and-output-weights "
            "--position-embedding-type none --hybrid-layer-pattern "
            "M-M-M--M-M*-M-M-M-M--M*-M-M-M-M-M*--M-M-M-M-M*-M--M-M-M- "
            "--hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
            "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 4 --global-batch-size 8 "
            "--vocab-size 256000 --bf16"),
      "");
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  const v1::ModelShape& hs = hybrid->spec.model().shape();
  EXPECT_EQ(hs.layers(), 56);
  auto shape = ModelShapeFromProto(hs, "model.shape");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->HybridCounts().mamba, 24);
  EXPECT_EQ(shape->HybridCounts().attention, 4);
  EXPECT_EQ(shape->HybridCounts().mlp, 28);
  EXPECT_EQ(shape->ffn_hidden_size, 16384);
  EXPECT_NEAR(Count(*hybrid).total / 8.0e9, 1.0, 0.1);  // "8B"
  // Nemotron 3 Nano's Megatron-LM arguments (examples/post_training/modelopt/conf/nvidia/
  // NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh @d98e8a6) with a training layout: the model of the
  // preset built from Megatron-Bridge's recipe.
  auto nano = JobFromCommand(
      Split("torchrun --nproc_per_node 8 --nnodes 2 pretrain_hybrid.py --micro-batch-size 1 "
            "--moe-token-dispatcher-type alltoall --moe-router-score-function sigmoid --moe-grouped-gemm "
            "--num-experts 128 --moe-router-topk 6 --moe-router-topk-scaling-factor 2.5 "
            "--moe-shared-expert-intermediate-size 3712 --mamba-num-heads 64 --mamba-head-dim 64 "
            "--hybrid-layer-pattern MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME --untie-embeddings-and-output-weights "
            "--disable-bias-linear --position-embedding-type none --squared-relu --hidden-size 2688 "
            "--num-attention-heads 32 --group-query-attention --num-query-groups 2 --ffn-hidden-size 1856 --kv-channels 128 "
            "--normalization RMSNorm --tokenizer-type HuggingFaceTokenizer --bf16 --seq-length 8192 "
            "--max-position-embeddings 8192 --vocab-size 131072 --expert-model-parallel-size 8 --global-batch-size 1024"),
      "");
  ASSERT_TRUE(nano.ok()) << nano.status();
  const ModelShape preset = *testing::BuiltinCatalog().FindModel("nemotron-3-nano-30b-a3b");
  EXPECT_EQ(nano->spec.model().shape().hybrid_layer_pattern(), preset.hybrid_layer_pattern);
  EXPECT_DOUBLE_EQ(Count(*nano).total, CountParameters(preset).total);
  // pretrain_mamba.py without a pattern: every layer Mamba (pattern_from_ratios with no ratios);
  // the ratios as Megatron-Core spaces them (hybrid_layer_allocation.py pattern_from_ratios).
  const std::string dims =
      " --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
      "--vocab-size 32000 --global-batch-size 8 --bf16";
  auto mamba = JobFromCommand(Split("python pretrain_mamba.py --num-layers 8" + dims), "");
  ASSERT_TRUE(mamba.ok()) << mamba.status();
  EXPECT_EQ(mamba->spec.model().shape().hybrid_layer_pattern(), "MMMMMMMM");
  auto ratios = JobFromCommand(
      Split("python pretrain_hybrid.py --num-layers 10 --hybrid-attention-ratio 0.2 --hybrid-mlp-ratio 0.4" + dims), "");
  ASSERT_TRUE(ratios.ok()) << ratios.status();
  EXPECT_EQ(ratios->spec.model().shape().hybrid_layer_pattern(), "M-M*-M*-M-");  // pattern_from_ratios run in Python
  // Stage marks: 4 segments on PP 2 are 2 virtual stages; the pattern overrides --num-layers.
  auto pipes = JobFromCommand(
      Split("python pretrain_hybrid.py --num-layers 7 --hybrid-layer-pattern M-|M*|M-|M- --pipeline-model-parallel-size 2" +
            dims),
      "");
  ASSERT_TRUE(pipes.ok()) << pipes.status();
  EXPECT_EQ(pipes->spec.model().shape().layers(), 8);
  EXPECT_EQ(pipes->spec.parallelism().vpp(), 2);
  EXPECT_THAT(pipes->ignored, ::testing::Contains(HasSubstr("--num-layers 7")));
  // An older line giving the ratios beside a pattern that has the layers they allocate (the
  // mamba_hybrid_layer_allocation.py check), and mixer flags beside a pattern without Mamba
  // layers (listed: they build nothing).
  auto both = JobFromCommand(
      Split("python pretrain_hybrid.py --num-layers 10 --hybrid-attention-ratio 0.2 --hybrid-mlp-ratio 0.4 "
            "--hybrid-override-pattern M-*M-M*M-- --is-hybrid-model" + dims),
      "");
  ASSERT_TRUE(both.ok()) << both.status();
  auto no_mamba = JobFromCommand(Split("python pretrain_hybrid.py --hybrid-layer-pattern *-*- --mamba-state-dim 64" + dims), "");
  ASSERT_TRUE(no_mamba.ok()) << no_mamba.status();
  EXPECT_FALSE(no_mamba->spec.model().shape().has_mamba());
  EXPECT_THAT(no_mamba->ignored, ::testing::Contains(HasSubstr("--mamba-state-dim 64 (the hybrid layer pattern has no Mamba")));
  // Segments of unequal length are accepted (arguments.py skips the layers % PP check with a
  // pattern); MoE flags of a pattern without E layers build nothing and are listed.
  auto uneven = JobFromCommand(
      Split("python pretrain_hybrid.py --hybrid-layer-pattern M-M*-|M-M- --pipeline-model-parallel-size 2 "
            "--num-experts 8 --moe-router-topk 2" + dims),
      "");
  ASSERT_TRUE(uneven.ok()) << uneven.status();
  EXPECT_EQ(uneven->spec.model().shape().layers(), 9);
  EXPECT_FALSE(uneven->spec.model().shape().has_moe());
  EXPECT_THAT(uneven->ignored, ::testing::Contains(HasSubstr("--num-experts 8 (the hybrid layer pattern has no MoE")));
  const struct {
    const char* flags;
    const char* error;
  } bad[] = {
      {"--hybrid-layer-pattern M*M*/*M/*E", "MTP pattern 2 '*E' differs from the first '*M'"},
      {"--hybrid-layer-pattern M*M*/*G", "'G' at position 1 of the MTP pattern"},
      {"--hybrid-layer-pattern M*M* --mtp-num-layers 2", "--mtp-num-layers: a hybrid model needs its MTP module's layers"},
      {"--hybrid-layer-pattern M*G-", "'G' at position 2"},
      {"--hybrid-layer-pattern M*M- --hybrid-override-pattern M*M-", "cannot both be specified"},
      {"--hybrid-layer-pattern M*M- --num-virtual-stages-per-pipeline-rank 2 --pipeline-model-parallel-size 2",
       "--num-virtual-stages-per-pipeline-rank: should not be used with a hybrid layer pattern"},
      {"--num-layers 4 --mamba-state-dim 64", "--mamba-state-dim: is given without a hybrid layer pattern"},
      {"--num-layers 4 --hybrid-attention-ratio 1.5", "--hybrid-attention-ratio: '1.5' is not a ratio"},
      {"--hybrid-layer-pattern M*M- --hybrid-mlp-ratio 0.5", "--hybrid-attention-ratio: allocates 0 attention layers of 4"},
      {"--hybrid-layer-pattern M*M- --hybrid-attention-ratio 0.25 --hybrid-mlp-ratio 0.5", "--hybrid-mlp-ratio: allocates 2 MLP layers of 4"},
  };
  for (const auto& c : bad) {
    SCOPED_TRACE(c.flags);
    auto r = JobFromCommand(Split(std::string("python pretrain_gpt.py ") + c.flags + dims), "");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error));
  }
  auto bert = JobFromCommand(Split(std::string("python pretrain_bert.py ") + "--num-layers 24 --hidden-size 1024"), "");
  ASSERT_FALSE(bert.ok());
  EXPECT_THAT(std::string(bert.status().message()), HasSubstr("pretrain_bert.py: not a GPT model"));
}

TEST(MegatronLaunchLines, LaunchersAreSkippedAndCountTheGpus) {
  const std::string model =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 "
      "--global-batch-size 64 --vocab-size 32000 --bf16 --tensor-model-parallel-size 2";
  const struct {
    std::string cmd;
    int64_t gpus;
  } cases[] = {
      {"torchrun --nproc-per-node 8 --nnodes 2 --rdzv-backend c10d --rdzv-endpoint host:29500 train.py " + model, 16},
      {"python -m torch.distributed.run --nproc_per_node=4 --nnodes=2 pretrain_gpt.py " + model, 8},
      {"srun -N 4 --ntasks-per-node 8 --container-image nvcr.io/nvidia/pytorch:25.01-py3 --mpi pmix python "
       "pretrain_gpt.py " + model, 32},
      {"srun --nodes=2 --gpus-per-node=h100:8 --exclusive bash run_pretrain.sh " + model, 16},
      {"deepspeed --num_gpus 8 --num_nodes 2 pretrain_gpt.py " + model, 16},
      {"CUDA_DEVICE_MAX_CONNECTIONS=1 mpirun -np 8 -x NCCL_DEBUG python pretrain_gpt.py " + model, 8},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.cmd);
    auto r = JobFromCommand(Split(c.cmd), "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->launcher_gpus, c.gpus) << r->launcher_gpus_from;
    // Nothing of the launchers is read as the program's: the ignored list is empty.
    EXPECT_THAT(r->ignored, ::testing::IsEmpty());
    auto spec = r->Finalize(0, "h100-sxm");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->cluster().gpu_count(), c.gpus);
  }
  // No GPU count anywhere: the error says where it would come from.
  auto none = JobFromCommand(Split("python pretrain_gpt.py " + model), "");
  ASSERT_TRUE(none.ok());
  auto fin = none->Finalize(0, "h100-sxm");
  ASSERT_FALSE(fin.ok());
  EXPECT_THAT(std::string(fin.status().message()), HasSubstr("torchrun --nproc_per_node x --nnodes"));
  // A command inside `bash -c "..."` behind srun (the Megatron-FSDP example's form).
  auto shell = JobFromCommand({"srun", "--mpi=pmix", "-l", "-N", "2", "--ntasks-per-node", "8", "bash", "-x", "-c",
                               "\ncd /opt/megatron;\ngit rev-parse HEAD;\nexport PYTHONPATH=/opt/megatron:;\n python "
                               "/opt/megatron/pretrain_gpt.py " + model + " --data-path \"/data/a b\""},
                              "");
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_EQ(shell->launcher_gpus, 16);
  EXPECT_THAT(shell->ignored, ::testing::Contains("--data-path /data/a b"));
}

TEST(MegatronArguments, ArgumentListAtThePinnedCommit) {
  EXPECT_TRUE(IsMegatronArgument("--num-virtual-stages-per-pipeline-rank"));
  EXPECT_TRUE(IsMegatronArgument("num-layers-per-virtual-pipeline-stage"));
  EXPECT_TRUE(IsMegatronArgument("--decoder-first-pipeline-num-layers"));
  EXPECT_TRUE(IsMegatronArgument("--num-distributed-optimizer-instances"));
  // Not a Megatron-LM argument (NeMo's name of the field): never suggested.
  EXPECT_FALSE(IsMegatronArgument("--virtual-pipeline-model-parallel-size"));
  EXPECT_FALSE(IsMegatronArgument("--parallelism.tensor_parallel_degree"));
}

// Suggestions print only arguments Megatron-LM's parser defines, and remove only what the job used.
TEST(MegatronArguments, SuggestedChangesUseOnlyMegatronArguments) {
  const std::vector<std::string> none;
  const std::vector<std::string> used = {"--recompute-activations", "--num-layers-per-virtual-pipeline-stage",
                                         "--use-distributed-optimizer", "--sequence-parallel", "--tp-comm-overlap"};
  const struct {
    const char *field, *before, *after;
  } changes[] = {
      {"parallelism.tp", "1", "8"}, {"parallelism.pp", "1", "4"}, {"parallelism.vpp", "1", "5"},
      {"parallelism.vpp", "5", "1"}, {"parallelism.cp", "1", "2"}, {"parallelism.ep", "1", "8"},
      {"parallelism.etp", "8", "1"}, {"parallelism.sequence_parallel", "false", "true"},
      {"parallelism.sequence_parallel", "true", "false"}, {"parallelism.dp_replicate", "1", "2"},
      {"training.micro_batch_size", "1", "2"}, {"training.recompute", "selective", "none"},
      {"training.recompute", "none", "full"}, {"training.recompute", "full", "selective"},
      {"training.recompute_modules", "", "core_attn,mlp"}, {"training.recompute_num_layers", "0", "4"},
      {"training.sharding", "none", "zero1"}, {"training.sharding", "zero1", "zero3"},
      {"training.sharding", "zero1", "none"}, {"training.overlap_tp_comm", "false", "true"},
      {"training.overlap_tp_comm", "true", "false"}, {"training.overlap_dp_comm", "false", "true"},
      {"training.overlap_dp_comm", "true", "false"}, {"training.precision.gemm", "bf16", "fp8"},
      {"training.precision.gemm", "fp8", "bf16"}, {"training.fp8_param_gather", "false", "true"},
  };
  for (const auto* flags : {&none, &used}) {
    for (const auto& c : changes) {
      const std::string text = MegatronArgsForChange(*flags, c.field, c.before, c.after);
      SCOPED_TRACE(absl::StrCat(c.field, " ", c.before, " -> ", c.after, ": ", text));
      bool removing = false;
      for (const std::string& w : Split(text)) {
        if (w == "remove") removing = true;
        if (absl::EndsWith(w, ";")) continue;
        if (!absl::StartsWith(w, "--")) continue;
        EXPECT_TRUE(IsMegatronArgument(w)) << w;
        // Removing only what was given.
        if (removing) EXPECT_TRUE(std::find(flags->begin(), flags->end(), w) != flags->end()) << w;
      }
    }
  }
  // The cases: VPP as Megatron-LM names it; removing what the job wrote.
  EXPECT_EQ(MegatronArgsForChange(none, "parallelism.vpp", "1", "5"), "--num-virtual-stages-per-pipeline-rank 5");
  EXPECT_EQ(MegatronArgsForChange(used, "parallelism.vpp", "4", "5"),
            "--num-virtual-stages-per-pipeline-rank 5; remove --num-layers-per-virtual-pipeline-stage");
  EXPECT_EQ(MegatronArgsForChange(used, "training.recompute", "selective", "none"), "remove --recompute-activations");
  EXPECT_EQ(MegatronArgsForChange(none, "training.recompute", "selective", "none"), "");
  EXPECT_EQ(MegatronArgsForChange(none, "training.overlap_tp_comm", "false", "true"), "--tp-comm-overlap --sequence-parallel");
}

// The layouts Megatron-LM starts, for the search (issue 23 item 4): DeepSeek-V3's 61 layers
// on PP 9 only with the uneven-split flags; on PP 8 x VPP 4 not at all; TP overlap at TP 1 never.
TEST(MegatronArguments, LayoutAcceptance) {
  auto base = LoadJob(std::string(STEPCAST_SOURCE_DIR) + "/examples/deepseek-v3-gb200.textproto", testing::BuiltinCatalog(),
                      nullptr);
  ASSERT_TRUE(base.ok()) << base.status();
  Job job = *base;
  // PP 4 x VPP 4: 61 layers in 16 chunks only with a layout (Megatron-Bridge's recipe sets one,
  // src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py _get_deepseek_v3_pipeline_layout (4, 4)).
  LayoutAcceptance a = MegatronAcceptsLayout(job);
  EXPECT_TRUE(a.accepted);
  EXPECT_THAT(a.needs, HasSubstr("--pipeline-model-parallel-layout E"));
  job.parallelism.pp = 9;
  job.parallelism.vpp = 1;
  a = MegatronAcceptsLayout(job);
  EXPECT_TRUE(a.accepted);
  EXPECT_EQ(a.needs, "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
  // More stages than layers: nothing places them.
  job.parallelism.pp = 16;
  job.parallelism.vpp = 4;
  a = MegatronAcceptsLayout(job);
  EXPECT_FALSE(a.accepted);
  EXPECT_THAT(a.reason, HasSubstr("no split fits"));
  // The generated layouts parse back to the stages and layers they were made for (a launch line
  // carrying one is accepted: JobFromMegatronArgs counts its stages and 't' layers).
  for (auto [layers, pp, vpp] : {std::tuple{61, 8, 4}, std::tuple{94, 8, 1}, std::tuple{61, 16, 1}, std::tuple{126, 8, 2}}) {
    const std::string layout = MegatronPipelineLayout(layers, pp, vpp);
    SCOPED_TRACE(layout);
    ASSERT_FALSE(layout.empty());
    auto r = JobFromMegatronArgs(Split(absl::StrCat(
        "pretrain_gpt.py --num-layers ", layers, " --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
        "--max-position-embeddings 1024 --vocab-size 32000 --bf16 --pipeline-model-parallel-size ", pp,
        " --pipeline-model-parallel-layout ", layout)));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(std::max<int64_t>(1, r->spec.parallelism().vpp()), vpp);
  }
  job.parallelism.pp = 4;
  job.parallelism.vpp = 1;
  job.parallelism.tp = 1;
  job.training.overlap_tp_comm = true;
  a = MegatronAcceptsLayout(job);
  EXPECT_FALSE(a.accepted);
  EXPECT_THAT(a.reason, HasSubstr("--tp-comm-overlap at TP 1"));
}

}  // namespace
}  // namespace stepcast
