// `stepcast trace rank*.json.gz`: communication wait that is another rank's lateness
// (plugin/trace/stragglers.h, issue 24 item 1). Synthetic ranks whose timelines are checked by
// hand, and the 8 PARAM DLRM ranks (tests/data/real_data/traces/param/) against an independent
// accounting in Python (tests/data/real_data/traces/straggler_reaccount.py ->
// straggler_reference.json) and against start times read by hand from the JSON.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "plugin/trace/kineto_trace.h"
#include "plugin/trace/stragglers.h"
#include "tests/trace_builder.h"

namespace stepcast::trace {
namespace {

using stepcast::testing::TraceBuilder;

const std::string kData = std::string(STEPCAST_SOURCE_DIR) + "/tests/data/real_data/traces/";
constexpr char kAllReduce[] = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";
constexpr char kGemm[] = "sm90_xmma_gemm_bf16bf16_bf16f32";

const v1::RankCollectiveWait& RankOf(const v1::StragglerReport& w, int rank) {
  for (const auto& r : w.ranks()) {
    if (r.rank() == rank) return r;
  }
  ADD_FAILURE() << "no rank " << rank;
  return v1::RankCollectiveWait::default_instance();
}

// One rank of a synthetic job: ProfilerStep#0 over [0, 10 ms); a GEMM [100, 1100) us on stream 7;
// one all_reduce on stream 20 from `ar_start_us` to `ar_end_us` (extra kernel args `args`).
std::string WriteRank(const std::string& name, int rank, int world, double ar_start_us, double ar_end_us,
                      const std::string& args = "") {
  TraceBuilder b;
  b.Rank(rank, world)
      .Range("ProfilerStep#0", 0, 10000)
      .Kernel(kGemm, 10, 100, 1000, 7)
      .Kernel(kAllReduce, 1200, ar_start_us, ar_end_us - ar_start_us, 20, 1, "[1,1,1]", "kernel", args);
  return b.Write(name + "_rank" + std::to_string(rank) + ".json");
}

// Rank 2 starts its all_reduce 3 ms after the other three (2.0 ms vs 5.0 ms); all four end at
// 5.5 ms, as a blocking collective does. By hand: ranks 0, 1, 3 each wait 5.0 - 2.0 = 3 ms (their
// kernels last 3.5 ms), attributed to rank 2; rank 2 waits 0; the others waited 3 x 3 = 9 ms for
// rank 2; the step's critical lateness is the largest wait, 3 ms.
TEST(Stragglers, RankTwoThreeMillisecondsLate) {
  std::vector<std::string> paths;
  for (int r = 0; r < 4; ++r) paths.push_back(WriteRank("late2", r, 4, r == 2 ? 5000 : 2000, 5500));
  absl::StatusOr<v1::TraceReport> rep = AnalyzeKinetoTraces(paths);
  ASSERT_TRUE(rep.ok()) << rep.status();
  ASSERT_TRUE(rep->has_stragglers());
  const v1::StragglerReport& w = rep->stragglers();
  EXPECT_EQ(w.collectives(), 1);
  ASSERT_EQ(w.ranks_size(), 4);
  for (int r : {0, 1, 3}) {
    SCOPED_TRACE(r);
    EXPECT_NEAR(RankOf(w, r).communication_s(), 3.5e-3, 1e-12);
    EXPECT_NEAR(RankOf(w, r).wait_for_other_ranks_s(), 3e-3, 1e-12);
    EXPECT_EQ(RankOf(w, r).mostly_waited_for_rank(), 2);
    EXPECT_NEAR(RankOf(w, r).waited_for_that_rank_s(), 3e-3, 1e-12);
    EXPECT_EQ(RankOf(w, r).arrived_last(), 0);
  }
  EXPECT_NEAR(RankOf(w, 2).communication_s(), 0.5e-3, 1e-12);
  EXPECT_EQ(RankOf(w, 2).wait_for_other_ranks_s(), 0);
  EXPECT_EQ(RankOf(w, 2).mostly_waited_for_rank(), -1);
  EXPECT_EQ(RankOf(w, 2).arrived_last(), 1);
  EXPECT_NEAR(RankOf(w, 2).others_waited_for_it_s(), 9e-3, 1e-12);
  EXPECT_EQ(w.slowest_rank(), 2);
  EXPECT_NEAR(w.slowest_rank_caused_wait_s(), 9e-3, 1e-12);
  ASSERT_EQ(w.steps_size(), 1);
  EXPECT_EQ(w.steps(0).step(), 0);
  EXPECT_NEAR(w.steps(0).critical_lateness_s(), 3e-3, 1e-12);
  EXPECT_EQ(w.steps(0).latest_rank(), 2);
  EXPECT_THAT(w.notes(), ::testing::IsEmpty());
}

// One file: no straggler report (nothing to compare with).
TEST(Stragglers, OneRankHasNone) {
  absl::StatusOr<v1::TraceReport> rep = AnalyzeKinetoTraces({WriteRank("alone", 0, 1, 2000, 5500)});
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_FALSE(rep->has_stragglers());
}

// Two process groups on the same stream id ({0, 1} as "1", {2, 3} as "2", Kineto's "Process
// Group Name" kernel argument): each all_reduce is matched within its group. By hand: rank 0
// waits 4.0 - 2.0 = 2 ms for rank 1, rank 2 waits 3.0 - 2.0 = 1 ms for rank 3; critical lateness
// 2 + 1 = 3 ms; slowest rank 1. Matched by stream alone, the four would be one instance (latest
// rank 1 at 4.0 ms): rank 2 would wait 2 ms and rank 3 1 ms, for rank 1.
TEST(Stragglers, MatchedWithinTheProcessGroup) {
  std::vector<std::string> paths;
  const double start[] = {2000, 4000, 2000, 3000};
  for (int r = 0; r < 4; ++r) {
    const std::string pg = r < 2 ? "\"Process Group Name\":\"1\"" : "\"Process Group Name\":\"2\"";
    paths.push_back(WriteRank("pg", r, 4, start[r], 4500, pg));
  }
  absl::StatusOr<v1::TraceReport> rep = AnalyzeKinetoTraces(paths);
  ASSERT_TRUE(rep.ok()) << rep.status();
  const v1::StragglerReport& w = rep->stragglers();
  EXPECT_EQ(w.collectives(), 2);
  EXPECT_NEAR(RankOf(w, 0).wait_for_other_ranks_s(), 2e-3, 1e-12);
  EXPECT_EQ(RankOf(w, 0).mostly_waited_for_rank(), 1);
  EXPECT_NEAR(RankOf(w, 2).wait_for_other_ranks_s(), 1e-3, 1e-12);
  EXPECT_EQ(RankOf(w, 2).mostly_waited_for_rank(), 3);
  EXPECT_EQ(RankOf(w, 3).wait_for_other_ranks_s(), 0);
  EXPECT_EQ(w.slowest_rank(), 1);
  ASSERT_EQ(w.steps_size(), 1);
  EXPECT_NEAR(w.steps(0).critical_lateness_s(), 3e-3, 1e-12);
}

// The wait is bounded by the rank's own kernel: rank 0's all_reduce [1.0, 1.5) ms ends before
// rank 1's starts at 3.0 ms (clocks that disagree): its wait is its 0.5 ms, not 2 ms, and a note
// says the clocks disagree.
TEST(Stragglers, WaitBoundedByOwnKernelAndClockDisagreementNoted) {
  absl::StatusOr<v1::TraceReport> rep =
      AnalyzeKinetoTraces({WriteRank("clock", 0, 2, 1000, 1500), WriteRank("clock", 1, 2, 3000, 3500)});
  ASSERT_TRUE(rep.ok()) << rep.status();
  const v1::StragglerReport& w = rep->stragglers();
  EXPECT_NEAR(RankOf(w, 0).wait_for_other_ranks_s(), 0.5e-3, 1e-12);
  EXPECT_THAT(::testing::PrintToString(w.notes()), ::testing::HasSubstr("clocks disagree"));
}

// Kernel counts that differ between ranks are not matched (no guessed pairing), and it is said.
TEST(Stragglers, DifferentCountsNotMatched) {
  TraceBuilder b;
  b.Rank(1, 2)
      .Range("ProfilerStep#0", 0, 10000)
      .Kernel(kAllReduce, 1200, 2000, 500, 20)
      .Kernel(kAllReduce, 2600, 3000, 500, 20);
  absl::StatusOr<v1::TraceReport> rep =
      AnalyzeKinetoTraces({WriteRank("counts", 0, 2, 2000, 2500), b.Write("counts_rank1.json")});
  ASSERT_TRUE(rep.ok()) << rep.status();
  const v1::StragglerReport& w = rep->stragglers();
  EXPECT_EQ(w.collectives(), 0);
  EXPECT_EQ(w.slowest_rank(), -1);
  EXPECT_THAT(::testing::PrintToString(w.notes()),
              ::testing::HasSubstr("stream 20 all_reduce: kernel counts differ between ranks (rank 0: 1, rank 1: 2)"));
}

// Two files of one rank: an error naming the rank (the analysis), a note in the report (the
// per-rank figures still stand).
TEST(Stragglers, RankGivenTwice) {
  RankCollectives a;
  a.rank = 3;
  absl::StatusOr<v1::StragglerReport> w = AttributeCollectiveWaits({a, a});
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()), ::testing::HasSubstr("rank 3 is given twice"));
  EXPECT_EQ(AttributeCollectiveWaits({a}).status().code(), absl::StatusCode::kInvalidArgument);

  const std::string p = WriteRank("twice", 0, 2, 2000, 2500);
  absl::StatusOr<v1::TraceReport> rep = AnalyzeKinetoTraces({p, p});
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_THAT(::testing::PrintToString(rep->stragglers().notes()), ::testing::HasSubstr("rank 0 is given twice"));
}

// ---------------------------------------------------------------------------------------------
// The 8 PARAM DLRM ranks (facebookresearch/param @ 1e115ffc62c6, one ProfilerStep#10 each).

std::vector<std::string> DlrmPaths() {
  std::vector<std::string> p;
  for (int r = 0; r < 8; ++r) p.push_back(kData + "param/param_dlrm_v100x8_rank" + std::to_string(r) + ".json.gz");
  return p;
}

google::protobuf::Struct Reference() {
  std::ifstream f(kData + "straggler_reference.json");
  std::stringstream ss;
  ss << f.rdbuf();
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(ss.str(), &s).ok());
  return s;
}

// Every figure against the independent accounting (straggler_reaccount.py).
TEST(Stragglers, DlrmEightRanksMatchTheIndependentAccounting) {
  absl::StatusOr<v1::TraceReport> rep = AnalyzeKinetoTraces(DlrmPaths());
  ASSERT_TRUE(rep.ok()) << rep.status();
  const v1::StragglerReport& w = rep->stragglers();
  const google::protobuf::Struct ref = Reference();
  const auto& f = ref.fields();
  EXPECT_EQ(w.collectives(), f.at("collectives").number_value());
  EXPECT_EQ(w.slowest_rank(), f.at("slowest_rank").number_value());
  EXPECT_NEAR(w.slowest_rank_caused_wait_s(), f.at("slowest_rank_caused_wait_us").number_value() * 1e-6, 1e-12);
  ASSERT_EQ(w.steps_size(), 1);
  EXPECT_NEAR(w.steps(0).critical_lateness_s(), f.at("critical_lateness_us").number_value() * 1e-6, 1e-12);
  const auto& ranks = f.at("ranks").list_value().values();
  ASSERT_EQ(ranks.size(), 8);
  ASSERT_EQ(w.ranks_size(), 8);
  for (const auto& v : ranks) {
    const auto& rf = v.struct_value().fields();
    const int rank = static_cast<int>(rf.at("rank").number_value());
    SCOPED_TRACE(rank);
    const v1::RankCollectiveWait& got = RankOf(w, rank);
    EXPECT_EQ(got.collectives(), rf.at("collectives").number_value());
    EXPECT_NEAR(got.communication_s(), rf.at("communication_us").number_value() * 1e-6, 1e-12);
    EXPECT_NEAR(got.wait_for_other_ranks_s(), rf.at("wait_us").number_value() * 1e-6, 1e-12);
    EXPECT_EQ(got.mostly_waited_for_rank(), rf.at("mostly_waited_for_rank").number_value());
    EXPECT_NEAR(got.waited_for_that_rank_s(), rf.at("waited_for_that_rank_us").number_value() * 1e-6, 1e-12);
    EXPECT_EQ(got.arrived_last(), rf.at("arrived_last").number_value());
    EXPECT_NEAR(got.others_waited_for_it_s(), rf.at("others_waited_for_it_us").number_value() * 1e-6, 1e-12);
  }
  EXPECT_THAT(w.notes(), ::testing::IsEmpty());
}

// Read by hand from the JSON: the first ncclKernel_SendRecv (the first all_to_all) starts at
// ts 1694128201429795 (rank 0), ...424306 (1), ...431422 (2), ...425808 (3), ...427058 (4),
// ...427261 (5), ...431425 (6), ...431930 (7); every one ends at ...431939-431941. Rank 7 is
// last; rank 1 waits 431930 - 424306 = 7624 us of its 7635 us kernel, the largest wait of that
// instance; rank 7 is also last in the next three all_to_all (starts ...434710, ...435111,
// ...435244) and the first all_reduce (...436463), so it is last in 5 of the 8 collectives.
TEST(Stragglers, DlrmFirstAllToAllByHand) {
  absl::StatusOr<v1::TraceReport> rep = AnalyzeKinetoTraces(DlrmPaths());
  ASSERT_TRUE(rep.ok()) << rep.status();
  const v1::StragglerReport& w = rep->stragglers();
  EXPECT_EQ(w.slowest_rank(), 7);
  EXPECT_EQ(RankOf(w, 7).arrived_last(), 5);
  // Rank 1 waits 7624 us for rank 7 in the first all_to_all, and more in the four others rank 7
  // arrives last in: at least 7.624 ms of its wait is for rank 7.
  EXPECT_EQ(RankOf(w, 1).mostly_waited_for_rank(), 7);
  EXPECT_GE(RankOf(w, 1).waited_for_that_rank_s(), 7624e-6);
  EXPECT_GE(w.steps(0).critical_lateness_s(), 7624e-6);
  EXPECT_EQ(w.steps(0).latest_rank(), 7);
}

}  // namespace
}  // namespace stepcast::trace
