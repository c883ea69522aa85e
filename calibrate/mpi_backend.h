// File: calibrate/mpi_backend.h
//
// A CollectiveBackend over MPI's own collectives in host memory: the multi-rank harness without
// GPUs (tested with `mpirun -np 2` on this CPU), and a transport baseline on a cluster.
#ifndef STEPCAST_CALIBRATE_MPI_BACKEND_H_
#define STEPCAST_CALIBRATE_MPI_BACKEND_H_

#include <memory>

#include "calibrate/collective_harness.h"

namespace stepcast::calibrate {

// MPI must be initialised by the caller. Buffers of max_bytes per rank (host memory).
std::unique_ptr<CollectiveBackend> MakeMpiBackend(double max_bytes, Scope scope);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_MPI_BACKEND_H_
