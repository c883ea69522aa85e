// File: calibrate/communicator.h
//
// What stepcast-calibrate needs from its ranks, behind a narrow interface so that the flow runs
// the same in one process and under mpirun / srun, and is tested on a CPU:
//   * SingleProcessCommunicator: one rank (no MPI);
//   * the MPI communicator of calibrate/mpi_module.cc, built as libstepcast_calibrate_mpi.so and
//     loaded at run time (dlopen) only when --mpi or --backend mpi asks for it, so the tool starts
//     where no MPI library is installed. Every MPI call it makes is non-blocking and polled against
//     a deadline; past it, the rank prints what it waited for and calls MPI_Abort, which ends the
//     whole job (no rank waits forever for a rank that died or hangs).
// Errors are agreed: AgreeOnStatus gives every rank the same verdict, naming the failing ranks.
#ifndef STEPCAST_CALIBRATE_COMMUNICATOR_H_
#define STEPCAST_CALIBRATE_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stepcast::calibrate {

class CollectiveBackend;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks of its host, and their number.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // Number of distinct hosts.
  virtual int hosts() const = 0;
  virtual std::string host() const = 0;
  virtual std::string name() const = 0;  // "single process", "MPI (Open MPI v4.1.4)"

  // Collective operations; each returns DeadlineExceeded (after aborting the job, for MPI) when a
  // rank does not arrive in time.
  virtual absl::Status Barrier() = 0;
  // Element-wise max / sum over the ranks, in place.
  virtual absl::Status AllreduceMax(std::vector<double>& values) = 0;
  virtual absl::Status AllreduceSum(std::vector<double>& values) = 0;
  // Every rank's bytes, in rank order, on `root` (empty elsewhere).
  virtual absl::StatusOr<std::vector<std::string>> Gather(const std::string& mine, int root) = 0;
  // root's bytes on every rank.
  virtual absl::Status Broadcast(std::string& bytes, int root) = 0;
  // Ends every rank of the job with `code` (MPI_Abort; _exit in one process). Never returns.
  [[noreturn]] virtual void Abort(int code, const std::string& why) = 0;
  // Orderly shutdown (MPI_Finalize); call only after every rank agreed on the outcome.
  virtual void Finalize() = 0;
  // Collectives over the transport itself in host memory (MPI's own), for testing the harness
  // without GPUs; Unimplemented in one process.
  virtual absl::StatusOr<std::unique_ptr<CollectiveBackend>> HostCollectives(double max_bytes) = 0;
  // The ranks of this rank's host as a communicator of their own (rank order kept): the
  // intra-node sweep of a multi-node run (gpu code review 2, N7). Every rank calls it at the same
  // point. Unimplemented where there is no transport to split (one process).
  virtual absl::StatusOr<std::unique_ptr<Communicator>> SplitByHost() {
    return absl::UnimplementedError("one process: no host communicator to split");
  }
};

std::unique_ptr<Communicator> MakeSingleProcessCommunicator();

// Loads libstepcast_calibrate_mpi.so (next to the binary: <bin>/../lib, <bin>, or the path in
// STEPCAST_CALIBRATE_MPI_MODULE), initialises MPI and returns its communicator. `timeout_s` bounds
// every MPI call. FailedPrecondition naming what is missing (the module, libmpi) otherwise.
absl::StatusOr<std::unique_ptr<Communicator>> LoadMpiCommunicator(int* argc, char*** argv, double timeout_s);

// Agrees on one verdict for every rank: OK when every rank's `mine` is OK; otherwise the same
// error on every rank, with the failing ranks' messages ("rank 1: ...; rank 3: ..."; the first
// failing rank's code). Returns the communicator's own error when it fails.
absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& mine);

// The max of an integer over the ranks (exit codes).
absl::StatusOr<int> AllreduceMaxInt(Communicator& comm, int mine);

// The C entry points of the MPI module (dlsym'd by LoadMpiCommunicator).
extern "C" {
using StepcastMpiCreateFn = Communicator* (*)(int* argc, char*** argv, double timeout_s, char* error, int error_len);
}
inline constexpr char kMpiCreateSymbol[] = "stepcast_calibrate_mpi_create";

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_COMMUNICATOR_H_
