#include "calibrate/nccl_backend.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "calibrate/collective_check.h"
#include "kernels/stream.h"

namespace stepcast::calibrate {
namespace {

// The NCCL entry points used (nccl.h gives the types; the library is dlopen'ed).
struct NcclApi {
  ncclResult_t (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  std::string error;
};

const NcclApi& Api() {
  static const NcclApi* api = [] {
    auto* a = new NcclApi();
    const char* env = std::getenv("STEPCAST_NCCL_LIBRARY");
    const std::string name = env ? env : "libnccl.so.2";
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      a->error = absl::StrCat("cannot load NCCL (", name, "): ", dlerror(),
                              "; install NCCL or set STEPCAST_NCCL_LIBRARY, or pass --skip-collectives");
      return a;
    }
    auto sym = [&](const char* n, auto* f) { *f = reinterpret_cast<std::decay_t<decltype(*f)>>(dlsym(lib, n)); };
    sym("ncclGetVersion", &a->GetVersion);
    sym("ncclGetErrorString", &a->GetErrorString);
    sym("ncclGetUniqueId", &a->GetUniqueId);
    sym("ncclCommInitAll", &a->CommInitAll);
    sym("ncclCommInitRank", &a->CommInitRank);
    sym("ncclCommInitRankConfig", &a->CommInitRankConfig);
    sym("ncclCommGetAsyncError", &a->CommGetAsyncError);
    sym("ncclCommAbort", &a->CommAbort);
    sym("ncclCommDestroy", &a->CommDestroy);
    sym("ncclAllReduce", &a->AllReduce);
    sym("ncclAllGather", &a->AllGather);
    sym("ncclReduceScatter", &a->ReduceScatter);
    sym("ncclSend", &a->Send);
    sym("ncclRecv", &a->Recv);
    sym("ncclGroupStart", &a->GroupStart);
    sym("ncclGroupEnd", &a->GroupEnd);
    if (!a->GetVersion || !a->GetUniqueId || !a->CommInitAll || !a->CommInitRank || !a->CommGetAsyncError ||
        !a->CommAbort || !a->CommDestroy || !a->AllReduce || !a->AllGather || !a->ReduceScatter || !a->Send ||
        !a->Recv || !a->GroupStart || !a->GroupEnd) {
      a->error = absl::StrCat(name, " lacks an NCCL 2.7+ entry point");
    }
    return a;
  }();
  return *api;
}

absl::Status Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", Api().GetErrorString ? Api().GetErrorString(r) : "NCCL error"));
}

absl::Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// One GPU's share: its communicator, stream, buffers, events.
struct Slot {
  int device = 0;
  int rank = 0;  // in the communicator
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

class NcclBackend final : public CollectiveBackend {
 public:
  NcclBackend(std::vector<Slot> slots, int ranks, Communicator* comm, Scope scope, int ranks_per_node, double max_bytes,
              double timeout_s, bool nonblocking)
      : slots_(std::move(slots)),
        ranks_(ranks),
        comm_(comm),
        scope_(scope),
        ranks_per_node_(ranks_per_node),
        max_bytes_(max_bytes),
        timeout_s_(timeout_s),
        nonblocking_(nonblocking) {
    // Checked (gpu code review 2, N14): without the flag there is no gate; TimeBatches says so.
    gate_alloc_ = cudaHostAlloc(reinterpret_cast<void**>(&gate_), 2 * sizeof(int),
                                cudaHostAllocMapped | cudaHostAllocPortable);
    if (gate_alloc_ != cudaSuccess) gate_ = nullptr;
  }
  ~NcclBackend() override {
    for (auto& s : slots_) {
      cudaSetDevice(s.device);
      if (s.comm) (aborted_ ? Api().CommAbort : Api().CommDestroy)(s.comm);
      cudaFree(s.send);
      cudaFree(s.recv);
      cudaEventDestroy(s.start);
      cudaEventDestroy(s.stop);
      cudaStreamDestroy(s.stream);
    }
    if (gate_) cudaFreeHost(gate_);
  }
  std::string name() const override { return comm_ ? "nccl-rank" : "nccl-local"; }
  int ranks() const override { return ranks_; }
  int local_gpus() const override { return static_cast<int>(slots_.size()); }
  Scope scope() const override { return scope_; }
  int ranks_per_node() const override { return ranks_per_node_; }
  double max_bytes() const override { return max_bytes_; }
  void Abort() override {
    if (aborted_) return;
    aborted_ = true;
    for (auto& s : slots_) {
      if (s.comm) Api().CommAbort(s.comm);
      s.comm = nullptr;
    }
  }

  absl::Status Check(Collective c, double size_bytes, int salt) override {
    const size_t count = static_cast<size_t>(size_bytes / 4);
    const size_t rc = ReceiveCount(c, ranks_, count);
    for (Slot& s : slots_) {
      cudaSetDevice(s.device);
      if (absl::Status st = Cuda(kernels::LaunchFillPattern(s.send, SendCount(c, ranks_, count), s.rank, salt, s.stream),
                                 "fill the send buffer");
          !st.ok()) {
        return st;  // e.g. "no kernel image": the build lacks this GPU's architecture
      }
      if (absl::Status st = Cuda(cudaMemsetAsync(s.recv, 0xFF, rc * sizeof(float), s.stream), "poison"); !st.ok()) return st;
    }
    if (absl::Status st = Enqueue(c, count); !st.ok()) return st;
    if (absl::Status st = WaitStreams(); !st.ok()) return st;
    const size_t stride = CheckStride(rc);
    const std::vector<size_t> idx = CheckIndices(rc);
    for (Slot& s : slots_) {
      cudaSetDevice(s.device);
      std::vector<float> got(idx.size());
      const size_t strided = (rc + stride - 1) / stride;
      if (absl::Status st = Cuda(cudaMemcpy2D(got.data(), sizeof(float), s.recv, stride * sizeof(float), sizeof(float),
                                              strided, cudaMemcpyDeviceToHost),
                                 "copy the check sample");
          !st.ok()) {
        return st;
      }
      if (idx.size() > strided) {
        if (absl::Status st = Cuda(cudaMemcpy(&got.back(), s.recv + rc - 1, sizeof(float), cudaMemcpyDeviceToHost), "copy");
            !st.ok()) {
          return st;
        }
      }
      char bus[32] = {0};
      cudaDeviceGetPCIBusId(bus, sizeof(bus), s.device);
      if (absl::Status st = CheckReceived(c, ranks_, s.rank, salt, count, idx, got,
                                          absl::StrCat("GPU ", s.device, " (", bus, ", rank ", s.rank, ")"));
          !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::vector<double>>> TimeBatches(Collective c, double size_bytes, int warmup, int iters,
                                                               int batches) override {
    const size_t count = static_cast<size_t>(size_bytes / 4);
    for (int i = 0; i < warmup; ++i) {
      if (absl::Status st = Enqueue(c, count); !st.ok()) return st;
    }
    if (absl::Status st = WaitStreams(); !st.ok()) return st;
    std::vector<std::vector<double>> out(slots_.size());
    for (int b = 0; b < batches; ++b) {
      if (comm_) {
        if (absl::Status st = comm_->Barrier(); !st.ok()) return st;
      }
      if (gate_ == nullptr) {
        return absl::InternalError(absl::StrCat("cudaHostAlloc of the gate flag (2 ints, mapped, portable): ",
                                                cudaGetErrorString(gate_alloc_)));
      }
      volatile int* open = gate_;
      open[0] = 0;
      open[1] = 0;
      __sync_synchronize();
      for (Slot& s : slots_) {
        cudaSetDevice(s.device);
        int* dev = nullptr;
        if (absl::Status st = Cuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), gate_, 0),
                                   "cudaHostGetDevicePointer of the gate flag");
            !st.ok()) {
          open[0] = 1;
          return st;
        }
        if (absl::Status st = Cuda(kernels::LaunchGate(dev, dev + 1, static_cast<uint64_t>(kGateTimeoutS * 1e9), s.stream),
                                   "gate kernel");
            !st.ok()) {
          open[0] = 1;
          return st;
        }
        cudaEventRecord(s.start, s.stream);
      }
      absl::Status enq;
      for (int i = 0; i < iters && enq.ok(); ++i) enq = Enqueue(c, count);
      for (Slot& s : slots_) {
        cudaSetDevice(s.device);
        cudaEventRecord(s.stop, s.stream);
      }
      __sync_synchronize();
      open[0] = 1;  // release every stream at once
      __sync_synchronize();
      if (!enq.ok()) return enq;
      if (absl::Status st = WaitEvents(); !st.ok()) return st;
      if (open[1] != 0) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "enqueueing %d collectives took over %.0f s (the gate opened on its own): the host is stalled", iters,
            kGateTimeoutS));
      }
      for (size_t i = 0; i < slots_.size(); ++i) {
        float ms = 0;
        cudaEventElapsedTime(&ms, slots_[i].start, slots_[i].stop);
        out[i].push_back(ms * 1e-3 / iters);
      }
    }
    return out;
  }

 private:
  static constexpr double kGateTimeoutS = 10;

  // One collective on every local GPU (a group).
  absl::Status Enqueue(Collective c, size_t count) {
    const NcclApi& api = Api();
    const int n = ranks_;
    if (absl::Status st = Nccl(api.GroupStart(), "ncclGroupStart"); !st.ok()) return st;
    ncclResult_t r = ncclSuccess;
    for (Slot& s : slots_) {
      cudaSetDevice(s.device);
      const size_t chunk = count / n;
      switch (c) {
        case Collective::kAllReduce: r = api.AllReduce(s.send, s.recv, count, ncclFloat, ncclSum, s.comm, s.stream); break;
        case Collective::kAllGather: r = api.AllGather(s.send, s.recv, chunk, ncclFloat, s.comm, s.stream); break;
        case Collective::kReduceScatter:
          r = api.ReduceScatter(s.send, s.recv, chunk, ncclFloat, ncclSum, s.comm, s.stream);
          break;
        case Collective::kAllToAll:  // chunks are 16-byte multiples (SweepSizes)
          for (int p = 0; p < n && (r == ncclSuccess || r == ncclInProgress); ++p) {
            r = api.Send(s.send + p * chunk, chunk, ncclFloat, p, s.comm, s.stream);
            if (r == ncclSuccess || r == ncclInProgress) r = api.Recv(s.recv + p * chunk, chunk, ncclFloat, p, s.comm, s.stream);
          }
          break;
        case Collective::kSendRecv:
          r = api.Send(s.send, count, ncclFloat, (s.rank + 1) % n, s.comm, s.stream);
          if (r == ncclSuccess || r == ncclInProgress) r = api.Recv(s.recv, count, ncclFloat, (s.rank + n - 1) % n, s.comm, s.stream);
          break;
      }
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
    const ncclResult_t end = api.GroupEnd();
    if (absl::Status st = Nccl(r, CollectiveName(c)); !st.ok()) return st;
    if (absl::Status st = Nccl(end, "ncclGroupEnd"); !st.ok()) return st;
    return nonblocking_ ? Settle() : absl::OkStatus();
  }

  // Non-blocking communicators: wait until the group's host-side work is done.
  absl::Status Settle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (Slot& s : slots_) {
      for (;;) {
        ncclResult_t state = ncclSuccess;
        Api().CommGetAsyncError(s.comm, &state);
        if (state == ncclSuccess) break;
        if (state != ncclInProgress) return Failed(state);
        if (std::chrono::steady_clock::now() > deadline) return TimedOut();
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    return absl::OkStatus();
  }

  absl::Status WaitStreams() {
    for (Slot& s : slots_) {
      cudaSetDevice(s.device);
      cudaEventRecord(s.stop, s.stream);
    }
    return WaitEvents();
  }

  // Polls every stop event and the communicators' async errors until done or the timeout.
  absl::Status WaitEvents() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      bool all = true;
      for (Slot& s : slots_) {
        cudaSetDevice(s.device);
        const cudaError_t e = cudaEventQuery(s.stop);
        if (e == cudaErrorNotReady) {
          all = false;
        } else if (e != cudaSuccess) {
          return Cuda(e, "collective");
        }
        ncclResult_t state = ncclSuccess;
        Api().CommGetAsyncError(s.comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) return Failed(state);
      }
      if (all) return absl::OkStatus();
      if (std::chrono::steady_clock::now() > deadline) return TimedOut();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  absl::Status Failed(ncclResult_t state) {
    Abort();
    return absl::InternalError(absl::StrCat("NCCL asynchronous error: ", Api().GetErrorString(state)));
  }
  absl::Status TimedOut() {
    Abort();
    return absl::DeadlineExceededError(
        absl::StrFormat("no completion within %.0f s (--timeout-s): a peer died or a link failed", timeout_s_));
  }

  std::vector<Slot> slots_;
  int ranks_;
  Communicator* comm_;
  Scope scope_;
  int ranks_per_node_;
  double max_bytes_, timeout_s_;
  bool nonblocking_;
  bool aborted_ = false;
  int* gate_ = nullptr;
  cudaError_t gate_alloc_ = cudaSuccess;
};

absl::Status MakeSlot(Slot& s, double max_bytes) {
  cudaSetDevice(s.device);
  const size_t bytes = static_cast<size_t>(max_bytes) + 4096;
  if (cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(&s.send, bytes) != cudaSuccess || cudaMalloc(&s.recv, bytes) != cudaSuccess ||
      cudaEventCreate(&s.start) != cudaSuccess ||
      cudaEventCreate(&s.stop) != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrCat("GPU ", s.device, ": cannot allocate ", bytes, " bytes x 2"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string NcclVersion() {
  const NcclApi& a = Api();
  if (!a.error.empty() && a.GetVersion == nullptr) return "not loaded: " + a.error;
  int v = 0;
  a.GetVersion(&v);
  return absl::StrCat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclLocalBackend(const std::vector<int>& gpus, double max_bytes,
                                                                        double timeout_s) {
  if (!Api().error.empty()) return absl::FailedPreconditionError(Api().error);
  if (gpus.size() < 2) return absl::FailedPreconditionError("intra-node collectives need at least 2 GPUs");
  std::vector<Slot> slots(gpus.size());
  std::vector<ncclComm_t> comms(gpus.size());
  if (absl::Status s = Nccl(Api().CommInitAll(comms.data(), static_cast<int>(gpus.size()), gpus.data()), "ncclCommInitAll");
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    slots[i].device = gpus[i];
    slots[i].rank = static_cast<int>(i);
    slots[i].comm = comms[i];
    if (absl::Status s = MakeSlot(slots[i], max_bytes); !s.ok()) return s;
  }
  return std::unique_ptr<CollectiveBackend>(new NcclBackend(std::move(slots), static_cast<int>(gpus.size()), nullptr,
                                                            Scope::kIntraNode, 0, max_bytes, timeout_s, false));
}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclRankBackend(int local_gpu, Communicator& comm, double max_bytes,
                                                                       double timeout_s) {
  absl::Status loaded = Api().error.empty() ? absl::OkStatus() : absl::FailedPreconditionError(Api().error);
  if (absl::Status agreed = AgreeOnStatus(comm, loaded); !agreed.ok()) return agreed;
  ncclUniqueId id;
  std::string bytes;
  absl::Status got;
  if (comm.rank() == 0) {
    got = Nccl(Api().GetUniqueId(&id), "ncclGetUniqueId");
    bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  if (absl::Status agreed = AgreeOnStatus(comm, got); !agreed.ok()) return agreed;
  if (absl::Status s = comm.Broadcast(bytes, 0); !s.ok()) return s;
  std::memcpy(&id, bytes.data(), sizeof(id));
  std::vector<Slot> slots(1);
  slots[0].device = local_gpu;
  slots[0].rank = comm.rank();
  cudaSetDevice(local_gpu);
  // Non-blocking initialisation (NCCL 2.14+): polled against the timeout, so a rank that never
  // joins makes the others fail in time instead of waiting forever.
  bool nonblocking = false;
  absl::Status init;
  if (Api().CommInitRankConfig != nullptr) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = Api().CommInitRankConfig(&slots[0].comm, comm.size(), id, comm.rank(), &config);
    nonblocking = r == ncclSuccess || r == ncclInProgress;
    if (nonblocking) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
      for (;;) {
        ncclResult_t state = ncclSuccess;
        Api().CommGetAsyncError(slots[0].comm, &state);
        if (state == ncclSuccess) break;
        if (state != ncclInProgress) {
          init = Nccl(state, "ncclCommInitRankConfig");
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          init = absl::DeadlineExceededError("ncclCommInitRankConfig: the other ranks did not join in time");
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!init.ok()) Api().CommAbort(slots[0].comm), slots[0].comm = nullptr;
    }
  }
  if (!nonblocking) init = Nccl(Api().CommInitRank(&slots[0].comm, comm.size(), id, comm.rank()), "ncclCommInitRank");
  if (init.ok()) init = MakeSlot(slots[0], max_bytes);
  if (absl::Status agreed = AgreeOnStatus(comm, init); !agreed.ok()) {
    if (slots[0].comm) Api().CommAbort(slots[0].comm), slots[0].comm = nullptr;
    return agreed;
  }
  const Scope scope = comm.hosts() > 1 ? Scope::kInterNode : Scope::kIntraNode;
  return std::unique_ptr<CollectiveBackend>(new NcclBackend(std::move(slots), comm.size(), &comm, scope,
                                                            comm.hosts() > 1 ? comm.local_size() : 0, max_bytes,
                                                            timeout_s, nonblocking));
}

}  // namespace stepcast::calibrate
