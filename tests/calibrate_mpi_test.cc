// The multi-rank collective harness over MPI's host collectives, run by ctest under
// `mpirun -np 2`: every collective's results verified, a full sweep on both ranks, the fits.
#include <mpi.h>

#include "calibrate/mpi_backend.h"
#include "gtest/gtest.h"

namespace stepcast::calibrate {
namespace {

TEST(MpiHarness, SweepsVerifiesAndFitsOnEveryRank) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  ASSERT_GE(n, 2) << "run under mpirun -np 2";
  auto backend = MakeMpiBackend(1 << 20, Scope::kIntraNode);
  SweepOptions o;
  o.min_bytes = 8;
  o.max_bytes = 1 << 20;
  o.warmup = 2;
  o.iters = 5;
  auto samples = Sweep(*backend, o);
  ASSERT_TRUE(samples.ok()) << samples.status();
  const size_t sizes = SweepSizes(8, 1 << 20, n).size();
  EXPECT_EQ(samples->size(), 5 * sizes);
  for (const auto& s : *samples) {
    EXPECT_EQ(s.ranks(), n);
    EXPECT_GT(s.time().median_s(), 0);
    EXPECT_GT(s.busbw_bytes_per_s(), 0);
    EXPECT_EQ(s.backend(), "mpi-host");
  }
  // Both ranks measured the same per-iteration maxima.
  double mine = (*samples)[sizes - 1].time().median_s(), other = 0;
  MPI_Allreduce(&mine, &other, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_DOUBLE_EQ(mine, other);
  const SweepFits f = FitSweep(*samples);
  EXPECT_EQ(f.rates.size(), 5u);
  for (const auto& r : f.rates) {
    EXPECT_GT(r.alpha_s(), 0);
    EXPECT_GT(r.busbw_bytes_per_s(), 0);
    EXPECT_EQ(r.group_size(), n);
  }
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
