// Collective costs: nccl-tests' bus-bandwidth factors, the alpha-beta model, measured curves,
// and the placement of parallel groups.
#include "core/hardware.h"
#include "core/job.h"
#include "gtest/gtest.h"

namespace stepcast {
namespace {

TEST(BusBw, NcclTestsFactors) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
  // (n-1)/n; send/recv 1. For 8 ranks: 1.75 and 0.875.
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllToAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 1), 0.0);
}

TEST(CollectiveTime, Seed004RingAllReduce) {
  // Seed 004: T_AR = 2(P-1)/P x 2 Psi / beta; 70B, 128 GPUs, 50 GB/s -> ~5.6 s.
  CollectiveRate r;
  r.collective = Collective::kAllReduce;
  r.busbw_bytes_per_s = 50e9;
  EXPECT_NEAR(CollectiveTime(r, 128, 2 * 70e9), 2.0 * 127 / 128 * 140e9 / 50e9, 1e-9);
  EXPECT_NEAR(CollectiveTime(r, 128, 2 * 70e9), 5.6, 0.05);
  EXPECT_EQ(CollectiveTime(r, 1, 1e9), 0.0);
}

TEST(CollectiveTime, AlphaScalesWithRingSteps) {
  CollectiveRate r;
  r.collective = Collective::kAllReduce;
  r.group_size = 8;
  r.alpha_s = 14 * 4e-6;  // 14 ring steps at n = 8
  r.busbw_bytes_per_s = 1e12;
  EXPECT_DOUBLE_EQ(AlphaForGroup(r, 8), 56e-6);
  EXPECT_DOUBLE_EQ(AlphaForGroup(r, 4), 6 * 4e-6);
  EXPECT_NEAR(CollectiveTime(r, 4, 0.0 + 1e6), 24e-6 + 1e6 * 1.5 / 1e12, 1e-15);
}

TEST(CollectiveTime, AllReduceAcrossManyNodesTakesNcclsTreeLatency) {
  // An all-reduce's latency measured at 2 nodes x 8 (29.67 us), asked for 64 nodes x 8. NCCL
  // takes the faster of ring and tree (src/graph/tuning.cc); its tree latency (LL) is 6.8 + 2 x
  // ((ranks per node - 1) x 0.6 + log2(nodes) x 5.0) us: 25.2 us at 2 x 8, 75.2 us at 64 x 8, so
  // 29.67 x 75.2 / 25.2 = 88.5 us, where the ring's steps would give 29.67 x 1022 / 30 = 1,011 us.
  CollectiveRate r;
  r.collective = Collective::kAllReduce;
  r.scope = Scope::kInterNode;
  r.group_size = 16;
  r.ranks_per_node = 8;
  r.alpha_s = 29.67e-6;
  r.busbw_bytes_per_s = 400e9;
  EXPECT_NEAR(EstimateCollective(r, 512, 8, 8).time_s, 29.67e-6 * 75.2 / 25.2, 1e-9);
  // 4 nodes x 8: tree 6.8 + 2 (4.2 + 10) = 35.2 us against a ring of 62 steps.
  EXPECT_NEAR(EstimateCollective(r, 32, 8, 8).time_s, 29.67e-6 * 35.2 / 25.2, 1e-9);
  // The layout not known, or another collective (ring only: all-gather): the ring's steps.
  EXPECT_NEAR(EstimateCollective(r, 512, 8, 0).time_s, 29.67e-6 * 1022 / 30, 1e-9);
  r.collective = Collective::kAllGather;
  EXPECT_NEAR(EstimateCollective(r, 512, 8, 8).time_s, 29.67e-6 * 511 / 15, 1e-9);
  // Inside a node nothing changes: the ring's steps.
  r.collective = Collective::kAllReduce;
  r.scope = Scope::kIntraNode;
  EXPECT_NEAR(EstimateCollective(r, 8, 8, 8).time_s, 29.67e-6 * 14 / 30, 1e-9);
}

TEST(EstimateCollective, MeasuredPointsInterpolateLinearlyInSize) {
  CollectiveRate r;
  r.collective = Collective::kAllGather;
  r.group_size = 8;
  r.points = {{1e6, 100e-6}, {100e6, 1e-3}};
  r.busbw_bytes_per_s = 200e9;
  // Halfway in bytes, halfway in time (each measured segment is an alpha-beta line).
  CollectiveEstimate mid = EstimateCollective(r, 8, 50.5e6);
  EXPECT_NEAR(mid.time_s, 550e-6, 1e-12);
  EXPECT_FALSE(mid.extrapolated);
  EXPECT_TRUE(mid.reason.empty());
  // A measured size gives its own time.
  EXPECT_DOUBLE_EQ(EstimateCollective(r, 8, 100e6).time_s, 1e-3);
  // Below the smallest size the floor holds; beyond the largest busbw continues; both flagged.
  CollectiveEstimate below = EstimateCollective(r, 8, 1e3);
  EXPECT_DOUBLE_EQ(below.time_s, 100e-6);
  EXPECT_TRUE(below.extrapolated);
  EXPECT_NE(below.reason.find("smallest measured size"), std::string::npos);
  CollectiveEstimate above = EstimateCollective(r, 8, 200e6);
  EXPECT_NEAR(above.time_s, 1e-3 + 100e6 * 0.875 / 200e9, 1e-12);
  EXPECT_TRUE(above.extrapolated);
  EXPECT_NE(above.reason.find("largest measured size"), std::string::npos);
  EXPECT_DOUBLE_EQ(CollectiveTime(r, 8, 50.5e6), mid.time_s);  // the thin wrapper
}

TEST(EstimateCollective, RealH100LogInterpolatedBetweenSizes) {
  // nccl-tests all_reduce_perf, DGX H100 x8 (tests/data/real_data/microbench/nccl/
  // 01_h100x8_nvlink_dgx_allreduce.txt): 2 MiB 42.21 us, 4 MiB 54.19 us (out-of-place). 3 MiB
  // lies halfway: 48.20 us.
  CollectiveRate r;
  r.group_size = 8;
  r.points = {{2097152, 42.21e-6}, {4194304, 54.19e-6}};
  EXPECT_NEAR(EstimateCollective(r, 8, 3145728).time_s, 48.20e-6, 1e-10);
}

TEST(EstimateCollective, OtherGroupSizeScalesTheCurveAndSaysSo) {
  // Curve at 8 ranks: floor 10 us, 1 GB at 2 ms. At 4 ranks an all-reduce of S moves
  // S x 1.5 / 1.75 of the 8-rank bytes per rank; latency 6 / 14 of the floor (ring steps).
  CollectiveRate r;
  r.collective = Collective::kAllReduce;
  r.group_size = 8;
  r.points = {{8, 10e-6}, {1e9, 2e-3}};
  const double S = 1e9 * 1.75 / 1.5;  // lands on the 1 GB point after scaling
  CollectiveEstimate e = EstimateCollective(r, 4, S);
  EXPECT_NEAR(e.time_s, 10e-6 * 6 / 14 + (2e-3 - 10e-6), 1e-12);
  EXPECT_TRUE(e.extrapolated);
  EXPECT_NE(e.reason.find("measured at 8 ranks, asked for 4"), std::string::npos);
  // Across nodes: measured with 8 ranks per node, asked with 1 per node: the bandwidth part runs
  // on 1 of the 8 NICs per node it had.
  r.scope = Scope::kInterNode;
  r.group_size = 16;
  r.ranks_per_node = 8;
  CollectiveEstimate one = EstimateCollective(r, 16, 1e9 * 1.875 / 1.875, 1);
  EXPECT_NEAR(one.time_s, 10e-6 + (2e-3 - 10e-6) * 8, 1e-12);
  EXPECT_NE(one.reason.find("NICs in use (8/1)"), std::string::npos);
  // Same layout (or not known): the curve itself.
  EXPECT_FALSE(EstimateCollective(r, 16, 1e9, 8).extrapolated);
  EXPECT_FALSE(EstimateCollective(r, 16, 1e9, 0).extrapolated);
}

TEST(EstimateCollective, NoCurveIsTheAlphaBetaFormFlagged) {
  CollectiveRate r;
  r.collective = Collective::kAllReduce;
  r.group_size = 8;
  r.alpha_s = 14 * 4e-6;
  r.busbw_bytes_per_s = 1e12;
  CollectiveEstimate e = EstimateCollective(r, 4, 1e6);
  EXPECT_NEAR(e.time_s, 24e-6 + 1e6 * 1.5 / 1e12, 1e-15);
  EXPECT_TRUE(e.extrapolated);
  EXPECT_NE(e.reason.find("no measured curve"), std::string::npos);
  EXPECT_EQ(EstimateCollective(r, 1, 1e6).time_s, 0.0);
  EXPECT_EQ(EstimateCollective(r, 8, 0).time_s, 0.0);
}

TEST(FindCollective, PrefersTheCurveOfTheGroupThenTheFormulaThenTheNearestCurve) {
  RateProfile p;
  CollectiveRate formula;
  formula.scope = Scope::kInterNode;
  formula.busbw_bytes_per_s = 47e9;
  CollectiveRate c16 = formula, c128 = formula;
  c16.group_size = 16;
  c16.ranks_per_node = 8;
  c16.points = {{8, 30e-6}, {1e9, 5e-3}};
  c128.group_size = 128;
  c128.ranks_per_node = 4;
  c128.points = {{8, 180e-6}, {1e9, 6e-3}};
  p.collectives = {formula, c16, c128};
  EXPECT_EQ(p.FindCollective(Collective::kAllReduce, Scope::kInterNode, 16, 8), &p.collectives[1]);
  EXPECT_EQ(p.FindCollective(Collective::kAllReduce, Scope::kInterNode, 128, 4), &p.collectives[2]);
  // 16 ranks, 1 per node: not the 8-per-node curve; the formula (striped by the caller).
  EXPECT_EQ(p.FindCollective(Collective::kAllReduce, Scope::kInterNode, 16, 1), &p.collectives[0]);
  EXPECT_EQ(p.FindCollective(Collective::kAllReduce, Scope::kIntraNode, 8, 8), nullptr);
  p.collectives = {c16, c128};
  EXPECT_EQ(p.FindCollective(Collective::kAllReduce, Scope::kInterNode, 64, 4), &p.collectives[1]);
  EXPECT_EQ(p.FindCollective(Collective::kAllReduce, Scope::kInterNode, 32, 8), &p.collectives[0]);
}

TEST(Placement, MegatronRankOrder) {
  Parallelism p;
  p.tp = 8; p.pp = 4; p.dp = 4;
  Placement pl = PlaceGroups(p, 8);
  EXPECT_EQ(pl.tp.scope, Scope::kIntraNode);
  EXPECT_EQ(pl.dp.scope, Scope::kInterNode);
  EXPECT_EQ(pl.dp.members_per_node, 1);
  EXPECT_EQ(pl.pp.scope, Scope::kInterNode);
  // TP 1, DP 32 on 8-GPU nodes: a hierarchical DP group with 8 members per node.
  Parallelism q;
  q.dp = 32;
  pl = PlaceGroups(q, 8);
  EXPECT_EQ(pl.dp.scope, Scope::kInterNode);
  EXPECT_EQ(pl.dp.members_per_node, 8);
  // TP 2, DP 4: the whole DP group (stride 2, span 8) fits in one node.
  Parallelism r;
  r.tp = 2; r.dp = 4;
  EXPECT_EQ(PlaceGroups(r, 8).dp.scope, Scope::kIntraNode);
  // Aligned groups: every node holds the same number of members.
  EXPECT_EQ(PlaceGroups(q, 8).dp.min_members_per_node, 8);
}

TEST(Placement, GroupsThatStraddleNodesUnevenlyKeepTheFewestMembersOnANode) {
  // 512 ranks on 72-GPU NVLink domains (GB200 NVL72), TP 2, PP 4, EP 64 in the order
  // tp-cp-ep-dp (EP ranks 2 apart: blocks of 128 consecutive ranks). By hand, the domain
  // boundaries at 72, 144, 216, ... cut the four blocks of the first 512 ranks into segments of
  //   [0,128): 72, 56;  [128,256): 16, 72, 40;  [256,384): 32, 72, 24;  [384,512): 48, 72, 8.
  // The shortest, ranks 504-511, holds 8 / 2 = 4 members of each of its two EP groups.
  Parallelism p;
  p.tp = 2; p.pp = 4; p.dp = 64; p.ep = 64;
  const GroupPlacement ep = PlaceGroups(p, 72, /*expert_parallel_after_cp=*/true).ep;
  EXPECT_EQ(ep.scope, Scope::kInterNode);
  EXPECT_EQ(ep.members_per_node, 36);
  EXPECT_EQ(ep.min_members_per_node, 4);
  // 128 ranks: only the first block, 72 + 56: 28 members on the second domain.
  Parallelism q;
  q.tp = 2; q.dp = 64; q.ep = 64;
  EXPECT_EQ(PlaceGroups(q, 72, true).ep.min_members_per_node, 28);
  // The same EP groups on 64-GPU domains are aligned: 32 members on each.
  EXPECT_EQ(PlaceGroups(q, 64, true).ep.min_members_per_node, 32);
  // Extreme sizes a job file may state answer at once (O(1) per block, at most 2^16 blocks): a
  // prime node size of 1,000,003 under 2^21-rank DP groups, 2^17 of them, would need 131,072
  // blocks read; the fewest is taken as one member.
  Parallelism huge;
  huge.dp = int64_t{1} << 21; huge.pp = int64_t{1} << 17;
  const GroupPlacement dp = PlaceGroups(huge, 1000003).dp;
  EXPECT_EQ(dp.scope, Scope::kInterNode);
  EXPECT_EQ(dp.min_members_per_node, 1);
}

TEST(GemmRate, InterpolatesInLogFlopsAndFlagsExtrapolation) {
  RateProfile p;
  p.gemm = {{DType::kBF16, 1024, 1024, 1024, 100e12, ""}, {DType::kBF16, 8192, 8192, 8192, 400e12, ""}};
  // 2*2048^3 lies a third of the way (in log10 FLOPs) from 1024^3 to 8192^3.
  auto mid = p.GemmRate(DType::kBF16, 2048, 2048, 2048);
  EXPECT_NEAR(mid.flops_per_s, 200e12, 1e6);
  EXPECT_FALSE(mid.extrapolated);
  auto big = p.GemmRate(DType::kBF16, 16384, 16384, 16384);
  EXPECT_DOUBLE_EQ(big.flops_per_s, 400e12);
  EXPECT_TRUE(big.extrapolated);
  auto fp16 = p.GemmRate(DType::kFP16, 8192, 8192, 8192);  // borrowed from bf16
  EXPECT_TRUE(fp16.found);
  EXPECT_TRUE(fp16.extrapolated);
  EXPECT_FALSE(p.GemmRate(DType::kFP8, 8192, 8192, 8192).found);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

TEST(WaveEfficiency, WorkedShapesOnA100) {
  // mamf-finder's best A100 shape, 1024 x 10240: 4 x 80 = 320 tiles of 256 x 128 on 108 SMs =
  // 2.963 waves -> 2.963 / 3.
  EXPECT_NEAR(WaveEfficiency(1024, 10240, 108), 320.0 / 108 / 3, 1e-12);
  // 8192 x 8192: 2048 tiles = 18.96 waves -> 18.96 / 19.
  EXPECT_NEAR(WaveEfficiency(8192, 8192, 108), 2048.0 / 108 / 19, 1e-12);
  // GPT-3 175B QKV at TP 8, one 2048-token micro-batch: 2048 x 4608 -> 288 tiles = 2.67 waves.
  EXPECT_NEAR(WaveEfficiency(2048, 4608, 108), 288.0 / 108 / 3, 1e-12);
  // Under one wave split-K fills the SMs; no SM count, no quantization.
  EXPECT_DOUBLE_EQ(WaveEfficiency(512, 512, 108), 1.0);
  EXPECT_DOUBLE_EQ(WaveEfficiency(2048, 4608, 0), 1.0);
  // The better orientation wins: 128 x 256 tiles for a wide-N, short-M output.
  EXPECT_NEAR(WaveEfficiency(256, 128 * 216, 108), 1.0, 1e-12);
}

}  // namespace
}  // namespace stepcast
