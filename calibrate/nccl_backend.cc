#include "calibrate/nccl_backend.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/stream.h"

namespace stepcast::calibrate {
namespace {

absl::Status Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

// One GPU's share: its communicator, stream, buffers, events.
struct Slot {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

class NcclBackend final : public CollectiveBackend {
 public:
  NcclBackend(std::vector<Slot> slots, int rank, int ranks, bool mpi, Scope scope, double max_bytes)
      : slots_(std::move(slots)), rank_(rank), ranks_(ranks), mpi_(mpi), scope_(scope), max_bytes_(max_bytes) {}
  ~NcclBackend() override {
    for (auto& s : slots_) {
      cudaSetDevice(s.device);
      if (s.comm) ncclCommDestroy(s.comm);
      cudaFree(s.send);
      cudaFree(s.recv);
      cudaEventDestroy(s.start);
      cudaEventDestroy(s.stop);
      cudaStreamDestroy(s.stream);
    }
  }
  std::string name() const override { return mpi_ ? "nccl-mpi" : "nccl-local"; }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  Scope scope() const override { return scope_; }
  double max_bytes() const override { return max_bytes_; }

  absl::StatusOr<std::vector<double>> Time(Collective c, double size_bytes, int warmup, int iters) override {
    const size_t count = static_cast<size_t>(size_bytes / 4);
    const int n = ranks_;
    // Each rank's (GPU's) input is its rank + 1, so every result is checkable.
    for (size_t i = 0; i < slots_.size(); ++i) {
      cudaSetDevice(slots_[i].device);
      kernels::LaunchFillConstant(slots_[i].send, count, static_cast<float>(GlobalRank(i) + 1), slots_[i].stream);
    }
    std::vector<double> times;
    for (int it = 0; it < warmup + iters; ++it) {
      if (mpi_) MPI_Barrier(MPI_COMM_WORLD);
      // Events go outside the group: NCCL enqueues a group's kernels at ncclGroupEnd, so an
      // event recorded inside it would precede the collective on the stream.
      for (Slot& s : slots_) {
        cudaSetDevice(s.device);
        cudaEventRecord(s.start, s.stream);
      }
      if (absl::Status s = Nccl(ncclGroupStart(), "ncclGroupStart"); !s.ok()) return s;
      for (size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        cudaSetDevice(s.device);
        ncclResult_t r = ncclSuccess;
        switch (c) {
          case Collective::kAllReduce: r = ncclAllReduce(s.send, s.recv, count, ncclFloat, ncclSum, s.comm, s.stream); break;
          case Collective::kAllGather: r = ncclAllGather(s.send, s.recv, count / n, ncclFloat, s.comm, s.stream); break;
          case Collective::kReduceScatter:
            r = ncclReduceScatter(s.send, s.recv, count / n, ncclFloat, ncclSum, s.comm, s.stream);
            break;
          case Collective::kAllToAll:
            for (int p = 0; p < n && r == ncclSuccess; ++p) {
              r = ncclSend(s.send + p * (count / n), count / n, ncclFloat, p, s.comm, s.stream);
              if (r == ncclSuccess) r = ncclRecv(s.recv + p * (count / n), count / n, ncclFloat, p, s.comm, s.stream);
            }
            break;
          case Collective::kSendRecv: {
            const int me = GlobalRank(i);
            r = ncclSend(s.send, count, ncclFloat, (me + 1) % n, s.comm, s.stream);
            if (r == ncclSuccess) r = ncclRecv(s.recv, count, ncclFloat, (me + n - 1) % n, s.comm, s.stream);
            break;
          }
        }
        if (r != ncclSuccess) {
          ncclGroupEnd();
          return Nccl(r, CollectiveName(c));
        }
      }
      if (absl::Status s = Nccl(ncclGroupEnd(), "ncclGroupEnd"); !s.ok()) return s;
      for (Slot& s : slots_) {
        cudaSetDevice(s.device);
        cudaEventRecord(s.stop, s.stream);
      }
      double slowest = 0;
      for (auto& s : slots_) {
        cudaSetDevice(s.device);
        cudaEventSynchronize(s.stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, s.start, s.stop);
        slowest = std::max(slowest, ms * 1e-3);
      }
      if (it == 0) {
        if (absl::Status st = Check(c, count); !st.ok()) return st;
      }
      if (it >= warmup) times.push_back(slowest);
    }
    if (mpi_) {
      std::vector<double> worst(times.size());
      MPI_Allreduce(times.data(), worst.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return worst;
    }
    return times;
  }

 private:
  int GlobalRank(size_t slot) const { return mpi_ ? rank_ : static_cast<int>(slot); }

  absl::Status Check(Collective c, size_t count) {
    const int n = ranks_;
    std::vector<float> host(std::min<size_t>(count, 4096));
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      cudaSetDevice(s.device);
      size_t m = host.size();
      if (c == Collective::kReduceScatter) m = std::min(m, count / n);
      cudaMemcpy(host.data(), s.recv, m * sizeof(float), cudaMemcpyDeviceToHost);
      const int me = GlobalRank(i);
      for (size_t j = 0; j < m; ++j) {
        float want = 0;
        switch (c) {
          case Collective::kAllReduce:
          case Collective::kReduceScatter: want = n * (n + 1) / 2.0f; break;
          case Collective::kAllGather:
          case Collective::kAllToAll: want = static_cast<float>(j / (count / n) + 1); break;
          case Collective::kSendRecv: want = static_cast<float>((me + n - 1) % n + 1); break;
        }
        if (host[j] != want) {
          return absl::DataLossError(absl::StrCat("GPU ", s.device, ": element ", j, " is ", host[j], ", not ", want));
        }
      }
    }
    return absl::OkStatus();
  }

  std::vector<Slot> slots_;
  int rank_, ranks_;
  bool mpi_;
  Scope scope_;
  double max_bytes_;
};

absl::Status MakeSlot(Slot& s, double max_bytes) {
  cudaSetDevice(s.device);
  const size_t bytes = static_cast<size_t>(max_bytes) + 4096;
  if (cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(&s.send, bytes) != cudaSuccess || cudaMalloc(&s.recv, bytes) != cudaSuccess ||
      cudaEventCreate(&s.start) != cudaSuccess || cudaEventCreate(&s.stop) != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrCat("GPU ", s.device, ": cannot allocate ", bytes, " bytes x 2"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string NcclVersion() {
  int v = 0;
  ncclGetVersion(&v);
  return absl::StrCat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclLocalBackend(const std::vector<int>& gpus, double max_bytes) {
  if (gpus.size() < 2) return absl::FailedPreconditionError("intra-node collectives need at least 2 GPUs");
  std::vector<Slot> slots(gpus.size());
  std::vector<ncclComm_t> comms(gpus.size());
  if (absl::Status s = Nccl(ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()), gpus.data()), "ncclCommInitAll");
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    slots[i].device = gpus[i];
    slots[i].comm = comms[i];
    if (absl::Status s = MakeSlot(slots[i], max_bytes); !s.ok()) return s;
  }
  return std::unique_ptr<CollectiveBackend>(
      new NcclBackend(std::move(slots), 0, static_cast<int>(gpus.size()), false, Scope::kIntraNode, max_bytes));
}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclMpiBackend(int local_gpu, double max_bytes) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // Nodes: ranks sharing memory are on one host.
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_size = 1;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  std::vector<Slot> slots(1);
  slots[0].device = local_gpu;
  cudaSetDevice(local_gpu);
  if (absl::Status s = Nccl(ncclCommInitRank(&slots[0].comm, ranks, id, rank), "ncclCommInitRank"); !s.ok()) return s;
  if (absl::Status s = MakeSlot(slots[0], max_bytes); !s.ok()) return s;
  const Scope scope = local_size < ranks ? Scope::kInterNode : Scope::kIntraNode;
  return std::unique_ptr<CollectiveBackend>(new NcclBackend(std::move(slots), rank, ranks, true, scope, max_bytes));
}

}  // namespace stepcast::calibrate
