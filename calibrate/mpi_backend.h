// File: calibrate/mpi_backend.h
//
// A CollectiveBackend over MPI's own collectives in host memory: the multi-rank harness without
// GPUs (tested with `mpirun -np 2` on a CPU) and a transport baseline on a cluster. Its rates are
// host-memory rates: the tool keeps them in the run, never in a profile's GPU collectives. Timing:
// a barrier, then `iters` back-to-back collectives between two MPI_Wtime reads (nccl-tests'
// method; the host is the device here). Built into the MPI module (calibrate/mpi_module.cc).
#ifndef STEPCAST_CALIBRATE_MPI_BACKEND_H_
#define STEPCAST_CALIBRATE_MPI_BACKEND_H_

#include <memory>

#include "calibrate/collective_harness.h"

namespace stepcast::calibrate {

// MPI must be initialised. Buffers of max_bytes per rank (host memory).
std::unique_ptr<CollectiveBackend> MakeMpiBackend(double max_bytes, Scope scope);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_MPI_BACKEND_H_
