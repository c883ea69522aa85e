// File: calibrate/flow.h
//
// `stepcast-calibrate` (measure): the whole run, over a GpuSystem and a Communicator, so that its
// flow is the same on GPUs and in the CPU tests' fakes.
//  1. GPUs: every visible one (or --gpus), or one per rank under --mpi (the rank's index on its
//     host); each named by host, rank, CUDA index, PCI bus id and UUID.
//  2. Conditions: versions, NVML identity and power limit; NVML sampled every 0.2 s while the
//     parts run (clocks, power, temperature, throttle reasons) and stored with every sample.
//  3. A sustained warm-up (30 s, --quick 5 s) on every GPU at once.
//  4. GEMM sweep (calibrate/gemm_shapes.h) on every local GPU at once, one thread per GPU; then a
//     CUPTI cross-check pass on a few GEMMs and the HBM copy (CUPTI off during timing).
//  5. HBM kernels on every GPU at once; then the contention sweep (bf16 GEMMs alone and beside a
//     communication-shaped kernel, ContentionPlan) on every GPU at once.
//  6. Under --mpi every rank's GEMM and HBM samples are gathered to rank 0, which finds the
//     stragglers among all GPUs and writes the profile from the slowest GPU per shape.
//  7. Collectives (calibrate/collective_harness.h): NCCL over the local GPUs or one GPU per rank;
//     or MPI's own in host memory (--backend mpi), whose rates stay in the run and never enter the
//     profile's GPU collectives.
//  8. The profile and the run are written after every part (rank 0), so a later failure or a
//     killed job keeps what was measured.
// Exit codes (every rank returns the same): 0 done; 1 bad options; 2 no GPU / no driver / a build
// without CUDA; 3 a requested part measured nothing (what was measured is written); 4 a
// measurement failed (wrong results, an NCCL error, a timeout; written up to the failure);
// 5 the profile or run could not be written; 6 a rank stopped answering (the job is aborted).
#ifndef STEPCAST_CALIBRATE_FLOW_H_
#define STEPCAST_CALIBRATE_FLOW_H_

#include <string>

#include "calibrate/communicator.h"
#include "calibrate/gpu_system.h"
#include "proto/catalog.h"

namespace stepcast::calibrate {

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 1,
  kExitNoGpu = 2,
  kExitNothingMeasured = 3,
  kExitFailed = 4,
  kExitWriteFailed = 5,
  kExitTimeout = 6,
};

struct MeasureOptions {
  std::string out = "stepcast-profile.json";
  std::string run_out;  // default <out>.run.json
  std::string name;     // default: the host
  std::string hardware;  // default: from the GPU name
  std::string gpus;      // "0,2"; default every visible GPU
  std::string backend = "nccl";  // or "mpi" (host memory)
  bool quick = false;
  bool mpi = false;
  bool skip_gemm = false, skip_hbm = false, skip_collectives = false, skip_contention = false;
  bool skip_host = false;  // the host-call pass (--skip-gemm skips it too)
  double max_collective_bytes = 0;  // 0: 4 GiB, --quick 256 MiB
  double warmup_s = -1;             // < 0: 30 s, --quick 5 s
  // A collective not done after timeout_s is aborted (ncclCommAbort; exit 4 on every rank); MPI
  // calls wait 2 x timeout_s for the other ranks, and a rank with no progress for 3 x timeout_s
  // ends the whole job (MPI_Abort, exit 6): a dead or hung rank never hangs the others.
  double timeout_s = 600;
  std::string inject;               // test hook "RANK:WHAT[:SIZE]", WHAT = collective|hang|gemm|hbm|contention|list
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string command_line;
  std::string cuda_architectures;
};

// Runs the measurement; progress and errors on stderr (rank 0, errors on every rank), the
// summary on stdout (rank 0). Returns the exit code (agreed across ranks).
int RunMeasure(const MeasureOptions& options, GpuSystem& gpus, Communicator& comm, const Catalog& catalog);

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_FLOW_H_
