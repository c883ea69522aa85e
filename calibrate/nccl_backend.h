// File: calibrate/nccl_backend.h
//
// CollectiveBackends over NCCL on GPUs:
//   * local: one process drives every local GPU (ncclCommInitAll, grouped calls) — the
//     intra-node sweep;
//   * MPI-bootstrapped: one rank per GPU (launched by mpirun or srun; the unique id goes out with
//     MPI_Bcast) — across nodes when the ranks span several hosts.
// Per-iteration CUDA events on every GPU, the iteration's time the slowest GPU's (and, across
// ranks, the slowest rank's). Buffers are float; results of the first run are checked.
#ifndef STEPCAST_CALIBRATE_NCCL_BACKEND_H_
#define STEPCAST_CALIBRATE_NCCL_BACKEND_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/collective_harness.h"

namespace stepcast::calibrate {

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclLocalBackend(const std::vector<int>& gpus, double max_bytes);
// MPI must be initialised; `local_gpu` is this rank's device.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeNcclMpiBackend(int local_gpu, double max_bytes);
std::string NcclVersion();

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_NCCL_BACKEND_H_
