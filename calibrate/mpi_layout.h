// File: calibrate/mpi_layout.h
//
// Plain functions of the MPI module (calibrate/mpi_module.cc) that need no MPI, so the CPU tests
// check them: the ranks' layout over hosts from their processor names, and whether a thread may
// call MPI_Abort at the thread level the library provides. Header-only: the module compiles no
// other stepcast code (it must not register the protobuf descriptors a second time).
#ifndef STEPCAST_CALIBRATE_MPI_LAYOUT_H_
#define STEPCAST_CALIBRATE_MPI_LAYOUT_H_

#include <map>
#include <string>
#include <vector>

namespace stepcast::calibrate {

struct HostLayout {
  int local_rank = 0;  // this rank's index among the ranks of its host, in rank order
  int local_size = 1;  // ranks on its host
  int hosts = 1;       // distinct hosts
};

// `hosts[r]` is rank r's processor name (MPI_Get_processor_name). The same grouping as
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) with key = rank where one name is one shared-memory
// node (Open MPI and MPICH name the node).
inline HostLayout LayoutOfHosts(const std::vector<std::string>& hosts, int rank) {
  HostLayout out;
  std::map<std::string, int> count;
  for (const auto& h : hosts) ++count[h];
  out.hosts = static_cast<int>(count.size());
  if (rank < 0 || rank >= static_cast<int>(hosts.size())) return out;
  out.local_size = count[hosts[rank]];
  out.local_rank = 0;
  for (int r = 0; r < rank; ++r) out.local_rank += hosts[r] == hosts[rank];
  return out;
}

// MPI thread levels (MPI_THREAD_SINGLE 0 < FUNNELED 1 < SERIALIZED 2 < MULTIPLE 3 in Open MPI and
// MPICH's mpi.h; the standard requires only the order).
inline const char* MpiThreadLevelName(int level) {
  switch (level) {
    case 0: return "MPI_THREAD_SINGLE";
    case 1: return "MPI_THREAD_FUNNELED";
    case 2: return "MPI_THREAD_SERIALIZED";
    case 3: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// Whether the calling thread may call MPI_Abort: always on the main thread (it made every other
// MPI call), from another thread (the watchdog) only at MPI_THREAD_MULTIPLE (level 3), where
// MPI calls of concurrent threads are allowed (MPI 4.0 section 11.6).
inline bool MpiAbortAllowed(int provided_level, bool on_main_thread) {
  return on_main_thread || provided_level >= 3;
}

}  // namespace stepcast::calibrate

#endif  // STEPCAST_CALIBRATE_MPI_LAYOUT_H_
