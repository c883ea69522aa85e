// Step-time model: structure and hand-computed terms.
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "core/gemm_model.h"
#include "core/predict.h"
#include "core/step_time.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

Job Llama70B() {
  auto job = testing::JobFromYaml(R"(
model: llama3-70b
hardware: h100-sxm
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 8, vpp: 5, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128, sharding: zero1})");
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

TEST(StepTime, BreakdownAddsUpAndSplitsByResource) {
  const StepTimeEstimate st = EstimateStepTime(Llama70B());
  EXPECT_NEAR(st.breakdown.Total(), st.step_time_s, 1e-12 * st.step_time_s);
  const double split = st.compute_bound_s + st.memory_bound_s + st.network_intra_node_s +
                       st.network_inter_node_s + st.bubble_s;
  EXPECT_NEAR(split, st.step_time_s, 1e-9 * st.step_time_s);
}

TEST(StepTime, SlowerMeasuredGemmSlowsOnlyTheGemmTerm) {
  // Calibration use: a GEMM rate half as fast doubles every compute-bound GEMM's time and
  // nothing else (elementwise, communication and optimizer terms are unchanged).
  Job fast = Llama70B();
  for (auto& g : fast.profile.gemm) g.flops_per_s = 700e12;
  Job slow = fast;
  for (auto& g : slow.profile.gemm) g.flops_per_s = 350e12;
  const StepBreakdown a = EstimateStepTime(fast).breakdown;
  const StepBreakdown b = EstimateStepTime(slow).breakdown;
  // Compute-bound GEMMs take twice as long; the per-kernel floor and the HBM traffic of the
  // GEMM shape model (core/gemm_model.h) do not scale, so the term grows by a little less.
  EXPECT_GT(b.gemm_s, 1.9 * a.gemm_s);
  EXPECT_LE(b.gemm_s, 2.0 * a.gemm_s);
  EXPECT_DOUBLE_EQ(b.elementwise_s, a.elementwise_s);
  EXPECT_DOUBLE_EQ(b.tp_comm_s, a.tp_comm_s);
  EXPECT_DOUBLE_EQ(b.optimizer_s, a.optimizer_s);
  EXPECT_DOUBLE_EQ(b.attention_s, a.attention_s);  // fused attention has its own rate
}

TEST(StepTime, ReusedGemmModelFollowsEveryChangeOfTheProfile) {
  // The GEMM model is reused on a thread while the hardware and profile inputs it reads are
  // unchanged (core/step_time.cc ThreadGemmModel): an edit in place, a different profile, and a
  // return to the first must each give that profile's own answer, never a stale one.
  Job job = Llama70B();
  for (auto& g : job.profile.gemm) g.flops_per_s = 700e12;
  const double fast_s = EstimateStepTime(job).breakdown.gemm_s;
  for (auto& g : job.profile.gemm) g.flops_per_s = 350e12;  // same vector, edited in place
  const double slow_s = EstimateStepTime(job).breakdown.gemm_s;
  EXPECT_GT(slow_s, 1.9 * fast_s);
  job.hardware.sm_count += 1;  // a hardware input of the model
  EXPECT_NE(EstimateStepTime(job).breakdown.gemm_s, slow_s);
  job.hardware.sm_count -= 1;
  EXPECT_DOUBLE_EQ(EstimateStepTime(job).breakdown.gemm_s, slow_s);
  for (auto& g : job.profile.gemm) g.flops_per_s = 700e12;
  EXPECT_DOUBLE_EQ(EstimateStepTime(job).breakdown.gemm_s, fast_s);
}

TEST(StepTime, ThreadMemoOfGemmEstimatesGivesEachJobItsFreshAnswer) {
  // GEMM estimates are kept on the thread across predictions (core/step_time.cc ThreadGemm),
  // keyed by dtype and shape, and the memo is emptied when 3/4 full. Each job, predicted after
  // others on the same thread (different dtypes and shapes, enough to fill the memo), must give
  // the same step time and the same warnings (the unaligned-shape warning included) as on a
  // fresh thread with an empty memo.
  std::vector<Job> jobs;
  for (int tp : {1, 2, 4, 8}) {
    for (const char* gemm : {"bf16", "fp8"}) {
      auto job = testing::JobFromYaml(absl::StrCat(R"(
model: llama3-70b
hardware: h100-sxm
cluster: {gpu_count: 64}
parallelism: {tp: )", tp, R"(, pp: 8, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128, precision: {gemm: )", gemm, "}}"));
      ASSERT_TRUE(job.ok()) << job.status();
      jobs.push_back(*job);
    }
  }
  auto odd = testing::JobFromYaml(R"(
model:
  shape: {name: odd, layers: 4, hidden_size: 2052, attention_heads: 18, ffn_hidden_size: 5470,
          vocab_size: 50257, ffn_type: gelu}
hardware: h100-sxm
cluster: {gpu_count: 8}
parallelism: {tp: 2}
training: {seq_length: 2048, global_batch_size: 64})");
  ASSERT_TRUE(odd.ok()) << odd.status();
  jobs.push_back(*odd);
  std::vector<StepTimeEstimate> fresh(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::thread([&] { fresh[i] = EstimateStepTime(jobs[i]); }).join();
  }
  bool warned_unaligned = false;
  for (const std::string& w : fresh.back().warnings) warned_unaligned |= absl::StrContains(w, "unaligned shape");
  EXPECT_TRUE(warned_unaligned);
  for (int round = 0; round < 3; ++round) {
    for (size_t n = 0; n < jobs.size(); ++n) {
      const size_t i = round == 1 ? jobs.size() - 1 - n : n;
      const StepTimeEstimate st = EstimateStepTime(jobs[i]);
      EXPECT_EQ(st.step_time_s, fresh[i].step_time_s) << "job " << i << ", round " << round;
      EXPECT_EQ(st.breakdown.gemm_s, fresh[i].breakdown.gemm_s) << "job " << i << ", round " << round;
      EXPECT_EQ(st.warnings, fresh[i].warnings) << "job " << i << ", round " << round;
    }
  }
}

TEST(StepTime, ThreadGemmModelsOfSeveralProfilesEachGiveTheirOwnAnswer) {
  // The thread keeps its last few GEMM models (core/step_time.cc ThreadGemmModel, each with its
  // memo of estimates), keyed by every hardware and profile input GemmModel::Create reads. Jobs
  // on six models (three GPUs; the H100 profile with its flat rates halved; an fp8 job under two
  // fp8 split-accumulation fractions, which only that fraction tells apart), more than the
  // thread keeps, predicted in three orders on one thread: each must give the answer it gets on
  // a fresh thread.
  std::vector<Job> jobs;
  for (const char* hw : {"h100-sxm", "gb200", "a100-80gb"}) {
    auto job = testing::JobFromYaml(absl::StrCat("model: llama3-70b\nhardware: ", hw, R"(
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 8, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128})"));
    ASSERT_TRUE(job.ok()) << job.status();
    jobs.push_back(*job);
  }
  jobs.push_back(jobs[0]);
  for (auto& g : jobs.back().profile.gemm) g.flops_per_s /= 2;
  auto fp8 = testing::JobFromYaml(R"(
model: llama3-70b
hardware: h100-sxm
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 8, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 128, precision: {gemm: fp8}})");
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  ASSERT_GT(fp8->profile.fp8_split_accumulation_fraction, 0.9);
  jobs.push_back(*fp8);
  jobs.push_back(*fp8);
  jobs.back().profile.fp8_split_accumulation_fraction = 0.5;
  std::vector<StepTimeEstimate> fresh(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::thread([&] { fresh[i] = EstimateStepTime(jobs[i]); }).join();
  }
  // The halved rates and the lower fraction are slower: the jobs are told apart.
  EXPECT_GT(fresh[3].breakdown.gemm_s, 1.5 * fresh[0].breakdown.gemm_s);
  EXPECT_GT(fresh[5].breakdown.gemm_s, 1.1 * fresh[4].breakdown.gemm_s);
  for (int round = 0; round < 3; ++round) {
    for (size_t n = 0; n < jobs.size(); ++n) {
      // In order, in reverse, then each job twice after its neighbour.
      const size_t i = round == 0 ? n : round == 1 ? jobs.size() - 1 - n : (n * 5) % jobs.size();
      for (int twice = 0; twice < (round == 2 ? 2 : 1); ++twice) {
        const StepTimeEstimate st = EstimateStepTime(jobs[i]);
        EXPECT_EQ(st.step_time_s, fresh[i].step_time_s) << "job " << i << ", round " << round;
        EXPECT_EQ(st.breakdown.gemm_s, fresh[i].breakdown.gemm_s) << "job " << i << ", round " << round;
        EXPECT_EQ(st.warnings, fresh[i].warnings) << "job " << i << ", round " << round;
      }
    }
  }
}

TEST(StepTime, InterleavingDividesTheBubble) {
  // Narayanan et al. 2021 Sec. 2.2.2: bubble = (p-1)/v x stage time.
  Job j1 = Llama70B();
  j1.parallelism.vpp = 1;
  Job j2 = Llama70B();
  j2.parallelism.vpp = 2;
  const StepTimeEstimate a = EstimateStepTime(j1), b = EstimateStepTime(j2);
  const double stage_a = (a.step_time_s - a.breakdown.pipeline_bubble_s - a.breakdown.dp_comm_s -
                          a.breakdown.optimizer_s) / j1.MicroBatchesPerStep();
  EXPECT_GT(a.breakdown.pipeline_bubble_s, 0);
  // (p-1) x the average stage (the last stage also carries the logits) is below (p-1) x slowest.
  EXPECT_LE(a.breakdown.pipeline_bubble_s, 7 * stage_a + 1e-9);
  EXPECT_GT(a.breakdown.pipeline_bubble_s, 0.9 * 7 * stage_a);
  EXPECT_NEAR(b.breakdown.pipeline_bubble_s / a.breakdown.pipeline_bubble_s, 0.5, 0.02);
}

TEST(StepTime, DataParallelAllReduceByHand) {
  // 16 GPUs of DP on two 8-GPU nodes, no overlap, no sharding: the all-reduce of the fp32
  // gradients over 16 ranks, 8 per node striped over 8 NICs (busbw min(intra, 8 x inter)), in
  // Megatron's buckets of max(40M, 1M x DP) parameters (distributed_data_parallel.py): 8.03 B /
  // 40 M = 201 all-reduces, each paying the latency.
  auto job = testing::JobFromYaml(R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 16}
training: {seq_length: 4096, global_batch_size: 16, overlap_dp_comm: false})");
  ASSERT_TRUE(job.ok()) << job.status();
  const RateProfile& prof = job->profile;
  const CollectiveRate* inter = prof.FindCollective(Collective::kAllReduce, Scope::kInterNode);
  const CollectiveRate* intra = prof.FindCollective(Collective::kAllReduce, Scope::kIntraNode);
  ASSERT_NE(inter, nullptr);
  const double bytes = CountParameters(job->model).total * 4;
  const double busbw = std::min(intra->busbw_bytes_per_s, 8 * inter->busbw_bytes_per_s);
  const double buckets = std::ceil(CountParameters(job->model).total / 40e6);
  EXPECT_EQ(buckets, 201);
  const double expected = buckets * AlphaForGroup(*inter, 16) + bytes * 2 * 15.0 / 16 / busbw;
  EXPECT_NEAR(EstimateStepTime(*job).breakdown.dp_comm_s, expected, 1e-9 * expected);
  job->training.overlap_dp_comm = true;
  EXPECT_LT(EstimateStepTime(*job).breakdown.dp_comm_s, expected);
}

TEST(StepTime, TensorParallelAllReducesByHand) {
  // TP 8 without SP: per layer 2 all-reduces forward and 2 backward of s*b*h bf16 activations.
  // Megatron-LM 2021 (Narayanan et al. 2021) overlaps none of them.
  auto job = testing::JobFromYaml(R"(
model: gpt-22b
hardware: a100-80gb
framework: megatron-lm-2021
cluster: {gpu_count: 8}
parallelism: {tp: 8}
training: {seq_length: 2048, global_batch_size: 1, flash_attention: false})");
  ASSERT_TRUE(job.ok()) << job.status();
  const CollectiveRate* ar = job->profile.FindCollective(Collective::kAllReduce, Scope::kIntraNode);
  const double S = 2048.0 * 6144 * 2;
  const double per_layer = 4 * CollectiveTime(*ar, 8, S);
  const StepBreakdown b = EstimateStepTime(*job).breakdown;
  // The logits add one backward all-reduce of S and three 8 KB statistics all-reduces.
  const double logits = CollectiveTime(*ar, 8, S) + 3 * CollectiveTime(*ar, 8, 2048.0 * 4);
  EXPECT_NEAR(b.tp_comm_s, 48 * per_layer + logits, 1e-9 * b.tp_comm_s);
}

TEST(Predict, BottleneckFollowsTheLargestShare) {
  // Deep pipeline, few micro-batches: the bubble dominates.
  auto deep = testing::JobFromYaml(R"(
model: gpt-1t
hardware: a100-80gb
cluster: {gpu_count: 512}
parallelism: {tp: 8, pp: 64}
training: {seq_length: 2048, global_batch_size: 8, recompute: full, flash_attention: false})");
  ASSERT_TRUE(deep.ok()) << deep.status();
  auto p = Predict(*deep);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bottleneck.kind, BottleneckKind::kPipelineBubble) << p->bottleneck.reason;
  EXPECT_GT(p->bottleneck.share, 0.5);
  // Pure data parallel over slow NICs without overlap: the inter-node network.
  auto dp = testing::JobFromYaml(R"(
model: llama3-8b
hardware: l4
cluster: {gpu_count: 64, gpus_per_node: 1}
training: {seq_length: 512, global_batch_size: 64, overlap_dp_comm: false})");
  ASSERT_TRUE(dp.ok()) << dp.status();
  p = Predict(*dp);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bottleneck.kind, BottleneckKind::kNetworkInterNode) << p->bottleneck.reason;
  // A big dense job on one node: compute, with intensity above the machine balance.
  auto dense = testing::JobFromYaml(R"(
model: llama3-8b
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 64, sharding: zero1})");
  p = Predict(*dense);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bottleneck.kind, BottleneckKind::kCompute);
  EXPECT_GT(p->bottleneck.arithmetic_intensity_flops_per_byte, p->bottleneck.machine_balance_flops_per_byte);
}

TEST(Predict, MfuTokensAndCostAreConsistent) {
  Job job = Llama70B();
  job.training.dataset_tokens = 1e12;
  auto p = Predict(job);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->tokens_per_s, 128.0 * 8192 / p->step_time_s, 1e-9 * p->tokens_per_s);
  EXPECT_NEAR(p->mfu, p->model_flops_per_step / (p->step_time_s * 64 * 989e12), 1e-12);
  EXPECT_NEAR(p->cost.per_hour_usd, 64 * 3.93, 1e-9);
  EXPECT_NEAR(p->cost.steps_per_run, 1e12 / (128.0 * 8192), 1e-6);
  EXPECT_NEAR(p->cost.per_run_usd, p->cost.per_step_usd * p->cost.steps_per_run, 1e-6);
  EXPECT_NEAR(p->cost.per_hbm_tb_per_s_hour_usd, 3.93 / 3.35, 1e-12);  // seed 000's $/TB/s-hr
  EXPECT_NEAR(p->cost.energy_per_step_j, 64 * 700 * p->step_time_s, 1e-6);
}

// Seed 004's quick estimate T = FLOPs / (MFU x peak x P) with the full model-FLOP count, by hand
// for Llama 3 70B (70,553,706,496 parameters, safetensors index of meta-llama/Meta-Llama-3-70B):
// GEMM weights = all - input embedding (128256 x 8192) - RMSNorms (80 x 2 x 8192 + 8192) =
// 69,501,714,432 (the LM head included); forward FLOPs per token = 2 x 69,501,714,432 + attention
// 2 s a (d_qk + d_v) l = 2 x 8192 x 64 x 256 x 80; x 3 (forward + backward) x 128 x 8192 tokens
// = 5.0482097e17; at MFU 0.45 on 64 H100s (989e12 dense bf16): 17.7235 s. Seed 004's 6 Psi B S
// (attention left out) gives 15.58 s.
TEST(Predict, QuickEstimateAtMfuIsModelFlopsOverMfuPeakAndGpus) {
  Job job = Llama70B();
  auto p = PredictAtMfu(job, 0.45);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->model_flops_per_step, 5.04820972684050432e17, 1e-6 * 5.0482e17);
  EXPECT_NEAR(p->step_time_s, 17.72346410108592, 1e-6 * 17.72);
  EXPECT_NEAR(p->mfu, 0.45, 1e-12);
  EXPECT_FALSE(PredictAtMfu(job, 1.5).ok());
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

TEST(StepTime, MuonOrthogonalisesTheMatricesEachRankOwns) {
  // Muon's update: 5 Newton-Schulz iterations per weight matrix X (m x n, m <= n), each
  // X X^T, A A and B X: 2m^2n + 2m^3 + 2m^2n FLOPs (Jordan et al. 2024, zeropower_via_newtonschulz5;
  // Moonlight, arXiv:2502.16982). Llama 3 8B's 8,030,261,248 parameters taken as 4096 x 4096
  // matrices (the dense part's upper bound, core/step_time.cc MuonNewtonSchulz): 478.6 of them x
  // 5 x 6 x 4096^3 = 9.87e14 FLOPs, shared by the 8 ranks of the distributed optimizer
  // (layer-wise): 1.234e14 each, 0.176 s at a flat 700 TFLOP/s. Against SGD with momentum (the
  // same one state, the same optimizer bytes) the difference is that GEMM work.
  auto job = testing::JobFromYaml(testing::kLlama3_8bMuonOn8H100);
  ASSERT_TRUE(job.ok()) << job.status();
  for (auto& g : job->profile.gemm) g.flops_per_s = 700e12;
  const double muon = EstimateStepTime(*job).breakdown.optimizer_s;
  job->training.optimizer = Optimizer::kSgd;
  const double sgd = EstimateStepTime(*job).breakdown.optimizer_s;
  const double h = 4096, flops = 8030261248.0 / (h * h) * 5 * 6 * h * h * h / 8;
  EXPECT_NEAR(flops, 1.234e14, 0.001e14);
  EXPECT_GT(muon - sgd, flops / 700e12) << muon << " " << sgd;
  EXPECT_LT(muon - sgd, 1.1 * flops / 700e12) << muon << " " << sgd;
}

// The input embedding as Megatron-Core runs it, counted by hand for Llama 3 8B (V 128,256, h 4,096)
// at 8,192 tokens a micro-batch, TP 1, bf16 parameters, fp32 main_grad: forward F.embedding reads
// the 8,192 rows and writes them (T h (2 + 2) = 134,217,728 bytes); backward aten's
// at::zeros({V, h}) gradient (2 V h = 1,050,673,152), the rows' scatter (read the bf16 output
// gradient, write the rows: 134,217,728) and the DDP hook's main_grad.add_(grad) (read 2 V h, read
// and write 8 V h: 5,253,365,760). GBS 64 over DP 8: 8 micro-batches a step, at the HBM rate.
// At TP 2 with SP the forward adds the vocabulary mask's zeroing write (T h 2) and a reduce-scatter
// of the output, the backward its all-gather; the table is half as tall.
TEST(StepTime, InputEmbeddingAsMegatronRunsIt) {
  auto job = testing::JobFromYaml(R"yaml(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1, sharding: zero1, recompute: none})yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(job->framework.dense_embedding_grad);
  const double on = EstimateStepTime(*job).breakdown.elementwise_s;
  job->choices.input_embedding = false;
  const double off = EstimateStepTime(*job).breakdown.elementwise_s;
  const double per_micro_batch = 134217728.0 + 1050673152.0 + 134217728.0 + 5253365760.0;
  EXPECT_NEAR(on - off, 8 * per_micro_batch / job->profile.hbm_bandwidth_bytes_per_s, 1e-9);
  // Megatron-FSDP (ZeRO-3 in the Megatron-Core family) copies the gradient into its buffer
  // (megatron_fsdp.py _grad_acc: main_grad.copy_(grad)): read 2 V h, write 4 V h, not 10 V h.
  job->choices.input_embedding = true;
  job->training.sharding = Sharding::kZero3;
  const double z3_on = EstimateStepTime(*job).breakdown.elementwise_s;
  job->choices.input_embedding = false;
  const double z3_off = EstimateStepTime(*job).breakdown.elementwise_s;
  EXPECT_NEAR(z3_on - z3_off, 8 * (per_micro_batch - 4 * 128256.0 * 4096) / job->profile.hbm_bandwidth_bytes_per_s,
              1e-9);

  auto tp = testing::JobFromYaml(R"yaml(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
parallelism: {tp: 2, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1, sharding: zero1, recompute: none,
           overlap_tp_comm: false})yaml");
  ASSERT_TRUE(tp.ok()) << tp.status();
  const StepBreakdown tp_on = EstimateStepTime(*tp).breakdown;
  tp->choices.input_embedding = false;
  const StepBreakdown tp_off = EstimateStepTime(*tp).breakdown;
  // 16 micro-batches (DP 4); T h 2 more forward bytes, the table V/2 x h.
  const double half_table = 64128.0 * 4096;
  const double tp_bytes = 134217728.0 + 67108864.0 + 2 * half_table + 134217728.0 + 10 * half_table;
  EXPECT_NEAR(tp_on.elementwise_s - tp_off.elementwise_s, 16 * tp_bytes / tp->profile.hbm_bandwidth_bytes_per_s, 1e-9);
  EXPECT_GT(tp_on.tp_comm_s, tp_off.tp_comm_s);

  // With PP the embedding is the first stage's, and the last stage (with the output layer) sets
  // the pace: nothing added.
  auto pp = testing::JobFromYaml(R"yaml(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
parallelism: {pp: 2}
training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1, sharding: zero1, recompute: none})yaml");
  ASSERT_TRUE(pp.ok()) << pp.status();
  const double pp_on = EstimateStepTime(*pp).step_time_s;
  pp->choices.input_embedding = false;
  EXPECT_EQ(pp_on, EstimateStepTime(*pp).step_time_s);
}

// Praxis's SAVE_QKV_OUT_PROJ (checkpoint_policy.py @cad2a3a: save_only_these_names('combined_qkv_proj',
// 'out_proj')), Paxml's GPT-3 175B policy: the attention core, the MLP's input GEMM and the
// elementwise ops are recomputed; the MLP's output GEMM is not (its output feeds nothing the
// backward needs: JAX's rematerialisation drops the dead dot). The recomputed GEMM time is the
// input GEMM's alone: half the MLP's (h -> 4h and 4h -> h are the same FLOPs).
TEST(StepTime, PaxmlSaveQkvOutProjRecomputesTheMlpsInputGemmOnly) {
  auto job = testing::JobFromYaml(R"yaml(
model: gpt3-175b
hardware: h100-sxm
framework: paxml
cluster: {gpu_count: 128}
training: {seq_length: 2048, global_batch_size: 256, micro_batch_size: 2, sharding: zero3})yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training.recompute, Recompute::kSelective);
  EXPECT_EQ(job->training.recompute_modules, (std::vector<std::string>{"core_attn", "mlp_up", "activation_functions"}));
  Job whole = *job;
  whole.training.recompute_modules = {"core_attn", "mlp", "activation_functions"};
  const StepBreakdown up = EstimateStepTime(*job).breakdown, mlp = EstimateStepTime(whole).breakdown;
  // The difference is the MLP's output GEMM, forward: 4,096 tokens (micro-batch 2 x 2,048) x h 12,288
  // from 4h 49,152, in each of the 96 layers, one micro-batch a step.
  absl::StatusOr<GemmModel> gm = GemmModel::Create(job->hardware, job->profile);
  ASSERT_TRUE(gm.ok()) << gm.status();
  GemmEstimate fc2;
  ASSERT_TRUE(gm->TryEstimate(GemmShape{DType::kBF16, 1, 4096, 12288, 49152}, &fc2));
  EXPECT_NEAR(mlp.recompute_s - up.recompute_s, 96 * fc2.time_s, 0.01 * 96 * fc2.time_s);
}

// Paxml looks its embeddings up as one-hot matmuls (praxis embedding_softmax.py emb_lookup,
// lookup_style 'matmul'; paxml c4.py EMBEDDING_LOOKUP_STYLE): for GPT-5B at 4 x 2048 tokens per
// GPU, the token table (50,304 rows) and the learned position table (2,048 rows) each cost a
// T x h x rows forward GEMM (2 T h rows FLOPs), its weight gradient (h x rows x T, accumulated into
// the fp32 gradient) and the one-hot tensor's T x rows bf16 write: 4 T h (V + P) = 7.03e12 FLOPs,
// 2.8% on top of the model's 6 N T (2.6% with attention's 12 L h s T).
TEST(StepTime, PaxmlEmbeddingLookupIsAOneHotMatmul) {
  auto job = testing::JobFromYaml(R"yaml(
model:
  shape: {name: "GPT-3-style 5B (Paxml Synthetic5B)", layers: 24, hidden_size: 4096, attention_heads: 32,
          ffn_hidden_size: 16384, ffn_type: gelu, vocab_size: 50304, tied_embeddings: true,
          linear_bias: true, learned_position_embeddings: 2048, norm_type: layernorm}
hardware: h100-sxm
framework: paxml
cluster: {gpu_count: 8}
training: {seq_length: 2048, global_batch_size: 32, micro_batch_size: 4, sharding: zero3})yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(job->framework.embedding_lookup_matmul);
  const StepBreakdown on = EstimateStepTime(*job).breakdown;
  job->choices.embedding_lookup_matmul = false;
  const StepBreakdown off = EstimateStepTime(*job).breakdown;
  absl::StatusOr<GemmModel> gm = GemmModel::Create(job->hardware, job->profile);
  ASSERT_TRUE(gm.ok()) << gm.status();
  const double T = 4 * 2048, h = 4096;
  double gemm_s = 0, one_hot_bytes = 0, flops = 0;
  for (const double rows : {50304.0, 2048.0}) {
    GemmEstimate fwd, wgrad;
    ASSERT_TRUE(gm->TryEstimate(GemmShape{DType::kBF16, 1, T, h, rows}, &fwd));
    GemmShape w{DType::kBF16, 1, h, rows, T};
    w.c_bytes_per_element = 2 * 4;  // the fp32 gradient read and written in the epilogue
    ASSERT_TRUE(gm->TryEstimate(w, &wgrad));
    gemm_s += fwd.time_s + wgrad.time_s;
    one_hot_bytes += T * rows * 2;
    flops += 4 * T * h * rows;
  }
  EXPECT_NEAR(flops, 7.026e12, 0.001e12);
  EXPECT_NEAR(on.gemm_s - off.gemm_s, gemm_s, 1e-9 * gemm_s);
  EXPECT_NEAR(on.elementwise_s - off.elementwise_s, one_hot_bytes / job->profile.hbm_bandwidth_bytes_per_s, 1e-12);
  // No faster than the tensor cores' bf16 peak allows.
  EXPECT_GT(on.gemm_s - off.gemm_s, flops / job->hardware.PeakFlops(DType::kBF16));
}

}  // namespace
}  // namespace stepcast
