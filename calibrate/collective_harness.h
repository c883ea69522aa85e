// File: calibrate/collective_harness.h
//
// The collective sweep, independent of the transport (plain C++, tested on CPU):
//   * sizes as nccl-tests counts them, min to max by factors of 2, each rounded so that every rank
//     gets whole, 16-byte aligned chunks where the collective splits the buffer (nccl-tests
//     alltoall.cu rounds per-rank counts the same way);
//   * per size: one checked run (the backend fills a pattern that depends on the size, poisons
//     the receive buffer and checks a strided sample of all of it: calibrate/collective_check.h),
//     then warm-up, then `batches` batches of `iters` back-to-back collectives timed between two
//     events behind a gate (nvbandwidth's spin kernel; nccl-tests times back-to-back runs with a
//     host timer), so the host's enqueue time is not in the figure;
//   * across ranks: each batch's time per collective averaged over every GPU (nccl-tests' -a 1,
//     the profile's figure) and the slowest GPU's kept beside it;
//   * errors agreed: after every size all ranks learn whether any failed (AgreeOnStatus), so a
//     failing rank never leaves the others waiting; the backend is then aborted (ncclCommAbort).
// Backends: NCCL (calibrate/nccl_backend.cc: one process driving every local GPU, or one rank per
// GPU), MPI's own collectives in host memory (calibrate/mpi_backend.cc, `mpirun -np 2` on a CPU),
// and the fakes of the tests.
#ifndef STEPCAST_CALIBRATE_COLLECTIVE_HARNESS_H_
#define STEPCAST_CALIBRATE_COLLECTIVE_HARNESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/communicator.h"
#include "calibrate/fits.h"
#include "core/hardware.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string name() const = 0;
  // Ranks of the collective (every GPU of the communicator) and this process's share of them.
  virtual int ranks() const = 0;
  virtual int local_gpus() const = 0;
  virtual Scope scope() const = 0;
  // Ranks per node (for an inter-node scope), 0 when not known.
  virtual int ranks_per_node() const { return 0; }
  // Largest size the buffers hold.
  virtual double max_bytes() const = 0;
  // One run of `c` at `size_bytes` on a fresh pattern (salt: the size's index) into a poisoned
  // receive buffer, then a check of a strided sample of every element (DataLoss naming the GPU,
  // the element, the value and the expected value).
  virtual absl::Status Check(Collective c, double size_bytes, int salt) = 0;
  // `warmup` untimed runs, then `batches` batches of `iters` back-to-back runs, each batch timed
  // between two events behind a gate. Returns [local GPU][batch] seconds per collective.
  // DeadlineExceeded when a batch does not finish within the backend's timeout.
  virtual absl::StatusOr<std::vector<std::vector<double>>> TimeBatches(Collective c, double size_bytes, int warmup,
                                                                       int iters, int batches) = 0;
  // Ends the collectives so that no rank waits for them any more (ncclCommAbort); the backend
  // is unusable afterwards.
  virtual void Abort() {}
};

// A test hook (--inject-failure): on `rank`, from `size_bytes` on, the check of the collective
// fails (as a wrong element found by that rank would) or the rank stops answering before it
// (`hang`: a sleep that only the job's timeout ends).
struct CollectiveInjection {
  int rank = -1;
  bool hang = false;
  double size_bytes = 0;
};

struct SweepOptions {
  double min_bytes = 8;
  double max_bytes = 4.0 * (1ull << 30);
  int warmup = 5;
  int iters = 20;    // per batch (nccl-tests' -n default)
  int batches = 5;
  std::vector<Collective> collectives = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                         Collective::kAllToAll, Collective::kSendRecv};
  CollectiveInjection inject;
  std::function<void(const std::string&)> progress;  // called on rank 0
  std::function<void()> heartbeat;                    // called after every size (the watchdog)
};

// Sizes of `c` min..max by factors of 2, each rounded up to a multiple of the collective's unit:
// 4 bytes (one float) for all-reduce and send/recv, 4 x ranks for all-gather and reduce-scatter,
// 16 x ranks for all-to-all (16-byte chunks).
std::vector<double> SweepSizes(Collective c, double min_bytes, double max_bytes, int ranks);

struct SweepResult {
  std::vector<v1::CollectiveSample> samples;  // every size measured before a failure
  absl::Status status;                        // agreed across ranks
};
SweepResult Sweep(CollectiveBackend& backend, Communicator& comm, const SweepOptions& options);

// Fits per (collective, scope, ranks) and the profile entries: every measured point (the rank
// average; the model interpolates them), alpha from the floor, busbw of the largest size.
struct SweepFits {
  std::vector<v1::CollectiveFit> fits;
  std::vector<CollectiveRate> rates;
};
SweepFits FitSweep(const std::vector<v1::CollectiveSample>& samples, int ranks_per_node);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_COLLECTIVE_HARNESS_H_
