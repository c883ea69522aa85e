#include "calibrate/mpi_backend.h"

#include <mpi.h>

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "calibrate/collective_check.h"

namespace stepcast::calibrate {
namespace {

class MpiBackend final : public CollectiveBackend {
 public:
  MpiBackend(double max_bytes, Scope scope) : scope_(scope), max_bytes_(max_bytes) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
    const size_t floats = static_cast<size_t>(std::ceil(max_bytes / 4)) + 4 * ranks_;
    send_.assign(floats, 0.0f);
    recv_.assign(floats, 0.0f);
  }
  std::string name() const override { return "mpi-host"; }
  int ranks() const override { return ranks_; }
  int local_gpus() const override { return 1; }
  Scope scope() const override { return scope_; }
  double max_bytes() const override { return max_bytes_; }

  absl::Status Check(Collective c, double size_bytes, int salt) override {
    const size_t count = static_cast<size_t>(size_bytes / 4);
    const size_t sc = SendCount(c, ranks_, count);
    for (size_t j = 0; j < sc; ++j) send_[j] = SendElement(c, rank_, salt, j);
    std::fill(recv_.begin(), recv_.begin() + ReceiveCount(c, ranks_, count), std::numeric_limits<float>::quiet_NaN());
    if (int rc = Run(c, count); rc != MPI_SUCCESS) return absl::InternalError(absl::StrCat("MPI error ", rc));
    const std::vector<size_t> idx = CheckIndices(ReceiveCount(c, ranks_, count));
    std::vector<float> got;
    got.reserve(idx.size());
    for (size_t j : idx) got.push_back(recv_[j]);
    return CheckReceived(c, ranks_, rank_, salt, count, idx, got, absl::StrCat("rank ", rank_, " (host memory)"));
  }

  absl::StatusOr<std::vector<std::vector<double>>> TimeBatches(Collective c, double size_bytes, int warmup, int iters,
                                                               int batches) override {
    const size_t count = static_cast<size_t>(size_bytes / 4);
    for (int i = 0; i < warmup; ++i) {
      if (int rc = Run(c, count); rc != MPI_SUCCESS) return absl::InternalError(absl::StrCat("MPI error ", rc));
    }
    std::vector<double> per_batch;
    for (int b = 0; b < batches; ++b) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        if (int rc = Run(c, count); rc != MPI_SUCCESS) return absl::InternalError(absl::StrCat("MPI error ", rc));
      }
      per_batch.push_back((MPI_Wtime() - t0) / iters);
    }
    return std::vector<std::vector<double>>{per_batch};
  }

 private:
  int Run(Collective c, size_t count_z) {
    const int n = ranks_;
    const int count = static_cast<int>(count_z);
    switch (c) {
      case Collective::kAllReduce:
        return MPI_Allreduce(send_.data(), recv_.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      case Collective::kAllGather:
        return MPI_Allgather(send_.data(), count / n, MPI_FLOAT, recv_.data(), count / n, MPI_FLOAT, MPI_COMM_WORLD);
      case Collective::kReduceScatter:
        return MPI_Reduce_scatter_block(send_.data(), recv_.data(), count / n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      case Collective::kAllToAll:
        return MPI_Alltoall(send_.data(), count / n, MPI_FLOAT, recv_.data(), count / n, MPI_FLOAT, MPI_COMM_WORLD);
      case Collective::kSendRecv:  // a ring: send to the next rank, receive from the previous
        return MPI_Sendrecv(send_.data(), count, MPI_FLOAT, (rank_ + 1) % n, 0, recv_.data(), count, MPI_FLOAT,
                            (rank_ + n - 1) % n, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return MPI_ERR_OTHER;
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
