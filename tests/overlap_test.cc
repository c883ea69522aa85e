// Overlap of communication with compute (docs/MODEL.md "Overlap"; issue 28): the pipelined-chunk
// form against an event-by-event timeline, the contention cost by its definition, bucket counts
// from the frameworks' own defaults, and the mechanisms as the step model applies them.
#include <algorithm>
#include <cmath>
#include <random>

#include "core/framework.h"
#include "core/hardware.h"
#include "core/job.h"
#include "core/step_time.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace stepcast {
namespace {

// Exposed time of n equal chunks of communication, simulated event by event: chunk i is produced
// by the compute at (i+1) W/n and sent when both it is ready and the previous chunk has been
// sent (one stream); the compute ends at W; what the last send runs past W is exposed.
double SimulatedExposed(double comm_s, double window_s, int n) {
  const double c = comm_s / n, w = window_s / n;
  double link_free = 0;
  for (int i = 0; i < n; ++i) link_free = std::max(link_free, (i + 1) * w) + c;
  return std::max(0.0, link_free - window_s);
}

TEST(Overlap, PipelinedChunksMatchAnEventTimeline) {
  // Two worked cases by hand: ten seconds of communication in five chunks.
  //  * behind 20 s of compute: chunks produced every 4 s take 2 s each; only the last is exposed: 2 s.
  EXPECT_DOUBLE_EQ(PipelinedExposed(10, 20, 5), 2);
  //  * behind 4 s: produced every 0.8 s, the stream is busy from 0.8 s to 10.8 s: 6.8 s exposed.
  EXPECT_NEAR(PipelinedExposed(10, 4, 5), 6.8, 1e-12);
  // One chunk hides nothing; no communication, nothing exposed.
  EXPECT_DOUBLE_EQ(PipelinedExposed(3, 100, 1), 3);
  EXPECT_DOUBLE_EQ(PipelinedExposed(0, 5, 4), 0);
  // Random cases against the simulation.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.01, 10.0);
  std::uniform_int_distribution<int> chunks(1, 200);
  for (int t = 0; t < 2000; ++t) {
    const double c = u(rng), w = u(rng);
    const int n = chunks(rng);
    EXPECT_NEAR(PipelinedExposed(c, w, n), SimulatedExposed(c, w, n), 1e-9 * (c + w)) << c << " " << w << " " << n;
  }
}

TEST(Overlap, ContentionCostIsTheSlowdownOfTheOverlappedCompute) {
  // A compute stretch of 2 s alone, run entirely beside communication at slowdown 0.25, takes
  // 2.5 s: 2.5 s of hidden communication cost 0.5 s.
  EXPECT_DOUBLE_EQ(ContentionCost(2.5, 0.25), 0.5);
  EXPECT_DOUBLE_EQ(ContentionCost(2.5, 0), 0);
  EXPECT_DOUBLE_EQ(ContentionCost(0, 0.3), 0);
  // A mechanism that reserves 24 of 132 SMs (Transformer Engine userbuffers, BF16 H100 proj):
  // compute on 108 SMs takes 132/108 as long.
  OverlapMechanism ub;
  ub.compute_sm_fraction = 108.0 / 132;
  EXPECT_NEAR(ub.Slowdown(0.9), 132.0 / 108 - 1, 1e-12);
  OverlapMechanism nccl;
  EXPECT_DOUBLE_EQ(nccl.Slowdown(0.14), 0.14);
}

TEST(Overlap, BucketCountsFromTheFrameworksDefaults) {
  // Megatron-Core DDP: bucket = max(40M, 1M x DP) parameters (distributed_data_parallel.py).
  OverlapMechanism mcore;
  mcore.bucket_min_params = 40000000;
  mcore.bucket_params_per_dp_rank = 1000000;
  // Llama 3 8B (8,030,261,248 parameters) at DP 64: 64M-parameter buckets, 126 of them.
  EXPECT_DOUBLE_EQ(mcore.Buckets(8030261248.0, 4, 64), 126);
  // At DP 8 the 40M floor rules: 201 buckets.
  EXPECT_DOUBLE_EQ(mcore.Buckets(8030261248.0, 4, 8), 201);
  // PyTorch DDP: bucket_cap_mb 25 MiB of fp32 gradients = 6,553,600 parameters.
  OverlapMechanism ddp;
  ddp.bucket_bytes = 25 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(ddp.Buckets(6553600.0 * 10, 4, 8), 10);
  EXPECT_DOUBLE_EQ(ddp.Buckets(6553600.0 * 10 + 1, 4, 8), 11);
  // No bucket size: one bucket.
  EXPECT_DOUBLE_EQ(OverlapMechanism{}.Buckets(1e9, 2, 8), 1);
}

Job JobOf(const std::string& yaml) {
  absl::StatusOr<Job> job = testing::JobFromYaml(yaml);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

// The megatron-core preset's DP buckets are Megatron's own default (distributed_data_parallel.py:
// bucket_size None -> max(40000000, 1000000 x DP) parameters), for the gradient reduce and the
// parameter all-gather alike: Llama 3 8B at DP 8 has 201 buckets and at DP 64 126 (the worked
// counts above), so all but one bucket hides behind the backward (docs/MODEL.md "Overlap").
TEST(Overlap, MegatronCorePresetBucketsAreMegatronsDefault) {
  const Job job = JobOf(R"(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, sharding: zero1})");
  for (const OverlapMechanism* m : {&job.framework.overlap.dp_grad_reduce, &job.framework.overlap.dp_param_gather}) {
    EXPECT_TRUE(m->supported);
    EXPECT_TRUE(m->Structured());
    EXPECT_DOUBLE_EQ(m->Buckets(8030261248.0, 4, 8), 201);
    EXPECT_DOUBLE_EQ(m->Buckets(8030261248.0, 4, 64), 126);
  }
}

TEST(Overlap, MegatronPipelineP2pIsExposedWithoutVpp) {
  // Megatron-Core validate_args turns overlap_p2p_comm off without VPP: every send/recv exposed,
  // 2 per micro-batch per stage (forward activation, backward gradient).
  Job job = JobOf(R"(
model: llama3-70b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 64}
parallelism: {tp: 8, pp: 8}
training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1, sharding: zero1})");
  const GroupPlacement pp = PlaceGroups(job.parallelism, job.GpusPerNode()).pp;
  const CollectiveRate* r = job.profile.FindCollective(Collective::kSendRecv, pp.scope);
  ASSERT_NE(r, nullptr);
  const double S = 8192.0 * 8192 * 2 / 8;  // tokens x hidden x bf16, scattered over TP
  const double m = 64;                       // micro-batches
  const double p2p = m * 2 * EstimateCollective(*r, pp.size, S, pp.members_per_node).time_s;
  EXPECT_NEAR(EstimateStepTime(job).breakdown.pp_comm_s, p2p, 1e-9 * p2p);
  // With VPP 5 the steady state hides its transfers: the warm-up of the first stage,
  // 2 (p - 1) + (v - 1) p = 14 + 32 = 46 chunk passes of the m v = 320, stays exposed (the
  // contention of the hidden part is added on top when the profile has one).
  job.parallelism.vpp = 5;
  job.profile.contention.clear();
  const double p2p_v = m * 2 * 5 * EstimateCollective(*r, pp.size, S, pp.members_per_node).time_s;
  EXPECT_NEAR(EstimateStepTime(job).breakdown.pp_comm_s, p2p_v * 46.0 / 320, 1e-9 * p2p_v);
}

// One expert per GPU, EP over all of them (8 per node on h100-sxm), one micro-batch per rank: the
// all-to-all moves the same bytes per rank (tokens x top-k x hidden) whatever the GPU count.
Job MoeOverNodes(int gpus) {
  return JobOf(absl::StrCat(R"(
model: {shape: {name: moe, layers: 8, hidden_size: 4096, attention_heads: 32, kv_heads: 8, vocab_size: 32000,
                ffn_type: swiglu, ffn_hidden_size: 14336,
                moe: {routed_experts: )", gpus, R"(, top_k: 2, expert_ffn_hidden_size: 14336}}}
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: )", gpus, R"(}
parallelism: {tp: 1, pp: 1, ep: )", gpus, R"(}
training: {seq_length: 4096, global_batch_size: )", gpus, R"(, micro_batch_size: 1, sharding: zero1})"));
}

TEST(Overlap, AllToAllAcrossNodesRunsAtOneNicPerGpu) {
  // EP 16 over two 8-GPU nodes: "Alltoall cannot aggregate the bandwidth of multiple NICs"
  // (nccl-tests #267): each rank's bytes for the other node, (n - k)/n = 8/16 of them, leave
  // through its own NIC at the inter-node entry's rate, not striped over 8 NICs; the other half
  // crosses NVLink beside them. nccl-tests #130: "On 2 nodes, 50% of the traffic is inter-node so
  // you should see BusBW = 2x network bandwidth per GPU".
  Job job = MoeOverNodes(16);
  job.parallelism.ep = 8;
  // EP 8 inside a node first: the all-to-all at the NVLink rate.
  const StepBreakdown intra = EstimateStepTime(job).breakdown;
  job.parallelism.ep = 16;
  const StepBreakdown inter = EstimateStepTime(job).breakdown;
  const CollectiveRate* ia = job.profile.FindCollective(Collective::kAllToAll, Scope::kIntraNode);
  const CollectiveRate* xa = job.profile.FindCollective(Collective::kAllToAll, Scope::kInterNode);
  ASSERT_NE(ia, nullptr);
  ASSERT_NE(xa, nullptr);
  ASSERT_TRUE(xa->points.empty());  // the preset's alpha-beta entry (47 GB/s per NIC, 25 us at 16 ranks)
  ASSERT_EQ(xa->group_size, 16);
  // Same bytes per rank in both layouts (tokens x top-k x hidden): the ratio of the EP terms is
  // the ratio of the two all-to-all times. By hand: the entry's latency, then half the bytes at
  // one NIC's rate.
  const double S = 4096.0 * 2 * 4096 * 2;
  const double t_intra = EstimateCollective(*ia, 8, S, 8).time_s;
  const double t_inter = xa->alpha_s + S * (16 - 8) / 16 / xa->busbw_bytes_per_s;
  EXPECT_GT(t_inter, 3 * t_intra);  // 47 GB/s per NIC for half the bytes against 362 GB/s NVLink
  EXPECT_NEAR(inter.ep_comm_s / intra.ep_comm_s, t_inter / t_intra, 1e-6);
  // EP 32 over 4 nodes (32 experts, the same bytes per rank): three quarters of the bytes cross the
  // NICs, and the latency grows with the ring steps (31 against the entry's 15).
  const Job four_nodes = MoeOverNodes(32);
  const double t_four = xa->alpha_s * 31 / 15 + S * (32 - 8) / 32 / xa->busbw_bytes_per_s;
  EXPECT_NEAR(EstimateStepTime(four_nodes).breakdown.ep_comm_s / inter.ep_comm_s, t_four / t_inter, 1e-6);
}

// The one-NIC all-to-all's busbw, NIC x (n - 1)/(n - k), never exceeds the intra-node
// all-to-all's: with a NIC as fast as NVLink the bytes that stay on the node bound it (the cap in
// StepModel::Comm). EP 16 over two nodes with a 300 or a 600 GB/s NIC: both capped at the
// intra-node busbw, so the same time; by hand the entry's latency, then 15/16 of the bytes
// (nccl-tests' all-to-all busbw factor) at the intra-node busbw.
TEST(Overlap, AllToAllAcrossNodesIsCappedByTheIntraNodeRate) {
  Job job = MoeOverNodes(16);
  const CollectiveRate* ia = job.profile.FindCollective(Collective::kAllToAll, Scope::kIntraNode);
  ASSERT_NE(ia, nullptr);
  auto with_nic = [&](double busbw) {
    Job j = job;
    for (CollectiveRate& r : j.profile.collectives) {
      if (r.collective == Collective::kAllToAll && r.scope == Scope::kInterNode) r.busbw_bytes_per_s = busbw;
    }
    return EstimateStepTime(j).breakdown.ep_comm_s;
  };
  const double slow = with_nic(47e9), fast = with_nic(300e9), faster = with_nic(600e9);
  ASSERT_GT(300e9 * 15 / 8, ia->busbw_bytes_per_s);  // the uncapped rate would pass NVLink's
  EXPECT_EQ(fast, faster);
  const CollectiveRate* xa = job.profile.FindCollective(Collective::kAllToAll, Scope::kInterNode);
  ASSERT_NE(xa, nullptr);
  const double S = 4096.0 * 2 * 4096 * 2;
  const double t_slow = xa->alpha_s + S * 8 / 16 / 47e9;
  const double t_capped = xa->alpha_s + S * 15 / 16 / ia->busbw_bytes_per_s;
  EXPECT_NEAR(slow / fast, t_slow / t_capped, 1e-6);
}

TEST(Overlap, AllToAllOverUnevenNodesWaitsForTheEmptierNode) {
  // EP 24 on nodes of 16 (review M2): ranks 0-15 share one node, 16-23 another. A rank of the
  // second node sends 16 of its 24 shares across, through its NIC; a rank of the first only 8.
  // The collective ends with the second node's ranks: k = 8, as on nodes of 8, where every rank
  // sends 16 of 24 across. By hand: the entry's latency, then 16/24 of the bytes at one NIC's rate.
  Job job = MoeOverNodes(24);
  job.cluster.gpus_per_node = 16;
  const double uneven = EstimateStepTime(job).breakdown.ep_comm_s;
  job.cluster.gpus_per_node = 8;
  const double even = EstimateStepTime(job).breakdown.ep_comm_s;
  ASSERT_GT(even, 0);
  EXPECT_NEAR(uneven / even, 1.0, 1e-9);
  const CollectiveRate* xa = job.profile.FindCollective(Collective::kAllToAll, Scope::kInterNode);
  ASSERT_NE(xa, nullptr);
  const double S = 4096.0 * 2 * 4096 * 2;
  const double t8 = xa->alpha_s * 23 / 15 + S * 16 / 24 / xa->busbw_bytes_per_s;
  const double t16 = xa->alpha_s * 23 / 15 + S * 8 / 24 / xa->busbw_bytes_per_s;  // k = 16 (the old count)
  // Against EP 16 over two full nodes (8 of 16 shares across), the same ratio as by hand.
  Job two = MoeOverNodes(16);
  const double t_two = xa->alpha_s + S * 8 / 16 / xa->busbw_bytes_per_s;
  EXPECT_NEAR(uneven / EstimateStepTime(two).breakdown.ep_comm_s, t8 / t_two, 1e-6);
  EXPECT_GT(t8 / t16, 1.5);  // the most-loaded NIC's bytes, not the average node's
}

// A model small enough that every DP collective is latency-bound: 24 layers of hidden 256 over 512
// H100 (64 nodes). The preset's inter-node all-gather / reduce-scatter latency is 25 us at 16 ranks
// (nccl-tests #309), and a ring's latency grows with its steps (NCCL src/graph/tuning.cc: n - 1
// for all-gather and reduce-scatter): 25 us x 511 / 15 = 851.7 us per collective at 512 ranks.
// The bytes of one unit (about 0.8 M parameters, under 2 MB) take about 5 us at 8 NICs x 47 GB/s,
// under 1% of that. So the exposed DP time (overlap off) counts the collectives.
constexpr char kTinyOn512[] = R"(
model: {shape: {name: tiny, layers: 24, hidden_size: 256, attention_heads: 4, vocab_size: 4096,
                ffn_type: gelu, ffn_hidden_size: 1024}}
hardware: h100-sxm
cluster: {gpu_count: 512}
parallelism: {tp: 1, pp: 1}
)";
constexpr double kAlpha512 = 25e-6 * 511 / 15;

TEST(Overlap, FsdpIssuesOneCollectivePerUnitEachPayingItsRingLatency) {
  // FSDP FULL_SHARD (FSDP paper, Zhao et al. 2023 Sec. 3; torch ShardingStrategy docs): per unit
  // and micro-batch an all-gather before the forward, another before the backward and a
  // reduce-scatter after it: 3 x 24 collectives for one micro-batch.
  Job job = JobOf(std::string(kTinyOn512) + R"(
framework: pytorch-fsdp2
training: {seq_length: 2048, global_batch_size: 512, micro_batch_size: 1, sharding: zero3, overlap_dp_comm: false})");
  const double dp = EstimateStepTime(job).breakdown.dp_comm_s;
  const double latency = 3 * 24 * kAlpha512;
  EXPECT_GT(dp, latency);
  EXPECT_LT(dp, 1.05 * latency) << dp;
  // The former accounting (one collective of all the bytes per kind, 3 latencies): several
  // times less.
  job.choices.dp_collective_per_unit = false;
  EXPECT_LT(EstimateStepTime(job).breakdown.dp_comm_s, dp / 5);
  // HSDP, 8 replicas of a 64-rank shard group (one per 8 nodes): per unit, the two gathers and the
  // reduce-scatter over 64 ranks (25 us x 63/15 = 105 us each) and the all-reduce of the shard
  // across the 8 replicas (FSDP2 foreach_reduce), whose latency is the preset's inter-node
  // all-reduce floor, 29.67 us at 16 ranks, x 14/30 ring steps = 13.85 us. Per unit against once:
  // 23 more of each.
  job.parallelism.dp_replicate = 8;
  const double hsdp_once = EstimateStepTime(job).breakdown.dp_comm_s;
  job.choices.dp_collective_per_unit = true;
  const double hsdp = EstimateStepTime(job).breakdown.dp_comm_s;
  const double alpha64 = 25e-6 * 63 / 15, ar8 = 29.67e-6 * 14 / 30;
  // (The bandwidth terms cancel: linear in the bytes, or an affine segment of the measured curve.)
  EXPECT_NEAR(hsdp - hsdp_once, 23 * (3 * alpha64 + ar8), 1e-3 * 23 * (3 * alpha64 + ar8)) << hsdp << " " << hsdp_once;
}

TEST(Overlap, HsdpAllReducesAcrossReplicasEveryMicroBatchAsPyTorchFsdpDoes) {
  // HSDP with four micro-batches, each reduce-scattering (FSDP2 without
  // set_requires_gradient_sync(False)): FSDP2 also all-reduces each unit's shard across the
  // replicas every backward unless the loop calls set_requires_all_reduce(False)
  // (torch/distributed/fsdp/_fully_shard/_fully_shard.py). Against one all-reduce after the last
  // micro-batch (Megatron's distributed-optimizer instances), three more per unit: 3 x 24, each
  // at least the 8-replica ring's latency (29.67 us at 16 ranks x 14/30 steps, as above) and at
  // most a quarter more for its bytes (a unit's shard, about 0.8 M / 64 parameters: ~50 kB).
  Job job = JobOf(std::string(kTinyOn512) + R"(
framework: pytorch-fsdp2
training: {seq_length: 2048, global_batch_size: 2048, micro_batch_size: 1, sharding: zero3, overlap_dp_comm: false})");
  job.parallelism.dp_replicate = 8;
  ASSERT_EQ(job.MicroBatchesPerStep(), 4);
  ASSERT_TRUE(job.framework.sharding.replica_all_reduce_every_micro_batch);
  const double every = EstimateStepTime(job).breakdown.dp_comm_s;
  job.framework.sharding.replica_all_reduce_every_micro_batch = false;
  const double last = EstimateStepTime(job).breakdown.dp_comm_s;
  const double ar8 = 29.67e-6 * 14 / 30;
  EXPECT_GT(every - last, 3 * 24 * ar8) << every << " " << last;
  EXPECT_LT(every - last, 1.25 * 3 * 24 * ar8) << every << " " << last;
  // Megatron-Core keeps its gradients in the buffer until the last micro-batch.
  EXPECT_FALSE(testing::BuiltinCatalog().LookupFramework("megatron-core").value()->core.sharding
                   .replica_all_reduce_every_micro_batch);
}

TEST(Overlap, ZeroTwoIsWhatTheFrameworkRunsUnderThatName) {
  // PyTorch FSDP's ZeRO-2 is SHARD_GRAD_OP / reshard_after_forward=False: per unit and
  // micro-batch one all-gather (kept for the backward) and one reduce-scatter: 2 x 24 x 4 for
  // four micro-batches, every one of them, as FSDP reduces each backward.
  Job fsdp = JobOf(std::string(kTinyOn512) + R"(
framework: pytorch-fsdp2
training: {seq_length: 2048, global_batch_size: 2048, micro_batch_size: 1, sharding: zero2, overlap_dp_comm: false})");
  const double fsdp_dp = EstimateStepTime(fsdp).breakdown.dp_comm_s;
  EXPECT_GT(fsdp_dp, 2 * 24 * 4 * kAlpha512);
  EXPECT_LT(fsdp_dp, 1.05 * 2 * 24 * 4 * kAlpha512) << fsdp_dp;
  // Megatron-Core's ZeRO-2 is Megatron-FSDP optim_grads (grad_reduce_every_bprop): each unit's
  // _post_backward hook reduce-scatters its gradients after every micro-batch's backward, where the
  // distributed optimizer (ZeRO-1) reduces once at the last; each then gathers the updated
  // parameters once. The tiny model is one distributed-optimizer bucket (max(40M, 1M x DP)
  // parameters). With R the reduce-scatter bandwidth time of all the gradients and G the gather's:
  // ZeRO-1 = (a + R) + (a + G), ZeRO-2 = 4 (24 a + R) + (a + G), so z2 - z1 = 95 a + 3 R, and
  // 0 < R < z1 - 2 a.
  Job mcore = JobOf(std::string(kTinyOn512) + R"(
framework: megatron-core
training: {seq_length: 2048, global_batch_size: 2048, micro_batch_size: 1, sharding: zero2, overlap_dp_comm: false})");
  const double z2 = EstimateStepTime(mcore).breakdown.dp_comm_s;
  mcore.training.sharding = Sharding::kZero1;
  const double z1 = EstimateStepTime(mcore).breakdown.dp_comm_s;
  EXPECT_GT(z1, 2 * kAlpha512);
  EXPECT_GT(z2 - z1, 95 * kAlpha512) << z2 << " " << z1;
  EXPECT_LT(z2 - z1, 95 * kAlpha512 + 3 * (z1 - 2 * kAlpha512)) << z2 << " " << z1;
}

// Transformer Engine's userbuffers issue the pieces of a split GEMM round-robin on
// min(3, pieces) compute streams (comm_gemm_overlap.cpp `_stream_compute[i % size]`,
// cpp_extensions/gemm.py _NUM_MAX_UB_STREAMS = 3), so up to three pieces share the GPU. Worked by
// hand on a GEMM that costs 1 us per wave of 132 tiles of 128 x 256: 4096 x 2304 is 32 x 9 = 288
// tiles, 3 waves. Split into the 8 pieces of a TP-8 ring exchange (512 rows, 36 tiles each):
// pieces 0-2 run together (108 tiles, one wave), then 3-5 (one wave), then 6-7 (72 tiles, one
// wave): 3 us, no slower than unsplit; one after another, 8 waves. The fp8 reduce-scatter ring
// keeps two in flight (split_overlap_rs P2P waits on piece i - 2): 4 rounds of 72 tiles, 4 us.
// The BF16 pipeline's 4 pieces of 1024 rows (72 tiles) on 3 streams: 216 tiles (2 waves) then 72
// (1 wave), on 108 of 132 SMs: 3 x 132/108 us.
TEST(Overlap, SplitGemmPiecesShareTheGpuOnTransformerEnginesStreams) {
  auto waves_us = [](double m, double n, double) {
    return std::ceil(std::ceil(m / 128) * std::ceil(n / 256) / 132);
  };
  EXPECT_DOUBLE_EQ(waves_us(4096, 2304, 1), 3);
  EXPECT_DOUBLE_EQ(SplitGemmSeconds(waves_us, 4096, 2304, 1, 8, 3, 1), 3);
  EXPECT_DOUBLE_EQ(SplitGemmSeconds(waves_us, 4096, 2304, 1, 8, 1, 1), 8);
  EXPECT_DOUBLE_EQ(SplitGemmSeconds(waves_us, 4096, 2304, 1, 8, 2, 1), 4);
  EXPECT_DOUBLE_EQ(SplitGemmSeconds(waves_us, 4096, 2304, 1, 4, 3, 108.0 / 132), 3 * 132.0 / 108);
  // As many streams as pieces: the unsplit GEMM; fewer than one stream or piece count as one.
  EXPECT_DOUBLE_EQ(SplitGemmSeconds(waves_us, 4096, 2304, 1, 2, 3, 1), 3);
  EXPECT_DOUBLE_EQ(SplitGemmSeconds(waves_us, 4096, 2304, 1, 0, 0, 0), 3);
}

// The step model's TP overlap against those mechanisms, per layer (the difference of a 32- and a
// 16-layer Llama 3 8B, so the output layer's own TP work cancels), at TP 2 with long GEMM windows:
// the rings expose nothing and their two pieces cost no split on three streams (the BF16 pipeline's
// four pieces and its exposed last piece are there, and cancel where two runs are compared).
double TpCommPerLayer(Job job) {
  job.model.layers = 32;
  const double a = EstimateStepTime(job).breakdown.tp_comm_s;
  job.model.layers = 16;
  const double b = EstimateStepTime(job).breakdown.tp_comm_s;
  return (a - b) / 16;
}

constexpr char kLlama8bTp2[] = R"(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 2}
parallelism: {tp: 2, sequence_parallel: true}
training: {seq_length: 8192, global_batch_size: 1, micro_batch_size: 1, sharding: zero1)";

TEST(Overlap, UserbuffersChargeMeasuredContentionOnlyToTransfersThatShareTheSms) {
  // BF16: the forward's all-gathers run on copy engines beside the GEMMs (hidden, at the profile's
  // measured contention, an upper bound); its reduce-scatters are pipelined on the SMs the margin
  // keeps from the GEMM, which is their contention (no measured one on top); the backward's
  // transfers are all hidden at the measured contention. With per-layer forward communication C
  // (= the backward's) and contention x, the contention adds (C/2 + C) x / (1 + x), where the
  // same layer without any overlap exposes 2 C.
  Job none = JobOf(std::string(kLlama8bTp2) + ", overlap_tp_comm: false}");
  none.framework.overlap.tp_comm_backward.supported = false;
  const double two_c = TpCommPerLayer(none);
  ASSERT_GT(two_c, 0);
  Job ub = JobOf(std::string(kLlama8bTp2) + ", overlap_tp_comm: true}");
  ASSERT_TRUE(ub.framework.overlap.tp_comm.ag_ring_first_chunk_local);
  ub.profile.contention = {{"gemm", "nccl", 0.0, 1, "test"}};
  const double at_zero = TpCommPerLayer(ub);
  const double x = 0.4;
  ub.profile.contention = {{"gemm", "nccl", x, 1, "test"}};
  const double at_x = TpCommPerLayer(ub);
  EXPECT_NEAR(at_x - at_zero, 0.75 * two_c * x / (1 + x), 1e-9 * two_c) << at_x << " " << at_zero << " " << two_c;
}

// Transformer Engine's reduce_bf16 after a ring-exchange reduce-scatter, counted by hand from
// comm_gemm_overlap.cpp split_overlap_rs: 405B's FC2 output, 4,096 tokens x 16,384 at TP 8, reaches
// each rank as 8 partial 512 x 16,384 bf16 chunks, read once, and their sum written once:
// (8 + 1) x 512 x 16,384 x 2 = 150,994,944 bytes. At TP 2: (2 + 1) x 2,048 x 4,096 x 2.
// Megatron-LM asserts sequence parallelism for --tp-comm-overlap (arguments.py: "Tensor parallel
// communication/GEMM overlap can happen only when sequence parallelism is enabled"): a job that asks
// for userbuffers without SP runs as one that does not ask.
TEST(Overlap, UserbuffersNeedSequenceParallelism) {
  Job on = JobOf(R"(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 2}
parallelism: {tp: 2, sequence_parallel: false}
training: {seq_length: 8192, global_batch_size: 1, micro_batch_size: 1, sharding: zero1, overlap_tp_comm: true})");
  Job off = on;
  off.training.overlap_tp_comm = false;
  EXPECT_EQ(EstimateStepTime(on).breakdown.tp_comm_s, EstimateStepTime(off).breakdown.tp_comm_s);
  on.parallelism.sequence_parallel = true;
  off.parallelism.sequence_parallel = true;
  EXPECT_NE(EstimateStepTime(on).breakdown.tp_comm_s, EstimateStepTime(off).breakdown.tp_comm_s);
}

TEST(Overlap, RingReduceScatterReadsEveryPartialOutputOnce) {
  EXPECT_DOUBLE_EQ(RingReduceScatterReduceBytes(4096, 16384, 8, 2), 150994944.0);
  EXPECT_DOUBLE_EQ(RingReduceScatterReduceBytes(4096, 4096, 2, 2), 3.0 * 2048 * 4096 * 2);
}

// Ring attention's merges, counted by hand from Transformer Engine's AttnFuncWithCPAndKVP2P
// (context_parallel.py, bf16, bshd) for Llama 3.1 8B at 8,192 tokens, CP 2, micro-batch 1: the rank
// holds 4,096 tokens, Q and O 4096 x 32 x 128 x 2 = 33,554,432 bytes, K + V 4096 x 8 x 256 x 2 =
// 16,777,216. The last rank's forward: out_correction_init (read O_0, write O) 2 O, one
// out_correction (read O_1, read and write O) 3 O, torch.cat(k, v) 2 (K + V): 201,326,592 bytes.
// Its backward: the KV buffer copy 2 (K + V); dq.copy_ (2 Q) at step 0, dq.add_ (3 Q) at step 1; dk,
// dv: half copied at step 0 (K + V), whole added at step 1 (3 (K + V)): 268,435,456 bytes. At CP 4,
// per unit tensors: forward 2 + 3 x 3 = 11 O + 2 KV; backward 2 KV + 11 Q + (1 + 1.5 x 2 + 3) KV.
TEST(Overlap, RingAttentionMergesItsPartialOutputsAndGradients) {
  const CpRingMerge cp2 = CpRingMergeBytes(33554432.0, 33554432.0, 16777216.0, 2);
  EXPECT_DOUBLE_EQ(cp2.forward_bytes, 201326592.0);
  EXPECT_DOUBLE_EQ(cp2.backward_bytes, 268435456.0);
  const CpRingMerge cp4 = CpRingMergeBytes(1, 1, 1, 4);
  EXPECT_DOUBLE_EQ(cp4.forward_bytes, 13);
  EXPECT_DOUBLE_EQ(cp4.backward_bytes, 2 + 11 + 7);
  EXPECT_DOUBLE_EQ(CpRingMergeBytes(1, 1, 1, 1).forward_bytes, 0);
  // In the step: 32 layers x 16 micro-batches (GBS 64 over DP 4) of those bytes at the HBM rate, on
  // the attention core; ModelChoices::cp_ring_merge off removes them.
  Job on = JobOf(R"(
model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
parallelism: {cp: 2}
training: {seq_length: 8192, global_batch_size: 64, micro_batch_size: 1, sharding: zero1, recompute: none})");
  ASSERT_EQ(on.parallelism.dp, 4);
  Job off = on;
  off.choices.cp_ring_merge = false;
  const double added = EstimateStepTime(on).breakdown.attention_s - EstimateStepTime(off).breakdown.attention_s;
  EXPECT_NEAR(added, 32 * 16 * (201326592.0 + 268435456.0) / on.profile.hbm_bandwidth_bytes_per_s, 1e-9);
}

TEST(Overlap, Fp8ReduceScatterRingAddsItsReduceKernelAndExposesNothing) {
  // FP8 (Megatron-Bridge userbuffers_fp8_* configs: proj_fprop / fc2_fprop ring exchange): at TP 2
  // each RS GEMM runs as 2 pieces, both in flight (no split cost), the local piece last (nothing
  // exposed), then reduce_bf16 reads the 2 partial outputs (T x h x 2 bytes) and writes T/2 x h x 2:
  // per layer 2 RS GEMMs (proj, FC2) x 2 T h (1 + 1/2) bytes at the HBM rate, T = 8192, h = 4096.
  Job fp8 = JobOf(std::string(kLlama8bTp2) + ", overlap_tp_comm: true, precision: {gemm: fp8}}");
  ASSERT_TRUE(fp8.framework.overlap.tp_comm.fp8_rs_ring_exchange);
  fp8.profile.contention.clear();
  const double reduce_bytes = 2 * 2.0 * 8192 * 4096 * 1.5;
  EXPECT_NEAR(TpCommPerLayer(fp8), reduce_bytes / fp8.profile.hbm_bandwidth_bytes_per_s, 1e-12);
  // Without the ring (the BF16 pipeline for every dtype), the split costs and the last piece's
  // exposed reduce-scatter instead: more than the reduce kernel.
  fp8.framework.overlap.tp_comm.fp8_rs_ring_exchange = false;
  EXPECT_GT(TpCommPerLayer(fp8), reduce_bytes / fp8.profile.hbm_bandwidth_bytes_per_s);
}

}  // namespace
}  // namespace stepcast
