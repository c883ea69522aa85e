#include "calibrate/mpi_backend.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stepcast::calibrate {
namespace {

class MpiBackend final : public CollectiveBackend {
 public:
  MpiBackend(double max_bytes, Scope scope) : scope_(scope), max_bytes_(max_bytes) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
    const size_t floats = static_cast<size_t>(std::ceil(max_bytes / 4)) + ranks_;
    send_.assign(floats, 0.0f);
    recv_.assign(floats, 0.0f);
  }
  std::string name() const override { return "mpi-host"; }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  Scope scope() const override { return scope_; }
  double max_bytes() const override { return max_bytes_; }

  absl::StatusOr<std::vector<double>> Time(Collective c, double size_bytes, int warmup, int iters) override {
    const int n = ranks_;
    const int count = static_cast<int>(size_bytes / 4);  // floats as nccl-tests counts S
    std::fill(send_.begin(), send_.begin() + count, static_cast<float>(rank_ + 1));
    std::vector<double> times;
    for (int it = 0; it < warmup + iters; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (int rc = Run(c, count); rc != MPI_SUCCESS) return absl::InternalError(absl::StrCat("MPI error ", rc));
      const double dt = MPI_Wtime() - t0;
      if (it == 0) {
        if (absl::Status s = Check(c, count); !s.ok()) return s;
      }
      if (it >= warmup) times.push_back(dt);
    }
    // Each iteration counts as long as its slowest rank.
    std::vector<double> slowest(times.size());
    MPI_Allreduce(times.data(), slowest.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    (void)n;
    return slowest;
  }

 private:
  int Run(Collective c, int count) {
    const int n = ranks_;
    switch (c) {
      case Collective::kAllReduce:
        return MPI_Allreduce(send_.data(), recv_.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      case Collective::kAllGather:  // S is the gathered total
        return MPI_Allgather(send_.data(), count / n, MPI_FLOAT, recv_.data(), count / n, MPI_FLOAT, MPI_COMM_WORLD);
      case Collective::kReduceScatter:  // S is the input total
        return MPI_Reduce_scatter_block(send_.data(), recv_.data(), count / n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      case Collective::kAllToAll:
        return MPI_Alltoall(send_.data(), count / n, MPI_FLOAT, recv_.data(), count / n, MPI_FLOAT, MPI_COMM_WORLD);
      case Collective::kSendRecv:  // a ring: send to the next rank, receive from the previous
        return MPI_Sendrecv(send_.data(), count, MPI_FLOAT, (rank_ + 1) % n, 0, recv_.data(), count, MPI_FLOAT,
                            (rank_ + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return MPI_ERR_OTHER;
  }

  absl::Status Check(Collective c, int count) const {
    const int n = ranks_;
    auto bad = [&](int i, float got, float want) {
      return absl::DataLossError(absl::StrCat("wrong result at element ", i, ": ", got, " instead of ", want));
    };
    switch (c) {
      case Collective::kAllReduce:
      case Collective::kReduceScatter: {
        const float want = n * (n + 1) / 2.0f;
        const int m = c == Collective::kAllReduce ? count : count / n;
        for (int i = 0; i < m; ++i)
          if (recv_[i] != want) return bad(i, recv_[i], want);
        break;
      }
      case Collective::kAllGather:
      case Collective::kAllToAll:
        for (int i = 0; i < (count / n) * n; ++i) {
          const float want = static_cast<float>(i / (count / n) + 1);
          if (recv_[i] != want) return bad(i, recv_[i], want);
        }
        break;
      case Collective::kSendRecv: {
        const float want = static_cast<float>((rank_ + n - 1) % n + 1);
        for (int i = 0; i < count; ++i)
          if (recv_[i] != want) return bad(i, recv_[i], want);
        break;
      }
    }
    return absl::OkStatus();
  }

  int rank_ = 0, ranks_ = 1;
  Scope scope_;
  double max_bytes_;
  std::vector<float> send_, recv_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> MakeMpiBackend(double max_bytes, Scope scope) {
  return std::make_unique<MpiBackend>(max_bytes, scope);
}

}  // namespace stepcast::calibrate
