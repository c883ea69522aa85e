// File: calibrate/nccl_backend.h
//
// CollectiveBackends over NCCL, which is loaded at run time (dlopen of libnccl.so.2, or the path
// in STEPCAST_NCCL_LIBRARY) only when collectives are measured, so that the tool starts, and
// measures GEMM and HBM, where NCCL is not installed:
//   * local: one process drives every local GPU (ncclCommInitAll, grouped calls);
//   * per rank: one GPU per rank of a Communicator (the unique id broadcast through it;
//     ncclCommInitRankConfig non-blocking, so that a rank that never joins cannot hang the others).
// Timing (CollectiveBackend::TimeBatches): each GPU's stream is held by a gate kernel while a batch
// of back-to-back collectives is enqueued between two events, then the gate opens (nvbandwidth's
// method), so the host's enqueue time and the launch skew between GPUs are not timed. Waiting polls
// the events and ncclCommGetAsyncError against the timeout, then aborts the communicators
// (ncclCommAbort), as nccl-tests' testStreamSynchronize does (src/common.cu). Buffers are fp32
// (nccl-tests' default type).
#ifndef STEPCAST_CALIBRATE_NCCL_BACKEND_H_
#define STEPCAST_CALIBRATE_NCCL_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/collective_harness.h"
#include "calibrate/communicator.h"

namespace stepcast::calibrate {

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclLocalBackend(const std::vector<int>& gpus, double max_bytes,
                                                                        double timeout_s);
absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclRankBackend(int local_gpu, Communicator& comm,
                                                                       double max_bytes, double timeout_s);
// "2.27.3", or why NCCL cannot be loaded.
std::string NcclVersion();

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_NCCL_BACKEND_H_
