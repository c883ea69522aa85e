// File: calibrate/collective_harness.h
//
// The collective sweep, independent of the transport: nccl-tests' sizes (min to max by factors
// of 2), warm-up, per-iteration times (each the slowest rank's), algbw/busbw as nccl-tests
// defines them, results verified on the first run, then the piecewise alpha-beta fit per
// collective. Backends: NCCL on GPUs (calibrate/nccl_backend.cc) and MPI's own collectives in
// host memory (calibrate/mpi_backend.cc), which lets the multi-rank harness be tested on a CPU
// with `mpirun -np 2`.
#ifndef STEPCAST_CALIBRATE_COLLECTIVE_HARNESS_H_
#define STEPCAST_CALIBRATE_COLLECTIVE_HARNESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calibrate/fits.h"
#include "core/hardware.h"
#include "stepcast/v1/calibration.pb.h"

namespace stepcast::calibrate {

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  virtual Scope scope() const = 0;
  // Largest size the backend's buffers hold.
  virtual double max_bytes() const = 0;
  // `warmup` untimed then `iters` timed runs of `c` moving `size_bytes` (nccl-tests' S); one
  // time per timed run in seconds, each the maximum over the ranks. The first run's result is
  // checked (DataLoss on a wrong value).
  virtual absl::StatusOr<std::vector<double>> Time(Collective c, double size_bytes, int warmup, int iters) = 0;
};

struct SweepOptions {
  double min_bytes = 8;
  double max_bytes = 4.0 * (1ull << 30);
  int warmup = 5;
  int iters = 20;
  std::vector<Collective> collectives = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                         Collective::kAllToAll, Collective::kSendRecv};
  std::function<void(const std::string&)> progress;  // called on rank 0
};

// Sizes min..max by factors of 2 (each rounded up to what every rank can split evenly).
std::vector<double> SweepSizes(double min_bytes, double max_bytes, int ranks);

absl::StatusOr<std::vector<v1::CollectiveSample>> Sweep(CollectiveBackend& backend, const SweepOptions& options);

// Fits per (collective, scope, ranks) and the profile entries: alpha from the floor, busbw of
// the largest sizes, and every measured point (the model interpolates them at this group size).
struct SweepFits {
  std::vector<v1::CollectiveFit> fits;
  std::vector<v1::CollectiveRate> rates;
};
SweepFits FitSweep(const std::vector<v1::CollectiveSample>& samples);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_COLLECTIVE_HARNESS_H_
