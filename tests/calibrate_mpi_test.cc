// The multi-rank parts over real MPI, run by ctest under `mpirun -np 2`: the MPI module's
// communicator (non-blocking calls with a deadline), error agreement when one rank fails, the
// gather of every rank's bytes, and the collective harness over MPI's host collectives with every
// result checked.
#include <mpi.h>

#include "absl/strings/str_cat.h"
#include "calibrate/collective_harness.h"
#include "calibrate/communicator.h"
#include "calibrate/mpi_layout.h"
#include "gtest/gtest.h"

extern "C" stepcast::calibrate::Communicator* stepcast_calibrate_mpi_create(int*, char***, double, char*, int);

namespace stepcast::calibrate {
namespace {

Communicator& Comm() {
  static Communicator* c = [] {
    char err[256] = {0};
    Communicator* x = stepcast_calibrate_mpi_create(nullptr, nullptr, 60, err, sizeof(err));
    EXPECT_NE(x, nullptr) << err;
    return x;
  }();
  return *c;
}

TEST(MpiCommunicator, AgreementGatherAndBroadcast) {
  Communicator& c = Comm();
  ASSERT_GE(c.size(), 2) << "run under mpirun -np 2";
  EXPECT_EQ(c.hosts(), 1);
  EXPECT_EQ(c.local_size(), c.size());
  // Rank 1 fails: every rank gets the same error, naming rank 1.
  const absl::Status mine = c.rank() == 1 ? absl::DataLossError("GPU 0: element 7 is 3, not 4") : absl::OkStatus();
  const absl::Status agreed = AgreeOnStatus(c, mine);
  EXPECT_EQ(agreed.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(agreed.message(), "rank 1: GPU 0: element 7 is 3, not 4");
  EXPECT_TRUE(AgreeOnStatus(c, absl::OkStatus()).ok());
  absl::StatusOr<std::vector<std::string>> g = c.Gather(std::string(c.rank() + 1, 'x'), 0);
  ASSERT_TRUE(g.ok());
  if (c.rank() == 0) {
    ASSERT_EQ(g->size(), static_cast<size_t>(c.size()));
    EXPECT_EQ((*g)[1], "xx");
  }
  std::string b = c.rank() == 0 ? "h100-sxm" : "";
  ASSERT_TRUE(c.Broadcast(b, 0).ok());
  EXPECT_EQ(b, "h100-sxm");
  std::vector<double> v = {static_cast<double>(c.rank()), 1.0};
  ASSERT_TRUE(c.AllreduceSum(v).ok());
  EXPECT_DOUBLE_EQ(v[1], c.size());
}

TEST(MpiHarness, SweepsChecksAndAveragesOverRanks) {
  Communicator& c = Comm();
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> b = c.HostCollectives(1 << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  SweepOptions o;
  o.max_bytes = 1 << 20;
  o.warmup = 2;
  o.iters = 5;
  o.batches = 3;
  SweepResult r = Sweep(**b, c, o);
  ASSERT_TRUE(r.status.ok()) << r.status;
  size_t sizes = 0;
  for (Collective x : o.collectives) sizes += SweepSizes(x, 8, 1 << 20, c.size()).size();
  EXPECT_EQ(r.samples.size(), sizes);
  for (const auto& s : r.samples) {
    EXPECT_EQ(s.ranks(), c.size());
    EXPECT_GT(s.time().median_s(), 0);
    EXPECT_GE(s.slowest_rank_time().median_s(), s.time().median_s());
    EXPECT_EQ(s.backend(), "mpi-host");
  }
  // Every rank holds the same (agreed) figures.
  std::vector<double> mine = {r.samples.back().time().median_s()}, most = mine;
  ASSERT_TRUE(c.AllreduceMax(most).ok());
  EXPECT_DOUBLE_EQ(mine[0], most[0]);
  const SweepFits f = FitSweep(r.samples, 0);
  EXPECT_EQ(f.rates.size(), 5u);
  // A failure injected on rank 1 at 4 KiB ends the sweep on every rank with the same error.
  o.inject = {1, false, 4096};
  o.collectives = {Collective::kAllReduce};
  r = Sweep(**b, c, o);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status.message().find("rank 1: all_reduce at 4096 bytes: injected failure"), std::string::npos)
      << r.status;
  EXPECT_EQ(r.samples.size(), 9u);  // 8 B .. 2 KiB
}

// gpu code review 2, N14: the ranks' layout comes from their processor names (a deadline-bounded
// all-gather, not MPI_Comm_split_type + MPI_Allreduce without one), and the thread level the
// library provides is checked: below MPI_THREAD_MULTIPLE the watchdog thread may not call
// MPI_Abort (MPI 4.0 section 11.6). This test's main() starts MPI with MPI_Init, which gives the
// level the library chooses; the communicator must say what it got.
TEST(MpiCommunicator, LayoutFromProcessorNamesAndTheThreadLevel) {
  const std::vector<std::string> hosts = {"a", "b", "a", "c", "a"};
  HostLayout l = LayoutOfHosts(hosts, 4);
  EXPECT_EQ(l.hosts, 3);
  EXPECT_EQ(l.local_size, 3);
  EXPECT_EQ(l.local_rank, 2);
  l = LayoutOfHosts(hosts, 3);
  EXPECT_EQ(l.local_size, 1);
  EXPECT_EQ(l.local_rank, 0);
  EXPECT_TRUE(MpiAbortAllowed(0, true));
  EXPECT_FALSE(MpiAbortAllowed(MPI_THREAD_SERIALIZED, false));
  EXPECT_TRUE(MpiAbortAllowed(MPI_THREAD_MULTIPLE, false));
  EXPECT_EQ(std::string(MpiThreadLevelName(MPI_THREAD_FUNNELED)), "MPI_THREAD_FUNNELED");
  Communicator& c = Comm();
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    EXPECT_NE(c.name().find(absl::StrCat("thread level ", MpiThreadLevelName(provided))), std::string::npos) << c.name();
  } else {
    EXPECT_EQ(c.name().find("thread level"), std::string::npos) << c.name();
  }
  EXPECT_EQ(c.local_rank(), c.rank());  // one host here
}

}  // namespace
}  // namespace stepcast::calibrate

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
